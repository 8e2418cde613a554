//! Why the loop stopped.

use serde::{Deserialize, Serialize};

/// Why the loop stopped (METHOD.md §2: dynamic exits, no round cap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum ExitReason {
    /// The model answered without calling a tool.
    FinalAnswer,
    /// The model repeated a tool call (same name, same canonical arguments).
    RepeatedToolCall {
        /// The tool.
        name: String,
        /// Its canonical arguments.
        arguments: String,
    },
    /// N tool calls in a row failed (errors, malformed calls, unknown tools, denials).
    ConsecutiveErrors {
        /// How many.
        count: u32,
    },
    /// The history does not fit even after compaction.
    ContextExhausted {
        /// Prompt tokens at the end.
        tokens: u32,
        /// The threshold.
        threshold: u32,
        /// Messages left.
        messages: u32,
    },
    /// A compaction freed less than the configured fraction.
    CompactionIneffective {
        /// Fraction of tokens freed.
        freed_fraction: f64,
    },
    /// Compactions followed each other without a new tool result (the compaction-loop guard).
    CompactionLoop {
        /// Compactions since the last tool result.
        compactions: u32,
    },
    /// The optional safety cap on rounds was reached (off by default).
    SafetyCap {
        /// Rounds run.
        rounds: u32,
    },
    /// The caller cancelled.
    Cancelled,
}

impl ExitReason {
    /// Its kind: the `kind` tag it is stored and sent with (`final_answer`, `safety_cap`, …).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            ExitReason::FinalAnswer => "final_answer",
            ExitReason::RepeatedToolCall { .. } => "repeated_tool_call",
            ExitReason::ConsecutiveErrors { .. } => "consecutive_errors",
            ExitReason::ContextExhausted { .. } => "context_exhausted",
            ExitReason::CompactionIneffective { .. } => "compaction_ineffective",
            ExitReason::CompactionLoop { .. } => "compaction_loop",
            ExitReason::SafetyCap { .. } => "safety_cap",
            ExitReason::Cancelled => "cancelled",
        }
    }

    /// Whether a run that ended this way may be continued as it stood (it
    /// was stopped from outside, not by what it found): cancelled, or cut
    /// by the safety cap.
    #[must_use]
    pub fn resumable_kind(kind: &str) -> bool {
        matches!(kind, "cancelled" | "safety_cap")
    }

    /// A one-line description for people.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            ExitReason::FinalAnswer => "final answer".into(),
            ExitReason::RepeatedToolCall { name, arguments } => format!("repeated tool call {name} {arguments}"),
            ExitReason::ConsecutiveErrors { count } => format!("{count} consecutive tool errors"),
            ExitReason::ContextExhausted { tokens, threshold, messages } => {
                format!("context exhausted ({tokens} tokens over threshold {threshold} with {messages} messages)")
            }
            ExitReason::CompactionIneffective { freed_fraction } => {
                format!("compaction freed only {:.1} %", freed_fraction * 100.0)
            }
            ExitReason::CompactionLoop { compactions } => format!("{compactions} compactions without a new tool result"),
            ExitReason::SafetyCap { rounds } => format!("safety cap of {rounds} rounds"),
            ExitReason::Cancelled => "cancelled".into(),
        }
    }
}

impl From<mf_forgetting::ExitReason> for ExitReason {
    fn from(r: mf_forgetting::ExitReason) -> Self {
        use mf_forgetting::ExitReason as F;
        let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        match r {
            F::RepeatedToolCall { name, arguments } => ExitReason::RepeatedToolCall { name, arguments },
            F::ConsecutiveErrors { count } => ExitReason::ConsecutiveErrors { count: n(count) },
            F::ContextExhausted { tokens, threshold, messages } => {
                ExitReason::ContextExhausted { tokens: n(tokens), threshold: n(threshold), messages: n(messages) }
            }
            F::CompactionIneffective { freed_fraction } => ExitReason::CompactionIneffective { freed_fraction },
            F::CompactionLoop { compactions } => ExitReason::CompactionLoop { compactions: n(compactions) },
        }
    }
}
