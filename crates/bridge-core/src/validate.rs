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
    index_of, Rule, Shape, Ty, UnknownKeys, ENVELOPE, EVENT_SHAPES, EVENT_TYPES, MAX_FIELDS,
    MODEL_EVENT, MODEL_KIND_SLOT, NATIVE_KINDS, OUTCOME_ALLOW, OUTCOME_DENY, PAYLOAD_SHAPES,
    RECORD_KEYS, RECORD_PAYLOAD, RECORD_TYPE, STATUS_RESOLVED, TYPE_SLOT, UNKNOWN_KIND_PAYLOAD,
    VERSION_SLOT,
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
    Index(u8),
}

impl Fact {
    /// Whether the value is the name at `index` of the field's list.
    fn is_index(self, index: usize) -> bool {
        matches!(self, Fact::Index(i) if usize::from(i) == index)
    }
}

/// Rendered paths of issues, in schema order. Boxed and absent when empty,
/// so that results stay two words on the (issue-free) hot path: a plain
/// `Vec` is three words and made every `Result<Checked, _>` go through
/// memory.
#[derive(Debug, Default)]
struct Issues(Option<Box<IssueList>>);

#[derive(Debug, Default)]
struct IssueList {
    paths: Vec<String>,
    /// Some issue is not an unknown-key one. Only such issues hold a
    /// refinement back: the reference's unknown-key issues never abort
    /// (zod's `unrecognized_keys`), so a rule still runs beside them.
    holds_rules_back: bool,
}

impl Issues {
    fn one(path: String) -> Self {
        Issues(Some(Box::new(IssueList {
            paths: vec![path],
            holds_rules_back: true,
        })))
    }

    fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|list| list.paths.is_empty())
    }

    /// Whether a refinement of the object these issues belong to must not run.
    fn hold_rules_back(&self) -> bool {
        self.0.as_ref().is_some_and(|list| list.holds_rules_back)
    }

    fn push(&mut self, path: String) {
        let list = self.0.get_or_insert_with(Default::default);
        list.paths.push(path);
        list.holds_rules_back = true;
    }

    /// An object's unknown-key issue, which does not hold rules back.
    fn push_unknown_keys(&mut self, path: String) {
        self.0.get_or_insert_with(Default::default).paths.push(path);
    }

    fn append(&mut self, other: Issues) {
        if let Some(more) = other.0 {
            match &mut self.0 {
                Some(list) => {
                    list.paths.extend(more.paths);
                    list.holds_rules_back |= more.holds_rules_back;
                }
                None => self.0 = Some(more),
            }
        }
    }

    fn into_vec(self) -> Vec<String> {
        self.0.map(|list| list.paths).unwrap_or_default()
    }
}

/// The result of checking one value.
#[derive(Debug, Default)]
struct Checked {
    issues: Issues,
    fact: Fact,
}

impl Checked {
    fn fact(fact: Fact) -> Self {
        Checked {
            issues: Issues::default(),
            fact,
        }
    }

    fn issues(issues: Issues) -> Self {
        Checked {
            issues,
            fact: Fact::Value,
        }
    }
}

