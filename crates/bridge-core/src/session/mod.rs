//! The correlation layer: which backend answer settles which host request
//! (docs/protocol.md §8.11, §9.5.4, §12), as a pure, synchronous state machine.
//!
//! The protocol has no request ids (§11.10): the backend handles commands
//! one at a time and answers them in order, and a command-scoped `error`
//! does not say which command failed. [`Session`] keeps the commands it
//! sent in a FIFO and applies the reference session's rules, including its
//! answers to the backend's races:
//!
//! - a command-scoped error belongs to the oldest command still waiting;
//! - an `approve` has no acknowledgement of its own: its entry leaves the
//!   FIFO on the resolved record for its id, or when a later command is
//!   acknowledged (the backend handled it silently), so it cannot capture a
//!   later command's error;
//! - every run terminal event, `reset`, `shutdown` and the backend's exit
//!   close the approvals still open (the backend writes no resolved record
//!   for the denials it makes itself, §12.10);
//! - a prompt refused with `A run is already active.` within
//!   [`RACE_WINDOW`] of the previous run's terminal event is the backend
//!   freeing its run slot late (§12.12): it is resent a few times, briefly,
//!   instead of failing, unless a cancel or reset was sent after it (then
//!   the run ends as cancelled, never started); any other refusal is one;
//! - a reset refused with [`RESET_WHILE_ACTIVE`] after its own cancel ended
//!   the run (the same late slot) is resent the same way, when nothing else
//!   was sent since.
//!
//! No I/O, no clock of its own, no threads: the host feeds it requests
//! ([`Session::prompt`], [`Session::approve`], …), events
//! ([`Session::on_event`]), the backend's exit ([`Session::on_exit`]) and
//! due retries ([`Session::retry_due`]), with the time where the race rules
//! need it, and acts on the [`Output`]s it returns: frames to send,
//! settlements, timers.
//! The same table of scenarios (`tests/fixtures/session-scenarios/`) runs
//! against this machine and against the TypeScript session, so the two
//! cannot drift.

mod signal;

pub use signal::Signal;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::command::{encode_command, Command, CommandError};

/// How often a prompt refused by the §12 race is resent.
pub const RACE_RETRIES: u32 = 5;
/// The wait before the n-th resend is n times this.
pub const RACE_RETRY_STEP: Duration = Duration::from_millis(15);
/// A prompt sent within this long of the previous run's terminal event can
/// meet the race; a refusal of any other prompt is a refusal.
pub const RACE_WINDOW: Duration = Duration::from_millis(500);

/// The backend's refusal that the prompt race retry answers (§4.3).
const RUN_ALREADY_ACTIVE: &str = "A run is already active.";
/// The backend's refusal of a reset whose own cancel has just ended the run
/// (the agent frees its run lock a moment after the terminal event).
pub const RESET_WHILE_ACTIVE: &str = "Command failed: Cannot reset while a primary run is active.";

/// One request of the host, from the moment it is accepted until its
/// settlement ([`Output::Settled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(u64);

/// Why a request was refused before anything was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The session has ended.
    Closed(Close),
    /// `prompt` while a run is active (the reference's `SessionStateError`).
    RunActive,
    /// `prompt` whose text is blank after JavaScript's `trim()`.
    BlankPrompt,
    /// The command encoder refused the command (§2.2: too long for the
    /// backend's line limit).
    NotEncodable(CommandError),
    /// `approve` for an id that has no open approval.
    ApprovalNotPending(String),
    /// `approve` for an id whose answer is already on its way: the first
    /// answer wins.
    ApprovalAnswered(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Closed(close) => write!(f, "Agent session closed: {}", close.reason.name()),
            Refusal::RunActive => f.write_str(RUN_ALREADY_ACTIVE),
            Refusal::BlankPrompt => f.write_str("Prompt must not be empty."),
            Refusal::NotEncodable(error) => f.write_str(&error.message),
            Refusal::ApprovalNotPending(id) => {
                write!(f, "No pending approval request for id {id}.")
            }
            Refusal::ApprovalAnswered(id) => {
                write!(f, "Approval request {id} has already been answered.")
            }
        }
    }
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `prompt`: the run ended with `run_complete`.
    Completed,
    /// `prompt`: the run ended with `run_cancelled`, or was cancelled while
    /// waiting to be resent.
    Cancelled,
    /// `prompt`: the run ended with a run-scoped `error`.
    Failed { message: String },
    /// A command-scoped `error` was attributed to the request (for `prompt`:
    /// after the race retries).
    Refused { message: String },
    /// `cancel` (the run ended, or no run was active), `reset` (its event
    /// arrived), `shutdown` (the backend exited).
    Done,
    /// `configure`: `config` with `ok: true`.
    Configured,
    /// `configure`: `config` with `ok: false`.
    ConfigRejected { code: String, message: String },
    /// `approve`: the resolved record for the id arrived.
    Resolved,
    /// `approve`: the approval was closed (a terminal event, `reset` or
    /// `shutdown`) before a resolved record arrived.
    ApprovalClosed,
    /// The session ended while the request waited.
    Closed(Close),
}

