//! The schema walker: judges one document against the table in
//! [`crate::schema`] and collects issues the way the reference does (§7.3).
//!
//! It reads through a [`JsonCursor`] in one pass, checking declared keys as
//! they come and skipping everything the schema leaves open. Issues are kept
//! per declared key (a repeated key replaces the earlier result, as in
//! `JSON.parse`) and assembled in schema order when the object ends. Only
//! when a discriminator (an event's `type`, a record's `type`) comes after
//! the keys it governs is an object read a second time.

use crate::json::{JsonCursor, Kind};
use crate::schema::{
    index_of, Rule, Shape, Ty, UnknownKeys, EVENT_SHAPES, EVENT_TYPES, MAX_FIELDS, MODEL_EVENT,
    NATIVE_KINDS, PAYLOAD_SHAPES, RECORD_KEYS, UNKNOWN_KIND_PAYLOAD,
};

/// What a checked value tells its parent's rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Fact {
    /// Present, nothing more to say.
    #[default]
    Value,
    Null,
    Bool(bool),
    /// The value is the n-th name of the field's list.
    Index(usize),
}

/// The result of checking one value.
#[derive(Debug, Default)]
struct Checked {
    /// Rendered paths of the issues found in the value, in schema order.
    issues: Vec<String>,
    fact: Fact,
}

impl Checked {
    fn fact(fact: Fact) -> Self {
        Checked { issues: Vec::new(), fact }
    }
}

/// One declared key of an object being walked.
type Slots = [Option<Checked>; MAX_FIELDS];

fn empty_slots() -> Slots {
    std::array::from_fn(|_| None)
}

#[derive(Clone, Copy, Debug)]
enum Segment {
    Key(&'static str),
    Index(usize),
}

/// Walks documents and keeps the path of the value being checked.
#[derive(Default)]
pub(crate) struct Walker {
    path: Vec<Segment>,
}

/// What the discriminator of a native record selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KindChoice {
    NotAString,
    Known(usize),
    Unknown,
}

impl KindChoice {
    fn payload_shape(self) -> Option<&'static Shape> {
        match self {
            KindChoice::Known(i) => Some(PAYLOAD_SHAPES[i]),
            KindChoice::Unknown => Some(&UNKNOWN_KIND_PAYLOAD),
            KindChoice::NotAString => None,
        }
    }
}

impl Walker {
    /// The current path as the reference renders it: keys and indices
    /// joined with `.`, the empty path as `event`.
    fn render(&self, last: Option<&str>) -> String {
        let mut out = String::new();
        for segment in &self.path {
            if !out.is_empty() {
                out.push('.');
            }
            match segment {
                Segment::Key(k) => out.push_str(k),
                Segment::Index(i) => out.push_str(&i.to_string()),
            }
        }
        if let Some(last) = last {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(last);
        }
        if out.is_empty() {
            out.push_str("event");
        }
        out
    }

    fn issue_here(&self) -> Checked {
        Checked { issues: vec![self.render(None)], fact: Fact::Value }
    }

    /// Skips a value of the wrong kind and reports it at the current path.
    fn mismatch<C: JsonCursor>(&self, c: &mut C) -> Result<Checked, C::Error> {
        c.skip()?;
        Ok(self.issue_here())
    }

    /// Checks the value under the cursor against `ty`, consuming it.
    fn check<C: JsonCursor>(&mut self, c: &mut C, ty: &'static Ty) -> Result<Checked, C::Error> {
        let kind = c.peek()?;
        match ty {
            Ty::Any => {
                c.skip()?;
                Ok(Checked::fact(if kind == Kind::Null { Fact::Null } else { Fact::Value }))
            }
            Ty::KindProbe if kind == Kind::String => {
                let found = index_of(&NATIVE_KINDS, &c.read_string()?);
                Ok(Checked::fact(found.map_or(Fact::Value, Fact::Index)))
            }
            Ty::KindProbe => c.skip().map(|_| Checked::default()),
            Ty::Nullable(_) if kind == Kind::Null => c.skip().map(|_| Checked::fact(Fact::Null)),
            Ty::Nullable(inner) => self.check(c, inner),
            Ty::Str if kind == Kind::String => c.skip().map(|_| Checked::default()),
            Ty::OpenObject if kind == Kind::Object => c.skip().map(|_| Checked::default()),
            Ty::Num if kind == Kind::Number => {
                if c.read_number()?.is_finite() {
                    Ok(Checked::default())
                } else {
                    Ok(self.issue_here())
                }
            }
            Ty::Bool if kind == Kind::Bool => c.read_bool().map(|b| Checked::fact(Fact::Bool(b))),
            Ty::Lit(names) if kind == Kind::String => match index_of(names, &c.read_string()?) {
                Some(i) => Ok(Checked::fact(Fact::Index(i))),
                None => Ok(self.issue_here()),
            },
            Ty::KindName(names) if kind == Kind::String => {
                let found = index_of(names, &c.read_string()?);
                Ok(Checked::fact(found.map_or(Fact::Value, Fact::Index)))
            }
            Ty::ArrayOf(element) if kind == Kind::Array => self.check_array(c, element),
            Ty::Object(shape) if kind == Kind::Object => self.check_object(c, shape),
            Ty::NativeRecord if kind == Kind::Object => self.check_record(c),
            Ty::ModelEvent if kind == Kind::Object => self.check_model_event(c),
            _ => self.mismatch(c),
        }
    }

