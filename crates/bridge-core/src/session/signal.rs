//! What the correlation layer needs from one valid event: its type and the
//! few fields that settle commands, read from the line with the core's JSON
//! cursor (large values, such as a 20 MB tool result, are skipped, never
//! copied).

use crate::json::{JsonCursor, Kind, TextCursor};
use crate::EventType;

/// A valid event as [`Session`](super::Session) sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    Ready,
    /// A `config` settlement; `error` is `(code, message)` when present.
    Config {
        ok: bool,
        has_config: bool,
        error: Option<(String, String)>,
    },
    RunStart,
    RunComplete,
    RunCancelled,
    /// An `error` with `scope: "run"`: the run failed.
    RunError {
        message: String,
    },
    /// An `error` with `scope: "command"`: the command being handled failed
    /// (the event does not say which one, §8.11.6).
    CommandError {
        message: String,
    },
    Reset,
    CancelRequested,
    CancelIgnored,
    Shutdown,
    /// A native `tool_approval` record with `status: "pending"`.
    ApprovalPending {
        request_id: String,
    },
    /// A native `tool_approval` record with `status: "resolved"`.
    ApprovalResolved {
        request_id: String,
    },
    /// Any other `run_event`.
    RunEvent,
}

impl Signal {
    /// Reads the signal of a line that [`validate_event_line`](crate::validate_event_line)
    /// accepted as `event_type`. Duplicate keys resolve last-wins, as
    /// `JSON.parse` does. A line that is not such an event gives the
    /// neutral signal of its type (it never panics).
    pub fn read(line: &str, event_type: EventType) -> Signal {
        match event_type {
            EventType::Ready => Signal::Ready,
            EventType::RunStart => Signal::RunStart,
            EventType::RunComplete => Signal::RunComplete,
            EventType::RunCancelled => Signal::RunCancelled,
            EventType::Reset => Signal::Reset,
            EventType::CancelRequested => Signal::CancelRequested,
            EventType::CancelIgnored => Signal::CancelIgnored,
            EventType::Shutdown => Signal::Shutdown,
            EventType::Error => read_error(line),
            EventType::Config => read_config(line),
            EventType::RunEvent => read_approval(line).unwrap_or(Signal::RunEvent),
        }
    }
}

/// The string members named in `keys` of the object under the cursor (last
/// occurrence wins); other members are skipped.
fn strings<C: JsonCursor, const N: usize>(
    c: &mut C,
    keys: [&str; N],
) -> Result<[Option<String>; N], C::Error> {
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    c.enter_object()?;
    while let Some(member) = c.next_member(|key| keys.iter().position(|k| k.as_bytes() == key))? {
        match member {
            Some(i) if c.peek()? == Kind::String => found[i] = Some(c.read_string()?.into_owned()),
            Some(i) => {
                found[i] = None;
                c.skip()?;
            }
            None => c.skip()?,
        }
    }
    Ok(found)
}

fn read_error(line: &str) -> Signal {
    let [message, scope] =
        strings(&mut TextCursor::new(line), ["message", "scope"]).unwrap_or_default();
    let message = message.unwrap_or_default();
    match scope.as_deref() {
        Some("run") => Signal::RunError { message },
        _ => Signal::CommandError { message },
    }
}

fn read_config(line: &str) -> Signal {
    let mut c = TextCursor::new(line);
    let mut ok = false;
    let mut has_config = false;
    let mut error = None;
    let mut read = || -> Result<(), crate::json::SyntaxError> {
        c.enter_object()?;
        let keys = ["ok", "config", "error"];
        while let Some(member) =
            c.next_member(|key| keys.iter().position(|k| k.as_bytes() == key))?
        {
            match (member, c.peek()?) {
                (Some(0), Kind::Bool) => ok = c.read_bool()?,
                (Some(1), kind) => {
                    has_config = kind == Kind::Object;
                    c.skip()?;
                }
                (Some(2), Kind::Object) => {
                    let [code, message] = strings(&mut c, ["code", "message"])?;
                    error = Some((code.unwrap_or_default(), message.unwrap_or_default()));
                }
                (Some(2), _) => {
                    error = None;
                    c.skip()?;
                }
                _ => c.skip()?,
            }
        }
        Ok(())
    };
    let _ = read();
    Signal::Config {
        ok,
        has_config,
        error,
    }
}

