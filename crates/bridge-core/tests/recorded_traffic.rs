//! Every line the real `agentlane==0.22.0` backend wrote in the recorded
//! sessions (`tests/fixtures/recorded/*.ndjson`) is a valid event, except the
//! deliberately cut last line of the backend that dies mid-line.

use bridge_core::validate_event_line;

#[test]
fn recorded_backend_output_validates() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/recorded");
    let mut lines = 0;
    let mut files = 0;
    for entry in std::fs::read_dir(dir).expect("recorded fixtures") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("ndjson") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let cut_last = path.file_name().unwrap() == "dies_midline.ndjson" && !text.ends_with('\n');
        let all: Vec<&str> = text.lines().collect();
        for (i, line) in all.iter().enumerate() {
            let result = validate_event_line(line);
            if cut_last && i == all.len() - 1 {
                assert!(
                    result.is_err(),
                    "{}: the cut line must not decode",
                    path.display()
                );
            } else {
                assert!(result.is_ok(), "{}:{}: {:?}", path.display(), i + 1, result);
                lines += 1;
            }
        }
    }
    assert!(
        files >= 20,
        "expected the recorded sessions, found {files} files"
    );
    assert!(lines > 500, "only {lines} lines");
}
