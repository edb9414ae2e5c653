//! The round trip of a host tool call beside an approval's, through the
//! real backend, side by side in one run (BENCHMARKS.md, "Host channel").
//!
//!     cargo run --release -p bridge-host-channel --example round_trip -- [runs, default 200]
//!
//! Each measure is the host's wall time from the backend's `tool_start`
//! event to its `tool_end` (both read on stdout), the host answering at
//! once: for a host tool, the call's request on the channel answered by the
//! core; for an approval (the scenario backend's `note`), the pending
//! `tool_approval` answered with `approve`. Runs alternate between the
//! kinds; conversations are reset every 10 rounds (agentlane's turn limit, and
//! the history that the 1 MiB results grow).
#![cfg(unix)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bridge_core::command::Command as BridgeCommand;
use bridge_host_channel::{Answer, ChannelOptions, ToolSpec};
use serde_json::{json, Value};
use support::{Backend, Launch, Seen};

fn tool_event(event: &Value) -> Option<&str> {
    (event["type"] == "run_event")
        .then(|| event["event"]["type"].as_str())
        .flatten()
}

/// One run; the time from `tool_start` to `tool_end`, answering with `answer`.
fn measure(
    backend: &mut Backend,
    prompt: &str,
    mut answer: impl FnMut(&mut Backend, &Value),
) -> Duration {
    backend.prompt(prompt);
    let mut started = None;
    let mut took = None;
    loop {
        let event = backend.next_event();
        match tool_event(&event) {
            Some("tool_start") => started = Some(Instant::now()),
            Some("tool_end") => took = started.map(|s| s.elapsed()),
            _ => {}
        }
        answer(backend, &event);
        if matches!(
            event["type"].as_str(),
            Some("run_complete" | "error" | "run_cancelled")
        ) {
            assert_eq!(event["type"], "run_complete", "{event}");
            return took.expect("a tool ran");
        }
    }
}

fn reset(backend: &mut Backend) {
    backend.send(BridgeCommand::Reset);
    while backend.next_event()["type"] != "reset" {}
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, samples: &mut [Duration]) {
    let p50 = percentile(samples, 0.5);
    let p99 = percentile(samples, 0.99);
    println!(
        "{name:<28} p50 {:>7.2} ms   p99 {:>7.2} ms   ({} runs)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        samples.len()
    );
}

fn main() {
    let runs: usize = std::env::args().nth(1).map_or(200, |n| n.parse().unwrap());
    let lookup = ToolSpec {
        name: "lookup".into(),
        description: "Looks a customer up by id.".into(),
        input_schema: json!({"type": "object", "properties": {"customer_id": {"type": "string"}}}),
        timeout: None,
    };
    let mut tools = Backend::start(
        Launch::host_tools_app(),
        ChannelOptions {
            tools: vec![lookup],
            ..ChannelOptions::default()
        },
    );
    let mut approvals = {
        let mut launch = Launch::host_tools_app();
        launch.app = "scenario_app:create_backend".into();
        launch.with_channel = false;
        Backend::start(launch, ChannelOptions::default())
    };
    let megabyte = json!("x".repeat(1 << 20));
    let call = r#"calls [{"name": "lookup", "arguments": {"customer_id": "c-1"}}]"#;
    let answer_with = |value: Value| {
        move |backend: &mut Backend, event: &Value| {
            if tool_event(event) == Some("tool_start") {
                match backend.next_seen() {
                    Seen::Request(call, _) => {
                        backend.answer(call, Answer::tool_result(&value)).unwrap()
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    };
    let approve = |backend: &mut Backend, event: &Value| {
        let record = &event["event"]["payload"]["event"]["record"];
        if tool_event(event) == Some("tool_approval") && record["status"] == "pending" {
            let id = record["request_id"].as_str().unwrap().to_owned();
            backend.send(BridgeCommand::Approve {
                id,
                allowed: true,
                reason: None,
            });
        }
    };
    let (mut small, mut large, mut approved) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs + 10 {
        if run % 10 == 9 {
            reset(&mut tools);
            reset(&mut approvals);
        }
        let a = measure(&mut tools, call, answer_with(json!({"name": "Ada"})));
        let b = measure(&mut approvals, "note a.txt", approve);
        let c = measure(&mut tools, call, answer_with(megabyte.clone()));
        // The first runs warm the processes up: not counted.
        if run >= 10 {
            small.push(a);
            approved.push(b);
            large.push(c);
        }
    }
    let mut ratios: Vec<f64> = small
        .iter()
        .zip(&approved)
        .map(|(tool, approval)| tool.as_secs_f64() / approval.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    report("host tool (small result)", &mut small);
    report("host tool (1 MiB result)", &mut large);
    report("approval", &mut approved);
    println!(
        "host tool / approval, median of the per-round ratios: {:.2}",
        ratios[ratios.len() / 2]
    );
}
