//! The channel's state machine, fed lines as a backend writes them: what it
//! answers itself, what it asks of the application, how calls end.

use std::time::{Duration, Instant};

use bridge_core::framer::Frame;
use bridge_host_channel::{
    AbortReason, Answer, AnswerRefused, CallId, Channel, ChannelOptions, Output, Request,
    StoreOptions, ToolSpec,
};
use serde_json::{json, Value};

const HELLO: &str = r#"{"type":"hello","version":"1.0","package":"agentlane-host-channel","package_version":"0.1.0"}"#;

fn lookup() -> ToolSpec {
    ToolSpec {
        name: "lookup".into(),
        description: "Looks a customer up.".into(),
        input_schema: json!({
            "type": "object",
            "properties": { "customer_id": { "type": "string" } },
            "required": ["customer_id"],
        }),
        timeout: None,
    }
}

fn open(options: ChannelOptions) -> Channel {
    let mut channel = Channel::new(options).unwrap();
    assert!(channel.on_line(HELLO, Instant::now()).is_empty());
    channel
}

fn with_tools() -> Channel {
    open(ChannelOptions {
        tools: vec![lookup()],
        call_timeout: Some(Duration::from_secs(5)),
        store: Some(StoreOptions::default()),
        ..ChannelOptions::default()
    })
}

fn call_line(id: &str, arguments: Value) -> String {
    json!({"type": "call_tool", "id": id, "name": "lookup", "arguments": arguments,
           "tool_call_id": "call-1", "run_id": "run-1"})
    .to_string()
}

/// The lines sent, parsed.
fn sent(outputs: &[Output]) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::Send(line) => {
                assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
                Some(serde_json::from_str(line).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn requested(outputs: &[Output]) -> Vec<(CallId, Request)> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::Request { call, request } => Some((*call, request.clone())),
            _ => None,
        })
        .collect()
}

fn aborted(outputs: &[Output]) -> Vec<(CallId, AbortReason)> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::Abort { call, reason } => Some((*call, *reason)),
            _ => None,
        })
        .collect()
}

fn diagnostics(outputs: &[Output]) -> Vec<&'static str> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::Diagnostic(error) => Some(error.code()),
            _ => None,
        })
        .collect()
}

fn one_call(channel: &mut Channel, id: &str) -> CallId {
    let outputs = channel.on_line(
        &call_line(id, json!({"customer_id": "c-1"})),
        Instant::now(),
    );
    let calls = requested(&outputs);
    assert_eq!(calls.len(), 1, "{outputs:?}");
    calls[0].0
}

