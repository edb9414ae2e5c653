//! The backend process: spawned in a process group of its own, its stdout
//! framed and validated by bridge-core's reader threads, its stdin written by
//! one writer thread in the order frames are queued, its exit reported once.
//!
//! No process may outlive the bridge: the whole group is signalled (so a
//! tool's own subprocesses go too), and on Linux a cold backend gets
//! SIGKILL from the kernel if the bridge dies without cleaning up. A warm
//! backend (forked by the prefork server, [`Backend::fork`]) is contained
//! by its own adopting supervisor, which ends its tree when the bridge's
//! end of its control socket closes, the bridge's death included.

use std::ffi::OsString;
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bridge_core::reader::{spawn_reader, Batch, BatchSink, ReaderOptions, StreamKind};
use bridge_prefork::{ForkError, PreforkServer, Report};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::mpsc;

/// How long a fork request waits before it is tried again on a full channel.
const BUSY_RETRY: Duration = Duration::from_millis(10);

/// What to run: `program args…` in `cwd`, under `supervisor` when there is
/// one (the Node package's containment: no descendant outlives the bridge,
/// even a `setsid` one, even when the bridge is SIGKILLed).
#[derive(Clone, Debug)]
pub struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    /// `process-bridge-supervisor`; `None`: a process group and the
    /// parent-death signal only (a descendant that leaves the group can
    /// outlive the bridge).
    pub supervisor: Option<PathBuf>,
    /// The supervisor's grace between SIGTERM and SIGKILL.
    pub term_grace: Duration,
}

/// How the backend ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "status {code}"),
            (None, Some(signal)) => write!(f, "signal {signal}"),
            (None, None) => f.write_str("an unknown status"),
        }
    }
}

/// Why a warm fork gave no backend.
#[derive(Debug)]
pub enum ForkFailure {
    /// The prefork server has gone (or is not there): a new one may serve.
    ServerGone(String),
    /// The server is there but this fork failed.
    Failed(String),
    /// No start report before the deadline (a server that does not fork).
    TimedOut,
}

impl std::fmt::Display for ForkFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForkFailure::ServerGone(why) | ForkFailure::Failed(why) => f.write_str(why),
            ForkFailure::TimedOut => f.write_str("the prefork server did not fork it in time"),
        }
    }
}

/// Everything the backend produces, in the order each stream produced it.
#[derive(Debug)]
pub enum Output {
    Stdout(Batch),
    Stderr(Batch),
    Exited(ExitStatus),
}

/// The running backend: its process group and the way to its stdin.
pub struct Backend {
    pid: u32,
    frames: std::sync::mpsc::Sender<String>,
    /// Under a supervisor (every warm backend, a cold one when the bridge
    /// has the supervisor): it ends what the backend leaves; the bridge does not.
    supervised: bool,
    /// The host's end of the host channel (docs/host-channel.md), when the
    /// start declared it: the backend has the other end at fd 4, named in
    /// `AGENTLANE_HOST_CHANNEL_FD`. Taken by whoever serves the channel
    /// (the bridge's host tools, issues 31/33: not wired yet).
    #[cfg_attr(not(test), allow(dead_code))]
    host_channel: Option<UnixStream>,
}

/// Sends reader batches into the bridge's event loop; blocking here is the
/// backpressure on the pipe (the loop never waits on a client).
struct Forward(mpsc::Sender<Output>, StreamKind);

impl BatchSink for Forward {
    fn deliver(&mut self, batch: Batch) -> bool {
        let output = match self.1 {
            StreamKind::Events => Output::Stdout(batch),
            StreamKind::Text => Output::Stderr(batch),
        };
        self.0.blocking_send(output).is_ok()
    }
}

