//! Remembered shapes of accepted lines, so that the lines of a stream that
//! differ from an earlier one only in free text and numbers are judged
//! without walking the schema again.
//!
//! A backend writes the same few line shapes over and over: a streamed
//! answer is hundreds of `text_delta` events that differ only in `ts` and
//! `text`. When the validator accepts a line, the text cursor has recorded
//! every string and number whose content it did not look at ([`Hole`]s: the
//! walker skipped it, or only checked that a number is finite). Everything
//! else (keys, punctuation, whitespace, `true`/`false`/`null`, and the strings
//! the schema reads, such as `type`, `kind` and `protocol_version`) is the
//! line's *shape*. A later line with the same shape, each hole filled with a
//! value of the same kind, takes the walker through exactly the same
//! decisions, so it is valid with the same event type. Matching a shape is a
//! few `memcmp`s and a scan of each hole; a line that matches no shape is
//! judged by the walker, which stays the only judge of what is valid.

use crate::json::scan::{is_plainly_finite, number_end, string_end};
use crate::json::{Hole, HoleKind};
use crate::schema::EventType;

/// Lines longer than this are not remembered: long lines rarely repeat a
/// shape, and the walker's cost there is dominated by the payload anyway.
pub(crate) const MAX_REMEMBERED_LINE: usize = 4096;

/// Shapes kept per memo (the distinct small event shapes a backend
/// interleaves are fewer).
const CAPACITY: usize = 8;

/// The shape of an accepted line: its text without the holes (not to be
/// confused with a schema [`crate::schema::Shape`]).
struct LineShape {
    /// The line's text with the holes cut out.
    fixed: Vec<u8>,
    /// For each hole, in order: where it was cut out of `fixed`, and its kind.
    holes: Vec<(usize, HoleKind)>,
    event_type: EventType,
}

impl LineShape {
    fn new(line: &[u8], holes: &[Hole], event_type: EventType) -> LineShape {
        let mut fixed = Vec::with_capacity(line.len());
        let mut cuts = Vec::with_capacity(holes.len());
        let mut from = 0;
        for hole in holes {
            fixed.extend_from_slice(&line[from..hole.start]);
            cuts.push((fixed.len(), hole.kind));
            from = hole.end;
        }
        fixed.extend_from_slice(&line[from..]);
        LineShape {
            fixed,
            holes: cuts,
            event_type,
        }
    }

    /// Whether `line` is this shape with every hole filled by a value of its
    /// kind.
    fn matches(&self, line: &[u8]) -> bool {
        let mut pos = 0;
        let mut from = 0;
        for &(cut, kind) in &self.holes {
            let fixed = &self.fixed[from..cut];
            if line.get(pos..pos + fixed.len()) != Some(fixed) {
                return false;
            }
            pos += fixed.len();
            from = cut;
            pos = match (kind, line.get(pos)) {
                (HoleKind::String, Some(b'"')) => match string_end(line, pos) {
                    Some((end, _)) => end + 1,
                    None => return false,
                },
                (HoleKind::Number, Some(b'-' | b'0'..=b'9')) => match number_end(line, pos) {
                    Some(end) if is_plainly_finite(&line[pos..end]) => end,
                    _ => return false,
                },
                _ => return false,
            };
        }
        line.get(pos..) == Some(&self.fixed[from..])
    }
}

/// What the memory says about a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recall {
    /// The line has a remembered shape: it is valid, of this type.
    Valid(EventType),
    /// No remembered shape: judge it, and remember its shape if accepted.
    Unknown,
    /// The memory is resting (see [`ShapeMemo`]): judge the line only.
    Resting,
}

/// The shapes of recently accepted lines, most recently matched first.
///
/// A stream whose lines keep taking new shapes would pay for failed
/// matches and new shapes on every line (about a quarter of a small
/// line's validation), so after [`MISSES_BEFORE_REST`] misses in a row the
/// memory rests for [`REST_LINES`] lines, then tries again.
#[derive(Default)]
pub(crate) struct ShapeMemo {
    shapes: Vec<LineShape>,
    misses_in_a_row: u32,
    resting_for: u32,
}

const MISSES_BEFORE_REST: u32 = 32;
const REST_LINES: u32 = 256;

impl ShapeMemo {
    /// Looks for a remembered shape of `line`.
    pub(crate) fn recall(&mut self, line: &[u8]) -> Recall {
        if self.resting_for > 0 {
            self.resting_for -= 1;
            return Recall::Resting;
        }
        let Some(found) = self.shapes.iter().position(|shape| shape.matches(line)) else {
            self.misses_in_a_row += 1;
            if self.misses_in_a_row == MISSES_BEFORE_REST {
                self.misses_in_a_row = 0;
                self.resting_for = REST_LINES;
            }
            return Recall::Unknown;
        };
        self.misses_in_a_row = 0;
        let event_type = self.shapes[found].event_type;
        // Streams repeat their latest shape: keep it first.
        self.shapes[..=found].rotate_right(1);
        Recall::Valid(event_type)
    }

    /// Remembers the shape of a line the walker accepted after
    /// [`Recall::Unknown`], with the holes its cursor recorded.
    pub(crate) fn remember(&mut self, line: &[u8], holes: &[Hole], event_type: EventType) {
        if self.shapes.len() == CAPACITY {
            self.shapes.pop();
        }
        self.shapes
            .insert(0, LineShape::new(line, holes, event_type));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::TextCursor;

    const LINE: &str = r#"{"protocol_version":"1.0","type":"shutdown","ts":1}"#;

    fn memo_with_line() -> ShapeMemo {
        let mut cursor = TextCursor::recording(LINE);
        let verdict = crate::validate_event_text(&mut cursor).unwrap();
        let mut memo = ShapeMemo::default();
        memo.remember(LINE.as_bytes(), cursor.holes().unwrap(), verdict);
        memo
    }

    #[test]
    fn a_remembered_shape_matches_other_hole_contents_only() {
        let mut memo = memo_with_line();
        let shutdown = Recall::Valid(EventType::Shutdown);
        assert_eq!(memo.recall(LINE.as_bytes()), shutdown);
        assert_eq!(
            memo.recall(LINE.replace(":1}", ":-2.5}").as_bytes()),
            shutdown
        );
        for other in [":1e3}", ":1} ", ":\"1\"}", ":01}", ":1,\"x\":1}"] {
            assert_eq!(
                memo.recall(LINE.replace(":1}", other).as_bytes()),
                Recall::Unknown,
                "{other}"
            );
        }
    }

    #[test]
    fn the_memory_rests_after_many_misses_in_a_row_and_then_tries_again() {
        let mut memo = memo_with_line();
        for i in 0..MISSES_BEFORE_REST {
            assert_eq!(
                memo.recall(format!("{{\"n\":{i}}}").as_bytes()),
                Recall::Unknown
            );
        }
        for _ in 0..REST_LINES {
            assert_eq!(memo.recall(LINE.as_bytes()), Recall::Resting);
        }
        assert_eq!(
            memo.recall(LINE.as_bytes()),
            Recall::Valid(EventType::Shutdown)
        );
    }
}
