//! The host channel end to end: the real backend (`agentlane` 0.22.0 in the
//! repository's `.venv`, `scripts/setup-python.sh`), the Python module from
//! `python/src`, the test backend `tests/e2e/backends/host_tools_app.py`
//! (a scripted model), and this crate's core answering as the host
//! (`tests/support`).
#![cfg(unix)]

mod support;

use std::time::Duration;

use bridge_core::command::Command as BridgeCommand;
use bridge_host_channel::{
    AbortReason, Answer, CallId, ChannelOptions, Request, StoreOptions, ToolCall, ToolSpec,
};
use serde_json::{json, Value};
use support::{Backend, Launch, Seen};

fn lookup() -> ToolSpec {
    ToolSpec {
        name: "lookup".into(),
        description: "Looks a customer up by id.".into(),
        input_schema: json!({
            "type": "object",
            "properties": { "customer_id": { "type": "string", "minLength": 2 } },
            "required": ["customer_id"],
            "additionalProperties": false,
        }),
        timeout: None,
    }
}

fn blob() -> ToolSpec {
    ToolSpec {
        name: "blob".into(),
        description: "Returns a large text.".into(),
        input_schema: json!({"type": "object", "properties": {"size": {"type": "integer"}}}),
        timeout: None,
    }
}

fn options() -> ChannelOptions {
    ChannelOptions {
        tools: vec![lookup(), blob()],
        ..ChannelOptions::default()
    }
}

fn start() -> Backend {
    Backend::start(Launch::host_tools_app(), options())
}

fn calls_prompt(calls: Value) -> String {
    format!("calls {calls}")
}

fn tool_call(request: Request) -> ToolCall {
    match request {
        Request::CallTool(call) => call,
        other => panic!("expected a tool call, got {other:?}"),
    }
}

fn arguments(call: &ToolCall) -> Value {
    serde_json::from_str(call.arguments.get()).unwrap()
}

/// Prompts one `lookup` call of `customer`; the request the host gets.
fn ask_lookup(backend: &mut Backend, customer: &str) -> CallId {
    backend.prompt(&calls_prompt(
        json!([{"name": "lookup", "arguments": {"customer_id": customer}}]),
    ));
    backend.next_request().0
}

/// The next thing from the channel is the abort of `call` for `reason`.
fn expect_abort(backend: &Backend, call: CallId, reason: AbortReason) {
    match backend.next_seen() {
        Seen::Abort(aborted, why) if aborted == call && why == reason => {}
        other => panic!("expected the abort of {call:?} ({reason:?}), got {other:?}"),
    }
}

/// The run's `tool_end` payloads, in order.
fn tool_ends(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "run_event" && e["event"]["type"] == "tool_end")
        .map(|e| &e["event"]["payload"])
        .collect()
}

fn final_output(events: &[Value]) -> &str {
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run_complete", "{last}");
    last["final_output"].as_str().unwrap()
}

#[test]
fn one_tool_its_arguments_context_and_result_reach_the_model() {
    let mut backend = start();
    // The factory asked for the tools before the backend was ready.
    let hello = backend.with_channel(|c| (c.listed_tools(), c.hello().cloned()));
    assert!(hello.0, "the tools were not listed by ready");
    let hello = hello.1.unwrap();
    assert_eq!(hello.version, "1.0");
    assert_eq!(hello.package.as_deref(), Some("agentlane-host-channel"));
    assert_eq!(backend.ready["metadata"], json!({"app": "host-tools"}));

    backend.prompt(&calls_prompt(
        json!([{"name": "lookup", "arguments": {"customer_id": "c-42"}}]),
    ));
    let (call, request) = backend.next_request();
    let request = tool_call(request);
    assert_eq!(request.name, "lookup");
    assert_eq!(arguments(&request), json!({"customer_id": "c-42"}));
    assert_eq!(request.tool_call_id.as_deref(), Some("call-1"));
    assert!(request.run_id.as_deref().unwrap().starts_with("HostTools:"));
    backend
        .answer(
            call,
            Answer::tool_result(&json!({"name": "Ada", "plan": "gold"})),
        )
        .unwrap();
    let events = backend.until_terminal();
    assert_eq!(
        final_output(&events),
        r#"Results: {"name": "Ada", "plan": "gold"}"#
    );
    let ends = tool_ends(&events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["ok"], true);
    assert_eq!(ends[0]["result"], json!({"name": "Ada", "plan": "gold"}));
    assert!(backend.shutdown().success());
}

