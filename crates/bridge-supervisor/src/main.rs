//! `process-bridge-supervisor`: a tiny process between a host and its
//! AgentLane backend, so that no descendant of the backend outlives the
//! host, even when the host is SIGKILLed and can clean up nothing itself.
//!
//! ```text
//! process-bridge-supervisor [--term-grace-ms N] [--channel-fd N]… -- <command> [args…]
//! process-bridge-supervisor [--term-grace-ms N] --adopt <pid>
//! process-bridge-supervisor --exec [--channel-fd N]… -- <command> [args…]
//! ```
//!
//! The backend runs as the supervisor's child, in a process group of its
//! own, with the supervisor's stdin, stdout and stderr (the host's pipes:
//! the supervisor never touches the data, and lets go of them once the
//! backend runs, so their end of file is the backend's). File descriptor 3,
//! when open, is
//! the *control socket* from the host. The backend inherits stdin, stdout,
//! stderr and the descriptors declared with `--channel-fd` (the host
//! channel, fd 4: `crates/bridge-launch`), nothing else; the supervisor
//! closes its copies of those once the backend runs. On the control socket:
//!
//! - the supervisor writes `started <pid>\n` once the backend runs, or
//!   `failed <ERRNO> <errno number> <message>\n` if it could not be started
//!   (then exits 127; without a control socket it says so on stderr);
//! - its last line, once the backend and its descendants are gone, is how
//!   the backend ended: `exited <code>\n` or `signaled <number>\n` (for a
//!   host that is not the supervisor's parent and cannot see its status);
//! - end of file on it (the host closed it, or died) means *terminate*.
//!
//! With `--adopt <pid>` the supervisor starts nothing: the backend is
//! already its child (the process that exec'd the supervisor forked it:
//! the prefork server's conversations, `docs/prefork.md`), and the first
//! line is `started <pid> <supervisor pid>`. Everything else is the same.
//!
//! With `--exec` it supervises nothing: it places the backend's descriptors
//! (the same guarantee: stdin, stdout, stderr and the declared channels)
//! and execs the backend in its own process (`exec.rs`), for a host that
//! contains the backend itself (the Node package's grouped mode); fd 3
//! then only carries a `failed` line, and its end of file means started.
//!
//! SIGTERM also means terminate, and SIGUSR2 means terminate *now* (no
//! grace: what the host sends for its SIGKILL); SIGINT, SIGHUP and SIGUSR1
//! are passed on to the backend's process group. Terminating sends
//! SIGTERM to every descendant, waits up to the grace period
//! (`--term-grace-ms`, default 500) for them to exit, then SIGKILLs what is
//! left and reaps everything. When the backend exits by itself, whatever it
//! left behind is terminated the same way. Then the supervisor exits with
//! the backend's status: its exit code, or the signal that ended it, raised
//! again on the supervisor itself.
//!
//! On Linux the supervisor is a *child subreaper*: descendants whose parent
//! exits (a daemon a tool started, a `setsid` grandchild) are reparented to
//! it instead of to init, so the walk of `/proc/<pid>/task/*/children` from
//! the supervisor finds every descendant. Elsewhere it signals the
//! backend's process group, which misses descendants that left it.

#[cfg(unix)]
mod control;
#[cfg(unix)]
mod exec;
#[cfg(unix)]
mod unix;

#[cfg(unix)]
fn main() {
    unix::main()
}

#[cfg(not(unix))]
fn main() {
    eprintln!("process-bridge-supervisor: only Unix is supported");
    std::process::exit(2);
}
