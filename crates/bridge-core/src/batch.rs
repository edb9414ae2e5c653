//! The batch contract between the stream reader and a JavaScript host: how
//! a [`Batch`] of judged lines becomes the *parts* the host receives, on
//! the reader's thread.
//!
//! A JavaScript host's cost per line is what its thread does with it, so
//! the parts are chosen to leave it one string and one `JSON.parse` per run
//! of events:
//!
//! - consecutive small valid events are joined into the text of one JSON
//!   array ([`PartKind::Events`]), which parses to exactly the objects the
//!   lines parse to (they are valid JSON values);
//! - a large valid event is one part of its own ([`PartKind::Event`]), so
//!   that the binding can hand it over without a copy;
//! - a large event whose large values were lifted out (see
//!   [`crate::lift`]) becomes its skeleton ([`PartKind::Lifted`]), the JSON
//!   index of the lifted values ([`PartKind::LiftIndex`]), then one part per
//!   lifted string ([`PartKind::LiftedString`]) or per chunk of each lifted
//!   array ([`PartKind::Chunk`]), in the index's order;
//! - an invalid line is one part ([`PartKind::Invalid`]) with its decode
//!   error at the same index of [`PreparedBatch::errors`];
//! - a stderr line is one part ([`PartKind::Text`]): slices of a joined
//!   text would keep the whole batch alive for as long as an application
//!   keeps one line.
//!
//! The TypeScript side of this contract is `lib/stream/batch.ts`; it takes
//! the part kinds, the lift marker and the limits from the addon
//! ([`PartKind::ALL`], [`crate::lift::MARKER_TEXT`]), never from literals.

use crate::error::DecodeError;
use crate::lift::{Lifted, LiftedContent};
use crate::reader::{Batch, Item, StreamEnd, LARGE_LINE_BYTES};

/// What a part holds: one character per part in the `kinds` string a
/// JavaScript host receives (`kinds.charCodeAt(i)` is `kind as u8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PartKind {
    /// The JSON array text of consecutive small valid events.
    Events = b'E',
    /// One large valid event line.
    Event = b'B',
    /// One invalid line; its error is at the same index of `errors`.
    Invalid = b'I',
    /// One stderr line.
    Text = b'T',
    /// A large valid event's skeleton (lifted values replaced by markers).
    Lifted = b'L',
    /// The JSON of the lifted values' paths and chunk counts (after `Lifted`).
    LiftIndex = b'X',
    /// One lifted string, ready-made.
    LiftedString = b'S',
    /// One chunk (JSON array text) of a lifted array.
    Chunk = b'C',
}

impl PartKind {
    /// Every kind, with the name a host's constants use for it.
    pub const ALL: [(PartKind, &'static str); 8] = [
        (PartKind::Events, "events"),
        (PartKind::Event, "event"),
        (PartKind::Invalid, "invalid"),
        (PartKind::Text, "text"),
        (PartKind::Lifted, "lifted"),
        (PartKind::LiftIndex, "liftIndex"),
        (PartKind::LiftedString, "liftedString"),
        (PartKind::Chunk, "chunk"),
    ];

    /// The kind's character in the `kinds` string.
    pub fn as_char(self) -> char {
        char::from(self as u8)
    }
}

/// The text of one part, in the form its producer made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartText {
    /// A line (or a joined run of lines, an index, a chunk) as UTF-8. The
    /// binding decides how it becomes an engine string.
    Utf8(String),
    /// A lifted string whose characters are all below U+0100.
    Latin1(Vec<u8>),
    /// A lifted string as UTF-16 code units (unpaired surrogates kept).
    Utf16(Vec<u16>),
}

/// A batch made ready for a JavaScript host.
#[derive(Debug, Default)]
pub struct PreparedBatch {
    /// One [`PartKind`] character per part.
    pub kinds: String,
    pub parts: Vec<PartText>,
    /// The decode error of each `Invalid` part at its index, `None`
    /// elsewhere; empty when the batch has no invalid line.
    pub errors: Vec<Option<DecodeError>>,
    /// The stream ended with this batch.
    pub done: bool,
    /// Why reading failed, when it did (then `done` too).
    pub failure: Option<String>,
}

