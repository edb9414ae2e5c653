//! `agentlane-bridge`: hosts AgentLane backends, one per conversation, and
//! serves them over Connect on 127.0.0.1, so that a program in any language
//! drives the agent, approvals included. The host loop (framing, strict
//! validation, command encoding, correlation) is bridge-core's; this crate
//! adds the process, the network contract (`proto/agentlane/bridge/v1/`)
//! and its guards.

mod backend;
mod bounded;
mod check;
mod check_tool;
mod cli;
mod conversation;
mod conversations;
mod guard;
mod lifecycle;
mod outgoing;
mod run;
mod server;
mod service;
mod side_items;
mod token;

/// The generated `agentlane.bridge.v1` messages, services and clients.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    connectrpc::include_generated!();
}

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match (cli.command, cli.serve) {
        (Some(cli::Command::Check(args)), _) => check::run(args),
        (None, Some(serve)) => run::serve(serve),
        (None, None) => {
            use clap::CommandFactory;
            let _ = cli::Cli::command().print_help();
            ExitCode::from(2)
        }
    }
}
