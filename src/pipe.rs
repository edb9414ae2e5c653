//! Reading an OS pipe so that the read can be called off: a reader thread
//! blocked in `read()` on a pipe that a backend's grandchild holds open would
//! otherwise wait for as long as that process lives, keeping the thread and
//! the pipe's file descriptor in the host.
//!
//! [`WakeablePipe`] waits with `poll()` on the pipe and on a private wake
//! pipe; [`Waker::wake`] makes the read return end of file.

use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsFd;
use std::sync::Mutex;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Makes a [`WakeablePipe`]'s pending and future reads return end of file.
pub(crate) struct Waker(Mutex<Option<PipeWriter>>);

impl Waker {
    pub(crate) fn wake(&self) {
        let mut writer = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut pipe) = writer.take() {
            // Dropping the write end after the byte: the wake pipe then
            // reads as readable for good.
            let _ = pipe.write_all(&[1]);
        }
    }
}

/// A pipe's read end whose reads a [`Waker`] can call off.
pub(crate) struct WakeablePipe {
    pipe: PipeReader,
    wake: PipeReader,
}

impl WakeablePipe {
    pub(crate) fn new(pipe: PipeReader) -> std::io::Result<(WakeablePipe, Waker)> {
        let (wake, wake_writer) = std::io::pipe()?;
        Ok((
            WakeablePipe { pipe, wake },
            Waker(Mutex::new(Some(wake_writer))),
        ))
    }
}

impl Read for WakeablePipe {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let mut fds = [
                PollFd::new(self.pipe.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(error) => return Err(error.into()),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            if ready(&fds[1]) {
                return Ok(0);
            }
            if ready(&fds[0]) {
                return self.pipe.read(out);
            }
        }
    }
}
