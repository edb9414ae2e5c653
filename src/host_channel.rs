//! N-API binding of `bridge-host-channel`'s `Channel` (docs/host-channel.md
//! §8): Node judges the backend's channel lines, validates a tool call's
//! arguments and ends calls with the same code as `agentlane-bridge`, so
//! there is no second judge in JavaScript. Thin on purpose: bytes in, the
//! core's outputs out as plain objects; the clock is read here (the core
//! takes `Instant`s), everything else is the core's. Every export catches
//! panics (`catch_unwind`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bridge_core::framer::{Frame, LineFramer};
use bridge_core::reader::LARGE_LINE_BYTES;
use bridge_host_channel::{
    check_snapshot, check_snapshot_owned, AbortReason, Answer, CallId, Channel, ChannelOptions,
    ExpectedAgent, Output, ReplyErrorKind, Request, SnapshotRefusal, StoreOptions, ToolSpec,
};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use crate::external::LineText;

/// One tool as the TypeScript layer declares it.
#[napi(object)]
pub struct HostToolDeclaration {
    pub name: String,
    pub description: String,
    /// The input schema as JSON text.
    pub input_schema: String,
    /// The call's deadline in milliseconds; none: the channel's default.
    pub timeout_ms: Option<f64>,
}

/// What the channel serves.
#[napi(object)]
pub struct HostChannelConfig {
    pub tools: Vec<HostToolDeclaration>,
    /// The default call deadline in milliseconds; none: no deadline.
    pub call_timeout_ms: Option<f64>,
    /// Whether the conversation has a store.
    pub store: bool,
    /// A store operation's deadline in milliseconds; none: no deadline.
    pub store_timeout_ms: Option<f64>,
    /// The longest line taken from the backend; none: the protocol's limit.
    pub max_line_bytes: Option<f64>,
}

/// JSON text for JavaScript: a large ASCII one (a long conversation's
/// snapshot) becomes a V8 external string over this memory, so the
/// JavaScript thread does not copy it again (src/external.rs).
pub struct JsonText(LineText);

impl JsonText {
    fn new(text: String) -> Self {
        if text.len() >= LARGE_LINE_BYTES && text.is_ascii() {
            JsonText(LineText::Latin1(text.into_bytes()))
        } else {
            JsonText(LineText::Utf8(text))
        }
    }
}

impl ToNapiValue for JsonText {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        value.0.into_js(env)
    }
}

/// One output of the core (see `bridge_host_channel::Output`), flattened:
/// `kind` says which fields are set.
#[napi(object, object_from_js = false)]
pub struct HostChannelOutput {
    /// `send`, `request`, `abort` or `diagnostic`.
    pub kind: String,
    /// `send`: the line to write, newline included.
    pub line: Option<Buffer>,
    /// `request`, `abort`: the call's number.
    pub call: Option<u32>,
    /// `request`: `call_tool`, `store_load`, `store_save` or `store_delete`.
    /// `abort`: `cancelled`, `timeout`, `lost` or `closed`. `diagnostic`: the code.
    pub what: Option<String>,
    /// `call_tool`: the tool. `diagnostic`: the message.
    pub name: Option<String>,
    /// `call_tool`: the arguments' JSON text; `store_save`: the snapshot's,
    /// checked, its `revision` member first (`snapshotText` of the core).
    #[napi(ts_type = "string")]
    pub json: Option<JsonText>,
    pub tool_call_id: Option<String>,
    pub run_id: Option<String>,
    /// `store_save`: the snapshot's revision.
    pub revision: Option<f64>,
    /// `store_save`: the snapshot's agent (`agent_id.type`, `agent_id.key`).
    pub agent_type: Option<String>,
    pub agent_key: Option<String>,
    /// `store_save`: why the snapshot was refused (then no `json`): the
    /// store is not asked, the backend is answered `store-error`.
    pub refused: Option<SnapshotRefused>,
    /// `store_save`, `store_delete`: the expected revision (none: the store must be empty).
    pub expected_revision: Option<f64>,
    /// `diagnostic`: the failing fields; the request id, when one was read.
    pub fields: Option<Vec<String>>,
    pub id: Option<String>,
}

/// A snapshot refused by the check (`SnapshotError` in TypeScript).
#[napi(object)]
pub struct SnapshotRefused {
    /// `snapshot-corrupted`, `snapshot-version-unsupported` or `snapshot-agent-mismatch`.
    pub code: String,
    /// The failing field's dotted path (`""`: the document).
    pub field: String,
    pub message: String,
}

impl From<SnapshotRefusal> for SnapshotRefused {
    fn from(refusal: SnapshotRefusal) -> Self {
        SnapshotRefused {
            code: refusal.code.code().to_owned(),
            field: refusal.field,
            message: refusal.message,
        }
    }
}

/// A snapshot's text judged as the store path judges a backend's save.
#[napi(object)]
pub struct SnapshotTextCheck {
    /// The text with its `revision` member first (none when refused).
    pub text: Option<String>,
    pub revision: Option<f64>,
    pub agent_type: Option<String>,
    pub agent_key: Option<String>,
    pub refused: Option<SnapshotRefused>,
}

