//! Stream items on the wire, encoded straight from the shared line.
//!
//! Every stream gets the same [`Shared`] item. Building the generated owned
//! message would copy the line (20 MB for a large tool result) once per
//! stream before encoding copied it again; here the proto form is written
//! from a borrowing view, and connectrpc's segmented encoding hands a large
//! line to the response body by reference count (no copy at all). The JSON
//! form is the proto3 JSON mapping of the same message, written by serde;
//! a test checks both against the generated messages. A run's terminal
//! item (small, once per run) carries the run's usage and is built as the
//! generated message.

use std::sync::Arc;

use buffa::bytes::Bytes;
use connectrpc::{CodecFormat, ConnectError, Encodable, EncodedBody};
use serde::Serialize;

use crate::conversation::{Item, Out, UsageTotals};
use crate::side_items::SideForm;
use crate::proto::agentlane::bridge::v1 as pb;
use pb::__buffa::view::{BridgeEventView, InvalidLineView};

/// A stream message on its way out (`PromptResponse` or
/// `SubscribeResponse`, which share their single-item cases; only
/// subscribers get batches).
pub struct Outgoing(pub Out);

/// Lets the line's bytes back a [`Bytes`] without a copy.
struct LineOwner(Arc<String>);

impl AsRef<[u8]> for LineOwner {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The proto3 JSON form of `BridgeEvent` (`seq` as a string; an empty
/// `approvalId` left out).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonEvent<'a> {
    seq: String,
    r#type: &'a str,
    json: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<&'a str>,
}

/// The proto3 JSON form of a stream message (camelCase names).
#[derive(Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
enum JsonItem<'a> {
    Event(JsonEvent<'a>),
    InvalidLine {
        seq: String,
        message: &'a str,
        fields: &'a [String],
        line_head: &'a str,
        code: &'a str,
    },
    Batch {
        first_seq: String,
        json: &'a str,
    },
}

fn json_event(item: &Item) -> Option<JsonEvent<'_>> {
    match item {
        Item::Event {
            seq,
            event_type,
            line,
            approval_id,
        } => Some(JsonEvent {
            seq: seq.to_string(),
            r#type: event_type.as_str(),
            json: line.as_str(),
            approval_id: approval_id.as_deref(),
        }),
        Item::Invalid { .. } => None,
    }
}

fn event_view(item: &Item) -> Option<BridgeEventView<'_>> {
    match item {
        Item::Event {
            seq,
            event_type,
            line,
            approval_id,
        } => Some(BridgeEventView {
            seq: *seq,
            r#type: event_type.as_str(),
            json: line.as_str(),
            approval_id: approval_id.as_deref().unwrap_or_default(),
            ..Default::default()
        }),
        Item::Invalid { .. } => None,
    }
}

fn invalid_view(item: &Item) -> Option<InvalidLineView<'_>> {
    let Item::Invalid {
        seq,
        code,
        message,
        fields,
        head,
    } = item
    else {
        return None;
    };
    Some(InvalidLineView {
        seq: *seq,
        message,
        fields: buffa::RepeatedView::new(fields.iter().map(String::as_str).collect()),
        line_head: head,
        code,
        ..Default::default()
    })
}

/// An item as owned generated messages: the run's terminal item (which
/// carries its usage, so it is not written from views), and the tests'
/// reference for the view path.
enum OwnedItem {
    Event(pb::BridgeEvent),
    Invalid(pb::InvalidLine),
}

fn owned_item(item: &Item) -> OwnedItem {
    match item {
        Item::Event {
            seq,
            event_type,
            line,
            approval_id,
        } => OwnedItem::Event(pb::BridgeEvent {
            seq: *seq,
            r#type: event_type.as_str().into(),
            json: line.to_string(),
            approval_id: approval_id.as_deref().unwrap_or_default().into(),
            ..Default::default()
        }),
        Item::Invalid {
            seq,
            code,
            message,
            fields,
            head,
        } => OwnedItem::Invalid(pb::InvalidLine {
            seq: *seq,
            message: message.clone(),
            fields: fields.clone(),
            line_head: head.clone(),
            code: (*code).into(),
            ..Default::default()
        }),
    }
}

/// The terminal item of a run as the generated message, with its usage.
fn final_prompt_response(item: &Item, usage: &UsageTotals) -> pb::PromptResponse {
    use pb::__buffa::oneof::prompt_response::Item as Case;
    let case = match owned_item(item) {
        OwnedItem::Event(event) => Case::from(event),
        OwnedItem::Invalid(invalid) => Case::from(invalid),
    };
    pb::PromptResponse {
        item: Some(case),
        usage: pb::Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            responses: usage.responses,
            ..Default::default()
        }
        .into(),
        ..Default::default()
    }
}

/// How each stream message encodes a terminal item: `PromptResponse` with
/// its usage; a subscriber never gets one (the item alone would do).
trait FinalForm {
    fn encode_final(item: &Item, usage: &UsageTotals, codec: CodecFormat) -> Option<Result<Bytes, ConnectError>>;
}

