//! One running prefork server: starting it under the supervisor, its
//! handshake, fork requests, and its end (docs/prefork.md).
//!
//! A watcher thread per server reads what the server says (its handshake
//! line on the channel, its log on stdout/stderr, its supervisor's control
//! socket) and reaps the supervisor; callers see the result through
//! [`PreforkServer::status`], the blocking waits, or an observer called on
//! that thread.

use std::collections::VecDeque;
use std::io::{ErrorKind, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
use nix::unistd::Pid;

use crate::conversation::Conversation;
use crate::protocol::{encode_fork_request, Ready, REQUEST_BYTES};
use crate::spec::ServerSpec;
use watcher::Watcher;

mod watcher;

/// How many lines of the server's log are kept (for start failures).
const LOG_LINES: usize = 40;
/// Longer log lines are cut to this many bytes.
const LOG_LINE_BYTES: usize = 2000;
/// The supervisor's control descriptor in the server's supervisor.
const CONTROL_FD: i32 = 3;

/// Why a server did not become ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartErrorKind {
    /// The supervisor could not be started.
    Spawn,
    /// The server refused the app, with its stable code (`threads`,
    /// `event-loop`, `import-failed`, `bad-app`).
    Refused(String),
    /// The server (or the interpreter invocation) exited without a handshake.
    ExitedBeforeReady,
    /// The first line on the channel was not a handshake.
    BadHandshake,
    /// `wait_ready` gave up.
    Timeout,
}

/// A server that did not become ready: what happened, and its log's tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub kind: StartErrorKind,
    pub message: String,
    pub log_tail: Vec<String>,
}

impl StartError {
    /// A stable code: the refusal's own, or `spawn-failed`,
    /// `exited-before-ready`, `bad-handshake`, `timeout`.
    pub fn code(&self) -> &str {
        match &self.kind {
            StartErrorKind::Spawn => "spawn-failed",
            StartErrorKind::Refused(code) => code,
            StartErrorKind::ExitedBeforeReady => "exited-before-ready",
            StartErrorKind::BadHandshake => "bad-handshake",
            StartErrorKind::Timeout => "timeout",
        }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "prefork server: {} ({})", self.message, self.code())
    }
}

impl std::error::Error for StartError {}

/// How the server ended (its supervisor's status: the server's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub log_tail: Vec<String>,
}

/// What the watcher thread tells an observer, in this order: `Ready` or
/// `Failed` once, `Gone` once, then `Exited` once.
#[derive(Debug, Clone)]
pub enum ServerEvent {
    Ready(Ready),
    Failed(StartError),
    /// The server closed its end of the channel: it has exited (its
    /// supervisor is ending what it forked, which `Exited` waits for).
    /// Conversations still running then are ending with it.
    Gone,
    Exited(ServerExit),
}

/// Where a server is.
#[derive(Debug, Clone)]
pub enum ServerStatus {
    Starting,
    Ready(Ready),
    Failed(StartError),
}

/// Why a fork request was not sent.
#[derive(Debug)]
pub enum ForkError {
    /// The server has not answered its handshake yet.
    NotReady,
    /// The server did not start, was shut down, or has exited.
    Unavailable(String),
    /// Making the conversation's sockets, or writing the request, failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ForkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForkError::NotReady => write!(f, "the prefork server is not ready yet"),
            ForkError::Unavailable(why) => write!(f, "the prefork server is unavailable: {why}"),
            ForkError::Io(error) => write!(f, "the fork request failed: {error}"),
        }
    }
}

impl std::error::Error for ForkError {}

impl From<std::io::Error> for ForkError {
    fn from(error: std::io::Error) -> Self {
        ForkError::Io(error)
    }
}

/// The descriptors of one conversation, as its backend gets them.
pub struct ForkRequest<'a> {
    pub stdin: BorrowedFd<'a>,
    pub stdout: BorrowedFd<'a>,
    pub stderr: BorrowedFd<'a>,
    /// The conversation's control socket (the adopting supervisor's fd 3).
    pub control: BorrowedFd<'a>,
    /// After SIGTERM, how long the conversation's processes get before SIGKILL.
    pub term_grace: Duration,
}

/// Called on the watcher thread with every [`ServerEvent`].
pub type Observer = Box<dyn Fn(&ServerEvent) + Send + Sync>;

struct State {
    status: ServerStatus,
    exit: Option<ServerExit>,
    /// The supervisor's control socket ended: it is exiting or gone, and
    /// is never signalled again (its pid may be reaped and reused).
    gone: bool,
    log: VecDeque<String>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    observer: Option<Observer>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn log_tail(&self) -> Vec<String> {
        self.lock().log.iter().cloned().collect()
    }

