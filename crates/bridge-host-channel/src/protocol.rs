//! The host channel's contract (docs/host-channel.md): its constants, the
//! messages the backend sends as this crate hands them out, and the kinds of
//! the host's error replies.
//!
//! The Python module (`python/src/agentlane_host_channel/_protocol.py`)
//! states the same constants; `tests/contract.rs` fails when the two differ.

use serde_json::value::RawValue;

/// The version of the channel's protocol this host speaks; the backend
/// states its own first (`hello`).
pub const PROTOCOL_VERSION: &str = "1.0";
/// The major version this host accepts in `hello`.
pub const PROTOCOL_MAJOR: &str = "1";
/// The environment variable that names the backend's end of the channel (a
/// descriptor number the backend inherits).
pub const FD_ENV: &str = "AGENTLANE_HOST_CHANNEL_FD";
/// The longest line either side sends or accepts, in bytes without the
/// newline: a tool's 20 MB result and a long conversation's snapshot fit;
/// memory stays bounded. The same as the backend's stdout limit.
pub const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;
/// The deepest nesting of arrays and objects in a value the host sends:
/// Python's decoder ends the reading thread with a `RecursionError` on a
/// deep enough line (about a thousand levels), and serde_json's own limit
/// is this one, so a result deeper than it is answered `invalid-result`.
pub const MAX_NESTING: usize = 128;
/// The longest request id, in bytes (ids are held for a while after their
/// call ended, to tell a late cancel from an unknown id).
pub const MAX_ID_BYTES: usize = 128;

/// The message types the backend sends, in the order of docs/host-channel.md.
pub const BACKEND_MESSAGE_TYPES: [&str; 7] = [
    "hello",
    "list_tools",
    "call_tool",
    "cancel",
    "store_load",
    "store_save",
    "store_delete",
];
/// The message types the host sends.
pub const HOST_MESSAGE_TYPES: [&str; 2] = ["result", "error"];

/// Why the host answered a request with an error: `error.kind` on the wire.
/// The backend's module shows it to the model as the `ToolError` kind (a
/// tool call) or raises it (a store operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyErrorKind {
    /// The application's tool handler failed (its message is the text).
    ToolError,
    /// The arguments do not satisfy the tool's input schema; `fields` holds
    /// the failing paths (JSON Pointers), so the model can correct them.
    InvalidArguments,
    /// No tool of that name in this conversation.
    UnknownTool,
    /// The host's result could not be sent (not JSON, or over the line limit).
    InvalidResult,
    /// The call passed its deadline.
    Timeout,
    /// The host gave the call up (its own cancel).
    Cancelled,
    /// The host is closing: the call will never be answered.
    HostUnavailable,
    /// A store operation's `expected_revision` is not the stored revision.
    RevisionConflict,
    /// The store failed.
    StoreError,
    /// This host gives the conversation no store.
    NoStore,
    /// The request broke the protocol (its line is not a valid request).
    InvalidRequest,
    /// The backend's `hello` stated a version this host does not speak.
    UnsupportedVersion,
}

impl ReplyErrorKind {
    /// The kind on the wire (kebab-case, stable).
    pub fn code(self) -> &'static str {
        match self {
            ReplyErrorKind::ToolError => "tool-error",
            ReplyErrorKind::InvalidArguments => "invalid-arguments",
            ReplyErrorKind::UnknownTool => "unknown-tool",
            ReplyErrorKind::InvalidResult => "invalid-result",
            ReplyErrorKind::Timeout => "timeout",
            ReplyErrorKind::Cancelled => "cancelled",
            ReplyErrorKind::HostUnavailable => "host-unavailable",
            ReplyErrorKind::RevisionConflict => "revision-conflict",
            ReplyErrorKind::StoreError => "store-error",
            ReplyErrorKind::NoStore => "no-store",
            ReplyErrorKind::InvalidRequest => "invalid-request",
            ReplyErrorKind::UnsupportedVersion => "unsupported-version",
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [ReplyErrorKind; 12] = [
        ReplyErrorKind::ToolError,
        ReplyErrorKind::InvalidArguments,
        ReplyErrorKind::UnknownTool,
        ReplyErrorKind::InvalidResult,
        ReplyErrorKind::Timeout,
        ReplyErrorKind::Cancelled,
        ReplyErrorKind::HostUnavailable,
        ReplyErrorKind::RevisionConflict,
        ReplyErrorKind::StoreError,
        ReplyErrorKind::NoStore,
        ReplyErrorKind::InvalidRequest,
        ReplyErrorKind::UnsupportedVersion,
    ];

    /// The kind of a wire code, if it is one.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.code() == code)
    }
}

