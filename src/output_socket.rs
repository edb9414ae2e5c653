//! A backend's output stream as the host reads it: one end of a Unix socket
//! pair (the child gets the other as its stdout or stderr, as Node's own
//! `stdio: "pipe"` does), whose blocked read can be called off without any
//! other file descriptor. A reader thread blocked in `read()` on a stream
//! that a backend's grandchild holds open would otherwise wait for as long
//! as that process lives, keeping the thread and the descriptor in the host.
//!
//! Why a socket and not a pipe: `shutdown(SHUT_RD)` on the host's end wakes
//! a blocked `read()` with end of file, and stays in force for every later
//! read. A pipe has no such call; waking its reader took a private wake pipe
//! per stream (two descriptors more per stream, four per session, which
//! capped a host's sessions near 120 under the common `ulimit -n 1024`).
//!
//! [`OutputStream`]'s [`StreamControl`] can *stop* it (the next read returns
//! end of file: disposal) or *cut it off* (what the stream holds now is
//! still read, up to a budget, then it ends as `bridge_core::reader::Cut`:
//! the backend has exited, and what still holds the stream must not keep
//! the reader).

use std::io::Read;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bridge_core::reader::Cut;

/// After a cut-off, at most this much more is read (the backend's last
/// output is at most what the socket buffers; a chatty descendant is cut).
const CUT_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// Creates the socket pair of one output stream: the host's end (read by
/// an [`OutputStream`]) and the child's (its stdout or stderr). The child's
/// end may queue `buffer_bytes` before the backend waits in `write()`.
pub(crate) fn output_pair(buffer_bytes: usize) -> std::io::Result<(UnixStream, UnixStream)> {
    let (host, child) = UnixStream::pair()?;
    // Best effort: the kernel caps these (`net.core.wmem_max`/`rmem_max`).
    let size = buffer_bytes.min(i32::MAX as usize);
    let _ = nix::sys::socket::setsockopt(&child, nix::sys::socket::sockopt::SndBuf, &size);
    let _ = nix::sys::socket::setsockopt(&host, nix::sys::socket::sockopt::RcvBuf, &size);
    // The host only reads: the child reading its stdout sees end of file.
    let _ = host.shutdown(Shutdown::Write);
    Ok((host, child))
}

/// A Unix socket pair for a child's stdin or its supervisor's control
/// channel: `[host, child]` file descriptors. The host wraps its end in a
/// `net.Socket`, which then owns it; the caller closes the child's end once
/// the child has it. The spawner makes every stdio channel itself, so that
/// a spawn that fails for want of descriptors leaves none behind (Node's
/// own `stdio: "pipe"` kept both host ends open then).
#[napi_derive::napi(catch_unwind)]
pub fn socket_pair() -> napi::Result<Vec<i32>> {
    use std::os::fd::IntoRawFd;
    let (host, child) = UnixStream::pair()?;
    Ok(vec![host.into_raw_fd(), child.into_raw_fd()])
}

/// Closes a descriptor [`socket_pair`] made (the child's end, once the
/// child has it), with `close(2)` alone. Node's and Bun's `fs.closeSync` do
/// the same, but Deno's closes only descriptors Deno itself opened (`EBADF`
/// for any other), and a `net.Socket` around the descriptor would
/// `shutdown()` the socket on destroy, ending it for the child too.
#[napi_derive::napi(catch_unwind)]
pub fn close_descriptor(fd: i32) -> napi::Result<()> {
    use std::os::fd::{FromRawFd, OwnedFd};
    if fd < 0 {
        return Err(napi::Error::from_reason(format!("not a descriptor: {fd}")));
    }
    // SAFETY: `close` takes it back out with `into_raw_fd` before closing,
    // so no `OwnedFd` ever drops a descriptor the caller no longer owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    nix::unistd::close(owned).map_err(|errno| napi::Error::from_reason(format!("close({fd}): {errno}")))
}

/// What a stream's owner can tell a blocked or future read.
pub(crate) struct StreamControl {
    /// The socket, for `shutdown()`, while the reader may still use it; the
    /// reader lets go of it when it ends, so that a stale `shutdown()` can
    /// never reach a descriptor that was closed and reused.
    socket: Mutex<Option<Arc<UnixStream>>>,
    stopped: AtomicBool,
    cut: AtomicBool,
    /// The reader is inside `read()` (or about to enter it).
    reading: AtomicBool,
}

