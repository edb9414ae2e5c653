//! A conversation's tools as the host declares them, and the judging of a
//! call's arguments against a tool's input schema, here so that every host
//! judges alike (docs/host-channel.md, "Tools").
//!
//! A schema is JSON Schema; its `$schema` picks the draft (zod 4 writes
//! draft 2020-12), and without one it is read as draft 2020-12. `format` is
//! an annotation, as 2020-12 says (zod writes a `pattern` beside its
//! formats, which is checked). A `$ref` must point inside the schema:
//! nothing is ever fetched.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// One tool of a conversation, as the application declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    pub description: String,
    /// The JSON Schema of the tool's input (an object).
    pub input_schema: Value,
    /// The call's deadline, overriding the channel's default.
    pub timeout: Option<Duration>,
}

/// Why the application's tools cannot be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSpecError {
    /// The tool at fault.
    pub tool: String,
    pub message: String,
}

impl fmt::Display for ToolSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool {:?}: {}", self.tool, self.message)
    }
}

impl std::error::Error for ToolSpecError {}

/// The most failing paths a reply names (a model rarely needs more to
/// correct its call; a hostile one cannot make the reply huge).
pub const MAX_ARGUMENT_ISSUES: usize = 16;
/// The longest text of one issue, in characters (the validator quotes the
/// offending value, which may be large).
const MAX_ISSUE_CHARS: usize = 300;

/// A tool ready to judge calls: its spec and its compiled schema.
pub(crate) struct Tool {
    pub spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool").field("spec", &self.spec).finish()
    }
}

/// Why a call's arguments were refused: a message for the model and the
/// failing paths (JSON Pointers into the arguments; `""` is the whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgumentIssues {
    pub message: String,
    pub fields: Vec<String>,
}

impl Tool {
    pub fn compile(spec: ToolSpec) -> Result<Self, ToolSpecError> {
        let refuse = |message: String| ToolSpecError {
            tool: spec.name.clone(),
            message,
        };
        if spec.name.is_empty() {
            return Err(refuse("the name is empty".into()));
        }
        if !spec.input_schema.is_object() {
            return Err(refuse("the input schema must be a JSON object".into()));
        }
        let validator = jsonschema::validator_for(&spec.input_schema)
            .map_err(|error| refuse(format!("the input schema is not valid: {error}")))?;
        Ok(Tool { spec, validator })
    }

    /// Judges a call's arguments (any JSON text; the decoder has checked it
    /// is an object's).
    pub fn check(&self, arguments: &str) -> Result<(), ArgumentIssues> {
        let value: Value = serde_json::from_str(arguments).map_err(|error| ArgumentIssues {
            message: format!(
                "Invalid arguments for {}: not JSON the host can read ({error}).",
                self.spec.name
            ),
            fields: vec![String::new()],
        })?;
        let mut fields = Vec::new();
        let mut texts = Vec::new();
        for issue in self.validator.iter_errors(&value).take(MAX_ARGUMENT_ISSUES) {
            let path = issue.instance_path().as_str().to_owned();
            let place = if path.is_empty() {
                "the arguments".to_owned()
            } else {
                path.clone()
            };
            texts.push(format!("{place}: {}", shorten(&issue.to_string())));
            if !fields.contains(&path) {
                fields.push(path);
            }
        }
        if texts.is_empty() {
            return Ok(());
        }
        Err(ArgumentIssues {
            message: format!(
                "Invalid arguments for {}: {}.",
                self.spec.name,
                texts.join("; ")
            ),
            fields,
        })
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_ISSUE_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_ISSUE_CHARS).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> Tool {
        Tool::compile(ToolSpec {
            name: "lookup".into(),
            description: "Looks a customer up.".into(),
            input_schema: schema,
            timeout: None,
        })
        .unwrap()
    }

    /// zod 4's `z.toJSONSchema(…, { io: "input" })` of
    /// `z.object({ customer_id: z.string().min(3), kind: z.enum(["a", "b"]),
    /// tags: z.array(z.string()).optional(), nested: z.object({ email: z.email() }).optional() })`
    /// (zod 4.6.7, the repository's devDependency).
    fn zod_schema() -> Value {
        serde_json::from_str(include_str!("../tests/fixtures/zod4-lookup.schema.json")).unwrap()
    }

    #[test]
    fn accepts_zod_4_output_and_names_each_failing_path() {
        let lookup = tool(zod_schema());
        assert_eq!(lookup.check(r#"{"customer_id":"c-42","kind":"a"}"#), Ok(()));
        let issues = lookup
            .check(
                r#"{"customer_id":42,"kind":"a","tags":["x",3],"nested":{"email":"not-an-email"}}"#,
            )
            .unwrap_err();
        assert_eq!(issues.fields, ["/customer_id", "/nested/email", "/tags/1"]);
        assert!(
            issues.message.starts_with(
                "Invalid arguments for lookup: /customer_id: 42 is not of type \"string\"; /nested/email: "
            ),
            "{}",
            issues.message
        );
        let missing = lookup.check("{}").unwrap_err();
        assert_eq!(missing.fields, [""]);
        assert!(missing
            .message
            .contains("the arguments: \"customer_id\" is a required property"));
    }

    #[test]
    fn earlier_drafts_by_their_schema_keyword() {
        let draft7 = tool(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": { "n": { "type": "integer", "exclusiveMaximum": 3 } },
        }));
        assert_eq!(draft7.check(r#"{"n":2}"#), Ok(()));
        assert_eq!(draft7.check(r#"{"n":3}"#).unwrap_err().fields, ["/n"]);
    }

    #[test]
    fn refuses_schemas_it_cannot_use() {
        let compile = |schema: Value| {
            Tool::compile(ToolSpec {
                name: "t".into(),
                description: String::new(),
                input_schema: schema,
                timeout: None,
            })
            .map(|_| ())
            .unwrap_err()
        };
        assert!(compile(json!(true))
            .message
            .contains("must be a JSON object"));
        assert!(compile(json!({"type": 12})).message.contains("not valid"));
        // Nothing is fetched: a remote reference is refused.
        let remote = compile(json!({"$ref": "https://example.com/schema.json"}));
        assert!(
            remote.message.contains("https://example.com/schema.json"),
            "{remote}"
        );
    }

    #[test]
    fn a_huge_offending_value_is_not_quoted_whole() {
        let lookup = tool(json!({"type": "object", "properties": {"q": {"type": "integer"}}}));
        let arguments = format!(r#"{{"q":"{}"}}"#, "x".repeat(100_000));
        let issues = lookup.check(&arguments).unwrap_err();
        assert!(issues.message.len() < 1_000, "{}", issues.message.len());
    }

    #[test]
    fn caps_the_number_of_issues() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "string"}});
        let arguments: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
        let issues = tool(schema)
            .check(&Value::Object(arguments).to_string())
            .unwrap_err();
        assert_eq!(issues.fields.len(), MAX_ARGUMENT_ISSUES);
    }
}
