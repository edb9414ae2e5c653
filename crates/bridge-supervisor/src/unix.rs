//! The supervisor on Unix (see the crate's notes in `main.rs`).

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, killpg, raise, signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpid, Pid};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::control::{cannot_start, control_socket, fatal, report, CONTROL_FD};

/// The signals the supervisor handles (see the crate's notes).
const HANDLED: [Signal; 6] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGUSR2,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGUSR1,
];

struct Options {
    term_grace: Duration,
    what: Backend,
    /// `--channel-fd N`: descriptors above the control socket that the
    /// backend inherits (the host channel, declared per start). Every other
    /// descriptor the supervisor inherited stays out of the backend.
    channels: Vec<i32>,
}

/// The backend to supervise: one to start, or one that is already our child.
enum Backend {
    Spawn { command: String, args: Vec<String> },
    /// `--adopt <pid>`: the process that exec'd us forked it (the prefork
    /// server's conversations, docs/prefork.md).
    Adopt(Pid),
    /// `--exec`: place the descriptors and become the backend (`exec.rs`).
    Exec { command: String, args: Vec<String> },
}

fn parse_options() -> Result<Options, lexopt::Error> {
    use lexopt::prelude::*;
    let mut term_grace = Duration::from_millis(500);
    let mut adopt: Option<i32> = None;
    let mut exec = false;
    let mut channels = Vec::new();
    let mut parser = lexopt::Parser::from_env();
    let mut rest: Vec<String> = Vec::new();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("term-grace-ms") => {
                term_grace = Duration::from_millis(parser.value()?.parse()?);
            }
            Long("channel-fd") => {
                let fd: i32 = parser.value()?.parse()?;
                if fd <= CONTROL_FD {
                    return Err("--channel-fd names a descriptor above 3".into());
                }
                channels.push(fd);
            }
            Long("exec") => exec = true,
            Long("adopt") => {
                let pid: i32 = parser.value()?.parse()?;
                if pid <= 0 {
                    return Err("--adopt needs a process id".into());
                }
                adopt = Some(pid);
            }
            Value(value) => {
                rest.push(value.string()?);
                rest.extend(parser.raw_args()?.map(|a| a.to_string_lossy().into_owned()));
            }
            _ => return Err(arg.unexpected()),
        }
    }
    let what = match adopt {
        Some(_) if exec => return Err("--exec and --adopt exclude each other".into()),
        Some(pid) if rest.is_empty() => Backend::Adopt(Pid::from_raw(pid)),
        Some(_) => return Err("--adopt takes no command".into()),
        None => {
            let mut rest = rest.into_iter();
            let command = rest.next().ok_or("missing the command to supervise")?;
            let args = rest.collect();
            if exec {
                Backend::Exec { command, args }
            } else {
                Backend::Spawn { command, args }
            }
        }
    };
    Ok(Options { term_grace, what, channels })
}

pub fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("process-bridge-supervisor: {error}");
            eprintln!(
                "usage: process-bridge-supervisor [--term-grace-ms N] [--channel-fd N]... -- <command> [args...]\n       process-bridge-supervisor [--term-grace-ms N] --adopt <pid>\n       process-bridge-supervisor --exec [--channel-fd N]... -- <command> [args...]"
            );
            std::process::exit(2);
        }
    };
    let mut control = control_socket();
    if let Backend::Exec { command, args } = &options.what {
        crate::exec::exec(command, args, &options.channels, &mut control);
    }
    // Orphaned descendants become our children, so that we can find them.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = nix::sys::prctl::set_child_subreaper(true);

    // Every signal we handle wakes the loop through one pipe, and raises
    // its own flag (the byte written does not say which signal came).
    // (Rust ignores SIGPIPE.)
    let (mut signals, signal_writer) = UnixStream::pair().unwrap_or_else(|e| fatal(&e));
    signals.set_nonblocking(true).unwrap_or_else(|e| fatal(&e));
    let mut flags = Vec::new();
    for sig in HANDLED {
        // The flag first: signal-hook runs a signal's actions in the order
        // they were registered, so the flag is up before the wake-up byte.
        let flag = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(sig as i32, flag.clone()).unwrap_or_else(|e| fatal(&e));
        let writer = signal_writer.try_clone().unwrap_or_else(|e| fatal(&e));
        signal_hook::low_level::pipe::register(sig as i32, writer).unwrap_or_else(|e| fatal(&e));
        flags.push((sig, flag));
    }

    let (backend, backend_status) = match options.what {
        Backend::Spawn { command, args } => {
            let backend = spawn(&command, &args, &options.channels, &mut control);
            report(&mut control, &format!("started {backend}\n"));
            (backend, None)
        }
        Backend::Exec { .. } => unreachable!("an exec'd supervisor is the backend"),
        Backend::Adopt(backend) => {
            let status = adopt(backend, &mut control);
            // The host is not our parent: it learns our pid here.
            report(&mut control, &format!("started {backend} {}\n", getpid()));
            (backend, status)
        }
    };
    // Only the backend holds the host's pipes from now on, so that their end
    // of file is the backend's (and its descendants'): a backend closing its
    // stdout while it runs is seen as such.
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }

    let mut supervisor = Supervisor {
        backend,
        backend_status,
        terminating: None,
        term_grace: options.term_grace,
        received: flags,
    };
    supervisor.run(&mut signals, &mut control);
}

