//! The one conversation a bridge hosts: bridge-core's correlation
//! [`Session`] behind a lock, fed by the backend's output in stream order,
//! and the plumbing from its settlements to RPC answers and streams.
//!
//! Every stdout line gets a sequence number and becomes one shared [`Item`].
//! Items go to every `Subscribe` stream and, from `run_start` to the
//! terminal event, to the `Prompt` stream of the run. Streams have bounded
//! queues: a client that falls behind loses its stream
//! (`resource_exhausted`), never the backend, whose output is always read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bridge_core::reader::Item as ReaderItem;
use bridge_core::session::{
    Accepted, Close, CloseReason, Outcome, Output, Refusal, Session, Signal, Ticket,
};
use bridge_core::EventType;
use connectrpc::ConnectError;
use futures::Stream;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, ExitStatus};

/// How many bytes of lines a stream may have queued before it is cut off.
/// A single line larger than this still passes when the queue is empty.
pub const STREAM_QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// One stdout line of the backend, numbered from 1 (the `ready` line).
#[derive(Debug)]
pub enum Item {
    Event {
        seq: u64,
        event_type: EventType,
        /// Shared by every stream that sends it.
        line: Arc<String>,
    },
    Invalid {
        seq: u64,
        code: &'static str,
        message: String,
        fields: Vec<String>,
        head: String,
    },
}

impl Item {
    fn size(&self) -> usize {
        match self {
            Item::Event { line, .. } => line.len(),
            Item::Invalid { head, .. } => head.len(),
        }
    }
}

pub type Shared = Arc<Item>;

/// What settled an RPC: the outcome and the event that brought it, if any.
#[derive(Debug)]
pub struct Settlement {
    pub outcome: Outcome,
    pub event: Option<Shared>,
}

/// Why the startup failed (the `agentlane-bridge failed` line).
#[derive(Debug)]
pub struct StartFailure {
    pub stage: &'static str,
    pub message: String,
    pub exit: Option<ExitStatus>,
}

/// What one stream message carries: one line, or (for subscribers that
/// asked for batches) consecutive events that came from the backend together.
#[derive(Debug)]
pub enum Out {
    One(Shared),
    /// Consecutive events from `first_seq` on, their lines joined as one
    /// JSON array text (built once, shared by every batched subscriber).
    Batch {
        first_seq: u64,
        json: Arc<String>,
    },
}

impl Out {
    fn size(&self) -> usize {
        match self {
            Out::One(item) => item.size(),
            Out::Batch { json, .. } => json.len(),
        }
    }
}

/// The sending side of one stream.
struct Outlet {
    tx: mpsc::UnboundedSender<Result<Out, ConnectError>>,
    queued: Arc<AtomicUsize>,
    /// The subscriber asked for batches.
    batched: bool,
}

impl Outlet {
    fn new(batched: bool) -> (Outlet, ItemStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        (
            Outlet {
                tx,
                queued: queued.clone(),
                batched,
            },
            ItemStream {
                rx,
                queued,
                on_drop: None,
                ended: false,
            },
        )
    }

    /// Queues a message; `false` once the stream is gone or was cut off.
    fn push(&self, out: Out) -> bool {
        let size = out.size();
        let queued = self.queued.load(Ordering::SeqCst);
        if queued > 0 && queued + size > STREAM_QUEUE_BYTES {
            let _ = self.tx.send(Err(ConnectError::resource_exhausted(
                "this stream fell too far behind the backend and was cut off",
            )));
            return false;
        }
        self.queued.fetch_add(size, Ordering::SeqCst);
        self.tx.send(Ok(out)).is_ok()
    }

    fn fail(self, error: ConnectError) {
        let _ = self.tx.send(Err(error));
    }
}

/// The receiving side of one stream: messages in order, then the end
/// (`None` for an OK end, or one error).
pub struct ItemStream {
    rx: mpsc::UnboundedReceiver<Result<Out, ConnectError>>,
    queued: Arc<AtomicUsize>,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
    ended: bool,
}

impl Stream for ItemStream {
    type Item = Result<Out, ConnectError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let polled = self.rx.poll_recv(cx);
        match &polled {
            Poll::Ready(Some(Ok(out))) => {
                self.queued.fetch_sub(out.size(), Ordering::SeqCst);
            }
            Poll::Ready(Some(Err(_)) | None) => self.ended = true,
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for ItemStream {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            if !self.ended {
                on_drop();
            }
        }
    }
}

