//! Runs the shared session scenarios (`tests/fixtures/session-scenarios/`,
//! format in its README) against `bridge_core::session::Session`. The same
//! files run against the TypeScript session in
//! `__test__/session-scenarios.test.ts`.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bridge_core::session::{Close, CloseReason, Outcome, Output, Refusal, Session, Signal, Ticket};
use bridge_core::validate_event_line;
use serde_json::{json, Map, Value};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/session-scenarios")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replaces every string `"{{name}}"` by the parameter's value.
fn fill(template: &Value, params: &Map<String, Value>) -> Value {
    match template {
        Value::String(s) if s.starts_with("{{") && s.ends_with("}}") => params
            .get(&s[2..s.len() - 2])
            .cloned()
            .unwrap_or_else(|| panic!("no parameter for {s}")),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, params)).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), fill(v, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One event of a scenario as a stdout line, the way the TypeScript runner
/// writes it: the template expanded, `protocol_version` and `ts` first.
fn event_line(event: &Value, templates: &Map<String, Value>) -> String {
    let mut object = event.as_object().expect("an event is an object").clone();
    if let Some(name) = object.remove("$") {
        let template = &templates[name.as_str().expect("a template name")];
        object = fill(template, &object)
            .as_object()
            .expect("a template is an object")
            .clone();
    }
    let mut line = Map::new();
    line.insert("protocol_version".into(), json!("1.0"));
    line.insert("ts".into(), json!(1767225600.5));
    line.extend(object);
    Value::Object(line).to_string()
}

/// What the scenario's host steps and the machine's outputs amount to, in
/// the scenarios' vocabulary.
struct Host {
    session: Session,
    /// A clock that moves 1 ms per step (every scenario fits well inside
    /// the race window, as it does in real time for the TypeScript runner).
    now: Instant,
    ops: HashMap<String, Value>,
    tickets: HashMap<Ticket, String>,
    unread: VecDeque<String>,
    due: Vec<Ticket>,
    rejected: Vec<String>,
    closed: Option<Close>,
}

impl Host {
    fn new() -> Host {
        Host {
            session: Session::new(),
            now: Instant::now(),
            ops: HashMap::new(),
            tickets: HashMap::new(),
            unread: VecDeque::new(),
            due: Vec::new(),
            rejected: Vec::new(),
            closed: None,
        }
    }

    fn tick(&mut self) -> Instant {
        self.now += Duration::from_millis(1);
        self.now
    }

    fn absorb(&mut self, outputs: Vec<Output>, name: &str) {
        for output in outputs {
            match output {
                Output::Send(frame) => self.unread.push_back(frame),
                Output::Settled { ticket, outcome } => {
                    let op = self.tickets.get(&ticket).cloned().unwrap_or_default();
                    let state = self
                        .ops
                        .get(&op)
                        .unwrap_or_else(|| panic!("{name}: settlement for an unknown op"));
                    assert_eq!(
                        state,
                        &json!("pending"),
                        "{name}: op {op} settled twice ({outcome:?})"
                    );
                    self.ops.insert(op, outcome_value(&outcome));
                }
                Output::RetryAfter { ticket, .. } => self.due.push(ticket),
                Output::Rejected { message } => self.rejected.push(message),
                Output::Closed(close) => {
                    assert!(self.closed.is_none(), "{name}: closed twice");
                    self.closed = Some(close);
                }
            }
        }
    }

    fn host_step(&mut self, step: &Value, name: &str) {
        let op = step["op"]
            .as_str()
            .map_or_else(|| format!("#{}", self.ops.len()), str::to_owned);
        let now = self.tick();
        let result = match step["host"].as_str().unwrap() {
            "run" => self.session.prompt(step["text"].as_str().unwrap(), now),
            "cancel" => self.session.cancel(),
            "reset" => self.session.reset(now),
            "configure" => self
                .session
                .configure(step["patch"].as_object().unwrap().clone()),
            "approve" => self.session.approve(
                step["id"].as_str().unwrap(),
                step["allowed"].as_bool().unwrap(),
                step["reason"].as_str(),
            ),
            "close" => Ok(self.session.shutdown()),
            other => panic!("{name}: unknown host call {other}"),
        };
        match result {
            Ok((ticket, outputs)) => {
                self.ops.insert(op.clone(), json!("pending"));
                self.tickets.insert(ticket, op);
                self.absorb(outputs, name);
            }
            Err(refusal) => {
                self.ops.insert(op, refusal_value(&refusal));
            }
        }
    }

    fn backend_step(&mut self, step: &Value, templates: &Map<String, Value>, name: &str) {
        let frame = self.unread.pop_front().unwrap_or_else(|| {
            panic!(
                "{name}: the backend expects {} but nothing was sent",
                step["reads"]
            )
        });
        let mut command: Value = serde_json::from_str(frame.trim_end_matches('\n')).unwrap();
        let version = command.as_object_mut().unwrap().remove("protocol_version");
        assert_eq!(version, Some(json!("1.0")), "{name}: {frame}");
        assert_eq!(command, step["reads"], "{name}: the command sent");
        for event in step["writes"].as_array().unwrap() {
            let line = event_line(event, templates);
            let event_type = validate_event_line(&line)
                .unwrap_or_else(|e| panic!("{name}: invalid scenario event {line}: {e}"));
            let now = self.tick();
            let outputs = self.session.on_event(&Signal::read(&line, event_type), now);
            self.absorb(outputs, name);
        }
        if let Some(code) = step.get("exit") {
            let outputs = self.session.on_exit(code.as_i64().map(|c| c as i32), None);
            self.absorb(outputs, name);
        }
        // Retry timers fire before the backend reads its next command.
        for ticket in std::mem::take(&mut self.due) {
            let now = self.tick();
            let outputs = self.session.retry_due(ticket, now);
            self.absorb(outputs, name);
        }
    }

    fn expect_step(&self, expect: &Value, name: &str, index: usize) {
        let at = format!("{name}, step {index}");
        for (op, expected) in expect["ops"].as_object().into_iter().flatten() {
            assert_eq!(self.ops.get(op), Some(expected), "{at}: op {op}");
        }
        if let Some(open) = expect.get("open_approvals") {
            assert_eq!(
                &json!(self.session.open_approvals()),
                open,
                "{at}: open approvals"
            );
        }
        if let Some(rejected) = expect.get("rejected") {
            assert_eq!(
                &json!(self.rejected),
                rejected,
                "{at}: rejected command errors"
            );
        }
        if let Some(closed) = expect.get("closed") {
            let actual = self.closed.as_ref().map(close_value);
            match (closed, actual) {
                (Value::Null, None) => {}
                (Value::Object(expected), Some(actual)) => {
                    for (key, value) in expected {
                        assert_eq!(actual.get(key), Some(value), "{at}: closed.{key}");
                    }
                }
                (expected, actual) => panic!("{at}: closed: expected {expected}, got {actual:?}"),
            }
        }
    }
}

fn outcome_value(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Completed => json!("completed"),
        Outcome::Cancelled => json!("cancelled"),
        Outcome::Failed { message } => json!({ "failed": message }),
        Outcome::Refused { message } => json!({ "refused": message }),
        Outcome::Done => json!("done"),
        Outcome::Configured => json!("configured"),
        Outcome::ConfigRejected { code, message } => {
            json!({ "config_rejected": { "code": code, "message": message } })
        }
        Outcome::Resolved => json!("resolved"),
        Outcome::ApprovalClosed => json!("approval_closed"),
        Outcome::Closed(_) => json!("closed"),
    }
}

