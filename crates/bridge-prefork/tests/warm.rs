//! The prefork server against the real backend (`agentlane` 0.22.0 in the
//! repository's `.venv`, made by `scripts/setup-python.sh`) and the real
//! supervisor: handshakes and refusals, conversations that run as cold
//! ones do, what forks share and what they do not, and containment.
#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::Duration;

use bridge_prefork::{PreforkServer, Report, StartErrorKind};
use common::*;
use serde_json::Value;

#[test]
fn a_warm_conversation_runs_as_a_cold_one_and_ends_with_its_exit() {
    let server = started("scenario_app:create_backend");
    let mut talk = Talk::start(&server);
    // Contained as a cold backend is: a process group of its own, under a
    // supervisor of its own, which is the server's child.
    assert_eq!(nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(talk.pid as i32))).unwrap().as_raw() as u32, talk.pid);
    let ready = talk.ready();
    assert_eq!(ready["metadata"]["app"], "scenario");
    assert_eq!(ready["config"], serde_json::json!({"model": "scripted-1"}));
    assert_eq!(talk.run("chat hello"), "Hello! This is a scripted reply. You said: chat hello");
    assert_eq!(talk.run("count"), "This conversation has 2 user message(s).");
    let (pid, supervisor) = (talk.pid, talk.supervisor);
    // End of stdin ends the backend, as cold; the supervisor says how.
    assert_eq!(talk.end(), Some(Report::Exited(0)));
    assert!(gone_within(pid, Duration::from_secs(5)));
    assert!(gone_within(supervisor, Duration::from_secs(5)));
    assert!(server.kill());
}

#[test]
fn every_fork_draws_its_own_randomness_and_shares_only_what_was_imported() {
    let server = started("warm_probe_app:create_backend");
    let mut first = Talk::start(&server);
    let mut second = Talk::start(&server);
    let a = first.ready()["metadata"].clone();
    let b = second.ready()["metadata"].clone();
    let server_pid = match server.status() {
        bridge_prefork::ServerStatus::Ready(ready) => ready.pid,
        other => panic!("{other:?}"),
    };
    for key in ["random", "uuid", "secret", "pid"] {
        assert_ne!(a[key], b[key], "{key} is the same in two forks");
    }
    // The factory ran in each fork, from the module as imported.
    assert_eq!((a["factory_calls"].as_u64(), b["factory_calls"].as_u64()), (Some(1), Some(1)));
    assert_eq!(a["imported_in"].as_u64(), Some(u64::from(server_pid)));
    // Conversation state is per conversation.
    assert_eq!(first.run("count"), "This conversation has 1 user message(s).");
    assert_eq!(first.run("count"), "This conversation has 2 user message(s).");
    assert_eq!(second.run("count"), "This conversation has 1 user message(s).");
    assert!(server.kill());
}

