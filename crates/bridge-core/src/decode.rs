//! Strict event decoding (docs/protocol.md §7): the entry points that judge a
//! line, with the shape memory in front of the schema walker.

use std::cell::RefCell;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::json::{JsonCursor, TextCursor};
use crate::memo::{Recall, ShapeMemo, MAX_REMEMBERED_LINE};
use crate::schema::EventType;
use crate::validate::{EventIssue, Walker};

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
    let verdict = validate_event_text(&mut cursor);
    if let (Ok(event_type), Some(holes)) = (&verdict, cursor.holes()) {
        MEMO.with_borrow_mut(|memo| memo.remember(line.as_bytes(), holes, *event_type));
    }
    verdict
}

/// Judges the JSON text under a text cursor with the schema walker alone
/// (no shape memory): the one entry point for text, syntax errors included
/// (step 1). A recording cursor has recorded the holes it passed over.
pub fn validate_event_text(cursor: &mut TextCursor<'_>) -> Result<EventType, DecodeError> {
    match validate_event(cursor) {
        Ok(verdict) => verdict,
        Err(syntax) => Err(DecodeError::invalid_json(&syntax)),
    }
}

/// Judges a document read through any cursor, for sources other than text
/// (the N-API binding walks a value `JSON.parse` built). The outer `Err` is
/// the cursor's own failure to read, which is not a verdict on the line.
pub fn validate_event<C: JsonCursor>(
    cursor: &mut C,
) -> Result<Result<EventType, DecodeError>, C::Error> {
    let outcome = Walker::default().check_event(cursor)?;
    Ok(outcome.map(EventType::from_index).map_err(from_issue))
}

fn from_issue(issue: EventIssue) -> DecodeError {
    match issue {
        EventIssue::NotAnObject => DecodeError::new(DecodeErrorKind::NotAnObject),
        EventIssue::VersionNotAString => DecodeError::new(DecodeErrorKind::VersionNotAString),
        EventIssue::UnsupportedVersion(v) => {
            DecodeError::new(DecodeErrorKind::UnsupportedVersion(v))
        }
        EventIssue::TypeNotAString => DecodeError::new(DecodeErrorKind::TypeNotAString),
        EventIssue::UnknownType(t) => DecodeError::new(DecodeErrorKind::UnknownType(t)),
        EventIssue::Payload(fields) => DecodeError::invalid_payload(fields),
    }
}
