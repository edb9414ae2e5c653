//! A Rust host for an AgentLane agent, on the core alone (no Node): the same
//! conversation as the demo (`npm run demo`), with the demo backend.
//!
//!     bash scripts/setup-python.sh             # once: .venv with agentlane
//!     cargo run --release -p bridge-core --example host
//!
//! The backend's stdout and stderr are read and framed on reader threads
//! (`reader::spawn_reader`), every stdout line is validated there, and this
//! thread receives ordered batches; commands go to stdin through
//! `command::encode_command`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::time::Instant;

use bridge_core::command::{encode_command, Command as BridgeCommand};
use bridge_core::reader::{spawn_reader, Batch, BatchSink, Item, ReaderOptions, StreamKind};
use serde_json::Value;

/// Both readers feed one channel; each batch says which stream it is from.
struct Tagged(StreamKind, SyncSender<(StreamKind, Batch)>);

impl BatchSink for Tagged {
    fn deliver(&mut self, batch: Batch) -> bool {
        self.1.send((self.0, batch)).is_ok()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("DEMO_PYTHON")
        .map(PathBuf::from)
        .unwrap_or(root.join(".venv/bin/python"));
    let started = Instant::now();
    let mut command = Command::new(&python);
    command
        .args([
            "-m",
            "agentlane_process_bridge",
            "--app",
            "demo_app:create_backend",
        ])
        .current_dir(root.join("examples/backend"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The launch layer (crates/bridge-launch): the backend inherits exactly
    // stdin, stdout and stderr, as under every host of this repository.
    #[cfg(unix)]
    bridge_launch::place::Placement::new().install(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start {}: {e} (run scripts/setup-python.sh first)",
                python.display()
            )
        })?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let (sender, batches) = sync_channel(4);
    spawn_reader(
        child.stdout.take().expect("piped stdout"),
        ReaderOptions::new(StreamKind::Events),
        Tagged(StreamKind::Events, sender.clone()),
    )?;
    spawn_reader(
        child.stderr.take().expect("piped stderr"),
        ReaderOptions::new(StreamKind::Text),
        Tagged(StreamKind::Text, sender),
    )?;

    let mut send = |command: BridgeCommand| -> std::io::Result<()> {
        let frame = encode_command(&command).map_err(std::io::Error::other)?;
        stdin.write_all(frame.as_bytes())?;
        stdin.flush()
    };

    let mut ready_at = None;
    let mut events = 0;
    let mut open_streams = 2;
    let mut stderr_tail = Vec::new();
    while open_streams > 0 {
        let (stream, batch) = batches.recv()?;
        if batch.end.is_some() {
            open_streams -= 1;
        }
        for item in batch.items {
            let line = match item {
                Item::Text(line) => {
                    stderr_tail.push(line);
                    continue;
                }
                Item::Invalid { line, error } => {
                    eprintln!(
                        "invalid line from the backend: {} ({:?})\n  {}",
                        error.message,
                        error.fields,
                        &line[..line.len().min(200)]
                    );
                    continue;
                }
                Item::Event { line, .. } => line,
            };
            debug_assert_eq!(stream, StreamKind::Events);
            events += 1;
            // The line is a valid event; serde_json parses it (it only
            // refuses what JSON.parse would turn into Infinity or lone
            // surrogates, which this backend does not write).
            let event: Value = serde_json::from_str(&line)?;
            match event["type"].as_str().unwrap_or_default() {
                "ready" => {
                    ready_at = Some(started.elapsed());
                    let text = |key: &str| event[key].as_str().unwrap_or("?").to_owned();
                    println!(
                        "backend ready: agentlane {}, protocol {}",
                        text("version"),
                        text("protocol_version")
                    );
                    println!("\nyou: Please save a note about the process bridge.\nassistant: ");
                    send(BridgeCommand::Prompt {
                        text: "Please save a note about the process bridge.".into(),
                    })?;
                }
                "run_event" => {
                    let record = &event["event"];
                    let payload = &record["payload"];
                    match record["type"].as_str().unwrap_or_default() {
                        "model_stream" if payload["event"]["kind"] == "text_delta" => {
                            print!("{}", payload["event"]["text"].as_str().unwrap_or_default());
                            std::io::stdout().flush()?;
                        }
                        "tool_approval" if payload["event"]["record"]["status"] == "pending" => {
                            let approval = &payload["event"]["record"];
                            let id = approval["request_id"]
                                .as_str()
                                .unwrap_or_default()
                                .to_owned();
                            let request = &approval["request"];
                            let text = |key: &str| request[key].as_str().unwrap_or("?").to_owned();
                            println!(
                                "\n[approval needed] {}: {} -> approving {id}",
                                text("tool_name"),
                                text("operation")
                            );
                            send(BridgeCommand::Approve {
                                id,
                                allowed: true,
                                reason: None,
                            })?;
                        }
                        "tool_end" => println!("[tool result] {}\nassistant: ", payload["result"]),
                        _ => {}
                    }
                }
                "run_complete" => {
                    println!("\n\nfinal answer: {}", event["final_output"]);
                    send(BridgeCommand::Shutdown)?;
                }
                "error" => {
                    eprintln!("backend error ({}): {}", event["scope"], event["message"]);
                    send(BridgeCommand::Shutdown)?;
                }
                _ => {}
            }
        }
    }
    let status = child.wait()?;
    if ready_at.is_none() {
        return Err(format!(
            "the backend exited before it was ready ({status}): {}",
            stderr_tail.last().map_or("no output", String::as_str)
        )
        .into());
    }
    println!(
        "\nbackend ready after {:?}, {events} events, exited {status} after {:?}",
        ready_at.unwrap_or_default(),
        started.elapsed()
    );
    if !status.success() {
        return Err("the backend did not exit cleanly".into());
    }
    Ok(())
}
