//! The host channel through the bridge's two start paths (issue 32), with
//! the real backend (`tests/e2e/backends/host_channel_probe_app.py`): cold
//! (`Backend::spawn`) and warm (`Backend::fork` from a real prefork
//! server), declared and not.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bridge_core::reader::Item;
use bridge_prefork::{PreforkServer, ServerSpec};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Backend, Launch, Output};

const APP: &str = "host_channel_probe_app:create_backend";
const READY: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn launch() -> Launch {
    Launch {
        program: repo().join(".venv/bin/python").into_os_string(),
        args: ["-m", "agentlane_process_bridge", "--app", APP].map(OsString::from).to_vec(),
        cwd: Some(repo().join("tests/e2e/backends")),
        supervisor: None,
        term_grace: Duration::from_millis(300),
    }
}

/// The probe's `ready` metadata.
fn ready_facts(outputs: &mut mpsc::Receiver<Output>) -> Value {
    loop {
        match outputs.blocking_recv().expect("the backend ended before ready") {
            Output::Stdout(batch) => {
                for item in batch.items {
                    if let Item::Event { line, .. } = item {
                        let event: Value = serde_json::from_str(&line).unwrap();
                        if event["type"] == "ready" {
                            return event["metadata"].clone();
                        }
                    }
                }
            }
            Output::Exited(status) => panic!("exited before ready: {status}"),
            Output::Stderr(_) => {}
        }
    }
}

/// The hello and an echo over a declared channel, and the facts.
fn check_declared(mut backend: Backend, mut outputs: mpsc::Receiver<Output>) {
    let host = backend.take_host_channel().expect("a declared channel's host end");
    assert!(backend.take_host_channel().is_none(), "taken once");
    host.set_read_timeout(Some(READY)).unwrap();
    let mut lines = BufReader::new(host.try_clone().unwrap());
    let mut hello = String::new();
    lines.read_line(&mut hello).unwrap();
    let hello: Value = serde_json::from_str(&hello).unwrap();
    assert_eq!(hello["fd"], bridge_launch::channels::HOST.fd);
    (&host).write_all(b"ping\n").unwrap();
    let mut echo = String::new();
    lines.read_line(&mut echo).unwrap();
    assert_eq!(echo, "echo ping\n");
    let facts = ready_facts(&mut outputs);
    assert_eq!(facts["host_env"], "4");
    assert_eq!(facts["extra"], serde_json::json!([4]), "{facts}");
    assert_eq!(facts["pid"], hello["hello"]);
    backend.kill();
}

fn check_undeclared(mut backend: Backend, mut outputs: mpsc::Receiver<Output>) {
    assert!(backend.take_host_channel().is_none());
    let facts = ready_facts(&mut outputs);
    assert_eq!(facts["host_env"], Value::Null);
    assert_eq!(facts["extra"], serde_json::json!([]), "{facts}");
    backend.kill();
}

fn supervisor() -> PathBuf {
    let supervisor = repo().join("target/quick/process-bridge-supervisor");
    assert!(supervisor.exists(), "build it: cargo build -p bridge-supervisor --profile quick");
    supervisor
}

#[test]
fn a_cold_backend_gets_the_host_channel_when_declared() {
    let (backend, outputs) = Backend::spawn(&launch(), true).unwrap();
    check_declared(backend, outputs);
    let (backend, outputs) = Backend::spawn(&launch(), false).unwrap();
    check_undeclared(backend, outputs);
}

#[test]
fn a_supervised_cold_backend_gets_the_host_channel_when_declared() {
    let launch = Launch { supervisor: Some(supervisor()), ..launch() };
    let (backend, outputs) = Backend::spawn(&launch, true).unwrap();
    check_declared(backend, outputs);
    let (backend, outputs) = Backend::spawn(&launch, false).unwrap();
    check_undeclared(backend, outputs);
}

#[test]
fn a_warm_backend_gets_the_host_channel_when_declared() {
    let supervisor = supervisor();
    let launch = launch();
    let args: Vec<String> = launch.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut spec = ServerSpec::for_command(launch.program.clone(), &args, supervisor).unwrap();
    spec.cwd = launch.cwd.clone();
    let grace = Duration::from_millis(300);
    let server = PreforkServer::start(&spec, grace, None).unwrap();
    server.wait_ready(Some(READY)).unwrap();
    let (backend, outputs) = Backend::fork(&server, grace, Instant::now() + READY, true).unwrap();
    check_declared(backend, outputs);
    let (backend, outputs) = Backend::fork(&server, grace, Instant::now() + READY, false).unwrap();
    check_undeclared(backend, outputs);
    server.kill();
}
