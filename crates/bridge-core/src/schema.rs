//! The protocol's schema table: every bridge event and native record shape of
//! docs/protocol.md §5 and §6, as data.
//!
//! Field order is check order, and check order decides the order of error
//! paths (§7.3), so each list follows the spec's tables exactly. The
//! validator in [`crate::validate`] is the only code that interprets this
//! table.

/// What a field's value must be.
#[derive(Debug)]
pub enum Ty {
    /// A string.
    Str,
    /// A finite number (a literal beyond the double range is infinite and fails).
    Num,
    /// `true` or `false`.
    Bool,
    /// Any JSON value; only absence fails.
    Any,
    /// Any JSON object, contents not inspected.
    OpenObject,
    /// One of these strings.
    Lit(&'static [&'static str]),
    /// `null` or the inner type.
    Nullable(&'static Ty),
    /// An array whose every element has the inner type.
    ArrayOf(&'static Ty),
    /// An object with this shape.
    Object(&'static Shape),
    /// A string; the validator notes whether it is one of these names (used
    /// where a kind name selects further checks).
    KindName(&'static [&'static str]),
    /// Any value; the validator notes whether it is a string naming a known
    /// native kind (used to find contradictory records, §6.2 step 2).
    KindProbe,
    /// A native record `{type, payload, …}` dispatched on `type` (§6.2).
    NativeRecord,
    /// A model stream event, fully checked only for known model kinds (§6.5).
    ModelEvent,
}

/// One declared key of an object.
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    /// An optional key may be absent; if present its value must match `ty`.
    pub optional: bool,
}

/// What an object does with keys it does not declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownKeys {
    /// Closed object: any undeclared key is one issue at the object's path.
    Reject,
    /// Open object: undeclared keys are kept and not inspected.
    Keep,
}

/// A cross-field rule, checked only when its object has no other issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `config` event: `ok: true` needs a document and no error; `ok: false` needs an error.
    ConfigSettlement,
    /// Approval record: `status: "resolved"` needs an allow/deny `final_decision`.
    ResolvedApproval,
    /// Payload of an unknown native kind: `kind` must not name a known kind.
    NoKnownKind,
}

/// An object's declared keys, in check order.
#[derive(Debug)]
pub struct Shape {
    pub fields: &'static [Field],
    pub unknown_keys: UnknownKeys,
    pub rule: Option<Rule>,
    /// The field whose value summarises this object for a parent's rule
    /// (a decision's `outcome`).
    pub summary: Option<&'static str>,
}

impl Shape {
    /// The index of the declared key equal to `key`.
    #[inline]
    pub fn field_index(&self, key: &[u8]) -> Option<usize> {
        self.fields
            .iter()
            .position(|f| bytes_eq(f.name.as_bytes(), key))
    }

    /// Like [`field_index`](Self::field_index), trying `expected` first:
    /// writers emit keys in a stable order, so the key after the one matched
    /// last is usually the next declared one.
    #[inline]
    pub fn field_index_from(&self, key: &[u8], expected: usize) -> Option<usize> {
        match self.fields.get(expected) {
            Some(f) if bytes_eq(f.name.as_bytes(), key) => Some(expected),
            _ => self.field_index(key),
        }
    }
}

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        optional: false,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        optional: true,
    }
}

const fn open(fields: &'static [Field]) -> Shape {
    Shape {
        fields,
        unknown_keys: UnknownKeys::Keep,
        rule: None,
        summary: None,
    }
}

const fn closed(fields: &'static [Field]) -> Shape {
    Shape {
        fields,
        unknown_keys: UnknownKeys::Reject,
        rule: None,
        summary: None,
    }
}

const NULLABLE_STR: Ty = Ty::Nullable(&Ty::Str);
const NULLABLE_NUM: Ty = Ty::Nullable(&Ty::Num);

// ---- bridge events (§5) ----------------------------------------------------

/// The bridge event types, in reference order (`KNOWN_EVENT_TYPES`).
pub const EVENT_TYPES: [&str; 11] = [
    "ready",
    "config",
    "run_start",
    "run_complete",
    "run_cancelled",
    "error",
    "reset",
    "cancel_requested",
    "cancel_ignored",
    "shutdown",
    "run_event",
];

/// A bridge event type (§5). `EVENT_TYPES[t as usize]` is its wire name:
/// the variants are in `KNOWN_EVENT_TYPES` order (pinned by a test).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Ready,
    Config,
    RunStart,
    RunComplete,
    RunCancelled,
    Error,
    Reset,
    CancelRequested,
    CancelIgnored,
    Shutdown,
    RunEvent,
}

