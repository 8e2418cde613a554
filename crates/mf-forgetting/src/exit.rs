//! Dynamic exit: the agent feeds events in, a typed reason comes out.
//!
//! There is no round cap. The loop ends on a repeated tool call (same name
//! and canonical arguments), N consecutive tool errors (3), exhaustion (still
//! over the threshold after a compaction that left ≤ 4 messages), or a
//! compaction loop (a compaction that frees too little, or k compactions in a
//! row without a new tool result in between).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::message::canonical_json;

/// Exit settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExitConfig {
    /// Consecutive tool errors that end the loop (3).
    pub max_consecutive_errors: usize,
    /// Messages at or below which an over-threshold history is exhausted (4).
    pub exhaustion_messages: usize,
    /// A compaction must free at least this fraction of its input (0.10).
    pub min_freed_fraction: f64,
    /// Compactions in a row without a new tool result that mean a loop (2).
    pub max_compactions_without_progress: usize,
}

impl Default for ExitConfig {
    fn default() -> Self {
        ExitConfig { max_consecutive_errors: 3, exhaustion_messages: 4, min_freed_fraction: 0.10, max_compactions_without_progress: 2 }
    }
}

/// What happened in the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ExitEvent {
    /// The model asked for a tool call.
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments.
        arguments: serde_json::Value,
    },
    /// A tool answered.
    ToolResult {
        /// Whether it failed.
        is_error: bool,
    },
    /// A compaction ran.
    Compaction {
        /// Tokens before.
        tokens_before: usize,
        /// Tokens after.
        tokens_after: usize,
        /// The threshold.
        threshold: usize,
        /// Messages left.
        messages_after: usize,
    },
}

/// Why the loop ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum ExitReason {
    /// The same call (name + canonical arguments) was made before.
    RepeatedToolCall {
        /// Tool name.
        name: String,
        /// Canonical arguments.
        arguments: String,
    },
    /// N tool errors in a row.
    ConsecutiveErrors {
        /// How many.
        count: usize,
    },
    /// Still over the threshold after compaction, with few messages left.
    ContextExhausted {
        /// Tokens after compaction.
        tokens: usize,
        /// The threshold.
        threshold: usize,
        /// Messages left.
        messages: usize,
    },
    /// A compaction freed less than the minimum fraction.
    CompactionIneffective {
        /// Fraction freed (may be negative).
        freed_fraction: f64,
    },
    /// k compactions in a row without a new tool result.
    CompactionLoop {
        /// Compactions since the last tool result.
        compactions: usize,
    },
}

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitReason::RepeatedToolCall { name, arguments } => write!(f, "repeated tool call {name} {arguments}"),
            ExitReason::ConsecutiveErrors { count } => write!(f, "{count} consecutive tool errors"),
            ExitReason::ContextExhausted { tokens, threshold, messages } => {
                write!(f, "context exhausted: {tokens} tokens over threshold {threshold} with {messages} messages")
            }
            ExitReason::CompactionIneffective { freed_fraction } => {
                write!(f, "compaction freed only {:.1} %", freed_fraction * 100.0)
            }
            ExitReason::CompactionLoop { compactions } => {
                write!(f, "{compactions} compactions without a new tool result")
            }
        }
    }
}

/// The exit state machine.
#[derive(Debug, Clone, Default)]
pub struct ExitMonitor {
    config: ExitConfig,
    calls: BTreeSet<(String, String)>,
    consecutive_errors: usize,
    compactions_since_result: usize,
}

impl ExitMonitor {
    /// A monitor with these settings.
    pub fn new(config: ExitConfig) -> Self {
        ExitMonitor { config, ..ExitMonitor::default() }
    }