impl PreparedBatch {
    fn push(&mut self, kind: PartKind, text: PartText) {
        self.kinds.push(kind.as_char());
        self.parts.push(text);
    }

    fn push_invalid(&mut self, line: String, error: DecodeError) {
        self.errors.resize_with(self.parts.len(), || None);
        self.errors.push(Some(error));
        self.push(PartKind::Invalid, PartText::Utf8(line));
    }

    fn push_lifted(&mut self, lifted: Lifted) {
        let index = lifted.index_json();
        let Lifted { skeleton, values } = lifted;
        self.push(PartKind::Lifted, PartText::Utf8(skeleton));
        self.push(PartKind::LiftIndex, PartText::Utf8(index));
        for value in values {
            match value.content {
                LiftedContent::Latin1(bytes) => {
                    self.push(PartKind::LiftedString, PartText::Latin1(bytes))
                }
                LiftedContent::Utf16(units) => {
                    self.push(PartKind::LiftedString, PartText::Utf16(units))
                }
                LiftedContent::Chunks(chunks) => {
                    for chunk in chunks {
                        self.push(PartKind::Chunk, PartText::Utf8(chunk));
                    }
                }
            }
        }
    }
}

/// The run of small events being joined into one JSON array text.
#[derive(Default)]
struct Run {
    text: String,
    lines: usize,
}

impl Run {
    fn add(&mut self, line: &str) {
        self.text.push(if self.lines == 0 { '[' } else { ',' });
        self.text.push_str(line);
        self.lines += 1;
    }

    /// Ends the run, if any, as one `Events` part.
    fn close_into(&mut self, prepared: &mut PreparedBatch) {
        if self.lines > 0 {
            self.text.push(']');
            self.lines = 0;
            prepared.push(
                PartKind::Events,
                PartText::Utf8(std::mem::take(&mut self.text)),
            );
        }
    }
}

