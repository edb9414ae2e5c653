//! Commands to the backend (docs/protocol.md §4): typed encoding for Rust hosts,
//! and a check of already encoded frames for hosts that encode elsewhere
//! (the JavaScript layer encodes with `JSON.stringify`, whose semantics only
//! JavaScript has, and asks this module whether the frame is safe to send).
//!
//! Beyond the reference, which sends whatever it is given, a frame is refused
//! when the backend would mishandle it silently or fatally: an unknown type,
//! a missing or mistyped field, an unpaired surrogate (the backend's writer
//! dies echoing it, §2.2), or a line over the backend's size limit.

use std::fmt::{self, Write};

use serde_json::{Map, Value};

use crate::json::escape::first_unpaired_surrogate;
use crate::json::{JsonCursor, Kind, SyntaxError, TextCursor};
use crate::schema::{index_of, Ty, COMMAND_SHAPES, COMMAND_TYPES};
use crate::validate::Walker;
use crate::version::PROTOCOL_VERSION;

/// The backend reads at most this many code points per line, newline included (§2.2).
pub const MAX_COMMAND_CODE_POINTS: usize = 1_000_000;

/// A command, as a Rust host builds it.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Prompt {
        text: String,
    },
    Approve {
        id: String,
        allowed: bool,
        reason: Option<String>,
    },
    Configure {
        patch: Map<String, Value>,
    },
    Cancel,
    Reset,
    Shutdown,
}

/// Why a command was not encoded, as a kind a host can match on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandErrorKind {
    /// The frame is not JSON (only for frames encoded elsewhere).
    InvalidJson(SyntaxError),
    /// The frame is not a JSON object.
    NotAnObject,
    /// `type` is missing or not a string.
    TypeNotAString,
    /// `type` names no command (the value).
    UnknownType(String),
    /// A field the command needs is missing or mistyped.
    InvalidField {
        command: &'static str,
        field: String,
        expected: &'static str,
    },
    /// A string holds an unpaired UTF-16 surrogate: the backend's writer
    /// dies echoing it (§2.2).
    UnpairedSurrogate {
        command: &'static str,
        field: &'static str,
        unit: u16,
    },
    /// The frame is over the backend's line limit, in code points with its
    /// newline.
    TooLong {
        command: &'static str,
        code_points: usize,
    },
}

impl CommandErrorKind {
    /// A stable, kebab-case name of the kind (`BridgeCommandError.code` in
    /// TypeScript).
    pub fn code(&self) -> &'static str {
        match self {
            CommandErrorKind::InvalidJson(_) => "invalid-json",
            CommandErrorKind::NotAnObject => "not-an-object",
            CommandErrorKind::TypeNotAString => "type-not-a-string",
            CommandErrorKind::UnknownType(_) => "unknown-type",
            CommandErrorKind::InvalidField { .. } => "invalid-field",
            CommandErrorKind::UnpairedSurrogate { .. } => "unpaired-surrogate",
            CommandErrorKind::TooLong { .. } => "too-long",
        }
    }
}

/// Why a command was not encoded: its kind, and the message derived from
/// it, which names the command and the field at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandError {
    pub kind: CommandErrorKind,
    pub message: String,
}

impl CommandError {
    fn new(kind: CommandErrorKind) -> Self {
        let message = match &kind {
            CommandErrorKind::InvalidJson(e) => format!("Bridge command is not valid JSON: {e}"),
            CommandErrorKind::NotAnObject => "Bridge command must be a JSON object.".to_owned(),
            CommandErrorKind::TypeNotAString => "Bridge command type must be a string.".to_owned(),
            CommandErrorKind::UnknownType(t) => format!(
                "Unknown bridge command type: {t}. Known types: {}.",
                COMMAND_TYPES.join(", ")
            ),
            CommandErrorKind::InvalidField {
                command,
                field,
                expected,
            } => format!("Invalid {command} command: {command}.{field} must be {expected}."),
            CommandErrorKind::UnpairedSurrogate {
                command,
                field,
                unit,
            } => format!(
                "Invalid {command} command: {command}.{field} contains an unpaired UTF-16 surrogate (\\u{unit:04x}); the backend cannot write it back and would exit."
            ),
            CommandErrorKind::TooLong {
                command,
                code_points,
            } => format!(
                "Invalid {command} command: the frame is {code_points} code points long with its newline; the backend refuses lines over {MAX_COMMAND_CODE_POINTS}."
            ),
        };
        CommandError { kind, message }
    }

