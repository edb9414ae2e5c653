//! Warm starts (`--warm`): the bridge's prefork server, kept serving. One
//! server imports the app once; each warm conversation is a fork of it.
//!
//! - A server that died (killed, crashed) is replaced by a new one on the
//!   next warm start, as the Node package does; one that refused the app
//!   (`threads`, `event-loop`, `import-failed`, `bad-app`: the app's own
//!   doing) is not, and warm starts are off from then on.
//! - Nothing waits past the caller's deadline (the ready timeout from the
//!   fork request): not the handshake of a new server, not the fork's start
//!   report, not the fork request itself (a stopped server's full socket),
//!   which runs on a blocking thread whose late result is killed.
//! - What a warm start that could not be made falls back to is the
//!   caller's (`start.rs`, `--warm-fallback`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bridge_prefork::{
    PreforkServer, ServerEvent, ServerSpec, ServerStatus, StartError, StartErrorKind,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::backend::{Backend, ForkFailure, Output};

/// Why warm starts are not possible now (a fallback may follow).
#[derive(Debug, Clone)]
pub struct Unavailable(pub String);

/// Why one warm start failed.
#[derive(Debug)]
pub enum WarmError {
    /// No fork could be made (no server, a refused app, a failed fork):
    /// the caller falls back or fails, as configured.
    Unavailable(Unavailable),
    /// The deadline passed first (a server that does not answer).
    TimedOut(String),
}

enum State {
    Serving(PreforkServer),
    /// The app was refused, or the supervisor is missing: for good.
    Off(String),
    /// The bridge is stopping.
    Stopped,
}

pub struct Warm {
    spec: ServerSpec,
    term_grace: Duration,
    state: Mutex<State>,
    /// Set when the bridge stops: a server's exit is then expected.
    stopping: Arc<AtomicBool>,
}

impl Warm {
    /// Starts the first server (its handshake comes later: [`Warm::ready`]).
    pub fn start(spec: ServerSpec, term_grace: Duration) -> Result<Warm, Unavailable> {
        let stopping = Arc::new(AtomicBool::new(false));
        let server = start_server(&spec, term_grace, &stopping)?;
        Ok(Warm {
            spec,
            term_grace,
            state: Mutex::new(State::Serving(server)),
            stopping,
        })
    }