impl FinalForm for pb::PromptResponse {
    fn encode_final(item: &Item, usage: &UsageTotals, codec: CodecFormat) -> Option<Result<Bytes, ConnectError>> {
        let message = final_prompt_response(item, usage);
        Some(match codec {
            CodecFormat::Json => connectrpc::codec::encode_json(&message),
            _ => connectrpc::codec::encode_proto(&message),
        })
    }
}

impl FinalForm for pb::SubscribeResponse {
    fn encode_final(_: &Item, _: &UsageTotals, _: CodecFormat) -> Option<Result<Bytes, ConnectError>> {
        None
    }
}

impl Outgoing {
    fn json(&self) -> Result<Bytes, ConnectError> {
        let item = match &self.0 {
            Out::One(item) | Out::Final { item, .. } => match &**item {
                Item::Event { .. } => JsonItem::Event(json_event(item).expect("an event")),
                Item::Invalid {
                    seq,
                    code,
                    message,
                    fields,
                    head,
                } => JsonItem::InvalidLine {
                    seq: seq.to_string(),
                    message,
                    fields,
                    line_head: head,
                    code,
                },
            },
            Out::Batch { first_seq, json } => JsonItem::Batch {
                first_seq: first_seq.to_string(),
                json,
            },
            Out::Side(_) => unreachable!("side items are encoded as generated messages"),
        };
        serde_json::to_vec(&item)
            .map(Bytes::from)
            .map_err(|e| ConnectError::internal(format!("encoding a stream item: {e}")))
    }

    /// A single event's line, shared (not copied) as the body's backing.
    fn backing(&self) -> Option<Bytes> {
        match &self.0 {
            Out::One(item) | Out::Final { item, .. } => match &**item {
                Item::Event { line, .. } => Some(Bytes::from_owner(LineOwner(line.clone()))),
                Item::Invalid { .. } => None,
            },
            Out::Batch { json, .. } => Some(Bytes::from_owner(LineOwner(json.clone()))),
            Out::Side(_) => None,
        }
    }
}

/// The two stream response messages share their single-item cases; one
/// implementation serves both (`$batch` builds the batch case, if any).
macro_rules! outgoing_as {
    ($message:ty, $view:ident, $case:ident, $batch:expr) => {
        impl Outgoing {
            fn $case(&self) -> Result<pb::__buffa::view::$view<'_>, ConnectError> {
                use pb::__buffa::view::oneof::$case::Item as Case;
                let item = match &self.0 {
                    Out::One(item) | Out::Final { item, .. } => match (event_view(item), invalid_view(item)) {
                        (Some(event), _) => Case::Event(Box::new(event)),
                        (None, Some(invalid)) => Case::InvalidLine(Box::new(invalid)),
                        (None, None) => unreachable!("an item is an event or an invalid line"),
                    },
                    Out::Side(_) => unreachable!("side items are encoded as generated messages"),
                    Out::Batch { first_seq, json } => {
                        let batch: fn(u64, &str) -> Option<Case<'_>> = $batch;
                        batch(*first_seq, json).ok_or_else(|| {
                            ConnectError::internal("a batch on a stream that has no batches")
                        })?
                    }
                };
                Ok(pb::__buffa::view::$view {
                    item: Some(item),
                    ..Default::default()
                })
            }
        }

        impl Encodable<$message> for Outgoing {
            fn encode(&self, codec: CodecFormat) -> Result<Bytes, ConnectError> {
                if let Out::Final { item, usage } = &self.0 {
                    if let Some(encoded) = <$message as FinalForm>::encode_final(item, usage, codec) {
                        return encoded;
                    }
                }
                if let Out::Side(side) = &self.0 {
                    return <$message as SideForm>::encode_side(side, codec);
                }
                match codec {
                    CodecFormat::Json => self.json(),
                    // Proto, and any codec added later (which the view refuses).
                    _ => connectrpc::__codegen::encode_view_body(&self.$case()?, codec),
                }
            }

            fn encode_segments(&self, codec: CodecFormat) -> Result<EncodedBody, ConnectError> {
                if matches!(self.0, Out::Final { .. } | Out::Side(_)) {
                    return <Self as Encodable<$message>>::encode(self, codec).map(EncodedBody::from);
                }
                match (codec, self.backing()) {
                    (CodecFormat::Proto, Some(backing)) => {
                        connectrpc::__codegen::encode_view_body_segments(
                            &self.$case()?,
                            &backing,
                            codec,
                        )
                    }
                    _ => <Self as Encodable<$message>>::encode(self, codec).map(EncodedBody::from),
                }
            }
        }
    };
}