/// Turns a batch into parts, in stream order (see the module's notes).
pub fn prepare(batch: Batch) -> PreparedBatch {
    let mut prepared = PreparedBatch::default();
    let mut run = Run::default();
    for item in batch.items {
        match item {
            Item::Event { line, .. } if line.len() < LARGE_LINE_BYTES => run.add(&line),
            Item::Text(line) => prepared.push(PartKind::Text, PartText::Utf8(line)),
            Item::Event {
                lifted: Some(lifted),
                ..
            } => {
                run.close_into(&mut prepared);
                prepared.push_lifted(*lifted);
            }
            Item::Event { line, .. } => {
                run.close_into(&mut prepared);
                prepared.push(PartKind::Event, PartText::Utf8(line));
            }
            Item::Invalid { line, error } => {
                run.close_into(&mut prepared);
                prepared.push_invalid(line, error);
            }
        }
    }
    run.close_into(&mut prepared);
    if !prepared.errors.is_empty() {
        prepared.errors.resize_with(prepared.parts.len(), || None);
    }
    (prepared.done, prepared.failure) = match batch.end {
        None => (false, None),
        Some(StreamEnd::Eof | StreamEnd::Cut) => (true, None),
        Some(StreamEnd::Failed(error)) => (true, Some(error.to_string())),
    };
    prepared
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lift::LiftLimits;
    use crate::reader::{read_stream, ReaderOptions, StreamKind};

    const SHUTDOWN: &str = r#"{"protocol_version":"1.0","type":"shutdown","ts":1}"#;

    /// The parts of a whole stream read by the reader, as one batch.
    fn parts_of(input: &str, kind: StreamKind) -> PreparedBatch {
        struct Collect(Vec<Batch>);
        impl crate::reader::BatchSink for Collect {
            fn deliver(&mut self, batch: Batch) -> bool {
                self.0.push(batch);
                true
            }
        }
        let options = ReaderOptions {
            lift: Some(LiftLimits::default()),
            ..ReaderOptions::new(kind)
        };
        let mut sink = Collect(Vec::new());
        read_stream(input.as_bytes(), &options, &mut sink);
        let mut batches = sink.0;
        let end = batches.last_mut().and_then(|b| b.end.take());
        let items = batches.into_iter().flat_map(|b| b.items).collect();
        prepare(Batch { items, end })
    }

    fn text(part: &PartText) -> &str {
        match part {
            PartText::Utf8(text) => text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn runs_of_small_events_are_one_json_array_broken_by_invalid_lines() {
        let input = format!("{SHUTDOWN}\n{SHUTDOWN}\nnot json\n{SHUTDOWN}\n");
        let prepared = parts_of(&input, StreamKind::Events);
        assert_eq!(prepared.kinds, "EIE");
        assert_eq!(text(&prepared.parts[0]), format!("[{SHUTDOWN},{SHUTDOWN}]"));
        assert_eq!(text(&prepared.parts[1]), "not json");
        assert_eq!(text(&prepared.parts[2]), format!("[{SHUTDOWN}]"));
        assert_eq!(prepared.errors.len(), 3);
        assert!(prepared.errors[0].is_none() && prepared.errors[2].is_none());
        assert_eq!(
            prepared.errors[1].as_ref().map(DecodeError::code),
            Some("invalid-json")
        );
        assert!(prepared.done && prepared.failure.is_none());
        // The joined run parses to the events the lines parse to.
        let joined: serde_json::Value = serde_json::from_str(text(&prepared.parts[0])).unwrap();
        let one: serde_json::Value = serde_json::from_str(SHUTDOWN).unwrap();
        assert_eq!(joined, serde_json::json!([one.clone(), one]));
    }

    #[test]
    fn a_batch_without_invalid_lines_has_no_errors() {
        let prepared = parts_of(&format!("{SHUTDOWN}\n"), StreamKind::Events);
        assert_eq!(prepared.kinds, "E");
        assert!(prepared.errors.is_empty());
    }

    #[test]
    fn large_events_stand_alone_and_large_values_are_lifted() {
        let padding = "p".repeat(LARGE_LINE_BYTES);
        let large = format!(
            r#"{{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"{padding}"}}"#
        );
        let unlifted = format!(
            r#"{{"protocol_version":"1.0","type":"run_complete","ts":1,"final_output":[{}],"turn_count":1,"response_count":1,"shim_state":{{}}}}"#,
            vec!["1"; LARGE_LINE_BYTES / 2].join(",")
        );
        let input = format!("{SHUTDOWN}\n{large}\n{unlifted}\n{SHUTDOWN}\n");
        let prepared = parts_of(&input, StreamKind::Events);
        assert_eq!(prepared.kinds, "ELXSBE");
        assert!(text(&prepared.parts[1]).contains(r#""prompt":"\u0000lifted:0""#));
        assert_eq!(text(&prepared.parts[2]), r#"[{"path":["prompt"]}]"#);
        assert_eq!(prepared.parts[3], PartText::Latin1(padding.into_bytes()));
        assert_eq!(text(&prepared.parts[4]), unlifted);
    }

    #[test]
    fn stderr_lines_are_one_part_each() {
        let prepared = parts_of("one\ntwo\n", StreamKind::Text);
        assert_eq!(prepared.kinds, "TT");
        assert_eq!(text(&prepared.parts[1]), "two");
    }

    #[test]
    fn a_read_failure_ends_the_batch_with_its_reason() {
        let batch = Batch {
            items: Vec::new(),
            end: Some(StreamEnd::Failed(std::io::Error::other("broken pipe"))),
        };
        let prepared = prepare(batch);
        assert!(prepared.done);
        assert_eq!(prepared.failure.as_deref(), Some("broken pipe"));
    }

    #[test]
    fn part_kind_characters_are_distinct_letters() {
        let mut seen = std::collections::HashSet::new();
        for (kind, name) in PartKind::ALL {
            assert!(kind.as_char().is_ascii_uppercase(), "{name}");
            assert!(seen.insert(kind.as_char()), "{name}");
        }
    }
}
