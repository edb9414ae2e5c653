//! Judging a `store_save`'s snapshot where the host already holds its text
//! (issue 33): the checks of `checkSnapshot` (lib/store/snapshot.ts) on
//! agentlane 0.22's `AgentSnapshot`, in its order and with its codes, fields
//! and messages, in one pass over the text. A Node store then keeps the
//! backend's text as it is: no `JSON.parse` and no `JSON.stringify` of the
//! conversation on the JavaScript thread per committed run.
//!
//! The text is read with `JSON.parse`'s semantics (the core's
//! [`TextCursor`]: lone surrogate escapes, numbers as doubles, the last of
//! duplicate keys wins). What is checked: every field of the document and
//! of `state`, each history message's `role`, and each response's fields
//! agentlane requires. `__test__/stores/snapshot.test.ts` holds the two
//! checks' verdicts and messages equal.

use std::borrow::Cow;

use bridge_core::json::{JsonCursor, Kind, SyntaxError, TextCursor};

use crate::snapshot_js::{describe_str, is_date_time, Val};
use crate::snapshot_text::{into_revision_first, revision_first};

/// The one `schema_version` agentlane 0.22.0 writes and reads.
pub const SNAPSHOT_SCHEMA_VERSION: u64 = 1;

/// Why a snapshot was refused (`SnapshotError.code` in the Node package).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotErrorCode {
    /// Not agentlane's document: not JSON, a field missing or of the wrong type.
    Corrupted,
    /// A `schema_version` other than 1.
    VersionUnsupported,
    /// Another agent's snapshot (only with an expected agent).
    AgentMismatch,
}

impl SnapshotErrorCode {
    /// The code, kebab-case and stable.
    pub fn code(self) -> &'static str {
        match self {
            SnapshotErrorCode::Corrupted => "snapshot-corrupted",
            SnapshotErrorCode::VersionUnsupported => "snapshot-version-unsupported",
            SnapshotErrorCode::AgentMismatch => "snapshot-agent-mismatch",
        }
    }
}

/// A refused snapshot: `field` is the dotted path of the failing field
/// (`""`: the document), `message` the words of `checkSnapshot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRefusal {
    pub code: SnapshotErrorCode,
    pub field: String,
    pub message: String,
}

/// The agent a snapshot must belong to: its type and, when given, its key.
#[derive(Clone, Copy, Debug)]
pub struct ExpectedAgent<'a> {
    pub agent_type: &'a str,
    pub key: Option<&'a str>,
}

/// A snapshot that passed the checks, with what a store needs of it.
#[derive(Clone, Debug)]
pub struct CheckedSnapshot<'a> {
    pub revision: u64,
    pub agent_type: String,
    pub agent_key: String,
    /// The document's text with its `revision` member first (so that a store
    /// reads a stored revision from the first bytes), otherwise exactly as
    /// given: borrowed when it already is so.
    pub text: Cow<'a, str>,
}

fn refusal(code: SnapshotErrorCode, field: &str, why: String) -> SnapshotRefusal {
    let place = if field.is_empty() {
        "the document"
    } else {
        field
    };
    SnapshotRefusal {
        code,
        field: field.to_owned(),
        message: format!("Snapshot refused ({}): {place} {why}.", code.code()),
    }
}

pub(crate) fn corrupted(field: &str, why: String) -> SnapshotRefusal {
    refusal(SnapshotErrorCode::Corrupted, field, why)
}

pub(crate) type Verdict = Result<(), SnapshotRefusal>;
pub(crate) type Read<T> = Result<T, SyntaxError>;

/// Judges `text` as `checkSnapshot(JSON.parse(text), { agentId })` does.
pub fn check_snapshot<'a>(
    text: &'a str,
    expected: Option<ExpectedAgent<'_>>,
) -> Result<CheckedSnapshot<'a>, SnapshotRefusal> {
    let facts = facts(text, expected)?;
    let moved = revision_first(
        text,
        facts.open,
        facts.close,
        facts.revision,
        &facts.members,
    );
    Ok(facts.with_text(moved))
}

