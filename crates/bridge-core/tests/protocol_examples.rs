//! Every worked example of docs/protocol.md §10.2–§10.4, as data shared with the
//! JavaScript suites (`tests/fixtures/protocol-examples.json`).

use bridge_core::validate_event_line;
use serde_json::Value;

fn examples() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/protocol-examples.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

#[test]
fn every_valid_example_decodes_to_its_type() {
    let examples = examples();
    let valid = examples["valid"].as_array().unwrap();
    assert!(valid.len() >= 39);
    for example in valid {
        let line = example["line"].as_str().unwrap();
        let parsed: Value = serde_json::from_str(line).unwrap();
        match validate_event_line(line) {
            Ok(t) => assert_eq!(t.as_str(), parsed["type"], "{}", example["name"]),
            Err(e) => panic!(
                "{}: {line}\n  rejected: {} {:?}",
                example["name"], e.message, e.fields
            ),
        }
    }
}

#[test]
fn every_invalid_example_gives_the_reference_error() {
    let examples = examples();
    let invalid = examples["invalid"].as_array().unwrap();
    assert_eq!(invalid.len(), 54);
    for example in invalid {
        let id = example["id"].as_str().unwrap();
        let line = example["line"].as_str().unwrap();
        let error = validate_event_line(line).expect_err(id);
        let expected = example["message"].as_str().unwrap();
        if example["messageIsPrefix"].as_bool().unwrap() {
            assert!(
                error.message.starts_with(expected),
                "{id}: {}",
                error.message
            );
            assert!(
                error.message.len() > expected.len() + "SyntaxError: ".len(),
                "{id}"
            );
            assert!(
                error.message[expected.len()..].starts_with("SyntaxError: "),
                "{id}"
            );
        } else {
            assert_eq!(error.message, expected, "{id}");
        }
        let fields: Vec<String> = serde_json::from_value(example["fields"].clone()).unwrap();
        assert_eq!(error.fields, fields, "{id}");
        assert_eq!(error.code(), example["code"].as_str().unwrap(), "{id}");
    }
}