    /// Feeds one event; `Some` when the loop must end.
    pub fn observe(&mut self, event: &ExitEvent) -> Option<ExitReason> {
        match event {
            ExitEvent::ToolCall { name, arguments } => {
                let key = (name.clone(), canonical_json(arguments));
                if self.calls.contains(&key) {
                    return Some(ExitReason::RepeatedToolCall { name: key.0, arguments: key.1 });
                }
                self.calls.insert(key);
                None
            }
            ExitEvent::ToolResult { is_error } => {
                self.compactions_since_result = 0;
                if *is_error {
                    self.consecutive_errors += 1;
                    if self.consecutive_errors >= self.config.max_consecutive_errors {
                        return Some(ExitReason::ConsecutiveErrors { count: self.consecutive_errors });
                    }
                } else {
                    self.consecutive_errors = 0;
                }
                None
            }
            ExitEvent::Compaction { tokens_before, tokens_after, threshold, messages_after } => {
                self.compactions_since_result += 1;
                if tokens_after > threshold && *messages_after <= self.config.exhaustion_messages {
                    return Some(ExitReason::ContextExhausted { tokens: *tokens_after, threshold: *threshold, messages: *messages_after });
                }
                let freed = if *tokens_before == 0 { 0.0 } else { (*tokens_before as f64 - *tokens_after as f64) / *tokens_before as f64 };
                // Freeing little is a dead end only when the history is still
                // over the threshold (the next round would compact again, for
                // as little). Under it, the loop goes on: the next results
                // give the next compaction more to work with.
                if freed < self.config.min_freed_fraction && tokens_after > threshold {
                    return Some(ExitReason::CompactionIneffective { freed_fraction: freed });
                }
                if self.compactions_since_result >= self.config.max_compactions_without_progress {
                    return Some(ExitReason::CompactionLoop { compactions: self.compactions_since_result });
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: serde_json::Value) -> ExitEvent {
        ExitEvent::ToolCall { name: name.into(), arguments: args }
    }

    fn compaction(before: usize, after: usize, messages: usize) -> ExitEvent {
        ExitEvent::Compaction { tokens_before: before, tokens_after: after, threshold: 100, messages_after: messages }
    }

    #[test]
    fn repeated_call_with_reordered_arguments_exits() {
        let mut m = ExitMonitor::new(ExitConfig::default());
        assert_eq!(m.observe(&call("get", json!({"a": 1, "b": 2}))), None);
        assert_eq!(m.observe(&call("get", json!({"a": 2, "b": 2}))), None);
        assert_eq!(m.observe(&call("put", json!({"a": 1, "b": 2}))), None);
        let r = m.observe(&call("get", json!({"b": 2, "a": 1})));
        assert!(matches!(r, Some(ExitReason::RepeatedToolCall { ref name, .. }) if name == "get"), "{r:?}");
    }

    #[test]
    fn three_consecutive_errors_exit_and_a_success_resets() {
        let mut m = ExitMonitor::new(ExitConfig::default());
        let err = ExitEvent::ToolResult { is_error: true };
        let ok = ExitEvent::ToolResult { is_error: false };
        assert_eq!(m.observe(&err), None);
        assert_eq!(m.observe(&err), None);
        assert_eq!(m.observe(&ok), None);
        assert_eq!(m.observe(&err), None);
        assert_eq!(m.observe(&err), None);
        assert_eq!(m.observe(&err), Some(ExitReason::ConsecutiveErrors { count: 3 }));
    }

    #[test]
    fn exhaustion_needs_few_messages_and_over_threshold() {
        let mut m = ExitMonitor::new(ExitConfig::default());
        assert_eq!(m.observe(&compaction(300, 150, 4)), Some(ExitReason::ContextExhausted { tokens: 150, threshold: 100, messages: 4 }));
        let mut m = ExitMonitor::new(ExitConfig::default());
        assert_eq!(m.observe(&compaction(300, 150, 5)), None, "over, but 5 messages: compaction may still help");
    }

    #[test]
    fn compaction_that_frees_too_little_exits() {
        let mut m = ExitMonitor::new(ExitConfig::default());
        let r = m.observe(&compaction(1000, 950, 9));
        assert!(matches!(r, Some(ExitReason::CompactionIneffective { freed_fraction }) if (freed_fraction - 0.05).abs() < 1e-9));
    }

    #[test]
    fn freeing_little_but_getting_under_the_threshold_goes_on() {
        // An early compaction has one unit to work with: it frees 5 %, and
        // that is enough to be under the threshold (100) for the next round.
        let mut m = ExitMonitor::new(ExitConfig::default());
        let ev = ExitEvent::Compaction { tokens_before: 104, tokens_after: 99, threshold: 100, messages_after: 9 };
        assert_eq!(m.observe(&ev), None);
    }

    #[test]
    fn compactions_without_a_tool_result_in_between_are_a_loop() {
        let mut m = ExitMonitor::new(ExitConfig::default());
        assert_eq!(m.observe(&compaction(1000, 500, 9)), None);
        assert_eq!(m.observe(&ExitEvent::ToolResult { is_error: false }), None);
        assert_eq!(m.observe(&compaction(1000, 500, 9)), None);
        assert_eq!(m.observe(&compaction(1000, 500, 9)), Some(ExitReason::CompactionLoop { compactions: 2 }));
    }
}