/// Checks snapshot JSON text as `checkSnapshot(JSON.parse(text), { agentId })`
/// does, in Rust (issue 33: the save path parses nothing in JavaScript).
#[napi(catch_unwind)]
pub fn check_snapshot_text(
    text: String,
    agent_type: Option<String>,
    agent_key: Option<String>,
) -> SnapshotTextCheck {
    let expected = agent_type.as_deref().map(|agent_type| ExpectedAgent {
        agent_type,
        key: agent_key.as_deref(),
    });
    match check_snapshot(&text, expected) {
        Ok(checked) => SnapshotTextCheck {
            revision: Some(checked.revision as f64),
            agent_type: Some(checked.agent_type),
            agent_key: Some(checked.agent_key),
            text: Some(checked.text.into_owned()),
            refused: None,
        },
        Err(refusal) => SnapshotTextCheck {
            text: None,
            revision: None,
            agent_type: None,
            agent_key: None,
            refused: Some(refusal.into()),
        },
    }
}

impl HostChannelOutput {
    fn new(kind: &str) -> Self {
        HostChannelOutput {
            kind: kind.to_owned(),
            line: None,
            call: None,
            what: None,
            name: None,
            json: None,
            tool_call_id: None,
            run_id: None,
            revision: None,
            agent_type: None,
            agent_key: None,
            refused: None,
            expected_revision: None,
            fields: None,
            id: None,
        }
    }
}

/// The host side of one conversation's channel.
#[napi]
pub struct HostChannel {
    channel: Channel,
    framer: LineFramer,
    numbers: HashMap<CallId, u32>,
    calls: HashMap<u32, CallId>,
    next_number: u32,
}

fn duration(ms: Option<f64>) -> Option<Duration> {
    ms.filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
}

fn revision(value: Option<u64>) -> Option<f64> {
    value.map(|v| v as f64)
}

#[napi]
impl HostChannel {
    /// Throws (`tool "name": why`) when a tool's name repeats or its schema
    /// cannot be used.
    #[napi(constructor, catch_unwind)]
    pub fn new(config: HostChannelConfig) -> Result<Self> {
        let mut tools = Vec::with_capacity(config.tools.len());
        for tool in config.tools {
            let input_schema = serde_json::from_str(&tool.input_schema).map_err(|error| {
                Error::from_reason(format!(
                    "tool {:?}: the input schema is not JSON: {error}",
                    tool.name
                ))
            })?;
            tools.push(ToolSpec {
                name: tool.name,
                description: tool.description,
                input_schema,
                timeout: duration(tool.timeout_ms),
            });
        }
        let mut options = ChannelOptions {
            tools,
            call_timeout: duration(config.call_timeout_ms),
            store: config.store.then(|| StoreOptions {
                timeout: duration(config.store_timeout_ms),
            }),
            ..ChannelOptions::default()
        };
        if let Some(max) = config.max_line_bytes.filter(|m| m.is_finite() && *m >= 1.0) {
            options.max_line_bytes = max as usize;
        }
        let channel =
            Channel::new(options).map_err(|error| Error::from_reason(error.to_string()))?;
        let framer = channel.framer();
        Ok(HostChannel {
            channel,
            framer,
            numbers: HashMap::new(),
            calls: HashMap::new(),
            next_number: 0,
        })
    }

    /// Bytes read from the backend's end.
    #[napi(catch_unwind)]
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<HostChannelOutput> {
        let mut frames = Vec::new();
        self.framer.push(chunk, |frame| frames.push(frame));
        self.frames(frames)
    }

    /// The backend's end closed or broke: a last line without its newline
    /// is judged, then every pending call is aborted.
    #[napi(catch_unwind)]
    pub fn lost(&mut self) -> Vec<HostChannelOutput> {
        let last: Vec<Frame> = self.framer.finish().into_iter().collect();
        let mut outputs = self.frames(last);
        let lost = self.channel.on_lost();
        outputs.extend(self.convert(lost));
        outputs
    }

    /// The application's result for a call: one JSON text. Returns `null`
    /// when the call is no longer pending (nothing is sent).
    #[napi(catch_unwind)]
    pub fn answer_value(&mut self, call: u32, json: String) -> Option<Vec<HostChannelOutput>> {
        self.answer(call, Answer::Value(json))
    }

    /// The application's failure for a call (`kind` a reply error code;
    /// an unknown one is sent as `tool-error`).
    #[napi(catch_unwind)]
    pub fn answer_error(
        &mut self,
        call: u32,
        kind: String,
        message: String,
    ) -> Option<Vec<HostChannelOutput>> {
        let kind = ReplyErrorKind::from_code(&kind).unwrap_or(ReplyErrorKind::ToolError);
        self.answer(call, Answer::Error { kind, message })
    }

