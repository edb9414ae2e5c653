//! Judging one line from the backend (docs/host-channel.md, "Judging the
//! backend's lines"): JSON, an object, a known `type`, then every field of
//! that message, collecting each failing field with what it must be.
//!
//! Unknown fields are ignored (a later minor version may add some). The
//! arguments and the snapshot are kept as the backend wrote them.

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::{ChannelError, ChannelErrorKind};
use crate::protocol::{Hello, Message, StoreSave, ToolCall, MAX_ID_BYTES};

/// Judges one line (without its newline).
pub fn decode_line(line: &str) -> Result<Message, ChannelError> {
    let map: HashMap<String, &RawValue> = match serde_json::from_str(line) {
        Ok(map) => map,
        Err(error) if error.classify() == serde_json::error::Category::Data => {
            return Err(ChannelError::new(ChannelErrorKind::NotAnObject));
        }
        Err(error) => {
            return Err(
                ChannelError::new(ChannelErrorKind::InvalidJson(error.to_string()))
                    .with_id(leading_id(line)),
            );
        }
    };
    let mut fields = Fields {
        map,
        issues: Vec::new(),
    };
    // The id, when there is a usable one, goes with every error below, so
    // that the backend's request gets an answer instead of waiting.
    let id = fields.peek_id();
    let type_name = match fields.value("type") {
        Some(Value::String(name)) => name,
        _ => return Err(ChannelError::new(ChannelErrorKind::TypeNotAString).with_id(id)),
    };
    let message = match type_name.as_str() {
        "hello" => {
            let version = fields.string("version");
            let package = fields.optional_string("package");
            let package_version = fields.optional_string("package_version");
            version.map(|version| {
                Message::Hello(Hello {
                    version,
                    package,
                    package_version,
                })
            })
        }
        "list_tools" => fields.id().map(|id| Message::ListTools { id }),
        "cancel" => fields.id().map(|id| Message::Cancel { id }),
        "store_load" => fields.id().map(|id| Message::StoreLoad { id }),
        "call_tool" => {
            let id = fields.id();
            let name = fields.string("name");
            let arguments = fields.object("arguments");
            let tool_call_id = fields.optional_string("tool_call_id");
            let run_id = fields.optional_string("run_id");
            match (id, name, arguments) {
                (Some(id), Some(name), Some(arguments)) => Some(Message::CallTool {
                    id,
                    call: ToolCall {
                        name,
                        arguments,
                        tool_call_id,
                        run_id,
                    },
                }),
                _ => None,
            }
        }
        "store_save" => {
            let id = fields.id();
            let expected_revision = fields.revision("expected_revision");
            let snapshot = fields.object("snapshot");
            let revision = snapshot
                .as_deref()
                .and_then(|snapshot| fields.snapshot_revision(snapshot, expected_revision));
            match (id, snapshot, revision, expected_revision) {
                (Some(id), Some(snapshot), Some(revision), Some(expected_revision)) => {
                    Some(Message::StoreSave {
                        id,
                        save: StoreSave {
                            snapshot,
                            revision,
                            expected_revision,
                        },
                    })
                }
                _ => None,
            }
        }
        "store_delete" => {
            let id = fields.id();
            let expected_revision = fields.revision("expected_revision");
            match (id, expected_revision) {
                (Some(id), Some(expected_revision)) => Some(Message::StoreDelete {
                    id,
                    expected_revision,
                }),
                _ => None,
            }
        }
        other => {
            return Err(
                ChannelError::new(ChannelErrorKind::UnknownType(other.to_owned())).with_id(id),
            )
        }
    };
    match message {
        Some(message) if fields.issues.is_empty() => Ok(message),
        _ => Err(ChannelError::invalid_message(&type_name, fields.issues).with_id(id)),
    }
}

/// The error of a line past the limit, with the id its first bytes show.
pub fn too_long(prefix: &str, limit: usize) -> ChannelError {
    ChannelError::new(ChannelErrorKind::LineTooLong { limit }).with_id(leading_id(prefix))
}

/// The fields of one message, and what is wrong with them so far.
struct Fields<'a> {
    map: HashMap<String, &'a RawValue>,
    issues: Vec<(String, &'static str)>,
}

