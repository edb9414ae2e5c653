//! The command line.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::Launch;
use crate::conversations::start::WarmFailure;

#[derive(Parser, Debug)]
#[command(
    name = "agentlane-bridge",
    version,
    about = "Hosts an AgentLane backend and serves it over Connect on 127.0.0.1",
    long_about = "Hosts an AgentLane backend (python -m agentlane_process_bridge --app MODULE:FACTORY) and serves \
its conversation over Connect (HTTP/1.1, JSON or binary proto) on 127.0.0.1.\n\n\
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
    /// The Python interpreter that has the `agentlane` package.
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    pub python: OsString,
    /// The port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// How long the backend may take to exit after `shutdown` before its
    /// process group is signalled (SIGTERM, then SIGKILL).
    #[arg(long, value_name = "MS", default_value_t = 1500)]
    pub grace_ms: u64,
    /// How long to wait for the backend's `ready` event.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub ready_timeout_ms: u64,
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
    /// imported the app once (Unix; needs `process-bridge-supervisor`).
    #[arg(long)]
    pub warm: bool,
    /// The `process-bridge-supervisor` for `--warm` (default:
    /// $PROCESS_BRIDGE_SUPERVISOR, else the one beside this binary).
    #[arg(long, value_name = "PATH")]
    pub supervisor: Option<PathBuf>,
    /// A launcher to run Python with instead of `--python`, for example
    /// `-- uv run --project DIR python`; `-m agentlane_process_bridge --app
    /// MODULE:FACTORY` is appended.
    #[arg(last = true, value_name = "LAUNCHER")]
    pub launcher: Vec<OsString>,
}

impl ServeArgs {
    /// The supervisor warm starts need, when `--warm` was given.
    pub fn warm_supervisor(&self) -> Result<Option<PathBuf>, WarmFailure> {
        if !self.warm {
            return Ok(None);
        }
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("process-bridge-supervisor")));
        let path = self
            .supervisor
            .clone()
            .or_else(|| std::env::var_os("PROCESS_BRIDGE_SUPERVISOR").map(PathBuf::from))
            .or(beside)
            .ok_or_else(|| WarmFailure("--warm: no process-bridge-supervisor found".into()))?;
        if !path.is_file() {
            return Err(WarmFailure(format!(
                "--warm needs process-bridge-supervisor, not found at {} (pass --supervisor PATH)",
                path.display()
            )));
        }
        Ok(Some(path))
    }

    pub fn launch(&self) -> Launch {
        let (program, mut args) = match self.launcher.split_first() {
            Some((program, rest)) => (program.clone(), rest.to_vec()),
            None => (self.python.clone(), Vec::new()),
        };
        args.extend(["-m", "agentlane_process_bridge", "--app"].map(OsString::from));
        args.push(self.app.clone().into());
        Launch {
            program,
            args,
            cwd: self.project_dir.clone(),
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
        if self.warm {
            args.push("--warm".into());
        }
        if let Some(supervisor) = &self.supervisor {
            args.extend(["--supervisor".into(), supervisor.clone().into_os_string()]);
        }
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
}
