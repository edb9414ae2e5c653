//! The validator on arbitrary text: it never panics, decode errors are
//! well formed, it accepts as JSON whatever serde_json accepts (serde_json
//! accepts a subset of what JSON.parse accepts: it refuses lone surrogate
//! escapes and numbers beyond the double range, which JSON.parse takes), and
//! its memory of accepted line shapes never changes a verdict (the inputs
//! before this one left shapes behind on this thread).
#![no_main]

use bridge_core::validate_event_line;
use libfuzzer_sys::fuzz_target;

/// The schema walker alone, without the shape memory.
fn walker_alone(line: &str) -> Result<bridge_core::EventType, bridge_core::DecodeError> {
    bridge_core::validate_event_text(&mut bridge_core::json::TextCursor::new(line))
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let verdict = validate_event_line(line);
    assert_eq!(
        verdict,
        walker_alone(line),
        "the shape memo changed the verdict on {line:?}"
    );
    match verdict {
        Ok(_) => {
            // An accepted line is a JSON object.
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
                assert!(value.is_object());
            }
        }
        Err(error) => {
            let syntax = matches!(error.kind, bridge_core::DecodeErrorKind::InvalidJson(_));
            assert_eq!(
                syntax,
                error.message.starts_with("Invalid JSON bridge event: SyntaxError: ")
            );
            if syntax {
                assert!(error.fields.is_empty());
                assert!(
                    serde_json::from_str::<serde_json::Value>(line).is_err(),
                    "serde_json parses what we called invalid JSON: {line:?} ({})",
                    error.message
                );
            }
            assert_eq!(
                error.kind == bridge_core::DecodeErrorKind::InvalidPayload,
                error.message.starts_with("Invalid bridge event payload: ")
            );
            if error.kind == bridge_core::DecodeErrorKind::InvalidPayload {
                assert!(!error.fields.is_empty());
                assert_eq!(
                    error.message,
                    format!("Invalid bridge event payload: {}.", error.fields.join(", "))
                );
                let mut seen = std::collections::HashSet::new();
                assert!(
                    error.fields.iter().all(|f| seen.insert(f)),
                    "duplicate paths"
                );
            }
        }
    }
});
