//! The watcher thread of one server: it reads the handshake on the request
//! channel, the server's log on stdout/stderr and its supervisor's control
//! socket, keeps the log's tail, reaps the supervisor, and publishes each
//! change to [`Shared`](super::Shared). The log is read to its current end
//! before a handshake line is taken, so that a refusal's tail holds the
//! whole traceback the server wrote before it.

use std::io::{ErrorKind, PipeReader, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::sync::Arc;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::{ServerEvent, ServerExit, ServerStatus, Shared, StartError, StartErrorKind, LOG_LINES, LOG_LINE_BYTES};
use crate::protocol::{parse_handshake, parse_report, Handshake, Report};

/// Lines of one descriptor, as they come.
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
    ended: bool,
}

impl Lines {
    /// Reads what there is (one read: the descriptor was readable).
    fn read(&mut self, source: &mut impl Read) -> Vec<String> {
        self.read_some(source).0
    }

    /// One read, and whether another may find more (it filled the buffer,
    /// or was interrupted).
    fn read_some(&mut self, source: &mut impl Read) -> (Vec<String>, bool) {
        let mut buffer = [0u8; 8192];
        let more = match source.read(&mut buffer) {
            Ok(0) => {
                self.ended = true;
                false
            }
            Ok(n) => {
                self.pending.extend_from_slice(&buffer[..n]);
                n == buffer.len()
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => true,
            Err(error) if error.kind() == ErrorKind::WouldBlock => false,
            Err(_) => {
                self.ended = true;
                false
            }
        };
        let mut lines = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            lines.push(String::from_utf8_lossy(&line[..end]).into_owned());
        }
        if self.ended && !self.pending.is_empty() {
            lines.push(String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned());
        }
        (lines, more)
    }
}

/// A connection to a shared server has only the channel: its log, its
/// supervisor and its exit are the sharing host's.
pub(super) struct Watcher {
    pub(super) shared: Arc<Shared>,
    pub(super) channel: UnixStream,
    pub(super) log: Option<PipeReader>,
    pub(super) control: Option<UnixStream>,
    pub(super) child: Option<Child>,
}

