//! A small host of the real backend with a host channel, on this crate's
//! core: what a host's wiring does, in threads. Shared by the tests
//! (`tests/backend.rs`) and the example (`examples/host_tools.rs`).
//!
//! The backend is `python -m agentlane_process_bridge --app <app>` with its
//! stdio on pipes and the channel's end on an extra inherited descriptor,
//! named in `AGENTLANE_HOST_CHANNEL_FD`. A reader thread frames the channel
//! and feeds the core's [`Channel`], writing its replies and handing its
//! requests, aborts and diagnostics to the test ([`Backend::next_seen`]); a
//! timer thread calls [`Channel::expire`] at each deadline; stdout and
//! stderr have a thread each.
#![allow(dead_code)] // each test binary uses its part

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bridge_core::command::{encode_command, Command as BridgeCommand};
use bridge_host_channel::protocol::FD_ENV;
use bridge_host_channel::{
    AbortReason, Answer, AnswerRefused, CallId, Channel, ChannelError, ChannelOptions, Output,
    Request,
};
use serde_json::Value;

/// Generous: other suites share the two cores.
pub const WAIT: Duration = Duration::from_secs(60);

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// What the channel handed the test.
#[derive(Debug)]
pub enum Seen {
    Request(CallId, Request),
    Abort(CallId, AbortReason),
    Diagnostic(ChannelError),
    /// The channel reached its end.
    Lost,
}

struct Shared {
    channel: Channel,
    writer: Option<UnixStream>,
    stopped: bool,
}

type State = Arc<(Mutex<Shared>, Condvar)>;

/// How to start the backend.
pub struct Launch {
    /// The Python of a virtualenv with agentlane (and the module, unless
    /// `module_source` is set).
    pub python: PathBuf,
    /// A folder put on `PYTHONPATH` that holds `agentlane_host_channel`
    /// (the repository's `python/src`), or none when it is installed.
    pub module_source: Option<PathBuf>,
    /// `module:factory`.
    pub app: String,
    pub env: Vec<(String, String)>,
    /// Whether the backend gets a channel at all.
    pub with_channel: bool,
}

impl Launch {
    /// The host-tools test backend on the repository's `.venv` and sources.
    pub fn host_tools_app() -> Self {
        let python = repo().join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/setup-python.sh",
            python.display()
        );
        Launch {
            python,
            module_source: Some(repo().join("python/src")),
            app: "host_tools_app:create_backend".into(),
            env: Vec::new(),
            with_channel: true,
        }
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// A running backend and the host's end of its channel.
pub struct Backend {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Value>,
    seen: Receiver<Seen>,
    state: State,
    stderr: Arc<Mutex<String>>,
    /// The `ready` event.
    pub ready: Value,
}

impl Backend {
    /// Starts the backend and waits for its `ready`.
    pub fn start(launch: Launch, options: ChannelOptions) -> Backend {
        let mut backend = Self::spawn(launch, options);
        backend.wait_ready();
        backend
    }

    /// Waits for `ready` (after answering what the factory asks, if anything).
    pub fn wait_ready(&mut self) {
        let ready = self.next_event();
        assert_eq!(ready["type"], "ready", "{ready}\n{}", self.stderr());
        self.ready = ready;
    }

