//! One hosted conversation's life: its backend started through the seam
//! (`start.rs`), its output pumped into its [`Conversation`], its `ready`
//! awaited, and its one stop path (`shutdown`, grace, SIGTERM, SIGKILL to
//! its process group). Nothing here touches another conversation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bridge_core::reader::{Item as ReaderItem, StreamEnd};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use super::start::{StartMode, Started, Starter};
use crate::backend::{self, ExitStatus};
use crate::conversation::{Conversation, HostPlan, StartFailure, EXIT_DRAIN};
use crate::lifecycle::{ExitReport, Lifecycle};

/// How long the group's leftovers get after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(500);

pub struct Hosted {
    pub id: String,
    pub conversation: Arc<Conversation>,
    /// Its backend's exit, reported once (the stop part is unused).
    pub exit: Arc<Lifecycle>,
    pub mode: StartMode,
    pub ready_line: String,
    pub backend_pid: u32,
    /// A `CloseConversation` (or the bridge's stop) has begun.
    closing: AtomicBool,
}

/// A backend between its spawn and its `ready`: killed if its start is
/// dropped there (the caller went away), so that an abandoned start leaves
/// no process behind.
struct Unready<'a> {
    id: &'a str,
    conversation: Option<&'a Arc<Conversation>>,
}

impl Unready<'_> {
    /// The start came to an end by itself (ready, failed or timed out).
    fn defuse(mut self) {
        self.conversation = None;
    }
}

impl Drop for Unready<'_> {
    fn drop(&mut self) {
        if let Some(conversation) = self.conversation.take() {
            eprintln!(
                "agentlane-bridge: the start of conversation {:?} was given up by its caller before its backend was ready; the backend is killed",
                self.id
            );
            conversation.backend().kill();
        }
    }
}

/// A start that failed, with what the `failed` line reports.
pub struct Failed {
    pub failure: StartFailure,
    pub stderr: Option<String>,
    pub backend_pid: Option<u32>,
}

