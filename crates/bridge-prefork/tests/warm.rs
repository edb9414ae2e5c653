//! The prefork server against the real backend (`agentlane` 0.22.0 in the
//! repository's `.venv`, made by `scripts/setup-python.sh`) and the real
//! supervisor: handshakes and refusals, conversations that run as cold
//! ones do, what forks share and what they do not, and containment.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bridge_prefork::{Conversation, PreforkServer, Report, ServerSpec, StartErrorKind};
use serde_json::Value;

const GRACE: Duration = Duration::from_millis(300);
/// Generous: other suites run on the same two cores.
const READY: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn python() -> PathBuf {
    let python = repo().join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/setup-python.sh", python.display());
    python
}

/// The workspace's supervisor (`PROCESS_BRIDGE_SUPERVISOR` overrides), built if missing.
fn supervisor() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("PROCESS_BRIDGE_SUPERVISOR") {
                return PathBuf::from(path);
            }
            // target/<profile>/deps/<this test> → target/<profile>/
            let profile_dir = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().to_path_buf();
            let path = profile_dir.join("process-bridge-supervisor");
            if !path.exists() {
                let release = profile_dir.file_name().is_some_and(|n| n == "release");
                let mut build = Command::new(env!("CARGO"));
                build.args(["build", "-p", "bridge-supervisor"]).current_dir(repo());
                if release {
                    build.arg("--release");
                }
                assert!(build.status().unwrap().success(), "building the supervisor failed");
            }
            path
        })
        .clone()
}

fn spec(app: &str) -> ServerSpec {
    let args = ["-m", "agentlane_process_bridge", "--app", app].map(String::from);
    let mut spec = ServerSpec::for_command(python(), &args, supervisor()).unwrap();
    spec.cwd = Some(repo().join("tests/e2e/backends"));
    spec
}

