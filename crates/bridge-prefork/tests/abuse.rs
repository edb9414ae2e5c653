//! The prefork server pushed past the happy path (issue 29), with the real
//! backend and supervisor: a server that stops answering never blocks
//! the host's thread, a shutdown is not held by what the app started at
//! import, a low descriptor limit, and a refusal's whole traceback.
#![cfg(target_os = "linux")]

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bridge_prefork::{PreforkServer, ServerStatus, StartErrorKind};
use common::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

fn python_pid(server: &PreforkServer) -> u32 {
    match server.status() {
        ServerStatus::Ready(ready) => ready.pid,
        other => panic!("{other:?}"),
    }
}

/// SIGCONTs the stopped server however the test ends (a failed assertion
/// must not leave a stopped process behind).
struct Stopped(Pid);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

#[test]
fn a_stopped_server_never_blocks_the_caller() {
    let server = started("scenario_app:create_backend");
    let pid = Pid::from_raw(python_pid(&server) as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let _continue = Stopped(pid);
    // More requests than the channel's buffer holds (about 280 on Linux):
    // each call returns, queued or refused; none waits for the server.
    let (done, results) = mpsc::channel();
    let forks = server.clone();
    std::thread::spawn(move || {
        let outcomes: Vec<Result<(), &'static str>> = (0..600)
            .map(|_| forks.start_conversation(GRACE, false).map(drop).map_err(|error| error.code()))
            .collect();
        let _ = done.send(outcomes);
    });
    let outcomes = results
        .recv_timeout(Duration::from_secs(60))
        .expect("a fork request blocked the caller on a stopped server");
    let refused: Vec<&str> = outcomes.iter().filter_map(|o| o.err()).collect();
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    assert!(!refused.is_empty(), "600 requests fit in the channel");
    assert!(refused.iter().all(|&code| code == "busy"), "{refused:?}");
    // Once it runs again, it works through what it had queued (each of
    // those conversations ends at once: the host dropped its ends), and
    // takes requests again.
    drop(_continue);
    let deadline = Instant::now() + READY;
    let mut conversation = loop {
        match server.start_conversation(GRACE, false) {
            Ok(conversation) => break conversation,
            Err(error) if error.code() == "busy" && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(error) => panic!("{error}"),
        }
    };
    conversation.control.socket().set_read_timeout(Some(READY)).unwrap();
    assert!(matches!(conversation.control.next_report().unwrap(), Some(bridge_prefork::Report::Started { .. })));
    assert!(server.kill());
}

/// The import-time process of `app`, which it reports on stderr.
fn import_time_child(server: &PreforkServer) -> u32 {
    let children = children(python_pid(server));
    assert_eq!(children.len(), 1, "the app's import-time process: {children:?}");
    children[0]
}

#[test]
fn a_shutdown_is_not_held_by_a_process_the_app_started_at_import() {
    for app in ["warm_popen_app:create_backend", "warm_fork_app:create_backend"] {
        for conversations in [0, 1] {
            let server = started(app);
            let helper = import_time_child(&server);
            for _ in 0..conversations {
                let mut talk = Talk::start(&server);
                talk.ready();
                assert_eq!(talk.end(), Some(bridge_prefork::Report::Exited(0)));
            }
            server.shutdown();
            let exit = server.wait_exit(Some(Duration::from_secs(30)));
            assert_eq!(exit.map(|e| e.code), Some(Some(0)), "{app} with {conversations} conversation(s): the server did not exit");
            // Contained like everything else: the server's supervisor ended it.
            assert!(gone_within(helper, Duration::from_secs(10)), "{app}: the import-time process {helper} survived");
        }
    }
}

#[test]
fn a_warm_start_works_wherever_a_cold_one_does_under_a_descriptor_limit() {
    // A cold backend starts under `ulimit -n 10` (the real backend, measured
    // by hand); the server needs a few more for itself and the four
    // descriptors of a request. From 16 up every limit must fork and run;
    // below, a fork that cannot be made must say so, never hang.
    for limit in [16, 24, 40, 63, 64, 67, 68, 100] {
        let mut spec = spec("scenario_app:create_backend");
        spec.args = vec![format!("--nofile={limit}:{limit}").into(), "--".into(), python().into()];
        spec.program = "prlimit".into();
        let server = PreforkServer::start(&spec, GRACE, None).unwrap();
        server.wait_ready(Some(READY)).unwrap_or_else(|e| panic!("limit {limit}: {e}: {:?}", e.log_tail));
        let mut talk = Talk::start(&server);
        talk.ready();
        assert_eq!(talk.run("chat low"), "Hello! This is a scripted reply. You said: chat low", "limit {limit}");
        assert_eq!(talk.end(), Some(bridge_prefork::Report::Exited(0)), "limit {limit}");
        assert!(server.kill());
    }
}

#[test]
fn a_refusal_comes_with_the_import_s_whole_traceback() {
    // The refusal line and the traceback travel on two descriptors: the
    // tail must hold all of it every time (it was empty or cut 3 times in 10).
    for attempt in 0..10 {
        let server = PreforkServer::start(&spec("warm_boom_app:create_backend"), GRACE, None).unwrap();
        let error = server.wait_ready(Some(READY)).unwrap_err();
        assert_eq!(error.kind, StartErrorKind::Refused("import-failed".into()), "{error}");
        let tail = &error.log_tail;
        assert!(tail.first().is_some_and(|l| l.starts_with("Traceback (most recent call last):")), "attempt {attempt}: {tail:?}");
        assert_eq!(tail.last().map(String::as_str), Some("RuntimeError: boom at import"), "attempt {attempt}: {tail:?}");
        let started = Instant::now();
        assert!(server.wait_exit(Some(Duration::from_secs(10))).is_some());
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn what_the_import_wrote_is_kept_for_every_conversation() {
    let server = started("warm_banner_app:create_backend");
    let output = server.import_output();
    assert!(output.iter().any(|l| l == "banner: warm_banner_app imported"), "{output:?}");
    assert!(output.iter().any(|l| l.contains("UserWarning: an import-time warning")), "{output:?}");
    // The import's SIGCHLD handler is the backend's, as cold (the server
    // replaced it with its own for itself only).
    let mut talk = Talk::start(&server);
    let ready = talk.ready();
    assert_eq!(ready["metadata"]["sigchld"], "on_child", "{ready}");
    assert_eq!(talk.end(), Some(bridge_prefork::Report::Exited(0)));
    assert!(server.kill());
}

#[test]
fn a_shared_server_forks_for_every_host_connected_to_it() {
    let (owner, ready, path, directory) = shared_server("scenario_app:create_backend", "shared");
    // Two other hosts (here: two connections) get the same handshake and
    // fork from the same server.
    let guests: Vec<PreforkServer> = (0..2).map(|_| PreforkServer::connect(&path, None).unwrap()).collect();
    for guest in &guests {
        assert_eq!(guest.wait_ready(Some(READY)).unwrap(), ready);
        assert_eq!(guest.supervisor_pid(), None);
        let mut talk = Talk::start(guest);
        talk.ready();
        assert!(children(ready.pid).contains(&talk.supervisor), "forked by the shared server");
        assert_eq!(talk.run("chat shared"), "Hello! This is a scripted reply. You said: chat shared");
        assert_eq!(talk.end(), Some(bridge_prefork::Report::Exited(0)));
    }
    // A guest cannot end the server: its kill only closes its connection.
    assert!(!guests[0].kill());
    assert!(guests[0].wait_exit(Some(Duration::from_secs(10))).is_some());
    assert!(guests[1].start_conversation(GRACE, false).is_ok());
    // The owner's shutdown ends the server, the socket and every connection.
    owner.shutdown();
    assert_eq!(owner.wait_exit(Some(Duration::from_secs(30))).map(|e| e.code), Some(Some(0)));
    assert!(guests[1].wait_exit(Some(Duration::from_secs(10))).is_some());
    assert!(!path.exists(), "the socket was left behind");
    assert!(PreforkServer::connect(&path, None).is_err());
    std::fs::remove_dir_all(&directory).unwrap();
}
