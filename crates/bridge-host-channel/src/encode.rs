//! The host's replies as lines (docs/host-channel.md, "Replies").

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::protocol::{ReplyErrorKind, MAX_LINE_BYTES, MAX_NESTING};

/// A call's answer, as the application gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The result: one JSON text (a tool's value, or a store reply made by
    /// the helpers below). Whitespace newlines are allowed: they are made
    /// spaces, so pretty-printed JSON goes out on one line.
    Value(String),
    /// The call failed: the kind the backend shows and why.
    Error {
        kind: ReplyErrorKind,
        message: String,
    },
}

impl Answer {
    /// A tool's result value.
    pub fn tool_result(value: &Value) -> Self {
        Answer::Value(value.to_string())
    }

    /// The application's handler failed with this message.
    pub fn tool_error(message: impl Into<String>) -> Self {
        Answer::Error {
            kind: ReplyErrorKind::ToolError,
            message: message.into(),
        }
    }

    /// `store_load`'s answer: the stored snapshot document (JSON text), or
    /// none.
    pub fn loaded(snapshot: Option<&str>) -> Self {
        Answer::Value(format!("{{\"snapshot\":{}}}", snapshot.unwrap_or("null")))
    }

    /// `store_save`'s and `store_delete`'s answer: done.
    pub fn stored() -> Self {
        Answer::Value("{}".to_owned())
    }

    /// A store operation's expected revision is not the stored one.
    pub fn conflict(message: impl Into<String>) -> Self {
        Answer::Error {
            kind: ReplyErrorKind::RevisionConflict,
            message: message.into(),
        }
    }

    /// The store failed.
    pub fn store_failed(message: impl Into<String>) -> Self {
        Answer::Error {
            kind: ReplyErrorKind::StoreError,
            message: message.into(),
        }
    }
}

/// `{"type":"result","id":…,"value":…}`, newline included, or why the value
/// cannot be sent (then the call is answered with `invalid-result`).
pub(crate) fn result_line(id: &str, value: &str) -> Result<String, String> {
    let value = one_line_json(value)?;
    let line = format!(
        "{{\"type\":\"result\",\"id\":{},\"value\":{value}}}\n",
        json_string(id)
    );
    if line.len() - 1 > MAX_LINE_BYTES {
        return Err(format!(
            "the result is {} bytes, over the channel's line limit of {MAX_LINE_BYTES}",
            value.len()
        ));
    }
    Ok(line)
}

/// `{"type":"error","id":…,"error":{"kind":…,"message":…[,"fields":[…]]}}`,
/// newline included.
pub(crate) fn error_line(
    id: &str,
    kind: ReplyErrorKind,
    message: &str,
    fields: &[String],
) -> String {
    // Written field by field: the order on the wire is kind, message, fields.
    let fields = if fields.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = fields.iter().map(|field| json_string(field)).collect();
        format!(",\"fields\":[{}]", list.join(","))
    };
    format!(
        "{{\"type\":\"error\",\"id\":{},\"error\":{{\"kind\":\"{}\",\"message\":{}{fields}}}}}\n",
        json_string(id),
        kind.code(),
        json_string(message)
    )
}

fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The text if it is exactly one JSON value, with its whitespace newlines
/// made spaces (inside a valid JSON text a raw CR or LF can only be
/// whitespace: strings cannot hold them).
fn one_line_json(text: &str) -> Result<Cow<'_, str>, String> {
    serde_json::from_str::<&RawValue>(text)
        .map_err(|error| format!("the result is not one JSON value ({error})"))?;
    if nesting(text) > MAX_NESTING {
        return Err(format!(
            "the result nests arrays and objects deeper than {MAX_NESTING} levels"
        ));
    }
    if text.contains(['\n', '\r']) {
        Ok(Cow::Owned(text.replace(['\n', '\r'], " ")))
    } else {
        Ok(Cow::Borrowed(text))
    }
}

/// The deepest nesting of arrays and objects in `text`, one JSON value
/// already judged valid (so brackets inside strings are the only trap).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_one_line() {
        assert_eq!(
            result_line("7", "{\n  \"a\": [1,\r\n 2]\n}").unwrap(),
            "{\"type\":\"result\",\"id\":\"7\",\"value\":{   \"a\": [1,   2] }}\n"
        );
        assert_eq!(
            result_line("a\"b", "\"x\"").unwrap(),
            "{\"type\":\"result\",\"id\":\"a\\\"b\",\"value\":\"x\"}\n"
        );
        assert!(result_line("1", "undefined")
            .unwrap_err()
            .contains("not one JSON value"));
        assert!(result_line("1", "1 2").is_err());
        assert!(result_line("1", "").is_err());
    }

    #[test]
    fn results_nest_at_most_max_nesting_levels() {
        let nested = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        assert!(result_line("1", &nested(MAX_NESTING)).is_ok());
        assert!(result_line("1", &nested(MAX_NESTING + 1))
            .unwrap_err()
            .contains("deeper than 128 levels"));
        // Brackets and escaped quotes inside strings are not nesting.
        let in_strings = format!("{{\"a\\\"[\":\"{}\"}}", "[{".repeat(400));
        assert_eq!(nesting(&in_strings), 1);
        assert!(result_line("1", &in_strings).is_ok());
        // A lone surrogate escape is valid JSON text (JSON.stringify writes
        // one) and Python reads it: it is carried as written.
        assert!(result_line("1", "\"\\ud800\"").is_ok());
    }

    #[test]
    fn errors_carry_kind_message_and_fields() {
        assert_eq!(
            error_line("3", ReplyErrorKind::InvalidArguments, "bad \"q\"", &["/q".into()]),
            "{\"type\":\"error\",\"id\":\"3\",\"error\":{\"kind\":\"invalid-arguments\",\"message\":\"bad \\\"q\\\"\",\"fields\":[\"/q\"]}}\n"
        );
        assert_eq!(
            error_line("4", ReplyErrorKind::Timeout, "late", &[]),
            "{\"type\":\"error\",\"id\":\"4\",\"error\":{\"kind\":\"timeout\",\"message\":\"late\"}}\n"
        );
    }

    #[test]
    fn store_answers() {
        assert_eq!(
            Answer::loaded(None),
            Answer::Value("{\"snapshot\":null}".into())
        );
        assert_eq!(
            Answer::loaded(Some("{\"revision\":3}")),
            Answer::Value("{\"snapshot\":{\"revision\":3}}".into())
        );
        assert_eq!(Answer::stored(), Answer::Value("{}".into()));
    }
}
