//! One conversation: its backend, bridge-core's correlation [`Session`]
//! behind a lock, fed by the backend's output in stream order, and the
//! plumbing from its settlements to RPC answers and streams. A bridge hosts
//! many (`crate::conversations`); nothing here is shared between two.
//!
//! Every stdout line gets a sequence number and becomes one shared [`Item`].
//! Items go to every `Subscribe` stream and, from `run_start` to the
//! terminal event, to the `Prompt` stream of the run (`stream.rs`); the
//! terminal item carries the run's usage (`usage.rs`). Requests are in
//! `requests.rs`, their errors in `errors.rs`.

mod errors;
mod host_side;
mod requests;
mod stream;
mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bridge_core::reader::Item as ReaderItem;
use bridge_core::session::{CloseReason, Outcome, Output, Session, Signal, Ticket};
use connectrpc::ConnectError;
use tokio::sync::oneshot;

use crate::backend::{Backend, ExitStatus};
use crate::conversations::ids::bridge_wide;
pub use errors::{backend_refusal, closed_error};
pub use host_side::{HostPlan, Snapshot};
pub use stream::{Item, Out, Shared, Side};
use stream::{flush, head, Outlet};
pub use usage::UsageTotals;

/// What settled an RPC: the outcome and the event that brought it, if any.
#[derive(Debug)]
pub struct Settlement {
    pub outcome: Outcome,
    pub event: Option<Shared>,
}

/// Why a backend did not start (the `agentlane-bridge failed` line, or a
/// refused `CreateConversation`).
#[derive(Debug)]
pub struct StartFailure {
    pub stage: &'static str,
    pub message: String,
    pub exit: Option<ExitStatus>,
}

/// How long an exited backend's output may take to reach end of file.
pub const EXIT_DRAIN: Duration = Duration::from_secs(1);

/// The `Prompt` stream of the active run.
struct RunStream {
    /// The run's usage so far (from its records).
    usage: UsageTotals,
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
    /// When a call, or the end of a run, last happened (the idle timeout).
    last_active: Instant,
    /// The host channel: the application's tools and the bridge's store.
    host: Option<host_side::HostSide>,
}

pub struct Conversation {
    /// Its id in the bridge (approval ids carry it).
    id: String,
    state: Mutex<State>,
    backend: Backend,
}

impl Conversation {
    pub fn new(
        id: String,
        backend: Backend,
    ) -> (
        Arc<Conversation>,
        oneshot::Receiver<Result<String, StartFailure>>,
    ) {
        let (startup, ready) = oneshot::channel();
        let conversation = Conversation {
            id,
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
                last_active: Instant::now(),
                host: None,
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
                let approval_id = match &signal {
                    Signal::ApprovalPending { request_id } | Signal::ApprovalResolved { request_id } => {
                        Some(bridge_wide(&self.id, request_id).into_boxed_str())
                    }
                    _ => None,
                };
                (
                    Arc::new(Item::Event {
                        seq,
                        event_type,
                        line: Arc::new(line),
                        approval_id,
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
                    match s.host.as_ref().and_then(|host| host.refusal_at_ready()) {
                        Some(message) => {
                            let _ = startup.send(Err(StartFailure {
                                stage: "host-channel",
                                message,
                                exit: None,
                            }));
                        }
                        None => {
                            s.ready_line = Some(line.to_string());
                            let _ = startup.send(Ok(line.to_string()));
                        }
                    }
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
        let terminal = matches!(
            signal,
            Some(Signal::RunComplete | Signal::RunCancelled | Signal::RunError { .. })
        );
        let mut lost = false;
        if belongs {
            if let Some(run) = &mut s.run {
                if run.started.is_none() {
                    if let (Item::Event { line, .. }, Some(Signal::RunEvent | Signal::ApprovalPending { .. } | Signal::ApprovalResolved { .. })) = (&*shared, &signal) {
                        run.usage.add_run_event(line);
                    }
                    if let Some(outlet) = &run.outlet {
                        let out = if terminal {
                            Out::Final {
                                item: shared.clone(),
                                usage: std::mem::take(&mut run.usage),
                            }
                        } else {
                            Out::One(shared.clone())
                        };
                        lost = !outlet.push(out);
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
                        errors::end_run_stream(run, &outcome);
                        s.last_active = Instant::now();
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
}
