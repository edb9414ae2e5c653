//! The bridge's life, in order: token, backend, `ready`, listener, the
//! discovery line, serving, and the one shutdown path.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bridge_core::reader::{Item as ReaderItem, StreamEnd};
use connectrpc::{CompressionPolicy, ConnectRpcService, DeadlinePolicy, Limits, Router};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::backend::{self, Backend, ExitStatus};
use crate::cli::ServeArgs;
use crate::conversation::{Conversation, StartFailure, EXIT_DRAIN};
use crate::guard::Guard;
use crate::lifecycle::Lifecycle;
use crate::service::{Agent, Control, API};
use crate::token::TokenFile;

/// The discovery line's schema version.
const SCHEMA: u32 = 1;
/// How long the group's leftovers get after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(500);
/// Request bodies: a prompt may hold 1,000,000 code points (up to 4 MB of
/// UTF-8) plus its envelope.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// Writes the one discovery line (`agentlane-bridge ready|failed {json}`).
fn announce(word: &str, body: Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "agentlane-bridge {word} {body}");
    let _ = stdout.flush();
}

/// What the `failed` line says besides the stage and the message.
#[derive(Default)]
struct Details {
    exit: Option<ExitStatus>,
    stderr: Option<String>,
    backend_pid: Option<u32>,
}

fn failed(stage: &str, message: &str, details: Details) -> ExitCode {
    announce(
        "failed",
        json!({
            "schema": SCHEMA,
            "stage": stage,
            "message": message,
            "exitCode": details.exit.and_then(|e| e.code),
            "signal": details.exit.and_then(|e| e.signal),
            "stderr": details.stderr,
            "backendPid": details.backend_pid,
        }),
    );
    ExitCode::FAILURE
}

