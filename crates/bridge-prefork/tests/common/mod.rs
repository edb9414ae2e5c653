//! What the prefork server's test files share: the real backend
//! (`agentlane` 0.22.0 in the repository's `.venv`, made by
//! `scripts/setup-python.sh`), the real supervisor, a conversation read
//! line by line, and whether a process still runs.
#![allow(dead_code)] // each test file uses its part

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bridge_prefork::{Conversation, PreforkServer, Report, ServerSpec};
use serde_json::Value;

pub const GRACE: Duration = Duration::from_millis(300);
/// Generous: other suites run on the same two cores.
pub const READY: Duration = Duration::from_secs(60);

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

pub fn python() -> PathBuf {
    let python = repo().join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/setup-python.sh", python.display());
    python
}

/// The workspace's supervisor (`PROCESS_BRIDGE_SUPERVISOR` overrides), built if missing.
pub fn supervisor() -> PathBuf {
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

pub fn spec(app: &str) -> ServerSpec {
    let args = ["-m", "agentlane_process_bridge", "--app", app].map(String::from);
    let mut spec = ServerSpec::for_command(python(), &args, supervisor()).unwrap();
    spec.cwd = Some(repo().join("tests/e2e/backends"));
    spec
}

pub fn started(app: &str) -> PreforkServer {
    let server = PreforkServer::start(&spec(app), GRACE, None).unwrap();
    server.wait_ready(Some(READY)).unwrap_or_else(|e| panic!("{e}: {:?}", e.log_tail));
    server
}

/// A shared server (docs/prefork.md §7) of `app`, ready, listening in a
/// folder of its own named after `name`: the server, its handshake, the
/// socket's path and the folder (the caller removes it).
pub fn shared_server(app: &str, name: &str) -> (PreforkServer, bridge_prefork::Ready, PathBuf, PathBuf) {
    let directory = std::env::temp_dir().join(format!("prefork-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("server.sock");
    let mut shared = spec(app);
    shared.listen = Some(path.clone());
    let owner = PreforkServer::start(&shared, GRACE, None).unwrap();
    let ready = owner.wait_ready(Some(READY)).unwrap();
    (owner, ready, path, directory)
}

/// The children of `pid` (its main thread's: the server is single-threaded).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

pub fn gone_within(pid: u32, within: Duration) -> bool {
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
pub struct Talk {
    pub conversation: Conversation,
    pub stdout: BufReader<std::io::PipeReader>,
    pub pid: u32,
    pub supervisor: u32,
}

impl Talk {
    pub fn start(server: &PreforkServer) -> Talk {
        let mut conversation = open(server);
        let stdout = BufReader::new(conversation.stdout.try_clone().unwrap());
        let Some(Report::Started { pid, supervisor: Some(supervisor) }) = conversation.control.next_report().unwrap() else {
            panic!("no started line");
        };
        Talk { conversation, stdout, pid, supervisor }
    }

    pub fn event(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "stdout ended");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    pub fn ready(&mut self) -> Value {
        let ready = self.event();
        assert_eq!(ready["type"], "ready", "{ready}");
        ready
    }

    pub fn send(&mut self, command: &str) {
        writeln!(self.conversation.stdin, "{command}").unwrap();
    }

    /// Prompts and returns the run's final output. A prompt right after a
    /// run's end can meet the §12 race ("A run is already active."): it is
    /// sent again, as the session does.
    pub fn run(&mut self, text: &str) -> String {
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
    pub fn end(mut self) -> Option<Report> {
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
pub fn open(server: &PreforkServer) -> Conversation {
    let conversation = server.start_conversation(GRACE, false).unwrap();
    conversation.control.socket().set_read_timeout(Some(READY)).unwrap();
    conversation
}

pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}
