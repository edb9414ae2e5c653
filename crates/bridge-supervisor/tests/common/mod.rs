//! What the supervisor's test files share: the binary under test, the
//! stubborn tree they contain, and the check that a process still runs.
#![allow(dead_code)] // each test file uses its part

pub const SUPERVISOR: &str = env!("CARGO_BIN_EXE_process-bridge-supervisor");

/// A stubborn tree: prints `pids <backend> <grandchild> <escaped>` on
/// stdout, then waits for ever, ignoring the usual signals.
pub const STUBBORN: &str = r#"
trap '' TERM INT HUP
sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done' &
g=$!
setsid sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done' &
e=$!
echo "pids $$ $g $e"
while :; do sleep 1; done
"#;

/// Whether `pid` is a process that still runs (a zombie does not).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}
