//! One running prefork server: starting it under the supervisor (or
//! connecting to a shared one), its handshake, fork requests, and its end
//! (docs/prefork.md).
//!
//! A watcher thread per server reads what the server says (its handshake
//! line on the channel, its log on stdout/stderr, its supervisor's control
//! socket) and reaps the supervisor; callers see the result through
//! [`PreforkServer::status`], the blocking waits, or an observer called on
//! that thread. Nothing a caller calls waits for the server but the waits
//! that say so.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::conversation::Conversation;
use crate::protocol::{encode_fork_request, Ready};
use crate::spec::ServerSpec;
use channel::RequestChannel;
pub use errors::{ForkError, ServerExit, StartError, StartErrorKind};
use watcher::Watcher;

mod channel;
mod errors;
mod watcher;

/// How many lines of the server's log are kept (for start failures).
const LOG_LINES: usize = 40;
/// Longer log lines are cut to this many bytes.
const LOG_LINE_BYTES: usize = 2000;

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

/// The descriptors of one conversation, as its backend gets them.
pub struct ForkRequest<'a> {
    pub stdin: BorrowedFd<'a>,
    pub stdout: BorrowedFd<'a>,
    pub stderr: BorrowedFd<'a>,
    /// The conversation's control socket (the adopting supervisor's fd 3).
    pub control: BorrowedFd<'a>,
    /// The backend's end of the host channel, when the start declares it
    /// (placed at `bridge_launch::channels::HOST` in the backend, its number
    /// in `AGENTLANE_HOST_CHANNEL_FD`).
    pub host: Option<BorrowedFd<'a>>,
    /// After SIGTERM, how long the conversation's processes get before SIGKILL.
    pub term_grace: Duration,
}

impl ForkRequest<'_> {
    /// The descriptors in the order the server takes them: the layout's
    /// (docs/prefork.md §3), the host channel last when declared.
    fn descriptors(&self) -> Vec<i32> {
        let mut fds: Vec<i32> = [self.stdin, self.stdout, self.stderr, self.control].map(|fd| fd.as_raw_fd()).to_vec();
        fds.extend(self.host.map(|fd| fd.as_raw_fd()));
        debug_assert_eq!(fds.len(), bridge_launch::channels::fork_descriptors(self.host.is_some()));
        fds
    }
}

/// The host's ends of a forked conversation's sockets.
pub struct HostEnds {
    pub stdin: UnixStream,
    pub control: UnixStream,
    /// The host channel's host end, when the start declared it.
    pub host_channel: Option<UnixStream>,
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
    /// The log's lines up to the handshake: what the import wrote.
    import_output: Vec<String>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    observer: Option<Observer>,
}

