//! One forked conversation, for a host that reads its output itself.

use std::io::{BufRead, BufReader, PipeReader};
use std::os::unix::net::UnixStream;

use crate::protocol::{parse_report, Report};

/// The host's ends of a conversation: write commands to `stdin`, read
/// events from `stdout`; `control` says when its backend runs and how it
/// ended. Dropping `control` ends the conversation (its supervisor sees
/// end of file: TERM, grace, KILL, as a cold backend's would).
pub struct Conversation {
    pub stdin: UnixStream,
    pub stdout: PipeReader,
    pub stderr: PipeReader,
    pub control: Control,
    /// The host's end of the host channel (docs/host-channel.md), when the
    /// start declared it.
    pub host_channel: Option<UnixStream>,
}

impl Conversation {
    pub(crate) fn new(ends: crate::server::HostEnds, stdout: PipeReader, stderr: PipeReader) -> Conversation {
        Conversation {
            stdin: ends.stdin,
            stdout,
            stderr,
            control: Control::new(ends.control),
            host_channel: ends.host_channel,
        }
    }
}

/// The reports of a conversation's control socket.
pub struct Control {
    reader: BufReader<UnixStream>,
}

impl Control {
    pub fn new(socket: UnixStream) -> Control {
        Control {
            reader: BufReader::new(socket),
        }
    }

    /// The next report (lines that are none are skipped); `None` at the
    /// end of the socket (after an exit line, or when the supervisor died).
    pub fn next_report(&mut self) -> std::io::Result<Option<Report>> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            if let Some(report) = parse_report(line.trim_end_matches('\n')) {
                return Ok(Some(report));
            }
        }
    }

    /// The socket, for a host that reads it its own way.
    pub fn socket(&self) -> &UnixStream {
        self.reader.get_ref()
    }
}