#[test]
fn lists_the_tools_itself_and_records_that_the_factory_took_them() {
    let mut channel = with_tools();
    assert!(!channel.listed_tools());
    let outputs = channel.on_line(r#"{"type":"list_tools","id":"1"}"#, Instant::now());
    assert_eq!(
        sent(&outputs),
        [json!({"type": "result", "id": "1", "value": {"tools": [{
            "name": "lookup",
            "description": "Looks a customer up.",
            "input_schema": lookup().input_schema,
        }]}})]
    );
    assert!(channel.listed_tools());
    assert_eq!(
        channel.hello().unwrap().package_version.as_deref(),
        Some("0.1.0")
    );
}

#[test]
fn a_valid_call_goes_to_the_application_and_its_answer_back() {
    let mut channel = with_tools();
    let outputs = channel.on_line(
        &call_line("7", json!({"customer_id": "c-1"})),
        Instant::now(),
    );
    let calls: [(CallId, Request); 1] = requested(&outputs).try_into().unwrap();
    let [(call, Request::CallTool(tool_call))] = calls else {
        panic!("{outputs:?}")
    };
    assert_eq!(tool_call.name, "lookup");
    assert_eq!(tool_call.arguments.get(), r#"{"customer_id":"c-1"}"#);
    assert_eq!(tool_call.tool_call_id.as_deref(), Some("call-1"));
    assert_eq!(tool_call.run_id.as_deref(), Some("run-1"));
    let answered = channel
        .answer(call, Answer::tool_result(&json!({"name": "Ada"})))
        .unwrap();
    assert_eq!(
        sent(&answered),
        [json!({"type": "result", "id": "7", "value": {"name": "Ada"}})]
    );
    // A second answer to the same call: refused, nothing sent.
    assert_eq!(
        channel
            .answer(call, Answer::tool_error("again"))
            .unwrap_err(),
        AnswerRefused::NotPending(call)
    );
    assert!(channel.pending().is_empty());
}

#[test]
fn parallel_calls_are_answered_in_any_order() {
    let mut channel = with_tools();
    let first = one_call(&mut channel, "1");
    let second = one_call(&mut channel, "2");
    let b = channel
        .answer(second, Answer::tool_error("no such customer"))
        .unwrap();
    let a = channel
        .answer(first, Answer::Value("\"Ada\"".into()))
        .unwrap();
    assert_eq!(
        sent(&b),
        [
            json!({"type": "error", "id": "2", "error": {"kind": "tool-error", "message": "no such customer"}})
        ]
    );
    assert_eq!(
        sent(&a),
        [json!({"type": "result", "id": "1", "value": "Ada"})]
    );
}

#[test]
fn unknown_tools_and_invalid_arguments_are_answered_without_the_application() {
    let mut channel = with_tools();
    let unknown = channel.on_line(
        r#"{"type":"call_tool","id":"3","name":"nope","arguments":{}}"#,
        Instant::now(),
    );
    assert!(requested(&unknown).is_empty());
    assert_eq!(sent(&unknown)[0]["error"]["kind"], "unknown-tool");
    assert_eq!(
        sent(&unknown)[0]["error"]["message"],
        "No tool named nope on this host (its tools: lookup)."
    );
    let invalid = channel.on_line(&call_line("4", json!({"customer_id": 42})), Instant::now());
    assert!(requested(&invalid).is_empty());
    let reply = &sent(&invalid)[0];
    assert_eq!(reply["error"]["kind"], "invalid-arguments");
    assert_eq!(reply["error"]["fields"], json!(["/customer_id"]));
    assert_eq!(
        reply["error"]["message"],
        "Invalid arguments for lookup: /customer_id: 42 is not of type \"string\"."
    );
}

#[test]
fn the_deadline_answers_timeout_and_aborts_the_application() {
    let mut channel = with_tools();
    let start = Instant::now();
    let call = one_call(&mut channel, "5");
    let deadline = channel.next_deadline().unwrap();
    assert!(deadline >= start + Duration::from_secs(5));
    assert!(channel
        .expire(deadline - Duration::from_millis(1))
        .is_empty());
    let outputs = channel.expire(deadline);
    assert_eq!(sent(&outputs)[0]["error"]["kind"], "timeout");
    assert_eq!(aborted(&outputs), [(call, AbortReason::Timeout)]);
    assert_eq!(channel.next_deadline(), None);
    // The late answer of the application: refused, nothing sent.
    assert!(channel.answer(call, Answer::Value("1".into())).is_err());
}

#[test]
fn a_tool_deadline_overrides_the_default_and_none_means_none() {
    let mut slow = lookup();
    slow.timeout = Some(Duration::from_millis(10));
    let mut channel = open(ChannelOptions {
        tools: vec![slow],
        call_timeout: None,
        ..ChannelOptions::default()
    });
    let before = Instant::now();
    one_call(&mut channel, "1");
    let after = Instant::now();
    let deadline = channel.next_deadline().unwrap();
    assert!(deadline >= before + Duration::from_millis(10));
    assert!(deadline <= after + Duration::from_millis(10));
    let now = Instant::now();
    let mut unbounded = Channel::new(ChannelOptions {
        tools: vec![lookup()],
        ..ChannelOptions::default()
    })
    .unwrap();
    unbounded.on_line(HELLO, now);
    one_call(&mut unbounded, "1");
    assert_eq!(unbounded.next_deadline(), None);
}

#[test]
fn the_backends_cancel_aborts_and_a_late_cancel_is_quiet() {
    let mut channel = with_tools();
    let call = one_call(&mut channel, "6");
    let outputs = channel.on_line(r#"{"type":"cancel","id":"6"}"#, Instant::now());
    assert_eq!(aborted(&outputs), [(call, AbortReason::Cancelled)]);
    assert!(sent(&outputs).is_empty());
    assert!(channel.answer(call, Answer::Value("1".into())).is_err());
    // The cancel crossing an answer already sent: nothing.
    let other = one_call(&mut channel, "7");
    channel.answer(other, Answer::Value("1".into())).unwrap();
    assert!(channel
        .on_line(r#"{"type":"cancel","id":"7"}"#, Instant::now())
        .is_empty());
    // A cancel for an id never seen: a diagnostic.
    let unknown = channel.on_line(r#"{"type":"cancel","id":"99"}"#, Instant::now());
    assert_eq!(diagnostics(&unknown), ["unknown-id"]);
}

#[test]
fn a_lost_channel_aborts_every_pending_call() {
    let mut channel = with_tools();
    let first = one_call(&mut channel, "1");
    let second = one_call(&mut channel, "2");
    let outputs = channel.on_lost();
    assert!(sent(&outputs).is_empty());
    assert_eq!(
        aborted(&outputs),
        [(first, AbortReason::Lost), (second, AbortReason::Lost)]
    );
    assert!(channel.pending().is_empty());
    assert!(channel
        .on_line(&call_line("3", json!({})), Instant::now())
        .is_empty());
}

#[test]
fn closing_answers_host_unavailable_now_and_later() {
    let mut channel = with_tools();
    let call = one_call(&mut channel, "1");
    let outputs = channel.close();
    assert_eq!(sent(&outputs)[0]["error"]["kind"], "host-unavailable");
    assert_eq!(aborted(&outputs), [(call, AbortReason::Closed)]);
    let later = channel.on_line(&call_line("2", json!({"customer_id": "c"})), Instant::now());
    assert!(requested(&later).is_empty());
    assert_eq!(sent(&later)[0]["error"]["kind"], "host-unavailable");
}

#[test]
fn store_requests_and_their_answers() {
    let mut channel = open(ChannelOptions {
        store: Some(StoreOptions {
            timeout: Some(Duration::from_secs(1)),
        }),
        ..ChannelOptions::default()
    });
    let now = Instant::now();
    let load = requested(&channel.on_line(r#"{"type":"store_load","id":"1"}"#, now));
    assert!(matches!(load[..], [(_, Request::StoreLoad)]));
    let loaded = channel
        .answer(load[0].0, Answer::loaded(Some(r#"{"revision":2}"#)))
        .unwrap();
    assert_eq!(
        sent(&loaded)[0]["value"],
        json!({"snapshot": {"revision": 2}})
    );
    let save = requested(&channel.on_line(
        r#"{"type":"store_save","id":"2","snapshot":{"schema_version":1,"revision":3},"expected_revision":2}"#,
        now,
    ));
    let save: [(CallId, Request); 1] = save.try_into().unwrap();
    let [(call, Request::StoreSave(save))] = save else {
        panic!()
    };
    assert_eq!((save.revision, save.expected_revision), (3, Some(2)));
    assert_eq!(save.snapshot.get(), r#"{"schema_version":1,"revision":3}"#);
    let conflict = channel
        .answer(call, Answer::conflict("stored revision is 4"))
        .unwrap();
    assert_eq!(
        sent(&conflict)[0]["error"],
        json!({"kind": "revision-conflict", "message": "stored revision is 4"})
    );
    let delete = requested(&channel.on_line(
        r#"{"type":"store_delete","id":"3","expected_revision":null}"#,
        now,
    ));
    assert!(matches!(
        delete[..],
        [(
            _,
            Request::StoreDelete {
                expected_revision: None
            }
        )]
    ));
    assert_eq!(
        sent(&channel.answer(delete[0].0, Answer::stored()).unwrap())[0]["value"],
        json!({})
    );
    // A host without a store answers for the application.
    let mut storeless = open(ChannelOptions::default());
    let refused = storeless.on_line(r#"{"type":"store_load","id":"1"}"#, now);
    assert_eq!(sent(&refused)[0]["error"]["kind"], "no-store");
}

#[test]
fn hostile_lines_get_a_diagnostic_and_an_answer_when_their_id_is_readable() {
    let mut channel = with_tools();
    let pending = one_call(&mut channel, "1");
    let now = Instant::now();
    let cases: [(&str, &str, Option<&str>); 7] = [
        ("not json at all", "invalid-json", None),
        (
            r#"{"type":"call_tool","id":"20","arguments":{"x":"#,
            "invalid-json",
            Some("20"),
        ),
        ("[1,2]", "not-an-object", None),
        (r#"{"id":"21"}"#, "type-not-a-string", Some("21")),
        (
            r#"{"type":"result","id":"22","value":1}"#,
            "unknown-type",
            Some("22"),
        ),
        (
            r#"{"type":"call_tool","id":"23","name":"lookup"}"#,
            "invalid-message",
            Some("23"),
        ),
        (
            r#"{"type":"hello","version":"1.0"}"#,
            "hello-repeated",
            None,
        ),
    ];
    for (line, code, id) in cases {
        let outputs = channel.on_line(line, now);
        assert_eq!(diagnostics(&outputs), [code], "{line}");
        let replies = sent(&outputs);
        match id {
            Some(id) => {
                assert_eq!(replies.len(), 1, "{line}");
                assert_eq!(replies[0]["id"], id);
                assert_eq!(replies[0]["error"]["kind"], "invalid-request");
            }
            None => assert!(replies.is_empty(), "{line}"),
        }
    }
    // A request reusing a pending id: ignored, the pending call intact.
    let duplicate = channel.on_line(&call_line("1", json!({"customer_id": "x"})), now);
    assert_eq!(diagnostics(&duplicate), ["duplicate-id"]);
    assert!(sent(&duplicate).is_empty());
    // A line past the limit, answered by the id of its first bytes.
    let too_long = channel.on_frame(
        Frame::TooLong {
            prefix:
                r#"{"type":"call_tool","id":"24","name":"lookup","arguments":{"customer_id":"xxxx"#
                    .into(),
        },
        now,
    );
    assert_eq!(diagnostics(&too_long), ["line-too-long"]);
    assert_eq!(sent(&too_long)[0]["id"], "24");
    // Nothing of that lost the valid call.
    assert_eq!(channel.pending(), [pending]);
    let answered = channel
        .answer(pending, Answer::Value("\"ok\"".into()))
        .unwrap();
    assert_eq!(sent(&answered)[0]["value"], "ok");
}

#[test]
fn the_version_comes_first_and_must_be_spoken() {
    let mut early = Channel::new(ChannelOptions::default()).unwrap();
    let outputs = early.on_line(r#"{"type":"list_tools","id":"1"}"#, Instant::now());
    assert_eq!(diagnostics(&outputs), ["hello-missing"]);
    assert_eq!(sent(&outputs)[0]["error"]["kind"], "invalid-request");
    let mut newer = Channel::new(ChannelOptions::default()).unwrap();
    let outputs = newer.on_line(r#"{"type":"hello","version":"2.0"}"#, Instant::now());
    assert_eq!(diagnostics(&outputs), ["unsupported-version"]);
    let refused = newer.on_line(r#"{"type":"list_tools","id":"1"}"#, Instant::now());
    assert_eq!(sent(&refused)[0]["error"]["kind"], "unsupported-version");
    assert!(!newer.listed_tools());
}

#[test]
fn results_that_cannot_be_sent_end_the_call_as_invalid_result() {
    let mut channel = with_tools();
    let call = one_call(&mut channel, "1");
    let outputs = channel
        .answer(call, Answer::Value("{not json".into()))
        .unwrap();
    assert_eq!(sent(&outputs)[0]["error"]["kind"], "invalid-result");
    assert!(channel.pending().is_empty());
}

#[test]
fn tools_are_checked_when_the_channel_is_made() {
    let twice = Channel::new(ChannelOptions {
        tools: vec![lookup(), lookup()],
        ..ChannelOptions::default()
    })
    .unwrap_err();
    assert_eq!(twice.tool, "lookup");
    assert!(twice.message.contains("twice"));
    let mut bad = lookup();
    bad.input_schema = json!({"type": "no-such-type"});
    assert!(Channel::new(ChannelOptions {
        tools: vec![bad],
        ..ChannelOptions::default()
    })
    .is_err());
}