/// The `Prompt` stream of the active run.
struct RunStream {
    ticket: Ticket,
    outlet: Option<Outlet>,
    /// The stream went away before the terminal event and the bridge
    /// cancelled the run.
    abandoned: bool,
    /// Answered on `run_start` (the stream begins) or on a refusal.
    started: Option<oneshot::Sender<Result<(), ConnectError>>>,
}

struct State {
    session: Session,
    seq: u64,
    waiters: HashMap<Ticket, oneshot::Sender<Settlement>>,
    run: Option<RunStream>,
    subscribers: Vec<Outlet>,
    startup: Option<oneshot::Sender<Result<String, StartFailure>>>,
    ready_line: Option<String>,
    last_stderr: Option<String>,
    /// Once the session has ended: the error later calls get.
    ended: Option<ConnectError>,
    /// A shutdown was asked for: streams end OK, not `unavailable`.
    stopping: bool,
}

pub struct Conversation {
    state: Mutex<State>,
    backend: Backend,
}

impl Conversation {
    pub fn new(
        backend: Backend,
    ) -> (
        Arc<Conversation>,
        oneshot::Receiver<Result<String, StartFailure>>,
    ) {
        let (startup, ready) = oneshot::channel();
        let conversation = Conversation {
            state: Mutex::new(State {
                session: Session::new(),
                seq: 0,
                waiters: HashMap::new(),
                run: None,
                subscribers: Vec::new(),
                startup: Some(startup),
                ready_line: None,
                last_stderr: None,
                ended: None,
                stopping: false,
            }),
            backend,
        };
        (Arc::new(conversation), ready)
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The backend's exact `ready` line, once it came.
    pub fn ready_line(&self) -> Option<String> {
        self.lock().ready_line.clone()
    }

    pub fn last_stderr(&self) -> Option<String> {
        self.lock().last_stderr.clone()
    }

    // ---- the backend's output (called by the event loop, in order) ---------

    /// Consecutive stdout lines (one reader batch), in order.
    pub fn on_stdout(self: &Arc<Self>, items: Vec<ReaderItem>) {
        let mut s = self.lock();
        // Consecutive events for the subscribers that take batches.
        let mut batch = Vec::new();
        for item in items {
            self.on_line(&mut s, item, &mut batch);
        }
        flush(&mut s.subscribers, &mut batch);
    }

    fn on_line(self: &Arc<Self>, s: &mut State, item: ReaderItem, batch: &mut Vec<Shared>) {
        s.seq += 1;
        let seq = s.seq;
        let (shared, signal) = match item {
            ReaderItem::Event {
                line, event_type, ..
            } => {
                let signal = Signal::read(&line, event_type);
                (
                    Arc::new(Item::Event {
                        seq,
                        event_type,
                        line: Arc::new(line),
                    }),
                    Some(signal),
                )
            }
            ReaderItem::Invalid { line, error } => {
                let head = head(&line, 1024).to_owned();
                (
                    Arc::new(Item::Invalid {
                        seq,
                        code: error.kind.code(),
                        message: error.message,
                        fields: error.fields,
                        head,
                    }),
                    None,
                )
            }
            ReaderItem::Text(_) => return,
        };
        if let Some(startup) = s.startup.take() {
            match (&*shared, &signal) {
                (Item::Event { line, .. }, Some(Signal::Ready)) => {
                    s.ready_line = Some(line.to_string());
                    let _ = startup.send(Ok(line.to_string()));
                }
                (Item::Invalid { message, .. }, _) => {
                    let _ = startup.send(Err(StartFailure {
                        stage: "protocol",
                        message: format!(
                            "the backend's first line is not a valid ready event: {message}"
                        ),
                        exit: None,
                    }));
                }
                _ => {
                    let _ = startup.send(Err(StartFailure {
                        stage: "protocol",
                        message: "the backend's first line is not a ready event".into(),
                        exit: None,
                    }));
                }
            }
        }
        // Subscribers: one message per line, or batches of events (an
        // invalid line goes alone, after the events before it).
        s.subscribers
            .retain(|outlet| outlet.batched || outlet.push(Out::One(shared.clone())));
        match &*shared {
            Item::Event { .. } => batch.push(shared.clone()),
            Item::Invalid { .. } => {
                flush(&mut s.subscribers, batch);
                s.subscribers
                    .retain(|outlet| !outlet.batched || outlet.push(Out::One(shared.clone())));
            }
        }
        // The run's stream: run_start opens it; run events, the terminal
        // event and invalid lines go to it while it is open.
        let belongs = match (&signal, &*shared) {
            (None, _) => true,
            (Some(Signal::RunStart), _) => {
                if let Some(run) = &mut s.run {
                    if let Some(started) = run.started.take() {
                        let _ = started.send(Ok(()));
                    }
                }
                true
            }
            (Some(Signal::RunComplete | Signal::RunCancelled | Signal::RunError { .. }), _) => true,
            (
                Some(
                    Signal::ApprovalPending { .. }
                    | Signal::ApprovalResolved { .. }
                    | Signal::RunEvent,
                ),
                _,
            ) => true,
            _ => false,
        };
        let mut lost = false;
        if belongs {
            if let Some(run) = &mut s.run {
                if run.started.is_none() {
                    if let Some(outlet) = &run.outlet {
                        lost = !outlet.push(Out::One(shared.clone()));
                    }
                }
            }
        }
        if lost {
            self.abandon_run(s);
        }
        if let Some(signal) = signal {
            let outputs = s.session.on_event(&signal, Instant::now());
            self.apply(s, outputs, Some(&shared));
        }
    }

    /// One stderr line: forwarded to the bridge's own stderr.
    pub fn on_stderr(&self, line: &str) {
        eprintln!("{line}");
        if !line.trim().is_empty() {
            self.lock().last_stderr = Some(line.to_owned());
        }
    }

    /// The backend exited (after its output streams ended). Every waiting
    /// call settles, every stream ends: OK after a shutdown was asked for,
    /// `unavailable` with the exit status and the last stderr line
    /// otherwise.
    pub fn on_exit(self: &Arc<Self>, status: ExitStatus) {
        let mut s = self.lock();
        let tail = s
            .last_stderr
            .clone()
            .map(|l| format!(": {l}"))
            .unwrap_or_default();
        let gone = ConnectError::unavailable(format!("the backend exited with {status}{tail}"));
        if let Some(startup) = s.startup.take() {
            let _ = startup.send(Err(StartFailure {
                stage: "backend",
                message: format!("the backend exited before its ready event, with {status}{tail}"),
                exit: Some(status),
            }));
        }
        s.ended.get_or_insert(gone);
        let ending = s.ended.clone().expect("set above");
        // A run still streaming was cut short, even by a shutdown.
        if let Some(run) = s.run.take() {
            if let Some(outlet) = run.outlet {
                outlet.fail(ending.clone());
            }
        }
        let outputs = s.session.on_exit(status.code, status.signal);
        self.apply(&mut s, outputs, None);
        let stopping = s.stopping;
        for outlet in s.subscribers.drain(..) {
            if !stopping {
                outlet.fail(ending.clone());
            }
        }
    }

    /// The error calls get once the session has ended (the exit status and
    /// the backend's last stderr line), if it has.
    pub fn ended_error(&self) -> Option<ConnectError> {
        self.lock().ended.clone()
    }

    /// Carries out the session's outputs; `event` is the item being
    /// processed, which settled whatever settles now.
    fn apply(self: &Arc<Self>, s: &mut State, outputs: Vec<Output>, event: Option<&Shared>) {
        for output in outputs {
            match output {
                Output::Send(frame) => self.backend.send(frame),
                Output::Settled { ticket, outcome } => {
                    if s.run.as_ref().is_some_and(|run| run.ticket == ticket) {
                        let run = s.run.take().expect("checked");
                        end_run_stream(run, &outcome);
                    }
                    if let Some(waiter) = s.waiters.remove(&ticket) {
                        let _ = waiter.send(Settlement {
                            outcome,
                            event: event.cloned(),
                        });
                    }
                }
                Output::RetryAfter { ticket, after } => {
                    let conversation = Arc::clone(self);
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        let mut s = conversation.lock();
                        let outputs = s.session.retry_due(ticket, Instant::now());
                        conversation.apply(&mut s, outputs, None);
                    });
                }
                Output::Rejected { message } => {
                    eprintln!("agentlane-bridge: a command error no request took: {message}");
                }
                Output::Closed(close) => {
                    if let CloseReason::ProtocolError { message } = &close.reason {
                        eprintln!("agentlane-bridge: the backend broke the protocol ({message}); killing it");
                        s.ended = Some(ConnectError::internal(format!(
                            "the backend broke the protocol: {message}"
                        )));
                        self.backend
                            .signal_group(Some(nix::sys::signal::Signal::SIGKILL));
                    }
                }
            }
        }
    }

    // ---- requests (called by the RPC handlers) -----------------------------

    fn refuse_if_ended(s: &State) -> Result<(), ConnectError> {
        match &s.ended {
            Some(error) => Err(error.clone()),
            None if s.stopping => Err(ConnectError::unavailable(
                "agentlane-bridge is shutting down",
            )),
            None => Ok(()),
        }
    }

    /// Runs a request on the session and returns what will settle it.
    fn request(
        self: &Arc<Self>,
        call: impl FnOnce(&mut Session) -> Result<Accepted, Refusal>,
    ) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        let mut s = self.lock();
        Self::refuse_if_ended(&s)?;
        let (ticket, outputs) = call(&mut s.session).map_err(|r| refusal_error(&r))?;
        let (waiter, settled) = oneshot::channel();
        s.waiters.insert(ticket, waiter);
        self.apply(&mut s, outputs, None);
        Ok(settled)
    }

    pub fn approve(
        self: &Arc<Self>,
        id: &str,
        allowed: bool,
        reason: Option<&str>,
    ) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(|session| session.approve(id, allowed, reason))
    }

    pub fn cancel(self: &Arc<Self>) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(Session::cancel)
    }

    pub fn reset(self: &Arc<Self>) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(|session| session.reset(Instant::now()))
    }

    pub fn configure(
        self: &Arc<Self>,
        patch: Map<String, Value>,
    ) -> Result<oneshot::Receiver<Settlement>, ConnectError> {
        self.request(|session| session.configure(patch))
    }

    /// Starts a run: the answer to wait for (the stream begins, or the
    /// prompt was refused) and the stream. Dropping the stream before its
    /// end cancels the run.
    pub fn prompt(
        self: &Arc<Self>,
        text: &str,
    ) -> Result<(oneshot::Receiver<Result<(), ConnectError>>, ItemStream), ConnectError> {
        let mut s = self.lock();
        Self::refuse_if_ended(&s)?;
        let (ticket, outputs) = s
            .session
            .prompt(text, Instant::now())
            .map_err(|r| refusal_error(&r))?;
        let (outlet, mut stream) = Outlet::new(false);
        let (started, start) = oneshot::channel();
        s.run = Some(RunStream {
            ticket,
            outlet: Some(outlet),
            abandoned: false,
            started: Some(started),
        });
        self.apply(&mut s, outputs, None);
        let conversation = Arc::downgrade(self);
        stream.on_drop = Some(Box::new(move || {
            if let Some(conversation) = conversation.upgrade() {
                conversation.prompt_stream_dropped(ticket);
            }
        }));
        Ok((start, stream))
    }

    /// The dropped-stream rule: a client that lets go of its `Prompt`
    /// stream before the terminal event cancels the run.
    fn prompt_stream_dropped(self: &Arc<Self>, ticket: Ticket) {
        let mut s = self.lock();
        if s.run.as_ref().is_some_and(|run| run.ticket == ticket) {
            self.abandon_run(&mut s);
        }
    }

    /// The run's stream is gone (dropped or cut off): cancel the run, once.
    fn abandon_run(self: &Arc<Self>, s: &mut State) {
        let Some(run) = &mut s.run else { return };
        run.outlet = None;
        if run.abandoned || s.ended.is_some() {
            return;
        }
        run.abandoned = true;
        eprintln!(
            "agentlane-bridge: the Prompt stream ended before its run did; cancelling the run"
        );
        if let Ok((_, outputs)) = s.session.cancel() {
            self.apply(s, outputs, None);
        }
    }

    /// Every line from now on, one per message or in batches of events.
    pub fn subscribe(self: &Arc<Self>, batched: bool) -> Result<ItemStream, ConnectError> {
        let mut s = self.lock();
        Self::refuse_if_ended(&s)?;
        let (outlet, stream) = Outlet::new(batched);
        s.subscribers.push(outlet);
        Ok(stream)
    }

    /// The shutdown path: new requests are refused, `shutdown` goes to the
    /// backend (once). Returns at once; the exit settles the rest.
    pub fn begin_shutdown(self: &Arc<Self>) {
        let mut s = self.lock();
        s.stopping = true;
        let (_, outputs) = s.session.shutdown();
        self.apply(&mut s, outputs, None);
    }

    /// Ends every subscriber stream OK (used once the backend is gone after
    /// a shutdown; `on_exit` already did it otherwise).
    pub fn close_streams(&self) {
        let mut s = self.lock();
        s.subscribers.clear();
    }
}