    /// The stable name of the kind (see [`CommandErrorKind::code`]).
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The command's type, when the frame named a known one.
    pub fn command_type(&self) -> Option<&'static str> {
        match &self.kind {
            CommandErrorKind::InvalidField { command, .. }
            | CommandErrorKind::UnpairedSurrogate { command, .. }
            | CommandErrorKind::TooLong { command, .. } => Some(command),
            _ => None,
        }
    }

    /// The top-level field at fault, when one is.
    pub fn field(&self) -> Option<&str> {
        match &self.kind {
            CommandErrorKind::InvalidField { field, .. } => Some(field),
            CommandErrorKind::UnpairedSurrogate { field, .. } => Some(field),
            CommandErrorKind::TypeNotAString | CommandErrorKind::UnknownType(_) => Some("type"),
            _ => None,
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CommandError {}

/// Encodes a command as one frame, trailing newline included, with the
/// fields in the reference's order (§4.1) and `protocol_version` last.
pub fn encode_command(command: &Command) -> Result<String, CommandError> {
    let (kind, fields): (&str, Vec<(&str, Value)>) = match command {
        Command::Prompt { text } => ("prompt", vec![("text", text.as_str().into())]),
        Command::Approve {
            id,
            allowed,
            reason,
        } => {
            let mut fields = vec![("id", id.as_str().into()), ("allowed", (*allowed).into())];
            if let Some(reason) = reason {
                fields.push(("reason", reason.as_str().into()));
            }
            ("approve", fields)
        }
        Command::Configure { patch } => {
            ("configure", vec![("patch", Value::Object(patch.clone()))])
        }
        Command::Cancel => ("cancel", vec![]),
        Command::Reset => ("reset", vec![]),
        Command::Shutdown => ("shutdown", vec![]),
    };
    // serde_json's map keeps keys sorted unless `preserve_order` is on, so
    // the frame is written by hand around the encoded values.
    let mut frame = format!("{{\"type\":\"{kind}\"");
    for (name, value) in fields {
        // Writing to a String cannot fail.
        let _ = write!(frame, ",\"{name}\":{value}");
    }
    let _ = write!(frame, ",\"protocol_version\":\"{PROTOCOL_VERSION}\"}}");
    check_command_frame(&frame)?;
    frame.push('\n');
    Ok(frame)
}

/// Checks an encoded command (JSON text, without the newline) before it is
/// sent: the frame as it will be written, `protocol_version` (`"1.0"`)
/// included. The error message names the command and the field at fault.
pub fn check_command_frame(frame: &str) -> Result<(), CommandError> {
    let command_type = read_command_type(frame)?;
    let index = index_of(&COMMAND_TYPES, command_type.as_bytes())
        .ok_or_else(|| CommandError::new(CommandErrorKind::UnknownType(command_type)))?;
    let command = COMMAND_TYPES[index];
    let shape = COMMAND_SHAPES[index];
    let issues = Walker::default()
        .check_document(&mut TextCursor::new(frame), shape)
        .map_err(|e| CommandError::new(CommandErrorKind::InvalidJson(e)))?;
    if let Some(path) = issues.into_iter().next() {
        let expected = shape
            .fields
            .iter()
            .find(|f| f.name == path)
            .map_or("valid", |f| describe(&f.ty));
        return Err(CommandError::new(CommandErrorKind::InvalidField {
            command,
            field: path,
            expected,
        }));
    }
    let names: Vec<&'static str> = shape.fields.iter().map(|f| f.name).collect();
    if let Some((field, unit)) = find_unpaired_surrogate(frame, &names) {
        return Err(CommandError::new(CommandErrorKind::UnpairedSurrogate {
            command,
            field,
            unit,
        }));
    }
    let code_points = frame.chars().count() + 1;
    if code_points > MAX_COMMAND_CODE_POINTS {
        return Err(CommandError::new(CommandErrorKind::TooLong {
            command,
            code_points,
        }));
    }
    // What is written is checked, not what was meant: a frame made through
    // a `toJSON` can lose the version the backend needs.
    if top_level_string(frame, "protocol_version")?.as_deref() != Some(PROTOCOL_VERSION) {
        return Err(CommandError::new(CommandErrorKind::InvalidField {
            command,
            field: "protocol_version".to_owned(),
            expected: "\"1.0\"",
        }));
    }
    Ok(())
}

fn describe(ty: &Ty) -> &'static str {
    match ty {
        Ty::Str => "a string",
        Ty::Bool => "a boolean",
        Ty::OpenObject => "a JSON object",
        _ => "valid",
    }
}

/// The command's `type` (last occurrence), or why there is none.
fn read_command_type(frame: &str) -> Result<String, CommandError> {
    top_level_string(frame, "type")?
        .ok_or_else(|| CommandError::new(CommandErrorKind::TypeNotAString))
}

/// The string value of a top-level member (last occurrence, as `JSON.parse`
/// keeps it), `None` when it is absent or not a string.
fn top_level_string(frame: &str, name: &str) -> Result<Option<String>, CommandError> {
    let not_json = |e: SyntaxError| CommandError::new(CommandErrorKind::InvalidJson(e));
    let mut c = TextCursor::new(frame);
    if c.peek().map_err(not_json)? != Kind::Object {
        return Err(CommandError::new(CommandErrorKind::NotAnObject));
    }
    c.enter_object().map_err(not_json)?;
    let mut found = None;
    while let Some(member) = c
        .next_member(|key| (key == name.as_bytes()).then_some(0))
        .map_err(not_json)?
    {
        if member.is_some() && c.peek().map_err(not_json)? == Kind::String {
            found = Some(c.read_string().map_err(not_json)?.into_owned());
        } else {
            found = found.filter(|_| member.is_none());
            c.skip().map_err(not_json)?;
        }
    }
    Ok(found)
}

/// The top-level field holding the first unpaired surrogate escape, and the
/// surrogate.
fn find_unpaired_surrogate(frame: &str, names: &[&'static str]) -> Option<(&'static str, u16)> {
    let (at, unit) = first_unpaired_surrogate(frame.as_bytes())?;
    Some((top_level_field_at(frame, at, names), unit))
}

/// The name of the declared top-level field whose value spans byte `offset`.
fn top_level_field_at(frame: &str, offset: usize, names: &[&'static str]) -> &'static str {
    let mut c = TextCursor::new(frame);
    let mut find = || -> Result<Option<&'static str>, crate::json::SyntaxError> {
        c.enter_object()?;
        while let Some(member) = c.next_member(|key| index_of(names, key))? {
            let start = c.mark()?;
            c.skip()?;
            if (start..c.mark()?).contains(&offset) {
                return Ok(Some(member.map_or("<an undeclared field>", |i| names[i])));
            }
        }
        Ok(None)
    };
    find().ok().flatten().unwrap_or("<a field>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_the_reference_frames() {
        let cases = [
            (
                Command::Prompt {
                    text: "List the files".into(),
                },
                r#"{"type":"prompt","text":"List the files","protocol_version":"1.0"}"#,
            ),
            (
                Command::Approve {
                    id: "tool-approval-1".into(),
                    allowed: true,
                    reason: None,
                },
                r#"{"type":"approve","id":"tool-approval-1","allowed":true,"protocol_version":"1.0"}"#,
            ),
            (
                Command::Approve {
                    id: "tool-approval-2".into(),
                    allowed: false,
                    reason: Some("Not in this folder.".into()),
                },
                r#"{"type":"approve","id":"tool-approval-2","allowed":false,"reason":"Not in this folder.","protocol_version":"1.0"}"#,
            ),
            (
                Command::Configure {
                    patch: json!({"model": "gpt-b"}).as_object().unwrap().clone(),
                },
                r#"{"type":"configure","patch":{"model":"gpt-b"},"protocol_version":"1.0"}"#,
            ),
            (
                Command::Cancel,
                r#"{"type":"cancel","protocol_version":"1.0"}"#,
            ),
            (
                Command::Reset,
                r#"{"type":"reset","protocol_version":"1.0"}"#,
            ),
            (
                Command::Shutdown,
                r#"{"type":"shutdown","protocol_version":"1.0"}"#,
            ),
        ];
        for (command, expected) in cases {
            assert_eq!(encode_command(&command).unwrap(), format!("{expected}\n"));
        }
    }

    #[test]
    fn escapes_like_json_stringify() {
        let frame = encode_command(&Command::Prompt {
            text: "a\"\\\n\u{1}\u{7f}é\u{2028}😀".into(),
        })
        .unwrap();
        assert_eq!(frame, "{\"type\":\"prompt\",\"text\":\"a\\\"\\\\\\n\\u0001\u{7f}é\u{2028}😀\",\"protocol_version\":\"1.0\"}\n");
    }

    #[test]
    fn refuses_what_the_backend_would_mishandle() {
        let err = |frame: &str| check_command_frame(frame).unwrap_err().message;
        assert_eq!(err(r#"{"type":"bogus"}"#), "Unknown bridge command type: bogus. Known types: prompt, approve, cancel, configure, reset, shutdown.");
        assert_eq!(
            err(r#"{"text":"x"}"#),
            "Bridge command type must be a string."
        );
        assert_eq!(err(r#"[1]"#), "Bridge command must be a JSON object.");
        assert_eq!(
            err(r#"{"type":"prompt"}"#),
            "Invalid prompt command: prompt.text must be a string."
        );
        assert_eq!(
            err(r#"{"type":"prompt","text":5}"#),
            "Invalid prompt command: prompt.text must be a string."
        );
        assert_eq!(
            err(r#"{"type":"approve","id":"a","allowed":"true"}"#),
            "Invalid approve command: approve.allowed must be a boolean."
        );
        assert_eq!(
            err(r#"{"type":"approve","allowed":true}"#),
            "Invalid approve command: approve.id must be a string."
        );
        assert_eq!(
            err(r#"{"type":"approve","id":"a","allowed":true,"reason":null}"#),
            "Invalid approve command: approve.reason must be a string."
        );
        assert_eq!(
            err(r#"{"type":"configure","patch":[1]}"#),
            "Invalid configure command: configure.patch must be a JSON object."
        );
        assert!(err(r#"{"type":"prompt","text":"a\ud800b"}"#)
            .contains("prompt.text contains an unpaired UTF-16 surrogate (\\ud800)"));
        assert!(err(r#"{"type":"configure","patch":{"k":["\udc00"]}}"#)
            .contains("configure.patch contains an unpaired"));
        assert!(err(r#"{"type":"prompt","text":"\ud83d"}"#).contains("\\ud83d"));
    }

    #[test]
    fn refusals_carry_their_kind_command_and_field() {
        let err = |frame: &str| check_command_frame(frame).unwrap_err();
        let e = err(r#"{"type":"approve","id":"a","allowed":"true"}"#);
        assert_eq!(
            (e.code(), e.command_type(), e.field()),
            ("invalid-field", Some("approve"), Some("allowed"))
        );
        let e = err(r#"{"type":"prompt","text":"\ud800"}"#);
        assert_eq!(
            (e.code(), e.command_type(), e.field()),
            ("unpaired-surrogate", Some("prompt"), Some("text"))
        );
        let e = err(r#"{"type":"bogus"}"#);
        assert_eq!(e.kind, CommandErrorKind::UnknownType("bogus".into()));
        assert_eq!(e.field(), Some("type"));
        assert_eq!(err("[1]").kind, CommandErrorKind::NotAnObject);
        assert_eq!(err(r#"{"text":"x"}"#).code(), "type-not-a-string");
        assert_eq!(err("{").code(), "invalid-json");
    }

    #[test]
    fn accepts_paired_surrogates_and_escaped_backslashes() {
        assert!(check_command_frame(
            r#"{"type":"prompt","text":"\ud83d\ude00 and \\ud800","protocol_version":"1.0"}"#
        )
        .is_ok());
        assert!(check_command_frame(
            r#"{"type":"cancel","extra":{"x":1},"protocol_version":"1.0"}"#
        )
        .is_ok());
    }

    #[test]
    fn the_frame_written_must_carry_the_protocol_version() {
        for frame in [
            r#"{"type":"cancel"}"#,
            r#"{"type":"cancel","protocol_version":"2.0"}"#,
            r#"{"type":"cancel","protocol_version":1}"#,
            r#"{"type":"cancel","protocol_version":"1.0","protocol_version":null}"#,
        ] {
            let error = check_command_frame(frame).unwrap_err();
            assert_eq!(
                error.message, "Invalid cancel command: cancel.protocol_version must be \"1.0\".",
                "{frame}"
            );
            assert_eq!(error.field(), Some("protocol_version"));
        }
    }

    #[test]
    fn enforces_the_backend_line_limit_in_code_points() {
        let overhead = r#"{"type":"prompt","text":"","protocol_version":"1.0"}"#
            .chars()
            .count();
        let fits = format!(
            r#"{{"type":"prompt","text":"{}","protocol_version":"1.0"}}"#,
            "é".repeat(999_999 - overhead)
        );
        assert!(check_command_frame(&fits).is_ok());
        let over = format!(
            r#"{{"type":"prompt","text":"{}","protocol_version":"1.0"}}"#,
            "é".repeat(1_000_000 - overhead)
        );
        assert!(check_command_frame(&over)
            .unwrap_err()
            .message
            .contains("1000001 code points"));
    }
}
