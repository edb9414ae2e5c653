//! The launch layer's table of a backend's inherited descriptors
//! (`crates/bridge-launch`), for the TypeScript spawners: they read every
//! descriptor number from here, never from a literal of their own.

use napi_derive::napi;

/// One named channel a backend inherits.
#[napi(object)]
pub struct LaunchChannel {
    /// `stdin`, `stdout`, `stderr`, `control` or `host`.
    pub name: String,
    /// Its descriptor number in the backend (for `control`: in its supervisor).
    pub fd: i32,
    /// Every start has it (`false`: only a start that declares it).
    pub always: bool,
}

/// The table, and the variable that names the host channel's number.
#[napi(object)]
pub struct ChannelLayout {
    pub channels: Vec<LaunchChannel>,
    pub host_channel_env: String,
}

#[napi(catch_unwind)]
pub fn channel_layout() -> ChannelLayout {
    ChannelLayout {
        channels: bridge_launch::LAYOUT
            .iter()
            .map(|channel| LaunchChannel {
                name: channel.name.to_owned(),
                fd: channel.fd,
                always: channel.always,
            })
            .collect(),
        host_channel_env: bridge_launch::HOST_CHANNEL_ENV.to_owned(),
    }
}

/// What `findSupervisor` found (`crates/bridge-launch`'s `supervisor::Lookup`).
#[napi(object)]
pub struct SupervisorLookup {
    /// `found`, `declined` (an empty override), `absent` or `missing`.
    pub kind: String,
    /// The supervisor (`found`), or where it should be (`missing`).
    pub path: Option<String>,
    /// For `missing`: `ENOENT` (nothing there) or `EACCES` (not executable).
    pub code: Option<String>,
    /// For `missing`: the user named the path (else the host expected it there).
    pub named: bool,
}

/// The supervisor lookup's rules, applied to the places the TypeScript host
/// knows (`lib/spawn/supervisor.ts`), so that they are the bridge's rules
/// too: `named` replaces the candidates (empty: none), the first executable
/// candidate wins, an `expected` one that is not there is reported.
#[napi(catch_unwind)]
pub fn find_supervisor(
    named: Option<String>,
    candidates: Vec<String>,
    expected: Option<String>,
) -> SupervisorLookup {
    use bridge_launch::supervisor::{find, Lookup, Search};
    let candidates: Vec<std::path::PathBuf> = candidates.into_iter().map(Into::into).collect();
    let expected = expected.map(std::path::PathBuf::from);
    let lookup = find(Search {
        named: named.as_deref().map(std::ffi::OsStr::new),
        candidates: &candidates,
        expected: expected.as_deref(),
    });
    let text = |path: &std::path::Path| Some(path.to_string_lossy().into_owned());
    let (kind, path, code, named) = match &lookup {
        Lookup::Found(path) => ("found", text(path), None, false),
        Lookup::Declined => ("declined", None, None, false),
        Lookup::Absent => ("absent", None, None, false),
        Lookup::Missing(missing) => (
            "missing",
            text(&missing.path),
            Some(missing.kind.code().to_owned()),
            missing.named,
        ),
    };
    SupervisorLookup {
        kind: kind.to_owned(),
        path,
        code,
        named,
    }
}
