//! The bridge's conversations: each its own backend ([`Hosted`]), created,
//! found by id, listed, closed, and closed when idle. The registry holds no
//! lock across a backend's start or stop, and nothing one conversation does
//! reaches another: a crash, a slow client or a refusal stays in its own
//! [`Conversation`](crate::conversation::Conversation).

mod host;
pub mod host_plan;
pub mod ids;
pub mod start;
mod warm;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use connectrpc::ConnectError;
use tokio::sync::watch;

pub use host::{Failed, Hosted};
pub use host_plan::HostRequest;
pub use ids::DEFAULT_ID;
use start::{StartMode, Starter};

use crate::bounded::echo;
use crate::lifecycle::{ExitReport, Lifecycle};

/// How many ended conversations keep their error for late calls.
const ENDED_KEPT: usize = 256;

/// What the registry is given at start.
pub struct Limits {
    /// Open conversations at most (the default one included).
    pub max: usize,
    /// A created conversation idle this long is closed.
    pub idle_timeout: Option<Duration>,
    pub grace: Duration,
    /// The default conversation's host channel (`--tools FILE`).
    pub default_host: HostRequest,
    /// A tool call's deadline when the create gives none (`--tool-timeout-ms`).
    pub tool_timeout: Option<Duration>,
}

/// A place under `max` held by a start under way: given back when dropped
/// (the start failed, or its caller went away), or filled by the
/// conversation once it is ready.
struct Place<'a> {
    conversations: &'a Conversations,
    id: String,
    held: bool,
}

impl Place<'_> {
    /// The conversation takes its place among the open ones; `false` when
    /// the bridge is stopping (the place is given back).
    fn fill(mut self, hosted: &Arc<Hosted>) -> bool {
        let mut r = self.conversations.lock();
        r.starting -= 1;
        self.held = false;
        if r.stopping {
            return false;
        }
        r.open.push(hosted.clone());
        true
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.held {
            self.conversations.lock().starting -= 1;
        }
    }
}

#[derive(Default)]
struct Registry {
    /// Open conversations in creation order.
    open: Vec<Arc<Hosted>>,
    /// Starts under way (they hold a place under `max`).
    starting: usize,
    next_id: u64,
    /// Ended conversations' errors (newest last), for calls that still
    /// address them.
    ended: VecDeque<(String, ConnectError)>,
    /// The bridge is stopping: no more creates.
    stopping: bool,
}

pub struct Conversations {
    registry: Mutex<Registry>,
    pub starter: Starter,
    limits: Limits,
    /// Set once the default conversation's backend ended by itself while
    /// no other conversation was open (the bridge then exits, as a
    /// one-conversation bridge always did).
    default_lost: watch::Sender<bool>,
}

