//! What a conversation's host channel will serve, judged before its backend
//! starts: its tools (from `CreateConversation`, or `--tools FILE` for the
//! default conversation) and the snapshot it resumes. Anything refused here
//! is the caller's `invalid_argument`; nothing has started yet.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bridge_host_channel::{Channel, ChannelOptions, StoreOptions, ToolSpec};
use connectrpc::ConnectError;
use serde::Deserialize;
use serde_json::Value;

use crate::conversation::{HostPlan, Snapshot};

/// The one `AgentSnapshot.schema_version` agentlane 0.22 writes and reads
/// (as `lib/store/snapshot.ts` checks it).
const SNAPSHOT_SCHEMA_VERSION: u64 = 1;

/// One tool as declared (the proto's `ToolDefinition`, or an entry of
/// `--tools FILE`).
#[derive(Clone, Debug, Deserialize)]
pub struct ToolDeclaration {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The input schema: a JSON object (in `--tools FILE`), or its text.
    #[serde(alias = "inputSchema")]
    pub input_schema: Value,
    /// 0 or absent: the conversation's deadline.
    #[serde(default, alias = "timeoutMs")]
    pub timeout_ms: u64,
}

/// What a conversation's host channel is asked for.
#[derive(Clone, Debug, Default)]
pub struct HostRequest {
    pub tools: Vec<ToolDeclaration>,
    /// A call's deadline unless its tool has its own.
    pub call_timeout: Option<Duration>,
    pub keep_snapshots: bool,
    /// The snapshot document's text.
    pub resume_json: Option<String>,
}

impl HostRequest {
    /// The plan, or why the request cannot be served (`invalid_argument`).
    pub fn plan(&self) -> Result<HostPlan, ConnectError> {
        let mut specs = Vec::with_capacity(self.tools.len());
        let mut timeouts = HashMap::new();
        for tool in &self.tools {
            let schema = match &tool.input_schema {
                Value::String(text) => serde_json::from_str(text).map_err(|e| {
                    ConnectError::invalid_argument(format!(
                        "tool {:?}: input_schema_json is not JSON: {e}",
                        tool.name
                    ))
                })?,
                other => other.clone(),
            };
            let timeout = (tool.timeout_ms > 0).then(|| Duration::from_millis(tool.timeout_ms));
            timeouts.insert(tool.name.clone(), timeout.or(self.call_timeout));
            specs.push(ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: schema,
                timeout,
            });
        }
        let channel = Channel::new(ChannelOptions {
            tools: specs,
            call_timeout: self.call_timeout,
            // The bridge answers store operations at once, from memory.
            store: Some(StoreOptions { timeout: None }),
            ..ChannelOptions::default()
        })
        .map_err(|error| ConnectError::invalid_argument(error.to_string()))?;
        let resume = self
            .resume_json
            .as_deref()
            .map(check_snapshot)
            .transpose()?;
        Ok(HostPlan {
            channel,
            timeouts,
            tools_declared: !self.tools.is_empty(),
            require_store: self.keep_snapshots || resume.is_some(),
            resume,
        })
    }
}

fn refused(field: &str, why: &str) -> ConnectError {
    ConnectError::invalid_argument(format!(
        "resume_json refused (snapshot-corrupted): {field} {why}"
    ))
}

/// A snapshot the backend can load: agentlane's `AgentSnapshot` of schema
/// version 1 (its own validation judges the deeper fields when it loads).
/// Refused before anything starts: a corrupted document, or one of
/// another version.
pub fn check_snapshot(text: &str) -> Result<Snapshot, ConnectError> {
    let document: Value = serde_json::from_str(text)
        .map_err(|e| refused("the document", &format!("is not JSON: {e}")))?;
    let Some(object) = document.as_object() else {
        return Err(refused("the document", "must be a JSON object"));
    };
    match object.get("schema_version").and_then(Value::as_u64) {
        Some(SNAPSHOT_SCHEMA_VERSION) => {}
        Some(other) => {
            return Err(ConnectError::invalid_argument(format!(
                "resume_json refused (snapshot-version-unsupported): schema_version is {other}; this bridge reads version {SNAPSHOT_SCHEMA_VERSION} (agentlane 0.22)"
            )))
        }
        None => return Err(refused("schema_version", "must be a whole number")),
    }
    let agent_type = object
        .get("agent_id")
        .and_then(Value::as_object)
        .and_then(|agent| agent.get("type"))
        .and_then(Value::as_str);
    if agent_type.is_none_or(str::is_empty) {
        return Err(refused("agent_id.type", "must be a non-empty string"));
    }
    let Some(revision) = object.get("revision").and_then(Value::as_u64) else {
        return Err(refused("revision", "must be a whole number of at least 0"));
    };
    let state = object.get("state").and_then(Value::as_object);
    if !state.is_some_and(|s| s.get("history").is_some_and(Value::is_array)) {
        return Err(refused("state.history", "must be an array"));
    }
    Ok(Snapshot {
        json: Arc::new(text.to_owned()),
        revision,
    })
}

/// `--tools FILE`: a JSON array of `{name, description, input_schema,
/// timeout_ms}`.
pub fn read_tools_file(path: &std::path::Path) -> Result<Vec<ToolDeclaration>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read --tools {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "--tools {}: not a JSON array of {{name, description, input_schema, timeout_ms}}: {e}",
            path.display()
        )
    })
}
