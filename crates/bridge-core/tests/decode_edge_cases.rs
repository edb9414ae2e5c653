//! Inputs where a JSON library and `JSON.parse` disagree, hostile shapes,
//! and key orders the backend never writes but a decoder must still judge
//! like the reference.

use bridge_core::{validate_event_line, DecodeError, DecodeErrorKind, EventType};

const SHUTDOWN: &str = r#"{"protocol_version":"1.0","type":"shutdown","ts":1}"#;

fn fields(line: &str) -> Vec<String> {
    validate_event_line(line).expect_err(line).fields
}

fn message(line: &str) -> String {
    validate_event_line(line).expect_err(line).message
}

fn run_complete(final_output: &str) -> String {
    format!(
        r#"{{"protocol_version":"1.0","type":"run_complete","ts":1,"final_output":{final_output},"turn_count":1,"response_count":1,"shim_state":{{}}}}"#
    )
}

#[test]
fn non_json_inputs_are_invalid_json_with_a_syntax_description() {
    let bom = format!("\u{feff}{SHUTDOWN}");
    let two = format!("{SHUTDOWN}{SHUTDOWN}");
    let garbage = format!("{SHUTDOWN} x");
    let cases = [
        "",
        "   ",
        "\t",
        &bom,
        "NaN",
        "Infinity",
        "-Infinity",
        &two,
        &garbage,
        "{\"a\":NaN}",
        "'x'",
        "{\"a\":1,}",
        "[1,]",
        "\"\\x\"",
        "01",
        "1.",
        "-",
        "\u{0}",
    ];
    for line in cases {
        let m = message(line);
        assert!(
            m.starts_with("Invalid JSON bridge event: SyntaxError: "),
            "{line:?}: {m}"
        );
        assert_eq!(fields(line), Vec::<String>::new());
    }
    assert_eq!(
        message(""),
        "Invalid JSON bridge event: SyntaxError: Unexpected end of JSON input"
    );
    assert_eq!(
        message("not json"),
        "Invalid JSON bridge event: SyntaxError: Unexpected token 'o', \"not json\" is not valid JSON"
    );
}

