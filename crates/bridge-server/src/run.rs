//! The bridge's life, in order: token, the prefork server (`--warm`), the
//! default conversation's `ready`, listener, the discovery line, serving,
//! and the one shutdown path (every conversation closed at once).

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use connectrpc::{CompressionPolicy, ConnectRpcService, DeadlinePolicy, Limits, Router};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::backend::ExitStatus;
use crate::cli::ServeArgs;
use crate::conversations::start::{Starter, WarmFailure};
use crate::conversations::{self as registry, Conversations, Failed};
use crate::guard::Guard;
use crate::lifecycle::{ExitReport, Lifecycle};
use crate::service::{capabilities, Agent, Control, ConversationsApi, API};
use crate::token::TokenFile;

/// The discovery line's schema version.
const SCHEMA: u32 = 1;
/// Request bodies: a prompt may hold 1,000,000 code points (up to 4 MB of
/// UTF-8) plus its envelope.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
/// A tool's result (`AnswerToolCall`): the application's data, which may
/// be large (a 20 MB result). Every other call keeps `MAX_REQUEST_BYTES`
/// (the guard's check of the declared length).
const MAX_DATA_REQUEST_BYTES: usize = 64 * 1024 * 1024;

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
    // The prefork server (with --warm) starts now; its handshake is awaited
    // in the runtime.
    let starter = match Starter::new(args.launch(), args.start_options()) {
        Ok(starter) => starter,
        Err(WarmFailure(message)) => {
            token.remove();
            return failed("prefork", &message, Details::default());
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            token.remove();
            return failed("runtime", &error.to_string(), Details::default());
        }
    };
    let code = runtime.block_on(bridge(args, token.clone(), starter));
    token.remove();
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

async fn bridge(args: ServeArgs, token: Arc<TokenFile>, starter: Starter) -> ExitCode {
    let grace = Duration::from_millis(args.grace_ms);
    let lifecycle = Arc::new(Lifecycle::new(grace));
    watch_signals(lifecycle.clone());
    let tool_timeout = (args.tool_timeout_ms > 0).then(|| Duration::from_millis(args.tool_timeout_ms));
    let default_tools = match args.tools.as_deref().map(registry::host_plan::read_tools_file).transpose() {
        Ok(tools) => tools.unwrap_or_default(),
        Err(message) => return failed("tools", &message, Details::default()),
    };
    let conversations = Conversations::new(
        starter,
        registry::Limits {
            max: usize::from(args.max_conversations),
            idle_timeout: (args.idle_timeout_ms > 0)
                .then(|| Duration::from_millis(args.idle_timeout_ms)),
            grace,
            default_host: registry::HostRequest {
                tools: default_tools,
                call_timeout: tool_timeout,
                ..Default::default()
            },
            tool_timeout,
        },
    );

    // 1. The prefork server's handshake (with --warm), then the default
    // conversation's ready (its version is checked by the validator). A
    // stop asked for meanwhile (SIGTERM, stdin EOF) ends the wait too.
    let warm = tokio::select! {
        warm = conversations.starter.warm_ready() => warm,
        _ = lifecycle.stop_requested() => Err(WarmFailure("asked to stop before the prefork server was ready".into())),
    };
    if let Err(WarmFailure(message)) = warm {
        return failed("prefork", &message, Details::default());
    }
    let default = if args.no_default_conversation {
        None
    } else {
        match conversations.start_default(&lifecycle).await {
            Ok(hosted) => Some(hosted),
            Err(Failed {
                failure,
                stderr,
                backend_pid,
            }) => {
                conversations.starter.shutdown();
                let details = Details {
                    exit: failure.exit,
                    stderr,
                    backend_pid,
                };
                return failed(failure.stage, &failure.message, details);
            }
        }
    };
    let ready: Value = default
        .as_ref()
        .and_then(|hosted| serde_json::from_str(&hosted.ready_line).ok())
        .unwrap_or_default();
    let protocol_version = ready["protocol_version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // 2. The listener, on the literal loopback address only.
    let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port))).await
    {
        Ok(listener) => listener,
        Err(error) => {
            conversations.close_all(grace).await;
            let details = Details {
                backend_pid: default.as_ref().map(|hosted| hosted.backend_pid),
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
    let guard = Arc::new(Guard::new(token.clone(), port, MAX_REQUEST_BYTES, MAX_DATA_REQUEST_BYTES));
    let router = Router::new()
        .add_service(Arc::new(Agent {
            conversations: conversations.clone(),
        }))
        .add_service(Arc::new(Control {
            conversations: conversations.clone(),
            lifecycle: lifecycle.clone(),
            protocol_version: protocol_version.clone(),
        }))
        .add_service(Arc::new(ConversationsApi {
            conversations: conversations.clone(),
        }));
    let connect = ConnectRpcService::new(router)
        .with_limits(
            Limits::default()
                .with_max_request_body_size(MAX_DATA_REQUEST_BYTES)
                .with_max_message_size(MAX_DATA_REQUEST_BYTES),
        )
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
    let backend = default.as_ref().map(|hosted| {
        json!({
            "pid": hosted.backend_pid,
            "version": ready["version"],
            "package": ready["package"],
            "protocolVersion": protocol_version,
        })
    });
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
            "backend": backend,
            "capabilities": capabilities(conversations.starter.warm_available()),
            "conversations": {
                "default": default.as_ref().map(|hosted| hosted.id.clone()),
                "max": conversations.max(),
                "idleTimeoutMs": conversations.idle_timeout().map(|t| t.as_millis() as u64),
                "startMode": conversations.starter.default_mode().name(),
                "maxConcurrentStarts": conversations.starter.max_concurrent_starts(),
            },
        }),
    );
    drop(default);

    // 4. Serve until a shutdown is asked for or the default conversation's
    // backend dies with no other conversation open.
    if !args.ignore_stdin {
        watch_stdin(lifecycle.clone());
    }
    let requested = tokio::select! {
        grace = lifecycle.stop_requested() => Some(grace),
        () = conversations.default_lost() => None,
    };
    guard.stop_accepting();
    let report = conversations
        .close_all(requested.unwrap_or(grace))
        .await
        .unwrap_or(ExitReport {
            status: ExitStatus {
                code: Some(0),
                signal: None,
            },
            killed: false,
        });
    lifecycle.report(report);
    let code = match requested {
        Some(_) => ExitCode::SUCCESS,
        None => {
            eprintln!("agentlane-bridge: the default conversation's backend exited unexpectedly; stopping");
            ExitCode::from(3)
        }
    };
    let _ = stop_server.send(true);
    let _ = server.await;
    code
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