    /// Warm starts off from the start (no supervisor): every warm start
    /// falls back.
    pub fn off(spec: ServerSpec, term_grace: Duration, why: String) -> Warm {
        Warm {
            spec,
            term_grace,
            state: Mutex::new(State::Off(why)),
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a warm start may be made now (capability "warm"): a server
    /// serves, or a new one would be started for it.
    pub fn available(&self) -> bool {
        matches!(*self.lock(), State::Serving(_))
    }

    /// Waits for the current server's handshake, at most `timeout` (the
    /// bridge's start).
    pub async fn ready(&self, timeout: Duration) -> Result<(), Unavailable> {
        let server = self.current(None)?;
        self.handshake(server, Instant::now() + timeout)
            .await
            .map_err(|error| match error {
                WarmError::Unavailable(why) => why,
                WarmError::TimedOut(why) => Unavailable(why),
            })
    }

    /// The server to fork from: the current one, or a new one when the
    /// current one is `gone` (its supervisor's pid) or has exited.
    fn current(&self, gone: Option<u32>) -> Result<PreforkServer, Unavailable> {
        let mut state = self.lock();
        match &*state {
            State::Stopped => Err(Unavailable("agentlane-bridge is shutting down".into())),
            State::Off(why) => Err(Unavailable(why.clone())),
            State::Serving(server) => {
                let dead = server.exit().is_some()
                    || gone.is_some_and(|pid| server.supervisor_pid() == Some(pid))
                    || matches!(server.status(), ServerStatus::Failed(_));
                if !dead {
                    return Ok(server.clone());
                }
                eprintln!("agentlane-bridge: the prefork server is gone; starting a new one for warm starts");
                let server = start_server(&self.spec, self.term_grace, &self.stopping)?;
                *state = State::Serving(server.clone());
                Ok(server)
            }
        }
    }

    /// Waits for `server`'s handshake until `deadline`. A refusal of the
    /// app turns warm starts off.
    async fn handshake(&self, server: PreforkServer, deadline: Instant) -> Result<(), WarmError> {
        if matches!(server.status(), ServerStatus::Ready(_)) {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let waited = server.clone();
        let ready = tokio::task::spawn_blocking(move || waited.wait_ready(Some(left)))
            .await
            .map_err(|e| WarmError::Unavailable(Unavailable(e.to_string())))?;
        match ready {
            Ok(_) => Ok(()),
            Err(error) if error.kind == StartErrorKind::Timeout => {
                Err(WarmError::TimedOut(format!(
                    "the prefork server did not get ready in time{}",
                    log_tail(&error)
                )))
            }
            Err(error) => {
                let why = format!(
                    "the prefork server did not start ({}): {}{}",
                    error.code(),
                    error.message,
                    log_tail(&error)
                );
                if matches!(error.kind, StartErrorKind::Refused(_)) {
                    let mut state = self.lock();
                    if matches!(&*state, State::Serving(current) if current.supervisor_pid() == server.supervisor_pid())
                    {
                        eprintln!("agentlane-bridge: warm starts are off: {why}");
                        *state = State::Off(why.clone());
                    }
                }
                Err(WarmError::Unavailable(Unavailable(why)))
            }
        }
    }

    /// Forks one backend, ready to read, by `deadline`. A server found
    /// gone is replaced once.
    pub async fn fork(
        &self,
        deadline: Instant,
        host_channel: bool,
    ) -> Result<(Backend, mpsc::Receiver<Output>), WarmError> {
        let mut gone = None;
        loop {
            let server = self.current(gone).map_err(WarmError::Unavailable)?;
            self.handshake(server.clone(), deadline).await?;
            match fork_by(server.clone(), self.term_grace, deadline, host_channel).await {
                Ok(started) => return Ok(started),
                // Replaced only once it has really exited: a server that
                // refuses a fork for another reason keeps serving the
                // others (this start falls back or fails).
                Err(ForkFailure::ServerGone(_)) if gone.is_none() && exited(&server, deadline).await => {
                    // The bridge's own servers always have a supervisor pid
                    // (only a connection to a shared server has none).
                    gone = server.supervisor_pid().or(Some(0))
                }
                Err(ForkFailure::TimedOut) => {
                    return Err(WarmError::TimedOut(format!(
                        "the prefork server did not fork the backend within the ready timeout (is it stopped?){}",
                        pid_of(&server)
                    )))
                }
                Err(failure) => return Err(WarmError::Unavailable(Unavailable(failure.to_string()))),
            }
        }
    }

    /// No more forks: the server exits once its forks have ended.
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let State::Serving(server) = std::mem::replace(&mut *self.lock(), State::Stopped) {
            server.shutdown();
        }
    }
}

/// Starts a server under its supervisor; its unexpected exit is said on
/// stderr.
fn start_server(
    spec: &ServerSpec,
    term_grace: Duration,
    stopping: &Arc<AtomicBool>,
) -> Result<PreforkServer, Unavailable> {
    let stopping = stopping.clone();
    let observer = Box::new(move |event: &ServerEvent| {
        if let ServerEvent::Exited(exit) = event {
            if !stopping.load(Ordering::SeqCst) {
                let how = match (exit.code, exit.signal) {
                    (Some(code), _) => format!("status {code}"),
                    (None, Some(signal)) => format!("signal {signal}"),
                    _ => "an unknown status".into(),
                };
                eprintln!(
                    "agentlane-bridge: the prefork server exited with {how}{}; the next warm start starts a new one",
                    exit.log_tail.last().map(|line| format!(" ({line})")).unwrap_or_default()
                );
            }
        }
    });
    PreforkServer::start(spec, term_grace, Some(observer))
        .map_err(|error| Unavailable(format!("cannot start the prefork server: {error}")))
}

fn log_tail(error: &StartError) -> String {
    error
        .log_tail
        .last()
        .map(|line| format!(": {line}"))
        .unwrap_or_default()
}

/// Whether `server` has exited, waiting a little for its exit to be
/// reaped (its channel ends first) but not past `deadline`.
async fn exited(server: &PreforkServer, deadline: Instant) -> bool {
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .min(Duration::from_millis(500));
    let server = server.clone();
    tokio::task::spawn_blocking(move || server.wait_exit(Some(wait)).is_some())
        .await
        .unwrap_or(false)
}

/// The server's pid, for a message.
fn pid_of(server: &PreforkServer) -> String {
    match server.status() {
        ServerStatus::Ready(ready) => format!(" (server pid {})", ready.pid),
        _ => String::new(),
    }
}

/// One fork on a blocking thread, its result awaited until `deadline`. A
/// backend forked after the caller stopped waiting is killed at once.
async fn fork_by(
    server: PreforkServer,
    term_grace: Duration,
    deadline: Instant,
    host_channel: bool,
) -> Result<(Backend, mpsc::Receiver<Output>), ForkFailure> {
    let (answer, answered) = oneshot::channel();
    let until = deadline.into_std();
    tokio::task::spawn_blocking(move || {
        if let Err(Ok((backend, _))) = answer.send(Backend::fork(&server, term_grace, until, host_channel)) {
            backend.kill();
        }
    });
    match tokio::time::timeout_at(deadline, answered).await {
        Ok(Ok(forked)) => forked,
        Ok(Err(_)) => Err(ForkFailure::Failed(
            "the fork's thread ended without an answer".into(),
        )),
        Err(_) => Err(ForkFailure::TimedOut),
    }
}
