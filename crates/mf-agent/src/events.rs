//! The one event vocabulary: what the loop did, in order. Serialised as
//! `{"type": "...", ...}` JSON objects; the CLI's `--json` prints one per line
//! and the store keeps them verbatim.

use mf_inference::KvStats;
use serde::{Deserialize, Serialize};

/// Tokens per zone against the budget, measured with the model's tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gauge {
    /// Tokens of the pinned zone (system prompt through the question).
    pub pinned: u32,
    /// Tokens of the compressible zone.
    pub compressible: u32,
    /// Tokens of the recent zone.
    pub recent: u32,
    /// `C − G − total` (0 when over).
    pub free: u32,
    /// The compaction threshold `ratio · (C − G)`.
    pub threshold: u32,
    /// Context size `C`.
    pub context: u32,
    /// Generation reserve `G`.
    pub reserve: u32,
}

impl Gauge {
    /// Total tokens of the prompt.
    #[must_use]
    pub fn total(&self) -> u32 {
        self.pinned + self.compressible + self.recent
    }
}

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitReason {
    /// The model answered without calling a tool.
    FinalAnswer,
    /// The model repeated a tool call (same name, same arguments).
    RepeatedToolCall {
        /// The tool.
        name: String,
    },
    /// N tool calls in a row failed (errors, malformed calls, unknown tools, denials).
    ConsecutiveFailures {
        /// How many.
        count: u32,
    },
    /// The history does not fit even after compaction.
    ContextExhausted {
        /// Prompt tokens at the end.
        tokens: u32,
        /// The threshold.
        threshold: u32,
    },
    /// Compaction fired again without freeing room (the compaction-loop guard).
    CompactionLoop,
    /// The optional safety cap on rounds was reached.
    SafetyCap {
        /// Rounds run.
        rounds: u32,
    },
}

impl ExitReason {
    /// A one-line description for people.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            ExitReason::FinalAnswer => "final answer".into(),
            ExitReason::RepeatedToolCall { name } => format!("repeated tool call ({name})"),
            ExitReason::ConsecutiveFailures { count } => format!("{count} consecutive tool failures"),
            ExitReason::ContextExhausted { tokens, threshold } => {
                format!("context exhausted ({tokens} tokens, threshold {threshold})")
            }
            ExitReason::CompactionLoop => "compaction freed no room (compaction-loop guard)".into(),
            ExitReason::SafetyCap { rounds } => format!("safety cap of {rounds} rounds"),
        }
    }
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The investigation began.
    Started {
        /// The question.
        question: String,
        /// The compaction strategy.
        strategy: String,
        /// The model's name.
        model: String,
        /// Context size `C`.
        context: u32,
        /// Generation reserve `G`.
        reserve: u32,
        /// Compaction threshold.
        threshold: u32,
    },
    /// A round (one generation) begins.
    Round {
        /// 1-based round number.
        round: u32,
    },
    /// Streamed answer text.
    Token {
        /// The text piece.
        text: String,
    },
    /// Streamed thinking text.
    ThinkingToken {
        /// The text piece.
        text: String,
    },
    /// The model asked for a tool.
    ToolCall {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: serde_json::Value,
    },
    /// A call needs a decision.
    ApprovalRequested {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// SHA-256 of the canonical arguments; the decision is bound to it.
        arguments_hash: String,
    },
    /// The decision.
    ApprovalDecided {
        /// The call id.
        call_id: String,
        /// Whether the call may run.
        approved: bool,
        /// Who decided (`policy`, `approver`, `no answer`, `mismatch`).
        by: String,
    },
    /// What the tool returned (or why it did not run), as fed back to the model.
    ToolResult {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Whether it succeeded.
        ok: bool,
        /// The text given to the model.
        content: String,
        /// A note when the content was cut.
        truncated: Option<String>,
    },
    /// A tool call from an earlier, killed process that never got its result.
    ToolInterrupted {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// The context after a change.
    Gauge(Gauge),
    /// Compaction begins.
    CompactionStarted {
        /// The round.
        round: u32,
        /// Prompt tokens before.
        tokens_before: u32,
        /// Messages before.
        messages_before: u32,
        /// Messages that will be summarised.
        compressible: u32,
    },
    /// Compaction ended: the ledger entry.
    CompactionFinished {
        /// The round.
        round: u32,
        /// Prompt tokens before.
        tokens_before: u32,
        /// Prompt tokens after.
        tokens_after: u32,
        /// Messages before.
        messages_before: u32,
        /// Messages after.
        messages_after: u32,
        /// Whether the summary came from the model (`false`: the 500-character fallback).
        summarised_by_model: bool,
        /// Why the fallback was used.
        fallback_reason: Option<String>,
        /// The summary text that replaced the zone.
        summary: String,
        /// Whether the summary pass ran as an append to the live prompt (KV prefix reused).
        appended_to_live_cache: bool,
    },
    /// KV figures of one generation.
    Kv {
        /// The round (0 for a summary pass).
        round: u32,
        /// Cache figures.
        stats: KvStats,
        /// Tokens generated.
        completion_tokens: u32,
    },
    /// The loop stopped.
    Exit {
        /// Why.
        reason: ExitReason,
        /// Rounds run.
        rounds: u32,
    },
    /// The answer.
    FinalAnswer {
        /// Its text.
        text: String,
    },
    /// Something failed (the loop reports and goes on, or exits).
    Error {
        /// What.
        message: String,
    },
}

/// Where events go. Implemented by closures, the store, channels.
pub trait EventSink {
    /// Receives one event.
    fn emit(&mut self, event: &AgentEvent);
}

impl<F: FnMut(&AgentEvent)> EventSink for F {
    fn emit(&mut self, event: &AgentEvent) {
        self(event)
    }
}