#[test]
fn two_calls_in_one_turn_run_at_once_and_are_answered_out_of_order() {
    let mut backend = start();
    backend.prompt(&calls_prompt(json!([
        {"name": "lookup", "arguments": {"customer_id": "c-1"}},
        {"name": "lookup", "arguments": {"customer_id": "c-2"}},
    ])));
    // Both are pending at once before either is answered: in parallel.
    let (first, first_request) = backend.next_request();
    let (second, second_request) = backend.next_request();
    let mut requests = [
        (first, arguments(&tool_call(first_request))),
        (second, arguments(&tool_call(second_request))),
    ];
    requests.sort_by_key(|(_, args)| args["customer_id"].as_str().unwrap().to_owned());
    let [(c1, _), (c2, _)] = requests;
    backend.answer(c2, Answer::Value("\"Bea\"".into())).unwrap();
    // The second call finishes while the first is still pending: its
    // `tool_end` comes before the first is answered.
    let mut events = Vec::new();
    loop {
        let event = backend.next_event();
        let done = event["type"] == "run_event" && event["event"]["type"] == "tool_end";
        events.push(event);
        if done {
            break;
        }
    }
    backend.answer(c1, Answer::Value("\"Ada\"".into())).unwrap();
    events.extend(backend.until_terminal());
    // The model sees them in call order, whatever the order of the answers.
    assert_eq!(final_output(&events), "Results: Ada | Bea");
    let results: Vec<&Value> = tool_ends(&events).iter().map(|e| &e["result"]).collect();
    assert_eq!(results, [&json!("Bea"), &json!("Ada")]);
}

#[test]
fn a_host_error_is_a_failed_call_the_model_reads_and_the_run_goes_on() {
    let mut backend = start();
    let call = ask_lookup(&mut backend, "c-9");
    backend
        .answer(call, Answer::tool_error("No customer c-9."))
        .unwrap();
    let events = backend.until_terminal();
    assert_eq!(final_output(&events), "Results: No customer c-9.");
    let end = tool_ends(&events)[0];
    assert_eq!(end["ok"], false);
    assert_eq!(
        end["error"],
        json!({"message": "No customer c-9.", "kind": "tool-error"})
    );
}

#[test]
fn a_host_that_never_answers_meets_the_deadline_and_the_run_goes_on() {
    let mut slow = lookup();
    slow.timeout = Some(Duration::from_millis(300));
    let mut backend = Backend::start(
        Launch::host_tools_app(),
        ChannelOptions {
            tools: vec![slow],
            ..ChannelOptions::default()
        },
    );
    let call = ask_lookup(&mut backend, "c-1");
    // Never answered: the core's deadline ends it.
    expect_abort(&backend, call, AbortReason::Timeout);
    let events = backend.until_terminal();
    assert_eq!(
        final_output(&events),
        "Results: The host did not answer in time."
    );
    assert_eq!(tool_ends(&events)[0]["error"]["kind"], "timeout");
    assert!(backend.answer(call, Answer::Value("1".into())).is_err());
}

#[test]
fn the_modules_own_deadline_cancels_the_call_at_the_host() {
    let launch = Launch::host_tools_app().env("HOST_TOOLS_APP_CALL_TIMEOUT", "0.3");
    let mut backend = Backend::start(launch, options());
    let call = ask_lookup(&mut backend, "c-1");
    expect_abort(&backend, call, AbortReason::Cancelled);
    let events = backend.until_terminal();
    assert_eq!(
        final_output(&events),
        "Results: The host did not answer lookup within 0.3 s."
    );
    assert_eq!(tool_ends(&events)[0]["error"]["kind"], "timeout");
}

