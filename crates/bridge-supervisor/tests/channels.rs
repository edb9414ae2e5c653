//! `--channel-fd` (issue 32): the backend inherits stdin, stdout, stderr and
//! exactly the declared channels; the supervisor lets go of its copy once
//! the backend has it, so the channel's end is the backend's.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::SUPERVISOR;

/// Runs the supervisor with `declared` passed as `--channel-fd`, a host
/// channel at fd 4 and a stray descriptor (no close-on-exec) at fd 5.
/// The backend says which of fds 3, 4 and 5 it has, closes fd 4 and then waits:
/// returns the listing, and whether the host end (and the stray one's
/// peer) saw end of file while the supervisor still ran.
fn run(declared: bool) -> (String, bool) {
    let (host, backend_end) = UnixStream::pair().unwrap();
    let (stray_peer, stray) = UnixStream::pair().unwrap();
    let (a, b) = (backend_end.as_raw_fd(), stray.as_raw_fd());
    // Builtins only: no descriptor of a pipeline or a listing in the way.
    let script = "for n in 3 4 5; do [ -e /proc/$$/fd/$n ] && printf '%s ' $n; done; echo; exec 4>&-; sleep 2";
    let mut command = Command::new(SUPERVISOR);
    if declared {
        command.args(["--channel-fd", "4"]);
    }
    command.args(["--", "sh", "-c", script]).stdout(Stdio::piped()).stdin(Stdio::null());
    // SAFETY: dup2 only, between fork and exec; the sources stay open in the
    // parent until spawn returns.
    unsafe {
        command.pre_exec(move || {
            if nix::libc::dup2(a, 4) < 0 || nix::libc::dup2(b, 5) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop(backend_end);
    drop(stray);
    // The stray descriptor's peer ends only when no process holds it: not
    // the backend, not the supervisor.
    stray_peer.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
    let stray_ended = matches!((&stray_peer).read(&mut [0u8; 1]), Ok(0));
    let mut stdout = child.stdout.take().unwrap();
    let mut listing = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        listing.push(byte[0]);
    }
    host.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
    let mut rest = Vec::new();
    let ended = matches!((&host).read_to_end(&mut rest), Ok(0));
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.wait();
    (String::from_utf8(listing).unwrap(), ended && still_running && stray_ended)
}

#[test]
fn a_declared_channel_reaches_the_backend_and_nothing_else_does() {
    let (listing, ended) = run(true);
    // 3 is the control socket's number (not given here): never the backend's.
    assert_eq!(listing.trim(), "4", "{listing}");
    assert!(ended, "the host end did not end while the supervisor ran: it kept a copy");
}

#[test]
fn undeclared_the_backend_inherits_neither() {
    let (listing, stray_ended) = run(false);
    assert!(stray_ended, "the supervisor kept a stray descriptor");
    assert_eq!(listing.trim(), "", "{listing}");
}