/// Sends the events gathered so far to the subscribers that take batches.
fn flush(subscribers: &mut Vec<Outlet>, batch: &mut Vec<Shared>) {
    if batch.is_empty() {
        return;
    }
    let events = std::mem::take(batch);
    if !subscribers.iter().any(|outlet| outlet.batched) {
        return;
    }
    let first_seq = match &*events[0] {
        Item::Event { seq, .. } | Item::Invalid { seq, .. } => *seq,
    };
    let mut json = String::with_capacity(events.iter().map(|e| e.size() + 1).sum::<usize>() + 1);
    json.push('[');
    for (i, event) in events.iter().enumerate() {
        if let Item::Event { line, .. } = &**event {
            if i > 0 {
                json.push(',');
            }
            json.push_str(line);
        }
    }
    json.push(']');
    let json = Arc::new(json);
    subscribers.retain(|outlet| {
        !outlet.batched
            || outlet.push(Out::Batch {
                first_seq,
                json: json.clone(),
            })
    });
}

/// The run's terminal settlement ends its `Prompt` stream: OK after the
/// terminal event (already queued), or with the error that refused it.
fn end_run_stream(run: RunStream, outcome: &Outcome) {
    let error = match outcome {
        Outcome::Completed | Outcome::Cancelled | Outcome::Failed { .. }
            if run.started.is_none() =>
        {
            None
        }
        Outcome::Cancelled => Some(ConnectError::aborted(
            "the run was cancelled before it started",
        )),
        Outcome::Refused { message } => Some(backend_refusal(message)),
        Outcome::Closed(close) => Some(closed_error(close)),
        other => Some(ConnectError::internal(format!(
            "unexpected run outcome {other:?}"
        ))),
    };
    match (run.started, error) {
        (Some(started), Some(error)) => {
            let _ = started.send(Err(error));
        }
        (None, Some(error)) => {
            if let Some(outlet) = run.outlet {
                outlet.fail(error);
            }
        }
        (_, None) => {}
    }
}

