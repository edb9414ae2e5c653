//! A run's token usage, summed from its records as the model reported it
//! (docs/protocol.md: a Response's optional `usage`). A model response can
//! appear twice in one run (its `model_stream` completed event and its
//! `llm_end` record), so each response counts once, by its id.

use std::collections::HashSet;

use serde_json::Value;

/// The totals of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageTotals {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// How many model responses carried usage.
    pub responses: u32,
    counted: HashSet<String>,
}

impl UsageTotals {
    /// Adds the usage a `run_event` line reports, if any (lines without a
    /// `"usage"` key are passed over without being parsed).
    pub fn add_run_event(&mut self, line: &str) {
        if !line.contains("\"usage\"") {
            return;
        }
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let record = &event["event"];
        let response = match record["type"].as_str() {
            Some("llm_end") => &record["payload"]["response"],
            Some("model_stream") if record["payload"]["event"]["kind"] == "completed" => {
                &record["payload"]["event"]["response"]
            }
            _ => return,
        };
        let usage = &response["usage"];
        if !usage.is_object() {
            return;
        }
        if let Some(id) = response["id"].as_str() {
            if !self.counted.insert(id.to_owned()) {
                return;
            }
        }
        let count = |key: &str| usage[key].as_f64().filter(|n| *n >= 0.0).unwrap_or(0.0) as u64;
        self.prompt_tokens += count("prompt_tokens");
        self.completion_tokens += count("completion_tokens");
        self.total_tokens += count("total_tokens");
        self.responses += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llm_end(id: &str, usage: &str) -> String {
        format!(
            r#"{{"type":"run_event","event":{{"type":"llm_end","payload":{{"response":{{"id":"{id}","usage":{usage}}}}}}}}}"#
        )
    }

    fn completed(id: &str, usage: &str) -> String {
        format!(
            r#"{{"type":"run_event","event":{{"type":"model_stream","payload":{{"event":{{"kind":"completed","response":{{"id":"{id}","usage":{usage}}}}}}}}}}}"#
        )
    }

    #[test]
    fn each_response_counts_once_and_null_usage_none() {
        let mut totals = UsageTotals::default();
        let usage = r#"{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}"#;
        totals.add_run_event(&completed("r1", usage));
        totals.add_run_event(&llm_end("r1", usage));
        totals.add_run_event(&llm_end("r2", r#"{"prompt_tokens":30,"completion_tokens":3,"total_tokens":33}"#));
        totals.add_run_event(&llm_end("r3", "null"));
        totals.add_run_event(r#"{"type":"run_event","event":{"type":"agent_end","payload":{"usage":{"total_tokens":99}}}}"#);
        assert_eq!(
            (totals.prompt_tokens, totals.completion_tokens, totals.total_tokens, totals.responses),
            (42, 6, 48, 2)
        );
    }
}