impl Backend {
    /// Spawns the backend with three pipes (and its host channel when
    /// `host_channel` declares it), in a new process group. Call it from a
    /// thread that lives as long as the bridge (on Linux the kernel's
    /// parent-death signal follows the spawning thread).
    pub fn spawn(launch: &Launch, host_channel: bool) -> std::io::Result<(Backend, mpsc::Receiver<Output>)> {
        let host = host_channel.then(UnixStream::pair).transpose()?;
        let control = launch.supervisor.is_some().then(UnixStream::pair).transpose()?;
        let mut command = match &launch.supervisor {
            Some(supervisor) => {
                let mut command = Command::new(supervisor);
                command.arg("--term-grace-ms").arg(launch.term_grace.as_millis().to_string());
                if host.is_some() {
                    command.arg("--channel-fd").arg(bridge_launch::channels::HOST.fd.to_string());
                }
                command.arg("--").arg(&launch.program);
                command
            }
            None => Command::new(&launch.program),
        };
        // Exactly stdin, stdout, stderr and the declared channels.
        let mut placement = bridge_launch::place::Placement::new();
        if let Some((_, backend_end)) = &host {
            placement.put(bridge_launch::channels::HOST, backend_end.as_raw_fd());
            command.env(bridge_launch::HOST_CHANNEL_ENV, bridge_launch::channels::HOST.fd.to_string());
        }
        if let Some((_, supervisor_end)) = &control {
            placement.put(bridge_launch::channels::CONTROL, supervisor_end.as_raw_fd());
        }
        placement.install(&mut command);
        command
            .args(&launch.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cwd) = &launch.cwd {
            command.current_dir(cwd);
        }
        // Without a supervisor, the kernel ends the backend with the bridge.
        // A supervisor must not be SIGKILLed so: it ends the backend's whole
        // tree itself when its control socket closes (the bridge's death).
        #[cfg(target_os = "linux")]
        if control.is_none() {
            let bridge = nix::unistd::getpid();
            // SAFETY: the closure runs in the forked child before exec and
            // only makes two async-signal-safe system calls (prctl, getppid);
            // it allocates nothing and touches no lock.
            unsafe {
                command.pre_exec(move || {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                    // The bridge may have died between fork and prctl.
                    if nix::unistd::getppid() != bridge {
                        return Err(std::io::Error::other(
                            "agentlane-bridge exited during spawn",
                        ));
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn()?;
        // The backend has its end now: the channel's end of file is its.
        let host_channel = host.map(|(host, _)| host);
        let control = control.map(|(host, _)| host);
        let pid = match &control {
            Some(control) => match started(control) {
                Ok(pid) => pid,
                Err(error) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(error);
                }
            },
            None => child.id(),
        };
        let (sender, receiver) = mpsc::channel(4);
        spawn_reader(
            child.stdout.take().expect("piped stdout"),
            ReaderOptions::new(StreamKind::Events),
            Forward(sender.clone(), StreamKind::Events),
        )?;
        spawn_reader(
            child.stderr.take().expect("piped stderr"),
            ReaderOptions::new(StreamKind::Text),
            Forward(sender.clone(), StreamKind::Text),
        )?;
        let frames = spawn_writer(child.stdin.take().expect("piped stdin"))?;
        let supervised = control.is_some();
        spawn_waiter(child, control, sender)?;
        Ok((
            Backend {
                pid,
                frames,
                supervised,
                host_channel,
            },
            receiver,
        ))
    }

    /// Forks a backend from the prefork server: blocks until its supervisor
    /// reports it started (or failed), at most until `deadline` (a stopped
    /// server answers nothing). Its exit comes from the control socket,
    /// which the bridge holds until then; a fork given up on has its
    /// control socket closed, so that its supervisor ends it should the
    /// server fork it later.
    pub fn fork(
        server: &PreforkServer,
        term_grace: Duration,
        deadline: Instant,
        host_channel: bool,
    ) -> Result<(Backend, mpsc::Receiver<Output>), ForkFailure> {
        // A full request channel (`Busy`: the server is slow, or stopped) is
        // tried again until the deadline; the request itself never blocks.
        let mut conversation = loop {
            match server.start_conversation(term_grace, host_channel) {
                Ok(conversation) => break conversation,
                Err(ForkError::Busy) if Instant::now() < deadline => std::thread::sleep(BUSY_RETRY),
                Err(ForkError::Busy) => return Err(ForkFailure::TimedOut),
                Err(error @ (ForkError::Unavailable(_) | ForkError::NotReady)) => {
                    return Err(ForkFailure::ServerGone(error.to_string()))
                }
                Err(error @ ForkError::Io(_)) => return Err(ForkFailure::Failed(error.to_string())),
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ForkFailure::TimedOut);
        }
        let failed = |error: std::io::Error| ForkFailure::Failed(format!("its control socket: {error}"));
        conversation.control.socket().set_read_timeout(Some(left)).map_err(failed)?;
        let pid = match conversation.control.next_report() {
            Ok(Some(Report::Started { pid, .. })) => pid,
            Ok(Some(Report::Failed { message, .. })) => {
                return Err(ForkFailure::Failed(format!("the prefork server could not fork it: {message}")))
            }
            Ok(other) => {
                return Err(ForkFailure::Failed(format!(
                    "the prefork server did not set the fork up: its supervisor ended without a start report ({})",
                    match other {
                        None => "its control socket closed".to_owned(),
                        Some(report) => format!("{report:?}"),
                    }
                )))
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(ForkFailure::TimedOut)
            }
            Err(error) => return Err(failed(error)),
        };
        conversation.control.socket().set_read_timeout(None).map_err(failed)?;
        let spawned = |error: std::io::Error| ForkFailure::Failed(format!("cannot start its threads: {error}"));
        let (sender, receiver) = mpsc::channel(4);
        spawn_reader(
            conversation.stdout,
            ReaderOptions::new(StreamKind::Events),
            Forward(sender.clone(), StreamKind::Events),
        )
        .map_err(spawned)?;
        spawn_reader(
            conversation.stderr,
            ReaderOptions::new(StreamKind::Text),
            Forward(sender.clone(), StreamKind::Text),
        )
        .map_err(spawned)?;
        let frames = spawn_writer(conversation.stdin).map_err(spawned)?;
        let host_channel = conversation.host_channel;
        let mut control = conversation.control;
        std::thread::Builder::new()
            .name("bridge-warm-wait".into())
            .spawn(move || {
                let mut status = ExitStatus {
                    code: None,
                    signal: None,
                };
                while let Ok(Some(report)) = control.next_report() {
                    match report {
                        Report::Exited(code) => status.code = Some(code),
                        Report::Signaled(signal) => status.signal = Some(signal),
                        _ => continue,
                    }
                    break;
                }
                let _ = sender.blocking_send(Output::Exited(status));
                // `control` drops here: the supervisor has nothing left to end.
            })
            .map_err(spawned)?;
        Ok((
            Backend {
                pid,
                frames,
                supervised: true,
                host_channel,
            },
            receiver,
        ))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The host's end of the host channel, once (`None` when the start did
    /// not declare one, or it was taken).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn take_host_channel(&mut self) -> Option<UnixStream> {
        self.host_channel.take()
    }

    /// SIGKILL to the whole group: a start given up on.
    pub fn kill(&self) {
        self.signal_group(Some(Signal::SIGKILL));
    }

    /// Queues a frame for the backend's stdin; frames are written in queue
    /// order. A backend that has gone away loses it silently (its exit is
    /// reported on its own).
    pub fn send(&self, frame: String) {
        let _ = self.frames.send(frame);
    }

    /// Signals the backend's whole process group; `None` only asks whether
    /// any member is left.
    pub fn signal_group(&self, signal: Option<Signal>) -> bool {
        killpg(Pid::from_raw(self.pid as i32), signal).is_ok()
    }

    /// Ends what is left of the group after the backend itself exited: its
    /// children get SIGTERM, and SIGKILL if they are still there after
    /// `grace`.
    pub fn reap_group(&self, grace: Duration) {
        if self.supervised || !self.signal_group(Some(Signal::SIGTERM)) {
            return;
        }
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if !self.signal_group(None) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal_group(Some(Signal::SIGKILL));
    }
}

fn spawn_writer(
    mut stdin: impl Write + Send + 'static,
) -> std::io::Result<std::sync::mpsc::Sender<String>> {
    let (sender, frames) = std::sync::mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("bridge-stdin".into())
        .spawn(move || {
            for frame in frames {
                if stdin
                    .write_all(frame.as_bytes())
                    .and_then(|()| stdin.flush())
                    .is_err()
                {
                    return;
                }
            }
        })?;
    Ok(sender)
}

/// A supervised backend's pid, from its supervisor's first report.
fn started(control: &UnixStream) -> std::io::Result<u32> {
    let mut reports = bridge_prefork::Control::new(control.try_clone()?);
    match reports.next_report()? {
        Some(Report::Started { pid, .. }) => Ok(pid),
        Some(Report::Failed { errno, message, .. }) => {
            Err(std::io::Error::new(std::io::Error::from_raw_os_error(errno).kind(), message))
        }
        other => Err(std::io::Error::other(format!("the supervisor ended without a start report ({other:?})"))),
    }
}

/// Waits for the child (the backend, or its supervisor, which mirrors the
/// backend's status) and reports its exit; a supervisor's control socket is
/// held until then (its end would tell the supervisor to terminate).
fn spawn_waiter(mut child: Child, control: Option<UnixStream>, sender: mpsc::Sender<Output>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("bridge-wait".into())
        .spawn(move || {
            let _control = control;
            let status = match child.wait() {
                Ok(status) => ExitStatus {
                    code: status.code(),
                    signal: status.signal(),
                },
                Err(_) => ExitStatus {
                    code: None,
                    signal: None,
                },
            };
            let _ = sender.blocking_send(Output::Exited(status));
        })?;
    Ok(())
}

#[cfg(test)]
#[path = "backend_tests.rs"]
mod tests;
