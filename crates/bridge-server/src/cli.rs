//! The command line.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::Launch;

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
    /// A launcher to run Python with instead of `--python`, for example
    /// `-- uv run --project DIR python`; `-m agentlane_process_bridge --app
    /// MODULE:FACTORY` is appended.
    #[arg(last = true, value_name = "LAUNCHER")]
    pub launcher: Vec<OsString>,
}

impl ServeArgs {
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
