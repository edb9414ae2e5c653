//! The binding of `bridge-prefork` (the prefork server's host side): a
//! server started from JavaScript, its events delivered on the JavaScript
//! thread, and fork requests with the descriptors the native readers made.
//! The policy (servers by key, idle time, fallback) is `lib/spawn/warm/`.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use bridge_prefork::{ForkRequest, ServerEvent, ServerSpec};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

/// What a server says, once each: `ready` or `failed`, `gone` (it closed
/// its channel: it has exited, and its conversations are ending), `exited`
/// (its supervisor too, once everything it forked has ended).
#[napi(object)]
pub struct PreforkEvent {
    /// `"ready"`, `"failed"`, `"gone"` or `"exited"`.
    pub kind: String,
    /// ready: the Python server's pid.
    pub pid: Option<u32>,
    pub python: Option<String>,
    pub agentlane: Option<String>,
    /// failed: a stable code (the server's refusal code, or
    /// `spawn-failed`, `exited-before-ready`, `bad-handshake`).
    pub code: Option<String>,
    pub message: Option<String>,
    /// exited: the server's exit code or signal number.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// failed, exited: the last lines of the server's log.
    pub log_tail: Vec<String>,
}

impl PreforkEvent {
    fn of(event: &ServerEvent) -> PreforkEvent {
        let mut out = PreforkEvent {
            kind: String::new(),
            pid: None,
            python: None,
            agentlane: None,
            code: None,
            message: None,
            exit_code: None,
            signal: None,
            log_tail: Vec::new(),
        };
        match event {
            ServerEvent::Ready(ready) => {
                out.kind = "ready".into();
                out.pid = Some(ready.pid);
                out.python = Some(ready.python.clone());
                out.agentlane = ready.agentlane.clone();
            }
            ServerEvent::Failed(error) => {
                out.kind = "failed".into();
                out.code = Some(error.code().to_owned());
                out.message = Some(error.message.clone());
                out.log_tail = error.log_tail.clone();
            }
            ServerEvent::Gone => out.kind = "gone".into(),
            ServerEvent::Exited(exit) => {
                out.kind = "exited".into();
                out.exit_code = exit.code;
                out.signal = exit.signal;
                out.log_tail = exit.log_tail.clone();
            }
        }
        out
    }
}

/// Why a fork request was not sent (`bridge_prefork::ForkError`).
#[napi(object)]
pub struct ForkRefusal {
    /// `not-ready`, `unavailable`, `busy` or `io`.
    pub code: String,
    pub message: String,
}

/// Weak: a server never keeps the event loop alive by itself (its start
/// is kept alive by `lib/spawn/warm/` while someone waits for it).
type EventCallback = ThreadsafeFunction<PreforkEvent, (), FnArgs<(PreforkEvent,)>, Status, false, true>;

/// The observer that delivers a server's events on the JavaScript thread.
fn observer(on_event: Function<FnArgs<(PreforkEvent,)>, ()>) -> Result<bridge_prefork::Observer> {
    let callback: EventCallback = on_event
        .build_threadsafe_function::<PreforkEvent>()
        .weak::<true>()
        .build_callback(|context| Ok(FnArgs::from((context.value,))))?;
    Ok(Box::new(move |event| {
        callback.call(PreforkEvent::of(event), ThreadsafeFunctionCallMode::NonBlocking);
    }))
}

/// Kills the server when the JavaScript environment that started it ends
/// (a terminated worker): its conversations go with it.
struct Owned(bridge_prefork::PreforkServer);

impl crate::teardown::Stop for Owned {
    fn stop(&self) {
        self.0.kill();
    }
}

/// One prefork server (docs/prefork.md).
#[napi]
pub struct PreforkServer {
    owned: Arc<Owned>,
    /// Registered for the environment's teardown (a weak reference there).
    _teardown: Arc<dyn crate::teardown::Stop>,
}

