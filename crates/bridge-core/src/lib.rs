//! The AgentLane process-bridge host core, in pure Rust.
//!
//! A host runs an AgentLane agent in a Python child process and talks to it
//! over NDJSON (see docs/protocol.md). This crate
//! holds everything about that conversation that does not depend on
//! JavaScript: strict event validation with the reference host's exact
//! errors ([`validate_event_line`], [`DecodeError`]; it remembers the shapes
//! of recently accepted lines, so that a stream's repeated shapes are judged
//! cheaply), command encoding ([`command`]), framing and off-thread reading
//! of a backend's output ([`framer`], [`reader`]), cutting large values out
//! of large lines for hosts that parse on a busy thread ([`lift`]), and
//! protocol constants. The Node.js addon is a thin binding over it; a Rust
//! program can use it directly.

pub mod json;
pub mod schema;

pub mod batch;
pub mod command;
mod decode;
mod error;
pub mod framer;
pub mod lift;
mod memo;
pub mod reader;
pub mod session;
mod validate;
mod version;

pub use decode::{validate_event, validate_event_line, validate_event_text};
pub use error::{DecodeError, DecodeErrorKind};
pub use schema::EventType;
pub use version::{is_supported_protocol_version, PROTOCOL_MAJOR, PROTOCOL_VERSION};
