//! The host channel's host side (crates/bridge-host-channel): whatever the
//! backend writes, interleaved with the application's answers, the clock
//! and the channel's end, nothing panics, every line sent is one JSON
//! object on one line, and an answer is taken at most once per request.
#![no_main]

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use bridge_host_channel::{Answer, Channel, ChannelOptions, Output, StoreOptions, ToolSpec};
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;

#[derive(Arbitrary, Debug)]
enum Step {
    /// Bytes from the backend.
    Bytes(Vec<u8>),
    /// A message of the protocol (kind, id, a free string), as a line.
    Message(u8, u8, String),
    /// The application answers the n-th request it was given.
    Answer(u8, bool, String),
    /// Time passes (milliseconds).
    Wait(u16),
    Lost,
    Close,
}

fuzz_target!(|steps: Vec<Step>| {
    let lookup = ToolSpec {
        name: "lookup".into(),
        description: "d".into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"q": {"type": "string", "maxLength": 8}},
            "required": ["q"],
        }),
        timeout: Some(Duration::from_millis(50)),
    };
    let mut channel = Channel::new(ChannelOptions {
        tools: vec![lookup],
        call_timeout: None,
        store: Some(StoreOptions {
            timeout: Some(Duration::from_millis(80)),
        }),
        max_line_bytes: 4096,
    })
    .unwrap();
    let mut framer = channel.framer();
    let mut now = Instant::now();
    let mut requests = Vec::new();
    let mut answered = HashSet::new();
    let check = |outputs: Vec<Output>, requests: &mut Vec<_>| {
        for output in outputs {
            match output {
                Output::Send(line) => {
                    assert!(line.ends_with('\n'));
                    let body = &line[..line.len() - 1];
                    assert!(!body.contains(['\n', '\r']));
                    // Read as raw values: a lone surrogate escape is valid
                    // JSON text the channel carries (serde_json's `Value`
                    // refuses it), and the host bounds the nesting.
                    let message: HashMap<String, Box<RawValue>> =
                        serde_json::from_str(body).unwrap();
                    assert!(message["id"].get().starts_with('"'));
                }
                Output::Request { call, .. } => requests.push(call),
                Output::Abort { .. } | Output::Diagnostic(_) => {}
            }
        }
    };
    for step in steps {
        match step {
            Step::Bytes(bytes) => {
                let mut frames = Vec::new();
                framer.push(&bytes, |frame| frames.push(frame));
                for frame in frames {
                    let outputs = channel.on_frame(frame, now);
                    check(outputs, &mut requests);
                }
            }
            Step::Message(kind, id, text) => {
                let text = serde_json::Value::String(text);
                let line = match kind % 8 {
                    0 => r#"{"type":"hello","version":"1.0"}"#.to_owned(),
                    1 => format!(r#"{{"type":"list_tools","id":"{id}"}}"#),
                    2 => format!(
                        r#"{{"type":"call_tool","id":"{id}","name":"lookup","arguments":{{"q":{text}}}}}"#
                    ),
                    3 => format!(r#"{{"type":"cancel","id":"{id}"}}"#),
                    4 => format!(r#"{{"type":"store_load","id":"{id}"}}"#),
                    5 => format!(
                        r#"{{"type":"store_save","id":"{id}","snapshot":{{"revision":{}}},"expected_revision":{}}}"#,
                        id % 4,
                        id % 3
                    ),
                    6 => {
                        format!(r#"{{"type":"store_delete","id":"{id}","expected_revision":null}}"#)
                    }
                    _ => format!(
                        r#"{{"type":"call_tool","id":"{id}","name":{text},"arguments":{{}}}}"#
                    ),
                };
                let outputs = channel.on_line(&line, now);
                check(outputs, &mut requests);
            }
            Step::Answer(index, ok, text) => {
                let Some(&call) = requests.get(index as usize % requests.len().max(1)) else {
                    continue;
                };
                let answer = if ok {
                    Answer::Value(text)
                } else {
                    Answer::tool_error(text)
                };
                match channel.answer(call, answer) {
                    Ok(outputs) => {
                        assert!(answered.insert(call), "answered twice");
                        check(outputs, &mut requests);
                    }
                    Err(_) => {}
                }
            }
            Step::Wait(ms) => {
                now += Duration::from_millis(ms.into());
                let outputs = channel.expire(now);
                check(outputs, &mut requests);
                assert!(channel
                    .next_deadline()
                    .is_none_or(|deadline| deadline > now));
            }
            Step::Lost => {
                let outputs = channel.on_lost();
                check(outputs, &mut requests);
                assert!(channel.pending().is_empty());
            }
            Step::Close => {
                let outputs = channel.close();
                check(outputs, &mut requests);
                assert!(channel.pending().is_empty());
            }
        }
    }
});