impl Shared {
    fn new(observer: Option<Observer>) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                status: ServerStatus::Starting,
                exit: None,
                gone: false,
                log: VecDeque::new(),
                import_output: Vec::new(),
            }),
            changed: Condvar::new(),
            observer,
        })
    }

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
    channel: Mutex<Option<RequestChannel>>,
    shared: Arc<Shared>,
    /// The server's supervisor; `None` for a connection to a shared server
    /// (another host's, which only that host ends).
    supervisor: Option<Pid>,
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
        // The launch layer places the control socket at its number (and
        // nothing else beyond stdio), at any descriptor limit.
        let mut placement = bridge_launch::place::Placement::new();
        placement.put(bridge_launch::channels::CONTROL, supervisor_control.as_raw_fd());
        placement.install(&mut command);
        // SAFETY: between fork and exec only setsid runs (async-signal-safe).
        unsafe {
            command.pre_exec(|| {
                if nix::libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        drop(supervisor_control);
        drop(command);

        let supervisor = Pid::from_raw(child.id() as i32);
        let shared = Shared::new(observer);
        let watcher = Watcher {
            shared: shared.clone(),
            channel: channel.try_clone()?,
            log: Some(log),
            control: Some(control),
            child: Some(child),
        };
        PreforkServer::watched(watcher, channel, Some(supervisor))
    }

    /// Connects to a shared server (one started with [`ServerSpec::listen`]
    /// by this or another host): its handshake comes on the connection as
    /// from a server this host started, and fork requests go the same way.
    /// The server is not this host's to end: [`kill`](Self::kill) only
    /// closes the connection, and its log is not seen here. Fails at once
    /// when nothing listens there (or its queue of connections is full).
    pub fn connect(path: &Path, observer: Option<Observer>) -> std::io::Result<PreforkServer> {
        use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
        // Non-blocking, so that a stopped server's full queue refuses the
        // connection instead of holding the caller.
        let socket = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK, None)?;
        connect(socket.as_raw_fd(), &UnixAddr::new(path)?)?;
        let channel = UnixStream::from(socket);
        let watcher = Watcher {
            shared: Shared::new(observer),
            channel: channel.try_clone()?,
            log: None,
            control: None,
            child: None,
        };
        PreforkServer::watched(watcher, channel, None)
    }

    fn watched(watcher: Watcher, channel: UnixStream, supervisor: Option<Pid>) -> std::io::Result<PreforkServer> {
        let shared = watcher.shared.clone();
        let channel = RequestChannel::new(channel)?;
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

    /// The supervisor's pid (the server's parent); `None` for a connection
    /// to a shared server.
    pub fn supervisor_pid(&self) -> Option<u32> {
        self.inner.supervisor.map(|pid| pid.as_raw() as u32)
    }

    /// The server's log's last lines (at most 40, each cut to 2000 bytes).
    pub fn log_tail(&self) -> Vec<String> {
        self.inner.shared.log_tail()
    }

    /// What the app's import wrote on stdout and stderr (the log's lines
    /// before the handshake; its last 40): a cold backend writes it on its
    /// own stderr, so a host gives it to each warm conversation. Empty
    /// before the handshake, and for a connection to a shared server.
    pub fn import_output(&self) -> Vec<String> {
        self.inner.shared.lock().import_output.clone()
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

    /// Sends one fork request with the conversation's descriptors, never
    /// waiting for the server: a server that is not reading its requests
    /// refuses it at once ([`ForkError::Busy`]). The caller closes its
    /// copies of the child's ends afterwards; how the conversation goes
    /// comes on its control socket (a fork the server could not make too,
    /// as `failed …`; a request the server never serves, as nothing: the
    /// caller bounds that wait).
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
        let mut channel = self.inner.channel.lock().unwrap_or_else(|e| e.into_inner());
        let Some(channel) = channel.as_mut() else {
            return Err(ForkError::Unavailable("it was shut down".into()));
        };
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let millis = u64::try_from(request.term_grace.as_millis()).unwrap_or(u64::MAX);
        let fds = request.descriptors();
        channel.send(&encode_fork_request(id, millis, fds.len()), &fds)
    }

    /// Starts a conversation with sockets and pipes of its own (for hosts
    /// that read the backend's output themselves: a Rust host), with a
    /// host channel when `host_channel` declares it.
    pub fn start_conversation(&self, term_grace: Duration, host_channel: bool) -> Result<Conversation, ForkError> {
        let (stdout, stdout_writer) = std::io::pipe()?;
        let (stderr, stderr_writer) = std::io::pipe()?;
        let ends = self.fork_with_outputs(stdout_writer.as_fd(), stderr_writer.as_fd(), term_grace, host_channel)?;
        Ok(Conversation::new(ends, stdout, stderr))
    }

    /// Starts a conversation whose stdout and stderr are the given write
    /// ends (the caller closes them after this returns); returns the
    /// host's ends of its stdin, its control socket and (declared) its
    /// host channel.
    pub fn fork_with_outputs(
        &self,
        stdout: BorrowedFd<'_>,
        stderr: BorrowedFd<'_>,
        term_grace: Duration,
        host_channel: bool,
    ) -> Result<HostEnds, ForkError> {
        let (stdin, backend_stdin) = UnixStream::pair()?;
        let (control, backend_control) = UnixStream::pair()?;
        let host = host_channel.then(UnixStream::pair).transpose()?;
        self.fork(&ForkRequest {
            stdin: backend_stdin.as_fd(),
            stdout,
            stderr,
            control: backend_control.as_fd(),
            host: host.as_ref().map(|(_, backend)| backend.as_fd()),
            term_grace,
        })?;
        Ok(HostEnds {
            stdin,
            control,
            host_channel: host.map(|(host, _)| host),
        })
    }

    /// Accepts no more fork requests: the server exits once every
    /// conversation it forked has ended (a process the app started at
    /// import is not waited for: the server's supervisor ends it). For a
    /// connection to a shared server: closes the connection.
    pub fn shutdown(&self) {
        let channel = self.inner.channel.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(channel) = channel {
            channel.shutdown();
        }
    }

    /// Ends the server and every conversation it forked, now (SIGUSR2 to its
    /// supervisor: SIGKILL to the whole tree). `false` if it was gone, and
    /// for a connection to a shared server (which is only shut down).
    pub fn kill(&self) -> bool {
        let Some(supervisor) = self.inner.supervisor else {
            self.shutdown();
            return false;
        };
        let state = self.inner.shared.lock();
        if state.gone {
            return false;
        }
        // The supervisor cannot have been reaped while `gone` is unset (the
        // watcher sets it before it waits), so the pid is still its own.
        kill(supervisor, Signal::SIGUSR2).is_ok()
    }
}
