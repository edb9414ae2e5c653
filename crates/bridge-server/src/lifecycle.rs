//! One shutdown path for every cause (the `Shutdown` call, SIGTERM/SIGINT,
//! stdin EOF), and the backend's exit, reported once to whoever waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::backend::ExitStatus;

/// How the backend ended, as the `Shutdown` call reports it.
#[derive(Clone, Copy, Debug)]
pub struct ExitReport {
    pub status: ExitStatus,
    /// The grace ran out and the bridge signalled the backend's group.
    pub killed: bool,
}

pub struct Lifecycle {
    /// `Some(grace)` once a shutdown was asked for (the first ask wins).
    stop: watch::Sender<Option<Duration>>,
    exit: watch::Sender<Option<ExitReport>>,
    killed: AtomicBool,
    default_grace: Duration,
}

impl Lifecycle {
    pub fn new(default_grace: Duration) -> Lifecycle {
        Lifecycle {
            stop: watch::channel(None).0,
            exit: watch::channel(None).0,
            killed: AtomicBool::new(false),
            default_grace,
        }
    }

    /// Asks for the shutdown; `None` or zero means the default grace.
    /// Returns whether this was the first ask.
    pub fn request_stop(&self, grace: Option<Duration>) -> bool {
        let grace = grace.filter(|g| !g.is_zero()).unwrap_or(self.default_grace);
        self.stop.send_if_modified(|stop| {
            if stop.is_some() {
                return false;
            }
            *stop = Some(grace);
            true
        })
    }

    /// Resolves with the grace once a shutdown was asked for.
    pub async fn stop_requested(&self) -> Duration {
        first_value(&self.stop).await
    }

    pub fn mark_killed(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }

    pub fn report_exit(&self, status: ExitStatus) {
        let killed = self.killed.load(Ordering::SeqCst);
        self.exit.send_replace(Some(ExitReport { status, killed }));
    }

    /// Reports an exit as given (the bridge's, once every conversation
    /// closed: its default conversation's).
    pub fn report(&self, report: ExitReport) {
        self.exit.send_replace(Some(report));
    }

    /// Resolves once the backend has exited and its output was processed.
    pub async fn exited(&self) -> ExitReport {
        first_value(&self.exit).await
    }
}

/// The value of a watch that starts empty and is set once.
async fn first_value<T: Copy>(cell: &watch::Sender<Option<T>>) -> T {
    let mut receiver = cell.subscribe();
    let value = *receiver
        .wait_for(Option::is_some)
        .await
        .expect("the sender lives as long as the lifecycle");
    value.expect("waited for Some")
}