/// `run_event.event` → `payload.event.record.{status, request_id}` when the
/// record's type is `tool_approval`.
fn read_approval(line: &str) -> Option<Signal> {
    let root = TextCursor::new(line);
    // Where the value of `key` starts in the object at `at` (the last
    // occurrence, as JSON.parse keeps it).
    let member = |at: usize, key: &str| -> Option<usize> {
        let mut c = root.reopen(&at);
        c.enter_object().ok()?;
        let mut found = None;
        while let Some(m) = c.next_member(|k| (k == key.as_bytes()).then_some(0)).ok()? {
            if m.is_some() {
                found = Some(c.mark().ok()?);
            }
            c.skip().ok()?;
        }
        found
    };
    let record = member(0, "event")?;
    let [record_type] = strings(&mut root.reopen(&record), ["type"]).ok()?;
    if record_type.as_deref() != Some("tool_approval") {
        return None;
    }
    let approval = member(member(member(record, "payload")?, "event")?, "record")?;
    let [status, request_id] =
        strings(&mut root.reopen(&approval), ["status", "request_id"]).ok()?;
    let request_id = request_id?;
    match status.as_deref()? {
        "pending" => Some(Signal::ApprovalPending { request_id }),
        "resolved" => Some(Signal::ApprovalResolved { request_id }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate_event_line;

    fn signal(line: &str) -> Signal {
        let event_type = validate_event_line(line).expect("a valid line");
        Signal::read(line, event_type)
    }

    const RECORD: &str = r#"{"request_id":"tool-approval-7","request":{"tool_name":"save_note","operation":"create_file","cwd":"/n","path":"/n/a","command":null,"skill_name":null,"reason":null,"run_id":"r","agent_name":"A","tool_call_id":"c","metadata":{}},"approval_required_decision":{"outcome":"require_approval","reason":"why"},"status":"pending","final_decision":null}"#;

    fn approval_line(record: &str) -> String {
        format!(
            r#"{{"protocol_version":"1.0","type":"run_event","ts":1,"event":{{"type":"tool_approval","payload":{{"event":{{"record":{record}}},"kind":"tool_approval"}}}}}}"#
        )
    }

    #[test]
    fn reads_errors_by_scope() {
        assert_eq!(
            signal(
                r#"{"protocol_version":"1.0","type":"error","ts":1,"message":"boom","scope":"run"}"#
            ),
            Signal::RunError {
                message: "boom".into()
            }
        );
        assert_eq!(
            signal(
                r#"{"protocol_version":"1.0","type":"error","ts":1,"scope":"command","message":"A run is already active."}"#
            ),
            Signal::CommandError {
                message: "A run is already active.".into()
            }
        );
    }

    #[test]
    fn reads_config_settlements() {
        assert_eq!(
            signal(
                r#"{"protocol_version":"1.0","type":"config","ts":1,"ok":false,"config":{"model":"m"},"error":{"code":"rejected","message":"Unknown config key: x."}}"#
            ),
            Signal::Config {
                ok: false,
                has_config: true,
                error: Some(("rejected".into(), "Unknown config key: x.".into()))
            }
        );
        assert_eq!(
            signal(
                r#"{"protocol_version":"1.0","type":"config","ts":1,"ok":true,"config":{"model":"m"},"error":null}"#
            ),
            Signal::Config {
                ok: true,
                has_config: true,
                error: None
            }
        );
    }

    #[test]
    fn reads_approval_records_and_skips_other_records() {
        assert_eq!(
            signal(&approval_line(RECORD)),
            Signal::ApprovalPending {
                request_id: "tool-approval-7".into()
            }
        );
        let resolved = RECORD.replace(
            r#""status":"pending","final_decision":null"#,
            r#""status":"resolved","final_decision":{"outcome":"deny","reason":"no"}"#,
        );
        assert_eq!(
            signal(&approval_line(&resolved)),
            Signal::ApprovalResolved {
                request_id: "tool-approval-7".into()
            }
        );
        // Last key wins, as in JSON.parse.
        let twice = RECORD.replace(
            r#"{"request_id":"tool-approval-7","#,
            r#"{"request_id":"x","request_id":"tool-approval-8","#,
        );
        assert_eq!(
            signal(&approval_line(&twice)),
            Signal::ApprovalPending {
                request_id: "tool-approval-8".into()
            }
        );
        assert_eq!(
            signal(
                r#"{"protocol_version":"1.0","type":"run_event","ts":1,"event":{"type":"some_future_kind","payload":{"x":1}}}"#
            ),
            Signal::RunEvent
        );
    }

    #[test]
    fn a_line_that_is_not_the_event_gives_a_neutral_signal() {
        assert_eq!(
            Signal::read("garbage", EventType::RunEvent),
            Signal::RunEvent
        );
        assert_eq!(
            Signal::read("{", EventType::Error),
            Signal::CommandError {
                message: String::new()
            }
        );
    }
}