/// Starts the backend in a process group of its own, with exactly stdin,
/// stdout, stderr and the declared `channels`, or exits (127) saying why.
/// The supervisor lets go of its copies of the channels once the backend
/// has them, so that their end is the backend's.
fn spawn(command: &str, args: &[String], channels: &[i32], control: &mut Option<File>) -> Pid {
    keep_only(channels);
    // Caught signals are reset to their defaults on exec, and std resets
    // SIGPIPE: the backend starts with default dispositions.
    let spawned = Command::new(command).args(args).process_group(0).spawn();
    for &fd in channels {
        // SAFETY: the declared channel is the host's, handed to us for the
        // backend alone; nothing in this process uses it.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    match spawned {
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(error) => {
            let number = error.raw_os_error().unwrap_or(nix::libc::EIO);
            let told = format!("cannot start {command}: {error}");
            cannot_start(control, number, &error.to_string(), &told)
        }
    }
}

/// Closes every descriptor above the control socket that the supervisor
/// inherited (the ones without close-on-exec: all of its own have it) but
/// the declared channels, so that neither the backend nor the supervisor
/// holds a host's stray descriptor; the declared ones must be open (a
/// missing one is a start that cannot be).
fn keep_only(channels: &[i32]) {
    let listing = if cfg!(target_os = "linux") { "/proc/self/fd" } else { "/dev/fd" };
    let open: Vec<i32> = match std::fs::read_dir(listing) {
        Ok(entries) => entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    };
    for fd in open.into_iter().filter(|fd| *fd > CONTROL_FD && !channels.contains(fd)) {
        // SAFETY: F_GETFD on a descriptor number is sound whatever it is
        // (the listing's own descriptor is closed by now: EBADF, skipped).
        let flags = unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) };
        if flags >= 0 && flags & nix::libc::FD_CLOEXEC == 0 {
            // SAFETY: an inherited descriptor nothing in this process owns
            // (everything the supervisor opens is close-on-exec).
            unsafe { nix::libc::close(fd) };
        }
    }
    for &fd in channels {
        // SAFETY: as above; clears close-on-exec on a channel the host
        // passed (it is inherited as such, this only makes sure).
        if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) } < 0 {
            fatal(&format!("--channel-fd {fd}: the descriptor is not open"));
        }
    }
}

