//! `--exec` (issue 32): the supervisor as a launcher only, for a host that
//! contains the backend itself (the Node package's grouped mode). The
//! backend runs in the supervisor's own process (same pid, no process in
//! between) with stdin, stdout, stderr and exactly the declared channels;
//! a command that cannot be started is reported on the control socket.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use common::SUPERVISOR;

/// Runs `--exec [--channel-fd 4] -- backend…` with a control socket at fd
/// 3, a host channel at fd 4 and a stray descriptor (no close-on-exec) at
/// fd 7; returns the backend's stdout, the child's pid, what came on the
/// control socket, and the exit code.
fn run(declared: bool, backend: &[&str]) -> (String, u32, String, Option<i32>) {
    let (control_host, control) = UnixStream::pair().unwrap();
    let (_host, channel) = UnixStream::pair().unwrap();
    let (_stray_peer, stray) = UnixStream::pair().unwrap();
    let (c, h, s) = (control.as_raw_fd(), channel.as_raw_fd(), stray.as_raw_fd());
    let mut command = Command::new(SUPERVISOR);
    command.arg("--exec");
    if declared {
        command.args(["--channel-fd", "4"]);
    }
    command
        .arg("--")
        .args(backend)
        .stdout(Stdio::piped())
        .stdin(Stdio::null());
    // SAFETY: dup2 only, between fork and exec; the sources stay open in the
    // parent until spawn returns.
    unsafe {
        command.pre_exec(move || {
            for (from, to) in [(c, 3), (h, 4), (s, 7)] {
                if nix::libc::dup2(from, to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop((control, channel, stray));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    let mut report = String::new();
    (&control_host).read_to_string(&mut report).unwrap();
    (out, child.id(), report, status.code())
}

/// Builtins only: no descriptor of a pipeline or a listing in the way.
const PROBE: &str =
    "echo $$; for n in 3 4 5 6 7; do [ -e /proc/$$/fd/$n ] && printf '%s ' $n; done; echo";

#[test]
fn the_backend_is_the_same_process_with_only_its_channels() {
    let (out, pid, report, code) = run(true, &["sh", "-c", PROBE]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], pid.to_string(), "exec'd in place: {out}");
    assert_eq!(
        lines[1].trim(),
        "4",
        "only the declared channel beyond stdio: {out}"
    );
    assert_eq!(report, "", "a started backend: end of file, no line");
    assert_eq!(code, Some(0));
}

#[test]
fn undeclared_the_backend_inherits_stdio_only() {
    let (out, _, _, code) = run(false, &["sh", "-c", PROBE]);
    assert_eq!(out.lines().nth(1).map(str::trim), Some(""), "{out}");
    assert_eq!(code, Some(0));
}

#[test]
fn a_command_that_cannot_start_is_reported_on_the_control_socket() {
    let (out, _, report, code) = run(false, &["no-such-command-pbn"]);
    assert_eq!(out, "");
    assert!(report.starts_with("failed ENOENT 2 "), "{report:?}");
    assert_eq!(code, Some(127));
}
