//! `--adopt <pid>` (the prefork server's conversations, docs/prefork.md)
//! and the last line of the control socket, the backend's exit: against
//! real process trees. A small Python launcher becomes a child subreaper,
//! forks the backend (a shell script) and then execs the supervisor, which
//! adopts it, as the prefork server's conversation process does.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read};
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{alive, STUBBORN, SUPERVISOR};

struct Adopted {
    child: Child,
    control: BufReader<UnixStream>,
    /// The first line's two pids: the backend's and the supervisor's.
    started: (u32, u32),
    stdout: BufReader<std::process::ChildStdout>,
}

/// Subreaper (kept across exec), fork `sh -c <script>`, wait `delay`
/// seconds, then exec the supervisor adopting it, control socket on fd 3.
const LAUNCHER: &str = r#"
import ctypes, os, sys, time
supervisor, script, grace, delay = sys.argv[1:]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
backend = os.fork()
if backend == 0:
    os.execvp("sh", ["sh", "-c", script])
time.sleep(float(delay))
os.dup2(0, 3)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.execv(supervisor, [supervisor, "--term-grace-ms", grace, "--adopt", str(backend)])
"#;

/// Starts `script` under an adopting supervisor (`delay`: seconds between
/// the fork and the exec).
fn adopt(script: &str, delay: &str, grace_ms: u32) -> Adopted {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = Command::new("python3")
        .args(["-c", LAUNCHER, SUPERVISOR, script, &grace_ms.to_string(), delay])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut control = BufReader::new(ours);
    let line = read_line(&mut control);
    let started = line
        .strip_prefix("started ")
        .and_then(|rest| {
            let mut pids = rest.trim().split(' ').map(|p| p.parse().ok());
            Some((pids.next()??, pids.next()??))
        })
        .unwrap_or_else(|| panic!("unexpected report {line:?}"));
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Adopted {
        child,
        control,
        started,
        stdout,
    }
}

fn read_line(from: &mut impl BufRead) -> String {
    let mut line = String::new();
    from.read_line(&mut line).unwrap();
    line
}

impl Adopted {
    fn pids(&mut self) -> Vec<i32> {
        read_line(&mut self.stdout)
            .strip_prefix("pids ")
            .unwrap_or_else(|| panic!("unexpected output"))
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    }

    /// The rest of the control socket, up to its end of file.
    fn rest_of_control(&mut self) -> String {
        let mut rest = String::new();
        self.control.read_to_string(&mut rest).unwrap();
        rest
    }

    fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the supervisor did not exit in {within:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn an_adopted_tree_is_contained_as_a_spawned_one_and_its_end_is_the_last_line() {
    let mut s = adopt(STUBBORN, "0", 200);
    let pids = s.pids();
    // The backend the shell forked, and the supervisor is the shell's pid (exec).
    assert_eq!(s.started, (pids[0] as u32, s.child.id()));
    assert!(pids.iter().all(|&p| alive(p)));
    // End of file from the host (as when it dies); its reading side stays open.
    s.control.get_ref().shutdown(Shutdown::Write).unwrap();
    assert_eq!(s.rest_of_control(), "signaled 9\n");
    let status = s.wait(Duration::from_secs(5));
    assert_eq!(status.signal(), Some(9), "{status:?}");
    for pid in pids {
        assert!(!alive(pid), "{pid} survived");
    }
}

#[test]
fn the_exit_line_says_the_code_or_the_signal() {
    let mut s = adopt("echo \"pids $$\"; exit 7", "0", 200);
    s.pids();
    assert_eq!(s.rest_of_control(), "exited 7\n");
    assert_eq!(s.wait(Duration::from_secs(5)).code(), Some(7));

    let mut s = adopt("echo \"pids $$\"; kill -SEGV $$", "0", 200);
    s.pids();
    assert_eq!(s.rest_of_control(), "signaled 11\n");
    assert_eq!(s.wait(Duration::from_secs(5)).signal(), Some(11));
}

#[test]
fn a_backend_that_exited_before_the_adoption_is_still_reported() {
    // The backend is a zombie by the time the supervisor runs: no SIGCHLD
    // will come for it.
    let mut s = adopt("exit 4", "0.3", 200);
    assert_eq!(s.rest_of_control(), "exited 4\n");
    assert_eq!(s.wait(Duration::from_secs(5)).code(), Some(4));
}

#[test]
fn what_an_adopted_backend_leaves_behind_goes_too() {
    let script = r#"
        setsid sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done' &
        echo "pids $$ $!"
        exit 3
    "#;
    let mut s = adopt(script, "0", 200);
    let pids = s.pids();
    assert_eq!(s.rest_of_control(), "exited 3\n");
    assert_eq!(s.wait(Duration::from_secs(5)).code(), Some(3));
    assert!(!alive(pids[1]), "the escaped grandchild survived");
}

#[test]
fn a_process_that_is_not_our_child_cannot_be_adopted() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let output = Command::new("sh")
        .args(["-c", r#"exec 3<&0 </dev/null; exec "$0" --adopt 1"#, SUPERVISOR])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(127));
    let line = read_line(&mut BufReader::new(ours));
    assert!(line.starts_with("failed ECHILD 10 cannot adopt 1"), "{line:?}");

    // Nor with a command as well.
    let output = Command::new(SUPERVISOR).args(["--adopt", "1", "--", "true"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--adopt takes no command"));
}

#[test]
fn a_spawned_backend_also_ends_with_its_exit_line() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let child = Command::new("sh")
        .args(["-c", r#"exec 3<&0 </dev/null; exec "$0" "$@""#, SUPERVISOR])
        .args(["--", "sh", "-c", "exit 5"])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .unwrap();
    let mut all = String::new();
    BufReader::new(ours).read_to_string(&mut all).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 2, "{all:?}");
    assert!(lines[0].starts_with("started ") && !lines[0][8..].contains(' '), "{all:?}");
    assert_eq!(lines[1], "exited 5");
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(5));
}
