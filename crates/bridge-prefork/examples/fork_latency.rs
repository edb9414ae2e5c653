//! Fork → `ready` latency of warm conversations, one after another, with
//! the real backend (a quick look; `npm run bench:start` is the benchmark):
//! `cargo run --release -p bridge-prefork --example fork_latency -- <python> <cwd> <module:factory> <supervisor> [n]`
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use bridge_prefork::{PreforkServer, ServerSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [python, cwd, app, supervisor, rest @ ..] = &args[..] else {
        return Err("usage: <python> <cwd> <module:factory> <supervisor> [n]".into());
    };
    let n: usize = rest.first().map_or(Ok(30), |n| n.parse())?;
    let command = ["-m", "agentlane_process_bridge", "--app", app].map(String::from);
    let mut spec = ServerSpec::for_command(python, &command, supervisor).ok_or("not a warm command")?;
    spec.cwd = Some(cwd.into());
    let begun = Instant::now();
    let server = PreforkServer::start(&spec, Duration::from_millis(500), None)?;
    server.wait_ready(None)?;
    println!("server ready in {:?}", begun.elapsed());
    let mut times = Vec::new();
    for _ in 0..n {
        let begun = Instant::now();
        let conversation = server.start_conversation(Duration::from_millis(500), false)?;
        let mut line = String::new();
        BufReader::new(conversation.stdout).read_line(&mut line)?;
        times.push(begun.elapsed());
        drop(conversation.stdin);
    }
    times.sort();
    println!("fork → ready over {n}: p50 {:?}, p99 {:?}, max {:?}", times[n / 2], times[(n * 99) / 100], times[n - 1]);
    server.kill();
    Ok(())
}