/// Why the session ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The backend exited after `shutdown` was requested or announced.
    Shutdown,
    /// The backend exited on its own.
    Exit,
    /// The backend broke the protocol; the host should kill it.
    ProtocolError { message: String },
}

impl CloseReason {
    /// The reference's name of the reason (`SessionClose.reason`).
    pub fn name(&self) -> &'static str {
        match self {
            CloseReason::Shutdown => "shutdown",
            CloseReason::Exit => "exit",
            CloseReason::ProtocolError { .. } => "protocol-error",
        }
    }
}

/// The end of a session: why, and the backend's exit status if it exited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Close {
    pub reason: CloseReason,
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// What the host must do after a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Write this frame (newline included) to the backend's stdin.
    Send(String),
    /// A request settled. When returned by [`Session::on_event`], the event
    /// being processed is the one that settled it.
    Settled { ticket: Ticket, outcome: Outcome },
    /// A prompt was refused by the §12 race: call [`Session::retry_due`]
    /// with this ticket after `after`.
    RetryAfter { ticket: Ticket, after: Duration },
    /// A command-scoped error that no waiting request takes (the reference's
    /// `command-rejected` diagnostic).
    Rejected { message: String },
    /// The session ended (exactly once); every waiting request has settled
    /// before this output.
    Closed(Close),
}

/// A sent command still waiting for its answer.
#[derive(Clone, Debug)]
enum Sent {
    Prompt,
    Cancel(Ticket),
    Reset {
        ticket: Ticket,
        sent_at: Instant,
        retries: u32,
    },
    Configure(Ticket),
    Approve {
        id: String,
        ticket: Ticket,
    },
    Shutdown,
}

impl Sent {
    fn is_approve(&self) -> bool {
        matches!(self, Sent::Approve { .. })
    }
}

/// The kinds of [`Sent`] an acknowledgement can take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ack {
    Prompt,
    Cancel,
    Reset,
    Configure,
    Shutdown,
}

impl Ack {
    fn takes(self, sent: &Sent) -> bool {
        matches!(
            (self, sent),
            (Ack::Prompt, Sent::Prompt)
                | (Ack::Cancel, Sent::Cancel(_))
                | (Ack::Reset, Sent::Reset { .. })
                | (Ack::Configure, Sent::Configure(_))
                | (Ack::Shutdown, Sent::Shutdown)
        )
    }
}

/// The one run at a time.
#[derive(Debug)]
struct Run {
    ticket: Ticket,
    frame: String,
    retries: u32,
    /// Its prompt went out within [`RACE_WINDOW`] of the previous run's
    /// terminal event, so a refusal can be the race.
    raceable: bool,
    /// Refused by the race and not yet resent (nothing in flight).
    awaiting_retry: bool,
}

/// An approval the backend asked for and has not closed.
#[derive(Debug)]
struct Approval {
    id: String,
    /// The host's answer on its way, if any.
    answer: Option<Ticket>,
}