impl<'a> Fields<'a> {
    fn value(&self, name: &str) -> Option<Value> {
        self.map
            .get(name)
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    fn issue(&mut self, field: &str, expected: &'static str) {
        self.issues.push((field.to_owned(), expected));
    }

    /// The id if it is a usable one, without judging it.
    fn peek_id(&self) -> Option<String> {
        match self.value("id") {
            Some(Value::String(id)) if is_usable_id(&id) => Some(id),
            _ => None,
        }
    }

    fn id(&mut self) -> Option<String> {
        let id = self.peek_id();
        if id.is_none() {
            self.issue("id", "a non-empty string of at most 128 bytes");
        }
        id
    }

    fn string(&mut self, name: &str) -> Option<String> {
        match self.value(name) {
            Some(Value::String(text)) if !text.is_empty() => Some(text),
            _ => {
                self.issue(name, "a non-empty string");
                None
            }
        }
    }

    /// Absent and `null` are both `None`.
    fn optional_string(&mut self, name: &str) -> Option<String> {
        match self.map.get(name).map(|_| self.value(name)) {
            None | Some(Some(Value::Null)) => None,
            Some(Some(Value::String(text))) => Some(text),
            Some(_) => {
                self.issue(name, "a string or null");
                None
            }
        }
    }

    fn object(&mut self, name: &str) -> Option<Box<RawValue>> {
        match self.map.get(name) {
            Some(raw) if raw.get().starts_with('{') => Some((*raw).to_owned()),
            _ => {
                self.issue(name, "a JSON object");
                None
            }
        }
    }

    /// A required key whose value is `null` or a non-negative integer:
    /// `Some(None)` for null.
    fn revision(&mut self, name: &str) -> Option<Option<u64>> {
        match self.map.get(name).map(|_| self.value(name)) {
            Some(Some(Value::Null)) => Some(None),
            Some(Some(Value::Number(n))) if n.as_u64().is_some() => Some(n.as_u64()),
            _ => {
                self.issue(name, "null or a non-negative integer");
                None
            }
        }
    }

    /// The snapshot's own revision: a non-negative integer above the
    /// expected one (agentlane's rule; a store never goes backwards).
    fn snapshot_revision(
        &mut self,
        snapshot: &RawValue,
        expected: Option<Option<u64>>,
    ) -> Option<u64> {
        let fields: HashMap<String, &RawValue> =
            serde_json::from_str(snapshot.get()).unwrap_or_default();
        let revision = fields
            .get("revision")
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
            .and_then(|value| value.as_u64());
        match (revision, expected) {
            (None, _) => {
                self.issue("snapshot.revision", "a non-negative integer");
                None
            }
            (Some(revision), Some(Some(expected))) if revision <= expected => {
                self.issue("snapshot.revision", "greater than expected_revision");
                None
            }
            (Some(revision), _) => Some(revision),
        }
    }
}

fn is_usable_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_BYTES
}

