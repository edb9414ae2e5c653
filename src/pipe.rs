//! Reading an OS pipe so that the read can be called off: a reader thread
//! blocked in `read()` on a pipe that a backend's grandchild holds open would
//! otherwise wait for as long as that process lives, keeping the thread and
//! the pipe's file descriptor in the host.
//!
//! [`WakeablePipe`] waits with `poll()` on the pipe and on a private wake
//! pipe. Its [`PipeControl`] can *stop* it (the next read returns end of
//! file: disposal) or *cut it off* (what the pipe holds now is still read,
//! up to a budget, then the stream ends as `bridge_core::reader::Cut`: the
//! backend has exited, and what still holds the pipe must not keep the
//! reader).

use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bridge_core::reader::Cut;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// After a cut-off, at most this much more is read (the backend's last
/// output is at most what the pipe buffers; a chatty descendant is cut).
const CUT_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// What a pipe's owner can tell a blocked or future read.
pub(crate) struct PipeControl {
    wake: Mutex<Option<PipeWriter>>,
    stopped: AtomicBool,
    cut: AtomicBool,
}

impl PipeControl {
    /// The next read returns end of file.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.wake();
    }

    /// Reads take what the pipe holds now, then the stream ends as cut.
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        let mut writer = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut pipe) = writer.take() {
            // The byte, then the write end's close: the wake pipe stays
            // readable, and every later poll sees it at once.
            let _ = pipe.write_all(&[1]);
        }
    }
}

/// A pipe's read end whose reads its [`PipeControl`] can call off.
pub(crate) struct WakeablePipe {
    pipe: PipeReader,
    wake: PipeReader,
    control: Arc<PipeControl>,
    /// Bytes that may still be read after a cut-off.
    budget: usize,
}

impl WakeablePipe {
    pub(crate) fn new(pipe: PipeReader) -> std::io::Result<(WakeablePipe, Arc<PipeControl>)> {
        let (wake, wake_writer) = std::io::pipe()?;
        let control = Arc::new(PipeControl {
            wake: Mutex::new(Some(wake_writer)),
            stopped: AtomicBool::new(false),
            cut: AtomicBool::new(false),
        });
        Ok((
            WakeablePipe {
                pipe,
                wake,
                control: control.clone(),
                budget: CUT_BUDGET_BYTES,
            },
            control,
        ))
    }
}

impl Read for WakeablePipe {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.control.stopped.load(Ordering::Acquire) {
                return Ok(0);
            }
            let cut = self.control.cut.load(Ordering::Acquire);
            if cut && self.budget == 0 {
                return Err(Cut::error());
            }
            let mut fds = [
                PollFd::new(self.pipe.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
            ];
            // Once cut, only what is there now: no waiting.
            let watched = if cut { &mut fds[..1] } else { &mut fds[..] };
            let timeout = if cut {
                PollTimeout::ZERO
            } else {
                PollTimeout::NONE
            };
            match poll(watched, timeout) {
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(error) => return Err(error.into()),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            if ready(&watched[0]) {
                if !cut {
                    return self.pipe.read(out);
                }
                let room = out.len().min(self.budget);
                let read = self.pipe.read(&mut out[..room])?;
                self.budget -= read;
                return Ok(read);
            }
            if cut {
                return Err(Cut::error());
            }
            // Woken: the loop looks at the flags again.
        }
    }
}
