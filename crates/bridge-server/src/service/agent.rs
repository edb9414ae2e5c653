//! `AgentService`: every call on the conversation its `conversation_id`
//! names (empty: the default conversation).

use std::sync::Arc;

use connectrpc::{
    ConnectError, ErrorDetail, RequestContext, Response, ServiceRequest, ServiceResult,
    ServiceStream,
};
use futures::StreamExt;
use serde_json::{Map, Value};

use super::{answer, event_field, settled, settlement_error};
use crate::bounded::echo;
use crate::conversation::Conversation;
use crate::conversations::ids::split_bridge_wide;
use crate::conversations::Conversations;
use crate::outgoing::Outgoing;
use crate::side_items::snapshot_message;
use bridge_host_channel::Answer;
use crate::proto::agentlane::bridge::v1 as pb;
use bridge_core::session::Outcome;

pub struct Agent {
    pub conversations: Arc<Conversations>,
}

impl Agent {
    fn conversation(&self, id: &str) -> Result<Arc<Conversation>, ConnectError> {
        Ok(self.conversations.get(id)?.conversation.clone())
    }
}

/// The conversation an `AnswerToolCall` addresses and the call's own id
/// (`tool-call-<n>`): its bridge-wide id names its conversation.
fn tool_call_target<'a>(id: &'a str, conversation_id: &'a str) -> Result<(&'a str, &'a str), ConnectError> {
    match split_bridge_wide(id) {
        None => Err(ConnectError::invalid_argument(format!(
            "{} is not a tool call id (ToolCall.id, `<conversation id>/tool-call-<n>`)",
            echo(id)
        ))),
        Some((owner, _)) if !conversation_id.is_empty() && conversation_id != owner => {
            Err(ConnectError::invalid_argument(format!(
                "the tool call {} belongs to conversation {owner:?}, not to the conversation_id given ({})",
                echo(id),
                echo(conversation_id)
            )))
        }
        Some(target) => Ok(target),
    }
}

/// The conversation an `Approve` addresses and the backend's own id of the
/// approval: a bridge-wide id names its conversation (which must then be
/// the `conversation_id` given, if any); a backend's own id is answered in
/// the conversation `conversation_id` names.
fn approval_target<'a>(id: &'a str, conversation_id: &'a str) -> Result<(&'a str, &'a str), ConnectError> {
    match split_bridge_wide(id) {
        None => Ok((conversation_id, id)),
        Some((owner, _)) if !conversation_id.is_empty() && conversation_id != owner => {
            Err(ConnectError::invalid_argument(format!(
                "the approval {} belongs to conversation {owner:?}, not to the conversation_id given ({})",
                echo(id),
                echo(conversation_id)
            )))
        }
        Some((owner, own)) => Ok((owner, own)),
    }
}

