//! A conversation's host channel, the bridge's side (docs/host-channel.md):
//! its agent calls the application's own tools and keeps its state in the
//! bridge's store.
//!
//! The pure core (`bridge_host_channel::Channel`) lives in the
//! conversation's state, under its one lock, so a tool call and the run's
//! stream it goes out on never disagree. A reader thread per conversation
//! feeds it the backend's lines and its deadlines (the socket's read
//! timeout is the next deadline); a writer thread writes its answers.
//!
//! Tools: a call becomes a `ToolCall` item on the run's `Prompt` stream
//! (its owner) and the subscribers' streams, under a bridge-wide id
//! `<conversation>/tool-call-<n>` (ids repeat across backends; this one
//! names one call in the whole bridge, as approval ids do). The owner's
//! drop answers its calls `host-unavailable`.
//!
//! Snapshots, by value: the bridge is the backend's store and keeps the
//! last committed `AgentSnapshot` document in memory, emits it as an item
//! and answers `GetSnapshot`; the adapter keeps it where it likes and gives
//! it back at `CreateConversation` to resume. Not store callbacks to the
//! adapter: a save would then wait on a client across the network inside
//! every run, and a bridge restart would still need the adapter's copy.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bridge_core::session::Ticket;
use bridge_host_channel::{
    AbortReason, Answer, CallId, Channel, Output, ReplyErrorKind, Request, StoreSave, ToolCall,
};
use connectrpc::ConnectError;

use super::stream::{Out, Side};
use super::{Conversation, State};
use crate::conversations::ids::bridge_wide;

/// A committed snapshot document, as the backend saved it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub json: Arc<String>,
    pub revision: u64,
}

/// What a conversation's host channel serves, decided before its backend
/// starts (a tool the core refuses is the create's `invalid_argument`).
pub struct HostPlan {
    pub channel: Channel,
    /// Each tool's effective deadline, for its `ToolCall` item.
    pub timeouts: HashMap<String, Option<Duration>>,
    /// The start fails unless the factory took the tools.
    pub tools_declared: bool,
    /// The start fails unless the factory loaded from the store.
    pub require_store: bool,
    /// Where a resume starts.
    pub resume: Option<Snapshot>,
}

struct OpenCall {
    call: CallId,
    owner: Option<Ticket>,
}

/// The host side in the conversation's state.
pub(super) struct HostSide {
    channel: Channel,
    writer: std::sync::mpsc::Sender<String>,
    timeouts: HashMap<String, Option<Duration>>,
    tools_declared: bool,
    require_store: bool,
    /// Open tool calls by their own id (`tool-call-<n>`).
    calls: HashMap<String, OpenCall>,
    by_call: HashMap<CallId, String>,
    next: u64,
    snapshot: Option<Snapshot>,
    /// The factory loaded from the store (before `ready`).
    loaded: bool,
}

impl HostSide {
    /// Why the backend cannot be used, judged at its `ready`: the factory
    /// did not take what the conversation was created with.
    pub(super) fn refusal_at_ready(&self) -> Option<String> {
        if self.tools_declared && !self.channel.listed_tools() {
            return Some("the conversation has tools but the backend's factory did not add them: give the agent `shims=[host.tools()]` (from agentlane_host_channel import host; docs/host-channel.md)".into());
        }
        if self.require_store && !self.loaded {
            return Some("the conversation keeps snapshots (or resumes one) but the backend's factory does not load its state from the host: pass `state_store=host.state_store()` to its DefaultAgent (from agentlane_host_channel import host); without it the history would be lost silently".into());
        }
        None
    }

    pub(super) fn snapshot(&self) -> Option<Snapshot> {
        self.snapshot.clone()
    }

    pub(super) fn keeps_snapshots(&self) -> bool {
        self.loaded
    }
}

fn reason_name(reason: AbortReason) -> &'static str {
    match reason {
        AbortReason::Cancelled => "cancelled",
        AbortReason::Timeout => "timeout",
        AbortReason::Lost => "lost",
        AbortReason::Closed => "host-unavailable",
    }
}

impl Conversation {
    /// Puts the host side in place and starts its threads on `socket` (the
    /// bridge's end of the backend's channel).
    pub fn attach_host_channel(
        self: &Arc<Self>,
        plan: HostPlan,
        socket: UnixStream,
    ) -> std::io::Result<()> {
        let writer = spawn_writer(socket.try_clone()?)?;
        {
            let mut s = self.lock();
            s.host = Some(HostSide {
                channel: plan.channel,
                writer,
                timeouts: plan.timeouts,
                tools_declared: plan.tools_declared,
                require_store: plan.require_store,
                calls: HashMap::new(),
                by_call: HashMap::new(),
                next: 0,
                snapshot: plan.resume,
                loaded: false,
            });
        }
        let conversation = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("bridge-host-channel".into())
            .spawn(move || read_channel(conversation, socket))?;
        Ok(())
    }

