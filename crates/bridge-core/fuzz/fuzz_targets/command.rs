//! The command side: checking arbitrary frames never panics, and every
//! typed command encodes to a frame the check accepts (unless too long).
#![no_main]

use arbitrary::Arbitrary;
use bridge_core::command::{check_command_frame, encode_command, Command};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Input {
    Frame(String),
    Prompt(String),
    Approve(String, bool, Option<String>),
    Configure(Vec<(String, String)>),
    Cancel,
}

fuzz_target!(|input: Input| {
    let command = match input {
        Input::Frame(frame) => {
            let _ = check_command_frame(&frame);
            return;
        }
        Input::Prompt(text) => Command::Prompt { text },
        Input::Approve(id, allowed, reason) => Command::Approve {
            id,
            allowed,
            reason,
        },
        Input::Configure(pairs) => Command::Configure {
            patch: pairs
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::from(v)))
                .collect(),
        },
        Input::Cancel => Command::Cancel,
    };
    match encode_command(&command) {
        Ok(frame) => {
            assert!(frame.ends_with('\n'));
            assert!(check_command_frame(frame.trim_end_matches('\n')).is_ok());
            assert!(
                bridge_core::validate_event_line(frame.trim_end()).is_err(),
                "a command is not an event"
            );
        }
        Err(error) => assert!(error.message.contains("code points"), "{}", error.message),
    }
});
