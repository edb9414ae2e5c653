//! The bridge's start: the one discovery line on stdout when the backend
//! cannot serve (`agentlane-bridge failed {json}`, exit status 1), and no
//! backend process left behind. Uses `python3` and small Python scripts
//! instead of the real backend (the end-to-end tests in
//! `__test__/bridge-*.test.ts` use the real one).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn bridge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentlane-bridge"))
        .args(args)
        .output()
        .expect("agentlane-bridge runs")
}

/// The failed line's JSON; asserts it is the only stdout line and the exit status is 1.
fn failure(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout: {stdout}");
    let json = lines[0]
        .strip_prefix("agentlane-bridge failed ")
        .unwrap_or_else(|| panic!("not a failed line: {}", lines[0]));
    assert_eq!(
        output.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(json).unwrap()
}

fn gone(pid: i64) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_python_that_cannot_be_started_fails_at_spawn() {
    let failed = failure(&bridge(&[
        "--app",
        "demo_app:create_backend",
        "--python",
        "/nonexistent/python3",
    ]));
    assert_eq!(failed["schema"], 1);
    assert_eq!(failed["stage"], "spawn");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/python3"),
        "{failed}"
    );
}

#[test]
fn a_backend_that_exits_before_ready_reports_its_status_and_last_stderr_line() {
    // A python3 without agentlane: `-m agentlane_process_bridge` fails at once.
    let output = bridge(&["--app", "demo_app:create_backend", "--python", "python3"]);
    let failed = failure(&output);
    assert_eq!(failed["stage"], "backend", "{failed}");
    assert_eq!(failed["exitCode"], 1);
    assert!(
        failed["stderr"]
            .as_str()
            .unwrap()
            .contains("No module named"),
        "{failed}"
    );
    assert!(
        failed["message"].as_str().unwrap().contains("status 1"),
        "{failed}"
    );
    // Its stderr is forwarded to the bridge's.
    assert!(String::from_utf8_lossy(&output.stderr).contains("No module named"));
}

#[test]
fn an_unsupported_protocol_version_is_refused() {
    let script = r#"import sys; print('{"protocol_version":"2.0","type":"ready","ts":1,"version":"9","package":"agentlane-process-bridge"}', flush=True); sys.stdin.read()"#;
    let output = bridge(&["--app", "x:y", "--", "python3", "-c", script]);
    let failed = failure(&output);
    assert_eq!(failed["stage"], "protocol", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("Unsupported bridge protocol version: 2.0."),
        "{failed}"
    );
    assert!(
        gone(failed["backendPid"].as_i64().unwrap()),
        "the backend outlived a failed start"
    );
}

#[test]
fn a_backend_that_never_gets_ready_is_killed_after_the_timeout() {
    let output = bridge(&[
        "--app",
        "x:y",
        "--ready-timeout-ms",
        "300",
        "--",
        "python3",
        "-c",
        "import time; time.sleep(60)",
    ]);
    let failed = failure(&output);
    assert_eq!(failed["stage"], "timeout", "{failed}");
    assert!(
        gone(failed["backendPid"].as_i64().unwrap()),
        "the backend outlived a failed start"
    );
}

#[test]
fn a_port_in_use_fails_at_listen_and_the_backend_is_stopped() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    // A backend that gets ready and exits on shutdown (or stdin EOF).
    let script = r#"import sys; print('{"protocol_version":"1.0","type":"ready","ts":1,"version":"9","package":"agentlane-process-bridge"}', flush=True); sys.stdin.readline(); print('{"protocol_version":"1.0","type":"shutdown","ts":2}', flush=True)"#;
    let output = bridge(&[
        "--app", "x:y", "--port", &port, "--", "python3", "-c", script,
    ]);
    let failed = failure(&output);
    assert_eq!(failed["stage"], "listen", "{failed}");
    assert!(
        failed["message"].as_str().unwrap().contains(&port),
        "{failed}"
    );
    assert!(
        gone(failed["backendPid"].as_i64().unwrap()),
        "the backend outlived a failed start"
    );
}