    fn publish(&self, event: ServerEvent) {
        self.changed.notify_all();
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }
}

/// A running prefork server (a cheap handle: clones share it).
///
/// Dropping every handle closes the request channel: the server accepts
/// nothing more and exits once its conversations have ended (as
/// [`shutdown`](Self::shutdown)). The host's death ends it and every
/// conversation it forked: its supervisor sees the host's end of the
/// control socket close.
#[derive(Clone)]
pub struct PreforkServer {
    inner: Arc<Inner>,
}

struct Inner {
    /// The host's end of the request channel; `None` once shut down.
    channel: Mutex<Option<UnixStream>>,
    shared: Arc<Shared>,
    supervisor: Pid,
    next_id: AtomicU64,
}

impl PreforkServer {
    /// Starts the server for `spec` under its supervisor (whose grace is
    /// `term_grace`); returns at once, the handshake comes later. The
    /// observer is called on the watcher thread.
    pub fn start(
        spec: &ServerSpec,
        term_grace: Duration,
        observer: Option<Observer>,
    ) -> std::io::Result<PreforkServer> {
        let (channel, server_channel) = UnixStream::pair()?;
        let (log, log_writer) = std::io::pipe()?;
        let (control, supervisor_control) = UnixStream::pair()?;
        // Above the standard descriptors, so that placing it on fd 3 in the
        // child cannot collide with them.
        let raw = fcntl(&supervisor_control, FcntlArg::F_DUPFD_CLOEXEC(10))?;
        // SAFETY: F_DUPFD_CLOEXEC has just made `raw`, and nothing else owns it.
        let supervisor_control = unsafe { OwnedFd::from_raw_fd(raw) };
        let raw_control = supervisor_control.as_raw_fd();

        let (program, args) = spec.command_line(term_grace);
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::from(OwnedFd::from(server_channel)))
            .stdout(Stdio::from(log_writer.try_clone()?))
            .stderr(Stdio::from(log_writer));
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        if let Some(env) = &spec.env {
            command.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        }
        // SAFETY: between fork and exec only async-signal-safe calls run:
        // dup2 (which clears FD_CLOEXEC on the copy) and setsid. `raw_control`
        // stays open in the parent until spawn returns.
        unsafe {
            command.pre_exec(move || {
                if nix::libc::dup2(raw_control, CONTROL_FD) < 0 || nix::libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        drop(supervisor_control);
        drop(command);

        let supervisor = Pid::from_raw(child.id() as i32);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                status: ServerStatus::Starting,
                exit: None,
                gone: false,
                log: VecDeque::new(),
            }),
            changed: Condvar::new(),
            observer,
        });
        let watcher = Watcher {
            shared: shared.clone(),
            channel: channel.try_clone()?,
            log,
            control,
            child,
        };
        std::thread::Builder::new()
            .name("prefork-server".into())
            .spawn(move || watcher.run())?;
        Ok(PreforkServer {
            inner: Arc::new(Inner {
                channel: Mutex::new(Some(channel)),
                shared,
                supervisor,
                next_id: AtomicU64::new(1),
            }),
        })
    }

    pub fn status(&self) -> ServerStatus {
        self.inner.shared.lock().status.clone()
    }

    /// How the server ended, once it has.
    pub fn exit(&self) -> Option<ServerExit> {
        self.inner.shared.lock().exit.clone()
    }

    /// The supervisor's pid (the server's parent).
    pub fn supervisor_pid(&self) -> u32 {
        self.inner.supervisor.as_raw() as u32
    }

    /// Waits for the handshake (`None`: for ever).
    pub fn wait_ready(&self, timeout: Option<Duration>) -> Result<Ready, StartError> {
        let shared = &self.inner.shared;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut state = shared.lock();
        loop {
            match &state.status {
                ServerStatus::Ready(ready) => return Ok(ready.clone()),
                ServerStatus::Failed(error) => return Err(error.clone()),
                ServerStatus::Starting => {}
            }
            state = match deadline {
                None => shared.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(StartError {
                            kind: StartErrorKind::Timeout,
                            message: format!("no handshake within {timeout:?}"),
                            log_tail: state.log.iter().cloned().collect(),
                        });
                    }
                    shared.changed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }

    /// Waits for the server's end (`None`: for ever); `None` if it has not ended.
    pub fn wait_exit(&self, timeout: Option<Duration>) -> Option<ServerExit> {
        let shared = &self.inner.shared;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut state = shared.lock();
        loop {
            if let Some(exit) = &state.exit {
                return Some(exit.clone());
            }
            state = match deadline {
                None => shared.changed.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return None;
                    }
                    shared.changed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }

    /// Sends one fork request with the conversation's descriptors. The
    /// caller closes its copies of the child's ends afterwards; how the
    /// conversation goes comes on its control socket (a fork the server
    /// could not make too, as `failed …`).
    pub fn fork(&self, request: &ForkRequest<'_>) -> Result<(), ForkError> {
        {
            let state = self.inner.shared.lock();
            if state.exit.is_some() || state.gone {
                return Err(ForkError::Unavailable("it has exited".into()));
            }
            match &state.status {
                ServerStatus::Starting => return Err(ForkError::NotReady),
                ServerStatus::Failed(error) => return Err(ForkError::Unavailable(error.to_string())),
                ServerStatus::Ready(_) => {}
            }
        }
        let channel = self.inner.channel.lock().unwrap_or_else(|e| e.into_inner());
        let Some(channel) = channel.as_ref() else {
            return Err(ForkError::Unavailable("it was shut down".into()));
        };
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let millis = u64::try_from(request.term_grace.as_millis()).unwrap_or(u64::MAX);
        let bytes = encode_fork_request(id, millis);
        let fds = [
            request.stdin.as_raw_fd(),
            request.stdout.as_raw_fd(),
            request.stderr.as_raw_fd(),
            request.control.as_raw_fd(),
        ];
        send_request(channel, &bytes, &fds).map_err(|error| match error.raw_os_error() {
            Some(code) if code == Errno::EPIPE as i32 || code == Errno::ECONNRESET as i32 => {
                ForkError::Unavailable(format!("it closed its channel ({error})"))
            }
            _ => ForkError::Io(error),
        })
    }

    /// Starts a conversation with sockets and pipes of its own (for hosts
    /// that read the backend's output themselves: a Rust host).
    pub fn start_conversation(&self, term_grace: Duration) -> Result<Conversation, ForkError> {
        let (stdout, stdout_writer) = std::io::pipe()?;
        let (stderr, stderr_writer) = std::io::pipe()?;
        let (stdin, control) = self.fork_with_outputs(stdout_writer.as_fd(), stderr_writer.as_fd(), term_grace)?;
        Ok(Conversation::new(stdin, stdout, stderr, control))
    }

    /// Starts a conversation whose stdout and stderr are the given write
    /// ends (the caller closes them after this returns); returns the
    /// host's ends of its stdin and of its control socket.
    pub fn fork_with_outputs(
        &self,
        stdout: BorrowedFd<'_>,
        stderr: BorrowedFd<'_>,
        term_grace: Duration,
    ) -> Result<(UnixStream, UnixStream), ForkError> {
        let (stdin, backend_stdin) = UnixStream::pair()?;
        let (control, backend_control) = UnixStream::pair()?;
        self.fork(&ForkRequest {
            stdin: backend_stdin.as_fd(),
            stdout,
            stderr,
            control: backend_control.as_fd(),
            term_grace,
        })?;
        Ok((stdin, control))
    }

    /// Accepts no more fork requests: the server exits once every
    /// conversation it forked has ended.
    pub fn shutdown(&self) {
        let channel = self.inner.channel.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(channel) = channel {
            let _ = channel.shutdown(std::net::Shutdown::Write);
        }
    }

    /// Ends the server and every conversation it forked, now (SIGUSR2 to its
    /// supervisor: SIGKILL to the whole tree). `false` if it was gone.
    pub fn kill(&self) -> bool {
        let state = self.inner.shared.lock();
        if state.gone {
            return false;
        }
        // The supervisor cannot have been reaped while `gone` is unset (the
        // watcher sets it before it waits), so the pid is still its own.
        kill(self.inner.supervisor, Signal::SIGUSR2).is_ok()
    }
}

/// One `sendmsg` carrying the request and its descriptors, the rest of
/// the bytes (if the kernel took fewer) without them.
fn send_request(channel: &UnixStream, bytes: &[u8; REQUEST_BYTES], fds: &[i32]) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = MsgFlags::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = MsgFlags::empty();
    let sent = loop {
        let rights = [ControlMessage::ScmRights(fds)];
        match sendmsg::<UnixAddr>(channel.as_raw_fd(), &[IoSlice::new(bytes)], &rights, flags, None) {
            Ok(sent) => break sent,
            Err(Errno::EINTR) => continue,
            Err(errno) => return Err(errno.into()),
        }
    };
    let mut rest = &bytes[sent..];
    while !rest.is_empty() {
        match (&*channel).write_some(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

trait WriteSome {
    fn write_some(&mut self, bytes: &[u8]) -> std::io::Result<usize>;
}

impl WriteSome for &UnixStream {
    fn write_some(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        std::io::Write::write(self, bytes)
    }
}