#[test]
fn a_cancel_while_a_call_is_pending_reaches_the_host_and_ends_the_run() {
    let mut backend = start();
    let call = ask_lookup(&mut backend, "c-1");
    backend.send(BridgeCommand::Cancel);
    expect_abort(&backend, call, AbortReason::Cancelled);
    let events = backend.until_terminal();
    assert_eq!(events.last().unwrap()["type"], "run_cancelled");
    // Nothing is left waiting, on either side.
    assert!(backend.with_channel(|c| c.pending().is_empty()));
    assert!(backend
        .answer(call, Answer::Value("\"late\"".into()))
        .is_err());
    // The conversation goes on.
    backend.prompt("chat still here");
    assert_eq!(
        final_output(&backend.until_terminal()),
        "You said: chat still here"
    );
}

#[test]
fn a_lost_channel_fails_the_pending_call_and_every_later_one() {
    let mut backend = start();
    let call = ask_lookup(&mut backend, "c-1");
    backend.drop_channel();
    let events = backend.until_terminal();
    let expected = "Results: The host channel was lost: the host will not answer.";
    assert_eq!(final_output(&events), expected);
    assert_eq!(tool_ends(&events)[0]["error"]["kind"], "channel-lost");
    expect_abort(&backend, call, AbortReason::Lost);
    backend.prompt(&calls_prompt(
        json!([{"name": "lookup", "arguments": {"customer_id": "c-2"}}]),
    ));
    assert_eq!(final_output(&backend.until_terminal()), expected);
    assert!(backend.shutdown().success());
}

#[test]
fn a_20_mb_result_arrives_whole() {
    let mut backend = start();
    backend.prompt(&calls_prompt(
        json!([{"name": "blob", "arguments": {"size": 20_000_000}}]),
    ));
    let (call, request) = backend.next_request();
    let size = arguments(&tool_call(request))["size"].as_u64().unwrap() as usize;
    let text: String = "0123456789abcdef".chars().cycle().take(size).collect();
    backend
        .answer(call, Answer::tool_result(&json!(text)))
        .unwrap();
    let events = backend.until_terminal();
    assert!(
        final_output(&events).starts_with("Results: 20000000 chars sha256:"),
        "{}",
        final_output(&events)
    );
    assert_eq!(
        tool_ends(&events)[0]["result"].as_str(),
        Some(text.as_str())
    );
}

#[test]
fn invalid_arguments_come_back_to_the_model_with_their_paths() {
    let mut backend = start();
    backend.prompt(&calls_prompt(json!([
        {"name": "lookup", "arguments": {"customer_id": 42, "extra": true}},
    ])));
    let events = backend.until_terminal();
    assert_eq!(
        final_output(&events),
        "Results: Invalid arguments for lookup: /customer_id: 42 is not of type \"string\"; \
         the arguments: Additional properties are not allowed ('extra' was unexpected)."
    );
    let end = tool_ends(&events)[0];
    assert_eq!(end["error"]["kind"], "invalid-arguments");
    assert_eq!(end["ok"], false);
    // The application was never asked.
    assert!(backend.seen_within(Duration::from_millis(200)).is_none());
}

