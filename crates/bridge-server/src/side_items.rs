//! The host channel's stream items (tool calls, their ends, snapshots) on
//! the wire: small and rare, so built as the generated messages (a
//! snapshot is copied once per stream), unlike the stdout lines that
//! `outgoing.rs` writes from views.

use buffa::bytes::Bytes;
use connectrpc::{CodecFormat, ConnectError};
use serde::Serialize;

use crate::conversation::Side;
use crate::proto::agentlane::bridge::v1 as pb;

/// How each stream message carries a host channel item (small, rare:
/// built as the generated message; a snapshot is copied once per stream).
pub trait SideForm: buffa::Message + Serialize + Sized {
    fn side(side: &Side) -> Self;
    fn encode_side(side: &Side, codec: CodecFormat) -> Result<Bytes, ConnectError> {
        let message = Self::side(side);
        match codec {
            CodecFormat::Json => connectrpc::codec::encode_json(&message),
            _ => connectrpc::codec::encode_proto(&message),
        }
    }
}

fn tool_call(side: &Side) -> Option<pb::ToolCall> {
    let Side::ToolCall {
        id,
        conversation_id,
        name,
        arguments,
        tool_call_id,
        run_id,
        timeout_ms,
    } = side
    else {
        return None;
    };
    Some(pb::ToolCall {
        id: id.clone(),
        conversation_id: conversation_id.clone(),
        name: name.clone(),
        arguments_json: arguments.clone(),
        tool_call_id: tool_call_id.clone(),
        run_id: run_id.clone(),
        timeout_ms: *timeout_ms,
        ..Default::default()
    })
}

fn tool_call_ended(side: &Side) -> Option<pb::ToolCallEnded> {
    let Side::ToolCallEnded {
        id,
        conversation_id,
        reason,
    } = side
    else {
        return None;
    };
    Some(pb::ToolCallEnded {
        id: id.clone(),
        conversation_id: conversation_id.clone(),
        reason: (*reason).into(),
        ..Default::default()
    })
}

/// A snapshot as the generated message (also `GetSnapshot`'s answer).
pub fn snapshot_message(
    conversation_id: &str,
    json: &str,
    revision: u64,
) -> pb::ConversationSnapshot {
    pb::ConversationSnapshot {
        conversation_id: conversation_id.into(),
        json: json.into(),
        revision,
        ..Default::default()
    }
}

macro_rules! side_form {
    ($message:ty, $case:ident) => {
        impl SideForm for $message {
            fn side(side: &Side) -> Self {
                use pb::__buffa::oneof::$case::Item as Case;
                let case = match side {
                    Side::ToolCall { .. } => Case::from(tool_call(side).expect("a tool call")),
                    Side::ToolCallEnded { .. } => {
                        Case::from(tool_call_ended(side).expect("an end"))
                    }
                    Side::Snapshot {
                        conversation_id,
                        json,
                        revision,
                    } => Case::from(snapshot_message(conversation_id, json, *revision)),
                };
                Self {
                    item: Some(case),
                    ..Default::default()
                }
            }
        }
    };
}

side_form!(pb::PromptResponse, prompt_response);
side_form!(pb::SubscribeResponse, subscribe_response);

#[cfg(test)]
mod tests {
    use super::*;
    use buffa::Message;
    use std::sync::Arc;

    #[test]
    fn side_items_are_the_generated_messages_in_both_codecs() {
        let items = [
            Side::ToolCall {
                id: "c2/tool-call-1".into(),
                conversation_id: "c2".into(),
                name: "lookup".into(),
                arguments: r#"{"customer_id":"c-42","n":12345678901234567890}"#.into(),
                tool_call_id: "call_1".into(),
                run_id: "run-1".into(),
                timeout_ms: 500,
            },
            Side::ToolCallEnded {
                id: "c2/tool-call-1".into(),
                conversation_id: "c2".into(),
                reason: "timeout",
            },
            Side::Snapshot {
                conversation_id: "default".into(),
                json: Arc::new(r#"{"schema_version":1,"revision":3}"#.into()),
                revision: 3,
            },
        ];
        for side in &items {
            let want = pb::SubscribeResponse::side(side);
            let proto = pb::SubscribeResponse::encode_side(side, CodecFormat::Proto).unwrap();
            assert_eq!(
                pb::SubscribeResponse::decode_from_slice(&proto).unwrap(),
                want
            );
            let json = pb::PromptResponse::encode_side(side, CodecFormat::Json).unwrap();
            let decoded: pb::PromptResponse = serde_json::from_slice(&json).unwrap();
            assert_eq!(decoded, pb::PromptResponse::side(side));
        }
        let json = pb::PromptResponse::encode_side(&items[0], CodecFormat::Json).unwrap();
        let text = std::str::from_utf8(&json).unwrap();
        assert!(
            text.contains(r#""toolCall":{"#) && text.contains(r#""argumentsJson":"#),
            "{text}"
        );
    }
}
