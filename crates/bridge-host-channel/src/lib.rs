//! The host side of the host channel (docs/host-channel.md): the side
//! channel beside stdio over which an AgentLane backend calls the
//! application's own tools and its state store.
//!
//! Pure, like `bridge-core`: no I/O, no clock, no threads. A host reads the
//! channel's bytes itself, frames them ([`Channel::framer`]), feeds the
//! frames to a [`Channel`] and acts on its [`Output`]s. Both hosts (the Node
//! addon and `agentlane-bridge`) use this one implementation, so they judge
//! the backend's lines, validate a tool call's arguments against its JSON
//! Schema and end calls (deadline, cancel, lost channel) alike.
//!
//! Its own crate rather than a module of `bridge-core`: the JSON Schema
//! validator (`jsonschema`, with its regex engines) stays out of the core
//! that every host, the fuzz targets and the stdout path build.

mod channel;
mod decode;
mod encode;
mod error;
pub mod protocol;
mod snapshot;
mod snapshot_js;
mod snapshot_responses;
mod snapshot_text;
mod tools;

pub use channel::{
    AbortReason, AnswerRefused, CallId, Channel, ChannelOptions, Output, Request, StoreOptions,
};
pub use decode::decode_line;
pub use encode::Answer;
pub use error::{ChannelError, ChannelErrorKind};
pub use protocol::{Hello, Message, ReplyErrorKind, StoreSave, ToolCall};
pub use snapshot::{
    check_snapshot, check_snapshot_owned, CheckedSnapshot, ExpectedAgent, SnapshotErrorCode,
    SnapshotRefusal, SNAPSHOT_SCHEMA_VERSION,
};
pub use tools::{ArgumentIssues, ToolSpec, ToolSpecError, MAX_ARGUMENT_ISSUES};