impl StreamControl {
    /// The next read returns end of file.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Reads take what the stream holds now, then it ends as cut.
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Wakes a blocked read. Only while the reader is in `read()`: then
    /// nothing is queued (or it would have returned), so the shutdown loses
    /// nothing, even where it discards what is queued (BSD, macOS). A reader
    /// outside `read()` sees the flags before its next one (the flag is
    /// stored before `reading` is read here, and `reading` before the flags
    /// are read there: one of the two sides sees the other).
    fn wake(&self) {
        if !self.reading.load(Ordering::SeqCst) {
            return;
        }
        if let Some(socket) = self.socket.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = socket.shutdown(Shutdown::Read);
        }
    }
}

/// The host's end of an output stream, whose reads its [`StreamControl`]
/// can call off.
pub(crate) struct OutputStream {
    socket: Arc<UnixStream>,
    control: Arc<StreamControl>,
    /// Bytes that may still be read after a cut-off.
    budget: usize,
}

impl OutputStream {
    pub(crate) fn new(socket: UnixStream) -> (OutputStream, Arc<StreamControl>) {
        let socket = Arc::new(socket);
        let control = Arc::new(StreamControl {
            socket: Mutex::new(Some(socket.clone())),
            stopped: AtomicBool::new(false),
            cut: AtomicBool::new(false),
            reading: AtomicBool::new(false),
        });
        (
            OutputStream {
                socket,
                control: control.clone(),
                budget: CUT_BUDGET_BYTES,
            },
            control,
        )
    }

    /// Once cut: only what is queued now, without waiting.
    fn read_cut(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.budget == 0 {
            return Err(Cut::error());
        }
        let room = out.len().min(self.budget);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&*self.socket);
        loop {
            return match nix::sys::socket::recv(fd, &mut out[..room], nix::sys::socket::MsgFlags::MSG_DONTWAIT) {
                Ok(0) | Err(nix::errno::Errno::EAGAIN) => Err(Cut::error()),
                Ok(read) => {
                    self.budget -= read;
                    Ok(read)
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(error) => Err(error.into()),
            };
        }
    }
}

impl Read for OutputStream {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let control = self.control.clone();
        control.reading.store(true, Ordering::SeqCst);
        let stopped = control.stopped.load(Ordering::SeqCst);
        let cut = control.cut.load(Ordering::SeqCst);
        let result = if stopped {
            Ok(0)
        } else if cut {
            self.read_cut(out)
        } else {
            (&*self.socket).read(out)
        };
        control.reading.store(false, Ordering::SeqCst);
        match result {
            // End of file made by a cut-off's shutdown (what was queued came first).
            Ok(0) if !stopped && control.cut.load(Ordering::SeqCst) => Err(Cut::error()),
            other => other,
        }
    }
}

impl Drop for OutputStream {
    fn drop(&mut self) {
        // The reader is done: no shutdown may reach this descriptor later.
        self.control
            .socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    #[test]
    fn stop_wakes_a_blocked_read_with_end_of_file() {
        let (host, _child) = output_pair(64 * 1024).unwrap();
        let (mut stream, control) = OutputStream::new(host);
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 16];
            stream.read(&mut buffer).unwrap()
        });
        std::thread::sleep(Duration::from_millis(50));
        control.stop();
        assert_eq!(reader.join().unwrap(), 0);
    }

    #[test]
    fn a_cut_off_delivers_what_was_written_then_ends_as_cut() {
        let (host, mut child) = output_pair(64 * 1024).unwrap();
        let (mut stream, control) = OutputStream::new(host);
        child.write_all(b"last words\n").unwrap();
        control.cut();
        let mut buffer = [0u8; 64];
        let read = stream.read(&mut buffer).unwrap();
        assert_eq!(&buffer[..read], b"last words\n");
        let end = stream.read(&mut buffer).unwrap_err();
        assert!(end.get_ref().is_some_and(|e| e.is::<Cut>()));
    }

    #[test]
    fn a_cut_off_wakes_a_blocked_read_and_the_writer_holding_the_stream_is_let_go() {
        let (host, child) = output_pair(64 * 1024).unwrap();
        let (mut stream, control) = OutputStream::new(host);
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 16];
            stream.read(&mut buffer)
        });
        std::thread::sleep(Duration::from_millis(50));
        control.cut();
        let end = reader.join().unwrap().unwrap_err();
        assert!(end.get_ref().is_some_and(|e| e.is::<Cut>()));
        drop(child);
    }

    #[test]
    fn the_child_end_sees_end_of_file_when_it_reads() {
        let (_host, mut child) = output_pair(64 * 1024).unwrap();
        let mut buffer = [0u8; 4];
        assert_eq!(child.read(&mut buffer).unwrap(), 0);
    }
}
