//! The start seam: the one place that says how a conversation's backend
//! starts. Cold: a new process from the command line, spawned on the
//! spawner thread (on Linux the parent-death signal follows the spawning
//! thread, so it must be one that lives as long as the bridge), once one of
//! the start slots is free. Warm: forked from the bridge's prefork server
//! (`warm.rs`: one import of the app for the whole bridge), falling back
//! to cold as `--warm-fallback` says. A new start mode is one more arm here.
//!
//! Start slots: a cold backend spends its start importing Python,
//! agentlane and the app (about 1–2 s of one core). Started all together,
//! N backends share the cores and each takes about N ÷ cores times as
//! long, so that 20 at once under load all missed a 30 s ready timeout. At
//! most `--max-concurrent-starts` cold backends are between their spawn and
//! their `ready` at any time; the rest wait in order, and each one's ready
//! timeout counts from its own spawn. A warm fork takes no slot (as in the
//! Node package, `lib/session/start-slots.ts`).
//!
//! Everything here may be dropped at any await (the caller went away):
//! nothing started is left running (a backend that comes after its caller
//! left is killed), and a slot or a place comes back when dropped.

use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use bridge_prefork::ServerSpec;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::warm::{Unavailable, Warm, WarmError};
use crate::backend::{Backend, Launch, Output};
use crate::conversation::StartFailure;

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

/// What a warm start that cannot be made does (`--warm-fallback`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fallback {
    /// Start the backend cold instead (said on stderr).
    Cold,
    /// Fail the start (`unavailable`; at the bridge's start, its `failed`
    /// line).
    Error,
}

/// A backend that runs, not yet ready.
pub struct Started {
    pub backend: Backend,
    pub outputs: mpsc::Receiver<Output>,
    /// How it started (a warm start that fell back is cold).
    pub mode: StartMode,
    /// When it was spawned (or its fork asked for): its ready timeout
    /// counts from here.
    pub since: Instant,
    /// A cold start's slot, held until it is ready or has failed.
    pub slot: Option<OwnedSemaphorePermit>,
}

type Spawned = std::io::Result<(Backend, mpsc::Receiver<Output>)>;
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

/// Why the bridge cannot serve warm (the `failed` line's stage `prefork`).
#[derive(Debug)]
pub struct WarmFailure(pub String);

/// How the bridge starts backends.
pub struct StartOptions {
    /// `--warm`: the supervisor, or why there is none.
    pub warm: Option<Result<PathBuf, String>>,
    pub fallback: Fallback,
    /// Cold starts at once; `None`: no limit.
    pub max_concurrent_starts: Option<usize>,
    pub term_grace: Duration,
    pub ready_timeout: Duration,
}

pub struct Starter {
    launch: Launch,
    spawner: std::sync::Mutex<Spawner>,
    slots: Option<Arc<Semaphore>>,
    max_concurrent_starts: Option<usize>,
    warm: Option<Warm>,
    fallback: Fallback,
    ready_timeout: Duration,
}

impl Starter {
    /// Cold only, or cold and warm. With `--warm` the prefork server starts
    /// now; [`Starter::warm_ready`] waits for its handshake. A warm setup
    /// that cannot be made is the bridge's failure with `--warm-fallback
    /// error`, a line on stderr and cold starts otherwise.
    pub fn new(launch: Launch, options: StartOptions) -> Result<Starter, WarmFailure> {
        let spawner = Spawner::new().map_err(|e| WarmFailure(format!("cannot start a thread: {e}")))?;
        let warm = match options.warm {
            None => None,
            Some(supervisor) => Some(warm_for(&launch, supervisor, options.term_grace, options.fallback)?),
        };
        Ok(Starter {
            launch,
            spawner: std::sync::Mutex::new(spawner),
            slots: options.max_concurrent_starts.map(|n| Arc::new(Semaphore::new(n))),
            max_concurrent_starts: options.max_concurrent_starts,
            warm,
            fallback: options.fallback,
            ready_timeout: options.ready_timeout,
        })
    }

    pub fn ready_timeout(&self) -> Duration {
        self.ready_timeout
    }

    /// How many cold backends may be starting at once (`None`: no limit).
    pub fn max_concurrent_starts(&self) -> Option<usize> {
        self.max_concurrent_starts
    }

    /// Waits for the prefork server's handshake (at once without `--warm`).
    /// Its failure is the bridge's with `--warm-fallback error`; otherwise
    /// it is said on stderr and the bridge serves (a new server is tried on
    /// the next warm start unless the app was refused).
    pub async fn warm_ready(&self) -> Result<(), WarmFailure> {
        let Some(warm) = &self.warm else { return Ok(()) };
        match warm.ready(self.ready_timeout).await {
            Ok(()) => Ok(()),
            Err(Unavailable(why)) if self.fallback == Fallback::Error => Err(WarmFailure(why)),
            Err(Unavailable(why)) => {
                eprintln!("agentlane-bridge: warm starts are not possible now: {why}; conversations start cold meanwhile (--warm-fallback cold)");
                Ok(())
            }
        }
    }

