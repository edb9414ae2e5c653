//! The start seam: the one place that says how a conversation's backend
//! starts. Cold: a new process from the command line, spawned on the
//! spawner thread (on Linux the parent-death signal follows the spawning
//! thread, so it must be one that lives as long as the bridge). Warm:
//! forked from the bridge's one prefork server (one import of the app for
//! the whole bridge). A new start mode is one more arm here.

use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use bridge_prefork::{PreforkServer, ServerSpec};
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, Launch, Output};

/// How a backend starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartMode {
    Cold,
    Warm,
}

impl StartMode {
    pub fn name(self) -> &'static str {
        match self {
            StartMode::Cold => "cold",
            StartMode::Warm => "warm",
        }
    }
}

type Started = std::io::Result<(Backend, mpsc::Receiver<Output>)>;
type Job = Box<dyn FnOnce() + Send>;

/// A thread that lives as long as the bridge and runs cold spawns.
struct Spawner(std_mpsc::Sender<Job>);

impl Spawner {
    fn new() -> std::io::Result<Spawner> {
        let (jobs, receiver) = std_mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("bridge-spawner".into())
            .spawn(move || {
                for job in receiver {
                    job();
                }
            })?;
        Ok(Spawner(jobs))
    }
}

/// Why the prefork server could not serve (the `failed` line's stage
/// `prefork`).
#[derive(Debug)]
pub struct WarmFailure(pub String);

pub struct Starter {
    launch: Launch,
    spawner: std::sync::Mutex<Spawner>,
    prefork: Option<PreforkServer>,
    term_grace: Duration,
}

impl Starter {
    /// Cold only, or cold and warm (`supervisor`: the path of
    /// `process-bridge-supervisor`, which contains the prefork server and
    /// each fork). The prefork server starts now; [`Starter::warm_ready`]
    /// waits for its handshake.
    pub fn new(
        launch: Launch,
        warm_supervisor: Option<PathBuf>,
        term_grace: Duration,
    ) -> Result<Starter, WarmFailure> {
        let spawner = Spawner::new().map_err(|e| WarmFailure(format!("cannot start a thread: {e}")))?;
        let prefork = match warm_supervisor {
            None => None,
            Some(supervisor) => {
                let args: Vec<String> = launch
                    .args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                let mut spec = ServerSpec::for_command(launch.program.clone(), &args, supervisor)
                    .ok_or_else(|| {
                        WarmFailure("the backend's command line cannot be started warm".into())
                    })?;
                spec.cwd = launch.cwd.clone();
                let server = PreforkServer::start(&spec, term_grace, None).map_err(|e| {
                    WarmFailure(format!("cannot start the prefork server: {e}"))
                })?;
                Some(server)
            }
        };
        Ok(Starter {
            launch,
            spawner: std::sync::Mutex::new(spawner),
            prefork,
            term_grace,
        })
    }

    /// Waits for the prefork server's handshake (at once without `--warm`).
    pub async fn warm_ready(&self, timeout: Duration) -> Result<(), WarmFailure> {
        let Some(server) = self.prefork.clone() else {
            return Ok(());
        };
        let ready = tokio::task::spawn_blocking(move || server.wait_ready(Some(timeout)))
            .await
            .map_err(|e| WarmFailure(e.to_string()))?;
        match ready {
            Ok(_) => Ok(()),
            Err(error) => Err(WarmFailure(format!(
                "the prefork server did not start ({}): {}{}",
                error.code(),
                error.message,
                error
                    .log_tail
                    .last()
                    .map(|line| format!(": {line}"))
                    .unwrap_or_default()
            ))),
        }
    }

    pub fn warm_available(&self) -> bool {
        self.prefork.is_some()
    }

    /// The mode of a conversation that did not ask for one.
    pub fn default_mode(&self) -> StartMode {
        if self.warm_available() {
            StartMode::Warm
        } else {
            StartMode::Cold
        }
    }

    /// The program a cold start runs (for messages).
    pub fn program(&self) -> String {
        self.launch.program.to_string_lossy().into_owned()
    }

    /// Starts one backend.
    pub async fn start(&self, mode: StartMode) -> Started {
        let (answer, answered) = oneshot::channel::<Started>();
        match (mode, &self.prefork) {
            (StartMode::Cold, _) => {
                let launch = self.launch.clone();
                let job: Job = Box::new(move || {
                    let _ = answer.send(Backend::spawn(&launch));
                });
                let sent = self
                    .spawner
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .0
                    .send(job);
                if sent.is_err() {
                    return Err(std::io::Error::other("the spawner thread is gone"));
                }
            }
            (StartMode::Warm, Some(server)) => {
                let server = server.clone();
                let grace = self.term_grace;
                tokio::task::spawn_blocking(move || {
                    let _ = answer.send(Backend::fork(&server, grace));
                });
            }
            (StartMode::Warm, None) => {
                return Err(std::io::Error::other(
                    "warm starts need the bridge to run with --warm",
                ))
            }
        }
        answered
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the start was dropped")))
    }

    /// No more forks: the prefork server exits once its forks have ended.
    pub fn shutdown(&self) {
        if let Some(server) = &self.prefork {
            server.shutdown();
        }
    }
}
