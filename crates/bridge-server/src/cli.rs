//! The command line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use bridge_launch::supervisor::{self, Lookup, Search, FILE_NAME, OVERRIDE_ENV};

use crate::backend::Launch;
use crate::conversations::start::{Fallback, StartOptions};

#[derive(Parser, Debug)]
#[command(
    name = "agentlane-bridge",
    version,
    about = "Hosts AgentLane backends, one per conversation, and serves them over Connect on 127.0.0.1",
    long_about = "Hosts AgentLane backends (python -m agentlane_process_bridge --app MODULE:FACTORY), one per \
conversation, and serves them over Connect (HTTP/1.1, JSON or binary proto) on 127.0.0.1: the default \
conversation it starts with, and those ConversationService creates.\n\n\
On success it writes one line on stdout, `agentlane-bridge ready {json}` (url, port, pid, tokenFile), \
or `agentlane-bridge failed {json}` and exits 1. Every call needs `Authorization: Bearer <token>` \
(the token file's content). Closing its stdin, SIGTERM, SIGINT or the Shutdown call stop it.",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: Option<ServeArgs>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The two-step check: starts a bridge for the app, then step 1 (Ping,
    /// GetVersion, a call without the token refused) and step 2 (two real
    /// runs whose approvals it allows, then denies).
    Check(CheckArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// The backend factory, `module:attribute`.
    #[arg(long, value_name = "MODULE:FACTORY")]
    pub app: String,
    /// The backend's working directory (where its module is importable).
    #[arg(long, value_name = "DIR")]
    pub project_dir: Option<PathBuf>,
    /// The Python interpreter that has the `agentlane` package (a relative
    /// path is relative to this command's working directory).
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    pub python: OsString,
    /// The port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// How long the backend may take to exit after `shutdown` before its
    /// process group is signalled (SIGTERM, then SIGKILL).
    #[arg(long, value_name = "MS", default_value_t = 1500)]
    pub grace_ms: u64,
    /// How long a backend may take from its spawn (or fork) to its `ready`
    /// event (a cold start queued for a start slot waits before its spawn).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub ready_timeout_ms: u64,
    /// How many cold backends may be starting at once (importing Python and
    /// the app); the others wait in order for a slot. 0: no limit.
    /// Default: the number of cores, at least 2.
    #[arg(long, value_name = "N")]
    pub max_concurrent_starts: Option<usize>,
    /// Do not treat end of file on stdin as the launcher's death.
    #[arg(long)]
    pub ignore_stdin: bool,
    /// How many conversations may be open at once (the default one
    /// included); `CreateConversation` past it is `resource_exhausted`.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_conversations: u16,
    /// Close a created conversation that has had no run, no open stream
    /// and no call for this long; 0: never. The default conversation is
    /// never closed for idleness.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub idle_timeout_ms: u64,
    /// Start without the default conversation: every call names a
    /// conversation made with `CreateConversation`, and no conversation's
    /// end stops the bridge.
    #[arg(long)]
    pub no_default_conversation: bool,
    /// Start conversations warm: forked from one prefork server that
    /// imported the app once (Unix; needs `process-bridge-supervisor`). A
    /// server that dies is replaced on the next warm start.
    #[arg(long)]
    pub warm: bool,
    /// What a warm start that cannot be made does: `cold` starts the
    /// backend cold instead (said on stderr), `error` fails it
    /// (`unavailable`; at the bridge's start, its `failed` line).
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = Fallback::Cold)]
    pub warm_fallback: Fallback,
    /// The `process-bridge-supervisor` that contains every backend (needed
    /// by `--warm`; cold backends run under it when it is found) (default:
    /// $PROCESS_BRIDGE_SUPERVISOR, else the one beside this binary, else
    /// the one on PATH).
    #[arg(long, value_name = "PATH")]
    pub supervisor: Option<PathBuf>,
    /// The default conversation's own tools: a JSON file holding an array
    /// of `{name, description, input_schema, timeout_ms}`; their calls come
    /// as `ToolCall` items on the run's streams (docs/host-channel.md).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// A tool call's deadline when its conversation gives none; 0: none.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub tool_timeout_ms: u64,
    /// A launcher to run Python with instead of `--python`, for example
    /// `-- uv run --project DIR python`; `-m agentlane_process_bridge --app
    /// MODULE:FACTORY` is appended.
    #[arg(last = true, value_name = "LAUNCHER")]
    pub launcher: Vec<OsString>,
}

impl ServeArgs {
    /// How backends start: the supervisor warm starts need when `--warm`
    /// was given (or why there is none), the fallback, the start slots.
    pub fn start_options(&self) -> StartOptions {
        StartOptions {
            warm: self.warm.then(|| self.supervisor()),
            fallback: self.warm_fallback,
            max_concurrent_starts: match self.max_concurrent_starts {
                Some(0) => None,
                Some(n) => Some(n),
                None => Some(std::thread::available_parallelism().map_or(2, |n| n.get()).max(2)),
            },
            term_grace: Duration::from_millis(self.grace_ms),
            ready_timeout: Duration::from_millis(self.ready_timeout_ms),
        }
    }