impl EventType {
    /// Every type, in [`EVENT_TYPES`] order.
    pub const ALL: [EventType; 11] = [
        EventType::Ready,
        EventType::Config,
        EventType::RunStart,
        EventType::RunComplete,
        EventType::RunCancelled,
        EventType::Error,
        EventType::Reset,
        EventType::CancelRequested,
        EventType::CancelIgnored,
        EventType::Shutdown,
        EventType::RunEvent,
    ];

    /// The wire name (`"run_event"`, …).
    pub fn as_str(self) -> &'static str {
        EVENT_TYPES[self as usize]
    }

    /// The type named by the wire name, if any (exact comparison).
    pub fn from_name(name: &str) -> Option<EventType> {
        index_of(&EVENT_TYPES, name.as_bytes()).map(Self::from_index)
    }

    /// The type at an index of [`EVENT_TYPES`].
    pub(crate) fn from_index(index: usize) -> EventType {
        Self::ALL[index]
    }
}

/// The keys every event declares first, in slot order: an event shape's
/// field `i` is `ENVELOPE[i]` for these three.
pub const ENVELOPE: [&str; 3] = ["protocol_version", "ts", "type"];
/// Slot of `protocol_version` in every event shape.
pub const VERSION_SLOT: usize = position(&ENVELOPE, "protocol_version");
/// Slot of `type` in every event shape.
pub const TYPE_SLOT: usize = position(&ENVELOPE, "type");

/// The envelope every event starts with; `type` is checked by the caller.
macro_rules! event {
    ($name:literal $(, $field:expr)* ; rule $rule:expr) => {
        Shape { rule: Some($rule), ..event!($name $(, $field)*) }
    };
    ($name:literal $(, $field:expr)*) => {
        Shape {
            fields: &[
                req(ENVELOPE[0], Ty::Str),
                req(ENVELOPE[1], Ty::Num),
                req(ENVELOPE[2], Ty::Lit(&[$name])),
                $($field,)*
            ],
            unknown_keys: UnknownKeys::Reject,
            rule: None,
            summary: None,
        }
    };
}

static CONFIG_ERROR: Shape = closed(&[
    req(
        "code",
        Ty::Lit(&["invalid", "unsupported", "rejected", "internal"]),
    ),
    req("message", Ty::Str),
]);

static READY: Shape = event!(
    "ready",
    req("version", Ty::Str),
    req("package", Ty::Str),
    opt("metadata", Ty::OpenObject),
    opt("config", Ty::OpenObject)
);
static CONFIG: Shape = event!(
    "config",
    req("ok", Ty::Bool),
    req("config", Ty::Nullable(&Ty::OpenObject)),
    req("error", Ty::Nullable(&Ty::Object(&CONFIG_ERROR)));
    rule Rule::ConfigSettlement
);
static RUN_START: Shape = event!("run_start", req("prompt", Ty::Str));
static RUN_COMPLETE: Shape = event!(
    "run_complete",
    req("final_output", Ty::Any),
    req("turn_count", Ty::Num),
    req("response_count", Ty::Num),
    req("shim_state", Ty::OpenObject)
);
static RUN_CANCELLED: Shape = event!("run_cancelled");
static ERROR: Shape = event!(
    "error",
    req("message", Ty::Str),
    req("scope", Ty::Lit(&["command", "run"]))
);
static RESET: Shape = event!("reset", opt("config", Ty::OpenObject));
static CANCEL_REQUESTED: Shape = event!("cancel_requested");
static CANCEL_IGNORED: Shape = event!("cancel_ignored", req("reason", Ty::Str));
static SHUTDOWN: Shape = event!("shutdown");
static RUN_EVENT: Shape = event!("run_event", req("event", Ty::NativeRecord));

/// The shape of each bridge event type, in [`EVENT_TYPES`] order.
pub static EVENT_SHAPES: [&Shape; 11] = [
    &READY,
    &CONFIG,
    &RUN_START,
    &RUN_COMPLETE,
    &RUN_CANCELLED,
    &ERROR,
    &RESET,
    &CANCEL_REQUESTED,
    &CANCEL_IGNORED,
    &SHUTDOWN,
    &RUN_EVENT,
];

// ---- native records (§6) ---------------------------------------------------

/// The known native kinds, in reference order.
pub const NATIVE_KINDS: [&str; 12] = [
    "model_stream",
    "agent_start",
    "agent_end",
    "llm_start",
    "llm_end",
    "tool_start",
    "tool_end",
    "tool_approval",
    "handoff_start",
    "handoff_end",
    "state_snapshot",
    "plan_updated",
];