pub fn serve(args: ServeArgs) -> ExitCode {
    let token = match TokenFile::create() {
        Ok(token) => Arc::new(token),
        Err(error) => {
            return failed(
                "token",
                &format!("cannot create the token file: {error}"),
                Details::default(),
            )
        }
    };
    let launch = args.launch();
    // Spawned on the main thread, which lives as long as the bridge (the
    // Linux parent-death signal follows the spawning thread).
    let (backend, outputs) = match Backend::spawn(&launch) {
        Ok(spawned) => spawned,
        Err(error) => {
            let program = launch.program.to_string_lossy();
            return failed(
                "spawn",
                &format!("cannot start {program}: {error}"),
                Details::default(),
            );
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            backend.signal_group(Some(Signal::SIGKILL));
            let backend_pid = Some(backend.pid());
            return failed(
                "runtime",
                &error.to_string(),
                Details {
                    backend_pid,
                    ..Details::default()
                },
            );
        }
    };
    let code = runtime.block_on(bridge(args, token.clone(), backend, outputs));
    token.remove();
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

async fn bridge(
    args: ServeArgs,
    token: Arc<TokenFile>,
    backend: Backend,
    outputs: mpsc::Receiver<backend::Output>,
) -> ExitCode {
    let backend_pid = backend.pid();
    let (conversation, ready) = Conversation::new(backend);
    let lifecycle = Arc::new(Lifecycle::new(Duration::from_millis(args.grace_ms)));
    watch_signals(lifecycle.clone());
    tokio::spawn(pump(conversation.clone(), outputs, lifecycle.clone()));

    // 1. The backend's ready (its version is checked by the validator).
    // A stop asked for meanwhile (SIGTERM, stdin EOF) ends the wait too.
    let stopped = async {
        lifecycle.stop_requested().await;
        StartFailure {
            stage: "stopped",
            message: "asked to stop before the backend was ready".into(),
            exit: None,
        }
    };
    let startup = tokio::select! {
        startup = tokio::time::timeout(Duration::from_millis(args.ready_timeout_ms), ready) => startup,
        failure = stopped => Ok(Ok(Err(failure))),
    };
    let ready_line = match startup {
        Ok(Ok(Ok(line))) => line,
        outcome => {
            let failure = match outcome {
                Ok(Ok(Err(failure))) => failure,
                Err(_) => StartFailure {
                    stage: "timeout",
                    message: format!(
                        "no ready event from the backend within {} ms",
                        args.ready_timeout_ms
                    ),
                    exit: None,
                },
                Ok(Err(_)) | Ok(Ok(Ok(_))) => StartFailure {
                    stage: "backend",
                    message: "the backend's output ended".into(),
                    exit: None,
                },
            };
            conversation.backend().signal_group(Some(Signal::SIGKILL));
            let _ = tokio::time::timeout(Duration::from_secs(2), lifecycle.exited()).await;
            let details = Details {
                exit: failure.exit,
                stderr: conversation.last_stderr(),
                backend_pid: Some(backend_pid),
            };
            return failed(failure.stage, &failure.message, details);
        }
    };
    let ready: Value = serde_json::from_str(&ready_line).unwrap_or_default();
    let protocol_version = ready["protocol_version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // 2. The listener, on the literal loopback address only.
    let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port))).await
    {
        Ok(listener) => listener,
        Err(error) => {
            stop_backend(
                &conversation,
                &lifecycle,
                Duration::from_millis(args.grace_ms),
            )
            .await;
            let details = Details {
                backend_pid: Some(backend_pid),
                ..Details::default()
            };
            return failed(
                "listen",
                &format!("cannot listen on 127.0.0.1:{}: {error}", args.port),
                details,
            );
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(args.port);
    let guard = Arc::new(Guard::new(token.clone(), port, MAX_REQUEST_BYTES));
    let router = Router::new()
        .add_service(Arc::new(Agent {
            conversation: conversation.clone(),
        }))
        .add_service(Arc::new(Control {
            conversation: conversation.clone(),
            lifecycle: lifecycle.clone(),
            protocol_version: protocol_version.clone(),
        }));
    let connect = ConnectRpcService::new(router)
        .with_limits(Limits::default().with_max_request_body_size(MAX_REQUEST_BYTES))
        .with_deadline_policy(DeadlinePolicy::new().with_enforce_on_streams(true))
        // Loopback: compressing answers only costs both sides CPU (a 20 MB
        // event took 5 times as long gzipped). Compressed requests are
        // still accepted.
        .with_compression_policy(CompressionPolicy::disabled());
    let (stop_server, server_stopped) = watch::channel(false);
    let server = tokio::spawn(crate::server::serve(
        listener,
        connect,
        guard.clone(),
        server_stopped,
    ));

    // 3. Only now: the discovery line.
    announce(
        "ready",
        json!({
            "schema": SCHEMA,
            "api": API,
            "bridgeVersion": env!("CARGO_PKG_VERSION"),
            "url": format!("http://127.0.0.1:{port}"),
            "host": "127.0.0.1",
            "port": port,
            "pid": std::process::id(),
            "tokenFile": token.path(),
            "backend": {
                "pid": backend_pid,
                "version": ready["version"],
                "package": ready["package"],
                "protocolVersion": protocol_version,
            },
        }),
    );

    // 4. Serve until a shutdown is asked for or the backend dies.
    if !args.ignore_stdin {
        watch_stdin(lifecycle.clone());
    }
    let requested = tokio::select! {
        grace = lifecycle.stop_requested() => Some(grace),
        _ = lifecycle.exited() => None,
    };
    guard.stop_accepting();
    let code = match requested {
        Some(grace) => {
            stop_backend(&conversation, &lifecycle, grace).await;
            ExitCode::SUCCESS
        }
        None => {
            let report = lifecycle.exited().await;
            eprintln!(
                "agentlane-bridge: the backend exited unexpectedly with {}; stopping",
                report.status
            );
            ExitCode::from(3)
        }
    };
    conversation.close_streams();
    let _ = stop_server.send(true);
    let _ = server.await;
    code
}

/// `shutdown` to the backend, then after the grace SIGTERM and, after a
/// short second grace, SIGKILL to its process group; returns once it exited.
async fn stop_backend(conversation: &Arc<Conversation>, lifecycle: &Lifecycle, grace: Duration) {
    conversation.begin_shutdown();
    if tokio::time::timeout(grace, lifecycle.exited())
        .await
        .is_ok()
    {
        return;
    }
    lifecycle.mark_killed();
    conversation.backend().signal_group(Some(Signal::SIGTERM));
    if tokio::time::timeout(TERM_GRACE, lifecycle.exited())
        .await
        .is_ok()
    {
        return;
    }
    conversation.backend().signal_group(Some(Signal::SIGKILL));
    lifecycle.exited().await;
}

/// The backend's output, in order, into the conversation; its exit last,
/// once both output streams ended (or shortly after the exit, should a
/// leftover process hold a pipe open).
async fn pump(
    conversation: Arc<Conversation>,
    mut outputs: mpsc::Receiver<backend::Output>,
    lifecycle: Arc<Lifecycle>,
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
    lifecycle.report_exit(status);
}

/// The bridge's stdin is the parent-liveness pipe: end of file means the
/// launcher is gone. Nothing is read from it but the end.
fn watch_stdin(lifecycle: Arc<Lifecycle>) {
    let handle = tokio::runtime::Handle::current();
    let _ = std::thread::Builder::new()
        .name("bridge-parent".into())
        .spawn(move || {
            let mut sink = [0u8; 4096];
            let mut stdin = std::io::stdin().lock();
            loop {
                match std::io::Read::read(&mut stdin, &mut sink) {
                    Ok(0) => break,
                    Ok(_) => continue,
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            handle.spawn(async move {
                if lifecycle.request_stop(None) {
                    eprintln!(
                        "agentlane-bridge: stdin closed (the launcher is gone); shutting down"
                    );
                }
            });
        });
}

/// SIGTERM and SIGINT take the shutdown path. The handlers are installed
/// at once (before the discovery line), the wait runs in the background.
fn watch_signals(lifecycle: Arc<Lifecycle>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        if lifecycle.request_stop(None) {
            eprintln!("agentlane-bridge: {name}; shutting down");
        }
    });
}