    /// Starts the backend; its `ready` is still to come.
    pub fn spawn(launch: Launch, options: ChannelOptions) -> Backend {
        let channel = Channel::new(options).expect("the tools are valid");
        let (host_end, backend_end) = UnixStream::pair().unwrap();
        let mut command = Command::new(&launch.python);
        command
            .args(["-m", "agentlane_process_bridge", "--app", &launch.app])
            .current_dir(repo().join("tests/e2e/backends"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(source) = &launch.module_source {
            command.env("PYTHONPATH", source);
        }
        command.envs(launch.env.iter().map(|(k, v)| (k, v)));
        if launch.with_channel {
            let fd = backend_end.as_raw_fd();
            command.env(FD_ENV, fd.to_string());
            // SAFETY: runs in the forked child before exec and only calls
            // fcntl, which is async-signal-safe; `fd` is open in the child
            // (the fork copied the parent's table) and nothing else uses it.
            unsafe {
                command.pre_exec(move || {
                    // The socket pair is close-on-exec; the backend's end is inherited.
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", launch.python.display()));
        drop(backend_end);

        let stderr = Arc::new(Mutex::new(String::new()));
        let mut child_stderr = child.stderr.take().unwrap();
        let collected = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut buffer = [0u8; 65536];
            while let Ok(n) = child_stderr.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                collected
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });

        let (event_sender, events) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        thread::spawn(move || read_events(stdout, event_sender));

        let state: State = Arc::new((
            Mutex::new(Shared {
                channel,
                writer: Some(host_end.try_clone().unwrap()),
                stopped: false,
            }),
            Condvar::new(),
        ));
        let (seen_sender, seen) = mpsc::channel();
        {
            let state = Arc::clone(&state);
            let seen_sender = seen_sender.clone();
            thread::spawn(move || read_channel(host_end, state, seen_sender));
        }
        {
            let state = Arc::clone(&state);
            thread::spawn(move || keep_deadlines(state, seen_sender));
        }
        let mut backend = Backend {
            child,
            stdin: None,
            events,
            seen,
            state,
            stderr,
            ready: Value::Null,
        };
        backend.stdin = backend.child.stdin.take();
        backend
    }

    /// What the channel state says right now (under its lock).
    pub fn with_channel<T>(&self, look: impl FnOnce(&Channel) -> T) -> T {
        look(&self.state.0.lock().unwrap().channel)
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn send(&mut self, command: BridgeCommand) {
        let frame = encode_command(&command).unwrap();
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(frame.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Starts a run: sends the prompt and takes its `run_start`. A prompt
    /// sent right after a run ended may meet the backend's late run slot
    /// (tests/e2e/NOTES.md, section 6, item 3): it is sent again.
    pub fn prompt(&mut self, text: &str) {
        for _ in 0..50 {
            self.send(BridgeCommand::Prompt { text: text.into() });
            let answer = self.next_event();
            if answer["type"] == "run_start" {
                return;
            }
            assert_eq!(answer["message"], "A run is already active.", "{answer}");
            thread::sleep(Duration::from_millis(10));
        }
        panic!("the backend kept refusing the prompt");
    }

    /// The next stdout event.
    pub fn next_event(&self) -> Value {
        match self.events.recv_timeout(WAIT) {
            Ok(event) => event,
            Err(error) => panic!("no event ({error:?}); stderr:\n{}", self.stderr()),
        }
    }

    /// Events up to and including the run's terminal one.
    pub fn until_terminal(&self) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let event = self.next_event();
            let terminal = matches!(
                event["type"].as_str(),
                Some("run_complete" | "run_cancelled")
            ) || (event["type"] == "error" && event["scope"] == "run");
            events.push(event);
            if terminal {
                return events;
            }
        }
    }

    /// The next thing the channel handed over.
    pub fn next_seen(&self) -> Seen {
        match self.seen.recv_timeout(WAIT) {
            Ok(seen) => seen,
            Err(error) => panic!(
                "nothing from the channel ({error:?}); stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// Whether the channel hands over anything within `wait`.
    pub fn seen_within(&self, wait: Duration) -> Option<Seen> {
        match self.seen.recv_timeout(wait) {
            Ok(seen) => Some(seen),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next request, skipping nothing else: anything but a request fails.
    pub fn next_request(&self) -> (CallId, Request) {
        match self.next_seen() {
            Seen::Request(call, request) => (call, request),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    /// Answers a request as the application.
    pub fn answer(&self, call: CallId, answer: Answer) -> Result<(), AnswerRefused> {
        let (lock, _) = &*self.state;
        let mut shared = lock.lock().unwrap();
        let outputs = shared.channel.answer(call, answer)?;
        write_outputs(&mut shared, outputs, None);
        Ok(())
    }

    /// Writes raw bytes on the channel, as a hostile host would.
    pub fn write_raw(&self, bytes: &[u8]) {
        let (lock, _) = &*self.state;
        let mut shared = lock.lock().unwrap();
        shared
            .writer
            .as_mut()
            .expect("channel open")
            .write_all(bytes)
            .unwrap();
    }

    /// Closes the host's end of the channel (the host lost it).
    pub fn drop_channel(&self) {
        let (lock, _) = &*self.state;
        if let Some(writer) = lock.lock().unwrap().writer.take() {
            writer.shutdown(std::net::Shutdown::Both).ok();
        }
    }

    /// The backend's exit status, once it exits by itself.
    pub fn child_status(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the backend did not exit");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether stdout ended without another event.
    pub fn events_ended(&self) -> bool {
        matches!(
            self.events.recv_timeout(WAIT),
            Err(RecvTimeoutError::Disconnected)
        )
    }

    /// Shuts the backend down; its exit status.
    pub fn shutdown(mut self) -> ExitStatus {
        self.send(BridgeCommand::Shutdown);
        self.stdin = None;
        self.child_status()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let (lock, condvar) = &*self.state;
        lock.lock().unwrap().stopped = true;
        condvar.notify_all();
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn read_events(stdout: impl Read, events: Sender<Value>) {
    let mut reader = BufReader::with_capacity(1 << 20, stdout);
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        let text = line.trim_end_matches('\n');
        // The stdout contract is untouched by the channel: every line valid.
        if let Err(error) = bridge_core::validate_event_line(text) {
            panic!(
                "invalid event line: {error}: {}",
                &text[..text.len().min(300)]
            );
        }
        if events.send(serde_json::from_str(text).unwrap()).is_err() {
            return;
        }
        line.clear();
    }
}

fn read_channel(mut stream: UnixStream, state: State, seen: Sender<Seen>) {
    let mut framer = state.0.lock().unwrap().channel.framer();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = stream.read(&mut buffer).unwrap_or(0);
        let mut frames = Vec::new();
        if n == 0 {
            frames.extend(framer.finish());
        } else {
            framer.push(&buffer[..n], |frame| frames.push(frame));
        }
        let (lock, condvar) = &*state;
        let mut shared = lock.lock().unwrap();
        for frame in frames {
            let outputs = shared.channel.on_frame(frame, Instant::now());
            write_outputs(&mut shared, outputs, Some(&seen));
        }
        if n == 0 {
            let outputs = shared.channel.on_lost();
            write_outputs(&mut shared, outputs, Some(&seen));
            seen.send(Seen::Lost).ok();
            return;
        }
        condvar.notify_all();
    }
}

fn keep_deadlines(state: State, seen: Sender<Seen>) {
    let (lock, condvar) = &*state;
    let mut shared = lock.lock().unwrap();
    while !shared.stopped {
        let now = Instant::now();
        let outputs = shared.channel.expire(now);
        write_outputs(&mut shared, outputs, Some(&seen));
        let wait = shared
            .channel
            .next_deadline()
            .map_or(Duration::from_secs(3600), |deadline| {
                deadline.saturating_duration_since(now)
            });
        shared = condvar.wait_timeout(shared, wait).unwrap().0;
    }
}

/// Writes what the channel sends; hands the rest to the test (or drops it
/// when no one listens, for answers given by the test itself).
fn write_outputs(shared: &mut Shared, outputs: Vec<Output>, seen: Option<&Sender<Seen>>) {
    for output in outputs {
        let handed = match output {
            Output::Send(line) => {
                if let Some(writer) = shared.writer.as_mut() {
                    // A backend that is gone: its end is closed; nothing to do.
                    writer.write_all(line.as_bytes()).ok();
                }
                continue;
            }
            Output::Request { call, request } => Seen::Request(call, request),
            Output::Abort { call, reason } => Seen::Abort(call, reason),
            Output::Diagnostic(error) => Seen::Diagnostic(error),
        };
        if let Some(seen) = seen {
            seen.send(handed).ok();
        }
    }
}