/// Converts a list index into a fact (lists are short).
fn index_fact(index: Option<usize>) -> Fact {
    index
        .and_then(|i| u8::try_from(i).ok())
        .map_or(Fact::Value, Fact::Index)
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
        Checked::issues(Issues::one(self.render(None)))
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
                Ok(Checked::fact(if kind == Kind::Null {
                    Fact::Null
                } else {
                    Fact::Value
                }))
            }
            Ty::KindProbe if kind == Kind::String => {
                let found = index_of(&NATIVE_KINDS, c.read_string()?.as_bytes());
                Ok(Checked::fact(index_fact(found)))
            }
            Ty::KindProbe => c.skip().map(|_| Checked::default()),
            Ty::Nullable(_) if kind == Kind::Null => c.skip().map(|_| Checked::fact(Fact::Null)),
            Ty::Nullable(inner) => self.check(c, inner),
            Ty::Str if kind == Kind::String => c.skip().map(|_| Checked::default()),
            Ty::OpenObject if kind == Kind::Object => c.skip().map(|_| Checked::default()),
            Ty::Num if kind == Kind::Number => {
                if c.read_finite_number()? {
                    Ok(Checked::default())
                } else {
                    Ok(self.issue_here())
                }
            }
            Ty::Bool if kind == Kind::Bool => c.read_bool().map(|b| Checked::fact(Fact::Bool(b))),
            Ty::Lit(names) if kind == Kind::String => {
                match index_of(names, c.read_string()?.as_bytes()) {
                    Some(i) => Ok(Checked::fact(index_fact(Some(i)))),
                    None => Ok(self.issue_here()),
                }
            }
            Ty::KindName(names) if kind == Kind::String => {
                let found = index_of(names, c.read_string()?.as_bytes());
                Ok(Checked::fact(index_fact(found)))
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
        let mut issues = Issues::default();
        let mut index = 0;
        while c.next_element()? {
            self.path.push(Segment::Index(index));
            let checked = self.check(c, element);
            self.path.pop();
            issues.append(checked?.issues);
            index += 1;
        }
        Ok(Checked::issues(issues))
    }

    /// Reads an object's members, checking declared keys and noting
    /// undeclared ones. The cursor is at the object.
    fn walk_members<C: JsonCursor>(
        &mut self,
        c: &mut C,
        shape: &'static Shape,
        slots: &mut Slots,
    ) -> Result<bool, C::Error> {
        let mut unknown = false;
        let mut expected = 0;
        c.enter_object()?;
        while let Some(member) = c.next_member(|key| {
            let found = shape.field_index_from(key, expected);
            expected = found.map_or(expected, |i| i + 1);
            found
        })? {
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
        Ok(unknown)
    }

    fn check_object<C: JsonCursor>(
        &mut self,
        c: &mut C,
        shape: &'static Shape,
    ) -> Result<Checked, C::Error> {
        let mut slots = empty_slots();
        let unknown = self.walk_members(c, shape, &mut slots)?;
        Ok(self.assemble(shape, &mut slots, unknown))
    }

    /// Orders an object's issues as §7.3 requires: declared keys in schema
    /// order, then the unknown-key issue, then the rule if nothing but
    /// unknown keys failed (they do not hold a rule back: the reference
    /// reports `event, error` for a `config` event with both).
    fn assemble(&mut self, shape: &'static Shape, slots: &mut Slots, unknown: bool) -> Checked {
        let mut issues = Issues::default();
        for (field, slot) in shape.fields.iter().zip(slots.iter_mut()) {
            match slot {
                None if !field.optional => issues.push(self.render(Some(field.name))),
                None => {}
                Some(checked) => issues.append(std::mem::take(&mut checked.issues)),
            }
        }
        if unknown {
            issues.push_unknown_keys(self.render(None));
        }
        if !issues.hold_rules_back() {
            if let Some(rule) = shape.rule {
                self.apply_rule(rule, shape, slots, &mut issues);
            }
        }
        let fact = shape
            .summary
            .and_then(|name| shape.field_index(name.as_bytes()))
            .and_then(|i| slots[i].as_ref())
            .map_or(Fact::Value, |checked| checked.fact);
        Checked { issues, fact }
    }

    fn apply_rule(&self, rule: Rule, shape: &Shape, slots: &Slots, issues: &mut Issues) {
        let fact = |name: &str| {
            shape
                .field_index(name.as_bytes())
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
                let resolved = fact("status").is_some_and(|f| f.is_index(STATUS_RESOLVED));
                let decided = fact("final_decision")
                    .is_some_and(|f| f.is_index(OUTCOME_ALLOW) || f.is_index(OUTCOME_DENY));
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
        while let Some(member) = c.next_member(|key| index_of(&RECORD_KEYS, key))? {
            match member {
                Some(RECORD_TYPE) => {
                    kind = Some(if c.peek()? == Kind::String {
                        match index_of(&NATIVE_KINDS, c.read_string()?.as_bytes()) {
                            Some(i) => KindChoice::Known(i),
                            None => KindChoice::Unknown,
                        }
                    } else {
                        c.skip()?;
                        KindChoice::NotAString
                    });
                }
                Some(RECORD_PAYLOAD) => {
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
                _ => c.skip()?,
            }
        }

        let mut issues = Issues::default();
        let choice = kind.filter(|k| *k != KindChoice::NotAString);
        if choice.is_none() {
            issues.push(self.render(Some("type")));
        }
        if !matches!(payload, Some(Some(_))) {
            issues.push(self.render(Some("payload")));
        }
        let (Some(choice), Some(Some((checked_with, checked)))) = (choice, payload) else {
            return Ok(Checked::issues(issues));
        };
        if checked_with == choice {
            return Ok(checked);
        }
        // `type` came after `payload` (or changed): read the record again.
        let shape = choice
            .payload_shape()
            .expect("a string kind selects a shape");
        let mut again = c.reopen(&mark);
        again.enter_object()?;
        let mut last = Checked::default();
        let payload_only =
            |key: &[u8]| index_of(&RECORD_KEYS, key).filter(|&i| i == RECORD_PAYLOAD);
        while let Some(member) = again.next_member(payload_only)? {
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
        let mut slots = empty_slots();
        self.walk_members(c, &MODEL_EVENT, &mut slots)?;
        match &slots[MODEL_KIND_SLOT] {
            Some(kind) if kind.issues.is_empty() => {
                if let Fact::Index(_) = kind.fact {
                    Ok(self.assemble(&MODEL_EVENT, &mut slots, false))
                } else {
                    Ok(Checked::default())
                }
            }
            _ => Ok(Checked::issues(Issues::one(self.render(Some("kind"))))),
        }
    }

    /// Checks a document against one shape, with paths relative to it.
    pub(crate) fn check_document<C: JsonCursor>(
        &mut self,
        c: &mut C,
        shape: &'static Shape,
    ) -> Result<Vec<String>, C::Error> {
        let checked = if c.peek()? == Kind::Object {
            self.check_object(c, shape)?
        } else {
            self.mismatch(c)?
        };
        c.end()?;
        Ok(dedup(checked.issues.into_vec()))
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

        // The last `protocol_version` and `type` (§7.2 steps 3–6); strings
        // are only copied when they will appear in an error message.
        let mut version = Head::Absent;
        let mut event_type = Head::Absent;
        // Once `type` names an event, its shape is checked in this same pass
        // (`walking`); `stale` once a member was read without that shape.
        let mut walking: Option<usize> = None;
        let mut slots = empty_slots();
        let mut unknown = false;
        let mut stale = false;

        loop {
            let shape = walking.map(|i| EVENT_SHAPES[i]);
            let find = |key: &[u8]| match shape {
                Some(shape) => shape.field_index(key),
                // Before the type is known, only the two heads are looked for,
                // under their slots in every event shape.
                None => index_of(&ENVELOPE, key).filter(|&i| i == VERSION_SLOT || i == TYPE_SLOT),
            };
            let Some(member) = c.next_member(find)? else {
                break;
            };
            match member {
                Some(VERSION_SLOT) => {
                    version = read_head(c, |v| {
                        crate::version::is_supported_protocol_version(v).then_some(0)
                    })?;
                    if walking.is_some() {
                        slots[VERSION_SLOT] = Some(if version == Head::NotAString {
                            Checked::issues(Issues::one("protocol_version".into()))
                        } else {
                            Checked::default()
                        });
                    }
                }
                Some(TYPE_SLOT) => {
                    event_type = read_head(c, |t| index_of(&EVENT_TYPES, t.as_bytes()))?;
                    let selected = match event_type {
                        Head::Known(i) => Some(i),
                        _ => None,
                    };
                    match (walking, selected) {
                        (Some(current), Some(i)) if current == i => {}
                        (Some(_), _) => {
                            walking = None;
                            stale = true;
                        }
                        (None, Some(i)) if !stale => {
                            walking = Some(i);
                            slots = empty_slots();
                            slots[VERSION_SLOT] =
                                matches!(version, Head::Known(_) | Head::Other(_))
                                    .then(Checked::default);
                            slots[TYPE_SLOT] = Some(Checked::default());
                        }
                        (None, _) => {}
                    }
                }
                Some(j) if walking.is_some() => {
                    let field = &shape.expect("walking has a shape").fields[j];
                    self.path.push(Segment::Key(field.name));
                    let checked = self.check(c, &field.ty);
                    self.path.pop();
                    slots[j] = Some(checked?);
                }
                _ => {
                    if walking.is_some() {
                        unknown = true;
                    } else {
                        stale = true;
                    }
                    c.skip()?;
                }
            }
        }
        c.end()?;

        match version {
            Head::Known(_) => {}
            Head::Other(v) => return Ok(Err(EventIssue::UnsupportedVersion(v))),
            Head::Absent | Head::NotAString => return Ok(Err(EventIssue::VersionNotAString)),
        }
        let index = match event_type {
            Head::Known(i) => i,
            Head::Other(t) => return Ok(Err(EventIssue::UnknownType(t))),
            Head::Absent | Head::NotAString => return Ok(Err(EventIssue::TypeNotAString)),
        };
        let shape = EVENT_SHAPES[index];
        let checked = match walking {
            Some(i) if i == index && !stale => self.assemble(shape, &mut slots, unknown),
            _ => {
                let mut again = c.reopen(&mark);
                self.check_object(&mut again, shape)?
            }
        };
        if checked.issues.is_empty() {
            Ok(Ok(index))
        } else {
            Ok(Err(EventIssue::Payload(dedup(checked.issues.into_vec()))))
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

/// What an event's `protocol_version` or `type` member held.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Head {
    Absent,
    NotAString,
    /// Accepted (for `type`: the index of the event type).
    Known(usize),
    /// A string that is not accepted, kept for the error message.
    Other(String),
}

/// Reads a `protocol_version` or `type` member, judging the string with `accept`.
fn read_head<C: JsonCursor>(
    c: &mut C,
    accept: impl FnOnce(&str) -> Option<usize>,
) -> Result<Head, C::Error> {
    if c.peek()? != Kind::String {
        c.skip()?;
        return Ok(Head::NotAString);
    }
    let text = c.read_string()?;
    Ok(match accept(&text) {
        Some(i) => Head::Known(i),
        None => Head::Other(text.into_owned()),
    })
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
