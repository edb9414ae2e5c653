//! Why a line from the backend was not taken (docs/host-channel.md,
//! "Judging the backend's lines"): a kind a host matches on, a message
//! derived from it, the failing field paths, and the request id when one
//! could be read (then the backend got an `invalid-request` reply).

use std::fmt;

/// What was wrong with a line from the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChannelErrorKind {
    /// The line is not JSON (the parser's description).
    InvalidJson(String),
    /// The JSON value is not an object.
    NotAnObject,
    /// `type` is missing or not a string.
    TypeNotAString,
    /// `type` names no message of the backend (the value).
    UnknownType(String),
    /// Fields fail the message's shape; [`ChannelError::fields`] lists them.
    InvalidMessage,
    /// The line passed the limit in bytes; nothing of it was judged.
    LineTooLong { limit: usize },
    /// `hello` stated a version this host does not speak (the value).
    UnsupportedVersion(String),
    /// A request came before `hello`.
    HelloMissing,
    /// A second `hello`.
    HelloRepeated,
    /// A request reused the id of a request still pending (the value); it
    /// is not answered, since an answer could not say which one it is for.
    DuplicateId(String),
    /// `cancel` named an id this channel never had (the value).
    UnknownId(String),
}

impl ChannelErrorKind {
    /// A stable, kebab-case name of the kind.
    pub fn code(&self) -> &'static str {
        match self {
            ChannelErrorKind::InvalidJson(_) => "invalid-json",
            ChannelErrorKind::NotAnObject => "not-an-object",
            ChannelErrorKind::TypeNotAString => "type-not-a-string",
            ChannelErrorKind::UnknownType(_) => "unknown-type",
            ChannelErrorKind::InvalidMessage => "invalid-message",
            ChannelErrorKind::LineTooLong { .. } => "line-too-long",
            ChannelErrorKind::UnsupportedVersion(_) => "unsupported-version",
            ChannelErrorKind::HelloMissing => "hello-missing",
            ChannelErrorKind::HelloRepeated => "hello-repeated",
            ChannelErrorKind::DuplicateId(_) => "duplicate-id",
            ChannelErrorKind::UnknownId(_) => "unknown-id",
        }
    }

    /// Every code, in the order of the kinds.
    pub const CODES: [&'static str; 11] = [
        "invalid-json",
        "not-an-object",
        "type-not-a-string",
        "unknown-type",
        "invalid-message",
        "line-too-long",
        "unsupported-version",
        "hello-missing",
        "hello-repeated",
        "duplicate-id",
        "unknown-id",
    ];
}

/// Why a line from the backend was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelError {
    pub kind: ChannelErrorKind,
    pub message: String,
    /// Dotted paths of the failing fields (`snapshot.revision`), first
    /// occurrence kept; empty when no field applies.
    pub fields: Vec<String>,
    /// The request's id, when the line let one be read.
    pub id: Option<String>,
}

impl ChannelError {
    /// An error of any kind but [`ChannelErrorKind::InvalidMessage`].
    pub fn new(kind: ChannelErrorKind) -> Self {
        let (message, fields) = match &kind {
            ChannelErrorKind::InvalidJson(detail) => {
                (format!("Host channel line is not JSON: {detail}"), vec![])
            }
            ChannelErrorKind::NotAnObject => (
                "Host channel message must be a JSON object.".to_owned(),
                vec![],
            ),
            ChannelErrorKind::TypeNotAString => (
                "Host channel message type must be a string.".to_owned(),
                vec!["type".to_owned()],
            ),
            ChannelErrorKind::UnknownType(name) => (
                format!("Unknown host channel message type: {name}."),
                vec!["type".to_owned()],
            ),
            ChannelErrorKind::InvalidMessage => {
                ("Invalid host channel message.".to_owned(), vec![])
            }
            ChannelErrorKind::LineTooLong { limit } => (
                format!("Host channel line exceeds the maximum line size of {limit} bytes."),
                vec![],
            ),
            ChannelErrorKind::UnsupportedVersion(version) => (
                format!(
                    "Unsupported host channel version: {version} (this host speaks {}).",
                    crate::protocol::PROTOCOL_VERSION
                ),
                vec!["version".to_owned()],
            ),
            ChannelErrorKind::HelloMissing => (
                "Host channel request before hello: the backend must state its version first."
                    .to_owned(),
                vec![],
            ),
            ChannelErrorKind::HelloRepeated => (
                "Host channel hello repeated; the first one stands.".to_owned(),
                vec![],
            ),
            ChannelErrorKind::DuplicateId(id) => (
                format!("Host channel request id {id} is already pending; the request is ignored."),
                vec!["id".to_owned()],
            ),
            ChannelErrorKind::UnknownId(id) => (
                format!("Host channel cancel for unknown request id {id}."),
                vec!["id".to_owned()],
            ),
        };
        ChannelError {
            kind,
            message,
            fields,
            id: None,
        }
    }

    /// Fields fail the message's shape (each with what it should be).
    pub fn invalid_message(type_name: &str, issues: Vec<(String, &'static str)>) -> Self {
        let detail: Vec<String> = issues
            .iter()
            .map(|(field, expected)| format!("{field} must be {expected}"))
            .collect();
        let mut fields: Vec<String> = Vec::new();
        for (field, _) in issues {
            if !fields.contains(&field) {
                fields.push(field);
            }
        }
        ChannelError {
            kind: ChannelErrorKind::InvalidMessage,
            message: format!("Invalid host channel {type_name}: {}.", detail.join("; ")),
            fields,
            id: None,
        }
    }

    /// The same error, knowing the request's id.
    pub fn with_id(mut self, id: Option<String>) -> Self {
        self.id = id;
        self
    }

    /// The stable name of the kind.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ChannelError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_listed_in_kind_order_and_distinct() {
        let kinds = [
            ChannelErrorKind::InvalidJson(String::new()),
            ChannelErrorKind::NotAnObject,
            ChannelErrorKind::TypeNotAString,
            ChannelErrorKind::UnknownType(String::new()),
            ChannelErrorKind::InvalidMessage,
            ChannelErrorKind::LineTooLong { limit: 1 },
            ChannelErrorKind::UnsupportedVersion(String::new()),
            ChannelErrorKind::HelloMissing,
            ChannelErrorKind::HelloRepeated,
            ChannelErrorKind::DuplicateId(String::new()),
            ChannelErrorKind::UnknownId(String::new()),
        ];
        let codes: Vec<&str> = kinds.iter().map(ChannelErrorKind::code).collect();
        assert_eq!(codes, ChannelErrorKind::CODES);
        let unique: std::collections::HashSet<&str> = codes.iter().copied().collect();
        assert_eq!(unique.len(), codes.len());
    }

    #[test]
    fn invalid_message_lists_each_field_once() {
        let error = ChannelError::invalid_message(
            "call_tool",
            vec![
                ("name".into(), "a string"),
                ("arguments".into(), "a JSON object"),
                ("name".into(), "non-empty"),
            ],
        );
        assert_eq!(error.fields, ["name", "arguments"]);
        assert_eq!(
            error.message,
            "Invalid host channel call_tool: name must be a string; arguments must be a JSON object; name must be non-empty."
        );
    }
}