impl Watcher {
    pub(super) fn run(mut self) {
        let mut channel = Lines::default();
        let mut log = Lines { ended: self.log.is_none(), ..Lines::default() };
        let mut control = Lines { ended: self.control.is_none(), ..Lines::default() };
        if let Some(pipe) = &self.log {
            // Drained without waiting before each handshake line (below).
            let _ = nix::fcntl::fcntl(pipe, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
        }
        let mut reported: Option<Report> = None;
        // The supervisor could not start the interpreter invocation.
        let mut failed: Option<String> = None;
        // Until the supervisor's control socket ends; then, without
        // waiting, what the others still hold.
        let mut draining = false;
        loop {
            let mut fds: Vec<PollFd> = Vec::new();
            let mut which: Vec<usize> = Vec::new();
            let watched = [
                (channel.ended, Some(self.channel.as_fd())),
                (log.ended, self.log.as_ref().map(|l| l.as_fd())),
                (control.ended, self.control.as_ref().map(|c| c.as_fd())),
            ];
            for (i, (ended, fd)) in watched.into_iter().enumerate() {
                if let (false, Some(fd)) = (ended, fd) {
                    fds.push(PollFd::new(fd, PollFlags::POLLIN));
                    which.push(i);
                }
            }
            if fds.is_empty() {
                break;
            }
            let timeout = if draining { PollTimeout::ZERO } else { PollTimeout::NONE };
            match poll(&mut fds, timeout) {
                Ok(0) => break,
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            }
            let ready: Vec<usize> = fds
                .iter()
                .zip(&which)
                .filter(|(fd, _)| fd.revents().is_some_and(|r| !r.is_empty()))
                .map(|(_, &i)| i)
                .collect();
            for i in ready {
                match i {
                    0 => {
                        let lines = channel.read(&mut self.channel);
                        if !lines.is_empty() || channel.ended {
                            // The server flushes its output before it writes
                            // on the channel: all of it is in the log pipe
                            // now, and goes into the tail first.
                            self.drain_log(&mut log);
                        }
                        for line in lines {
                            self.handshake(&line);
                        }
                        if channel.ended {
                            self.shared.publish(ServerEvent::Gone);
                        }
                    }
                    1 => self.drain_log(&mut log),
                    _ => {
                        let Some(socket) = self.control.as_mut() else { continue };
                        for line in control.read(socket) {
                            match parse_report(&line) {
                                Some(Report::Failed { code, message, .. }) => failed = Some(format!("{message} ({code})")),
                                Some(report) => reported = Some(report),
                                None => {}
                            }
                        }
                        if control.ended {
                            draining = true;
                        }
                    }
                }
            }
        }
        self.finish(reported, failed);
    }

    /// Reads the log until nothing more is there now.
    fn drain_log(&mut self, log: &mut Lines) {
        let Some(pipe) = self.log.as_mut() else { return };
        while !log.ended {
            let (lines, more) = log.read_some(pipe);
            keep_log(&self.shared, lines);
            if !more {
                break;
            }
        }
    }

    /// The first line on the channel decides the start; later ones are ignored.
    fn handshake(&self, line: &str) {
        let mut state = self.shared.lock();
        if !matches!(state.status, ServerStatus::Starting) {
            return;
        }
        let log_tail = || state.log.iter().cloned().collect::<Vec<_>>();
        let status = match parse_handshake(line) {
            Ok(Handshake::Ready(ready)) if ready.protocol == crate::protocol::PROTOCOL => ServerStatus::Ready(ready),
            Ok(Handshake::Ready(ready)) => ServerStatus::Failed(StartError {
                kind: StartErrorKind::BadHandshake,
                message: format!("the server speaks protocol {}, this host {}", ready.protocol, crate::protocol::PROTOCOL),
                log_tail: log_tail(),
            }),
            Ok(Handshake::Refused { code, message }) => ServerStatus::Failed(StartError {
                kind: StartErrorKind::Refused(code),
                message,
                log_tail: log_tail(),
            }),
            Err(message) => ServerStatus::Failed(StartError {
                kind: StartErrorKind::BadHandshake,
                message,
                log_tail: log_tail(),
            }),
        };
        state.status = status.clone();
        state.import_output = state.log.iter().cloned().collect();
        drop(state);
        self.shared.publish(match status {
            ServerStatus::Ready(ready) => ServerEvent::Ready(ready),
            ServerStatus::Failed(error) => ServerEvent::Failed(error),
            ServerStatus::Starting => unreachable!("a handshake decides"),
        });
    }

    /// The supervisor's control socket has ended: reap it and say how the server ended.
    fn finish(mut self, reported: Option<Report>, failed: Option<String>) {
        self.shared.lock().gone = true;
        let status = loop {
            let Some(child) = self.child.as_mut() else { break None };
            match child.wait() {
                Ok(status) => break Some(status),
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break None,
            }
        };
        let (code, signal) = match (reported, status) {
            (Some(Report::Exited(code)), _) => (Some(code), None),
            (Some(Report::Signaled(signal)), _) => (None, Some(signal)),
            (_, Some(status)) => (status.code(), status.signal()),
            _ => (None, None),
        };
        let log_tail = self.shared.log_tail();
        let exit = ServerExit { code, signal, log_tail: log_tail.clone() };
        let failed = {
            let mut state = self.shared.lock();
            state.exit = Some(exit.clone());
            if matches!(state.status, ServerStatus::Starting) {
                let error = StartError {
                    kind: StartErrorKind::ExitedBeforeReady,
                    message: match (code, signal) {
                        _ if failed.is_some() => format!("its command could not be started: {}", failed.unwrap_or_default()),
                        (Some(code), _) => format!("the server exited with code {code} before its handshake"),
                        (_, Some(signal)) => format!("the server was ended by signal {signal} before its handshake"),
                        _ => "the server ended before its handshake".into(),
                    },
                    log_tail,
                };
                state.status = ServerStatus::Failed(error.clone());
                Some(error)
            } else {
                None
            }
        };
        if let Some(error) = failed {
            self.shared.publish(ServerEvent::Failed(error));
        }
        self.shared.publish(ServerEvent::Exited(exit));
    }
}

/// Keeps the log's last lines, each cut to its byte limit.
fn keep_log(shared: &Shared, lines: Vec<String>) {
    if lines.is_empty() {
        return;
    }
    let mut state = shared.lock();
    for mut line in lines {
        if line.len() > LOG_LINE_BYTES {
            let mut end = LOG_LINE_BYTES;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
        }
        if state.log.len() == LOG_LINES {
            state.log.pop_front();
        }
        state.log.push_back(line);
    }
}
