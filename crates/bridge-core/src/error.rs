//! The decode error (docs/protocol.md §7): why a line is not a valid bridge
//! event, as a kind a program can match on, the reference's message derived
//! from it, and the failing field paths.

use std::fmt;

use crate::json::SyntaxError;

/// What went wrong with a line, in the order the decoder checks (§7.2).
/// A host matches on it (or on its stable [`code`](Self::code)) instead of
/// on message text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// Step 1: the line is not JSON (the parser's description is inside).
    InvalidJson(SyntaxError),
    /// Step 2: the JSON value is not an object.
    NotAnObject,
    /// Step 3: `protocol_version` is missing or not a string.
    VersionNotAString,
    /// Step 4: `protocol_version` has a major version other than 1 (the value).
    UnsupportedVersion(String),
    /// Step 5: `type` is missing or not a string.
    TypeNotAString,
    /// Step 6: `type` names no bridge event (the value).
    UnknownType(String),
    /// Step 7: fields fail the event's schema; [`DecodeError::fields`] lists them.
    InvalidPayload,
    /// The line is longer than the reader's limit in bytes (§2.3 leaves
    /// the limit to hosts); reported when it passed the limit, and nothing
    /// of it was judged.
    LineTooLong { limit: usize },
}

impl DecodeErrorKind {
    /// A stable, kebab-case name of the kind, the same in every host
    /// language (`BridgeDecodeError.code` in TypeScript): `invalid-json`,
    /// `not-an-object`, `version-not-a-string`, `unsupported-version`,
    /// `type-not-a-string`, `unknown-type`, `invalid-payload`, `line-too-long`.
    pub fn code(&self) -> &'static str {
        match self {
            DecodeErrorKind::InvalidJson(_) => "invalid-json",
            DecodeErrorKind::NotAnObject => "not-an-object",
            DecodeErrorKind::VersionNotAString => "version-not-a-string",
            DecodeErrorKind::UnsupportedVersion(_) => "unsupported-version",
            DecodeErrorKind::TypeNotAString => "type-not-a-string",
            DecodeErrorKind::UnknownType(_) => "unknown-type",
            DecodeErrorKind::InvalidPayload => "invalid-payload",
            DecodeErrorKind::LineTooLong { .. } => "line-too-long",
        }
    }

    /// Every code, in the order of the kinds (for hosts that mirror them).
    pub const CODES: [&'static str; 8] = [
        "invalid-json",
        "not-an-object",
        "version-not-a-string",
        "unsupported-version",
        "type-not-a-string",
        "unknown-type",
        "invalid-payload",
        "line-too-long",
    ];

    /// The field paths a kind implies by itself (all but the payload's).
    fn implied_fields(&self) -> Vec<String> {
        let one = |field: &str| vec![field.to_owned()];
        match self {
            DecodeErrorKind::VersionNotAString | DecodeErrorKind::UnsupportedVersion(_) => {
                one("protocol_version")
            }
            DecodeErrorKind::TypeNotAString | DecodeErrorKind::UnknownType(_) => one("type"),
            _ => Vec::new(),
        }
    }
}

/// Why a line is not a valid bridge event. `message` and `fields` are those
/// of the reference's `BridgeDecodeError` (§7.2, §7.3): the message is
/// derived from `kind` (and, for a payload issue, from `fields`); only the
/// parser's description after `Invalid JSON bridge event: ` is our own
/// wording. Build one with [`DecodeError::new`] or
/// [`DecodeError::invalid_payload`], so that the three agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub kind: DecodeErrorKind,
    pub message: String,
    /// Dotted paths of the failing fields, first occurrence kept; empty when
    /// no field applies.
    pub fields: Vec<String>,
}

impl DecodeError {
    /// An error of any kind but [`DecodeErrorKind::InvalidPayload`], with
    /// the fields the kind implies (`protocol_version` or `type`, or none).
    pub fn new(kind: DecodeErrorKind) -> Self {
        let fields = kind.implied_fields();
        let message = match &kind {
            DecodeErrorKind::InvalidJson(syntax) => {
                format!(
                    "Invalid JSON bridge event: SyntaxError: {}",
                    syntax.message()
                )
            }
            DecodeErrorKind::NotAnObject => "Bridge event must be a JSON object.".to_owned(),
            DecodeErrorKind::VersionNotAString => {
                "Bridge event protocol_version must be a string.".to_owned()
            }
            DecodeErrorKind::UnsupportedVersion(v) => {
                format!("Unsupported bridge protocol version: {v}.")
            }
            DecodeErrorKind::TypeNotAString => "Bridge event type must be a string.".to_owned(),
            DecodeErrorKind::UnknownType(t) => format!("Unknown bridge event type: {t}."),
            DecodeErrorKind::InvalidPayload => "Invalid bridge event payload.".to_owned(),
            DecodeErrorKind::LineTooLong { limit } => {
                format!("Bridge event line exceeds the maximum line size of {limit} bytes.")
            }
        };
        DecodeError {
            kind,
            message,
            fields,
        }
    }

    /// Step 7: these fields fail the event's schema (in the reference's order).
    pub fn invalid_payload(fields: Vec<String>) -> Self {
        DecodeError {
            kind: DecodeErrorKind::InvalidPayload,
            message: format!("Invalid bridge event payload: {}.", fields.join(", ")),
            fields,
        }
    }

    /// Step 1: the line is not JSON.
    pub fn invalid_json(error: &SyntaxError) -> Self {
        Self::new(DecodeErrorKind::InvalidJson(error.clone()))
    }

    /// A line longer than the reader's limit.
    pub fn line_too_long(limit: usize) -> Self {
        Self::new(DecodeErrorKind::LineTooLong { limit })
    }

    /// The stable name of the kind (see [`DecodeErrorKind::code`]).
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_listed_in_kind_order_and_distinct() {
        let kinds = [
            DecodeErrorKind::InvalidJson(
                crate::validate_event_line("{").unwrap_err().kind_syntax(),
            ),
            DecodeErrorKind::NotAnObject,
            DecodeErrorKind::VersionNotAString,
            DecodeErrorKind::UnsupportedVersion("2.0".into()),
            DecodeErrorKind::TypeNotAString,
            DecodeErrorKind::UnknownType("x".into()),
            DecodeErrorKind::InvalidPayload,
            DecodeErrorKind::LineTooLong { limit: 1 },
        ];
        let codes: Vec<&str> = kinds.iter().map(DecodeErrorKind::code).collect();
        assert_eq!(codes, DecodeErrorKind::CODES);
        let unique: std::collections::HashSet<&str> = codes.iter().copied().collect();
        assert_eq!(unique.len(), codes.len());
    }

    impl DecodeError {
        fn kind_syntax(self) -> SyntaxError {
            match self.kind {
                DecodeErrorKind::InvalidJson(syntax) => syntax,
                other => panic!("{other:?}"),
            }
        }
    }
}
