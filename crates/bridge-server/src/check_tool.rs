//! Step 3 of `agentlane-bridge check`: one tool of the host's own. The
//! check creates a conversation that declares the tool `lookup` (a customer
//! id in, a name out), runs `--tool-prompt`, answers the agent's call of the
//! tool (and allows any approval the run asks) and checks that its answer
//! reaches the final answer: the reverse direction with data, the proof
//! that an adapter's own tools work through this bridge.

use std::time::Duration;

use connectrpc::client::HttpClient;
use connectrpc::ErrorCode;
use serde_json::Value;

use crate::proto::agentlane::bridge::v1 as pb;
use crate::proto::agentlane::bridge::v1::__buffa::oneof::prompt_response::Item;

/// The tool the check declares.
pub const TOOL: &str = "lookup";
const SCHEMA: &str = r#"{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"]}"#;

/// What the check's tool answers for a customer id.
fn answer_for(customer_id: &str) -> String {
    format!("{customer_id} is Ada Lovelace (checked by agentlane-bridge)")
}

/// What step 3 saw.
pub enum Outcome {
    /// The tool was called and its answer reached the final answer.
    Passed { calls: usize, final_output: String },
    /// The app's factory does not add the host's tools.
    NotTaken(String),
}

pub async fn step3(
    conversations: &pb::ConversationServiceClient<HttpClient>,
    agent: &pb::AgentServiceClient<HttpClient>,
    prompt: &str,
) -> Result<Outcome, String> {
    let created = conversations
        .create_conversation(pb::CreateConversationRequest {
            tools: vec![pb::ToolDefinition {
                name: TOOL.into(),
                description: "Looks a customer up by id and returns their name.".into(),
                input_schema_json: SCHEMA.into(),
                timeout_ms: 30_000,
                ..Default::default()
            }],
            ..Default::default()
        })
        .await;
    let conversation = match created {
        Ok(answer) => answer
            .into_owned()
            .conversation
            .into_option()
            .ok_or("CreateConversation named no conversation")?,
        Err(error) if error.code == ErrorCode::FailedPrecondition => {
            return Ok(Outcome::NotTaken(error.message.unwrap_or_default()))
        }
        Err(error) => return Err(format!("CreateConversation with a tool: {error}")),
    };
    let id = conversation.id.clone();
    let mut stream = agent
        .prompt(pb::PromptRequest {
            text: prompt.to_owned(),
            conversation_id: id.clone(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("Prompt: {e}"))?;
    let mut answers = Vec::new();
    let mut expected = Vec::new();
    let mut terminal = None;
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), stream.message())
            .await
            .map_err(|_| "the run made no progress for 60 s".to_owned())?
            .map_err(|e| format!("the Prompt stream failed: {e}"))?;
        let Some(message) = message else { break };
        match message.to_owned_message().item {
            Some(Item::ToolCall(call)) => {
                let arguments: Value = serde_json::from_str(&call.arguments_json)
                    .map_err(|e| format!("the tool call's arguments: {e}"))?;
                let customer = arguments["customer_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let answer = answer_for(&customer);
                expected.push(answer.clone());
                let agent = clone(agent);
                let request = pb::AnswerToolCallRequest {
                    id: call.id.clone(),
                    answer: Some(
                        pb::__buffa::oneof::answer_tool_call_request::Answer::ResultJson(
                            Value::String(answer).to_string(),
                        ),
                    ),
                    ..Default::default()
                };
                answers.push(tokio::spawn(async move {
                    agent.answer_tool_call(request).await.map(|_| ())
                }));
            }
            Some(Item::Event(event)) => {
                let json: Value = serde_json::from_str(&event.json)
                    .map_err(|e| format!("event {}: {e}", event.seq))?;
                let record = &json["event"];
                if event.r#type == "run_event" && record["type"] == "tool_approval" {
                    let approval = &record["payload"]["event"]["record"];
                    if approval["status"] == "pending" {
                        let agent = clone(agent);
                        let request = pb::ApproveRequest {
                            id: event.approval_id.clone(),
                            allowed: true,
                            ..Default::default()
                        };
                        answers.push(tokio::spawn(async move {
                            agent.approve(request).await.map(|_| ())
                        }));
                    }
                }
                if matches!(
                    event.r#type.as_str(),
                    "run_complete" | "run_cancelled" | "error"
                ) {
                    terminal = Some(json);
                }
            }
            Some(Item::InvalidLine(invalid)) => {
                return Err(format!(
                    "the backend wrote an invalid line: {}",
                    invalid.message
                ))
            }
            _ => {}
        }
    }
    for answer in answers {
        answer
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("answering the run: {e}"))?;
    }
    let _ = clone_conversations(conversations)
        .close_conversation(pb::CloseConversationRequest {
            id,
            ..Default::default()
        })
        .await;
    let terminal = terminal.ok_or("the Prompt stream ended without a terminal event")?;
    if terminal["type"] != "run_complete" {
        return Err(format!("the run did not complete: {terminal}"));
    }
    if expected.is_empty() {
        return Err(format!(
            "the agent did not call the host's tool {TOOL:?}; step 3 needs an app whose agent calls it for --tool-prompt"
        ));
    }
    let final_output = terminal["final_output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if let Some(missing) = expected
        .iter()
        .find(|answer| !final_output.contains(answer.as_str()))
    {
        return Err(format!(
            "the final answer {final_output:?} does not carry the tool's result {missing:?}"
        ));
    }
    Ok(Outcome::Passed {
        calls: expected.len(),
        final_output,
    })
}

fn clone(agent: &pb::AgentServiceClient<HttpClient>) -> pb::AgentServiceClient<HttpClient> {
    pb::AgentServiceClient::new(HttpClient::plaintext(), agent.config().clone())
}

fn clone_conversations(
    client: &pb::ConversationServiceClient<HttpClient>,
) -> pb::ConversationServiceClient<HttpClient> {
    pb::ConversationServiceClient::new(HttpClient::plaintext(), client.config().clone())
}