/// `check_snapshot` of text the caller owns (the addon's save path): the
/// revision-first text is made in the same buffer when it can be, so a
/// long conversation is not copied.
pub fn check_snapshot_owned(
    text: String,
    expected: Option<ExpectedAgent<'_>>,
) -> Result<CheckedSnapshot<'static>, SnapshotRefusal> {
    let facts = facts(&text, expected)?;
    let moved = into_revision_first(
        text,
        facts.open,
        facts.close,
        facts.revision,
        &facts.members,
    );
    Ok(facts.with_text(Cow::Owned(moved)))
}

/// What the check read of an accepted snapshot, and where its `revision` members are.
struct Facts {
    revision: u64,
    agent_type: String,
    agent_key: String,
    open: usize,
    close: usize,
    members: Vec<(usize, usize)>,
}

impl Facts {
    fn with_text(self, text: Cow<'_, str>) -> CheckedSnapshot<'_> {
        CheckedSnapshot {
            revision: self.revision,
            agent_type: self.agent_type,
            agent_key: self.agent_key,
            text,
        }
    }
}

fn facts(text: &str, expected: Option<ExpectedAgent<'_>>) -> Result<Facts, SnapshotRefusal> {
    let mut checker = Checker {
        text,
        cursor: TextCursor::new(text),
    };
    // A syntax error gets `parseSnapshot`'s words (the backend's lines were JSON already).
    checker
        .document(expected)
        .unwrap_or_else(|_| Err(corrupted("", "is not JSON".into())))
}

/// The members of an object the check reads, by the index `find` returns.
pub(crate) fn finder(keys: &'static [&'static str]) -> impl FnMut(&[u8]) -> Option<usize> {
    move |key| keys.iter().position(|k| k.as_bytes() == key)
}

pub(crate) struct Checker<'a> {
    pub(crate) text: &'a str,
    pub(crate) cursor: TextCursor<'a>,
}

impl<'a> Checker<'a> {
    /// The value at the cursor, consumed.
    pub(crate) fn value(&mut self) -> Read<Val> {
        let kind = self.cursor.peek()?;
        let start = self.cursor.mark()?;
        self.cursor.skip()?;
        let end = self.cursor.offset();
        Ok(match kind {
            Kind::Null => Val::Null,
            Kind::Bool => Val::Bool(self.text.as_bytes()[start] == b't'),
            // JSON's number grammar is a subset of Rust's, which rounds as JavaScript does.
            Kind::Number => Val::Number(self.text[start..end].parse().unwrap_or(f64::NAN)),
            Kind::String => Val::Str(start + 1, end - 1),
            Kind::Array => Val::Array,
            Kind::Object => Val::Object,
        })
    }

