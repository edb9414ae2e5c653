//! Strict event decoding (PROTOCOL.md §7): the one error type and the entry
//! points that judge a line.

use std::cell::RefCell;
use std::fmt;

use crate::json::{JsonCursor, SyntaxError, TextCursor};
use crate::memo::{Recall, ShapeMemo, MAX_REMEMBERED_LINE};
use crate::validate::{EventIssue, Walker};

/// Why a line is not a valid bridge event. `message` and `fields` are those
/// of the reference's `BridgeDecodeError` (§7.2, §7.3); only the parser's
/// description after `Invalid JSON bridge event: ` is our own wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub message: String,
    /// Dotted paths of the failing fields, first occurrence kept; empty when
    /// no field applies.
    pub fields: Vec<String>,
}

impl DecodeError {
    pub fn new(message: impl Into<String>, fields: Vec<String>) -> Self {
        DecodeError {
            message: message.into(),
            fields,
        }
    }

    /// Step 1: the line is not JSON.
    pub fn invalid_json(error: &SyntaxError) -> Self {
        Self::new(
            format!(
                "Invalid JSON bridge event: SyntaxError: {}",
                error.message()
            ),
            Vec::new(),
        )
    }

    /// A line longer than the reader's limit (§2.3 leaves the limit to hosts).
    pub fn line_too_long(length: usize, limit: usize) -> Self {
        Self::new(
            format!("Bridge event line exceeds the maximum line size: {length} bytes (limit {limit} bytes)."),
            Vec::new(),
        )
    }

    fn from_issue(issue: EventIssue) -> Self {
        let one = |field: &str| vec![field.to_owned()];
        match issue {
            EventIssue::NotAnObject => Self::new("Bridge event must be a JSON object.", Vec::new()),
            EventIssue::VersionNotAString => Self::new(
                "Bridge event protocol_version must be a string.",
                one("protocol_version"),
            ),
            EventIssue::UnsupportedVersion(v) => Self::new(
                format!("Unsupported bridge protocol version: {v}."),
                one("protocol_version"),
            ),
            EventIssue::TypeNotAString => {
                Self::new("Bridge event type must be a string.", one("type"))
            }
            EventIssue::UnknownType(t) => {
                Self::new(format!("Unknown bridge event type: {t}."), one("type"))
            }
            EventIssue::Payload(fields) => Self::new(
                format!("Invalid bridge event payload: {}.", fields.join(", ")),
                fields,
            ),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

/// The bridge event types (§5), in `KNOWN_EVENT_TYPES` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Ready,
    Config,
    RunStart,
    RunComplete,
    RunCancelled,
    Error,
    Reset,
    CancelRequested,
    CancelIgnored,
    Shutdown,
    RunEvent,
}

impl EventType {
    const ALL: [EventType; 11] = [
        EventType::Ready,
        EventType::Config,
        EventType::RunStart,
        EventType::RunComplete,
        EventType::RunCancelled,
        EventType::Error,
        EventType::Reset,
        EventType::CancelRequested,
        EventType::CancelIgnored,
        EventType::Shutdown,
        EventType::RunEvent,
    ];

    /// The wire name (`"run_event"`, …).
    pub fn as_str(self) -> &'static str {
        crate::schema::EVENT_TYPES[self as usize]
    }
}

thread_local! {
    // Each thread remembers the shapes of the lines it accepted last.
    static MEMO: RefCell<ShapeMemo> = RefCell::new(ShapeMemo::default());
}

/// Judges one line (without its terminator) the way `decodeBridgeEventLine`
/// does. On success the line is exactly a valid event, and parsing it with
/// `JSON.parse` (or any faithful parser) gives the event.
///
/// Lines shaped like one accepted shortly before on the same thread (same
/// text outside free strings and numbers) are judged from that memory; see
/// the `memo` module. The result is the same either way.
pub fn validate_event_line(line: &str) -> Result<EventType, DecodeError> {
    let recall = if line.len() <= MAX_REMEMBERED_LINE {
        MEMO.with_borrow_mut(|memo| memo.recall(line.as_bytes()))
    } else {
        Recall::Resting
    };
    let mut cursor = match recall {
        Recall::Valid(event_type) => return Ok(event_type),
        Recall::Unknown => TextCursor::recording(line),
        Recall::Resting => TextCursor::new(line),
    };
    let outcome = match validate_event(&mut cursor) {
        Ok(result) => result,
        Err(syntax) => return Err(DecodeError::invalid_json(&syntax)),
    };
    if let (Ok(event_type), Some(holes)) = (&outcome, cursor.holes()) {
        MEMO.with_borrow_mut(|memo| memo.remember(line.as_bytes(), holes, *event_type));
    }
    outcome
}

/// Judges a document read through any cursor. The outer `Err` is the
/// cursor's own failure (for text: invalid JSON, step 1).
pub fn validate_event<C: JsonCursor>(
    cursor: &mut C,
) -> Result<Result<EventType, DecodeError>, C::Error> {
    let outcome = Walker::default().check_event(cursor)?;
    Ok(outcome
        .map(|i| EventType::ALL[i])
        .map_err(DecodeError::from_issue))
}