/// The request id among the first members of a text that is not (or not
/// all) JSON: the module writes `type` and `id` first, so a host can answer
/// a request whose line it cannot take (too long, not JSON) instead of
/// leaving it to wait. Only leading members whose values are strings are
/// read; anything else ends the search.
fn leading_id(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        let (key, next) = json_string(text, skip_whitespace(bytes, at))?;
        at = skip_whitespace(bytes, next);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let (value, next) = json_string(text, skip_whitespace(bytes, at + 1))?;
        if key == "id" {
            return is_usable_id(&value).then_some(value);
        }
        at = skip_whitespace(bytes, next);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The JSON string starting at `at` (decoded) and the index after it.
fn json_string(text: &str, at: usize) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut end = at + 1;
    loop {
        match bytes.get(end)? {
            b'\\' => end += 2,
            b'"' => break,
            _ => end += 1,
        }
    }
    let decoded = serde_json::from_str(text.get(at..=end)?).ok()?;
    Some((decoded, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: &str) -> ChannelError {
        decode_line(line).expect_err(line)
    }

    #[test]
    fn takes_every_message_type() {
        let lines = [
            r#"{"type":"hello","version":"1.0","package":"agentlane-host-channel","package_version":"0.1.0"}"#,
            r#"{"type":"list_tools","id":"1"}"#,
            r#"{"type":"call_tool","id":"2","name":"lookup","arguments":{"q":12345678901234567890},"tool_call_id":"call-1","run_id":null}"#,
            r#"{"type":"cancel","id":"2"}"#,
            r#"{"type":"store_load","id":"3"}"#,
            r#"{"type":"store_save","id":"4","snapshot":{"schema_version":1,"revision":1},"expected_revision":null}"#,
            r#"{"type":"store_delete","id":"5","expected_revision":1,"later_field":true}"#,
        ];
        let types: Vec<&str> = lines
            .iter()
            .map(|line| decode_line(line).expect(line).type_name())
            .collect();
        assert_eq!(types, crate::protocol::BACKEND_MESSAGE_TYPES);
        match decode_line(lines[2]).unwrap() {
            Message::CallTool { id, call } => {
                assert_eq!(id, "2");
                // The digits are kept: the arguments are the backend's text.
                assert_eq!(call.arguments.get(), r#"{"q":12345678901234567890}"#);
                assert_eq!(call.tool_call_id.as_deref(), Some("call-1"));
                assert_eq!(call.run_id, None);
            }
            other => panic!("{other:?}"),
        }
        match decode_line(lines[5]).unwrap() {
            Message::StoreSave { save, .. } => {
                assert_eq!(save.revision, 1);
                assert_eq!(save.expected_revision, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn judges_in_order_with_field_paths() {
        assert_eq!(error("{").code(), "invalid-json");
        assert_eq!(error("[1]").code(), "not-an-object");
        assert_eq!(error("{}").code(), "type-not-a-string");
        assert_eq!(error(r#"{"type":7,"id":"9"}"#).id.as_deref(), Some("9"));
        let unknown = error(r#"{"type":"result","id":"3"}"#);
        assert_eq!(
            (unknown.code(), unknown.id.as_deref()),
            ("unknown-type", Some("3"))
        );
        let call = error(r#"{"type":"call_tool","id":"4","name":"","arguments":[],"run_id":5}"#);
        assert_eq!(call.code(), "invalid-message");
        assert_eq!(call.fields, ["name", "arguments", "run_id"]);
        assert_eq!(call.id.as_deref(), Some("4"));
        assert_eq!(
            call.message,
            "Invalid host channel call_tool: name must be a non-empty string; arguments must be a JSON object; run_id must be a string or null."
        );
        let save = error(
            r#"{"type":"store_save","id":"5","snapshot":{"revision":2},"expected_revision":2}"#,
        );
        assert_eq!(save.fields, ["snapshot.revision"]);
        let save = error(r#"{"type":"store_save","id":"5","snapshot":{},"expected_revision":-1}"#);
        assert_eq!(save.fields, ["expected_revision", "snapshot.revision"]);
        let delete = error(r#"{"type":"store_delete","id":"6"}"#);
        assert_eq!(delete.fields, ["expected_revision"]);
        let long_id = format!(r#"{{"type":"list_tools","id":"{}"}}"#, "x".repeat(129));
        let long_id = error(&long_id);
        assert_eq!(
            (long_id.fields.as_slice(), long_id.id),
            (&["id".to_owned()][..], None)
        );
    }

    #[test]
    fn the_last_duplicate_key_wins_as_in_json_parse() {
        match decode_line(r#"{"type":"cancel","id":"1","id":"2"}"#).unwrap() {
            Message::Cancel { id } => assert_eq!(id, "2"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_the_leading_id_of_a_cut_or_broken_line() {
        assert_eq!(
            leading_id(r#"{"type":"call_tool","id":"17","name":"lookup","arguments":{"q":"xxxx"#),
            Some("17".into())
        );
        assert_eq!(
            leading_id(r#" { "type" : "call_tool" , "id" : "a\"b" "#),
            Some("a\"b".into())
        );
        // Not among the leading string members: not guessed.
        assert_eq!(leading_id(r#"{"arguments":{},"id":"3"}"#), None);
        assert_eq!(leading_id(r#"{"type":"call_tool","id":"4"#), None);
        assert_eq!(leading_id("garbage"), None);
        assert_eq!(
            too_long(r#"{"type":"store_save","id":"8","snapshot":{"#, 10).id,
            Some("8".into())
        );
        let broken = error(r#"{"type":"call_tool","id":"9","arguments":{"q":"\ud800"}"#);
        assert_eq!(
            (broken.code(), broken.id.as_deref()),
            ("invalid-json", Some("9"))
        );
    }
}