// The handlers name their concrete answer types.
#[allow(refining_impl_trait)]
impl pb::AgentService for Agent {
    async fn prompt(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::PromptRequest>,
    ) -> ServiceResult<ServiceStream<Outgoing>> {
        let conversation = self.conversation(request.conversation_id)?;
        let (started, stream) = conversation.prompt(request.text)?;
        match started.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => {
                return Err(conversation
                    .ended_error()
                    .unwrap_or_else(|| ConnectError::unavailable("the run ended")))
            }
        }
        Response::ok(Box::pin(stream.map(|out| out.map(Outgoing))) as ServiceStream<Outgoing>)
    }

    async fn approve(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::ApproveRequest>,
    ) -> ServiceResult<pb::ApproveResponse> {
        let (conversation_id, request_id) = approval_target(request.id, request.conversation_id)?;
        let conversation = self.conversation(conversation_id)?;
        let waiting = conversation.approve(request_id, request.allowed, request.reason)?;
        answer(&conversation, waiting, Outcome::Resolved, |resolved| {
            pb::ApproveResponse {
                resolved,
                ..Default::default()
            }
        })
        .await
    }

    async fn cancel(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::CancelRequest>,
    ) -> ServiceResult<pb::CancelResponse> {
        let conversation = self.conversation(request.conversation_id)?;
        let waiting = conversation.cancel()?;
        answer(&conversation, waiting, Outcome::Done, |event| {
            pb::CancelResponse {
                event,
                ..Default::default()
            }
        })
        .await
    }

    async fn reset(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::ResetRequest>,
    ) -> ServiceResult<pb::ResetResponse> {
        let conversation = self.conversation(request.conversation_id)?;
        let waiting = conversation.reset()?;
        answer(&conversation, waiting, Outcome::Done, |event| {
            pb::ResetResponse {
                event,
                ..Default::default()
            }
        })
        .await
    }

    async fn configure(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::ConfigureRequest>,
    ) -> ServiceResult<pb::ConfigureResponse> {
        let conversation = self.conversation(request.conversation_id)?;
        let patch: Map<String, Value> = serde_json::from_str(request.patch_json).map_err(|e| {
            ConnectError::invalid_argument(format!(
                "patch_json must be the text of a JSON object: {e}"
            ))
        })?;
        let waiting = conversation.configure(patch)?;
        let settlement = settled(&conversation, waiting).await?;
        match &settlement.outcome {
            Outcome::Configured => Response::ok(pb::ConfigureResponse {
                event: event_field(&settlement.event),
                ..Default::default()
            }),
            Outcome::ConfigRejected { code, message } => {
                let error = match code.as_str() {
                    "unsupported" => ConnectError::unimplemented(message.clone()),
                    "internal" => ConnectError::internal(message.clone()),
                    _ => ConnectError::invalid_argument(message.clone()),
                };
                let detail = pb::ConfigureFailure {
                    code: code.clone(),
                    event: event_field(&settlement.event),
                    ..Default::default()
                };
                Err(error.with_detail(ErrorDetail::from_message(
                    "agentlane.bridge.v1.ConfigureFailure",
                    &detail,
                )))
            }
            Outcome::Refused { message } => Err(ConnectError::unimplemented(message.clone())),
            _ => Err(settlement_error(&conversation, &settlement)),
        }
    }

    async fn answer_tool_call(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::AnswerToolCallRequest>,
    ) -> ServiceResult<pb::AnswerToolCallResponse> {
        use pb::__buffa::view::oneof::answer_tool_call_request::Answer as Given;
        let (conversation_id, own_id) = tool_call_target(request.id, request.conversation_id)?;
        let conversation = self.conversation(conversation_id)?;
        let answer = match &request.answer {
            Some(Given::ResultJson(json)) => {
                serde_json::from_str::<&serde_json::value::RawValue>(json).map_err(|e| {
                    ConnectError::invalid_argument(format!("result_json must be the text of one JSON value: {e}"))
                })?;
                Answer::Value((*json).to_owned())
            }
            Some(Given::ErrorMessage(message)) => Answer::tool_error(*message),
            None => {
                return Err(ConnectError::invalid_argument(
                    "an answer needs result_json or error_message",
                ))
            }
        };
        conversation.answer_tool_call(own_id, answer)?;
        Response::ok(pb::AnswerToolCallResponse::default())
    }

    async fn get_snapshot(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::GetSnapshotRequest>,
    ) -> ServiceResult<pb::GetSnapshotResponse> {
        let conversation = self.conversation(request.conversation_id)?;
        let id = self.conversations.get(request.conversation_id)?.id.clone();
        let snapshot = conversation.snapshot()?;
        Response::ok(pb::GetSnapshotResponse {
            snapshot: snapshot
                .map(|snap| snapshot_message(&id, &snap.json, snap.revision))
                .into(),
            ..Default::default()
        })
    }

    async fn subscribe(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::SubscribeRequest>,
    ) -> ServiceResult<ServiceStream<Outgoing>> {
        let conversation = self.conversation(request.conversation_id)?;
        let stream = conversation.subscribe(request.batched)?;
        Response::ok(Box::pin(stream.map(|out| out.map(Outgoing))) as ServiceStream<Outgoing>)
    }
}

