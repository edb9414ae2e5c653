//! The check of `state.responses` (agentlane's chat completions): each
//! response's fields agentlane requires, as `checkResponse` of
//! lib/store/snapshot.ts judges them. Deeper provider fields are
//! agentlane's to judge when the backend loads the snapshot.

use bridge_core::json::{JsonCursor, Kind};

use crate::snapshot::{corrupted, finder, Checker, Read, Verdict};
use crate::snapshot_js::Val;

impl Checker<'_> {
    pub(crate) fn response(&mut self, field: &str) -> Read<Verdict> {
        if self.cursor.peek()? != Kind::Object {
            let value = self.value()?;
            return Ok(self.kind_is(value, Val::Object, field));
        }
        const KEYS: &[&str] = &["id", "object", "created", "model", "choices"];
        let mut values = [Val::Missing; 4];
        let mut choices: Verdict = Err(corrupted(
            &format!("{field}.choices"),
            "must be an array, not undefined".into(),
        ));
        self.cursor.enter_object()?;
        while let Some(index) = self.cursor.next_member(finder(KEYS))? {
            match index {
                Some(4) => choices = self.array(&format!("{field}.choices"), Self::choice)?,
                Some(index) => values[index] = self.value()?,
                None => self.cursor.skip()?,
            }
        }
        let [id, object, created, model] = values;
        Ok((|| {
            self.expect_string(id, &format!("{field}.id"))?;
            if !(matches!(object, Val::Str(..)) && self.string(object) == "chat.completion") {
                return Err(corrupted(
                    &format!("{field}.object"),
                    format!(
                        "must be \"chat.completion\", not {}",
                        object.describe(self.text)
                    ),
                ));
            }
            if created.safe_integer().is_none() {
                return Err(corrupted(
                    &format!("{field}.created"),
                    format!(
                        "must be a whole number, not {}",
                        created.describe(self.text)
                    ),
                ));
            }
            self.expect_string(model, &format!("{field}.model"))?;
            choices
        })())
    }

    fn choice(&mut self, field: &str) -> Read<Verdict> {
        const REASONS: [&str; 5] = [
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "function_call",
        ];
        if self.cursor.peek()? != Kind::Object {
            let value = self.value()?;
            return Ok(self.kind_is(value, Val::Object, field));
        }
        let (mut index, mut reason) = (Val::Missing, Val::Missing);
        let mut message = Err(Val::Missing);
        self.cursor.enter_object()?;
        while let Some(member) =
            self.cursor
                .next_member(finder(&["index", "finish_reason", "message"]))?
        {
            match member {
                Some(0) => index = self.value()?,
                Some(1) => reason = self.value()?,
                Some(_) => message = self.members::<1>(&["role"])?,
                None => self.cursor.skip()?,
            }
        }
        Ok((|| {
            if index.safe_integer().is_none() {
                return Err(corrupted(
                    &format!("{field}.index"),
                    format!("must be a whole number, not {}", index.describe(self.text)),
                ));
            }
            if !(matches!(reason, Val::Str(..)) && REASONS.contains(&&*self.string(reason))) {
                return Err(corrupted(
                    &format!("{field}.finish_reason"),
                    format!(
                        "must be one of {}, not {}",
                        REASONS.join(", "),
                        reason.describe(self.text)
                    ),
                ));
            }
            let role = match message {
                Ok([role]) => role,
                Err(value) => return self.kind_is(value, Val::Object, &format!("{field}.message")),
            };
            if !(matches!(role, Val::Str(..)) && self.string(role) == "assistant") {
                return Err(corrupted(
                    &format!("{field}.message.role"),
                    format!("must be \"assistant\", not {}", role.describe(self.text)),
                ));
            }
            Ok(())
        })())
    }
}
