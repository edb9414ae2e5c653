//! The launch layer's channels through the real prefork server (issue 32):
//! a declared host channel reaches a warm backend at the table's fd 4 with
//! its number in the environment, an undeclared one is absent, and a fork
//! request whose descriptor count is wrong is refused with a diagnostic,
//! never half-served.
#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use bridge_prefork::protocol::encode_fork_request;
use bridge_prefork::{PreforkServer, Report};
use common::*;
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
use serde_json::Value;

const PROBE: &str = "host_channel_probe_app:create_backend";

/// The probe's `ready` metadata, and the conversation's host end.
fn probe(server: &PreforkServer, declared: bool) -> (Value, Option<UnixStream>, Talk) {
    let conversation = server.start_conversation(GRACE, declared).unwrap();
    conversation.control.socket().set_read_timeout(Some(READY)).unwrap();
    let mut conversation = conversation;
    let host = conversation.host_channel.take();
    let stdout = BufReader::new(conversation.stdout.try_clone().unwrap());
    let Some(Report::Started { pid, supervisor: Some(supervisor) }) = conversation.control.next_report().unwrap() else {
        panic!("no started line");
    };
    let mut talk = Talk { conversation, stdout, pid, supervisor };
    let ready = talk.ready();
    (ready["metadata"].clone(), host, talk)
}

#[test]
fn a_declared_host_channel_reaches_the_fork_at_fd_4_and_an_undeclared_one_does_not() {
    let server = started(PROBE);
    let (facts, host, talk) = probe(&server, true);
    let host = host.expect("the host end of a declared channel");
    host.set_read_timeout(Some(READY)).unwrap();
    let mut lines = BufReader::new(host.try_clone().unwrap());
    let mut hello = String::new();
    lines.read_line(&mut hello).unwrap();
    let hello: Value = serde_json::from_str(&hello).unwrap();
    assert_eq!(hello["fd"], bridge_launch::channels::HOST.fd);
    assert_eq!(hello["hello"], talk.pid);
    (&host).write_all(b"ping\n").unwrap();
    let mut echo = String::new();
    lines.read_line(&mut echo).unwrap();
    assert_eq!(echo, "echo ping\n");
    assert_eq!(facts["host_env"], "4");
    assert_eq!(facts["extra"], serde_json::json!([4]), "{facts}");
    assert_eq!(talk.end(), Some(Report::Exited(0)));
    // The backend (its only holder) is gone: the channel ends.
    let mut rest = Vec::new();
    assert_eq!(lines.read_to_end(&mut rest).unwrap(), 0);

    let (facts, host, talk) = probe(&server, false);
    assert!(host.is_none());
    assert_eq!(facts["host_env"], Value::Null);
    assert_eq!(facts["extra"], serde_json::json!([]), "{facts}");
    assert_eq!(talk.end(), Some(Report::Exited(0)));
}

/// One raw request on a connection: `says` descriptors in its text,
/// `sends` sent (each a fresh socket's end; the control socket's host end
/// is returned).
fn raw_request(connection: &UnixStream, says: usize, sends: usize) -> UnixStream {
    let (control, backend_control) = UnixStream::pair().unwrap();
    let mut others: Vec<UnixStream> = Vec::new();
    let mut fds: Vec<RawFd> = Vec::new();
    for at in 0..sends {
        if at == 3 {
            fds.push(backend_control.as_raw_fd());
        } else {
            let (_, end) = UnixStream::pair().unwrap();
            fds.push(end.as_raw_fd());
            others.push(end);
        }
    }
    let bytes = encode_fork_request(1, 300, says);
    let rights = [ControlMessage::ScmRights(&fds)];
    let sent = sendmsg::<UnixAddr>(connection.as_raw_fd(), &[IoSlice::new(&bytes)], &rights, MsgFlags::empty(), None).unwrap();
    assert_eq!(sent, bytes.len());
    control.set_read_timeout(Some(READY)).unwrap();
    control
}

#[test]
fn a_fork_request_with_a_wrong_descriptor_count_is_refused_with_a_diagnostic() {
    let (owner, ready, path, directory) = shared_server("scenario_app:create_backend", "count");
    // A host of its own, speaking the protocol by hand.
    let connection = UnixStream::connect(&path).unwrap();
    connection.set_read_timeout(Some(READY)).unwrap();
    let mut handshake = String::new();
    BufReader::new(connection.try_clone().unwrap()).read_line(&mut handshake).unwrap();
    assert!(handshake.contains("\"type\":\"ready\""), "{handshake}");

    let cases: [(usize, usize, &str); 4] = [
        (4, 5, "it says 4 descriptors, 5 came"),
        (5, 4, "it says 5 descriptors, 4 came"),
        (6, 6, "it says 6 descriptors, the channel table allows 4 to 5"),
        (3, 3, "it says 3 descriptors, the channel table allows 4 to 5"),
    ];
    for (says, sends, diagnostic) in cases {
        let before = children(ready.pid).len();
        let mut control = raw_request(&connection, says, sends);
        // Nothing forked: the control socket ends without a report.
        let mut report = String::new();
        control.read_to_string(&mut report).unwrap();
        assert_eq!(report, "", "says {says}, sends {sends}");
        assert_eq!(children(ready.pid).len(), before, "says {says}, sends {sends}: something was forked");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !owner.log_tail().iter().any(|line| line.contains(diagnostic)) {
            assert!(Instant::now() < deadline, "no diagnostic {diagnostic:?}: {:?}", owner.log_tail());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The connection is still in step: a right request forks.
    let control = raw_request(&connection, 4, 4);
    let mut line = String::new();
    BufReader::new(control).read_line(&mut line).unwrap();
    assert!(line.starts_with("started "), "{line:?}");
    drop(connection);
    owner.kill();
    assert!(owner.wait_exit(Some(Duration::from_secs(30))).is_some());
    std::fs::remove_dir_all(&directory).unwrap();
}
