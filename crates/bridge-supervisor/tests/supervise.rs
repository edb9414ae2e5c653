//! The supervisor against real process trees: a backend that ignores
//! SIGTERM, SIGINT and SIGHUP and starts a grandchild that does the same
//! (one in the backend's group, one that left it with `setsid`).
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{alive, STUBBORN, SUPERVISOR};

struct Supervised {
    child: Child,
    control: Option<UnixStream>,
    started: u32,
    stdout: BufReader<std::process::ChildStdout>,
}

/// Starts the supervisor with its control socket on fd 3 (through `sh`,
/// which moves the socket from fd 0 to fd 3).
fn supervise(script: &str, grace_ms: u32) -> Supervised {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = Command::new("sh")
        .args(["-c", r#"exec 3<&0 </dev/null; exec "$0" "$@""#, SUPERVISOR])
        .args([
            "--term-grace-ms",
            &grace_ms.to_string(),
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut control = BufReader::new(ours.try_clone().unwrap());
    let mut line = String::new();
    control.read_line(&mut line).unwrap();
    let started = line
        .strip_prefix("started ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected report {line:?}"));
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Supervised {
        child,
        control: Some(ours),
        started,
        stdout,
    }
}

impl Supervised {
    /// The pids the stubborn script printed.
    fn pids(&mut self) -> Vec<i32> {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.strip_prefix("pids ")
            .unwrap_or_else(|| panic!("unexpected output {line:?}"))
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    }

    fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the supervisor did not exit in {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn the_host_closing_the_control_socket_ends_the_whole_tree() {
    let mut s = supervise(STUBBORN, 200);
    let pids = s.pids();
    assert_eq!(pids[0] as u32, s.started);
    assert!(pids.iter().all(|&p| alive(p)));
    drop(s.control.take()); // as when the host dies
    let status = s.wait(Duration::from_secs(5));
    // The backend ignored SIGTERM: it died of the SIGKILL after the grace,
    // and the supervisor says so the same way.
    assert_eq!(status.signal(), Some(9), "{status:?}");
    for pid in pids {
        assert!(!alive(pid), "{pid} survived");
    }
}

#[test]
fn what_an_exiting_backend_leaves_behind_goes_too_and_its_code_is_kept() {
    let script = r#"
        setsid sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done' &
        echo "pids $$ $!"
        exit 3
    "#;
    let mut s = supervise(script, 200);
    let pids = s.pids();
    let status = s.wait(Duration::from_secs(5));
    assert_eq!(status.code(), Some(3));
    assert!(!alive(pids[1]), "the escaped grandchild survived");
}

#[test]
fn sigterm_asks_nicely_first_and_sigusr2_does_not() {
    // A backend that exits on SIGTERM: no SIGKILL needed.
    let mut s = supervise("echo \"pids $$\"; while :; do sleep 1; done", 5_000);
    let pids = s.pids();
    let asked = Instant::now();
    signal(s.child.id(), "TERM");
    let status = s.wait(Duration::from_secs(3));
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert!(asked.elapsed() < Duration::from_secs(2));
    assert!(!alive(pids[0]));

    // SIGUSR2: everything is killed at once, however long the grace.
    let mut s = supervise(STUBBORN, 60_000);
    let pids = s.pids();
    signal(s.child.id(), "USR2");
    let status = s.wait(Duration::from_secs(3));
    assert_eq!(status.signal(), Some(9));
    for pid in pids {
        assert!(!alive(pid), "{pid} survived");
    }
}

#[test]
fn sigint_is_passed_on_to_the_backend() {
    let script =
        r#"trap 'echo "got INT"; exit 5' INT; echo "pids $$"; while :; do sleep 0.1; done"#;
    let mut s = supervise(script, 200);
    s.pids();
    signal(s.child.id(), "INT");
    let mut line = String::new();
    s.stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "got INT\n");
    assert_eq!(s.wait(Duration::from_secs(3)).code(), Some(5));
}

#[test]
fn a_backend_that_cannot_start_is_reported_on_the_control_socket() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let child = Command::new("sh")
        .args(["-c", r#"exec 3<&0 </dev/null; exec "$0" "$@""#, SUPERVISOR])
        .args(["--", "/nonexistent/backend"])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(ours).read_line(&mut line).unwrap();
    assert!(line.starts_with("failed ENOENT 2 "), "{line:?}");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(127));
    // The host hears it on the control socket; stderr is the backend's.
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");

    // Without a control socket, stderr says it.
    let output = Command::new(SUPERVISOR)
        .args(["--", "/nonexistent/backend"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot start /nonexistent/backend"));
}
