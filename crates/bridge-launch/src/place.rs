//! Putting descriptors at their channel's number in a child, between fork
//! and exec (async-signal-safe: no allocation, no lock), and nothing else:
//! every other descriptor above stderr is made close-on-exec, so that the
//! child inherits exactly stdin, stdout, stderr and the placed channels
//! (a host's stray descriptor without close-on-exec, a test runner's or a
//! shell's, reached the bridge's cold backends).
//!
//! Why every source is first copied above the highest target: a source may
//! sit at another channel's number (a descriptor the host made early can be
//! 3 or 4), and a plain `dup2` in table order would overwrite it before it
//! is placed. The copies go to the lowest free numbers above the targets,
//! so a low `ulimit -n` that lets a backend start at all also lets this.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::channels::{Channel, LAYOUT};

use nix::libc;

/// Which descriptor of the parent goes to which channel (at most one per channel).
#[derive(Clone, Copy, Debug, Default)]
pub struct Placement {
    entries: [Option<(i32, RawFd)>; LAYOUT.len()],
}

impl Placement {
    pub fn new() -> Placement {
        Placement::default()
    }

    /// `source` becomes `channel`'s descriptor in the child. The caller keeps
    /// `source` open until the child is spawned.
    pub fn put(&mut self, channel: Channel, source: RawFd) -> &mut Placement {
        let at = LAYOUT.iter().position(|c| *c == channel).expect("a channel of the layout");
        self.entries[at] = Some((channel.fd, source));
        self
    }

    /// Whether nothing is placed.
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }

    /// Places every entry in this process (the child after fork): each one
    /// copied above the highest target, every descriptor above stderr made
    /// close-on-exec, then each copy `dup2`ed to its number (which clears
    /// close-on-exec there), the copies closed.
    ///
    /// # Safety
    /// Only between fork and exec of a child (it changes this process's
    /// descriptor table), with every source open.
    pub unsafe fn apply(&self) -> std::io::Result<()> {
        let floor = self.entries.iter().flatten().map(|(target, _)| *target).max().map_or(0, |t| t + 1);
        let mut moved: [Option<(i32, RawFd)>; LAYOUT.len()] = [None; LAYOUT.len()];
        for (slot, entry) in moved.iter_mut().zip(self.entries.iter()) {
            if let Some((target, source)) = entry {
                // SAFETY: fcntl on a descriptor number is sound whatever it is;
                // it fails (and we report) if `source` is not open.
                let copy = unsafe { libc::fcntl(*source, libc::F_DUPFD_CLOEXEC, floor) };
                if copy < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                *slot = Some((*target, copy));
            }
        }
        // SAFETY: only marks descriptors close-on-exec in this child.
        unsafe { cloexec_from(STDERR_FD + 1) };
        for (target, copy) in moved.iter().flatten() {
            // SAFETY: both are descriptor numbers; dup2 replaces `target`,
            // which this child is meant to have as the channel.
            if unsafe { libc::dup2(*copy, *target) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `copy` was made above and is ours alone.
            unsafe { libc::close(*copy) };
        }
        Ok(())
    }

    /// Installs the placement in `command`'s child (after std has set up
    /// stdin, stdout and stderr, before exec). An empty one still closes
    /// every other descriptor on exec.
    pub fn install(self, command: &mut Command) {
        // SAFETY: `apply` only calls fcntl, dup2 and close (async-signal-safe)
        // and touches no lock nor the heap; the sources stay open in the
        // parent until `spawn` returns (the caller's promise in `put`).
        unsafe {
            command.pre_exec(move || self.apply());
        }
    }
}

const STDERR_FD: i32 = 2;

/// Marks every descriptor from `first` on close-on-exec: `close_range`
/// where the kernel has it (Linux 5.11), else one `fcntl` per number up
/// to the descriptor limit.
///
/// # Safety
/// Only in a child between fork and exec.
unsafe fn cloexec_from(first: i32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags.
        let done = unsafe {
            libc::syscall(libc::SYS_close_range, first as libc::c_uint, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC)
        };
        if done == 0 {
            return;
        }
    }
    // SAFETY: sysconf is async-signal-safe in practice (it reads a limit).
    let limit = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) };
    let last = if limit <= 0 { 65_536 } else { limit.min(1 << 20) as i32 };
    for fd in first..last {
        // SAFETY: F_SETFD on any number is sound (EBADF for a closed one).
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::{CONTROL, HOST};
    use std::os::fd::AsRawFd;
    use std::process::Stdio;

    /// A real child: the host channel reaches fd 4 and the control socket
    /// fd 3, even when the sources sit at each other's numbers' order.
    #[test]
    fn a_child_gets_its_channels_at_their_numbers() {
        let (a, _) = std::os::unix::net::UnixStream::pair().unwrap();
        let (b, _) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut command = Command::new("/bin/sh");
        command.args(["-c", "[ -e /proc/self/fd/3 ] && [ -e /proc/self/fd/4 ] && echo ok"]);
        command.stdout(Stdio::piped()).stdin(Stdio::null());
        let mut placement = Placement::new();
        placement.put(HOST, a.as_raw_fd()).put(CONTROL, b.as_raw_fd());
        placement.install(&mut command);
        let output = command.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
    }

    /// A descriptor of the parent without close-on-exec does not reach the child.
    #[test]
    fn nothing_else_is_inherited() {
        let (stray, _) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: clears close-on-exec on a descriptor this test owns.
        assert_eq!(unsafe { libc::fcntl(stray.as_raw_fd(), libc::F_SETFD, 0) }, 0);
        let probe = format!("[ -e /proc/self/fd/{} ] && echo leaked || echo clean", stray.as_raw_fd());
        let run = |placement: Option<Placement>| {
            let mut command = Command::new("/bin/sh");
            command.args(["-c", &probe]).stdout(Stdio::piped()).stdin(Stdio::null());
            if let Some(placement) = placement {
                placement.install(&mut command);
            }
            String::from_utf8_lossy(&command.output().unwrap().stdout).trim().to_owned()
        };
        assert_eq!(run(None), "leaked", "the probe sees a stray descriptor");
        assert_eq!(run(Some(Placement::new())), "clean");
    }
}
