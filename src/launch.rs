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
