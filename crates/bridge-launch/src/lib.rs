//! How a host launches an AgentLane backend, written once for every host
//! (the Node addon, `agentlane-bridge`, the prefork server, Rust hosts).
//!
//! [`channels`] is the one table of the descriptors a backend inherits, by
//! name and number: stdin 0, stdout 1, stderr 2, the supervisor's control
//! socket 3, the host channel 4 (declared per start; its number is in the
//! environment variable [`channels::HOST_CHANNEL_ENV`]). TypeScript reads it
//! from the addon, the Python prefork server from its arguments: nothing
//! else writes these numbers down. [`place`] puts descriptors at their
//! numbers in a child between fork and exec. [`supervisor`] is how every
//! host finds `process-bridge-supervisor` (the host gives the places).

pub mod channels;
#[cfg(unix)]
pub mod place;
pub mod supervisor;

pub use channels::{Channel, HOST_CHANNEL_ENV, LAYOUT};