/// The correlation state of one backend session. See the module docs.
#[derive(Debug, Default)]
pub struct Session {
    ready: bool,
    sent: VecDeque<Sent>,
    run: Option<Run>,
    cancel_waiters: Vec<Ticket>,
    reset_waiters: Vec<Ticket>,
    close_waiters: Vec<Ticket>,
    approvals: Vec<Approval>,
    /// Resets refused by the race, waiting to be resent: ticket and retries.
    reset_retries: Vec<(Ticket, u32)>,
    /// When the last run terminal event was processed.
    last_terminal_at: Option<Instant>,
    close_requested: bool,
    backend_announced_shutdown: bool,
    closed: Option<Close>,
    next_ticket: u64,
}

/// The result of a host request: its ticket and what to do now.
pub type Accepted = (Ticket, Vec<Output>);

impl Session {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a run is active (from `prompt` until its terminal event).
    pub fn run_active(&self) -> bool {
        self.run.is_some()
    }

    /// The ticket of the active run, if any.
    pub fn run_ticket(&self) -> Option<Ticket> {
        self.run.as_ref().map(|run| run.ticket)
    }

    /// The ids of the approvals the backend asked for and has not closed,
    /// in the order they were opened.
    pub fn open_approvals(&self) -> Vec<&str> {
        self.approvals.iter().map(|a| a.id.as_str()).collect()
    }

    /// How the session ended, once it has.
    pub fn closed(&self) -> Option<&Close> {
        self.closed.as_ref()
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        Ticket(self.next_ticket)
    }

    fn open(&self) -> Result<(), Refusal> {
        match &self.closed {
            Some(close) => Err(Refusal::Closed(close.clone())),
            None => Ok(()),
        }
    }

    // ---- host requests -----------------------------------------------------

    /// Starts a run. Settles with `Completed`, `Cancelled`, `Failed`,
    /// `Refused` or `Closed`. The text is sent as given (the backend trims
    /// it); a text that JavaScript's `trim()` empties is refused here, as
    /// the reference does.
    /// `now` places it against the race window.
    pub fn prompt(&mut self, text: &str, now: Instant) -> Result<Accepted, Refusal> {
        self.open()?;
        if self.run.is_some() {
            return Err(Refusal::RunActive);
        }
        if is_js_blank(text) {
            return Err(Refusal::BlankPrompt);
        }
        let frame = encode_command(&Command::Prompt {
            text: text.to_owned(),
        })
        .map_err(Refusal::NotEncodable)?;
        let ticket = self.ticket();
        let raceable = self
            .last_terminal_at
            .is_some_and(|at| now.saturating_duration_since(at) <= RACE_WINDOW);
        self.run = Some(Run {
            ticket,
            frame: frame.clone(),
            retries: 0,
            raceable,
            awaiting_retry: false,
        });
        self.sent.push_back(Sent::Prompt);
        Ok((ticket, vec![Output::Send(frame)]))
    }

    /// Resends a prompt or reset refused by the race, when its
    /// [`Output::RetryAfter`] is due. Does nothing if it has settled meanwhile.
    pub fn retry_due(&mut self, ticket: Ticket, now: Instant) -> Vec<Output> {
        if self.closed.is_some() {
            return Vec::new();
        }
        if let Some(index) = self.reset_retries.iter().position(|(t, _)| *t == ticket) {
            let (ticket, retries) = self.reset_retries.remove(index);
            if !self.reset_waiters.contains(&ticket) {
                return Vec::new();
            }
            self.sent.push_back(Sent::Reset {
                ticket,
                sent_at: now,
                retries,
            });
            return vec![Output::Send(frame(&Command::Reset))];
        }
        match &mut self.run {
            Some(run) if run.ticket == ticket && run.awaiting_retry => {
                run.awaiting_retry = false;
                let frame = run.frame.clone();
                self.sent.push_back(Sent::Prompt);
                vec![Output::Send(frame)]
            }
            _ => Vec::new(),
        }
    }

