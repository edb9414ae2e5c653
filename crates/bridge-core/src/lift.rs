//! Cutting large values out of an accepted event line, so that a
//! JavaScript host gets them without `JSON.parse` reading the whole line in
//! one piece on its thread.
//!
//! Parsing a 50 MB tool result costs the JavaScript thread 30 ms (one
//! string) to 280 ms (a nested structure), in one piece: the event loop
//! stalls that long. When the line arrives through the stream reader, its
//! bytes have already been read off the JavaScript thread, so the reader
//! can prepare the large values itself:
//!
//! - a large **string** value is decoded here and handed over ready-made (as
//!   an external string, never scanned by V8);
//! - a large **array** value is split into chunks of consecutive elements,
//!   each the JSON text of an array, which the host parses one per turn of
//!   its event loop and joins.
//!
//! The line becomes a *skeleton*, the same text with each lifted value
//! replaced by a short marker string, plus each lifted value's path and
//! content. Parsing the skeleton and putting each value back at its path
//! gives exactly the value `JSON.parse` gives for the line: the same keys in
//! the same order (an existing property's value is replaced in place), and
//! duplicate keys still resolve last-wins, because a value is put back only
//! where its own marker survived the parse. Lifted arrays are the outermost
//! large ones; nothing inside them is lifted separately.
//!
//! Markers are `"\u0000lifted:<n>"`. No string value of the line may start
//! with U+0000 (written `\u0000` in JSON text) when values are lifted from
//! it, so a marker can never be mistaken for the line's own data.

use crate::json::escape::decode_string_units;
use crate::json::scan::string_end;
use crate::json::{decode_string_content, HoleKind, TextCursor};
use crate::{validate_event_text, DecodeError, EventType};

/// How large values must be to be lifted, and how arrays are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiftLimits {
    /// String values with at least this many bytes of JSON text.
    pub min_string_bytes: usize,
    /// Array values with at least this many bytes of JSON text.
    pub min_array_bytes: usize,
    /// An array's chunks hold elements until they reach this many bytes.
    pub chunk_bytes: usize,
}

impl Default for LiftLimits {
    /// 16 KiB strings; 1 MiB arrays in chunks of 256 KiB (about 1.5 ms of
    /// `JSON.parse` each for nested data).
    fn default() -> Self {
        LiftLimits {
            min_string_bytes: 16 * 1024,
            min_array_bytes: 1024 * 1024,
            chunk_bytes: 256 * 1024,
        }
    }
}

/// At most this many values are lifted from one line; the rest stay.
const MAX_LIFTED: usize = 1024;

/// Values under a key longer than this (in JSON text) are not lifted.
const MAX_PATH_KEY_BYTES: usize = 4096;

/// Lines nested deeper than this are left whole: the scan keeps a frame per
/// open container, and a hostile line may nest millions deep.
const MAX_DEPTH: usize = 1024;

/// The text every marker starts with, as JSON string content.
pub const MARKER_PREFIX: &str = "\\u0000lifted:";
/// The same text as a host's string holds it after parsing: a host finds
/// the n-th lifted value's place by the string `MARKER_TEXT + n`.
pub const MARKER_TEXT: &str = "\u{0}lifted:";

/// One step of a path from the event to a lifted value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

/// A lifted value's content, in the form a JavaScript engine takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LiftedContent {
    /// A string whose characters are all below U+0100: one byte each.
    Latin1(Vec<u8>),
    /// A string as UTF-16 code units, unpaired surrogates included as
    /// `JSON.parse` keeps them.
    Utf16(Vec<u16>),
    /// An array, as the JSON texts of arrays of its consecutive elements.
    Chunks(Vec<String>),
}

/// A value cut out of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiftedValue {
    /// Keys and indices from the event object to the value.
    pub path: Vec<PathStep>,
    pub content: LiftedContent,
}

/// A line with its large values cut out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifted {
    /// The line with the n-th lifted value replaced by the marker string
    /// `"\u0000lifted:<n>"`.
    pub skeleton: String,
    pub values: Vec<LiftedValue>,
}

/// Judges a line like [`validate_event_line`](crate::validate_event_line)
/// and, when it is valid and holds values worth lifting, lifts them. A line
/// shorter than `min_array_bytes` whose validation passed over no string of
/// `min_string_bytes` is read only once.
pub fn validate_and_lift(
    line: &str,
    limits: LiftLimits,
) -> (Result<EventType, DecodeError>, Option<Lifted>) {
    let mut cursor = TextCursor::recording_from(line, limits.min_string_bytes);
    let verdict = validate_event_text(&mut cursor);
    let large_string = cursor
        .holes()
        .is_some_and(|holes| holes.iter().any(|h| h.kind == HoleKind::String));
    let worth_it = verdict.is_ok() && (large_string || line.len() >= limits.min_array_bytes);
    let lifted = if worth_it {
        lift_large_values(line, limits)
    } else {
        None
    };
    (verdict, lifted)
}

