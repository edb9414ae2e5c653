//! What the session's refusals and settlements mean as Connect errors.

use bridge_core::session::{Close, CloseReason, Outcome, Refusal};
use connectrpc::ConnectError;

use super::RunStream;
use crate::bounded::echo;

/// The run's terminal settlement ends its `Prompt` stream: OK after the
/// terminal event (already queued), or with the error that refused it.
pub(super) fn end_run_stream(run: RunStream, outcome: &Outcome) {
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

/// A request refused before anything was sent, as a Connect error (an
/// approval id is quoted bounded: it is the request's).
pub fn refusal_error(refusal: &Refusal) -> ConnectError {
    match refusal {
        Refusal::Closed(close) => closed_error(close),
        Refusal::RunActive => ConnectError::failed_precondition(refusal.to_string()),
        Refusal::BlankPrompt | Refusal::NotEncodable(_) => ConnectError::invalid_argument(refusal.to_string()),
        Refusal::ApprovalNotPending(id) => {
            ConnectError::not_found(format!("No pending approval request for id {}.", echo(id)))
        }
        Refusal::ApprovalAnswered(id) => {
            ConnectError::already_exists(format!("Approval request {} has already been answered.", echo(id)))
        }
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