    /// Cancels the active run. Settles `Done` when the run reaches any
    /// terminal event (a completion counts), or at once, sending nothing,
    /// when no run is active.
    pub fn cancel(&mut self) -> Result<Accepted, Refusal> {
        self.open()?;
        let ticket = self.ticket();
        let mut outputs = self.abandon_retry();
        if !outputs.is_empty() || self.run.is_none() {
            outputs.push(settled(ticket, Outcome::Done));
            return Ok((ticket, outputs));
        }
        self.cancel_waiters.push(ticket);
        self.sent.push_back(Sent::Cancel(ticket));
        Ok((ticket, vec![Output::Send(frame(&Command::Cancel))]))
    }

    /// Resets the conversation (an active run ends first, as cancelled).
    /// Settles `Done` on the `reset` event.
    pub fn reset(&mut self, now: Instant) -> Result<Accepted, Refusal> {
        self.open()?;
        let ticket = self.ticket();
        let mut outputs = self.abandon_retry();
        self.reset_waiters.push(ticket);
        self.sent.push_back(Sent::Reset {
            ticket,
            sent_at: now,
            retries: 0,
        });
        outputs.push(Output::Send(frame(&Command::Reset)));
        Ok((ticket, outputs))
    }

    /// Sends a configuration patch. Settles `Configured` or
    /// `ConfigRejected` on the `config` event; a command error attributed
    /// to it (an older backend's `Unknown command: configure`) is `Refused`.
    pub fn configure(&mut self, patch: Map<String, Value>) -> Result<Accepted, Refusal> {
        self.open()?;
        let frame = encode_command(&Command::Configure { patch }).map_err(Refusal::NotEncodable)?;
        let ticket = self.ticket();
        self.sent.push_back(Sent::Configure(ticket));
        Ok((ticket, vec![Output::Send(frame)]))
    }

    /// Answers an open approval. Settles `Resolved` on the resolved record
    /// for `id`, `ApprovalClosed` if the approval is closed first, `Refused`
    /// on the backend's `No pending approval request …`.
    pub fn approve(
        &mut self,
        id: &str,
        allowed: bool,
        reason: Option<&str>,
    ) -> Result<Accepted, Refusal> {
        self.open()?;
        let index = self
            .approvals
            .iter()
            .position(|a| a.id == id)
            .ok_or_else(|| Refusal::ApprovalNotPending(id.to_owned()))?;
        if self.approvals[index].answer.is_some() {
            return Err(Refusal::ApprovalAnswered(id.to_owned()));
        }
        let frame = encode_command(&Command::Approve {
            id: id.to_owned(),
            allowed,
            reason: reason.map(str::to_owned),
        })
        .map_err(Refusal::NotEncodable)?;
        let ticket = self.ticket();
        self.approvals[index].answer = Some(ticket);
        self.sent.push_back(Sent::Approve {
            id: id.to_owned(),
            ticket,
        });
        Ok((ticket, vec![Output::Send(frame)]))
    }

    /// Asks the backend to shut down (once; later calls only wait). Settles
    /// `Done` when the backend has exited ([`Session::on_exit`]); the host
    /// enforces the grace.
    pub fn shutdown(&mut self) -> Accepted {
        let ticket = self.ticket();
        if self.closed.is_some() {
            return (ticket, vec![settled(ticket, Outcome::Done)]);
        }
        self.close_waiters.push(ticket);
        if self.close_requested {
            return (ticket, Vec::new());
        }
        self.close_requested = true;
        self.sent.push_back(Sent::Shutdown);
        (ticket, vec![Output::Send(frame(&Command::Shutdown))])
    }

    /// A run refused by the race and not yet resent has not started: a
    /// cancel or reset now ends it as cancelled instead of resending.
    fn abandon_retry(&mut self) -> Vec<Output> {
        match self.run.take() {
            Some(run) if run.awaiting_retry => vec![settled(run.ticket, Outcome::Cancelled)],
            other => {
                self.run = other;
                Vec::new()
            }
        }
    }

    // ---- the backend -------------------------------------------------------