fn refusal_value(refusal: &Refusal) -> Value {
    match refusal {
        Refusal::Closed(_) => json!("closed"),
        Refusal::ApprovalNotPending(_) | Refusal::ApprovalAnswered(_) => json!("dropped"),
        Refusal::RunActive | Refusal::BlankPrompt | Refusal::NotEncodable(_) => {
            json!({ "invalid": refusal.to_string() })
        }
    }
}

fn close_value(close: &Close) -> Map<String, Value> {
    let mut value = Map::new();
    value.insert("reason".into(), json!(close.reason.name()));
    value.insert("code".into(), json!(close.code));
    if let CloseReason::ProtocolError { message } = &close.reason {
        value.insert("message".into(), json!(message));
    }
    value
}

fn run_scenario(scenario: &Value, templates: &Map<String, Value>) {
    let name = scenario["name"].as_str().expect("a scenario has a name");
    let mut host = Host::new();
    let ready = scenario
        .get("ready")
        .cloned()
        .unwrap_or(json!({ "$": "ready" }));
    let line = event_line(&ready, templates);
    let now = host.tick();
    host.session.on_event(
        &Signal::read(&line, validate_event_line(&line).unwrap()),
        now,
    );
    for (index, step) in scenario["steps"].as_array().unwrap().iter().enumerate() {
        if step.get("host").is_some() {
            host.host_step(step, name);
        } else if let Some(backend) = step.get("backend") {
            host.backend_step(backend, templates, name);
        } else if let Some(expect) = step.get("expect") {
            host.expect_step(expect, name, index);
        } else {
            panic!("{name}: step {index} is neither host, backend nor expect");
        }
    }
    assert!(
        host.unread.is_empty(),
        "{name}: commands sent but never read: {:?}",
        host.unread
    );
}

#[test]
fn every_scenario_holds() {
    let templates = read_json(&dir().join("events.json"))["templates"]
        .as_object()
        .unwrap()
        .clone();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("events.json"))
        .collect();
    files.sort();
    let mut count = 0;
    for file in files {
        for scenario in read_json(&file)["scenarios"].as_array().unwrap() {
            run_scenario(scenario, &templates);
            count += 1;
        }
    }
    assert!(count >= 30, "only {count} scenarios found");
}
