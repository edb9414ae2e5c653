//! Stream items on the wire, encoded straight from the shared line.
//!
//! Every stream gets the same [`Shared`] item. Building the generated owned
//! message would copy the line (20 MB for a large tool result) once per
//! stream before encoding copied it again; here the proto form is written
//! from a borrowing view, and connectrpc's segmented encoding hands a large
//! line to the response body by reference count (no copy at all). The JSON
//! form is the proto3 JSON mapping of the same message, written by serde;
//! a test checks both against the generated messages.

use std::sync::Arc;

use buffa::bytes::Bytes;
use connectrpc::{CodecFormat, ConnectError, Encodable, EncodedBody};
use serde::Serialize;

use crate::conversation::{Item, Shared};
use crate::proto::agentlane::bridge::v1 as pb;
use pb::__buffa::view::{BridgeEventView, InvalidLineView};

/// A stream item on its way out (`PromptResponse` or `SubscribeResponse`,
/// which have the same cases).
pub struct Outgoing(pub Shared);

/// Lets the line's bytes back a [`Bytes`] without a copy.
struct LineOwner(Arc<String>);

impl AsRef<[u8]> for LineOwner {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The proto3 JSON form of the item (`seq` as a string, camelCase names).
#[derive(Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
enum JsonItem<'a> {
    Event {
        seq: String,
        r#type: &'a str,
        json: &'a str,
    },
    InvalidLine {
        seq: String,
        message: &'a str,
        fields: &'a [String],
        line_head: &'a str,
        code: &'a str,
    },
}

impl Outgoing {
    fn json(&self) -> Result<Bytes, ConnectError> {
        let item = match &*self.0 {
            Item::Event {
                seq,
                event_type,
                line,
            } => JsonItem::Event {
                seq: seq.to_string(),
                r#type: event_type.as_str(),
                json: line.as_str(),
            },
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
        };
        serde_json::to_vec(&item)
            .map(Bytes::from)
            .map_err(|e| ConnectError::internal(format!("encoding a stream item: {e}")))
    }

    /// The line's bytes (shared, not copied) and the event's view.
    fn event_view(&self) -> Option<(Bytes, BridgeEventView<'_>)> {
        let Item::Event {
            seq,
            event_type,
            line,
        } = &*self.0
        else {
            return None;
        };
        let backing = Bytes::from_owner(LineOwner(line.clone()));
        let view = BridgeEventView {
            seq: *seq,
            r#type: event_type.as_str(),
            json: line.as_str(),
            ..Default::default()
        };
        Some((backing, view))
    }

    fn invalid_view(&self) -> Option<InvalidLineView<'_>> {
        let Item::Invalid {
            seq,
            code,
            message,
            fields,
            head,
        } = &*self.0
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
}

/// The two stream response messages share their cases; one implementation
/// serves both.
macro_rules! outgoing_as {
    ($message:ty, $view:ident, $case:ident) => {
        impl Outgoing {
            fn $case(&self) -> pb::__buffa::view::$view<'_> {
                use pb::__buffa::view::oneof::$case::Item as Case;
                let item = match (self.event_view(), self.invalid_view()) {
                    (Some((_, event)), _) => Case::Event(Box::new(event)),
                    (None, Some(invalid)) => Case::InvalidLine(Box::new(invalid)),
                    (None, None) => unreachable!("an item is an event or an invalid line"),
                };
                pb::__buffa::view::$view {
                    item: Some(item),
                    ..Default::default()
                }
            }
        }

        impl Encodable<$message> for Outgoing {
            fn encode(&self, codec: CodecFormat) -> Result<Bytes, ConnectError> {
                match codec {
                    CodecFormat::Json => self.json(),
                    // Proto, and any codec added later (which the view refuses).
                    _ => connectrpc::__codegen::encode_view_body(&self.$case(), codec),
                }
            }

            fn encode_segments(&self, codec: CodecFormat) -> Result<EncodedBody, ConnectError> {
                match (codec, self.event_view()) {
                    (CodecFormat::Proto, Some((backing, _))) => {
                        connectrpc::__codegen::encode_view_body_segments(
                            &self.$case(),
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

outgoing_as!(pb::PromptResponse, PromptResponseView, prompt_response);
outgoing_as!(
    pb::SubscribeResponse,
    SubscribeResponseView,
    subscribe_response
);

#[cfg(test)]
mod tests {
    use super::*;
    use bridge_core::EventType;

    fn expected(item: &Item) -> pb::SubscribeResponse {
        use pb::__buffa::oneof::subscribe_response::Item as Case;
        let item = match item {
            Item::Event {
                seq,
                event_type,
                line,
            } => Case::from(pb::BridgeEvent {
                seq: *seq,
                r#type: event_type.as_str().into(),
                json: line.to_string(),
                ..Default::default()
            }),
            Item::Invalid {
                seq,
                code,
                message,
                fields,
                head,
            } => Case::from(pb::InvalidLine {
                seq: *seq,
                message: message.clone(),
                fields: fields.clone(),
                line_head: head.clone(),
                code: (*code).into(),
                ..Default::default()
            }),
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
            },
            Item::Event {
                seq: u64::MAX,
                event_type: EventType::RunStart,
                line: Arc::new(big),
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
            let outgoing = Outgoing(Arc::new(item));
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
    fn a_large_line_is_handed_over_by_reference() {
        let line = Arc::new(format!("{{\"x\":\"{}\"}}", "a".repeat(1 << 20)));
        let outgoing = Outgoing(Arc::new(Item::Event {
            seq: 1,
            event_type: EventType::RunStart,
            line: line.clone(),
        }));
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
