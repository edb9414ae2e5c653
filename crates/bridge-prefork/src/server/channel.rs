//! The host's end of a request channel: fork requests are sent without
//! ever waiting for the server. A server that stops reading (stopped,
//! hung) fills the socket's buffer; the next request is then refused at
//! once (`ForkError::Busy`) instead of blocking the caller's thread (the
//! Node host's JavaScript thread, `agentlane-bridge`'s runtime).

use std::io::{ErrorKind, IoSlice, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::errno::Errno;
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};

use super::ForkError;
use crate::protocol::REQUEST_BYTES;

pub(super) struct RequestChannel {
    stream: UnixStream,
    /// The bytes of the last request the kernel did not take with its
    /// descriptors: sent before any other request (the server reads
    /// requests back to back). Linux and macOS take a 128-byte message
    /// whole or not at all, so this stays empty there; it keeps the
    /// stream whole wherever that is not so.
    owed: Vec<u8>,
}

impl RequestChannel {
    /// The host's end, made non-blocking (the watcher's copy shares that:
    /// it only reads after `poll` says so).
    pub(super) fn new(stream: UnixStream) -> std::io::Result<RequestChannel> {
        stream.set_nonblocking(true)?;
        Ok(RequestChannel { stream, owed: Vec::new() })
    }

    /// One request and its descriptors, at once or not at all.
    pub(super) fn send(&mut self, bytes: &[u8; REQUEST_BYTES], fds: &[RawFd]) -> Result<(), ForkError> {
        if !self.flush()? {
            return Err(ForkError::Busy);
        }
        let rights = [ControlMessage::ScmRights(fds)];
        let sent = loop {
            match sendmsg::<UnixAddr>(self.stream.as_raw_fd(), &[IoSlice::new(bytes)], &rights, flags(), None) {
                Ok(sent) => break sent,
                Err(Errno::EINTR) => continue,
                Err(errno) => return Err(refusal(errno.into())),
            }
        };
        if sent == 0 {
            return Err(ForkError::Busy);
        }
        self.owed = bytes[sent..].to_vec();
        self.flush()?;
        Ok(())
    }

    /// Sends what is owed, as far as the kernel takes it now; `true` once
    /// nothing is.
    fn flush(&mut self) -> Result<bool, ForkError> {
        while !self.owed.is_empty() {
            match (&self.stream).write(&self.owed) {
                Ok(0) => return Err(ForkError::Io(ErrorKind::WriteZero.into())),
                Ok(n) => drop(self.owed.drain(..n)),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(error) => return Err(refusal(error)),
            }
        }
        Ok(true)
    }

    /// No more requests: the server reads end of file (after what is owed,
    /// if the kernel takes it now; else the server drops the cut request).
    pub(super) fn shutdown(mut self) {
        let _ = self.flush();
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }
}

fn flags() -> MsgFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    return MsgFlags::MSG_DONTWAIT;
}

fn refusal(error: std::io::Error) -> ForkError {
    match error.raw_os_error() {
        // ETOOMANYREFS: more descriptors in flight than the host's limit
        // allows, i.e. requests the server has not read (Linux).
        Some(code) if code == Errno::EAGAIN as i32 || code == Errno::ETOOMANYREFS as i32 => ForkError::Busy,
        Some(code) if code == Errno::EPIPE as i32 || code == Errno::ECONNRESET as i32 => {
            ForkError::Unavailable(format!("it closed its channel ({error})"))
        }
        _ => ForkError::Io(error),
    }
}