/// The known model stream kinds (§6.5).
pub const MODEL_KINDS: [&str; 6] = [
    "provider",
    "text_delta",
    "tool_call_arguments_delta",
    "reasoning",
    "completed",
    "error",
];

/// Names of the two keys of a native record, in check order.
pub const RECORD_KEYS: [&str; 2] = ["type", "payload"];
/// Index of `type` in [`RECORD_KEYS`].
pub const RECORD_TYPE: usize = position(&RECORD_KEYS, "type");
/// Index of `payload` in [`RECORD_KEYS`].
pub const RECORD_PAYLOAD: usize = position(&RECORD_KEYS, "payload");

static FUNCTION: Shape = open(&[req("name", Ty::Str), req("arguments", Ty::Str)]);
static TOOL_CALL: Shape = open(&[
    req("id", Ty::Str),
    req("type", Ty::Lit(&["function"])),
    req("function", Ty::Object(&FUNCTION)),
]);
static USAGE: Shape = open(&[
    req("prompt_tokens", Ty::Num),
    req("completion_tokens", Ty::Num),
    req("total_tokens", Ty::Num),
]);
static RESPONSE: Shape = open(&[
    req("id", Ty::Str),
    req("choices", Ty::ArrayOf(&Ty::OpenObject)),
    req("created", Ty::Num),
    req("model", Ty::Str),
    req("object", Ty::Lit(&["chat.completion"])),
    opt("usage", Ty::Nullable(&Ty::Object(&USAGE))),
]);
static RESULT: Shape = open(&[
    req("final_output", Ty::Any),
    req("responses", Ty::ArrayOf(&Ty::Object(&RESPONSE))),
    req("turn_count", Ty::Num),
    req("run_state", Ty::Nullable(&Ty::OpenObject)),
]);
static TOOL_ERROR: Shape = open(&[req("message", Ty::Str), req("kind", NULLABLE_STR)]);
static APPROVAL_REQUEST: Shape = open(&[
    req("tool_name", Ty::Str),
    req("operation", Ty::Str),
    req("cwd", Ty::Str),
    req("path", NULLABLE_STR),
    req("command", NULLABLE_STR),
    req("skill_name", NULLABLE_STR),
    req("reason", NULLABLE_STR),
    req("run_id", NULLABLE_STR),
    req("agent_name", NULLABLE_STR),
    req("tool_call_id", NULLABLE_STR),
    req("metadata", Ty::OpenObject),
]);
/// The decision outcomes; the rule for resolved records reads the index.
pub const OUTCOMES: [&str; 3] = ["allow", "deny", "require_approval"];
/// Index of `allow` in [`OUTCOMES`].
pub const OUTCOME_ALLOW: usize = position(&OUTCOMES, "allow");
/// Index of `deny` in [`OUTCOMES`].
pub const OUTCOME_DENY: usize = position(&OUTCOMES, "deny");
static DECISION: Shape = Shape {
    fields: &[
        req("outcome", Ty::Lit(&OUTCOMES)),
        req("reason", NULLABLE_STR),
    ],
    unknown_keys: UnknownKeys::Keep,
    rule: None,
    summary: Some("outcome"),
};
/// The record statuses; the rule for resolved records reads the index.
pub const STATUSES: [&str; 2] = ["pending", "resolved"];
/// Index of `resolved` in [`STATUSES`].
pub const STATUS_RESOLVED: usize = position(&STATUSES, "resolved");
static APPROVAL_RECORD: Shape = Shape {
    fields: &[
        req("request_id", Ty::Str),
        req("request", Ty::Object(&APPROVAL_REQUEST)),
        req("approval_required_decision", Ty::Object(&DECISION)),
        req("status", Ty::Lit(&STATUSES)),
        req("final_decision", Ty::Nullable(&Ty::Object(&DECISION))),
    ],
    unknown_keys: UnknownKeys::Keep,
    rule: Some(Rule::ResolvedApproval),
    summary: None,
};
static APPROVAL_EVENT: Shape = open(&[req("record", Ty::Object(&APPROVAL_RECORD))]);
static PLAN_STEP: Shape = open(&[req("step", Ty::Str), req("status", Ty::Str)]);
static SNAPSHOT: Shape = open(&[
    req("turn_count", Ty::Num),
    req("history_length", Ty::Num),
    req("response_count", Ty::Num),
    req("shim_state", Ty::OpenObject),
]);

