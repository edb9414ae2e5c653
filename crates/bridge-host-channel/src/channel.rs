//! The calls of one host channel as a pure, synchronous state machine
//! (docs/host-channel.md, "The host's side").
//!
//! The host feeds it the backend's lines ([`Channel::on_frame`]), the
//! application's answers ([`Channel::answer`]), the time
//! ([`Channel::expire`]) and the channel's end ([`Channel::on_lost`],
//! [`Channel::close`]), and acts on the [`Output`]s it returns: lines to
//! write to the backend, requests for the application, aborts of requests
//! the application is working on, diagnostics. What the core can answer by
//! itself it answers: the tool list, unknown tools, invalid arguments,
//! invalid requests, store requests to a host without a store. No I/O, no
//! clock, no threads.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use bridge_core::framer::{Frame, LineFramer};
use serde_json::Value;

use crate::decode::{decode_line, too_long};
use crate::encode::{error_line, result_line, Answer};
use crate::error::{ChannelError, ChannelErrorKind};
use crate::protocol::{
    is_supported_version, Hello, Message, ReplyErrorKind, StoreSave, ToolCall, MAX_LINE_BYTES,
};
use crate::tools::{Tool, ToolSpec, ToolSpecError};

/// How many ended request ids are remembered, so that a `cancel` crossing
/// the answer is told from one naming an id this channel never had.
const REMEMBERED_IDS: usize = 4096;

/// What a channel serves.
#[derive(Clone, Debug)]
pub struct ChannelOptions {
    /// This conversation's tools.
    pub tools: Vec<ToolSpec>,
    /// A tool call's deadline unless its tool has its own; `None`: none.
    pub call_timeout: Option<Duration>,
    /// The conversation's store; `None`: store requests are answered
    /// `no-store`.
    pub store: Option<StoreOptions>,
    /// The longest line taken from the backend.
    pub max_line_bytes: usize,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            tools: Vec::new(),
            call_timeout: None,
            store: None,
            max_line_bytes: MAX_LINE_BYTES,
        }
    }
}

/// The conversation's store, as the channel sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// A store operation's deadline; `None`: none.
    pub timeout: Option<Duration>,
}

/// One request the application works on, from [`Output::Request`] until it
/// is answered or aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(u64);

/// What the application is asked to do.
#[derive(Clone, Debug)]
pub enum Request {
    /// Run a tool (its arguments satisfy its schema).
    CallTool(ToolCall),
    /// Answer with [`Answer::loaded`].
    StoreLoad,
    /// Answer with [`Answer::stored`] or [`Answer::conflict`].
    StoreSave(StoreSave),
    /// Answer with [`Answer::stored`] or [`Answer::conflict`].
    StoreDelete { expected_revision: Option<u64> },
}

/// Why the application must stop working on a request (its answer would
/// be refused now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// The backend cancelled it (the run's cancel, or its own deadline).
    Cancelled,
    /// Its deadline passed; the backend was told `timeout`.
    Timeout,
    /// The channel broke or closed.
    Lost,
    /// The host closed the channel; the backend was told `host-unavailable`.
    Closed,
}

/// What the host must do after a call.
#[derive(Clone, Debug)]
pub enum Output {
    /// Write this line (newline included) to the backend.
    Send(String),
    /// The application must answer this request ([`Channel::answer`]).
    Request { call: CallId, request: Request },
    /// The application must give this request up.
    Abort { call: CallId, reason: AbortReason },
    /// A line from the backend was not taken (the backend was answered
    /// `invalid-request` when its id could be read).
    Diagnostic(ChannelError),
}

/// Why an answer was not sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerRefused {
    /// The request is not pending: it was answered, aborted or never was.
    NotPending(CallId),
}

impl fmt::Display for AnswerRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerRefused::NotPending(call) => {
                write!(f, "host channel call {} is not pending", call.0)
            }
        }
    }
}

impl std::error::Error for AnswerRefused {}

#[derive(Debug)]
struct Pending {
    wire_id: String,
    deadline: Option<Instant>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// The channel broke or closed under the host.
    Lost,
    /// The host closed it.
    Closed,
}