#[test]
fn hostile_lines_from_the_backend_get_diagnostics_and_lose_no_valid_call() {
    let mut options = options();
    options.max_line_bytes = 1024 * 1024;
    let mut backend = Backend::start(Launch::host_tools_app(), options);
    backend.prompt(&format!(
        "hostile {}",
        json!([{"name": "lookup", "arguments": {"customer_id": "c-1"}}])
    ));
    let mut diagnostics = Vec::new();
    let call = loop {
        match backend.next_seen() {
            Seen::Diagnostic(error) => diagnostics.push(error.code()),
            Seen::Request(call, request) => {
                assert_eq!(
                    arguments(&tool_call(request)),
                    json!({"customer_id": "c-1"})
                );
                break call;
            }
            other => panic!("{other:?}"),
        }
    };
    backend
        .answer(call, Answer::Value("\"Ada\"".into()))
        .unwrap();
    assert_eq!(final_output(&backend.until_terminal()), "Results: Ada");
    assert_eq!(
        diagnostics,
        [
            "invalid-json",
            "unknown-type",
            "unknown-id",
            "line-too-long",
            "invalid-message"
        ]
    );
    // The host answered the two requests whose ids it could read; the
    // module, which never sent them, says so.
    let stderr = backend.stderr();
    assert!(
        stderr.contains("a reply for unknown request id 'hostile-1'"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a reply for unknown request id 'hostile-2'"),
        "{stderr}"
    );
    assert!(backend.shutdown().success());
}

#[test]
fn hostile_lines_from_the_host_are_dropped_and_lose_no_valid_call() {
    let mut backend = start();
    let call = ask_lookup(&mut backend, "c-1");
    backend.write_raw(b"not json\n[1]\n{\"type\":\"result\",\"id\":\"999\",\"value\":1}\n");
    // A reply to a call already finished: the tool list (request 1).
    backend.write_raw(b"{\"type\":\"result\",\"id\":\"1\",\"value\":\"late\"}\n");
    // A line past the module's limit (256 MiB), skipped in bounded memory.
    let mut long = vec![b'x'; 256 * 1024 * 1024 + 10];
    long.push(b'\n');
    backend.write_raw(&long);
    drop(long);
    backend
        .answer(call, Answer::Value("\"Ada\"".into()))
        .unwrap();
    assert_eq!(final_output(&backend.until_terminal()), "Results: Ada");
    let stderr = backend.stderr();
    for expected in [
        "a line from the host is not JSON",
        "a line from the host is not an object",
        "a reply for unknown request id '999'",
        "a line from the host exceeds 268435456 bytes",
    ] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
    // The late reply to request 1 is expected traffic: no warning.
    assert!(!stderr.contains("unknown request id '1'"), "{stderr}");
    assert!(backend.shutdown().success());
}

#[test]
fn a_factory_without_the_module_is_seen_at_ready() {
    let launch = Launch::host_tools_app().env("HOST_TOOLS_APP_WITHOUT_MODULE", "1");
    let backend = Backend::start(launch, options());
    assert!(backend.with_channel(|c| c.hello().is_none() && !c.listed_tools()));
    assert!(backend.shutdown().success());
}

#[test]
fn without_a_channel_the_agent_has_no_host_tools_and_says_so() {
    let mut launch = Launch::host_tools_app();
    launch.with_channel = false;
    let mut backend = Backend::start(launch, options());
    assert!(
        backend
            .stderr()
            .contains("AGENTLANE_HOST_CHANNEL_FD is not set"),
        "{}",
        backend.stderr()
    );
    backend.prompt("chat hello");
    assert_eq!(
        final_output(&backend.until_terminal()),
        "You said: chat hello"
    );
}

#[test]
fn a_store_without_a_channel_fails_the_factory_clearly() {
    let mut launch = Launch::host_tools_app().env("HOST_TOOLS_APP_STORE", "1");
    launch.with_channel = false;
    let mut backend = Backend::spawn(launch, options());
    let status = backend.child_status();
    assert_eq!(status.code(), Some(1));
    let stderr = backend.stderr();
    assert!(
        stderr.contains("AGENTLANE_HOST_CHANNEL_FD is not set: this backend's host gives no host channel, so it cannot keep the agent's state."),
        "{stderr}"
    );
    assert!(backend.events_ended());
}

/// The host's store in memory, as the application would keep it.
#[derive(Default)]
struct MemoryStore {
    snapshot: Option<String>,
    revision: Option<u64>,
}

impl MemoryStore {
    /// Answers one store request; `conflict` refuses a save as stale.
    fn serve(&mut self, backend: &Backend, conflict: bool) -> &'static str {
        let (call, request) = backend.next_request();
        let (answer, what) = match request {
            Request::StoreLoad => (Answer::loaded(self.snapshot.as_deref()), "load"),
            Request::StoreSave(save) => {
                if conflict || save.expected_revision != self.revision {
                    (
                        Answer::conflict("the stored revision moved on"),
                        "save refused",
                    )
                } else {
                    self.snapshot = Some(save.snapshot.get().to_owned());
                    self.revision = Some(save.revision);
                    (Answer::stored(), "save")
                }
            }
            Request::StoreDelete { expected_revision } => {
                assert_eq!(expected_revision, self.revision);
                self.snapshot = None;
                self.revision = None;
                (Answer::stored(), "delete")
            }
            other => panic!("expected a store request, got {other:?}"),
        };
        backend.answer(call, answer).unwrap();
        what
    }
}