    pub(crate) fn string(&self, value: Val) -> Cow<'a, str> {
        match value {
            Val::Str(start, end) => {
                let raw = &self.text[start..end];
                if raw.contains('\\') {
                    Cow::Owned(bridge_core::json::decode_string_content(raw.as_bytes()).0)
                } else {
                    Cow::Borrowed(raw)
                }
            }
            _ => Cow::Borrowed(""),
        }
    }

    fn document(
        &mut self,
        expected: Option<ExpectedAgent<'_>>,
    ) -> Read<Result<Facts, SnapshotRefusal>> {
        if self.cursor.peek()? != Kind::Object {
            let value = self.value()?;
            self.cursor.end()?;
            return Ok(Err(corrupted(
                "",
                format!("must be an object, not {}", value.describe(self.text)),
            )));
        }
        const KEYS: &[&str] = &[
            "schema_version",
            "agent_id",
            "revision",
            "created_at",
            "state",
        ];
        let (mut version, mut revision, mut created) = (Val::Missing, Val::Missing, Val::Missing);
        let mut agent = (Val::Missing, Val::Missing, Val::Missing);
        let mut state: Verdict = Err(corrupted(
            "state",
            "must be an object, not undefined".into(),
        ));
        // Where each top-level `revision` member lies (from the end of the value before it).
        let mut revision_members = Vec::new();
        let open = self.cursor.mark()?;
        self.cursor.enter_object()?;
        loop {
            let before = self.cursor.offset();
            match self.cursor.next_member(finder(KEYS))? {
                None => break,
                Some(Some(0)) => version = self.value()?,
                Some(Some(1)) => agent = self.agent()?,
                Some(Some(2)) => {
                    revision = self.value()?;
                    revision_members.push((before, self.cursor.offset()));
                }
                Some(Some(3)) => created = self.value()?,
                Some(Some(4)) => state = self.state()?,
                Some(_) => self.cursor.skip()?,
            }
        }
        let close = self.cursor.offset() - 1;
        self.cursor.end()?;
        let verdict = (|| {
            if version == Val::Missing {
                return Err(corrupted("schema_version", "is missing".into()));
            }
            if version != Val::Number(SNAPSHOT_SCHEMA_VERSION as f64) {
                return Err(refusal(
                    SnapshotErrorCode::VersionUnsupported,
                    "schema_version",
                    format!(
                        "is {}; this package reads version {SNAPSHOT_SCHEMA_VERSION} (agentlane 0.22.0)",
                        version.describe(self.text)
                    ),
                ));
            }
            let (agent_value, agent_type, agent_key) = agent;
            if agent_value != Val::Object {
                return Err(corrupted(
                    "agent_id",
                    format!("must be an object, not {}", agent_value.describe(self.text)),
                ));
            }
            self.non_empty(agent_type, "agent_id.type")?;
            self.non_empty(agent_key, "agent_id.key")?;
            let number = match revision.safe_integer() {
                Some(number) if number >= 0.0 => number,
                _ => {
                    return Err(corrupted(
                        "revision",
                        format!(
                            "must be a whole number of at least 0, not {}",
                            revision.describe(self.text)
                        ),
                    ))
                }
            };
            let is_date = matches!(created, Val::Str(..)) && is_date_time(&self.string(created));
            if !is_date {
                let why = if matches!(created, Val::Str(..)) {
                    "must be an ISO 8601 date and time with a time zone"
                } else {
                    "must be a string"
                };
                return Err(corrupted(
                    "created_at",
                    format!("{why}, not {}", created.describe(self.text)),
                ));
            }
            state.clone()?;
            let (agent_type, agent_key) = (self.string(agent_type), self.string(agent_key));
            if let Some(expected) = expected {
                if agent_type != expected.agent_type {
                    return Err(refusal(
                        SnapshotErrorCode::AgentMismatch,
                        "agent_id.type",
                        format!(
                            "is {}, another agent's: this one is {}",
                            describe_str(&agent_type),
                            describe_str(expected.agent_type)
                        ),
                    ));
                }
                if let Some(key) = expected.key.filter(|key| *key != agent_key) {
                    return Err(refusal(
                        SnapshotErrorCode::AgentMismatch,
                        "agent_id.key",
                        format!(
                            "is {}, another agent instance's: this one is {}",
                            describe_str(&agent_key),
                            describe_str(key)
                        ),
                    ));
                }
            }
            Ok((
                number as u64,
                agent_type.into_owned(),
                agent_key.into_owned(),
            ))
        })();
        Ok(verdict.map(|(revision, agent_type, agent_key)| Facts {
            revision,
            agent_type,
            agent_key,
            open,
            close,
            members: revision_members,
        }))
    }

    fn non_empty(&self, value: Val, field: &str) -> Verdict {
        match value {
            Val::Str(start, end) if start == end => {
                Err(corrupted(field, "must not be empty".into()))
            }
            Val::Str(..) => Ok(()),
            other => Err(corrupted(
                field,
                format!("must be a string, not {}", other.describe(self.text)),
            )),
        }
    }

    pub(crate) fn expect_string(&self, value: Val, field: &str) -> Verdict {
        match value {
            Val::Str(..) => Ok(()),
            other => Err(corrupted(
                field,
                format!("must be a string, not {}", other.describe(self.text)),
            )),
        }
    }

    pub(crate) fn kind_is(&self, value: Val, want: Val, field: &str) -> Verdict {
        if value == want {
            return Ok(());
        }
        let what = if want == Val::Array {
            "an array"
        } else {
            "an object"
        };
        Err(corrupted(
            field,
            format!("must be {what}, not {}", value.describe(self.text)),
        ))
    }

    /// `agent_id`: (the value's kind, its `type`, its `key`).
    fn agent(&mut self) -> Read<(Val, Val, Val)> {
        if self.cursor.peek()? != Kind::Object {
            return Ok((self.value()?, Val::Missing, Val::Missing));
        }
        let (mut agent_type, mut key) = (Val::Missing, Val::Missing);
        self.cursor.enter_object()?;
        while let Some(index) = self.cursor.next_member(finder(&["type", "key"]))? {
            match index {
                Some(0) => agent_type = self.value()?,
                Some(_) => key = self.value()?,
                None => self.cursor.skip()?,
            }
        }
        Ok((Val::Object, agent_type, key))
    }

    /// `state`, judged in `checkState`'s order.
    fn state(&mut self) -> Read<Verdict> {
        if self.cursor.peek()? != Kind::Object {
            let value = self.value()?;
            return Ok(self.kind_is(value, Val::Object, "state"));
        }
        const KEYS: &[&str] = &[
            "instructions",
            "history",
            "responses",
            "shim_state",
            "turn_count",
        ];
        let (mut instructions, mut shim_state, mut turns) =
            (Val::Missing, Val::Missing, Val::Missing);
        let mut history: Verdict = Err(corrupted(
            "state.history",
            "must be an array, not undefined".into(),
        ));
        let mut responses: Verdict = Err(corrupted(
            "state.responses",
            "must be an array, not undefined".into(),
        ));
        self.cursor.enter_object()?;
        while let Some(index) = self.cursor.next_member(finder(KEYS))? {
            match index {
                Some(0) => instructions = self.value()?,
                Some(1) => history = self.array("state.history", Self::message)?,
                Some(2) => responses = self.array("state.responses", Self::response)?,
                Some(3) => shim_state = self.value()?,
                Some(_) => turns = self.value()?,
                None => self.cursor.skip()?,
            }
        }
        Ok((|| {
            match instructions {
                Val::Missing => return Err(corrupted("state.instructions", "is missing".into())),
                Val::Null => {}
                other => self.expect_string(other, "state.instructions")?,
            }
            history?;
            responses?;
            self.kind_is(shim_state, Val::Object, "state.shim_state")?;
            match turns.safe_integer() {
                Some(number) if number >= 0.0 => Ok(()),
                _ => Err(corrupted(
                    "state.turn_count",
                    format!(
                        "must be a whole number of at least 0, not {}",
                        turns.describe(self.text)
                    ),
                )),
            }
        })())
    }

    /// An array whose elements `element` judges; the first failure is its verdict (the rest is skipped).
    pub(crate) fn array(
        &mut self,
        field: &str,
        element: fn(&mut Self, &str) -> Read<Verdict>,
    ) -> Read<Verdict> {
        if self.cursor.peek()? != Kind::Array {
            let value = self.value()?;
            return Ok(self.kind_is(value, Val::Array, field));
        }
        let mut verdict = Ok(());
        self.cursor.enter_array()?;
        let mut index = 0;
        while self.cursor.next_element()? {
            if verdict.is_ok() {
                verdict = element(self, &format!("{field}.{index}"))?;
            } else {
                self.cursor.skip()?;
            }
            index += 1;
        }
        Ok(verdict)
    }

    /// Reads an object's members named in `keys` (the last of duplicates wins), or its kind.
    pub(crate) fn members<const N: usize>(
        &mut self,
        keys: &'static [&'static str],
    ) -> Read<Result<[Val; N], Val>> {
        if self.cursor.peek()? != Kind::Object {
            return Ok(Err(self.value()?));
        }
        let mut values = [Val::Missing; N];
        self.cursor.enter_object()?;
        while let Some(index) = self.cursor.next_member(finder(keys))? {
            match index {
                Some(index) => values[index] = self.value()?,
                None => self.cursor.skip()?,
            }
        }
        Ok(Ok(values))
    }

    fn message(&mut self, field: &str) -> Read<Verdict> {
        Ok(match self.members::<1>(&["role"])? {
            Ok([role]) => self.expect_string(role, &format!("{field}.role")),
            Err(value) => self.kind_is(value, Val::Object, field),
        })
    }
}