    fn check_array<C: JsonCursor>(
        &mut self,
        c: &mut C,
        element: &'static Ty,
    ) -> Result<Checked, C::Error> {
        c.enter_array()?;
        let mut issues = Vec::new();
        let mut index = 0;
        while c.next_element()? {
            self.path.push(Segment::Index(index));
            let checked = self.check(c, element);
            self.path.pop();
            issues.extend(checked?.issues);
            index += 1;
        }
        Ok(Checked { issues, fact: Fact::Value })
    }

    /// Reads an object's members, checking declared keys and noting
    /// undeclared ones. The cursor is at the object.
    fn walk_members<C: JsonCursor>(
        &mut self,
        c: &mut C,
        shape: &'static Shape,
    ) -> Result<(Slots, bool), C::Error> {
        let names = field_names(shape);
        let names = &names[..shape.fields.len()];
        let mut slots = empty_slots();
        let mut unknown = false;
        c.enter_object()?;
        while let Some(member) = c.next_member(names)? {
            match member {
                Some(i) => {
                    let field = &shape.fields[i];
                    self.path.push(Segment::Key(field.name));
                    let checked = self.check(c, &field.ty);
                    self.path.pop();
                    slots[i] = Some(checked?);
                }
                None => {
                    unknown |= shape.unknown_keys == UnknownKeys::Reject;
                    c.skip()?;
                }
            }
        }
        Ok((slots, unknown))
    }

    fn check_object<C: JsonCursor>(
        &mut self,
        c: &mut C,
        shape: &'static Shape,
    ) -> Result<Checked, C::Error> {
        let (slots, unknown) = self.walk_members(c, shape)?;
        Ok(self.assemble(shape, slots, unknown))
    }

    /// Orders an object's issues as §7.3 requires: declared keys in schema
    /// order, then the unknown-key issue, then the rule if nothing failed.
    fn assemble(&mut self, shape: &'static Shape, mut slots: Slots, unknown: bool) -> Checked {
        let mut issues = Vec::new();
        for (field, slot) in shape.fields.iter().zip(&mut slots) {
            match slot {
                None if !field.optional => issues.push(self.render(Some(field.name))),
                None => {}
                Some(checked) => issues.append(&mut checked.issues),
            }
        }
        if unknown {
            issues.push(self.render(None));
        }
        if issues.is_empty() {
            if let Some(rule) = shape.rule {
                self.apply_rule(rule, shape, &slots, &mut issues);
            }
        }
        let fact = shape
            .summary
            .and_then(|name| shape.fields.iter().position(|f| f.name == name))
            .and_then(|i| slots[i].as_ref())
            .map_or(Fact::Value, |checked| checked.fact);
        Checked { issues, fact }
    }

    fn apply_rule(&self, rule: Rule, shape: &Shape, slots: &Slots, issues: &mut Vec<String>) {
        let fact = |name: &str| {
            shape
                .fields
                .iter()
                .position(|f| f.name == name)
                .and_then(|i| slots[i].as_ref())
                .map(|checked| checked.fact)
        };
        match rule {
            Rule::ConfigSettlement => match fact("ok") {
                Some(Fact::Bool(true)) => {
                    if fact("config") == Some(Fact::Null) {
                        issues.push(self.render(Some("config")));
                    }
                    if fact("error") != Some(Fact::Null) {
                        issues.push(self.render(Some("error")));
                    }
                }
                Some(Fact::Bool(false)) if fact("error") == Some(Fact::Null) => {
                    issues.push(self.render(Some("error")));
                }
                _ => {}
            },
            Rule::ResolvedApproval => {
                let resolved = fact("status") == Some(Fact::Index(1));
                let decided = matches!(fact("final_decision"), Some(Fact::Index(0 | 1)));
                if resolved && !decided {
                    issues.push(self.render(Some("final_decision")));
                }
            }
            Rule::NoKnownKind => {
                if let Some(Fact::Index(_)) = fact("kind") {
                    issues.push(self.render(Some("kind")));
                }
            }
        }
    }

