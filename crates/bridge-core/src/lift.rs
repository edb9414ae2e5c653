//! Cutting large string values out of an accepted event line, so that a
//! JavaScript host gets them as strings made off its thread, and
//! `JSON.parse` only has to read what is left.
//!
//! Parsing a 50 MB tool result that is one string costs the JavaScript
//! thread about 30 ms in one piece: V8 scans every byte and copies it into a
//! new string. When the line arrives through the stream reader, those bytes
//! have already been read off the JavaScript thread, so the reader can
//! decode each large string value itself and hand it over ready-made. The
//! line becomes a *skeleton*, the same text with each large string replaced
//! by a short marker string, plus, for each lifted string, the path to its
//! value and its decoded text. Parsing the skeleton and putting each string
//! back at its path gives exactly the value `JSON.parse` gives for the line:
//! the same keys in the same order (the value of an existing property is
//! replaced in place), and duplicate keys still resolve last-wins, because a
//! string is put back only where its own marker survived the parse.
//!
//! Markers are `"\u0000lifted:<n>"`. No string value of the line may start
//! with U+0000 (written `\u0000` in JSON text) when strings are lifted from
//! it, so a marker can never be mistaken for the line's own data.

use crate::json::text::string_end;
use crate::json::{decode_string_content, HoleKind, TextCursor};
use crate::{DecodeError, EventType};

/// String values with at least this many bytes of JSON text are lifted.
pub const MIN_LIFTED_BYTES: usize = 16 * 1024;

/// At most this many strings are lifted from one line; the rest stay.
const MAX_LIFTED: usize = 1024;

/// The text every marker starts with, as JSON string content.
pub const MARKER_PREFIX: &str = "\\u0000lifted:";

/// One step of a path from the event to a lifted value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

/// A lifted string's content, in the form a JavaScript engine stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiftedText {
    /// Every character is below U+0100: one byte each.
    Latin1(Vec<u8>),
    /// UTF-16 code units, unpaired surrogates included as `JSON.parse`
    /// keeps them.
    Utf16(Vec<u16>),
}

/// A string value cut out of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiftedString {
    /// Keys and indices from the event object to the value.
    pub path: Vec<PathStep>,
    pub text: LiftedText,
}

/// A line with its large strings cut out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifted {
    /// The line with the n-th lifted string replaced by the marker string
    /// `"\u0000lifted:<n>"`.
    pub skeleton: String,
    pub strings: Vec<LiftedString>,
}

/// Judges a line like [`validate_event_line`](crate::validate_event_line)
/// and, when it is valid and the validator passed over string values of at
/// least `min_bytes` bytes, lifts them. Lines without such strings cost no
/// second reading.
pub fn validate_and_lift(
    line: &str,
    min_bytes: usize,
) -> (Result<EventType, DecodeError>, Option<Lifted>) {
    let mut cursor = TextCursor::recording_from(line, min_bytes);
    let verdict = match crate::validate_event(&mut cursor) {
        Ok(verdict) => verdict,
        Err(syntax) => return (Err(DecodeError::invalid_json(&syntax)), None),
    };
    let worth_it = verdict.is_ok()
        && cursor
            .holes()
            .is_some_and(|holes| holes.iter().any(|h| h.kind == HoleKind::String));
    let lifted = if worth_it {
        lift_large_strings(line, min_bytes)
    } else {
        None
    };
    (verdict, lifted)
}

impl Lifted {
    /// The paths of the lifted strings as a JSON array of arrays of keys
    /// (strings) and indices (numbers), for a JavaScript host to follow.
    pub fn paths_json(&self) -> String {
        let paths = self
            .strings
            .iter()
            .map(|string| {
                let steps = string.path.iter().map(|step| match step {
                    PathStep::Key(key) => serde_json::Value::from(key.as_str()),
                    PathStep::Index(index) => serde_json::Value::from(*index),
                });
                serde_json::Value::Array(steps.collect())
            })
            .collect();
        serde_json::Value::Array(paths).to_string()
    }
}

/// Where the scan is inside one open container.
enum Open {
    /// In an object; the content range of the key being read or last read.
    Object {
        key: (usize, usize),
        expecting_key: bool,
    },
    /// In an array; the index of the current element.
    Array { index: usize },
}

