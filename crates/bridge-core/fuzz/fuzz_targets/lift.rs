//! Lifting large values out of a line (bridge_core::lift), with tiny limits
//! so that every input has something to lift: parsing the skeleton and
//! putting each value back where its marker survived must give the same
//! JSON value as parsing the line (serde_json as the parser; inputs it
//! rejects, and those with unpaired surrogates, are skipped). Lifting in
//! place (the line's buffer moved into a lifted string) must give exactly
//! what lifting by copy gives.
#![no_main]

use bridge_core::lift::{
    lift_large_values, lift_large_values_in_place, LiftLimits, LiftedContent, PathStep,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const LIMITS: LiftLimits = LiftLimits {
    min_string_bytes: 3,
    min_array_bytes: 6,
    chunk_bytes: 5,
};

/// The value at `path`, if every step exists.
fn at<'v>(value: &'v mut Value, path: &[PathStep]) -> Option<&'v mut Value> {
    path.iter()
        .try_fold(value, |value, step| match (step, value) {
            (PathStep::Key(key), Value::Object(map)) => map.get_mut(key),
            (PathStep::Index(index), Value::Array(items)) => items.get_mut(*index),
            _ => None,
        })
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(expected @ Value::Object(_)) = serde_json::from_str::<Value>(line) else {
        return;
    };
    let mut owned = line.to_owned();
    let in_place = lift_large_values_in_place(&mut owned, LIMITS);
    let Some(lifted) = lift_large_values(line, LIMITS) else {
        assert_eq!(in_place, None);
        return;
    };
    assert_eq!(in_place.as_ref(), Some(&lifted), "lifting in place differs for {line}");
    let mut restored: Value = serde_json::from_str(&lifted.skeleton).expect("the skeleton is JSON");
    for (n, value) in lifted.values.iter().enumerate() {
        let content = match &value.content {
            LiftedContent::Latin1(bytes) => {
                Value::String(bytes.iter().map(|&b| char::from(b)).collect())
            }
            LiftedContent::Utf16(units) => match String::from_utf16(units) {
                Ok(text) => Value::String(text),
                Err(_) => return, // an unpaired surrogate: serde_json has no such string
            },
            LiftedContent::Chunks(chunks) => Value::Array(
                chunks
                    .iter()
                    .flat_map(|chunk| {
                        serde_json::from_str::<Vec<Value>>(chunk).expect("a chunk is a JSON array")
                    })
                    .collect(),
            ),
        };
        let marker = Value::String(format!("\u{0}lifted:{n}"));
        if let Some(slot) = at(&mut restored, &value.path) {
            if *slot == marker {
                *slot = content;
            }
        }
    }
    assert_eq!(restored, expected, "lifting changed the value of {line}");
});