    /// Processes one valid event, in stream order. Events before the first
    /// `ready` and after the session closed change nothing.
    /// `now` is when it is processed (the race rules compare times).
    pub fn on_event(&mut self, signal: &Signal, now: Instant) -> Vec<Output> {
        let mut out = Vec::new();
        if self.closed.is_some() {
            return out;
        }
        if !self.ready {
            self.ready = *signal == Signal::Ready;
            return out;
        }
        match signal {
            Signal::Ready | Signal::RunEvent => {}
            Signal::Config {
                ok,
                has_config,
                error,
            } => self.settle_configure(*ok, *has_config, error, &mut out),
            Signal::RunStart => {
                self.take(Ack::Prompt);
            }
            Signal::RunComplete => self.end_run(Outcome::Completed, now, &mut out),
            Signal::RunCancelled => self.end_run(Outcome::Cancelled, now, &mut out),
            Signal::RunError { message } => self.end_run(
                Outcome::Failed {
                    message: message.clone(),
                },
                now,
                &mut out,
            ),
            Signal::CommandError { message } => self.command_error(message, &mut out),
            Signal::CancelRequested | Signal::CancelIgnored => {
                self.take(Ack::Cancel);
                if self.run.is_none() {
                    settle_all(&mut self.cancel_waiters, Outcome::Done, &mut out);
                }
            }
            Signal::Reset => {
                self.take(Ack::Reset);
                self.close_approvals(&mut out);
                settle_all(&mut self.reset_waiters, Outcome::Done, &mut out);
            }
            Signal::Shutdown => {
                self.take(Ack::Shutdown);
                self.close_approvals(&mut out);
                self.backend_announced_shutdown = true;
            }
            Signal::ApprovalPending { request_id } => {
                if let Some(old) = self.approvals.iter().position(|a| a.id == *request_id) {
                    let old = self.approvals.remove(old);
                    if let Some(ticket) = old.answer {
                        out.push(settled(ticket, Outcome::ApprovalClosed));
                    }
                }
                self.approvals.push(Approval {
                    id: request_id.clone(),
                    answer: None,
                });
            }
            Signal::ApprovalResolved { request_id } => {
                if let Some(i) = self
                    .sent
                    .iter()
                    .position(|s| matches!(s, Sent::Approve { id, .. } if id == request_id))
                {
                    self.sent.remove(i);
                }
                if let Some(i) = self.approvals.iter().position(|a| a.id == *request_id) {
                    if let Some(ticket) = self.approvals.remove(i).answer {
                        out.push(settled(ticket, Outcome::Resolved));
                    }
                }
            }
        }
        out
    }

    /// The backend exited: every waiting request settles `Closed`, then
    /// `shutdown` requests settle `Done`.
    pub fn on_exit(&mut self, code: Option<i32>, signal: Option<i32>) -> Vec<Output> {
        let mut out = Vec::new();
        let reason = if self.close_requested || self.backend_announced_shutdown {
            CloseReason::Shutdown
        } else {
            CloseReason::Exit
        };
        self.teardown(
            Close {
                reason,
                code,
                signal,
            },
            &mut out,
        );
        out
    }

    /// Removes the oldest entry an acknowledgement takes; `approve` entries
    /// older than it were handled without an answer (an error would have
    /// come first), so they leave too. Their approvals stay open.
    fn take(&mut self, ack: Ack) -> Option<Sent> {
        let index = self.sent.iter().position(|s| ack.takes(s))?;
        let entry = self.sent.remove(index);
        let mut position = 0;
        self.sent.retain(|s| {
            position += 1;
            position > index || !s.is_approve()
        });
        entry
    }

    fn end_run(&mut self, outcome: Outcome, now: Instant, out: &mut Vec<Output>) {
        self.last_terminal_at = Some(now);
        self.close_approvals(out);
        if let Some(run) = self.run.take() {
            out.push(settled(run.ticket, outcome));
        }
        settle_all(&mut self.cancel_waiters, Outcome::Done, out);
    }

    fn close_approvals(&mut self, out: &mut Vec<Output>) {
        for approval in self.approvals.drain(..) {
            if let Some(ticket) = approval.answer {
                out.push(settled(ticket, Outcome::ApprovalClosed));
            }
        }
    }

