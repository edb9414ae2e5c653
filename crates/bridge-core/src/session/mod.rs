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

mod answers;
mod outputs;
mod signal;

pub use outputs::{Close, CloseReason, Outcome, Output, Refusal, Ticket};
pub use signal::Signal;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::command::{encode_command, Command};

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