/// Checks that `backend` is our child, or exits (127) saying why. It may
/// have exited already (before our SIGCHLD handler was there): its status,
/// reaped here, is returned.
fn adopt(backend: Pid, control: &mut Option<File>) -> Option<WaitStatus> {
    loop {
        match waitpid(backend, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return None,
            Ok(status @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => return Some(status),
            Ok(_) => return None,
            Err(Errno::EINTR) => continue,
            Err(errno) => {
                let message = format!("cannot adopt {backend}: {}", errno.desc());
                cannot_start(control, errno as i32, &message, &message)
            }
        }
    }
}

struct Supervisor {
    backend: Pid,
    backend_status: Option<WaitStatus>,
    /// Since when descendants have been asked to exit (SIGTERM sent).
    terminating: Option<Instant>,
    term_grace: Duration,
    /// Raised by the handler of each signal in [`HANDLED`].
    received: Vec<(Signal, Arc<AtomicBool>)>,
}

impl Supervisor {
    fn run(&mut self, signals: &mut UnixStream, control: &mut Option<File>) -> ! {
        // An adopted backend may have exited before we were there.
        if self.backend_status.is_some() {
            self.terminate();
        }
        // Until its end of file; kept after it, for the exit line (a host
        // that only shut down its writing side still reads it).
        let mut listening = control.is_some();
        loop {
            let timeout = match self.terminating {
                None => PollTimeout::NONE,
                Some(since) => {
                    let left = self.term_grace.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        self.kill_everything(control);
                    }
                    PollTimeout::try_from(left.as_millis().max(1)).unwrap_or(PollTimeout::MAX)
                }
            };
            let (signal_ready, control_ready) = {
                let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
                if let Some(socket) = control.as_ref().filter(|_| listening) {
                    fds.push(PollFd::new(socket.as_fd(), PollFlags::POLLIN));
                }
                match poll(&mut fds, timeout) {
                    Ok(_) => {}
                    Err(Errno::EINTR) => continue,
                    Err(error) => fatal(&error),
                }
                let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
                (ready(&fds[0]), fds.get(1).is_some_and(ready))
            };
            if signal_ready {
                let mut drained = [0u8; 64];
                loop {
                    match signals.read(&mut drained) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => fatal(&e),
                    }
                }
                let received: Vec<Signal> = self
                    .received
                    .iter()
                    .filter(|(_, flag)| flag.swap(false, Ordering::AcqRel))
                    .map(|(sig, _)| *sig)
                    .collect();
                for sig in received {
                    match sig {
                        Signal::SIGTERM => self.terminate(),
                        Signal::SIGUSR2 => self.kill_everything(control),
                        Signal::SIGCHLD => {}
                        passed_on => {
                            let _ = killpg(self.backend, passed_on);
                        }
                    }
                }
                self.reap();
            }
            if control_ready && control_closed(control) {
                listening = false;
                self.terminate();
            }
            if self.backend_status.is_some() {
                // What the backend left behind goes too.
                self.terminate();
            }
            if self.terminating.is_some() && self.reap() {
                self.exit(control);
            }
        }
    }

    /// Reaps every child that has exited; `true` when none is left.
    fn reap(&mut self) -> bool {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return false,
                Ok(status) => {
                    if status.pid() == Some(self.backend) {
                        self.backend_status = Some(status);
                    }
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => return true,
                Err(error) => fatal(&error),
            }
        }
    }

    /// Asks every descendant to exit (once), starting the grace period.
    fn terminate(&mut self) {
        if self.terminating.is_some() {
            return;
        }
        self.terminating = Some(Instant::now());
        self.signal_descendants(Signal::SIGTERM);
    }

    /// The grace period is over: SIGKILL every descendant until none is left.
    fn kill_everything(&mut self, control: &mut Option<File>) -> ! {
        loop {
            self.signal_descendants(Signal::SIGKILL);
            match waitpid(Pid::from_raw(-1), None) {
                Ok(status) => {
                    if status.pid() == Some(self.backend) {
                        self.backend_status = Some(status);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(_) => self.exit(control),
            }
        }
    }

    fn signal_descendants(&self, signal: Signal) {
        let _ = killpg(self.backend, signal);
        for pid in descendants(getpid()) {
            let _ = kill(pid, signal);
        }
    }

    /// Tells the host how the backend ended (`exited <code>` or `signaled
    /// <number>`: a host that is not our parent cannot see our status), and
    /// exits the way the backend did.
    fn exit(&self, control: &mut Option<File>) -> ! {
        match self.backend_status {
            Some(WaitStatus::Exited(_, code)) => report(control, &format!("exited {code}\n")),
            Some(WaitStatus::Signaled(_, which, _)) => {
                report(control, &format!("signaled {}\n", which as i32));
            }
            _ => {}
        }
        match self.backend_status {
            Some(WaitStatus::Exited(_, code)) => std::process::exit(code),
            Some(WaitStatus::Signaled(_, which, _)) => {
                // SAFETY: restoring the default disposition installs no code.
                let _ = unsafe { signal(which, SigHandler::SigDfl) };
                let _ = raise(which);
                std::process::exit(128 + which as i32)
            }
            _ => std::process::exit(1),
        }
    }
}

/// Whether the host closed the control socket (end of file, or an error).
fn control_closed(control: &mut Option<File>) -> bool {
    let Some(socket) = control else {
        return false;
    };
    let mut buffer = [0u8; 256];
    loop {
        match socket.read(&mut buffer) {
            Ok(0) => return true,
            // The host sends nothing today; anything it sends is ignored.
            Ok(_) => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Every descendant of `root`, from the parent links of `/proc` (Linux).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn descendants(root: Pid) -> Vec<Pid> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root.as_raw()];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found[1..].iter().map(|&p| Pid::from_raw(p)).collect()
}

/// Elsewhere, the backend's process group is what is signalled.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn descendants(_root: Pid) -> Vec<Pid> {
    Vec::new()
}