/// Slot of `kind` in [`MODEL_EVENT`] (pinned by a test).
pub const MODEL_KIND_SLOT: usize = 0;

/// The model event's 13 keys, required together for known model kinds.
pub static MODEL_EVENT: Shape = open(&[
    req("kind", Ty::KindName(&MODEL_KINDS)),
    req("raw", Ty::Any),
    req("provider_event_type", NULLABLE_STR),
    req("item_index", NULLABLE_NUM),
    req("item_type", NULLABLE_STR),
    req("text", NULLABLE_STR),
    req("tool_call_id", NULLABLE_STR),
    req("tool_call_index", NULLABLE_NUM),
    req("arguments_delta", NULLABLE_STR),
    req("reasoning", Ty::Any),
    req("reasoning_signature", NULLABLE_STR),
    req("response", Ty::Nullable(&Ty::Object(&RESPONSE))),
    req("error", Ty::Nullable(&Ty::OpenObject)),
]);

/// A payload: `kind` equal to the record type, then the kind's fields.
/// `lineage` inlines the four lineage fields (§6.3).
macro_rules! payload {
    ($kind:literal, lineage $(, $field:expr)*) => {
        open(&[
            req("kind", Ty::Lit(&[$kind])),
            req("task_name", Ty::Str),
            req("task_id", Ty::Str),
            req("parent_task_id", NULLABLE_STR),
            req("is_root", Ty::Bool),
            $($field,)*
        ])
    };
    ($kind:literal $(, $field:expr)*) => {
        open(&[req("kind", Ty::Lit(&[$kind])), $($field,)*])
    };
}

static MODEL_STREAM: Shape = payload!("model_stream", req("event", Ty::ModelEvent));
static AGENT_START: Shape = payload!("agent_start", lineage);
static AGENT_END: Shape = payload!(
    "agent_end",
    lineage,
    req("result", Ty::Nullable(&Ty::Object(&RESULT)))
);
static LLM_START: Shape = payload!(
    "llm_start",
    lineage,
    req("messages", Ty::ArrayOf(&Ty::OpenObject))
);
static LLM_END: Shape = payload!("llm_end", lineage, req("response", Ty::Object(&RESPONSE)));
static TOOL_START: Shape = payload!(
    "tool_start",
    lineage,
    req("tool_call", Ty::Object(&TOOL_CALL)),
    req("is_delegation", Ty::Bool)
);
static TOOL_END: Shape = payload!(
    "tool_end",
    lineage,
    req("tool_call", Ty::Object(&TOOL_CALL)),
    req("is_delegation", Ty::Bool),
    req("result", Ty::Any),
    req("ok", Ty::Bool),
    req("error", Ty::Nullable(&Ty::Object(&TOOL_ERROR)))
);
static TOOL_APPROVAL: Shape = payload!("tool_approval", req("event", Ty::Object(&APPROVAL_EVENT)));
static HANDOFF_START: Shape = payload!(
    "handoff_start",
    lineage,
    req("tool_call", Ty::Object(&TOOL_CALL)),
    req("target_name", Ty::Str)
);
static HANDOFF_END: Shape = payload!(
    "handoff_end",
    lineage,
    req("tool_call", Ty::Object(&TOOL_CALL)),
    req("target_name", Ty::Str),
    req("result", Ty::Object(&RESULT))
);
static STATE_SNAPSHOT: Shape = payload!(
    "state_snapshot",
    req("boundary", Ty::Str),
    req("snapshot", Ty::Object(&SNAPSHOT))
);
static PLAN_UPDATED: Shape = payload!(
    "plan_updated",
    lineage,
    req("tool_call", Ty::Object(&TOOL_CALL)),
    req("plan", Ty::ArrayOf(&Ty::Object(&PLAN_STEP))),
    req("explanation", NULLABLE_STR)
);

/// The payload shape of each known native kind, in [`NATIVE_KINDS`] order.
pub static PAYLOAD_SHAPES: [&Shape; 12] = [
    &MODEL_STREAM,
    &AGENT_START,
    &AGENT_END,
    &LLM_START,
    &LLM_END,
    &TOOL_START,
    &TOOL_END,
    &TOOL_APPROVAL,
    &HANDOFF_START,
    &HANDOFF_END,
    &STATE_SNAPSHOT,
    &PLAN_UPDATED,
];

/// The payload of an unknown native kind: accepted intact unless its `kind`
/// names a known kind (a contradictory record).
pub static UNKNOWN_KIND_PAYLOAD: Shape = Shape {
    fields: &[opt("kind", Ty::KindProbe)],
    unknown_keys: UnknownKeys::Keep,
    rule: Some(Rule::NoKnownKind),
    summary: None,
};

