//! The Connect services of `agentlane.bridge.v1`: `AgentService` on the
//! conversation a request addresses (`agent.rs`), `BridgeControlService`
//! and `ConversationService` (`control.rs`). Each request becomes a core
//! session request, each settlement an answer, each refusal a Connect error
//! with a documented code (see the README's table).

mod agent;
mod control;

pub use agent::Agent;
pub use control::{Control, ConversationsApi};

use connectrpc::{ConnectError, Response, ServiceResult};

use crate::conversation::{backend_refusal, closed_error, Conversation, Item, Settlement, Shared};
use crate::proto::agentlane::bridge::v1 as pb;
use bridge_core::session::Outcome;

/// The API name, as `GetVersion` and the discovery line report it.
pub const API: &str = "agentlane.bridge.v1";
/// What this bridge can do; clients ignore names they do not know.
/// "conversations": `ConversationService` and `conversation_id`; "cold" and
/// "warm": the start modes `CreateConversation` serves ("warm" while warm
/// starts can be made: with `--warm`, unless they are off); "usage": a
/// run's terminal item carries `usage`; "approval-ids": approvals carry a
/// bridge-wide id that `Approve` takes; "host-tools": conversations have
/// tools of the application's own (`ToolCall` items, `AnswerToolCall`);
/// "snapshots": the bridge keeps a conversation's committed state
/// (`ConversationSnapshot` items, `GetSnapshot`, `resume_json`).
pub fn capabilities(warm: bool) -> Vec<String> {
    let mut names = vec![
        "approvals", "configure", "subscribe", "json", "proto", "conversations", "cold", "usage", "approval-ids",
        "host-tools", "snapshots",
    ];
    if warm {
        names.push("warm");
    }
    names.into_iter().map(str::to_owned).collect()
}

fn bridge_event(item: &Item) -> pb::BridgeEvent {
    match item {
        Item::Event {
            seq,
            event_type,
            line,
            approval_id,
        } => pb::BridgeEvent {
            seq: *seq,
            r#type: event_type.as_str().to_owned(),
            json: line.to_string(),
            approval_id: approval_id.as_deref().unwrap_or_default().to_owned(),
            ..Default::default()
        },
        Item::Invalid { seq, .. } => pb::BridgeEvent {
            seq: *seq,
            ..Default::default()
        },
    }
}

pub(crate) fn event_field(event: &Option<Shared>) -> EventField {
    event.as_deref().map(bridge_event).into()
}

/// What a run's settlement means for the caller when it is not the
/// expected success.
pub(crate) fn settlement_error(conversation: &Conversation, settlement: &Settlement) -> ConnectError {
    let by = settlement
        .event
        .as_deref()
        .and_then(|item| match item {
            Item::Event { event_type, .. } => Some(event_type.as_str()),
            Item::Invalid { .. } => None,
        })
        .unwrap_or("the backend");
    match &settlement.outcome {
        Outcome::Refused { message } => backend_refusal(message),
        Outcome::ApprovalClosed => ConnectError::failed_precondition(format!(
            "the approval was closed by {by} before the backend resolved it"
        )),
        Outcome::Closed(close) => conversation
            .ended_error()
            .unwrap_or_else(|| closed_error(close)),
        other => ConnectError::internal(format!("unexpected settlement {other:?}")),
    }
}

pub(crate) async fn settled(
    conversation: &Conversation,
    waiting: tokio::sync::oneshot::Receiver<Settlement>,
) -> Result<Settlement, ConnectError> {
    waiting.await.map_err(|_| {
        conversation
            .ended_error()
            .unwrap_or_else(|| ConnectError::unavailable("agentlane-bridge is shutting down"))
    })
}

pub(crate) type EventField = buffa::MessageField<pb::BridgeEvent, buffa::Inline<pb::BridgeEvent>>;

/// Waits for a request's settlement: the answer built from the settling
/// event when it is `success`, the matching Connect error otherwise.
pub(crate) async fn answer<T>(
    conversation: &Conversation,
    waiting: tokio::sync::oneshot::Receiver<Settlement>,
    success: Outcome,
    build: impl FnOnce(EventField) -> T,
) -> ServiceResult<T> {
    let settlement = settled(conversation, waiting).await?;
    if settlement.outcome == success {
        Response::ok(build(event_field(&settlement.event)))
    } else {
        Err(settlement_error(conversation, &settlement))
    }
}

