//! Structure-aware: start from a real event the backend wrote, apply the
//! mutations the input selects (delete, retype, add keys at any level, swap
//! discriminators, duplicate keys in the text), and check the validator's
//! invariants; a valid line must stay valid after a no-op rewrite, and the
//! memory of accepted line shapes (warm with the seeds and earlier inputs)
//! never changes a verdict.
#![no_main]

use arbitrary::Arbitrary;
use bridge_core::validate_event_line;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// Real events (a spread of recorded backend output), compiled in.
const SEEDS: &str = include_str!("../seeds.ndjson");

#[derive(Arbitrary, Debug)]
enum Op {
    Delete(u16),
    Retype(u16, u8),
    Add(u16, u8),
    SetKind(u16, u8),
    Duplicate(u8),
}

#[derive(Arbitrary, Debug)]
struct Plan {
    seed: u16,
    ops: Vec<Op>,
}

const NAMES: [&str; 14] = [
    "type",
    "kind",
    "payload",
    "event",
    "ts",
    "protocol_version",
    "status",
    "final_decision",
    "record",
    "tool_call",
    "__proto__",
    "x",
    "ok",
    "config",
];
const KINDS: [&str; 10] = [
    "model_stream",
    "tool_end",
    "tool_approval",
    "run_event",
    "ready",
    "config",
    "text_delta",
    "resolved",
    "function",
    "unknown",
];

fn value(choice: u8) -> Value {
    match choice % 8 {
        0 => Value::Null,
        1 => Value::Bool(choice & 8 != 0),
        2 => Value::from(i64::from(choice) - 100),
        3 => Value::from(KINDS[usize::from(choice) % KINDS.len()]),
        4 => Value::Array(vec![]),
        5 => Value::Object(Map::new()),
        6 => Value::from(1.5e300),
        _ => Value::from("x"),
    }
}

/// All objects in the tree, as JSON pointers.
fn object_pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            out.push(at.clone());
            for (k, v) in map {
                object_pointers(
                    v,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                object_pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The schema walker alone, without the shape memory.
fn walker_alone(line: &str) -> Result<bridge_core::EventType, bridge_core::DecodeError> {
    bridge_core::validate_event_text(&mut bridge_core::json::TextCursor::new(line))
}

fuzz_target!(|plan: Plan| {
    let seeds: Vec<&str> = SEEDS.lines().filter(|l| !l.is_empty()).collect();
    let Some(seed) = seeds.get(usize::from(plan.seed) % seeds.len().max(1)) else {
        return;
    };
    // The seed itself first, so that its shape is remembered.
    let _ = validate_event_line(seed);
    let mut root: Value = serde_json::from_str(seed).expect("seed");
    let mut duplicate: Option<(String, Value)> = None;
    for op in plan.ops.iter().take(8) {
        let mut pointers = Vec::new();
        object_pointers(&root, String::new(), &mut pointers);
        let pick = |n: u16| pointers[usize::from(n) % pointers.len()].clone();
        match op {
            Op::Delete(at) => {
                if let Some(Value::Object(map)) = root.pointer_mut(&pick(*at)) {
                    let key = map.keys().nth(usize::from(*at) % map.len().max(1)).cloned();
                    if let Some(key) = key {
                        map.remove(&key);
                    }
                }
            }
            Op::Retype(at, choice) => {
                if let Some(Value::Object(map)) = root.pointer_mut(&pick(*at)) {
                    let index = usize::from(*choice) % map.len().max(1);
                    if let Some(slot) = map.values_mut().nth(index) {
                        *slot = value(*choice);
                    }
                }
            }
            Op::Add(at, choice) => {
                if let Some(Value::Object(map)) = root.pointer_mut(&pick(*at)) {
                    map.insert(
                        NAMES[usize::from(*choice) % NAMES.len()].to_owned(),
                        value(choice.rotate_left(3)),
                    );
                }
            }
            Op::SetKind(at, choice) => {
                if let Some(Value::Object(map)) = root.pointer_mut(&pick(*at)) {
                    let key = if map.contains_key("kind") {
                        "kind"
                    } else {
                        "type"
                    };
                    map.insert(
                        key.to_owned(),
                        Value::from(KINDS[usize::from(*choice) % KINDS.len()]),
                    );
                }
            }
            Op::Duplicate(choice) => {
                duplicate = Some((
                    NAMES[usize::from(*choice) % NAMES.len()].to_owned(),
                    value(*choice),
                ));
            }
        }
    }
    let mut line = serde_json::to_string(&root).expect("serializable");
    if let Some((key, value)) = duplicate {
        // A duplicate key at the top level, before the real one (last wins).
        if line.starts_with('{') && line.len() > 2 {
            line.insert_str(
                1,
                &format!("{}:{},", serde_json::to_string(&key).unwrap(), value),
            );
        }
    }
    let first = validate_event_line(&line);
    assert_eq!(first, validate_event_line(&line), "not deterministic");
    assert_eq!(
        first,
        walker_alone(&line),
        "the shape memo changed the verdict on {line}"
    );
    if let Err(error) = &first {
        assert!(
            !error.message.starts_with("Invalid JSON"),
            "serde_json wrote invalid JSON? {line}"
        );
    }
});
