//! The host side of the **prefork server**: AgentLane backends forked from
//! one warm Python process instead of each importing `agentlane` anew
//! (1–2 s of CPU and ~80 MB each), every one contained by a supervisor of
//! its own exactly as a cold backend is.
//!
//! Pure Rust (no napi, no async runtime), for every host of this
//! repository: the Node addon's binding (`src/prefork.rs`) and
//! `agentlane-bridge`. The protocol between host and server, and how the
//! work of containment is divided, are in `docs/prefork.md`.
//!
//! ```no_run
//! use std::io::{BufRead, BufReader};
//! use std::time::Duration;
//! use bridge_prefork::{PreforkServer, ServerSpec};
//!
//! let args = ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"].map(String::from);
//! let mut spec = ServerSpec::for_command(".venv/bin/python", &args, "process-bridge-supervisor").unwrap();
//! spec.cwd = Some("examples/backend".into());
//! let server = PreforkServer::start(&spec, Duration::from_millis(500), None)?;
//! server.wait_ready(Some(Duration::from_secs(30)))?;
//! let conversation = server.start_conversation(Duration::from_millis(500), false)?;
//! let mut ready = String::new();
//! BufReader::new(conversation.stdout).read_line(&mut ready)?; // the backend's `ready` event
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Unix only: elsewhere the crate is empty, and hosts start cold.

#[cfg(unix)]
mod conversation;
pub mod protocol;
#[cfg(unix)]
mod server;
pub mod spec;

#[cfg(unix)]
pub use conversation::{Control, Conversation};
pub use protocol::{parse_report, Ready, Report};
#[cfg(unix)]
pub use server::{ForkError, ForkRequest, HostEnds, Observer, PreforkServer, ServerEvent, ServerExit, ServerStatus, StartError, StartErrorKind};
pub use spec::{warm_invocation, ServerSpec, SERVER_SOURCE};
