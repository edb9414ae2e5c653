//! What a [`Session`](super::Session) hands back: tickets, refusals,
//! outcomes and the outputs the host acts on. Kept apart from the state
//! machine so the vocabulary a host matches on reads in one place.

use std::fmt;
use std::time::Duration;

use super::RUN_ALREADY_ACTIVE;
use crate::command::CommandError;

/// One request of the host, from the moment it is accepted until its
/// settlement ([`Output::Settled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub(super) u64);

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