/// The host side of one channel. See the module docs.
#[derive(Debug)]
pub struct Channel {
    tools: Vec<Tool>,
    tool_list: String,
    call_timeout: Option<Duration>,
    store: Option<StoreOptions>,
    max_line_bytes: usize,
    hello: Option<Hello>,
    version_refused: bool,
    listed_tools: bool,
    pending: BTreeMap<CallId, Pending>,
    by_wire_id: HashMap<String, CallId>,
    ended: VecDeque<String>,
    ended_set: HashSet<String>,
    next_call: u64,
    state: State,
}

impl Channel {
    /// A channel serving `options`; refused when a tool's name repeats or
    /// its schema cannot be used.
    pub fn new(options: ChannelOptions) -> Result<Self, ToolSpecError> {
        let mut tools: Vec<Tool> = Vec::with_capacity(options.tools.len());
        for spec in options.tools {
            if tools.iter().any(|tool| tool.spec.name == spec.name) {
                return Err(ToolSpecError {
                    tool: spec.name,
                    message: "the name is declared twice".into(),
                });
            }
            tools.push(Tool::compile(spec)?);
        }
        let list: Vec<Value> = tools
            .iter()
            .map(|tool| {
                serde_json::json!({
                    "name": tool.spec.name,
                    "description": tool.spec.description,
                    "input_schema": tool.spec.input_schema,
                })
            })
            .collect();
        Ok(Channel {
            tools,
            tool_list: serde_json::json!({ "tools": list }).to_string(),
            call_timeout: options.call_timeout,
            store: options.store,
            max_line_bytes: options.max_line_bytes.max(1),
            hello: None,
            version_refused: false,
            listed_tools: false,
            pending: BTreeMap::new(),
            by_wire_id: HashMap::new(),
            ended: VecDeque::new(),
            ended_set: HashSet::new(),
            next_call: 0,
            state: State::Open,
        })
    }

    /// A framer of the backend's bytes with this channel's line limit.
    pub fn framer(&self) -> LineFramer {
        LineFramer::new(self.max_line_bytes)
    }

    /// The backend's `hello`, once it came.
    pub fn hello(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    /// Whether the backend asked for the tool list: its factory took the
    /// host's tools. The module asks while the factory runs, so by the
    /// backend's `ready` this is settled.
    pub fn listed_tools(&self) -> bool {
        self.listed_tools
    }

    /// The requests the application works on, oldest first.
    pub fn pending(&self) -> Vec<CallId> {
        self.pending.keys().copied().collect()
    }

    /// The earliest deadline of a pending request: call
    /// [`expire`](Self::expire) then.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().filter_map(|p| p.deadline).min()
    }

    /// One frame of the backend's bytes.
    pub fn on_frame(&mut self, frame: Frame, now: Instant) -> Vec<Output> {
        match frame {
            Frame::Line(line) => self.on_line(&line, now),
            Frame::TooLong { prefix } => self.refuse(too_long(&prefix, self.max_line_bytes)),
        }
    }

    /// One line from the backend (without its newline).
    pub fn on_line(&mut self, line: &str, now: Instant) -> Vec<Output> {
        if self.state == State::Lost {
            return Vec::new();
        }
        let message = match decode_line(line) {
            Ok(message) => message,
            Err(error) => return self.refuse(error),
        };
        let id = match &message {
            Message::Hello(hello) => return self.on_hello(hello.clone()),
            Message::ListTools { id }
            | Message::CallTool { id, .. }
            | Message::Cancel { id }
            | Message::StoreLoad { id }
            | Message::StoreSave { id, .. }
            | Message::StoreDelete { id, .. } => id.clone(),
        };
        if self.hello.is_none() {
            return self
                .refuse(ChannelError::new(ChannelErrorKind::HelloMissing).with_id(Some(id)));
        }
        if let Message::Cancel { id } = message {
            return self.on_cancel(id);
        }
        if self.by_wire_id.contains_key(&id) {
            return vec![Output::Diagnostic(ChannelError::new(
                ChannelErrorKind::DuplicateId(id),
            ))];
        }
        if self.version_refused {
            let version = self.hello.as_ref().map_or("?", |h| h.version.as_str());
            let message = format!(
                "This host speaks host channel {}, not {version}.",
                crate::protocol::PROTOCOL_VERSION
            );
            return self.reply_error(&id, ReplyErrorKind::UnsupportedVersion, &message, &[]);
        }
        if self.state == State::Closed {
            let message = "The host is closing this conversation.";
            return self.reply_error(&id, ReplyErrorKind::HostUnavailable, message, &[]);
        }
        match message {
            Message::ListTools { .. } => {
                self.listed_tools = true;
                let line = result_line(&id, &self.tool_list).expect("the tool list is JSON");
                self.remember_ended(id);
                vec![Output::Send(line)]
            }
            Message::CallTool { call, .. } => self.on_call(id, call, now),
            Message::StoreLoad { .. } => self.on_store(id, Request::StoreLoad, now),
            Message::StoreSave { save, .. } => self.on_store(id, Request::StoreSave(save), now),
            Message::StoreDelete {
                expected_revision, ..
            } => self.on_store(id, Request::StoreDelete { expected_revision }, now),
            Message::Hello(_) | Message::Cancel { .. } => unreachable!("handled above"),
        }
    }