impl Conversations {
    pub fn new(starter: Starter, limits: Limits) -> Arc<Conversations> {
        Arc::new(Conversations {
            registry: Mutex::new(Registry::default()),
            starter,
            limits,
            default_lost: watch::channel(false).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn max(&self) -> usize {
        self.limits.max
    }

    pub fn idle_timeout(&self) -> Option<Duration> {
        self.limits.idle_timeout
    }

    /// Starts the default conversation (the bridge's startup; `stop` ends
    /// the wait for its ready).
    pub async fn start_default(
        self: &Arc<Self>,
        stop: &Lifecycle,
    ) -> Result<Arc<Hosted>, Failed> {
        let mode = self.starter.default_mode();
        let plan = self.limits.default_host.plan().map_err(|error| Failed {
            failure: crate::conversation::StartFailure {
                stage: "host-channel",
                message: error.message.clone().unwrap_or_default(),
                exit: None,
            },
            stderr: None,
            backend_pid: None,
        })?;
        let hosted = Hosted::start(DEFAULT_ID.into(), &self.starter, mode, Some(stop), plan).await?;
        self.lock().open.push(hosted.clone());
        self.watch_exit(hosted.clone());
        Ok(hosted)
    }

    /// `CreateConversation`: a place under `max`, a start (queued for a
    /// start slot when cold), its `ready`.
    ///
    /// A create whose caller goes away before the answer (a deadline, a
    /// closed connection: the call's future is dropped) is undone: its
    /// backend is killed wherever its start was, and its place is free. One
    /// that had its answer is open and listed, closable like any other.
    pub async fn create(self: &Arc<Self>, mode: Option<StartMode>, mut host: HostRequest) -> Result<Arc<Hosted>, ConnectError> {
        let mode = mode.unwrap_or_else(|| self.starter.default_mode());
        if host.call_timeout.is_none() {
            host.call_timeout = self.limits.tool_timeout;
        }
        let plan = host.plan()?;
        if mode == StartMode::Warm && !self.starter.warm_configured() {
            return Err(ConnectError::invalid_argument(
                "warm starts need the bridge to run with --warm (capability \"warm\")",
            ));
        }
        let place = self.reserve()?;
        let started = Hosted::start(place.id.clone(), &self.starter, mode, None, plan).await;
        let hosted = match started {
            Ok(hosted) => hosted,
            // The backend cannot serve what the conversation asked for
            // (its factory lacks the host module's line): not worth a retry.
            Err(failed) if failed.failure.stage == "host-channel" => {
                return Err(ConnectError::failed_precondition(failed.failure.message));
            }
            Err(failed) => {
                let stderr = failed.stderr.map(|l| format!(" (its last stderr line: {l})")).unwrap_or_default();
                return Err(ConnectError::unavailable(format!(
                    "the conversation's backend did not start [{}]: {}{stderr}",
                    failed.failure.stage, failed.failure.message
                )));
            }
        };
        // From here to the answer nothing waits: the conversation is open
        // (listed) before its caller can be told.
        if !place.fill(&hosted) {
            hosted.begin_closing();
            let grace = self.limits.grace;
            let closing = hosted.clone();
            tokio::spawn(async move { closing.stop(grace).await });
            return Err(ConnectError::unavailable("agentlane-bridge is shutting down"));
        }
        self.watch_exit(hosted.clone());
        if let Some(idle) = self.limits.idle_timeout {
            tokio::spawn(close_when_idle(Arc::downgrade(self), hosted.clone(), idle));
        }
        Ok(hosted)
    }

    /// A place under `max` for a conversation about to start, and its id.
    fn reserve(&self) -> Result<Place<'_>, ConnectError> {
        let mut r = self.lock();
        if r.stopping {
            return Err(ConnectError::unavailable("agentlane-bridge is shutting down"));
        }
        if r.open.len() + r.starting >= self.limits.max {
            return Err(ConnectError::resource_exhausted(format!(
                "this bridge hosts at most {} conversations (--max-conversations); close one first",
                self.limits.max
            )));
        }
        r.starting += 1;
        r.next_id += 1;
        Ok(Place {
            conversations: self,
            id: ids::conversation_id(r.next_id),
            held: true,
        })
    }

    /// The conversation a request addresses (empty: the default one).
    pub fn get(&self, id: &str) -> Result<Arc<Hosted>, ConnectError> {
        let id = if id.is_empty() { DEFAULT_ID } else { id };
        let r = self.lock();
        if let Some(hosted) = r.open.iter().find(|h| h.id == id) {
            return Ok(hosted.clone());
        }
        if let Some((_, error)) = r.ended.iter().rev().find(|(ended, _)| ended == id) {
            return Err(error.clone());
        }
        Err(ConnectError::not_found(if id == DEFAULT_ID {
            "this bridge has no default conversation (--no-default-conversation): create one and pass its conversation_id".to_owned()
        } else {
            format!("no conversation {} (never created, or closed)", echo(id))
        }))
    }

    pub fn list(&self) -> Vec<Arc<Hosted>> {
        self.lock().open.clone()
    }

    /// `CloseConversation`: its stop path, then it leaves the registry.
    pub async fn close(&self, id: &str, grace: Option<Duration>) -> Result<ExitReport, ConnectError> {
        let hosted = self.get(id)?;
        let grace = grace.filter(|g| !g.is_zero()).unwrap_or(self.limits.grace);
        hosted.begin_closing();
        let report = hosted.stop(grace).await;
        self.forget(&hosted, ConnectError::not_found(format!("the conversation {:?} was closed", hosted.id)));
        Ok(report)
    }

    /// The bridge's stop: no more creates, every conversation closed at
    /// once; the default one's exit is returned (for `Shutdown`).
    pub async fn close_all(&self, grace: Duration) -> Option<ExitReport> {
        let open = {
            let mut r = self.lock();
            r.stopping = true;
            r.open.clone()
        };
        self.starter.shutdown();
        let stops = open.iter().map(|hosted| async move {
            hosted.begin_closing();
            (hosted.id == DEFAULT_ID, hosted.stop(grace).await)
        });
        let reports = futures::future::join_all(stops).await;
        reports.into_iter().find(|(default, _)| *default).map(|(_, report)| report)
    }

    /// Resolves once the default conversation's backend ended by itself
    /// with no other conversation open.
    pub async fn default_lost(&self) {
        let _ = self.default_lost.subscribe().wait_for(|lost| *lost).await;
    }

    /// Removes a conversation (once), keeping its error for late calls.
    fn forget(&self, hosted: &Arc<Hosted>, error: ConnectError) {
        let mut r = self.lock();
        let before = r.open.len();
        r.open.retain(|h| !Arc::ptr_eq(h, hosted));
        if r.open.len() != before {
            r.ended.push_back((hosted.id.clone(), error));
            if r.ended.len() > ENDED_KEPT {
                r.ended.pop_front();
            }
        }
    }

    /// A backend that exits by itself frees its place; calls that still
    /// address it get its exit as `unavailable`.
    fn watch_exit(self: &Arc<Self>, hosted: Arc<Hosted>) {
        let conversations = Arc::downgrade(self);
        tokio::spawn(async move {
            let report = hosted.exit.exited().await;
            let Some(conversations) = conversations.upgrade() else { return };
            if hosted.closing() {
                return;
            }
            eprintln!(
                "agentlane-bridge: the backend of conversation {:?} exited unexpectedly with {}",
                hosted.id, report.status
            );
            let error = hosted
                .conversation
                .ended_error()
                .unwrap_or_else(|| ConnectError::unavailable("the backend has exited"));
            conversations.forget(&hosted, error);
            if hosted.id == DEFAULT_ID && conversations.lock().open.is_empty() {
                conversations.default_lost.send_replace(true);
            }
        });
    }
}

/// Closes a conversation once it has been idle (no run, no open stream, no
/// call) for `idle`.
async fn close_when_idle(conversations: std::sync::Weak<Conversations>, hosted: Arc<Hosted>, idle: Duration) {
    loop {
        let wait = match hosted.conversation.idle_for() {
            Some(for_) if for_ >= idle => break,
            Some(for_) => idle - for_,
            None => idle,
        };
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
        if hosted.closing() || hosted.conversation.ended_error().is_some() {
            return;
        }
    }
    let Some(conversations) = conversations.upgrade() else { return };
    eprintln!(
        "agentlane-bridge: closing conversation {:?}, idle for {} ms (--idle-timeout-ms)",
        hosted.id,
        idle.as_millis()
    );
    let _ = conversations.close(&hosted.id, None).await;
}