    /// A native record (§6.2): `type` and `payload` first; the payload is
    /// checked against the shape `type` selects.
    fn check_record<C: JsonCursor>(&mut self, c: &mut C) -> Result<Checked, C::Error> {
        let mark = c.mark()?;
        let mut kind: Option<KindChoice> = None;
        // The last payload: `None` absent, `Some(None)` not an object,
        // `Some(Some((choice, checked)))` checked with that choice, or
        // `Some(Some((NotAString, _)))` not checked yet.
        let mut payload: Option<Option<(KindChoice, Checked)>> = None;
        c.enter_object()?;
        while let Some(member) = c.next_member(&RECORD_KEYS)? {
            match member {
                Some(0) => {
                    kind = Some(if c.peek()? == Kind::String {
                        match index_of(&NATIVE_KINDS, &c.read_string()?) {
                            Some(i) => KindChoice::Known(i),
                            None => KindChoice::Unknown,
                        }
                    } else {
                        c.skip()?;
                        KindChoice::NotAString
                    });
                }
                Some(_) => {
                    payload = Some(if c.peek()? != Kind::Object {
                        c.skip()?;
                        None
                    } else if let Some(shape) = kind.and_then(KindChoice::payload_shape) {
                        self.path.push(Segment::Key("payload"));
                        let checked = self.check_object(c, shape);
                        self.path.pop();
                        Some((kind.unwrap_or(KindChoice::NotAString), checked?))
                    } else {
                        c.skip()?;
                        Some((KindChoice::NotAString, Checked::default()))
                    });
                }
                None => c.skip()?,
            }
        }

        let mut issues = Vec::new();
        let choice = kind.filter(|k| *k != KindChoice::NotAString);
        if choice.is_none() {
            issues.push(self.render(Some("type")));
        }
        if !matches!(payload, Some(Some(_))) {
            issues.push(self.render(Some("payload")));
        }
        let (Some(choice), Some(Some((checked_with, checked)))) = (choice, payload) else {
            return Ok(Checked { issues, fact: Fact::Value });
        };
        if checked_with == choice {
            return Ok(checked);
        }
        // `type` came after `payload` (or changed): read the record again.
        let shape = choice.payload_shape().expect("a string kind selects a shape");
        let mut again = c.reopen(&mark);
        again.enter_object()?;
        let mut last = Checked::default();
        while let Some(member) = again.next_member(&RECORD_KEYS[1..])? {
            if member.is_some() && again.peek()? == Kind::Object {
                self.path.push(Segment::Key("payload"));
                let checked = self.check_object(&mut again, shape);
                self.path.pop();
                last = checked?;
            } else {
                again.skip()?;
            }
        }
        Ok(last)
    }

    /// A model stream event (§6.5): `kind` must be a string; the 13 keys are
    /// required only when `kind` is a known model kind.
    fn check_model_event<C: JsonCursor>(&mut self, c: &mut C) -> Result<Checked, C::Error> {
        let (slots, _) = self.walk_members(c, &MODEL_EVENT)?;
        match &slots[0] {
            Some(kind) if kind.issues.is_empty() => {
                if let Fact::Index(_) = kind.fact {
                    Ok(self.assemble(&MODEL_EVENT, slots, false))
                } else {
                    Ok(Checked::default())
                }
            }
            _ => Ok(Checked { issues: vec![self.render(Some("kind"))], fact: Fact::Value }),
        }
    }

