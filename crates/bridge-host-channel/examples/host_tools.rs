//! A Rust host whose agent calls one tool of the host's own: the whole
//! reverse direction, on this crate's core (`tests/support`: the backend's
//! channel on an extra descriptor, a reader thread feeding the core).
//!
//!     bash scripts/setup-python.sh
//!     cargo run -p bridge-host-channel --example host_tools
//!     cargo run -p bridge-host-channel --example host_tools -- --python <venv>/bin/python
//!
//! With `--python`, the module must be installed in that virtualenv (the
//! Python publish rehearsal runs it so, on the installed wheel); without,
//! the repository's `.venv` and `python/src` are used. Prints the final
//! answer; exits 1 unless it carries the tool's result.
#![cfg(unix)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use bridge_host_channel::{Answer, ChannelOptions, Request, ToolSpec};
use serde_json::json;
use support::{Backend, Launch};

fn main() {
    let mut launch = Launch::host_tools_app();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--python" => {
                launch.python = PathBuf::from(args.next().expect("--python <path>"));
                launch.module_source = None;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let lookup = ToolSpec {
        name: "lookup".into(),
        description: "Looks a customer up by id.".into(),
        input_schema: json!({
            "type": "object",
            "properties": { "customer_id": { "type": "string" } },
            "required": ["customer_id"],
        }),
        timeout: Some(std::time::Duration::from_secs(30)),
    };
    let mut backend = Backend::start(
        launch,
        ChannelOptions {
            tools: vec![lookup],
            ..ChannelOptions::default()
        },
    );
    let took = backend.with_channel(|c| c.listed_tools());
    println!("backend ready; its factory took the host's tools: {took}");
    backend.prompt(r#"calls [{"name": "lookup", "arguments": {"customer_id": "c-42"}}]"#);
    let (call, request) = backend.next_request();
    let Request::CallTool(tool_call) = request else {
        panic!("expected a tool call, got {request:?}")
    };
    println!(
        "the agent calls {} {}",
        tool_call.name,
        tool_call.arguments.get()
    );
    backend
        .answer(call, Answer::tool_result(&json!("Ada Lovelace (gold)")))
        .unwrap();
    let events = backend.until_terminal();
    let last = events.last().unwrap();
    let answer = last["final_output"].as_str().unwrap_or_default().to_owned();
    println!("final answer: {answer}");
    let status = backend.shutdown();
    if !(took && answer == "Results: Ada Lovelace (gold)" && status.success()) {
        eprintln!("host_tools: the tool's result did not reach the answer ({last})");
        std::process::exit(1);
    }
}