    /// `AnswerToolCall`: `own_id` is the call's id without its conversation.
    pub fn answer_tool_call(
        self: &Arc<Self>,
        own_id: &str,
        answer: Answer,
    ) -> Result<(), ConnectError> {
        let mut s = self.lock();
        let Some(host) = s.host.as_mut() else {
            return Err(ConnectError::not_found(
                "this conversation has no tools (none were declared at CreateConversation)",
            ));
        };
        let not_pending = || {
            ConnectError::not_found(format!(
                "the tool call {own_id:?} is not pending (answered, ended by its deadline, the run's cancel or its owner's drop, or never was)"
            ))
        };
        let open = host.calls.remove(own_id).ok_or_else(not_pending)?;
        host.by_call.remove(&open.call);
        let outputs = host
            .channel
            .answer(open.call, answer)
            .map_err(|_| not_pending())?;
        self.apply_host(&mut s, outputs);
        Ok(())
    }

    /// The conversation's last committed snapshot; `failed_precondition`
    /// when its backend does not keep its state in the bridge.
    pub fn snapshot(&self) -> Result<Option<Snapshot>, ConnectError> {
        let s = self.lock();
        match &s.host {
            Some(host) if host.keeps_snapshots() => Ok(host.snapshot()),
            _ => Err(ConnectError::failed_precondition(
                "this conversation's backend does not keep its state in the bridge: its factory must pass `state_store=host.state_store()` (agentlane_host_channel) to its agent",
            )),
        }
    }

    /// The owner of these calls (the run's `Prompt` stream) went: each is
    /// answered `host-unavailable` (the run is cancelled next).
    pub(super) fn end_owned_calls(self: &Arc<Self>, s: &mut State, owner: Ticket) {
        let Some(host) = s.host.as_mut() else { return };
        let owned: Vec<String> = host
            .calls
            .iter()
            .filter(|(_, open)| open.owner == Some(owner))
            .map(|(id, _)| id.clone())
            .collect();
        let mut outputs = Vec::new();
        let mut ended = Vec::new();
        for id in owned {
            let open = host.calls.remove(&id).expect("listed above");
            host.by_call.remove(&open.call);
            let answer = Answer::Error {
                kind: ReplyErrorKind::HostUnavailable,
                message: "The client that was to answer this tool call went away.".into(),
            };
            outputs.extend(host.channel.answer(open.call, answer).unwrap_or_default());
            ended.push(self.ended_item(&id, "host-unavailable"));
        }
        for item in ended {
            self.publish(s, item);
        }
        self.apply_host(s, outputs);
    }

    /// The conversation closes: pending calls are answered
    /// `host-unavailable`, and later requests too.
    pub(super) fn close_host_channel(self: &Arc<Self>, s: &mut State) {
        if let Some(host) = s.host.as_mut() {
            let outputs = host.channel.close();
            self.apply_host(s, outputs);
        }
    }

    fn ended_item(&self, own_id: &str, reason: &'static str) -> Arc<Side> {
        Arc::new(Side::ToolCallEnded {
            id: bridge_wide(&self.id, own_id),
            conversation_id: self.id.clone(),
            reason,
        })
    }

    /// A side item to every subscriber and, while a run streams, its
    /// `Prompt` stream.
    fn publish(self: &Arc<Self>, s: &mut State, item: Arc<Side>) {
        s.subscribers
            .retain(|outlet| outlet.push(Out::Side(item.clone())));
        let mut lost = false;
        if let Some(run) = &s.run {
            if let Some(outlet) = &run.outlet {
                lost = !outlet.push(Out::Side(item));
            }
        }
        if lost {
            self.abandon_run(s);
        }
    }

    /// Carries out the core's outputs (answers the core asks for at once,
    /// such as the store's, may give more).
    pub(super) fn apply_host(self: &Arc<Self>, s: &mut State, outputs: Vec<Output>) {
        let mut queue: VecDeque<Output> = outputs.into();
        while let Some(output) = queue.pop_front() {
            let Some(host) = s.host.as_mut() else { return };
            match output {
                Output::Send(line) => {
                    let _ = host.writer.send(line);
                }
                Output::Diagnostic(error) => {
                    eprintln!(
                        "agentlane-bridge: conversation {:?}: the backend's host channel: [{}] {error}",
                        self.id,
                        error.code()
                    );
                }
                Output::Abort { call, reason } => {
                    if let Some(id) = host.by_call.remove(&call) {
                        host.calls.remove(&id);
                        let item = self.ended_item(&id, reason_name(reason));
                        self.publish(s, item);
                    }
                }
                Output::Request { call, request } => match request {
                    Request::CallTool(tool_call) => {
                        self.on_tool_call(s, call, tool_call, &mut queue)
                    }
                    Request::StoreLoad => {
                        host.loaded = true;
                        let answer =
                            Answer::loaded(host.snapshot.as_ref().map(|snap| snap.json.as_str()));
                        queue.extend(host.channel.answer(call, answer).unwrap_or_default());
                    }
                    Request::StoreSave(save) => {
                        let (answer, saved) = save_answer(host, &save);
                        queue.extend(host.channel.answer(call, answer).unwrap_or_default());
                        if let Some(snapshot) = saved {
                            let item = Arc::new(Side::Snapshot {
                                conversation_id: self.id.clone(),
                                json: snapshot.json,
                                revision: snapshot.revision,
                            });
                            self.publish(s, item);
                        }
                    }
                    Request::StoreDelete { expected_revision } => {
                        let answer = match revision_mismatch(host, expected_revision) {
                            Some(message) => Answer::conflict(message),
                            None => {
                                host.snapshot = None;
                                Answer::stored()
                            }
                        };
                        queue.extend(host.channel.answer(call, answer).unwrap_or_default());
                    }
                },
            }
        }
    }