    /// Whether the bridge was started with `--warm` (a warm start mode is
    /// taken).
    pub fn warm_configured(&self) -> bool {
        self.warm.is_some()
    }

    /// Whether warm starts may be made now (capability "warm").
    pub fn warm_available(&self) -> bool {
        self.warm.as_ref().is_some_and(Warm::available)
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

    /// Starts one backend (a warm one, or a cold one once a slot is free),
    /// with a host channel when `host_channel` declares it
    /// (`Started::backend.take_host_channel()`).
    pub async fn start(&self, mode: StartMode, host_channel: bool) -> Result<Started, StartFailure> {
        let warm = match (mode, &self.warm) {
            (StartMode::Cold, _) => return self.start_cold(host_channel).await,
            (StartMode::Warm, None) => return Err(failure("spawn", "warm starts need the bridge to run with --warm".into())),
            // Off for good (said once, when it went off): cold, quietly.
            (StartMode::Warm, Some(warm)) if !warm.available() && self.fallback == Fallback::Cold => {
                return self.start_cold(host_channel).await
            }
            (StartMode::Warm, Some(warm)) => warm,
        };
        let since = Instant::now();
        match warm.fork(since + self.ready_timeout, host_channel).await {
            Ok((backend, outputs)) => Ok(Started {
                backend,
                outputs,
                mode: StartMode::Warm,
                since,
                slot: None,
            }),
            Err(WarmError::TimedOut(why)) => Err(failure("timeout", why)),
            Err(WarmError::Unavailable(Unavailable(why))) => match self.fallback {
                Fallback::Error => Err(failure("prefork", format!("cannot start a warm backend: {why}"))),
                Fallback::Cold => {
                    eprintln!("agentlane-bridge: a warm start was not possible ({why}); starting cold (--warm-fallback cold)");
                    self.start_cold(host_channel).await
                }
            },
        }
    }

    async fn start_cold(&self, host_channel: bool) -> Result<Started, StartFailure> {
        let slot = match &self.slots {
            Some(slots) => Some(
                slots
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| failure("spawn", "the start slots are closed".into()))?,
            ),
            None => None,
        };
        let (answer, answered) = oneshot::channel::<Spawned>();
        let launch = self.launch.clone();
        let job: Job = Box::new(move || {
            // The caller may have gone meanwhile: what it no longer takes is killed.
            if let Err(Ok((backend, _))) = answer.send(Backend::spawn(&launch, host_channel)) {
                backend.kill();
            }
        });
        let since = Instant::now();
        let sent = self.spawner.lock().unwrap_or_else(|e| e.into_inner()).0.send(job);
        if sent.is_err() {
            return Err(failure("spawn", "the spawner thread is gone".into()));
        }
        let spawned = answered
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the start was dropped")));
        let (backend, outputs) = spawned.map_err(|error| failure("spawn", format!("cannot start {}: {error}", self.program())))?;
        Ok(Started {
            backend,
            outputs,
            mode: StartMode::Cold,
            since,
            slot,
        })
    }

    /// No more forks: the prefork server exits once its forks have ended.
    pub fn shutdown(&self) {
        if let Some(warm) = &self.warm {
            warm.shutdown();
        }
    }
}

fn failure(stage: &'static str, message: String) -> StartFailure {
    StartFailure {
        stage,
        message,
        exit: None,
    }
}

/// The warm side for this command line: a server started, or warm starts
/// off (the fallback's business) when it cannot be.
fn warm_for(
    launch: &Launch,
    supervisor: Result<PathBuf, String>,
    term_grace: Duration,
    fallback: Fallback,
) -> Result<Warm, WarmFailure> {
    let args: Vec<String> = launch.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let spec = ServerSpec::for_command(launch.program.clone(), &args, supervisor.clone().unwrap_or_default());
    let Some(mut spec) = spec else {
        return Err(WarmFailure("the backend's command line cannot be started warm".into()));
    };
    spec.cwd = launch.cwd.clone();
    let started = match supervisor {
        Ok(_) => Warm::start(spec.clone(), term_grace),
        Err(why) => Err(Unavailable(why)),
    };
    match (started, fallback) {
        (Ok(warm), _) => Ok(warm),
        (Err(Unavailable(why)), Fallback::Error) => Err(WarmFailure(why)),
        (Err(Unavailable(why)), Fallback::Cold) => {
            eprintln!("agentlane-bridge: warm starts are off: {why}; conversations start cold (--warm-fallback cold)");
            Ok(Warm::off(spec, term_grace, why))
        }
    }
}