#[test]
fn help_prints_the_usage_on_stdout_and_exits_0() {
    for flag in ["--help", "-h"] {
        let output = bridge(&[flag]);
        assert_eq!(output.status.code(), Some(0), "{flag}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("Usage: agentlane-bridge"), "{flag}: {stdout}");
        assert!(stdout.contains("--max-conversations"), "{flag}: {stdout}");
        assert!(output.stderr.is_empty(), "{flag}");
    }
    // The `check` subcommand's own help, the same way.
    let output = bridge(&["check", "--help"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&output.stdout).contains("Usage: agentlane-bridge check"));
}

/// A backend that gets ready and exits on shutdown (or stdin EOF).
const READY_SCRIPT: &str = r#"import sys; print('{"protocol_version":"1.0","type":"ready","ts":1,"version":"9","package":"agentlane-process-bridge"}', flush=True); sys.stdin.readline(); print('{"protocol_version":"1.0","type":"shutdown","ts":2}', flush=True)"#;

#[test]
fn warm_without_a_supervisor_fails_the_start_with_warm_fallback_error() {
    let output = bridge(&[
        "--app", "x:y", "--warm", "--warm-fallback", "error", "--supervisor", "/nonexistent/process-bridge-supervisor",
        "--", "python3", "-c", READY_SCRIPT,
    ]);
    let failed = failure(&output);
    assert_eq!(failed["stage"], "prefork", "{failed}");
    assert!(
        failed["message"].as_str().unwrap().contains("--supervisor names /nonexistent/process-bridge-supervisor"),
        "{failed}"
    );
}

#[test]
fn warm_without_a_supervisor_serves_cold_with_the_default_fallback_and_says_why() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentlane-bridge"))
        .args([
            "--app", "x:y", "--warm", "--supervisor", "/nonexistent/process-bridge-supervisor",
            "--", "python3", "-c", READY_SCRIPT,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("agentlane-bridge runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ready: Value = serde_json::from_str(line.strip_prefix("agentlane-bridge ready ").unwrap_or_else(|| panic!("{line}"))).unwrap();
    assert_eq!(ready["conversations"]["startMode"], "cold", "{ready}");
    assert!(!ready["capabilities"].as_array().unwrap().iter().any(|c| c == "warm"), "{ready}");
    drop(child.stdin.take()); // the launcher is gone: the bridge stops
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warm starts are off: --supervisor names /nonexistent/process-bridge-supervisor")
            && stderr.contains("conversations start cold (--warm-fallback cold)"),
        "{stderr}"
    );
}

/// The lookup's rules are `bridge_launch::supervisor`'s, the Node package's
/// too: an empty `$PROCESS_BRIDGE_SUPERVISOR` means none (not a path that
/// is not there), and a named file that is not executable is refused.
#[test]
fn the_supervisor_override_empty_is_none_and_a_plain_file_is_refused() {
    let run = |value: &str| {
        Command::new(env!("CARGO_BIN_EXE_agentlane-bridge"))
            .args(["--app", "x:y", "--warm", "--warm-fallback", "error", "--", "python3", "-c", READY_SCRIPT])
            .env("PROCESS_BRIDGE_SUPERVISOR", value)
            .output()
            .expect("agentlane-bridge runs")
    };
    let failed = failure(&run(""));
    assert!(
        failed["message"].as_str().unwrap().contains("$PROCESS_BRIDGE_SUPERVISOR is empty: no process-bridge-supervisor"),
        "{failed}"
    );
    let plain = std::env::temp_dir().join(format!("pbn-plain-supervisor-{}", std::process::id()));
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let failed = failure(&run(plain.to_str().unwrap()));
    let _ = std::fs::remove_file(&plain);
    let expected = format!("$PROCESS_BRIDGE_SUPERVISOR names {}, which is not an executable process-bridge-supervisor", plain.display());
    assert!(failed["message"].as_str().unwrap().contains(&expected), "{failed}");
}