    /// `--supervisor`, else $PROCESS_BRIDGE_SUPERVISOR (empty: none), else
    /// the one beside this binary, else the one on PATH; the rules are
    /// `bridge_launch::supervisor`'s, the places this host's.
    fn supervisor(&self) -> Result<PathBuf, String> {
        let flag = self.supervisor.as_ref().map(|p| from_here(p.as_os_str()));
        let env = std::env::var_os(OVERRIDE_ENV).map(|p| from_here(&p));
        let (named, from) = match (&flag, &env) {
            (Some(flag), _) => (Some(flag.as_os_str()), "--supervisor".to_owned()),
            (None, Some(env)) => (Some(env.as_os_str()), format!("${OVERRIDE_ENV}")),
            (None, None) => (None, String::new()),
        };
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join(FILE_NAME)));
        let on_path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).map(|dir| dir.join(FILE_NAME)).collect::<Vec<_>>())
            .unwrap_or_default();
        let candidates: Vec<PathBuf> = beside.iter().chain(on_path.iter()).cloned().collect();
        match supervisor::find(Search { named, candidates: &candidates, expected: None }) {
            Lookup::Found(path) => Ok(path),
            Lookup::Declined => Err(format!("{from} is empty: no {FILE_NAME}")),
            Lookup::Missing(missing) => Err(format!(
                "{from} names {}, which is not an executable {FILE_NAME}",
                missing.path.display()
            )),
            Lookup::Absent => Err(format!(
                "--warm needs {FILE_NAME}: none beside {} nor on PATH (install it with `cargo install --path crates/bridge-supervisor`, or pass --supervisor PATH)",
                beside.as_deref().map_or("this binary".into(), |p| p.display().to_string())
            )),
        }
    }

    pub fn launch(&self) -> Launch {
        let (program, mut args) = match self.launcher.split_first() {
            Some((program, rest)) => (program.clone(), rest.to_vec()),
            None => (self.python.clone(), Vec::new()),
        };
        args.extend(["-m", "agentlane_process_bridge", "--app"].map(OsString::from));
        args.push(self.app.clone().into());
        Launch {
            program: from_here(&program),
            args,
            cwd: self.project_dir.clone(),
            // Cold conversations are contained as warm ones when the
            // supervisor is there (it ships beside this binary).
            supervisor: match self.supervisor() {
                Ok(path) => Some(path),
                Err(why) => {
                    // Named but unusable is said; not found (or none chosen) is quiet.
                    let named = self.supervisor.is_some() || std::env::var_os(OVERRIDE_ENV).is_some_and(|v| !v.is_empty());
                    if named {
                        eprintln!("agentlane-bridge: cold conversations run without the supervisor: {why}");
                    }
                    None
                }
            },
            term_grace: Duration::from_millis(self.grace_ms),
        }
    }

    /// The same options as command-line arguments (for `check`, which
    /// starts a bridge with them).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--app".into(), self.app.clone().into()];
        if let Some(dir) = &self.project_dir {
            args.extend(["--project-dir".into(), dir.clone().into_os_string()]);
        }
        args.extend(["--python".into(), self.python.clone()]);
        args.extend(["--grace-ms".into(), self.grace_ms.to_string().into()]);
        args.extend([
            "--ready-timeout-ms".into(),
            self.ready_timeout_ms.to_string().into(),
        ]);
        if let Some(n) = self.max_concurrent_starts {
            args.extend(["--max-concurrent-starts".into(), n.to_string().into()]);
        }
        if self.warm {
            args.extend(["--warm".into(), "--warm-fallback".into()]);
            args.push(match self.warm_fallback {
                Fallback::Cold => "cold".into(),
                Fallback::Error => "error".into(),
            });
        }
        if let Some(supervisor) = &self.supervisor {
            args.extend(["--supervisor".into(), supervisor.clone().into_os_string()]);
        }
        if let Some(tools) = &self.tools {
            args.extend(["--tools".into(), tools.clone().into_os_string()]);
        }
        args.extend(["--tool-timeout-ms".into(), self.tool_timeout_ms.to_string().into()]);
        if !self.launcher.is_empty() {
            args.push("--".into());
            args.extend(self.launcher.iter().cloned());
        }
        args
    }
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// The prompt of the step-2 runs.
    #[arg(long, default_value = "Please save a note: remember milk.")]
    pub prompt: String,
    /// Only run step 1 (no conversation).
    #[arg(long)]
    pub step1_only: bool,
    /// The prompt of the step-3 run, which must make the agent call the
    /// host's tool `lookup` ({"customer_id": string}).
    #[arg(long, default_value = "Please look up customer c-42.")]
    pub tool_prompt: String,
    /// Fail step 3 when the app's factory does not add the host's tools
    /// (by default it is skipped with the reason).
    #[arg(long)]
    pub require_tools: bool,
}

/// A program path as the user meant it: a relative one with a directory
/// part (`.venv/bin/python`) is relative to this command's working
/// directory, not to `--project-dir` where the backend runs; a bare name
/// is looked up on PATH as given.
fn from_here(program: &std::ffi::OsStr) -> OsString {
    let path = Path::new(program);
    if path.is_absolute() || path.components().count() < 2 {
        return program.to_owned();
    }
    match std::env::current_dir() {
        Ok(here) => here.join(path).into_os_string(),
        Err(_) => program.to_owned(),
    }
}