#[test]
fn the_backend_sees_what_python_dash_m_gives() {
    let server = started("warm_probe_app:create_backend");
    let mut talk = Talk::start(&server);
    let warm = talk.ready()["metadata"].clone();
    assert!(server.kill());

    let mut cold = Command::new(python())
        .args(["-m", "agentlane_process_bridge", "--app", "warm_probe_app:create_backend"])
        .current_dir(repo().join("tests/e2e/backends"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(cold.stdout.take().unwrap()).read_line(&mut line).unwrap();
    drop(cold.stdin.take());
    assert!(cold.wait().unwrap().success());
    let cold: Value = serde_json::from_str(&line).unwrap();
    let cold = &cold["metadata"];
    for key in ["argv", "path0", "main_file", "main_spec", "factory_calls"] {
        assert_eq!(warm[key], cold[key], "{key}");
    }
    // Only the stdio's kind differs from a cold start where the host's differs:
    // stdin a socket (as Node's spawn makes it), stdout and stderr pipes.
    assert_eq!(warm["stdio"], cold["stdio"]);
    assert_eq!(cold["imported_in"], cold["pid"]);
}

#[test]
fn refusals_have_their_codes() {
    for (app, code, words) in [
        ("warm_thread_app:create_backend", "threads", "import-time-poller"),
        ("no_such_module:create_backend", "import-failed", "No module named 'no_such_module'"),
        ("scenario_app:no_such_factory", "bad-app", "has no attribute 'no_such_factory'"),
    ] {
        let server = PreforkServer::start(&spec(app), GRACE, None).unwrap();
        let error = server.wait_ready(Some(READY)).unwrap_err();
        assert_eq!(error.kind, StartErrorKind::Refused(code.into()), "{app}: {error}");
        assert!(error.message.contains(words), "{app}: {error}");
        // A refusing server exits by itself.
        let exit = server.wait_exit(Some(Duration::from_secs(10))).expect("the refusing server exited");
        assert_eq!(exit.code, Some(3), "{app}");
        assert!(server.start_conversation(GRACE, false).is_err());
    }
}

#[test]
fn an_interpreter_that_is_not_there_fails_the_start() {
    let mut spec = spec("scenario_app:create_backend");
    spec.program = "/nonexistent/python".into();
    let server = PreforkServer::start(&spec, GRACE, None).unwrap();
    let error = server.wait_ready(Some(READY)).unwrap_err();
    assert_eq!(error.kind, StartErrorKind::ExitedBeforeReady, "{error}");
    assert!(error.message.contains("could not be started") && error.message.contains("(ENOENT)"), "{error}");
    assert_eq!(server.wait_exit(Some(Duration::from_secs(10))).unwrap().code, Some(127));
}

#[test]
fn a_factory_that_raises_ends_its_conversation_with_its_message() {
    let server = started("warm_probe_app:failing_backend");
    let mut conversation = open(&server);
    let mut reports = Vec::new();
    while let Some(report) = conversation.control.next_report().unwrap() {
        reports.push(report);
    }
    assert!(matches!(reports[0], Report::Started { .. }), "{reports:?}");
    assert_eq!(reports.last(), Some(&Report::Exited(1)));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut conversation.stderr, &mut stderr).unwrap();
    assert!(stderr.contains("agentlane_process_bridge: the factory failed on purpose"), "{stderr}");
    // The server is unaffected.
    let mut next = open(&server);
    assert!(matches!(next.control.next_report().unwrap(), Some(Report::Started { .. })));
    assert!(server.kill());
}

#[test]
fn the_server_keeps_no_descriptor_of_a_conversation() {
    let server = started("scenario_app:create_backend");
    let ready = match server.status() {
        bridge_prefork::ServerStatus::Ready(ready) => ready,
        other => panic!("{other:?}"),
    };
    let before = fd_count(ready.pid);
    let mut talks: Vec<Talk> = (0..3).map(|_| Talk::start(&server)).collect();
    for talk in &mut talks {
        talk.ready();
    }
    assert_eq!(fd_count(ready.pid), before);
    for talk in talks {
        // Nor does its end depend on the server: its own stdin's end ends it.
        assert_eq!(talk.end(), Some(Report::Exited(0)));
    }
    assert_eq!(fd_count(ready.pid), before);
    assert!(server.kill());
}

#[test]
fn closing_the_control_socket_ends_the_conversation_and_its_descendants() {
    let server = started("scenario_app:create_backend");
    let mut talk = Talk::start(&server);
    talk.ready();
    let (pid, supervisor) = (talk.pid, talk.supervisor);
    drop(talk.conversation.control); // as when the host dies
    assert!(gone_within(pid, Duration::from_secs(5)), "the backend survived");
    assert!(gone_within(supervisor, Duration::from_secs(5)), "its supervisor survived");
    assert!(server.kill());
}

#[test]
fn a_killed_server_takes_its_conversations_with_it() {
    let server = started("scenario_app:create_backend");
    let mut talks: Vec<Talk> = (0..2).map(|_| Talk::start(&server)).collect();
    for talk in &mut talks {
        talk.ready();
    }
    let python = match server.status() {
        bridge_prefork::ServerStatus::Ready(ready) => ready.pid,
        other => panic!("{other:?}"),
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(python as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let exit = server.wait_exit(Some(Duration::from_secs(10))).expect("the server's end was reported");
    assert_eq!(exit.signal, Some(9));
    for mut talk in talks {
        let mut last = None;
        while let Some(report) = talk.conversation.control.next_report().unwrap() {
            last = Some(report);
        }
        // Ended by its supervisor's SIGTERM (the server's supervisor ended the tree).
        assert_eq!(last, Some(Report::Signaled(15)));
        assert!(!alive(talk.pid) && !alive(talk.supervisor));
    }
    assert!(!alive(server.supervisor_pid().unwrap()));
}

#[test]
fn shutdown_lets_running_conversations_finish_then_the_server_exits() {
    let server = started("scenario_app:create_backend");
    let mut talk = Talk::start(&server);
    talk.ready();
    server.shutdown();
    assert!(server.start_conversation(GRACE, false).is_err(), "a shut-down server forks no more");
    assert_eq!(talk.run("chat still here"), "Hello! This is a scripted reply. You said: chat still here");
    assert!(server.wait_exit(Some(Duration::from_millis(300))).is_none(), "the server exited under a conversation");
    assert_eq!(talk.end(), Some(Report::Exited(0)));
    let exit = server.wait_exit(Some(Duration::from_secs(10))).expect("the server exited after its last conversation");
    assert_eq!(exit.code, Some(0));
}
