//! The named channels of a backend and their descriptor numbers.
//!
//! Why a table and not positions: the layout used to be written out by
//! position in eight places across three languages, and a mismatch failed
//! silently (a fifth descriptor dropped, the count still right). Adding a
//! channel is one entry here.

/// One descriptor a backend's process inherits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channel {
    /// Its name in every language (`stdin`, …, `host`).
    pub name: &'static str,
    /// Its number in the backend (for `control`: in the backend's supervisor).
    pub fd: i32,
    /// Whether every start has it (`false`: only a start that declares it).
    pub always: bool,
}

pub const STDIN: Channel = Channel { name: "stdin", fd: 0, always: true };
pub const STDOUT: Channel = Channel { name: "stdout", fd: 1, always: true };
pub const STDERR: Channel = Channel { name: "stderr", fd: 2, always: true };
/// The supervisor's control socket (`crates/bridge-supervisor`): never the
/// backend's own; a supervisor takes it close-on-exec.
pub const CONTROL: Channel = Channel { name: "control", fd: 3, always: true };
/// The host channel (docs/host-channel.md): the application's tools and
/// store, when the start declares it.
pub const HOST: Channel = Channel { name: "host", fd: 4, always: false };

/// Every channel, in descriptor order: a fork request's descriptors come in
/// this order (the first [`REQUIRED`] always, then the declared ones).
pub const LAYOUT: [Channel; 5] = [STDIN, STDOUT, STDERR, CONTROL, HOST];

/// How many channels every start has (stdin, stdout, stderr, control).
pub const REQUIRED: usize = 4;

/// The variable that tells the backend where its host channel is
/// (`agentlane_host_channel` reads it; `crates/bridge-host-channel`'s
/// `FD_ENV` is held equal by a test).
pub const HOST_CHANNEL_ENV: &str = "AGENTLANE_HOST_CHANNEL_FD";

/// How many descriptors go with a fork request: the required ones, and the
/// host channel when the start declares it.
pub const fn fork_descriptors(host_channel: bool) -> usize {
    if host_channel {
        REQUIRED + 1
    } else {
        REQUIRED
    }
}

/// The table as the Python prefork server takes it in its arguments:
/// `{"channels":{"stdin":0,…},"required":4,"host_env":"…"}` (names and
/// numbers are plain ASCII: no escaping needed).
pub fn layout_json() -> String {
    let channels: Vec<String> = LAYOUT.iter().map(|c| format!("\"{}\":{}", c.name, c.fd)).collect();
    format!(
        "{{\"channels\":{{{}}},\"required\":{REQUIRED},\"host_env\":\"{HOST_CHANNEL_ENV}\"}}",
        channels.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_dense_and_in_order() {
        for (at, channel) in LAYOUT.iter().enumerate() {
            assert_eq!(channel.fd, at as i32, "{channel:?}");
            assert_eq!(channel.always, at < REQUIRED, "{channel:?}");
        }
        assert_eq!(fork_descriptors(false), 4);
        assert_eq!(fork_descriptors(true), LAYOUT.len());
    }

    #[test]
    fn the_servers_argument() {
        assert_eq!(
            layout_json(),
            r#"{"channels":{"stdin":0,"stdout":1,"stderr":2,"control":3,"host":4},"required":4,"host_env":"AGENTLANE_HOST_CHANNEL_FD"}"#
        );
    }
}