    /// A command-scoped error belongs to the oldest command still waiting.
    fn command_error(&mut self, message: &str, out: &mut Vec<Output>) {
        let rejected = || Output::Rejected {
            message: message.to_owned(),
        };
        match self.sent.pop_front() {
            None | Some(Sent::Shutdown) => out.push(rejected()),
            Some(Sent::Approve { id, ticket }) => {
                out.push(rejected());
                if let Some(approval) = self
                    .approvals
                    .iter_mut()
                    .find(|a| a.id == id && a.answer == Some(ticket))
                {
                    approval.answer = None;
                    out.push(settled(
                        ticket,
                        Outcome::Refused {
                            message: message.to_owned(),
                        },
                    ));
                }
            }
            Some(Sent::Prompt) => {
                let cancelled_after = self
                    .sent
                    .iter()
                    .any(|s| matches!(s, Sent::Cancel(_) | Sent::Reset { .. }));
                match &mut self.run {
                    None => out.push(rejected()),
                    // The race, with a cancel or reset sent after the prompt:
                    // resending would put the prompt behind them. The run
                    // never started.
                    Some(run)
                        if message == RUN_ALREADY_ACTIVE && run.raceable && cancelled_after =>
                    {
                        let run = self.run.take().expect("matched Some");
                        out.push(settled(run.ticket, Outcome::Cancelled));
                    }
                    Some(run)
                        if message == RUN_ALREADY_ACTIVE
                            && run.raceable
                            && run.retries < RACE_RETRIES =>
                    {
                        run.retries += 1;
                        run.awaiting_retry = true;
                        out.push(Output::RetryAfter {
                            ticket: run.ticket,
                            after: RACE_RETRY_STEP * run.retries,
                        });
                    }
                    Some(_) => {
                        let run = self.run.take().expect("matched Some");
                        out.push(settled(
                            run.ticket,
                            Outcome::Refused {
                                message: message.to_owned(),
                            },
                        ));
                    }
                }
            }
            Some(Sent::Cancel(ticket)) => {
                if remove(&mut self.cancel_waiters, ticket) {
                    out.push(settled(
                        ticket,
                        Outcome::Refused {
                            message: message.to_owned(),
                        },
                    ));
                }
            }
            Some(Sent::Reset {
                ticket,
                sent_at,
                retries,
            }) => {
                // The reset race: its own cancel just ended the run, and
                // nothing else was sent since: send it again shortly.
                let ended_since = self.last_terminal_at.is_some_and(|at| at >= sent_at);
                if message == RESET_WHILE_ACTIVE
                    && ended_since
                    && retries < RACE_RETRIES
                    && self.sent.is_empty()
                    && self.reset_waiters.contains(&ticket)
                {
                    self.reset_retries.push((ticket, retries + 1));
                    out.push(Output::RetryAfter {
                        ticket,
                        after: RACE_RETRY_STEP * (retries + 1),
                    });
                } else if remove(&mut self.reset_waiters, ticket) {
                    out.push(settled(
                        ticket,
                        Outcome::Refused {
                            message: message.to_owned(),
                        },
                    ));
                }
            }
            Some(Sent::Configure(ticket)) => {
                out.push(settled(
                    ticket,
                    Outcome::Refused {
                        message: message.to_owned(),
                    },
                ));
            }
        }
    }

    fn settle_configure(
        &mut self,
        ok: bool,
        has_config: bool,
        error: &Option<(String, String)>,
        out: &mut Vec<Output>,
    ) {
        let Some(Sent::Configure(ticket)) = self.take(Ack::Configure) else {
            return self.protocol_error(
                "Unexpected config event without pending configure.",
                None,
                out,
            );
        };
        let outcome = match (ok, error) {
            (true, _) if !has_config => {
                return self.protocol_error(
                    "Successful config event did not include config.",
                    Some(ticket),
                    out,
                )
            }
            (true, _) => Outcome::Configured,
            (false, None) => {
                return self.protocol_error(
                    "Failed config event did not include error.",
                    Some(ticket),
                    out,
                )
            }
            (false, Some((code, message))) => Outcome::ConfigRejected {
                code: code.clone(),
                message: message.clone(),
            },
        };
        out.push(settled(ticket, outcome));
    }