impl Hosted {
    /// Starts a backend and waits for its `ready`, at most the ready
    /// timeout from its own spawn (or `stop`, for the default
    /// conversation: a stop asked for meanwhile ends the wait). A backend
    /// that did not become ready is killed before this returns, and so is
    /// one whose start is dropped (its caller went away).
    pub async fn start(
        id: String,
        starter: &Starter,
        mode: StartMode,
        stop: Option<&Lifecycle>,
        plan: HostPlan,
    ) -> Result<Arc<Hosted>, Failed> {
        let Started {
            mut backend,
            outputs,
            mode,
            since,
            slot,
        } = starter.start(mode, true).await.map_err(|failure| Failed {
            failure,
            stderr: None,
            backend_pid: None,
        })?;
        let backend_pid = backend.pid();
        // Every backend gets its channel (fd 4): a factory that uses the
        // host's store or tools works in every conversation.
        let host_channel = backend.take_host_channel();
        let (conversation, ready) = Conversation::new(id.clone(), backend);
        // The backend's requests wait in the socket until the reader runs.
        let needs_channel = plan.tools_declared || plan.require_store;
        let attached = match host_channel {
            Some(socket) => conversation.attach_host_channel(plan, socket).map_err(|e| e.to_string()),
            None => Err("this start mode gives the backend no host channel".to_owned()),
        };
        if let (true, Err(why)) = (needs_channel, attached) {
            conversation.backend().kill();
            return Err(Failed {
                failure: StartFailure {
                    stage: "host-channel",
                    message: format!("the conversation's tools or snapshots need the host channel: {why}"),
                    exit: None,
                },
                stderr: None,
                backend_pid: Some(backend_pid),
            });
        }
        let exit = Arc::new(Lifecycle::new(Duration::ZERO));
        tokio::spawn(pump(conversation.clone(), outputs, exit.clone()));
        let abandoned = Unready {
            id: &id,
            conversation: Some(&conversation),
        };
        let stopped = async {
            match stop {
                Some(stop) => {
                    stop.stop_requested().await;
                }
                None => std::future::pending::<()>().await,
            }
            StartFailure {
                stage: "stopped",
                message: "asked to stop before the backend was ready".into(),
                exit: None,
            }
        };
        let ready_timeout = starter.ready_timeout();
        let startup = tokio::select! {
            startup = tokio::time::timeout_at(since + ready_timeout, ready) => startup,
            failure = stopped => Ok(Ok(Err(failure))),
        };
        abandoned.defuse();
        drop(slot);
        let failure = match startup {
            Ok(Ok(Ok(ready_line))) => {
                return Ok(Arc::new(Hosted {
                    id,
                    conversation,
                    exit,
                    mode,
                    ready_line,
                    backend_pid,
                    closing: AtomicBool::new(false),
                }))
            }
            Ok(Ok(Err(failure))) => failure,
            Err(_) => StartFailure {
                stage: "timeout",
                message: format!(
                    "no ready event from the backend within {} ms of its {}",
                    ready_timeout.as_millis(),
                    match mode {
                        StartMode::Cold => "spawn",
                        StartMode::Warm => "fork request",
                    }
                ),
                exit: None,
            },
            Ok(Err(_)) => StartFailure {
                stage: "backend",
                message: "the backend's output ended".into(),
                exit: None,
            },
        };
        conversation.backend().kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), exit.exited()).await;
        Err(Failed {
            failure,
            stderr: conversation.last_stderr(),
            backend_pid: Some(backend_pid),
        })
    }

    /// Marks the conversation as closing; `false` if it already was.
    pub fn begin_closing(&self) -> bool {
        !self.closing.swap(true, Ordering::SeqCst)
    }

    pub fn closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// `shutdown` to the backend, then after the grace SIGTERM and, after a
    /// short second grace, SIGKILL to its process group; returns its exit.
    pub async fn stop(&self, grace: Duration) -> ExitReport {
        self.conversation.begin_shutdown();
        let report = self.wait_or_kill(grace).await;
        self.conversation.close_streams();
        report
    }

    async fn wait_or_kill(&self, grace: Duration) -> ExitReport {
        let backend = self.conversation.backend();
        if let Ok(report) = tokio::time::timeout(grace, self.exit.exited()).await {
            return report;
        }
        self.exit.mark_killed();
        backend.signal_group(Some(Signal::SIGTERM));
        if let Ok(report) = tokio::time::timeout(TERM_GRACE, self.exit.exited()).await {
            return report;
        }
        backend.signal_group(Some(Signal::SIGKILL));
        self.exit.exited().await
    }
}

/// The backend's output, in order, into the conversation; its exit last,
/// once both output streams ended (or shortly after the exit, should a
/// leftover process hold a pipe open).
async fn pump(
    conversation: Arc<Conversation>,
    mut outputs: mpsc::Receiver<backend::Output>,
    exit_report: Arc<Lifecycle>,
) {
    let mut open_streams = 2;
    let mut exit: Option<ExitStatus> = None;
    let mut drain_until = None;
    loop {
        let next = match drain_until {
            Some(deadline) => tokio::select! {
                next = outputs.recv() => next,
                _ = tokio::time::sleep_until(deadline) => None,
            },
            None => outputs.recv().await,
        };
        let Some(next) = next else { break };
        match next {
            backend::Output::Stdout(batch) => {
                conversation.on_stdout(batch.items);
                if let Some(end) = batch.end {
                    open_streams -= 1;
                    if let StreamEnd::Failed(error) = end {
                        eprintln!("agentlane-bridge: reading the backend's stdout failed: {error}");
                    }
                }
            }
            backend::Output::Stderr(batch) => {
                for item in batch.items {
                    if let ReaderItem::Text(line) = item {
                        conversation.on_stderr(&line);
                    }
                }
                if batch.end.is_some() {
                    open_streams -= 1;
                }
            }
            backend::Output::Exited(status) => {
                exit = Some(status);
                drain_until = Some(tokio::time::Instant::now() + EXIT_DRAIN);
                // Whatever the backend left in its group goes too.
                let conversation = conversation.clone();
                tokio::task::spawn_blocking(move || {
                    conversation
                        .backend()
                        .reap_group(Duration::from_millis(500))
                });
            }
        }
        if exit.is_some() && open_streams == 0 {
            break;
        }
    }
    let status = exit.unwrap_or(ExitStatus {
        code: None,
        signal: None,
    });
    conversation.on_exit(status);
    exit_report.report_exit(status);
}