/// Cuts the string values of at least `min_bytes` bytes of JSON text out
/// of `line`, which must be valid JSON (the validator accepted it). `None`
/// when there is nothing to lift, or when a string value of the line
/// starts with U+0000 (see the module's note on markers).
pub fn lift_large_strings(line: &str, min_bytes: usize) -> Option<Lifted> {
    let src = line.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    // (quote position, closing quote position, path) of each string to lift.
    let mut found: Vec<(usize, usize, Vec<PathStep>)> = Vec::new();
    let mut i = 0;
    while i < src.len() {
        match src[i] {
            b'{' => {
                open.push(Open::Object {
                    key: (0, 0),
                    expecting_key: true,
                });
                i += 1;
            }
            b'[' => {
                open.push(Open::Array { index: 0 });
                i += 1;
            }
            b'}' | b']' => {
                open.pop();
                i += 1;
            }
            b',' => {
                match open.last_mut() {
                    Some(Open::Object { expecting_key, .. }) => *expecting_key = true,
                    Some(Open::Array { index }) => *index += 1,
                    None => {}
                }
                i += 1;
            }
            b'"' => {
                let (end, _) = string_end(src, i)?;
                match open.last_mut() {
                    Some(Open::Object {
                        key,
                        expecting_key: expecting @ true,
                    }) => {
                        *key = (i + 1, end);
                        *expecting = false;
                    }
                    _ => {
                        // A string value.
                        if src[i + 1..end].starts_with(b"\\u0000") {
                            return None;
                        }
                        let content_bytes = end - (i + 1);
                        if content_bytes >= min_bytes && found.len() < MAX_LIFTED {
                            if let Some(path) = path_of(src, &open) {
                                found.push((i, end, path));
                            }
                        }
                    }
                }
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut skeleton = String::with_capacity(line.len().min(1 << 16));
    let mut strings = Vec::with_capacity(found.len());
    let mut from = 0;
    for (n, (quote, end, path)) in found.into_iter().enumerate() {
        skeleton.push_str(&line[from..quote]);
        skeleton.push('"');
        skeleton.push_str(MARKER_PREFIX);
        skeleton.push_str(&n.to_string());
        skeleton.push('"');
        from = end + 1;
        strings.push(LiftedString {
            path,
            text: decode_for_engine(&src[quote + 1..end]),
        });
    }
    skeleton.push_str(&line[from..]);
    Some(Lifted { skeleton, strings })
}

/// The path to the value being read; `None` if a key on it holds an
/// unpaired surrogate escape (it has no exact Rust `String` form).
fn path_of(src: &[u8], open: &[Open]) -> Option<Vec<PathStep>> {
    open.iter()
        .map(|step| match *step {
            Open::Object {
                key: (start, end), ..
            } => {
                let (key, lone) = decode_string_content(&src[start..end]);
                lone.is_none().then_some(PathStep::Key(key))
            }
            Open::Array { index } => Some(PathStep::Index(index)),
        })
        .collect()
}

/// Decodes the content of a valid JSON string (without its quotes) into the
/// code units `JSON.parse` gives, as Latin-1 when all of them fit.
fn decode_for_engine(raw: &[u8]) -> LiftedText {
    if raw.is_ascii() {
        if !raw.contains(&b'\\') {
            return LiftedText::Latin1(raw.to_vec());
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut fits = true;
        decode_escapes(raw, |unit| match u8::try_from(unit) {
            Ok(byte) => out.push(byte),
            Err(_) => fits = false,
        });
        if fits {
            return LiftedText::Latin1(out);
        }
    }
    let mut out = Vec::with_capacity(raw.len());
    decode_escapes(raw, |unit| out.push(unit));
    LiftedText::Utf16(out)
}

/// Calls `emit` with each UTF-16 code unit of a valid JSON string's content.
fn decode_escapes(raw: &[u8], mut emit: impl FnMut(u16)) {
    let mut i = 0;
    while i < raw.len() {
        let plain_end = raw[i..]
            .iter()
            .position(|&b| b == b'\\')
            .map_or(raw.len(), |p| i + p);
        // Valid JSON text is valid UTF-8 and escapes start at ASCII bytes.
        let plain = std::str::from_utf8(&raw[i..plain_end]).unwrap_or_default();
        plain.encode_utf16().for_each(&mut emit);
        i = plain_end;
        if i >= raw.len() {
            break;
        }
        let unit = match raw.get(i + 1) {
            Some(b'u') => {
                let hex = std::str::from_utf8(&raw[i + 2..i + 6]).unwrap_or("0");
                i += 6;
                u16::from_str_radix(hex, 16).unwrap_or(0)
            }
            Some(&escape) => {
                i += 2;
                match escape {
                    b'b' => 0x08,
                    b'f' => 0x0C,
                    b'n' => 0x0A,
                    b'r' => 0x0D,
                    b't' => 0x09,
                    other => u16::from(other), // `"`, `\` and `/`
                }
            }
            None => break,
        };
        emit(unit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lift(line: &str) -> Option<Lifted> {
        lift_large_strings(line, 6)
    }

    #[test]
    fn large_values_are_cut_out_with_their_paths() {
        let line = r#"{"a":"short","b":{"c":["xy",{"d":"long text"}]},"e":"also long"}"#;
        let lifted = lift(line).unwrap();
        assert_eq!(
            lifted.skeleton,
            r#"{"a":"short","b":{"c":["xy",{"d":"\u0000lifted:0"}]},"e":"\u0000lifted:1"}"#
        );
        assert_eq!(
            lifted.strings,
            [
                LiftedString {
                    path: vec![
                        PathStep::Key("b".into()),
                        PathStep::Key("c".into()),
                        PathStep::Index(1),
                        PathStep::Key("d".into())
                    ],
                    text: LiftedText::Latin1(b"long text".to_vec()),
                },
                LiftedString {
                    path: vec![PathStep::Key("e".into())],
                    text: LiftedText::Latin1(b"also long".to_vec()),
                },
            ]
        );
    }

    #[test]
    fn keys_are_never_lifted_and_escaped_keys_are_decoded() {
        let lifted = lift(r#"{"a very long key":1,"k\u00e9y":"value!"}"#).unwrap();
        assert_eq!(lifted.strings.len(), 1);
        assert_eq!(lifted.strings[0].path, [PathStep::Key("kéy".into())]);
        assert_eq!(lift(r#"{"a very long key":"x"}"#), None);
    }

    #[test]
    fn content_is_decoded_to_what_json_parse_gives() {
        let text = |line: &str| lift(line).unwrap().strings.remove(0).text;
        assert_eq!(
            text(r#"{"s":"a\n\"\\\/\u00e9b"}"#),
            LiftedText::Latin1(b"a\n\"\\/\xe9b".to_vec())
        );
        assert_eq!(
            text(r#"{"s":"é plain"}"#),
            LiftedText::Utf16("é plain".encode_utf16().collect())
        );
        assert_eq!(
            text(r#"{"s":"x\ud800y\u2713"}"#),
            LiftedText::Utf16(vec![0x78, 0xD800, 0x79, 0x2713])
        );
        assert_eq!(
            text(r#"{"s":"😀 ok"}"#),
            LiftedText::Utf16("😀 ok".encode_utf16().collect())
        );
    }

    #[test]
    fn lines_with_a_value_that_could_pass_for_a_marker_are_left_whole() {
        assert_eq!(lift(r#"{"a":"long text","b":"\u0000"}"#), None);
        assert!(lift(r#"{"a":"long text","b":"x\u0000"}"#).is_some());
    }

    #[test]
    fn paths_through_keys_with_unpaired_surrogates_are_not_lifted() {
        let lifted = lift(r#"{"\ud800":"long text","b":"long text"}"#).unwrap();
        assert_eq!(lifted.strings.len(), 1);
        assert_eq!(lifted.strings[0].path, [PathStep::Key("b".into())]);
        assert!(lifted.skeleton.starts_with(r#"{"\ud800":"long text","#));
    }

    #[test]
    fn nothing_to_lift() {
        assert_eq!(lift(r#"{"a":[1,2,{"b":null}],"c":"abc"}"#), None);
    }
}