impl Lifted {
    /// What a JavaScript host needs besides the skeleton and the contents:
    /// a JSON array with, per lifted value, `{"path": [keys and indices]}`,
    /// plus `"chunks": n` for an array cut into n texts.
    pub fn index_json(&self) -> String {
        let entries = self
            .values
            .iter()
            .map(|value| {
                let steps = value.path.iter().map(|step| match step {
                    PathStep::Key(key) => serde_json::Value::from(key.as_str()),
                    PathStep::Index(index) => serde_json::Value::from(*index),
                });
                let mut entry = serde_json::Map::new();
                entry.insert("path".into(), serde_json::Value::Array(steps.collect()));
                if let LiftedContent::Chunks(chunks) = &value.content {
                    entry.insert("chunks".into(), chunks.len().into());
                }
                serde_json::Value::Object(entry)
            })
            .collect();
        serde_json::Value::Array(entries).to_string()
    }
}

/// Where the scan is inside one open container.
enum Open {
    /// In an object; the content range of the key being read or last read.
    Object {
        key: (usize, usize),
        expecting_key: bool,
    },
    /// In an array that started at `start`; the index of the current
    /// element, and where the array would be cut if it is large: after its
    /// top-level commas, each at least `chunk_bytes` after the previous cut.
    Array {
        start: usize,
        index: usize,
        cuts: Vec<usize>,
    },
}

/// A value found worth lifting: its byte range in the line, its path, and
/// for an array where to cut it.
struct Found {
    start: usize,
    end: usize,
    path: Vec<PathStep>,
    cuts: Option<Vec<usize>>,
}

