//! `BridgeControlService` (the bridge itself) and `ConversationService`
//! (its conversations).

use std::sync::Arc;
use std::time::Duration;

use connectrpc::{ConnectError, RequestContext, Response, ServiceRequest, ServiceResult};

use super::{capabilities, API};
use crate::conversations::start::StartMode;
use crate::conversations::host_plan::ToolDeclaration;
use crate::conversations::{Conversations, HostRequest, Hosted, DEFAULT_ID};
use crate::lifecycle::{ExitReport, Lifecycle};
use crate::proto::agentlane::bridge::v1 as pb;

pub struct Control {
    pub conversations: Arc<Conversations>,
    pub lifecycle: Arc<Lifecycle>,
    /// The NDJSON protocol version of the default conversation's `ready`.
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
        let ready_json = self
            .conversations
            .get(DEFAULT_ID)
            .map(|hosted| hosted.ready_line.clone())
            .unwrap_or_default();
        Response::ok(pb::GetVersionResponse {
            bridge_version: env!("CARGO_PKG_VERSION").into(),
            api: API.into(),
            protocol_version: self.protocol_version.clone(),
            ready_json,
            capabilities: capabilities(self.conversations.starter.warm_available()),
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

pub struct ConversationsApi {
    pub conversations: Arc<Conversations>,
}

fn described(hosted: &Hosted) -> pb::Conversation {
    pb::Conversation {
        id: hosted.id.clone(),
        ready_json: hosted.ready_line.clone(),
        start_mode: match hosted.mode {
            StartMode::Cold => pb::StartMode::START_MODE_COLD,
            StartMode::Warm => pb::StartMode::START_MODE_WARM,
        }
        .into(),
        backend_pid: hosted.backend_pid,
        running: hosted.conversation.running(),
        ..Default::default()
    }
}

fn exit_of(report: ExitReport) -> pb::CloseConversationResponse {
    pb::CloseConversationResponse {
        backend_exit_code: report.status.code.unwrap_or(-1),
        backend_signal: report.status.signal.unwrap_or(0),
        killed: report.killed,
        ..Default::default()
    }
}

#[allow(refining_impl_trait)]
impl pb::ConversationService for ConversationsApi {
    async fn create_conversation(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::CreateConversationRequest>,
    ) -> ServiceResult<pb::CreateConversationResponse> {
        let mode = match request.start_mode.as_known() {
            Some(pb::StartMode::START_MODE_UNSPECIFIED) => None,
            Some(pb::StartMode::START_MODE_COLD) => Some(StartMode::Cold),
            Some(pb::StartMode::START_MODE_WARM) => Some(StartMode::Warm),
            None => {
                return Err(ConnectError::invalid_argument(format!(
                    "unknown start_mode {}",
                    request.start_mode.to_i32()
                )))
            }
        };
        let host = HostRequest {
            tools: request
                .tools
                .iter()
                .map(|tool| ToolDeclaration {
                    name: tool.name.to_owned(),
                    description: tool.description.to_owned(),
                    input_schema: serde_json::Value::String(tool.input_schema_json.to_owned()),
                    timeout_ms: u64::from(tool.timeout_ms),
                })
                .collect(),
            call_timeout: (request.tool_timeout_ms > 0).then(|| Duration::from_millis(u64::from(request.tool_timeout_ms))),
            keep_snapshots: request.keep_snapshots,
            resume_json: (!request.resume_json.is_empty()).then(|| request.resume_json.to_owned()),
        };
        let hosted = self.conversations.create(mode, host).await?;
        Response::ok(pb::CreateConversationResponse {
            conversation: described(&hosted).into(),
            ..Default::default()
        })
    }

    async fn list_conversations(
        &self,
        _ctx: RequestContext,
        _request: ServiceRequest<'_, pb::ListConversationsRequest>,
    ) -> ServiceResult<pb::ListConversationsResponse> {
        Response::ok(pb::ListConversationsResponse {
            conversations: self.conversations.list().iter().map(|h| described(h)).collect(),
            ..Default::default()
        })
    }

    async fn close_conversation(
        &self,
        _ctx: RequestContext,
        request: ServiceRequest<'_, pb::CloseConversationRequest>,
    ) -> ServiceResult<pb::CloseConversationResponse> {
        if request.id.is_empty() {
            return Err(ConnectError::invalid_argument(
                "id must name a conversation (\"default\" for the default one)",
            ));
        }
        let grace = Duration::from_millis(u64::from(request.grace_ms));
        let report = self.conversations.close(request.id, Some(grace)).await?;
        Response::ok(exit_of(report))
    }
}
