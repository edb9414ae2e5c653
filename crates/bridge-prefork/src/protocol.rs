//! The messages between the host and the prefork server, and the lines of
//! a conversation's control socket (docs/prefork.md). Pure: no I/O.

use serde::{Deserialize, Serialize};

/// The version of this protocol: the server refuses to start on another.
/// 2: a fork request says how many descriptors it carries (`fds`), the
/// server takes the channel table as an argument.
pub const PROTOCOL: u32 = 2;

/// A fork request is exactly this many bytes: a JSON object padded with
/// spaces, then `\n`. The server reads exactly one request at a time, so
/// that the descriptors sent with a request are received with it on every
/// Unix (stream sockets keep no message boundaries of their own).
pub const REQUEST_BYTES: usize = 128;

/// At most this many descriptors go with a fork request: the channels of
/// `bridge_launch::LAYOUT`, in its order (the required ones, then the
/// declared ones); the request's `fds` says how many.
pub const MAX_REQUEST_FDS: usize = bridge_launch::LAYOUT.len();

/// The server's first line on the channel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Handshake {
    /// The app's module is imported and forking it is safe.
    Ready(Ready),
    /// The server will not serve this app (and exits).
    Refused {
        /// Stable: `threads`, `event-loop`, `import-failed`, `bad-app`.
        code: String,
        message: String,
    },
}

/// What the server says when it is ready.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Ready {
    pub protocol: u32,
    /// The Python server's pid (under `uv run`, not the supervisor's child).
    pub pid: u32,
    pub python: String,
    /// The installed `agentlane` distribution's version, when known.
    pub agentlane: Option<String>,
}

/// Parses the server's handshake line.
pub fn parse_handshake(line: &str) -> Result<Handshake, String> {
    serde_json::from_str(line.trim_end()).map_err(|error| format!("not a handshake line ({error}): {}", head(line)))
}

#[derive(Serialize)]
struct ForkRequest {
    #[serde(rename = "type")]
    kind: &'static str,
    id: u64,
    term_grace_ms: u64,
    /// How many descriptors come with it: the server refuses a request whose
    /// count differs from what it received, instead of serving half of it.
    fds: usize,
}

/// The bytes of one fork request with `fds` descriptors (they go with them).
pub fn encode_fork_request(id: u64, term_grace_ms: u64, fds: usize) -> [u8; REQUEST_BYTES] {
    let json = serde_json::to_vec(&ForkRequest {
        kind: "fork",
        id,
        term_grace_ms,
        fds,
    })
    .expect("a fork request always serialises");
    // Two u64s, a small count and fixed keys: always well under the size.
    let mut bytes = [b' '; REQUEST_BYTES];
    bytes[..json.len()].copy_from_slice(&json);
    bytes[REQUEST_BYTES - 1] = b'\n';
    bytes
}

/// A line of a conversation's control socket, written by its supervisor
/// (`crates/bridge-supervisor`) or, when the fork itself failed, by the
/// server in the supervisor's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The backend runs; an adopting supervisor adds its own pid.
    Started { pid: u32, supervisor: Option<u32> },
    /// The backend could not be started (then the supervisor exits 127).
    Failed { code: String, errno: i32, message: String },
    /// The last line: the backend exited with this code…
    Exited(i32),
    /// …or was ended by this signal.
    Signaled(i32),
}

/// Parses one control line (without its `\n`); `None` for anything else.
pub fn parse_report(line: &str) -> Option<Report> {
    let (word, rest) = line.split_once(' ')?;
    match word {
        "started" => {
            let mut pids = rest.split(' ');
            let pid = number(pids.next()?)?;
            let supervisor = match pids.next() {
                Some(pid) => Some(number(pid)?),
                None => None,
            };
            pids.next().is_none().then_some(Report::Started { pid, supervisor })
        }
        "failed" => {
            let mut parts = rest.splitn(3, ' ');
            let code = parts.next()?.to_owned();
            let errno = number(parts.next()?)?;
            let message = parts.next().unwrap_or("").to_owned();
            Some(Report::Failed { code, errno, message })
        }
        "exited" => Some(Report::Exited(number(rest)?)),
        "signaled" => Some(Report::Signaled(number(rest)?)),
        _ => None,
    }
}

fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok())?
}

fn head(line: &str) -> &str {
    let end = line.char_indices().nth(200).map_or(line.len(), |(i, _)| i);
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_its_fixed_size_and_json() {
        let bytes = encode_fork_request(u64::MAX, u64::MAX, MAX_REQUEST_FDS);
        assert_eq!(bytes.len(), REQUEST_BYTES);
        assert_eq!(bytes[REQUEST_BYTES - 1], b'\n');
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["type"], "fork");
        assert_eq!(value["term_grace_ms"], u64::MAX);
        assert_eq!(value["fds"], 5);
    }

    #[test]
    fn control_lines() {
        assert_eq!(parse_report("started 12"), Some(Report::Started { pid: 12, supervisor: None }));
        assert_eq!(parse_report("started 12 34"), Some(Report::Started { pid: 12, supervisor: Some(34) }));
        assert_eq!(
            parse_report("failed ENOENT 2 No such file or directory (os error 2)"),
            Some(Report::Failed { code: "ENOENT".into(), errno: 2, message: "No such file or directory (os error 2)".into() })
        );
        assert_eq!(parse_report("exited 0"), Some(Report::Exited(0)));
        assert_eq!(parse_report("signaled 9"), Some(Report::Signaled(9)));
        for bad in ["started", "started x", "started 1 2 3", "started -1", "exited", "exited 1 2", "hello 1", ""] {
            assert_eq!(parse_report(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn handshakes() {
        let ready = parse_handshake(r#"{"type":"ready","protocol":2,"pid":5,"python":"3.12.1","agentlane":"0.22.0"}"#).unwrap();
        assert!(matches!(ready, Handshake::Ready(Ready { pid: 5, .. })));
        let refused = parse_handshake("{\"type\":\"refused\",\"code\":\"threads\",\"message\":\"no\"}\n").unwrap();
        assert_eq!(refused, Handshake::Refused { code: "threads".into(), message: "no".into() });
        assert!(parse_handshake("Traceback (most recent call last):").is_err());
    }
}