/// Cuts the large string and array values out of `line`, which must be
/// valid JSON (the validator accepted it). `None` when there is nothing to
/// lift, or when a string value of the line starts with U+0000 (see the
/// module's note on markers).
pub fn lift_large_values(line: &str, limits: LiftLimits) -> Option<Lifted> {
    let src = line.as_bytes();
    let mut open: Vec<Open> = Vec::new();
    let mut strings: Vec<Found> = Vec::new();
    let mut arrays: Vec<Found> = Vec::new();
    let mut i = 0;
    while i < src.len() {
        match src[i] {
            b'{' | b'[' if open.len() == MAX_DEPTH => return None,
            b'{' => {
                open.push(Open::Object {
                    key: (0, 0),
                    expecting_key: true,
                });
                i += 1;
            }
            b'[' => {
                open.push(Open::Array {
                    start: i,
                    index: 0,
                    cuts: Vec::new(),
                });
                i += 1;
            }
            b'}' => {
                open.pop();
                i += 1;
            }
            b']' => {
                let (start, cuts) = match open.pop() {
                    Some(Open::Array { start, cuts, .. }) => (start, cuts),
                    _ => return None, // not valid JSON
                };
                i += 1;
                if i - start >= limits.min_array_bytes {
                    // The outermost large array wins over those inside it.
                    while arrays.last().is_some_and(|inner| inner.start > start) {
                        arrays.pop();
                    }
                    if let Some(path) = path_of(src, &open) {
                        arrays.push(Found {
                            start,
                            end: i,
                            path,
                            cuts: Some(cuts),
                        });
                    }
                }
            }
            b',' => {
                match open.last_mut() {
                    Some(Open::Object { expecting_key, .. }) => *expecting_key = true,
                    Some(Open::Array { start, index, cuts }) => {
                        *index += 1;
                        let last_cut = cuts.last().copied().unwrap_or(*start);
                        if i - last_cut >= limits.chunk_bytes {
                            cuts.push(i);
                        }
                    }
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
                        if end - (i + 1) >= limits.min_string_bytes {
                            if let Some(path) = path_of(src, &open) {
                                strings.push(Found {
                                    start: i,
                                    end: end + 1,
                                    path,
                                    cuts: None,
                                });
                            }
                        }
                    }
                }
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    // Strings inside a lifted array are parsed with its chunks.
    let outside_arrays = |s: &Found| !arrays.iter().any(|a| a.start < s.start && s.end <= a.end);
    strings.retain(outside_arrays);
    let mut found = strings;
    found.append(&mut arrays);
    if found.is_empty() {
        return None;
    }
    found.sort_by_key(|f| f.start);
    found.truncate(MAX_LIFTED);
    let mut skeleton = String::with_capacity(line.len().min(1 << 16));
    let mut values = Vec::with_capacity(found.len());
    let mut from = 0;
    for (n, found) in found.into_iter().enumerate() {
        skeleton.push_str(&line[from..found.start]);
        skeleton.push('"');
        skeleton.push_str(MARKER_PREFIX);
        skeleton.push_str(&n.to_string());
        skeleton.push('"');
        from = found.end;
        let content = match found.cuts {
            Some(cuts) => LiftedContent::Chunks(cut_array(line, found.start, found.end, &cuts)),
            None => decode_for_engine(&src[found.start + 1..found.end - 1]),
        };
        values.push(LiftedValue {
            path: found.path,
            content,
        });
    }
    skeleton.push_str(&line[from..]);
    Some(Lifted { skeleton, values })
}

/// The JSON texts of the arrays of the elements of the valid JSON array
/// `line[start..end]` between its cuts (positions of its top-level commas).
fn cut_array(line: &str, start: usize, end: usize, cuts: &[usize]) -> Vec<String> {
    let mut from = start + 1;
    let mut chunks = Vec::with_capacity(cuts.len() + 1);
    for &cut in cuts.iter().chain([end - 1].iter()) {
        chunks.push(format!("[{}]", &line[from..cut]));
        from = cut + 1;
    }
    chunks
}

/// The path to the value being read; `None` if a key on it holds an
/// unpaired surrogate escape (it has no exact Rust `String` form) or is
/// longer than [`MAX_PATH_KEY_BYTES`].
fn path_of(src: &[u8], open: &[Open]) -> Option<Vec<PathStep>> {
    open.iter()
        .map(|step| match *step {
            Open::Object {
                key: (start, end), ..
            } => {
                // Each lifted value decodes its keys anew: bound that work.
                if end - start > MAX_PATH_KEY_BYTES {
                    return None;
                }
                let (key, lone) = decode_string_content(&src[start..end]);
                lone.is_none().then_some(PathStep::Key(key))
            }
            Open::Array { index, .. } => Some(PathStep::Index(index)),
        })
        .collect()
}

/// Decodes the content of a valid JSON string (without its quotes) into the
/// code units `JSON.parse` gives, as Latin-1 when all of them fit.
fn decode_for_engine(raw: &[u8]) -> LiftedContent {
    if raw.is_ascii() {
        if !raw.contains(&b'\\') {
            return LiftedContent::Latin1(raw.to_vec());
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut fits = true;
        decode_string_units(raw, |unit| match u8::try_from(unit) {
            Ok(byte) => out.push(byte),
            Err(_) => fits = false,
        });
        if fits {
            return LiftedContent::Latin1(out);
        }
    }
    let mut out = Vec::with_capacity(raw.len());
    decode_string_units(raw, |unit| out.push(unit));
    LiftedContent::Utf16(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: LiftLimits = LiftLimits {
        min_string_bytes: 6,
        min_array_bytes: 12,
        chunk_bytes: 4,
    };

    fn lift(line: &str) -> Option<Lifted> {
        lift_large_values(
            line,
            LiftLimits {
                min_array_bytes: usize::MAX,
                ..SMALL
            },
        )
    }

    #[test]
    fn large_strings_are_cut_out_with_their_paths() {
        let line = r#"{"a":"short","b":{"c":["xy",{"d":"long text"}]},"e":"also long"}"#;
        let lifted = lift(line).unwrap();
        assert_eq!(
            lifted.skeleton,
            r#"{"a":"short","b":{"c":["xy",{"d":"\u0000lifted:0"}]},"e":"\u0000lifted:1"}"#
        );
        assert_eq!(
            lifted.values,
            [
                LiftedValue {
                    path: vec![
                        PathStep::Key("b".into()),
                        PathStep::Key("c".into()),
                        PathStep::Index(1),
                        PathStep::Key("d".into())
                    ],
                    content: LiftedContent::Latin1(b"long text".to_vec()),
                },
                LiftedValue {
                    path: vec![PathStep::Key("e".into())],
                    content: LiftedContent::Latin1(b"also long".to_vec()),
                },
            ]
        );
        assert_eq!(
            lifted.index_json(),
            r#"[{"path":["b","c",1,"d"]},{"path":["e"]}]"#
        );
    }

    #[test]
    fn keys_are_never_lifted_and_escaped_keys_are_decoded() {
        let lifted = lift(r#"{"a very long key":1,"k\u00e9y":"value!"}"#).unwrap();
        assert_eq!(lifted.values.len(), 1);
        assert_eq!(lifted.values[0].path, [PathStep::Key("kéy".into())]);
        assert_eq!(lift(r#"{"a very long key":"x"}"#), None);
    }

    #[test]
    fn content_is_decoded_to_what_json_parse_gives() {
        let content = |line: &str| lift(line).unwrap().values.remove(0).content;
        assert_eq!(
            content(r#"{"s":"a\n\"\\\/\u00e9b"}"#),
            LiftedContent::Latin1(b"a\n\"\\/\xe9b".to_vec())
        );
        assert_eq!(
            content(r#"{"s":"é plain"}"#),
            LiftedContent::Utf16("é plain".encode_utf16().collect())
        );
        assert_eq!(
            content(r#"{"s":"x\ud800y\u2713"}"#),
            LiftedContent::Utf16(vec![0x78, 0xD800, 0x79, 0x2713])
        );
        assert_eq!(
            content(r#"{"s":"😀 ok"}"#),
            LiftedContent::Utf16("😀 ok".encode_utf16().collect())
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
        assert_eq!(lifted.values.len(), 1);
        assert_eq!(lifted.values[0].path, [PathStep::Key("b".into())]);
        assert!(lifted.skeleton.starts_with(r#"{"\ud800":"long text","#));
    }

    #[test]
    fn values_under_very_long_keys_are_not_lifted() {
        let long_key = "k".repeat(MAX_PATH_KEY_BYTES + 1);
        let line = format!(r#"{{"{long_key}":{{"a":"long text"}},"b":"long text"}}"#);
        let lifted = lift(&line).unwrap();
        assert_eq!(lifted.values.len(), 1);
        assert_eq!(lifted.values[0].path, [PathStep::Key("b".into())]);
    }

    #[test]
    fn deeply_nested_lines_are_left_whole() {
        let deep = format!(
            r#"{{"a":"long text","b":{}{}}}"#,
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert_eq!(lift_large_values(&deep, SMALL), None);
        let shallower = format!(
            r#"{{"a":"long text","b":{}{}}}"#,
            "[".repeat(MAX_DEPTH - 2),
            "]".repeat(MAX_DEPTH - 2)
        );
        assert!(lift_large_values(&shallower, SMALL).is_some());
    }

    #[test]
    fn the_marker_text_is_the_decoded_marker_prefix() {
        assert_eq!(
            decode_string_content(MARKER_PREFIX.as_bytes()),
            (MARKER_TEXT.to_owned(), None)
        );
    }

    #[test]
    fn nothing_to_lift() {
        assert_eq!(lift(r#"{"a":[1,2,{"b":null}],"c":"abc"}"#), None);
    }

    #[test]
    fn large_arrays_are_cut_between_elements_and_only_the_outermost() {
        let line = r#"{"r":[[1,2,3,4,5,6,7],"long string",{"x":[1,2]}, 3 ],"s":[1]}"#;
        let lifted = lift_large_values(line, SMALL).unwrap();
        assert_eq!(lifted.skeleton, r#"{"r":"\u0000lifted:0","s":[1]}"#);
        assert_eq!(lifted.values.len(), 1);
        assert_eq!(lifted.values[0].path, [PathStep::Key("r".into())]);
        let LiftedContent::Chunks(chunks) = &lifted.values[0].content else {
            panic!("{:?}", lifted.values[0]);
        };
        assert_eq!(
            chunks,
            &[
                "[[1,2,3,4,5,6,7]]",
                r#"["long string"]"#,
                r#"[{"x":[1,2]}]"#,
                "[ 3 ]"
            ]
        );
        assert_eq!(lifted.index_json(), r#"[{"chunks":4,"path":["r"]}]"#);
        // Joined, the chunks are the array's elements.
        let joined: Vec<serde_json::Value> = chunks
            .iter()
            .flat_map(|c| serde_json::from_str::<Vec<serde_json::Value>>(c).unwrap())
            .collect();
        let whole: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::Value::Array(joined), whole["r"]);
    }

    #[test]
    fn commas_and_brackets_inside_strings_do_not_cut() {
        let line = r#"{"r":["a,]b,[","c\",d",["e,f"]]}"#;
        let lifted = lift_large_values(line, SMALL).unwrap();
        let LiftedContent::Chunks(chunks) = &lifted.values[0].content else {
            panic!();
        };
        assert_eq!(chunks, &[r#"["a,]b,["]"#, r#"["c\",d"]"#, r#"[["e,f"]]"#]);
    }
}