    /// The backend broke the session's rules (§7.4): the session closes and
    /// the host should kill the backend. `taken` is a request already out of
    /// the FIFO that settles with the others.
    fn protocol_error(&mut self, message: &str, taken: Option<Ticket>, out: &mut Vec<Output>) {
        let close = Close {
            reason: CloseReason::ProtocolError {
                message: message.to_owned(),
            },
            code: None,
            signal: None,
        };
        if let Some(ticket) = taken {
            out.push(settled(ticket, Outcome::Closed(close.clone())));
        }
        self.teardown(close, out);
    }

    /// Runs once, whatever the cause.
    fn teardown(&mut self, close: Close, out: &mut Vec<Output>) {
        if self.closed.is_some() {
            return;
        }
        self.closed = Some(close.clone());
        let closed = || Outcome::Closed(close.clone());
        for approval in self.approvals.drain(..) {
            if let Some(ticket) = approval.answer {
                out.push(settled(ticket, closed()));
            }
        }
        if let Some(run) = self.run.take() {
            out.push(settled(run.ticket, closed()));
        }
        for entry in self.sent.drain(..) {
            if let Sent::Configure(ticket) = entry {
                out.push(settled(ticket, closed()));
            }
        }
        settle_all(&mut self.cancel_waiters, closed(), out);
        settle_all(&mut self.reset_waiters, closed(), out);
        settle_all(&mut self.close_waiters, Outcome::Done, out);
        out.push(Output::Closed(close));
    }
}

fn settled(ticket: Ticket, outcome: Outcome) -> Output {
    Output::Settled { ticket, outcome }
}

fn settle_all(waiters: &mut Vec<Ticket>, outcome: Outcome, out: &mut Vec<Output>) {
    for ticket in waiters.drain(..) {
        out.push(settled(ticket, outcome.clone()));
    }
}

fn remove(waiters: &mut Vec<Ticket>, ticket: Ticket) -> bool {
    let before = waiters.len();
    waiters.retain(|t| *t != ticket);
    waiters.len() != before
}

/// Frames of commands without fields, which always encode.
fn frame(command: &Command) -> String {
    encode_command(command).expect("a command without fields encodes")
}

