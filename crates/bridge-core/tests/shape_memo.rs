//! `validate_event_line` remembers the shapes of accepted lines (the `memo`
//! module). These tests check that a warm memory never changes a verdict:
//! every line is judged both by `validate_event_line`, after the valid
//! lines it was derived from were accepted on the same thread, and by the
//! schema walker alone (`validate_event_text` over a fresh cursor), and the two
//! must agree exactly (event type, or message and fields).

use bridge_core::json::{HoleKind, TextCursor};
use bridge_core::{validate_event_line, validate_event_text, DecodeError, EventType};

fn walker_alone(line: &str) -> Result<EventType, DecodeError> {
    validate_event_text(&mut TextCursor::new(line))
}

fn assert_agree(line: &str) -> Result<EventType, DecodeError> {
    let remembered = validate_event_line(line);
    assert_eq!(
        remembered,
        walker_alone(line),
        "memo and walker disagree on {line}"
    );
    remembered
}

/// Valid lines: every §10 example and every line of the recorded sessions.
fn valid_lines() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
    let examples: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/protocol-examples.json")).unwrap(),
    )
    .unwrap();
    let mut lines: Vec<String> = examples["valid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["line"].as_str().unwrap().to_owned())
        .collect();
    for entry in std::fs::read_dir(format!("{root}/recorded")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) == Some("ndjson") {
            let text = std::fs::read_to_string(&path).unwrap();
            lines.extend(
                text.lines()
                    .filter(|l| walker_alone(l).is_ok() && l.len() <= 4096)
                    .map(str::to_owned),
            );
        }
    }
    lines
}

/// The holes the walker leaves in a line: (start, end, kind).
fn holes(line: &str) -> Vec<(usize, usize, HoleKind)> {
    let mut cursor = TextCursor::recording(line);
    let accepted = validate_event_text(&mut cursor).is_ok();
    assert!(accepted);
    cursor
        .holes()
        .map(|h| h.iter().map(|h| (h.start, h.end, h.kind)).collect())
        .unwrap_or_default()
}

/// What to put in a string hole: valid strings of every sort, then invalid
/// ones (a raw control character, bad escapes, no closing quote), then other
/// kinds of value.
const STRING_FILLS: &[&str] = &[
    r#""""#,
    r#""another text""#,
    r#""é ✓ 𝄞""#,
    r#""\u00e9\n\t\"\\\/""#,
    r#""\ud800""#,
    r#""\udc00x\ud83d""#,
    "\"a\u{1}b\"",
    r#""\x""#,
    r#""\u12""#,
    r#""\u12G4""#,
    r#""unterminated"#,
    r#""a" "b""#,
    "null",
    "0",
    "true",
    "{}",
    "[]",
    r#"{"a":1}"#,
];

/// What to put in a number hole: plain numbers, numbers the memo leaves to
/// the walker (exponents, 300 digits), invalid numbers, other kinds.
const NUMBER_FILLS: &[&str] = &[
    "0",
    "-0",
    "7",
    "-12.5",
    "1767225601.123456",
    "1e400",
    "-1e400",
    "1.5E3",
    "2e-5",
    "01",
    "1.",
    "-",
    ".5",
    "+1",
    "1e",
    "NaN",
    "Infinity",
    "null",
    "\"1\"",
    "[]",
    "1 2",
];

#[test]
fn changed_hole_contents_get_the_walkers_verdict() {
    let lines = valid_lines();
    assert!(lines.len() > 500);
    let long_number = "9".repeat(300);
    let mut checked = 0;
    for line in &lines {
        // Warm the memory with the original, then try every fill in every hole.
        assert!(assert_agree(line).is_ok());
        for (start, end, kind) in holes(line) {
            let fills: Vec<&str> = match kind {
                HoleKind::String => STRING_FILLS.to_vec(),
                HoleKind::Number => {
                    let mut fills = NUMBER_FILLS.to_vec();
                    fills.push(&long_number);
                    fills
                }
            };
            for fill in fills {
                let changed = format!("{}{}{}", &line[..start], fill, &line[end..]);
                let _ = assert_agree(&changed);
                let _ = assert_agree(line);
                checked += 1;
            }
        }
    }
    assert!(checked > 5_000, "only {checked} variants");
}

#[test]
fn changes_outside_the_holes_get_the_walkers_verdict() {
    // Seeded byte edits anywhere in the line (a small xorshift generator, so
    // that failures reproduce): replace, insert or delete one byte.
    let lines = valid_lines();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const BYTES: &[u8] = b"{}[]:,\"\\ 0123456789-+.eEtrufalsn_xyzAZ\t\n\x01";
    let mut accepted = 0;
    for round in 0..20_000 {
        let line = &lines[round % lines.len()];
        let _ = assert_agree(line);
        let mut bytes = line.as_bytes().to_vec();
        let at = (next() as usize) % bytes.len();
        let byte = BYTES[(next() as usize) % BYTES.len()];
        match next() % 3 {
            0 => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            _ => {
                bytes.remove(at);
            }
        }
        if let Ok(changed) = String::from_utf8(bytes) {
            if assert_agree(&changed).is_ok() {
                accepted += 1;
            }
        }
    }
    // Some edits land inside free text and keep the line valid.
    assert!(
        accepted > 1_000,
        "only {accepted} edited lines stayed valid"
    );
}

#[test]
fn a_line_read_twice_is_not_remembered_by_its_first_reading() {
    // `type` after `payload`: the walker reads the object a second time, and
    // the first reading passed over values the second one inspects.
    let late_type = r#"{"protocol_version":"1.0","ts":1,"event":{"payload":{"kind":"agent_start","task_name":"A","task_id":"t","parent_task_id":null,"is_root":true},"type":"agent_start"},"type":"run_event"}"#;
    let mut cursor = TextCursor::recording(late_type);
    assert!(validate_event_text(&mut cursor).is_ok());
    assert_eq!(cursor.holes(), None);
    // A same-shaped line with a different kind in the payload is invalid.
    assert!(assert_agree(late_type).is_ok());
    let wrong_kind = late_type.replace(r#""kind":"agent_start""#, r#""kind":"agent_end""#);
    assert!(assert_agree(&wrong_kind).is_err());
}

#[test]
fn strings_the_schema_reads_are_part_of_the_shape() {
    let delta = r#"{"protocol_version":"1.0","type":"run_event","ts":1.5,"event":{"type":"model_stream","payload":{"event":{"kind":"text_delta","raw":null,"provider_event_type":null,"item_index":null,"item_type":null,"text":"Hi","tool_call_id":null,"tool_call_index":null,"arguments_delta":null,"reasoning":null,"reasoning_signature":null,"response":null,"error":null,"continuation":null,"async_tool_call":null,"required_tool_call_ids":[],"input_messages":null,"steering":null},"kind":"model_stream"}}}"#;
    let kinds: Vec<HoleKind> = holes(delta).into_iter().map(|h| h.2).collect();
    // `ts` and `text` only: versions, types and kinds are read.
    assert_eq!(kinds, [HoleKind::Number, HoleKind::String]);
    assert!(assert_agree(delta).is_ok());
    for (from, to) in [
        (r#""1.0""#, r#""2.0""#),
        (r#""run_event""#, r#""run_evenT""#),
        (r#""type":"model_stream""#, r#""type":"tool_end""#),
        (r#""Hi""#, "7"),
        ("1.5", "1e400"),
    ] {
        assert!(assert_agree(&delta.replace(from, to)).is_err(), "{to}");
    }
}