#[test]
fn syntax_errors_win_over_schema_errors_anywhere_in_the_line() {
    // Wrong version early, broken JSON late: JSON.parse fails first.
    let m = message(r#"{"protocol_version":2,"type":"shutdown","ts":1,"x":[1,2"#);
    assert!(m.starts_with("Invalid JSON bridge event: "), "{m}");
}

#[test]
fn whitespace_around_and_inside_is_allowed() {
    let line = " \t{ \"protocol_version\" : \"1.0\" ,\r\n \"type\":\"shutdown\",\"ts\" : 1 } \n";
    assert_eq!(validate_event_line(line), Ok(EventType::Shutdown));
}

#[test]
fn numbers_are_doubles_like_in_javascript() {
    // 1e400 is Infinity: it fails a number field...
    let line = r#"{"protocol_version":"1.0","type":"shutdown","ts":1e400}"#;
    assert_eq!(fields(line), ["ts"]);
    let line = r#"{"protocol_version":"1.0","type":"shutdown","ts":-1e400}"#;
    assert_eq!(fields(line), ["ts"]);
    // ...but passes in any-JSON positions.
    assert!(validate_event_line(&run_complete("1e400")).is_ok());
    assert!(validate_event_line(&run_complete("[-1e999,{\"a\":1E+400}]")).is_ok());
    // -0, negative, huge integers and tiny values are finite numbers.
    for ts in [
        "-0",
        "-5",
        "123456789012345678901234567890",
        "1e-400",
        "0.5E-3",
    ] {
        let line = format!(r#"{{"protocol_version":"1.0","type":"shutdown","ts":{ts}}}"#);
        assert!(validate_event_line(&line).is_ok(), "{ts}");
    }
}

#[test]
fn lone_surrogate_escapes_are_strings() {
    let line =
        r#"{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"\ud800 and \udfff"}"#;
    assert_eq!(validate_event_line(line), Ok(EventType::RunStart));
    assert!(validate_event_line(&run_complete(r#"{"\udc00":"\ud83d"}"#)).is_ok());
    // A lone surrogate never equals a literal.
    let line =
        r#"{"protocol_version":"1.0","type":"error","ts":1,"message":"m","scope":"run\ud800"}"#;
    assert_eq!(fields(line), ["scope"]);
}

#[test]
fn duplicate_keys_resolve_last_wins() {
    // The last `ts` is a string: invalid, although the first was fine.
    let line = r#"{"protocol_version":"1.0","type":"shutdown","ts":1,"ts":"x"}"#;
    assert_eq!(fields(line), ["ts"]);
    // The last `ts` is fine: valid, although the first was not.
    let line = r#"{"protocol_version":"1.0","type":"shutdown","ts":"x","ts":1}"#;
    assert!(validate_event_line(line).is_ok());
    // The last `type` decides the schema.
    let line = r#"{"protocol_version":"1.0","type":"run_start","ts":1,"type":"shutdown"}"#;
    assert!(validate_event_line(line).is_ok());
    let line =
        r#"{"protocol_version":"1.0","type":"shutdown","ts":1,"prompt":"p","type":"run_start"}"#;
    assert!(validate_event_line(line).is_ok());
    let line = r#"{"protocol_version":"2.0","protocol_version":"1.0","type":"shutdown","ts":1}"#;
    assert!(validate_event_line(line).is_ok());
    // A record's last `type` selects the payload schema.
    let line = r#"{"protocol_version":"1.0","type":"run_event","ts":1,"event":{"type":"tool_start","payload":{"kind":"x"},"type":"x"}}"#;
    assert!(validate_event_line(line).is_ok());
}

#[test]
fn escaped_keys_are_compared_decoded() {
    let line = r#"{"protocol_version":"1.0","t\u0079pe":"shutdown","\u0074s":1}"#;
    assert_eq!(validate_event_line(line), Ok(EventType::Shutdown));
    let line = r#"{"protocol_version":"1.0","type":"shut\u0064own","ts":1}"#;
    assert_eq!(validate_event_line(line), Ok(EventType::Shutdown));
}

#[test]
fn discriminators_after_the_fields_they_govern() {
    let line = r#"{"ts":1,"prompt":7,"protocol_version":"1.0","type":"run_start"}"#;
    assert_eq!(fields(line), ["prompt"]);
    let line = r#"{"event":{"payload":{"is_root":"no","kind":"agent_start","task_name":"a","task_id":"t","parent_task_id":null},"type":"agent_start"},"ts":1,"type":"run_event","protocol_version":"1.0"}"#;
    assert_eq!(fields(line), ["event.payload.is_root"]);
    let line = r#"{"protocol_version":"1.0","type":"run_event","ts":1,"event":{"payload":{"kind":"tool_end"},"type":"plugin_event"}}"#;
    assert_eq!(fields(line), ["event.payload.kind"]);
}

#[test]
fn special_key_names_are_ordinary_keys() {
    // `__proto__` and `constructor` are own keys after JSON.parse: unknown on
    // closed objects, kept on open ones.
    for key in ["__proto__", "constructor", "toString", "hasOwnProperty"] {
        let line = format!(r#"{{"protocol_version":"1.0","type":"shutdown","ts":1,"{key}":{{}}}}"#);
        assert_eq!(fields(&line), ["event"], "{key}");
        let line = format!(
            r#"{{"protocol_version":"1.0","type":"run_event","ts":1,"event":{{"type":"x","payload":{{"{key}":1}},"{key}":null}}}}"#
        );
        assert!(validate_event_line(&line).is_ok(), "{key}");
    }
    for kind in ["constructor", "toString", "__proto__"] {
        let line = format!(
            r#"{{"protocol_version":"1.0","type":"run_event","ts":1,"event":{{"type":"{kind}","payload":{{"kind":"{kind}"}}}}}}"#
        );
        assert!(validate_event_line(&line).is_ok(), "{kind}");
        let line = format!(r#"{{"protocol_version":"1.0","type":"{kind}","ts":1}}"#);
        assert_eq!(
            message(&line),
            format!("Unknown bridge event type: {kind}.")
        );
    }
}

#[test]
fn deep_nesting_never_overflows_the_stack() {
    let depth = 100_000;
    let deep_array = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    // Inside an any-JSON field: valid.
    assert!(validate_event_line(&run_complete(&deep_array)).is_ok());
    assert!(validate_event_line(&run_complete(&deep_object)).is_ok());
    // Inside a checked field: one issue at that field.
    let line = format!(r#"{{"protocol_version":"1.0","type":"shutdown","ts":{deep_array}}}"#);
    assert_eq!(fields(&line), ["ts"]);
    let line = format!(
        r#"{{"protocol_version":"1.0","type":"run_event","ts":1,"event":{{"type":"llm_start","payload":{{"kind":"llm_start","task_name":"a","task_id":"t","parent_task_id":null,"is_root":true,"messages":[{deep_array}]}}}}}}"#
    );
    assert_eq!(fields(&line), ["event.payload.messages.0"]);
    // Unbalanced deep input is a syntax error, not a crash.
    let broken = run_complete(&"[".repeat(depth));
    assert!(message(&broken).starts_with("Invalid JSON bridge event: SyntaxError: "));
    let top = "[".repeat(1_000_000);
    assert!(message(&top).starts_with("Invalid JSON bridge event: SyntaxError: "));
}

#[test]
fn a_large_line_decodes() {
    let payload = "x".repeat(200 * 1024 * 1024);
    let line = run_complete(&format!("\"{payload}\""));
    assert_eq!(validate_event_line(&line), Ok(EventType::RunComplete));
}

#[test]
fn top_level_values_other_than_objects() {
    for line in [
        "[]",
        "null",
        "1",
        "\"s\"",
        "true",
        "[{\"protocol_version\":\"1.0\"}]",
    ] {
        let error = validate_event_line(line).unwrap_err();
        assert_eq!(error.message, "Bridge event must be a JSON object.");
        assert!(error.fields.is_empty());
        assert_eq!(error, DecodeError::new(DecodeErrorKind::NotAnObject));
    }
}

#[test]
fn unknown_keys_are_one_issue_after_the_declared_ones() {
    let line = r#"{"a":1,"protocol_version":"1.0","b":2,"type":"cancel_ignored","ts":"x","c":3}"#;
    assert_eq!(fields(line), ["ts", "reason", "event"]);
    let line = r#"{"protocol_version":"1.0","type":"run_event","ts":1,"event":5,"x":1}"#;
    assert_eq!(fields(line), ["event"]);
}

#[test]
fn model_events_of_unknown_kind_are_not_inspected() {
    let line = r#"{"protocol_version":"1.0","type":"run_event","ts":1,"event":{"type":"model_stream","payload":{"kind":"model_stream","event":{"kind":"future","text":5,"raw":{}}}}}"#;
    assert!(validate_event_line(line).is_ok());
    let line = r#"{"protocol_version":"1.0","type":"run_event","ts":1,"event":{"type":"model_stream","payload":{"kind":"model_stream","event":{"kind":5}}}}"#;
    assert_eq!(fields(line), ["event.payload.event.kind"]);
}

#[test]
fn control_characters_and_escapes_in_strings() {
    let raw_tab =
        "{\"protocol_version\":\"1.0\",\"type\":\"run_start\",\"ts\":1,\"prompt\":\"a\tb\"}";
    assert!(message(raw_tab).contains("Bad control character"));
    let escaped = r#"{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"a\tb\n\"\\\/\b\f\r\u00e9"}"#;
    assert!(validate_event_line(escaped).is_ok());
    // Raw U+2028/U+2029 and non-ASCII are fine, as the backend writes them.
    let raw = "{\"protocol_version\":\"1.0\",\"type\":\"run_start\",\"ts\":1,\"prompt\":\"\u{2028}\u{2029}é😀\"}";
    assert!(validate_event_line(raw).is_ok());
}

#[test]
fn unsupported_versions_echo_the_value() {
    let line = r#"{"protocol_version":"","type":"shutdown","ts":1}"#;
    assert_eq!(message(line), "Unsupported bridge protocol version: .");
    let line = r#"{"protocol_version":" 1.0","type":"shutdown","ts":1}"#;
    assert!(validate_event_line(line).is_ok());
}

#[test]
fn a_config_event_with_an_unknown_key_and_a_contradiction_reports_both() {
    // As the reference does: the unknown-key issue does not hold the
    // settlement rule back, and comes first.
    let line = r#"{"protocol_version":"1.0","type":"config","ts":1,"ok":false,"config":null,"error":null,"extra":1}"#;
    let error = validate_event_line(line).unwrap_err();
    assert_eq!(error.message, "Invalid bridge event payload: event, error.");
    assert_eq!(error.fields, ["event", "error"]);
    // A declared key that fails still holds it back.
    let line = r#"{"protocol_version":"1.0","type":"config","ts":"x","ok":false,"config":null,"error":null,"extra":1}"#;
    assert_eq!(
        validate_event_line(line).unwrap_err().fields,
        ["ts", "event"]
    );
}