    /// Checks a whole event document (§7.2 steps 2–7). `Err` is a fatal
    /// reading failure of the cursor (step 1).
    pub(crate) fn check_event<C: JsonCursor>(
        &mut self,
        c: &mut C,
    ) -> Result<Result<usize, EventIssue>, C::Error> {
        if c.peek()? != Kind::Object {
            c.skip()?;
            c.end()?;
            return Ok(Err(EventIssue::NotAnObject));
        }
        let mark = c.mark()?;
        c.enter_object()?;

        let mut version: Option<Option<String>> = None;
        let mut event_type: Option<Option<String>> = None;
        // The shape being checked in this pass, with its slots, once `type`
        // is known; `stale` once a member was read without it.
        let mut walk: Option<(usize, Slots, bool)> = None;
        let mut stale = false;
        // Until `type` is known only these two keys matter.
        let mut head = [""; MAX_FIELDS];
        head[..2].copy_from_slice(&["protocol_version", "type"]);

        loop {
            let (names, count) = match &walk {
                Some((i, ..)) => (field_names(EVENT_SHAPES[*i]), EVENT_SHAPES[*i].fields.len()),
                None => (head, 2),
            };
            let names = &names[..count];
            let Some(member) = c.next_member(names)? else { break };
            let name = member.map(|i| names[i]);
            match name {
                Some("protocol_version") => {
                    let value = read_optional_string(c)?;
                    if let Some((_, slots, _)) = &mut walk {
                        slots[0] = Some(if value.is_some() {
                            Checked::default()
                        } else {
                            Checked { issues: vec!["protocol_version".into()], fact: Fact::Value }
                        });
                    }
                    version = Some(value);
                }
                Some("type") => {
                    let value = read_optional_string(c)?;
                    let selected = value.as_deref().and_then(|t| index_of(&EVENT_TYPES, t));
                    match (&mut walk, selected) {
                        (Some((current, slots, _)), Some(i)) if *current == i => {
                            slots[2] = Some(Checked::default());
                        }
                        (Some(_), _) => {
                            walk = None;
                            stale = true;
                        }
                        (None, Some(i)) if !stale => {
                            let mut slots = empty_slots();
                            slots[2] = Some(Checked::default());
                            if let Some(v) = &version {
                                slots[0] = v.as_ref().map(|_| Checked::default());
                            }
                            walk = Some((i, slots, false));
                        }
                        (None, _) => {}
                    }
                    event_type = Some(value);
                }
                _ => match &mut walk {
                    Some((i, slots, unknown)) => {
                        let shape = EVENT_SHAPES[*i];
                        match member {
                            Some(j) => {
                                let field = &shape.fields[j];
                                self.path.push(Segment::Key(field.name));
                                let checked = self.check(c, &field.ty);
                                self.path.pop();
                                slots[j] = Some(checked?);
                            }
                            None => {
                                *unknown = true;
                                c.skip()?;
                            }
                        }
                    }
                    None => {
                        stale = true;
                        c.skip()?;
                    }
                },
            }
        }
        c.end()?;

        let version = match version {
            Some(Some(v)) => v,
            _ => return Ok(Err(EventIssue::VersionNotAString)),
        };
        if !crate::version::is_supported_protocol_version(&version) {
            return Ok(Err(EventIssue::UnsupportedVersion(version)));
        }
        let event_type = match event_type {
            Some(Some(t)) => t,
            _ => return Ok(Err(EventIssue::TypeNotAString)),
        };
        let Some(index) = index_of(&EVENT_TYPES, &event_type) else {
            return Ok(Err(EventIssue::UnknownType(event_type)));
        };
        let shape = EVENT_SHAPES[index];
        let checked = match walk {
            Some((i, slots, unknown)) if i == index && !stale => self.assemble(shape, slots, unknown),
            _ => {
                let mut again = c.reopen(&mark);
                self.check_object(&mut again, shape)?
            }
        };
        if checked.issues.is_empty() {
            Ok(Ok(index))
        } else {
            Ok(Err(EventIssue::Payload(dedup(checked.issues))))
        }
    }
}

/// Why a well-formed JSON document is not a valid event (§7.2 steps 2–7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EventIssue {
    NotAnObject,
    VersionNotAString,
    UnsupportedVersion(String),
    TypeNotAString,
    UnknownType(String),
    Payload(Vec<String>),
}

/// Reads a string member's text, or skips a non-string and gives `None`.
fn read_optional_string<C: JsonCursor>(c: &mut C) -> Result<Option<String>, C::Error> {
    if c.peek()? == Kind::String {
        Ok(Some(c.read_string()?.into_owned()))
    } else {
        c.skip()?;
        Ok(None)
    }
}

/// The declared key names of a shape, in a fixed-size array.
fn field_names(shape: &Shape) -> [&'static str; MAX_FIELDS] {
    let mut names = [""; MAX_FIELDS];
    for (slot, field) in names.iter_mut().zip(shape.fields) {
        *slot = field.name;
    }
    names
}

/// Keeps the first occurrence of each path, in order.
fn dedup(paths: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(paths.len());
    for path in paths {
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}
