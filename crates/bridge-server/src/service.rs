//! The two Connect services of `agentlane.bridge.v1` on top of the
//! [`Conversation`]: each request becomes a core session request, each
//! settlement an answer, each refusal a Connect error with a documented code
//! (see the README's table).

use std::sync::Arc;
use std::time::Duration;

use connectrpc::{
    ConnectError, ErrorDetail, RequestContext, Response, ServiceRequest, ServiceResult,
    ServiceStream,
};
use futures::StreamExt;
use serde_json::{Map, Value};

use crate::conversation::{backend_refusal, closed_error, Conversation, Item, Settlement, Shared};
use crate::lifecycle::Lifecycle;
use crate::outgoing::Outgoing;
use crate::proto::agentlane::bridge::v1 as pb;
use bridge_core::session::Outcome;

/// The API name, as `GetVersion` and the discovery line report it.
pub const API: &str = "agentlane.bridge.v1";
/// What this bridge can do; clients ignore names they do not know.
pub const CAPABILITIES: [&str; 5] = ["approvals", "configure", "subscribe", "json", "proto"];

fn bridge_event(item: &Item) -> pb::BridgeEvent {
    match item {
        Item::Event {
            seq,
            event_type,
            line,
        } => pb::BridgeEvent {
            seq: *seq,
            r#type: event_type.as_str().to_owned(),
            json: line.to_string(),
            ..Default::default()
        },
        Item::Invalid { seq, .. } => pb::BridgeEvent {
            seq: *seq,
            ..Default::default()
        },
    }
}

fn event_field(event: &Option<Shared>) -> EventField {
    event.as_deref().map(bridge_event).into()
}

/// What a run's settlement means for the caller when it is not the
/// expected success.
fn settlement_error(conversation: &Conversation, settlement: &Settlement) -> ConnectError {
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

async fn settled(
    conversation: &Conversation,
    waiting: tokio::sync::oneshot::Receiver<Settlement>,
) -> Result<Settlement, ConnectError> {
    waiting.await.map_err(|_| {
        conversation
            .ended_error()
            .unwrap_or_else(|| ConnectError::unavailable("agentlane-bridge is shutting down"))
    })
}

type EventField = buffa::MessageField<pb::BridgeEvent, buffa::Inline<pb::BridgeEvent>>;

/// Waits for a request's settlement: the answer built from the settling
/// event when it is `success`, the matching Connect error otherwise.
async fn answer<T>(
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

pub struct Agent {
    pub conversation: Arc<Conversation>,
}

// The handlers name their concrete answer types.
#[allow(refining_impl_trait)]
impl pb::AgentService for Agent {
    async fn prompt(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::PromptRequest>,
    ) -> ServiceResult<ServiceStream<Outgoing>> {
        let (started, stream) = self.conversation.prompt(request.text)?;
        match started.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => {
                return Err(self
                    .conversation
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
        let waiting = self
            .conversation
            .approve(request.id, request.allowed, request.reason)?;
        answer(&self.conversation, waiting, Outcome::Resolved, |resolved| {
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
        _request: ServiceRequest<'_, pb::CancelRequest>,
    ) -> ServiceResult<pb::CancelResponse> {
        let waiting = self.conversation.cancel()?;
        answer(&self.conversation, waiting, Outcome::Done, |event| {
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
        _request: ServiceRequest<'_, pb::ResetRequest>,
    ) -> ServiceResult<pb::ResetResponse> {
        let waiting = self.conversation.reset()?;
        answer(&self.conversation, waiting, Outcome::Done, |event| {
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
        let patch: Map<String, Value> = serde_json::from_str(request.patch_json).map_err(|e| {
            ConnectError::invalid_argument(format!(
                "patch_json must be the text of a JSON object: {e}"
            ))
        })?;
        let waiting = self.conversation.configure(patch)?;
        let settlement = settled(&self.conversation, waiting).await?;
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
            _ => Err(settlement_error(&self.conversation, &settlement)),
        }
    }

    async fn subscribe(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::SubscribeRequest>,
    ) -> ServiceResult<ServiceStream<Outgoing>> {
        let stream = self.conversation.subscribe(request.batched)?;
        Response::ok(Box::pin(stream.map(|out| out.map(Outgoing))) as ServiceStream<Outgoing>)
    }
}

pub struct Control {
    pub conversation: Arc<Conversation>,
    pub lifecycle: Arc<Lifecycle>,
    /// The NDJSON protocol version of the backend's `ready`.
    pub protocol_version: String,
}

#[allow(refining_impl_trait)]
impl pb::BridgeControlService for Control {
    async fn ping(
        &self,
        _ctx: RequestContext,
        _request: ServiceRequest<'_, pb::PingRequest>,
    ) -> ServiceResult<pb::PingResponse> {
        Response::ok(pb::PingResponse {
            message: "pong".into(),
            ..Default::default()
        })
    }

    async fn get_version(
        &self,
        _ctx: RequestContext,
        _request: ServiceRequest<'_, pb::GetVersionRequest>,
    ) -> ServiceResult<pb::GetVersionResponse> {
        Response::ok(pb::GetVersionResponse {
            bridge_version: env!("CARGO_PKG_VERSION").into(),
            api: API.into(),
            protocol_version: self.protocol_version.clone(),
            ready_json: self.conversation.ready_line().unwrap_or_default(),
            capabilities: CAPABILITIES.iter().map(|c| (*c).to_owned()).collect(),
            ..Default::default()
        })
    }

    async fn shutdown(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::ShutdownRequest>,
    ) -> ServiceResult<pb::ShutdownResponse> {
        self.lifecycle
            .request_stop(Some(Duration::from_millis(u64::from(request.grace_ms))));
        let report = self.lifecycle.exited().await;
        Response::ok(pb::ShutdownResponse {
            backend_exit_code: report.status.code.unwrap_or(-1),
            backend_signal: report.status.signal.unwrap_or(0),
            killed: report.killed,
            ..Default::default()
        })
    }
}