// ---- commands (§4) -----------------------------------------------------------

/// The command types, in reference order (`KNOWN_COMMAND_TYPES`).
pub const COMMAND_TYPES: [&str; 6] = [
    "prompt",
    "approve",
    "cancel",
    "configure",
    "reset",
    "shutdown",
];

/// What each command needs so that the backend does what the host meant
/// (§4.1, §4.2). Open: the backend ignores other keys, and so do we.
pub static COMMAND_SHAPES: [&Shape; 6] = [
    &open(&[req("text", Ty::Str)]),
    &open(&[
        req("id", Ty::Str),
        req("allowed", Ty::Bool),
        opt("reason", Ty::Str),
    ]),
    &open(&[]),
    &open(&[req("patch", Ty::OpenObject)]),
    &open(&[]),
    &open(&[]),
];

/// The most keys any shape declares; the validator keeps one slot per key.
pub const MAX_FIELDS: usize = 16;

/// Index of `name` in `list`, at compile time: naming a slot by its key
/// instead of a number. Fails the build if `name` is missing.
const fn position(list: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < list.len() {
        let (a, b) = (list[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut k = 0;
            while k < a.len() && a[k] == b[k] {
                k += 1;
            }
            if k == a.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("name not in list")
}

/// Index of `name` in `list`, by exact comparison.
pub fn index_of(list: &[&str], name: &[u8]) -> Option<usize> {
    list.iter().position(|n| bytes_eq(n.as_bytes(), name))
}

/// Byte equality for the short names of the table, without a call into
/// `memcmp` (names are compared once per member of every object walked):
/// up to 16 bytes are compared as two overlapping words.
#[inline]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
    match n {
        0 => true,
        1..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_shapes() -> Vec<&'static Shape> {
        let mut shapes: Vec<&'static Shape> = Vec::new();
        shapes.extend(EVENT_SHAPES.iter().copied());
        shapes.extend(PAYLOAD_SHAPES.iter().copied());
        shapes.extend([
            &MODEL_EVENT,
            &UNKNOWN_KIND_PAYLOAD,
            &APPROVAL_RECORD,
            &APPROVAL_REQUEST,
        ]);
        shapes
    }

    #[test]
    fn every_shape_fits_the_slot_array() {
        for shape in all_shapes() {
            assert!(shape.fields.len() <= MAX_FIELDS);
        }
    }

    #[test]
    fn payload_kind_literals_match_their_kind() {
        for (kind, shape) in NATIVE_KINDS.iter().zip(PAYLOAD_SHAPES) {
            match shape.fields[0].ty {
                Ty::Lit(names) => assert_eq!(names, [*kind]),
                ref other => panic!("{kind}: first field is {other:?}"),
            }
        }
    }

    #[test]
    fn event_types_are_in_table_order() {
        for (i, t) in EventType::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
            assert_eq!(t.as_str(), EVENT_TYPES[i]);
            assert_eq!(EventType::from_name(EVENT_TYPES[i]), Some(*t));
        }
        assert_eq!(EventType::from_name("toString"), None);
    }

    #[test]
    fn named_slots_point_at_their_keys() {
        for shape in EVENT_SHAPES {
            assert_eq!(shape.fields[VERSION_SLOT].name, "protocol_version");
            assert_eq!(shape.fields[TYPE_SLOT].name, "type");
        }
        assert_eq!(MODEL_EVENT.fields[MODEL_KIND_SLOT].name, "kind");
        assert_eq!(RECORD_KEYS[RECORD_TYPE], "type");
        assert_eq!(RECORD_KEYS[RECORD_PAYLOAD], "payload");
        assert_eq!(OUTCOMES[OUTCOME_ALLOW], "allow");
        assert_eq!(OUTCOMES[OUTCOME_DENY], "deny");
        assert_eq!(STATUSES[STATUS_RESOLVED], "resolved");
    }

    #[test]
    fn event_type_literals_match_their_type() {
        for (name, shape) in EVENT_TYPES.iter().zip(EVENT_SHAPES) {
            let names: Vec<_> = shape.fields.iter().map(|f| f.name).collect();
            assert_eq!(&names[..3], ["protocol_version", "ts", "type"]);
            match shape.fields[2].ty {
                Ty::Lit(names) => assert_eq!(names, [*name]),
                ref other => panic!("{name}: type field is {other:?}"),
            }
        }
    }
}