    /// The application answers a request. Refused when the request is no
    /// longer pending (answered, aborted, or never was): nothing is sent.
    /// A result that cannot be sent (not one JSON value, over the line
    /// limit) is answered `invalid-result` instead, so the call still ends.
    pub fn answer(&mut self, call: CallId, answer: Answer) -> Result<Vec<Output>, AnswerRefused> {
        let pending = self.take(call).ok_or(AnswerRefused::NotPending(call))?;
        let line = match answer {
            Answer::Value(value) => result_line(&pending.wire_id, &value).unwrap_or_else(|why| {
                let message = format!("The host's result could not be sent: {why}.");
                error_line(
                    &pending.wire_id,
                    ReplyErrorKind::InvalidResult,
                    &message,
                    &[],
                )
            }),
            Answer::Error { kind, message } => error_line(&pending.wire_id, kind, &message, &[]),
        };
        self.remember_ended(pending.wire_id);
        Ok(vec![Output::Send(line)])
    }

    /// Ends the requests whose deadline is at or before `now`: the backend
    /// is told `timeout`, the application to abort.
    pub fn expire(&mut self, now: Instant) -> Vec<Output> {
        let due: Vec<CallId> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|deadline| deadline <= now))
            .map(|(call, _)| *call)
            .collect();
        let mut outputs = Vec::new();
        for call in due {
            if let Some(pending) = self.take(call) {
                let message = "The host did not answer in time.";
                outputs.push(Output::Send(error_line(
                    &pending.wire_id,
                    ReplyErrorKind::Timeout,
                    message,
                    &[],
                )));
                outputs.push(Output::Abort {
                    call,
                    reason: AbortReason::Timeout,
                });
                self.remember_ended(pending.wire_id);
            }
        }
        outputs
    }

    /// The channel broke or reached its end: every pending request is
    /// aborted (nothing can be sent any more).
    pub fn on_lost(&mut self) -> Vec<Output> {
        self.state = State::Lost;
        self.end_all(AbortReason::Lost, None)
    }

    /// The host closes the channel: every pending request is answered
    /// `host-unavailable` and aborted, and later requests are answered so.
    pub fn close(&mut self) -> Vec<Output> {
        if self.state == State::Open {
            self.state = State::Closed;
        }
        let message = "The host is closing this conversation.";
        self.end_all(AbortReason::Closed, Some(message))
    }

    fn on_hello(&mut self, hello: Hello) -> Vec<Output> {
        if self.hello.is_some() {
            return vec![Output::Diagnostic(ChannelError::new(
                ChannelErrorKind::HelloRepeated,
            ))];
        }
        let supported = is_supported_version(&hello.version);
        let version = hello.version.clone();
        self.hello = Some(hello);
        if supported {
            return Vec::new();
        }
        self.version_refused = true;
        vec![Output::Diagnostic(ChannelError::new(
            ChannelErrorKind::UnsupportedVersion(version),
        ))]
    }

    fn on_cancel(&mut self, id: String) -> Vec<Output> {
        match self.by_wire_id.get(&id).copied() {
            Some(call) => {
                if let Some(pending) = self.take(call) {
                    self.remember_ended(pending.wire_id);
                }
                vec![Output::Abort {
                    call,
                    reason: AbortReason::Cancelled,
                }]
            }
            // The cancel crossed the answer: nothing to do.
            None if self.ended_set.contains(&id) => Vec::new(),
            None => vec![Output::Diagnostic(ChannelError::new(
                ChannelErrorKind::UnknownId(id),
            ))],
        }
    }

    fn on_call(&mut self, id: String, call: ToolCall, now: Instant) -> Vec<Output> {
        let Some(tool) = self.tools.iter().find(|tool| tool.spec.name == call.name) else {
            let names: Vec<&str> = self.tools.iter().map(|t| t.spec.name.as_str()).collect();
            let message = format!(
                "No tool named {} on this host (its tools: {}).",
                call.name,
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
            return self.reply_error(&id, ReplyErrorKind::UnknownTool, &message, &[]);
        };
        if let Err(issues) = tool.check(call.arguments.get()) {
            return self.reply_error(
                &id,
                ReplyErrorKind::InvalidArguments,
                &issues.message,
                &issues.fields,
            );
        }
        let timeout = tool.spec.timeout.or(self.call_timeout);
        self.start(id, Request::CallTool(call), timeout, now)
    }

    fn on_store(&mut self, id: String, request: Request, now: Instant) -> Vec<Output> {
        match self.store {
            Some(store) => self.start(id, request, store.timeout, now),
            None => {
                let message = "This host gives the conversation no state store.";
                self.reply_error(&id, ReplyErrorKind::NoStore, message, &[])
            }
        }
    }

    fn start(
        &mut self,
        wire_id: String,
        request: Request,
        timeout: Option<Duration>,
        now: Instant,
    ) -> Vec<Output> {
        self.next_call += 1;
        let call = CallId(self.next_call);
        self.by_wire_id.insert(wire_id.clone(), call);
        self.pending.insert(
            call,
            Pending {
                wire_id,
                deadline: timeout.map(|timeout| now + timeout),
            },
        );
        vec![Output::Request { call, request }]
    }

    fn take(&mut self, call: CallId) -> Option<Pending> {
        let pending = self.pending.remove(&call)?;
        self.by_wire_id.remove(&pending.wire_id);
        Some(pending)
    }

    fn end_all(&mut self, reason: AbortReason, reply: Option<&str>) -> Vec<Output> {
        let mut outputs = Vec::new();
        for call in self.pending() {
            if let Some(pending) = self.take(call) {
                if let Some(message) = reply {
                    outputs.push(Output::Send(error_line(
                        &pending.wire_id,
                        ReplyErrorKind::HostUnavailable,
                        message,
                        &[],
                    )));
                }
                outputs.push(Output::Abort { call, reason });
                self.remember_ended(pending.wire_id);
            }
        }
        outputs
    }

    /// A diagnostic, and an `invalid-request` answer when the line's id
    /// could be read and names no pending request.
    fn refuse(&mut self, error: ChannelError) -> Vec<Output> {
        let mut outputs = Vec::new();
        if let Some(id) = &error.id {
            if !self.by_wire_id.contains_key(id) && self.state != State::Lost {
                outputs.push(Output::Send(error_line(
                    id,
                    ReplyErrorKind::InvalidRequest,
                    &error.message,
                    &error.fields,
                )));
                self.remember_ended(id.clone());
            }
        }
        outputs.push(Output::Diagnostic(error));
        outputs
    }

    fn reply_error(
        &mut self,
        id: &str,
        kind: ReplyErrorKind,
        message: &str,
        fields: &[String],
    ) -> Vec<Output> {
        self.remember_ended(id.to_owned());
        vec![Output::Send(error_line(id, kind, message, fields))]
    }

    fn remember_ended(&mut self, id: String) {
        if self.ended_set.insert(id.clone()) {
            self.ended.push_back(id);
            if self.ended.len() > REMEMBERED_IDS {
                if let Some(old) = self.ended.pop_front() {
                    self.ended_set.remove(&old);
                }
            }
        }
    }
}