/// Whether JavaScript's `String.prototype.trim()` would leave nothing: its
/// white space is Unicode's `White_Space` without U+0085 and with U+FEFF.
pub fn is_js_blank(text: &str) -> bool {
    text.chars()
        .all(|c| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Instant {
        Instant::now()
    }

    fn ready(session: &mut Session) {
        assert!(session.on_event(&Signal::Ready, now()).is_empty());
    }

    /// The backend's refusal of a prompt while its run slot is taken.
    fn race(session: &mut Session) -> Vec<Output> {
        session.on_event(
            &Signal::CommandError {
                message: RUN_ALREADY_ACTIVE.into(),
            },
            now(),
        )
    }

    fn refused(ticket: Ticket) -> Output {
        settled(
            ticket,
            Outcome::Refused {
                message: RUN_ALREADY_ACTIVE.into(),
            },
        )
    }

    /// A run that has just completed, so the next prompt can meet the race.
    fn after_a_run(session: &mut Session) {
        ready(session);
        session.prompt("first", now()).unwrap();
        session.on_event(&Signal::RunStart, now());
        session.on_event(&Signal::RunComplete, now());
    }

    #[test]
    fn a_refusal_is_the_race_only_within_the_window_after_a_terminal_event() {
        let mut s = Session::new();
        ready(&mut s);
        // No run before: a refusal is a refusal.
        let (first, _) = s.prompt("go", now()).unwrap();
        let out = race(&mut s);
        assert_eq!(out, [refused(first)]);
        // Long after the last terminal event: a refusal too.
        let ended = now();
        s.prompt("a", ended).unwrap();
        s.on_event(&Signal::RunStart, ended);
        s.on_event(&Signal::RunComplete, ended);
        let (late, _) = s
            .prompt("b", ended + RACE_WINDOW + Duration::from_millis(1))
            .unwrap();
        let out = race(&mut s);
        assert_eq!(out, [refused(late)]);
    }

    #[test]
    fn js_blank_follows_javascript_trim() {
        assert!(is_js_blank(""));
        assert!(is_js_blank(
            " \t\n\r\u{b}\u{c}\u{a0}\u{2028}\u{3000}\u{feff}"
        ));
        assert!(!is_js_blank("\u{85}"));
        assert!(!is_js_blank("\u{1c}"));
        assert!(!is_js_blank(" x "));
    }

    #[test]
    fn a_second_answer_for_one_approval_is_refused_before_it_is_sent() {
        let mut s = Session::new();
        ready(&mut s);
        let (_, _) = s.prompt("go", now()).unwrap();
        s.on_event(&Signal::RunStart, now());
        s.on_event(
            &Signal::ApprovalPending {
                request_id: "a".into(),
            },
            now(),
        );
        let (first, sent) = s.approve("a", true, None).unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            s.approve("a", false, None),
            Err(Refusal::ApprovalAnswered("a".into()))
        );
        assert_eq!(
            s.on_event(
                &Signal::ApprovalResolved {
                    request_id: "a".into()
                },
                now()
            ),
            [settled(first, Outcome::Resolved)]
        );
        assert_eq!(
            s.approve("a", false, None),
            Err(Refusal::ApprovalNotPending("a".into()))
        );
    }

    #[test]
    fn cancel_while_a_refused_prompt_waits_ends_the_run_as_cancelled() {
        let mut s = Session::new();
        after_a_run(&mut s);
        let (run, _) = s.prompt("go", now()).unwrap();
        let out = race(&mut s);
        assert_eq!(
            out,
            [Output::RetryAfter {
                ticket: run,
                after: RACE_RETRY_STEP
            }]
        );
        let (cancel, out) = s.cancel().unwrap();
        assert_eq!(
            out,
            [
                settled(run, Outcome::Cancelled),
                settled(cancel, Outcome::Done)
            ]
        );
        assert!(s.retry_due(run, now()).is_empty());
        assert!(!s.run_active());
    }

    #[test]
    fn the_race_retry_gives_up_after_its_budget() {
        let mut s = Session::new();
        after_a_run(&mut s);
        let (run, _) = s.prompt("go", now()).unwrap();
        for n in 1..=RACE_RETRIES {
            let out = race(&mut s);
            assert_eq!(
                out,
                [Output::RetryAfter {
                    ticket: run,
                    after: RACE_RETRY_STEP * n
                }]
            );
            assert_eq!(s.retry_due(run, now()).len(), 1);
        }
        let out = race(&mut s);
        assert_eq!(out, [refused(run)]);
    }

    #[test]
    fn a_prompt_over_the_line_limit_is_refused_unsent() {
        let mut s = Session::new();
        ready(&mut s);
        let long = "x".repeat(crate::command::MAX_COMMAND_CODE_POINTS);
        assert!(matches!(
            s.prompt(&long, now()),
            Err(Refusal::NotEncodable(_))
        ));
        assert!(!s.run_active());
    }

    #[test]
    fn shutdown_is_sent_once_and_every_waiter_settles_on_exit() {
        let mut s = Session::new();
        ready(&mut s);
        let (a, out) = s.shutdown();
        assert_eq!(out.len(), 1);
        let (b, out) = s.shutdown();
        assert!(out.is_empty());
        let out = s.on_exit(Some(0), None);
        let close = Close {
            reason: CloseReason::Shutdown,
            code: Some(0),
            signal: None,
        };
        assert_eq!(
            out,
            [
                settled(a, Outcome::Done),
                settled(b, Outcome::Done),
                Output::Closed(close.clone())
            ]
        );
        assert_eq!(s.prompt("x", now()).unwrap_err(), Refusal::Closed(close));
        let (c, out) = s.shutdown();
        assert_eq!(out, [settled(c, Outcome::Done)]);
    }
}
