//! The contract both ends state: this crate's `protocol` module and the
//! Python module's `_protocol.py` (read by the repository's `.venv` Python)
//! must agree, constant by constant.
#![cfg(unix)]

use std::process::Command;

use bridge_host_channel::protocol::{
    BACKEND_MESSAGE_TYPES, FD_ENV, HOST_MESSAGE_TYPES, MAX_ID_BYTES, MAX_LINE_BYTES,
    MODULE_ERROR_KINDS, PROTOCOL_VERSION,
};
use bridge_host_channel::ReplyErrorKind;
use serde_json::{json, Value};

#[test]
fn the_python_module_states_the_same_contract() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = repo.join(".venv/bin/python");
    assert!(python.exists(), "run scripts/setup-python.sh");
    let names = [
        "PROTOCOL_VERSION",
        "FD_ENV",
        "MAX_LINE_BYTES",
        "MAX_ID_BYTES",
        "BACKEND_MESSAGE_TYPES",
        "HOST_MESSAGE_TYPES",
        "REPLY_ERROR_KINDS",
        "MODULE_ERROR_KINDS",
    ];
    let script = format!(
        "import json, agentlane_host_channel._protocol as p; print(json.dumps({{n: getattr(p, n) for n in {names:?}}}))"
    );
    let output = Command::new(python)
        .args(["-c", &script])
        .env("PYTHONPATH", repo.join("python/src"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let python: Value = serde_json::from_slice(&output.stdout).unwrap();
    // The module's own kinds: what the core's ReplyErrorKind never sends.
    let module_kinds: Vec<&str> = python["MODULE_ERROR_KINDS"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kind| kind.as_str().unwrap())
        .collect();
    let reply_kinds: Vec<&str> = ReplyErrorKind::ALL.iter().map(|k| k.code()).collect();
    assert_eq!(
        python,
        json!({
            "PROTOCOL_VERSION": PROTOCOL_VERSION,
            "FD_ENV": FD_ENV,
            "MAX_LINE_BYTES": MAX_LINE_BYTES,
            "MAX_ID_BYTES": MAX_ID_BYTES,
            "BACKEND_MESSAGE_TYPES": BACKEND_MESSAGE_TYPES,
            "HOST_MESSAGE_TYPES": HOST_MESSAGE_TYPES,
            "REPLY_ERROR_KINDS": reply_kinds,
            "MODULE_ERROR_KINDS": MODULE_ERROR_KINDS,
        })
    );
    // `timeout` is both the host's deadline and the module's own.
    for kind in module_kinds {
        assert!(
            kind == "timeout" || ReplyErrorKind::from_code(kind).is_none(),
            "{kind}"
        );
    }
}

/// The launch layer, which places the channel, names the variable this
/// contract names (issue 32: the one table of inherited descriptors).
#[test]
fn the_launch_layer_names_the_same_variable() {
    assert_eq!(bridge_launch::HOST_CHANNEL_ENV, FD_ENV);
}