    fn on_tool_call(
        self: &Arc<Self>,
        s: &mut State,
        call: CallId,
        tool_call: ToolCall,
        queue: &mut VecDeque<Output>,
    ) {
        let owner = s
            .run
            .as_ref()
            .filter(|run| run.outlet.is_some())
            .map(|run| run.ticket);
        let host = s.host.as_mut().expect("checked by the caller");
        if owner.is_none() {
            let answer = Answer::Error {
                kind: ReplyErrorKind::HostUnavailable,
                message: "No client is streaming this run, so nobody can answer the tool call."
                    .into(),
            };
            queue.extend(host.channel.answer(call, answer).unwrap_or_default());
            return;
        }
        host.next += 1;
        let own_id = format!("tool-call-{}", host.next);
        host.calls.insert(own_id.clone(), OpenCall { call, owner });
        host.by_call.insert(call, own_id.clone());
        let timeout = host.timeouts.get(&tool_call.name).copied().flatten();
        let item = Arc::new(Side::ToolCall {
            id: bridge_wide(&self.id, &own_id),
            conversation_id: self.id.clone(),
            name: tool_call.name,
            arguments: tool_call.arguments.get().to_owned(),
            tool_call_id: tool_call.tool_call_id.unwrap_or_default(),
            run_id: tool_call.run_id.unwrap_or_default(),
            timeout_ms: timeout.map_or(0, |t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX)),
        });
        self.publish(s, item);
    }
}

/// A stored revision that is not the one the backend expects, as the
/// conflict's message.
fn revision_mismatch(host: &HostSide, expected: Option<u64>) -> Option<String> {
    let stored = host.snapshot.as_ref().map(|snap| snap.revision);
    (stored != expected).then(|| {
        format!(
            "the bridge holds revision {}, the backend expected {}",
            stored.map_or("none".into(), |r| r.to_string()),
            expected.map_or("none".into(), |r| r.to_string())
        )
    })
}

fn save_answer(host: &mut HostSide, save: &StoreSave) -> (Answer, Option<Snapshot>) {
    if let Some(message) = revision_mismatch(host, save.expected_revision) {
        return (Answer::conflict(message), None);
    }
    let snapshot = Snapshot {
        json: Arc::new(save.snapshot.get().to_owned()),
        revision: save.revision,
    };
    host.snapshot = Some(snapshot.clone());
    (Answer::stored(), Some(snapshot))
}

/// Reads the backend's lines into the core until the channel ends; the
/// read timeout is the next deadline of a pending call.
fn read_channel(conversation: Weak<Conversation>, mut socket: UnixStream) {
    let mut framer = {
        let Some(c) = conversation.upgrade() else {
            return;
        };
        let s = c.lock();
        match &s.host {
            Some(host) => host.channel.framer(),
            None => return,
        }
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let deadline = {
            let Some(c) = conversation.upgrade() else {
                return;
            };
            let s = c.lock();
            s.host
                .as_ref()
                .and_then(|host| host.channel.next_deadline())
        };
        let wait = deadline.map(|d| {
            d.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        });
        if socket.set_read_timeout(wait).is_err() {
            break;
        }
        let read = socket.read(&mut buffer);
        let Some(c) = conversation.upgrade() else {
            return;
        };
        let mut s = c.lock();
        let now = Instant::now();
        let outputs = match read {
            Ok(0) => break,
            Ok(n) => {
                let mut frames = Vec::new();
                framer.push(&buffer[..n], |frame| frames.push(frame));
                let Some(host) = s.host.as_mut() else { return };
                frames
                    .into_iter()
                    .flat_map(|frame| host.channel.on_frame(frame, now))
                    .collect()
            }
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                let Some(host) = s.host.as_mut() else { return };
                host.channel.expire(now)
            }
            Err(_) => break,
        };
        c.apply_host(&mut s, outputs);
    }
    if let Some(c) = conversation.upgrade() {
        let mut s = c.lock();
        if let Some(host) = s.host.as_mut() {
            let mut outputs = Vec::new();
            if let Some(frame) = framer.finish() {
                outputs.extend(host.channel.on_frame(frame, Instant::now()));
            }
            outputs.extend(host.channel.on_lost());
            c.apply_host(&mut s, outputs);
        }
    }
}

fn spawn_writer(mut socket: UnixStream) -> std::io::Result<std::sync::mpsc::Sender<String>> {
    let (sender, lines) = std::sync::mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("bridge-host-channel-write".into())
        .spawn(move || {
            for line in lines {
                if socket.write_all(line.as_bytes()).is_err() {
                    return;
                }
            }
        })?;
    Ok(sender)
}
