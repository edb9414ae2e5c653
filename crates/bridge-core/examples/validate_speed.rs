//! Times `validate_event_line` on a representative small event (its shape
//! remembered after the first line, and by the schema walk alone) and on a
//! 10 MB string payload, to guide optimisation of the core alone (the
//! end-to-end comparison with `JSON.parse` is `npm run bench`).
//!
//!     cargo run --release -p bridge-core --example validate_speed

fn main() {
    let line = r#"{"protocol_version":"1.0","type":"run_event","ts":1767225601.1,"event":{"type":"model_stream","payload":{"event":{"kind":"text_delta","raw":null,"provider_event_type":null,"item_index":null,"item_type":null,"text":"Two ","tool_call_id":null,"tool_call_index":null,"arguments_delta":null,"reasoning":null,"reasoning_signature":null,"response":null,"error":null,"continuation":null,"async_tool_call":null,"required_tool_call_ids":[],"input_messages":null,"steering":null},"kind":"model_stream"}}}"#;
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(bridge_core::validate_event_line(std::hint::black_box(line))).unwrap();
    }
    println!(
        "{} bytes, shape remembered: {:.0} ns per line",
        line.len(),
        start.elapsed().as_nanos() as f64 / n as f64
    );
    let start = std::time::Instant::now();
    for _ in 0..n {
        let mut cursor = bridge_core::json::TextCursor::new(std::hint::black_box(line));
        std::hint::black_box(bridge_core::validate_event(&mut cursor))
            .unwrap()
            .unwrap();
    }
    println!(
        "{} bytes, schema walk: {:.0} ns per line",
        line.len(),
        start.elapsed().as_nanos() as f64 / n as f64
    );
    if std::env::var("BIG").as_deref() == Ok("0") {
        return;
    }
    let big = format!(
        r#"{{"protocol_version":"1.0","type":"run_complete","ts":1,"final_output":"{}","turn_count":1,"response_count":1,"shim_state":{{}}}}"#,
        "x".repeat(10 << 20)
    );
    let start = std::time::Instant::now();
    for _ in 0..20 {
        bridge_core::validate_event_line(&big).unwrap();
    }
    println!(
        "10 MiB string: {:.2} ms per line",
        start.elapsed().as_secs_f64() * 1000.0 / 20.0
    );
    let limits = bridge_core::lift::LiftLimits::default();
    let start = std::time::Instant::now();
    for _ in 0..20 {
        std::hint::black_box(bridge_core::lift::lift_large_values(&big, limits)).unwrap();
    }
    println!(
        "10 MiB string, lifted out: {:.2} ms per line",
        start.elapsed().as_secs_f64() * 1000.0 / 20.0
    );
    let entries: Vec<String> = (0..100_000)
        .map(|i| format!(r#"{{"path":"src/module_{i}/file_{i}.ts","size":{},"tags":["ts","src"],"meta":{{"owner":"user{}","hidden":false,"lines":[{i},{}]}}}}"#, i * 37, i % 13, i + 1))
        .collect();
    let nested = format!(
        r#"{{"protocol_version":"1.0","type":"run_complete","ts":1,"final_output":{{"files":[{}]}},"turn_count":1,"response_count":1,"shim_state":{{}}}}"#,
        entries.join(",")
    );
    let start = std::time::Instant::now();
    for _ in 0..20 {
        bridge_core::validate_event_line(&nested).unwrap();
    }
    let validate = start.elapsed().as_secs_f64() * 1000.0 / 20.0;
    let start = std::time::Instant::now();
    for _ in 0..20 {
        std::hint::black_box(bridge_core::lift::lift_large_values(&nested, limits)).unwrap();
    }
    println!(
        "{:.1} MiB nested: {validate:.2} ms per line to validate, {:.2} ms to cut its array into chunks",
        nested.len() as f64 / (1 << 20) as f64,
        start.elapsed().as_secs_f64() * 1000.0 / 20.0
    );
}
