//! `check_snapshot` on a real snapshot agentlane wrote and on broken
//! ones: the verdicts, their order and words (the Node suite holds them
//! equal to `checkSnapshot`'s, case by case).

use std::borrow::Cow;

use bridge_host_channel::{check_snapshot, check_snapshot_owned, ExpectedAgent, SnapshotErrorCode};

const ONE_TURN: &str = include_str!("../../../tests/fixtures/snapshots/one-turn.json");

#[test]
fn a_real_snapshot_passes_with_its_revision_moved_first() {
    let checked = check_snapshot(ONE_TURN.trim(), None).unwrap();
    let first = format!("{{\"revision\":{},", checked.revision);
    assert!(checked.text.starts_with(&first), "{}", &checked.text[..40]);
    assert_eq!(checked.text.matches("\"revision\":").count(), 1);
    let again = check_snapshot(&checked.text, None).unwrap();
    assert!(matches!(again.text, Cow::Borrowed(_)));
    assert_eq!(again.text.len(), checked.text.len());
}

#[test]
fn refusals_name_the_field_in_check_order() {
    let refused = |text: &str| check_snapshot(text, None).unwrap_err();
    let r = refused(r#"{"schema_version":2,"state":[]}"#);
    assert_eq!(
        (r.code, r.field.as_str()),
        (SnapshotErrorCode::VersionUnsupported, "schema_version")
    );
    assert_eq!(r.message, "Snapshot refused (snapshot-version-unsupported): schema_version is 2; this package reads version 1 (agentlane 0.22.0).");
    assert_eq!(
        refused("[1]").message,
        "Snapshot refused (snapshot-corrupted): the document must be an object, not an array."
    );
    assert_eq!(refused("{").field, "");
    let broken = ONE_TURN
        .replacen(r#""role": "user""#, r#""role": 7"#, 1)
        .replacen(r#""role":"user""#, r#""role":7"#, 1);
    assert_eq!(refused(&broken).field, "state.history.0.role");
    let other = check_snapshot(
        ONE_TURN,
        Some(ExpectedAgent {
            agent_type: "Other",
            key: None,
        }),
    )
    .unwrap_err();
    assert_eq!(
        (other.code, other.field.as_str()),
        (SnapshotErrorCode::AgentMismatch, "agent_id.type")
    );
}

#[test]
fn the_owned_check_moves_the_revision_in_place_to_the_same_text() {
    let compact: String = {
        // agentlane's order without whitespace, as the module writes it.
        let mut text = String::new();
        let mut in_string = false;
        let mut escaped = false;
        for c in ONE_TURN.chars() {
            if in_string {
                in_string = c != '"' || escaped;
                escaped = c == '\\' && !escaped;
            } else if c == '"' {
                in_string = true;
            } else if c.is_whitespace() {
                continue;
            }
            text.push(c);
        }
        text
    };
    for text in [compact.as_str(), ONE_TURN] {
        let borrowed = check_snapshot(text, None).unwrap();
        let owned = check_snapshot_owned(text.to_owned(), None).unwrap();
        assert_eq!(owned.text, borrowed.text);
        assert_eq!(owned.revision, borrowed.revision);
    }
    assert!(compact.starts_with(r#"{"schema_version":1,"#));
    let refused = check_snapshot_owned("[]".into(), None).unwrap_err();
    assert_eq!(refused.code, SnapshotErrorCode::Corrupted);
}
