//! The control socket from the host (fd 3, see the crate's notes in
//! `main.rs`): taking it over, writing report lines on it, and failing a
//! start with a `failed` line. Shared by the supervising modes and `--exec`.

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag};

/// The control socket's file descriptor (see the crate's notes).
pub(crate) const CONTROL_FD: i32 = 3;
/// Exit status when the backend could not be started (as shells use).
const CANNOT_START: i32 = 127;

/// `failed <ERRNO> <number> <message>` on the control socket (or `told` on
/// stderr without one), then exit 127.
pub(crate) fn cannot_start(
    control: &mut Option<File>,
    number: i32,
    message: &str,
    told: &str,
) -> ! {
    let name = format!("{:?}", Errno::from_raw(number));
    if control.is_some() {
        report(control, &format!("failed {name} {number} {message}\n"));
    } else {
        eprintln!("process-bridge-supervisor: {told}");
    }
    std::process::exit(CANNOT_START);
}

/// The control socket from the host, if fd 3 is open; not inherited by the backend.
pub(crate) fn control_socket() -> Option<File> {
    // SAFETY: F_GETFD on any integer is sound; it only says whether fd 3 is open.
    if unsafe { nix::libc::fcntl(CONTROL_FD, nix::libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: fd 3 is open and nothing else in this process owns it: the
    // host handed it to us, and we take it over.
    let owned = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    let _ = fcntl(&owned, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    Some(File::from(owned))
}

/// Writes a line to the host; a host that is gone is not an error here.
pub(crate) fn report(control: &mut Option<File>, line: &str) {
    if let Some(socket) = control {
        let _ = socket.write_all(line.as_bytes());
    }
}

pub(crate) fn fatal(error: &dyn std::fmt::Display) -> ! {
    eprintln!("process-bridge-supervisor: {error}");
    std::process::exit(CANNOT_START);
}