outgoing_as!(
    pb::PromptResponse,
    PromptResponseView,
    prompt_response,
    |_, _| None
);
outgoing_as!(
    pb::SubscribeResponse,
    SubscribeResponseView,
    subscribe_response,
    |first_seq, json| {
        Some(pb::__buffa::view::oneof::subscribe_response::Item::Batch(
            Box::new(pb::__buffa::view::EventBatchView {
                first_seq,
                json,
                ..Default::default()
            }),
        ))
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use bridge_core::EventType;

    fn expected(item: &Item) -> pb::SubscribeResponse {
        use pb::__buffa::oneof::subscribe_response::Item as Case;
        let item = match owned_item(item) {
            OwnedItem::Event(event) => Case::from(event),
            OwnedItem::Invalid(invalid) => Case::from(invalid),
        };
        pb::SubscribeResponse {
            item: Some(item),
            ..Default::default()
        }
    }

    fn concat(body: EncodedBody) -> Vec<u8> {
        match body {
            EncodedBody::Segmented(parts) => parts.concat(),
            EncodedBody::Contiguous(bytes) => bytes.to_vec(),
            other => panic!("an unknown body shape {}", other.len()),
        }
    }

    #[test]
    fn both_codecs_give_the_generated_messages_wire_forms() {
        use buffa::Message;
        let big = format!(
            r#"{{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"{}"}}"#,
            "é\"\\\n".repeat(300_000)
        );
        let items = [
            Item::Event {
                seq: 7,
                event_type: EventType::RunStart,
                line: Arc::new(r#"{"type":"run_start","prompt":"ü 😀 \" \\ \u2028"}"#.into()),
                approval_id: None,
            },
            Item::Event {
                seq: u64::MAX,
                event_type: EventType::RunStart,
                line: Arc::new(big),
                approval_id: None,
            },
            Item::Event {
                seq: 9,
                event_type: EventType::RunEvent,
                line: Arc::new(r#"{"type":"run_event"}"#.into()),
                approval_id: Some("c12/tool-approval-\"1\"".into()),
            },
            Item::Invalid {
                seq: 3,
                code: "invalid-payload",
                message: "Invalid bridge event payload: event.payload.kind.".into(),
                fields: vec!["event.payload.kind".into(), "x".into()],
                head: "{\"type\":".into(),
            },
        ];
        for item in items {
            let want = expected(&item);
            let outgoing = Outgoing(Out::One(Arc::new(item)));
            let proto = <Outgoing as Encodable<pb::SubscribeResponse>>::encode_segments(
                &outgoing,
                CodecFormat::Proto,
            )
            .unwrap();
            let decoded = pb::SubscribeResponse::decode_from_slice(&concat(proto)).unwrap();
            assert_eq!(decoded, want);
            let contiguous =
                <Outgoing as Encodable<pb::PromptResponse>>::encode(&outgoing, CodecFormat::Proto)
                    .unwrap();
            assert_eq!(
                pb::SubscribeResponse::decode_from_slice(&contiguous).unwrap(),
                want
            );
            let json = <Outgoing as Encodable<pb::SubscribeResponse>>::encode(
                &outgoing,
                CodecFormat::Json,
            )
            .unwrap();
            let decoded: pb::SubscribeResponse = serde_json::from_slice(&json).unwrap();
            assert_eq!(decoded, want);
            // And exactly the generated message's own JSON.
            assert_eq!(json, serde_json::to_vec(&want).unwrap());
        }
    }

    #[test]
    fn a_batch_is_one_subscribe_message_in_both_codecs_and_no_prompt_message() {
        use buffa::Message;
        let json = Arc::new(r#"[{"n":1,"s":"\u00e9 \"q\""},{"n":2}]"#.to_owned());
        let want = pb::SubscribeResponse {
            item: Some(pb::__buffa::oneof::subscribe_response::Item::Batch(
                Box::new(pb::EventBatch {
                    first_seq: 41,
                    json: json.to_string(),
                    ..Default::default()
                }),
            )),
            ..Default::default()
        };
        let outgoing = Outgoing(Out::Batch {
            first_seq: 41,
            json,
        });
        let proto = <Outgoing as Encodable<pb::SubscribeResponse>>::encode_segments(
            &outgoing,
            CodecFormat::Proto,
        )
        .unwrap();
        assert_eq!(
            pb::SubscribeResponse::decode_from_slice(&concat(proto)).unwrap(),
            want
        );
        let json =
            <Outgoing as Encodable<pb::SubscribeResponse>>::encode(&outgoing, CodecFormat::Json)
                .unwrap();
        assert_eq!(json, serde_json::to_vec(&want).unwrap());
        assert!(
            <Outgoing as Encodable<pb::PromptResponse>>::encode(&outgoing, CodecFormat::Proto)
                .is_err()
        );
    }

    #[test]
    fn a_large_line_is_handed_over_by_reference() {
        let line = Arc::new(format!("{{\"x\":\"{}\"}}", "a".repeat(1 << 20)));
        let outgoing = Outgoing(Out::One(Arc::new(Item::Event {
            seq: 1,
            event_type: EventType::RunStart,
            line: line.clone(),
            approval_id: None,
        })));
        let EncodedBody::Segmented(parts) =
            <Outgoing as Encodable<pb::PromptResponse>>::encode_segments(
                &outgoing,
                CodecFormat::Proto,
            )
            .unwrap()
        else {
            panic!("a 1 MiB line should get a segment of its own");
        };
        assert!(parts
            .iter()
            .any(|part| part.as_ptr() == line.as_ptr() && part.len() == line.len()));
    }
}