#[napi]
impl PreforkServer {
    /// Starts the server: `program` and `args` are the interpreter
    /// invocation (what precedes `-m agentlane_process_bridge`), `app` the
    /// `module:factory`, `cwd` and `env` the server's (every backend's),
    /// `supervisor` the path of `process-bridge-supervisor`. `onEvent` is
    /// called on this thread. `listen`: the path of the socket a shared
    /// server listens on (docs/prefork.md §7), or `null`.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "program: string, args: string[], app: string, cwd: string | null, env: Record<string, string> | null, supervisor: string, termGraceMs: number, listen: string | null, onEvent: (event: PreforkEvent) => void"
    )]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        env: Env,
        program: String,
        args: Vec<String>,
        app: String,
        cwd: Option<String>,
        vars: Option<HashMap<String, String>>,
        supervisor: String,
        term_grace_ms: u32,
        listen: Option<String>,
        on_event: Function<FnArgs<(PreforkEvent,)>, ()>,
    ) -> Result<Self> {
        let spec = ServerSpec {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            app,
            cwd: cwd.map(Into::into),
            env: vars.map(|vars| vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect()),
            supervisor: supervisor.into(),
            listen: listen.map(Into::into),
        };
        let grace = Duration::from_millis(u64::from(term_grace_ms));
        PreforkServer::owned(&env, bridge_prefork::PreforkServer::start(&spec, grace, Some(observer(on_event)?))?)
    }

    /// Connects to a shared server listening on `path` (another host's, or
    /// this one's): fails at once when nothing listens there.
    #[napi(factory, catch_unwind, ts_args_type = "path: string, onEvent: (event: PreforkEvent) => void")]
    pub fn connect(env: Env, path: String, on_event: Function<FnArgs<(PreforkEvent,)>, ()>) -> Result<Self> {
        PreforkServer::owned(&env, bridge_prefork::PreforkServer::connect(path.as_ref(), Some(observer(on_event)?))?)
    }

    fn owned(env: &Env, server: bridge_prefork::PreforkServer) -> Result<Self> {
        let owned = Arc::new(Owned(server));
        let stoppable: Arc<dyn crate::teardown::Stop> = owned.clone();
        crate::teardown::stop_on_env_teardown(env, &stoppable)?;
        Ok(PreforkServer {
            owned,
            _teardown: stoppable,
        })
    }

    /// Forks a conversation whose backend gets these descriptors as its
    /// stdin, stdout and stderr, its supervisor `control` as its control
    /// socket, and `hostChannel` (when the start declares one) as its host
    /// channel (the child's ends of the channels `lib/spawn/stdio.ts` makes;
    /// the caller closes them after this returns, as after a spawn). Never
    /// waits for the server: `null` once the request is sent, else why it
    /// was not (`busy`: the server is not reading its requests).
    #[napi(catch_unwind)]
    pub fn fork(
        &self,
        stdin_fd: i32,
        stdout_fd: i32,
        stderr_fd: i32,
        control_fd: i32,
        host_channel_fd: Option<i32>,
        term_grace_ms: u32,
    ) -> Result<Option<ForkRefusal>> {
        if [stdin_fd, stdout_fd, stderr_fd, control_fd].iter().chain(host_channel_fd.iter()).any(|&fd| fd < 0) {
            return Err(Error::from_reason("fork needs open file descriptors"));
        }
        // SAFETY: the caller passes descriptors it holds open until after
        // this returns (it closes them then, as after a spawn); they are only
        // borrowed for the send.
        let fds = unsafe {
            [stdin_fd, stdout_fd, stderr_fd, control_fd].map(|fd| BorrowedFd::borrow_raw(fd))
        };
        // SAFETY: as above.
        let host = host_channel_fd.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) });
        let request = ForkRequest {
            stdin: fds[0],
            stdout: fds[1],
            stderr: fds[2],
            control: fds[3],
            host,
            term_grace: Duration::from_millis(u64::from(term_grace_ms)),
        };
        Ok(self.owned.0.fork(&request).err().map(|error| ForkRefusal {
            code: error.code().to_owned(),
            message: error.to_string(),
        }))
    }

    /// What the app's import wrote (the server's log before its handshake).
    #[napi(catch_unwind)]
    pub fn import_output(&self) -> Vec<String> {
        self.owned.0.import_output()
    }

    /// The server's log's last lines.
    #[napi(catch_unwind)]
    pub fn log_tail(&self) -> Vec<String> {
        self.owned.0.log_tail()
    }

    /// Accepts no more forks; the server exits once its conversations ended.
    #[napi(catch_unwind)]
    pub fn shutdown(&self) {
        self.owned.0.shutdown();
    }

    /// Ends the server and all its conversations now; `false` if it was gone.
    #[napi(catch_unwind)]
    pub fn kill(&self) -> bool {
        self.owned.0.kill()
    }

    /// The pid of the server's supervisor; `null` for a connection to a shared server.
    #[napi(getter)]
    pub fn supervisor_pid(&self) -> Option<u32> {
        self.owned.0.supervisor_pid()
    }
}

/// The interpreter invocation and the app of a cold backend's arguments,
/// when a prefork server can stand in for it (`[…invocation, "-m",
/// "agentlane_process_bridge", "--app", app]`), else `null`.
#[napi(object)]
pub struct WarmInvocation {
    pub prefix: Vec<String>,
    pub app: String,
}

#[napi(catch_unwind)]
pub fn warm_invocation(args: Vec<String>) -> Option<WarmInvocation> {
    bridge_prefork::warm_invocation(&args).map(|(prefix, app)| WarmInvocation { prefix, app })
}