/// A request refused before anything was sent, as a Connect error.
pub fn refusal_error(refusal: &Refusal) -> ConnectError {
    let message = refusal.to_string();
    match refusal {
        Refusal::Closed(close) => closed_error(close),
        Refusal::RunActive => ConnectError::failed_precondition(message),
        Refusal::BlankPrompt | Refusal::NotEncodable(_) => ConnectError::invalid_argument(message),
        Refusal::ApprovalNotPending(_) => ConnectError::not_found(message),
        Refusal::ApprovalAnswered(_) => ConnectError::already_exists(message),
    }
}

/// A command-scoped error of the backend that settled a request.
pub fn backend_refusal(message: &str) -> ConnectError {
    match message {
        "A run is already active." => ConnectError::failed_precondition(message),
        "Prompt must not be empty." => ConnectError::invalid_argument(message),
        m if m.starts_with("No pending approval request for id ") => {
            ConnectError::not_found(message)
        }
        m if m.starts_with("Unknown command: ") => ConnectError::unimplemented(message),
        _ => ConnectError::internal(message),
    }
}

pub fn closed_error(close: &Close) -> ConnectError {
    match &close.reason {
        CloseReason::ProtocolError { message } => {
            ConnectError::internal(format!("the backend broke the protocol: {message}"))
        }
        CloseReason::Shutdown => ConnectError::unavailable("the backend has shut down"),
        CloseReason::Exit => ConnectError::unavailable("the backend has exited"),
    }
}

/// At most `max` bytes of `line`, cut at a character boundary.
fn head(line: &str, max: usize) -> &str {
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// How long an exited backend's output may take to reach end of file.
pub const EXIT_DRAIN: Duration = Duration::from_secs(1);