    /// Ends the calls whose deadline has passed.
    #[napi(catch_unwind)]
    pub fn expire(&mut self) -> Vec<HostChannelOutput> {
        let outputs = self.channel.expire(Instant::now());
        self.convert(outputs)
    }

    /// Milliseconds until the earliest deadline (0 when passed), or `null`.
    #[napi(catch_unwind)]
    pub fn next_deadline_ms(&self) -> Option<f64> {
        self.channel
            .next_deadline()
            .map(|at| at.saturating_duration_since(Instant::now()).as_secs_f64() * 1000.0)
    }

    /// The host closes the conversation: pending calls are answered
    /// `host-unavailable` and aborted, later requests answered so.
    #[napi(catch_unwind)]
    pub fn close(&mut self) -> Vec<HostChannelOutput> {
        let outputs = self.channel.close();
        self.convert(outputs)
    }

    /// Whether the backend asked for the tool list (its factory took them).
    #[napi(catch_unwind)]
    pub fn listed_tools(&self) -> bool {
        self.channel.listed_tools()
    }

    /// The backend's `hello` version, once it came.
    #[napi(catch_unwind)]
    pub fn hello_version(&self) -> Option<String> {
        self.channel.hello().map(|hello| hello.version.clone())
    }

    /// How many calls the application works on.
    #[napi(catch_unwind)]
    pub fn pending_count(&self) -> u32 {
        self.channel.pending().len() as u32
    }

    fn answer(&mut self, number: u32, answer: Answer) -> Option<Vec<HostChannelOutput>> {
        let call = *self.calls.get(&number)?;
        let outputs = self.channel.answer(call, answer).ok()?;
        self.forget(call);
        Some(self.convert(outputs))
    }

    fn frames(&mut self, frames: Vec<Frame>) -> Vec<HostChannelOutput> {
        let now = Instant::now();
        let mut outputs = Vec::new();
        for frame in frames {
            let produced = self.channel.on_frame(frame, now);
            outputs.extend(self.convert(produced));
        }
        outputs
    }

    fn forget(&mut self, call: CallId) {
        if let Some(number) = self.numbers.remove(&call) {
            self.calls.remove(&number);
        }
    }

    fn number(&mut self, call: CallId) -> u32 {
        if let Some(number) = self.numbers.get(&call) {
            return *number;
        }
        self.next_number = self.next_number.wrapping_add(1);
        let number = self.next_number;
        self.numbers.insert(call, number);
        self.calls.insert(number, call);
        number
    }

    fn convert(&mut self, outputs: Vec<Output>) -> Vec<HostChannelOutput> {
        outputs
            .into_iter()
            .map(|output| self.convert_one(output))
            .collect()
    }

    fn convert_one(&mut self, output: Output) -> HostChannelOutput {
        match output {
            Output::Send(line) => {
                let mut out = HostChannelOutput::new("send");
                out.line = Some(line.into_bytes().into());
                out
            }
            Output::Request { call, request } => {
                let mut out = HostChannelOutput::new("request");
                out.call = Some(self.number(call));
                match request {
                    Request::CallTool(tool) => {
                        out.what = Some("call_tool".into());
                        out.name = Some(tool.name);
                        out.json = Some(JsonText::new(tool.arguments.get().to_owned()));
                        out.tool_call_id = tool.tool_call_id;
                        out.run_id = tool.run_id;
                    }
                    Request::StoreLoad => out.what = Some("store_load".into()),
                    Request::StoreSave(save) => {
                        out.what = Some("store_save".into());
                        out.expected_revision = revision(save.expected_revision);
                        // Checked here, where the text is: JavaScript takes it as it is.
                        // The decode's own copy of the snapshot, revision moved first in place.
                        let text = Box::<str>::from(save.snapshot).into_string();
                        match check_snapshot_owned(text, None) {
                            Ok(checked) => {
                                out.revision = Some(checked.revision as f64);
                                out.agent_type = Some(checked.agent_type);
                                out.agent_key = Some(checked.agent_key);
                                out.json = Some(JsonText::new(checked.text.into_owned()));
                            }
                            Err(refusal) => out.refused = Some(refusal.into()),
                        }
                    }
                    Request::StoreDelete { expected_revision } => {
                        out.what = Some("store_delete".into());
                        out.expected_revision = revision(expected_revision);
                    }
                }
                out
            }
            Output::Abort { call, reason } => {
                let mut out = HostChannelOutput::new("abort");
                out.call = Some(self.number(call));
                self.forget(call);
                out.what = Some(
                    match reason {
                        AbortReason::Cancelled => "cancelled",
                        AbortReason::Timeout => "timeout",
                        AbortReason::Lost => "lost",
                        AbortReason::Closed => "closed",
                    }
                    .into(),
                );
                out
            }
            Output::Diagnostic(error) => {
                let mut out = HostChannelOutput::new("diagnostic");
                out.what = Some(error.code().into());
                out.name = Some(error.message.clone());
                out.fields = Some(error.fields.clone());
                out.id = error.id.clone();
                out
            }
        }
    }
}