/// The kinds the backend's module gives on its own, never sent by a host:
/// the channel broke or closed (`channel-lost`); the module's own deadline
/// passed (`timeout`, as the host's); a request too long to send
/// (`request-too-long`); and, raised in the factory, no channel was given
/// (`no-channel`) or the variable names no usable one (`invalid-channel`).
pub const MODULE_ERROR_KINDS: [&str; 5] = [
    "channel-lost",
    "timeout",
    "request-too-long",
    "no-channel",
    "invalid-channel",
];

/// The backend's first message: who speaks, in which version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: String,
    /// The module's distribution name (`agentlane-host-channel`), if given.
    pub package: Option<String>,
    /// The module's version, if given.
    pub package_version: Option<String>,
}

/// A tool call as the backend sends it.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub name: String,
    /// The arguments exactly as the backend wrote them (a JSON object).
    pub arguments: Box<RawValue>,
    /// The model's id of the call (agentlane's `tool_call_id`), if given.
    pub tool_call_id: Option<String>,
    /// The run it belongs to (agentlane's `run_id`), if given.
    pub run_id: Option<String>,
}

/// A valid message from the backend.
#[derive(Clone, Debug)]
pub enum Message {
    Hello(Hello),
    ListTools {
        id: String,
    },
    CallTool {
        id: String,
        call: ToolCall,
    },
    /// The backend gave up the request `id` (the run was cancelled, or the
    /// module's own deadline passed): no answer is wanted any more.
    Cancel {
        id: String,
    },
    StoreLoad {
        id: String,
    },
    StoreSave {
        id: String,
        save: StoreSave,
    },
    StoreDelete {
        id: String,
        expected_revision: Option<u64>,
    },
}

/// A `store_save` request.
#[derive(Clone, Debug)]
pub struct StoreSave {
    /// agentlane's `AgentSnapshot` JSON document, exactly as sent.
    pub snapshot: Box<RawValue>,
    /// The snapshot's own `revision` (read from it, for stores that keep it
    /// beside the document).
    pub revision: u64,
    /// The revision the store must hold for the save to succeed; `None`:
    /// the store must be empty.
    pub expected_revision: Option<u64>,
}

impl Message {
    /// The wire type of the message.
    pub fn type_name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::ListTools { .. } => "list_tools",
            Message::CallTool { .. } => "call_tool",
            Message::Cancel { .. } => "cancel",
            Message::StoreLoad { .. } => "store_load",
            Message::StoreSave { .. } => "store_save",
            Message::StoreDelete { .. } => "store_delete",
        }
    }
}

/// Whether `hello`'s version is one this host speaks: major 1.
pub fn is_supported_version(version: &str) -> bool {
    version.split('.').next() == Some(PROTOCOL_MAJOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_kinds_round_trip_and_are_distinct() {
        let codes: std::collections::HashSet<&str> =
            ReplyErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ReplyErrorKind::ALL.len());
        for kind in ReplyErrorKind::ALL {
            assert_eq!(ReplyErrorKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(ReplyErrorKind::from_code("channel-lost"), None);
    }

    #[test]
    fn versions() {
        assert!(is_supported_version("1.0"));
        assert!(is_supported_version("1.7"));
        assert!(is_supported_version("1"));
        assert!(!is_supported_version("2.0"));
        assert!(!is_supported_version("10.0"));
        assert!(!is_supported_version(""));
    }
}