#[test]
fn the_store_keeps_the_conversation_across_processes() {
    let launch = || Launch::host_tools_app().env("HOST_TOOLS_APP_STORE", "1");
    let store_options = || ChannelOptions {
        store: Some(StoreOptions {
            timeout: Some(Duration::from_secs(30)),
        }),
        ..options()
    };
    let mut store = MemoryStore::default();

    let mut first = Backend::spawn(launch(), store_options());
    // agentlane loads while the factory builds the agent: before ready.
    assert_eq!(store.serve(&first, false), "load");
    first.wait_ready();
    for (turn, text) in ["chat one", "chat two", "chat three"].iter().enumerate() {
        first.prompt(text);
        assert_eq!(store.serve(&first, false), "save");
        assert_eq!(
            final_output(&first.until_terminal()),
            format!("You said: {text}")
        );
        assert_eq!(store.revision, Some(turn as u64 + 1));
    }
    // A save refused as stale fails the run, as agentlane does; nothing
    // is committed.
    first.prompt("chat four");
    assert_eq!(store.serve(&first, true), "save refused");
    let failed = first.until_terminal();
    let last = failed.last().unwrap();
    assert_eq!(
        (&last["type"], &last["scope"]),
        (&json!("error"), &json!("run"))
    );
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("the stored revision moved on"),
        "{last}"
    );
    let saved = store.snapshot.clone().unwrap();
    assert_eq!(store.revision, Some(3));
    drop(first); // killed: the conversation lives in the store

    let mut second = Backend::spawn(launch(), store_options());
    assert_eq!(store.serve(&second, false), "load");
    second.wait_ready();
    second.prompt("history");
    assert_eq!(store.serve(&second, false), "save");
    assert_eq!(
        final_output(&second.until_terminal()),
        "Seen 4 user messages: chat one | chat two | chat three | history"
    );
    assert_eq!(store.revision, Some(4));
    assert_ne!(store.snapshot.as_deref(), Some(saved.as_str()));
    // Reset deletes through the store, at the committed revision.
    second.send(BridgeCommand::Reset);
    assert_eq!(store.serve(&second, false), "delete");
    assert_eq!(second.next_event()["type"], "reset");
    assert_eq!(store.snapshot, None);
    second.prompt("history");
    assert_eq!(store.serve(&second, false), "save");
    assert_eq!(
        final_output(&second.until_terminal()),
        "Seen 1 user messages: history"
    );
    assert!(second.shutdown().success());
}

#[test]
fn a_synchronous_store_call_on_the_loop_while_a_tool_call_is_pending_does_not_deadlock() {
    let launch = Launch::host_tools_app().env("HOST_TOOLS_APP_STORE", "1");
    let options = ChannelOptions {
        store: Some(StoreOptions::default()),
        ..options()
    };
    let mut store = MemoryStore::default();
    let mut backend = Backend::spawn(launch, options);
    assert_eq!(store.serve(&backend, false), "load");
    backend.wait_ready();
    // One turn: the host's lookup, and the app's own peek_store, which
    // calls the store synchronously on the event loop's thread.
    backend.prompt(&calls_prompt(json!([
        {"name": "lookup", "arguments": {"customer_id": "c-1"}},
        {"name": "peek_store", "arguments": {}},
    ])));
    let (lookup, request) = backend.next_request();
    assert_eq!(tool_call(request).name, "lookup");
    // The lookup is pending, the loop's thread blocks in load: the reader
    // thread alone brings the answer.
    assert_eq!(store.serve(&backend, false), "load");
    backend
        .answer(lookup, Answer::Value("\"Ada\"".into()))
        .unwrap();
    assert_eq!(store.serve(&backend, false), "save");
    assert_eq!(
        final_output(&backend.until_terminal()),
        "Results: Ada | stored revision None"
    );
}
