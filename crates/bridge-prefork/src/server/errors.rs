//! What can go wrong with a server, and how it ended: the errors of its
//! start and of a fork request, and its exit.

/// Why a server did not become ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartErrorKind {
    /// The supervisor could not be started.
    Spawn,
    /// The server refused the app, with its stable code (`threads`,
    /// `event-loop`, `import-failed`, `bad-app`).
    Refused(String),
    /// The server (or the interpreter invocation) exited without a handshake.
    ExitedBeforeReady,
    /// The first line on the channel was not a handshake.
    BadHandshake,
    /// `wait_ready` gave up.
    Timeout,
}

/// A server that did not become ready: what happened, and its log's tail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub kind: StartErrorKind,
    pub message: String,
    pub log_tail: Vec<String>,
}

impl StartError {
    /// A stable code: the refusal's own, or `spawn-failed`,
    /// `exited-before-ready`, `bad-handshake`, `timeout`.
    pub fn code(&self) -> &str {
        match &self.kind {
            StartErrorKind::Spawn => "spawn-failed",
            StartErrorKind::Refused(code) => code,
            StartErrorKind::ExitedBeforeReady => "exited-before-ready",
            StartErrorKind::BadHandshake => "bad-handshake",
            StartErrorKind::Timeout => "timeout",
        }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "prefork server: {} ({})", self.message, self.code())
    }
}

impl std::error::Error for StartError {}

/// How the server ended (its supervisor's status: the server's own). For
/// a connection to a shared server ([`PreforkServer::connect`](super::PreforkServer::connect)),
/// the connection's end: nothing is known of the server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub log_tail: Vec<String>,
}

/// Why a fork request was not sent. No variant means the caller waited:
/// a request is sent at once or refused at once.
#[derive(Debug)]
pub enum ForkError {
    /// The server has not answered its handshake yet.
    NotReady,
    /// The server did not start, was shut down, or has exited.
    Unavailable(String),
    /// The server is not reading its requests: its channel is full (it is
    /// stopped or hung, or far behind). Nothing was sent.
    Busy,
    /// Making the conversation's sockets, or writing the request, failed.
    Io(std::io::Error),
}

impl ForkError {
    /// A stable code: `not-ready`, `unavailable`, `busy`, `io`.
    pub fn code(&self) -> &'static str {
        match self {
            ForkError::NotReady => "not-ready",
            ForkError::Unavailable(_) => "unavailable",
            ForkError::Busy => "busy",
            ForkError::Io(_) => "io",
        }
    }
}

impl std::fmt::Display for ForkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForkError::NotReady => write!(f, "the prefork server is not ready yet"),
            ForkError::Unavailable(why) => write!(f, "the prefork server is unavailable: {why}"),
            ForkError::Busy => write!(f, "the prefork server is not reading its requests (its channel is full: it is stopped, hung or far behind)"),
            ForkError::Io(error) => write!(f, "the fork request failed: {error}"),
        }
    }
}

impl std::error::Error for ForkError {}

impl From<std::io::Error> for ForkError {
    fn from(error: std::io::Error) -> Self {
        ForkError::Io(error)
    }
}