fn started(app: &str) -> PreforkServer {
    let server = PreforkServer::start(&spec(app), GRACE, None).unwrap();
    server.wait_ready(Some(READY)).unwrap_or_else(|e| panic!("{e}: {:?}", e.log_tail));
    server
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

fn gone_within(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A conversation with its stdout read line by line.
struct Talk {
    conversation: Conversation,
    stdout: BufReader<std::io::PipeReader>,
    pid: u32,
    supervisor: u32,
}

impl Talk {
    fn start(server: &PreforkServer) -> Talk {
        let mut conversation = open(server);
        let stdout = BufReader::new(conversation.stdout.try_clone().unwrap());
        let Some(Report::Started { pid, supervisor: Some(supervisor) }) = conversation.control.next_report().unwrap() else {
            panic!("no started line");
        };
        Talk { conversation, stdout, pid, supervisor }
    }

    fn event(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "stdout ended");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn ready(&mut self) -> Value {
        let ready = self.event();
        assert_eq!(ready["type"], "ready", "{ready}");
        ready
    }

    fn send(&mut self, command: &str) {
        writeln!(self.conversation.stdin, "{command}").unwrap();
    }

    /// Prompts and returns the run's final output. A prompt right after a
    /// run's end can meet the §12 race ("A run is already active."): it is
    /// sent again, as the session does.
    fn run(&mut self, text: &str) -> String {
        let prompt = format!(r#"{{"type":"prompt","text":"{text}","protocol_version":"1.0"}}"#);
        self.send(&prompt);
        loop {
            let event = self.event();
            match event["type"].as_str() {
                Some("run_complete") => return event["final_output"].as_str().unwrap().to_owned(),
                Some("error") if event["message"] == "A run is already active." => {
                    std::thread::sleep(Duration::from_millis(20));
                    self.send(&prompt);
                }
                Some("error") => panic!("{event}"),
                _ => {}
            }
        }
    }

    /// Closes stdin (the backend's end of conversation) and returns the last report.
    fn end(mut self) -> Option<Report> {
        drop(self.conversation.stdin);
        let mut last = None;
        while let Some(report) = self.conversation.control.next_report().unwrap() {
            last = Some(report);
        }
        last
    }
}

/// A conversation whose control socket's reads fail after a while (a
/// test fails instead of hanging when a report never comes).
fn open(server: &PreforkServer) -> Conversation {
    let conversation = server.start_conversation(GRACE).unwrap();
    conversation.control.socket().set_read_timeout(Some(READY)).unwrap();
    conversation
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

#[test]
fn a_warm_conversation_runs_as_a_cold_one_and_ends_with_its_exit() {
    let server = started("scenario_app:create_backend");
    let mut talk = Talk::start(&server);
    // Contained as a cold backend is: a process group of its own, under a
    // supervisor of its own, which is the server's child.
    assert_eq!(nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(talk.pid as i32))).unwrap().as_raw() as u32, talk.pid);
    let ready = talk.ready();
    assert_eq!(ready["metadata"]["app"], "scenario");
    assert_eq!(ready["config"], serde_json::json!({"model": "scripted-1"}));
    assert_eq!(talk.run("chat hello"), "Hello! This is a scripted reply. You said: chat hello");
    assert_eq!(talk.run("count"), "This conversation has 2 user message(s).");
    let (pid, supervisor) = (talk.pid, talk.supervisor);
    // End of stdin ends the backend, as cold; the supervisor says how.
    assert_eq!(talk.end(), Some(Report::Exited(0)));
    assert!(gone_within(pid, Duration::from_secs(5)));
    assert!(gone_within(supervisor, Duration::from_secs(5)));
    assert!(server.kill());
}

#[test]
fn every_fork_draws_its_own_randomness_and_shares_only_what_was_imported() {
    let server = started("warm_probe_app:create_backend");
    let mut first = Talk::start(&server);
    let mut second = Talk::start(&server);
    let a = first.ready()["metadata"].clone();
    let b = second.ready()["metadata"].clone();
    let server_pid = match server.status() {
        bridge_prefork::ServerStatus::Ready(ready) => ready.pid,
        other => panic!("{other:?}"),
    };
    for key in ["random", "uuid", "secret", "pid"] {
        assert_ne!(a[key], b[key], "{key} is the same in two forks");
    }
    // The factory ran in each fork, from the module as imported.
    assert_eq!((a["factory_calls"].as_u64(), b["factory_calls"].as_u64()), (Some(1), Some(1)));
    assert_eq!(a["imported_in"].as_u64(), Some(u64::from(server_pid)));
    // Conversation state is per conversation.
    assert_eq!(first.run("count"), "This conversation has 1 user message(s).");
    assert_eq!(first.run("count"), "This conversation has 2 user message(s).");
    assert_eq!(second.run("count"), "This conversation has 1 user message(s).");
    assert!(server.kill());
}

#[test]
fn the_backend_sees_what_python_dash_m_gives() {
    let server = started("warm_probe_app:create_backend");
    let mut talk = Talk::start(&server);
    let warm = talk.ready()["metadata"].clone();
    assert!(server.kill());

    let mut cold = Command::new(python())
        .args(["-m", "agentlane_process_bridge", "--app", "warm_probe_app:create_backend"])
        .current_dir(repo().join("tests/e2e/backends"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(cold.stdout.take().unwrap()).read_line(&mut line).unwrap();
    drop(cold.stdin.take());
    assert!(cold.wait().unwrap().success());
    let cold: Value = serde_json::from_str(&line).unwrap();
    let cold = &cold["metadata"];
    for key in ["argv", "path0", "main_file", "main_spec", "factory_calls"] {
        assert_eq!(warm[key], cold[key], "{key}");
    }
    // Only the stdio's kind differs from a cold start where the host's differs:
    // stdin a socket (as Node's spawn makes it), stdout and stderr pipes.
    assert_eq!(warm["stdio"], cold["stdio"]);
    assert_eq!(cold["imported_in"], cold["pid"]);
}

#[test]
fn refusals_have_their_codes() {
    for (app, code, words) in [
        ("warm_thread_app:create_backend", "threads", "import-time-poller"),
        ("no_such_module:create_backend", "import-failed", "No module named 'no_such_module'"),
        ("scenario_app:no_such_factory", "bad-app", "has no attribute 'no_such_factory'"),
    ] {
        let server = PreforkServer::start(&spec(app), GRACE, None).unwrap();
        let error = server.wait_ready(Some(READY)).unwrap_err();
        assert_eq!(error.kind, StartErrorKind::Refused(code.into()), "{app}: {error}");
        assert!(error.message.contains(words), "{app}: {error}");
        // A refusing server exits by itself.
        let exit = server.wait_exit(Some(Duration::from_secs(10))).expect("the refusing server exited");
        assert_eq!(exit.code, Some(3), "{app}");
        assert!(server.start_conversation(GRACE).is_err());
    }
}

#[test]
fn an_interpreter_that_is_not_there_fails_the_start() {
    let mut spec = spec("scenario_app:create_backend");
    spec.program = "/nonexistent/python".into();
    let server = PreforkServer::start(&spec, GRACE, None).unwrap();
    let error = server.wait_ready(Some(READY)).unwrap_err();
    assert_eq!(error.kind, StartErrorKind::ExitedBeforeReady, "{error}");
    assert!(error.message.contains("could not be started") && error.message.contains("(ENOENT)"), "{error}");
    assert_eq!(server.wait_exit(Some(Duration::from_secs(10))).unwrap().code, Some(127));
}

#[test]
fn a_factory_that_raises_ends_its_conversation_with_its_message() {
    let server = started("warm_probe_app:failing_backend");
    let mut conversation = open(&server);
    let mut reports = Vec::new();
    while let Some(report) = conversation.control.next_report().unwrap() {
        reports.push(report);
    }
    assert!(matches!(reports[0], Report::Started { .. }), "{reports:?}");
    assert_eq!(reports.last(), Some(&Report::Exited(1)));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut conversation.stderr, &mut stderr).unwrap();
    assert!(stderr.contains("agentlane_process_bridge: the factory failed on purpose"), "{stderr}");
    // The server is unaffected.
    let mut next = open(&server);
    assert!(matches!(next.control.next_report().unwrap(), Some(Report::Started { .. })));
    assert!(server.kill());
}

#[test]
fn the_server_keeps_no_descriptor_of_a_conversation() {
    let server = started("scenario_app:create_backend");
    let ready = match server.status() {
        bridge_prefork::ServerStatus::Ready(ready) => ready,
        other => panic!("{other:?}"),
    };
    let before = fd_count(ready.pid);
    let mut talks: Vec<Talk> = (0..3).map(|_| Talk::start(&server)).collect();
    for talk in &mut talks {
        talk.ready();
    }
    assert_eq!(fd_count(ready.pid), before);
    for talk in talks {
        // Nor does its end depend on the server: its own stdin's end ends it.
        assert_eq!(talk.end(), Some(Report::Exited(0)));
    }
    assert_eq!(fd_count(ready.pid), before);
    assert!(server.kill());
}

#[test]
fn closing_the_control_socket_ends_the_conversation_and_its_descendants() {
    let server = started("scenario_app:create_backend");
    let mut talk = Talk::start(&server);
    talk.ready();
    let (pid, supervisor) = (talk.pid, talk.supervisor);
    drop(talk.conversation.control); // as when the host dies
    assert!(gone_within(pid, Duration::from_secs(5)), "the backend survived");
    assert!(gone_within(supervisor, Duration::from_secs(5)), "its supervisor survived");
    assert!(server.kill());
}

#[test]
fn a_killed_server_takes_its_conversations_with_it() {
    let server = started("scenario_app:create_backend");
    let mut talks: Vec<Talk> = (0..2).map(|_| Talk::start(&server)).collect();
    for talk in &mut talks {
        talk.ready();
    }
    let python = match server.status() {
        bridge_prefork::ServerStatus::Ready(ready) => ready.pid,
        other => panic!("{other:?}"),
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(python as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let exit = server.wait_exit(Some(Duration::from_secs(10))).expect("the server's end was reported");
    assert_eq!(exit.signal, Some(9));
    for mut talk in talks {
        let mut last = None;
        while let Some(report) = talk.conversation.control.next_report().unwrap() {
            last = Some(report);
        }
        // Ended by its supervisor's SIGTERM (the server's supervisor ended the tree).
        assert_eq!(last, Some(Report::Signaled(15)));
        assert!(!alive(talk.pid) && !alive(talk.supervisor));
    }
    assert!(!alive(server.supervisor_pid()));
}

#[test]
fn shutdown_lets_running_conversations_finish_then_the_server_exits() {
    let server = started("scenario_app:create_backend");
    let mut talk = Talk::start(&server);
    talk.ready();
    server.shutdown();
    assert!(server.start_conversation(GRACE).is_err(), "a shut-down server forks no more");
    assert_eq!(talk.run("chat still here"), "Hello! This is a scripted reply. You said: chat still here");
    assert!(server.wait_exit(Some(Duration::from_millis(300))).is_none(), "the server exited under a conversation");
    assert_eq!(talk.end(), Some(Report::Exited(0)));
    let exit = server.wait_exit(Some(Duration::from_secs(10))).expect("the server exited after its last conversation");
    assert_eq!(exit.code, Some(0));
}
