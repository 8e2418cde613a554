//! The one event vocabulary: what the loop did, in order.
//!
//! Serialised as `{"type": "...", ...}` JSON objects. The same values go to
//! the UI, to `mf investigate --json` (one per line) and into the store
//! (verbatim). The TypeScript types in `ui/src/lib/generated/events.ts` are
//! generated from these definitions by the test `typescript_types_are_current`
//! (run `MF_UPDATE_TS=1 cargo test -p mf-agent typescript` after a change; CI
//! fails while the checked-in file is stale).
//!
//! This file holds the event enum itself and the TypeScript test; the types
//! the events carry live by family in `events/`: `approval` (what an
//! approval request names), `gauge` (the context and its forecast),
//! `generation` (KV figures and purpose of one generation), `exit`,
//! `compaction` (plan rows, who summarised, the two compaction events built
//! from a plan and a report), `sink` (where events go).

mod approval;
mod compaction;
mod exit;
mod gauge;
mod generation;
mod kv_miss;
mod sink;

use serde::{Deserialize, Serialize};

pub use approval::McpOrigin;
pub use compaction::{ByHand, PlanRow, SummaryBy};
pub use exit::ExitReason;
pub use gauge::{Forecast, Gauge};
pub use generation::{KvFigures, Purpose};
pub use kv_miss::KvMiss;
pub use sink::{EventSink, VecSink};

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum AgentEvent {
    /// The investigation began (or resumed).
    Started {
        /// The question, as the model is asked it.
        question: String,
        /// The question as shown to people, when it differs (a demo world's
        /// plain question; `question` adds the route only a small model needs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        title: Option<String>,
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
        /// Names of the tools offered.
        tools: Vec<String>,
        /// Whether this continues a stored investigation.
        resumed: bool,
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
        #[cfg_attr(test, ts(type = "unknown"))]
        arguments: serde_json::Value,
    },
    /// A call needs the user's decision.
    ApprovalRequested {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Canonical JSON of the arguments (what the user approves).
        arguments: String,
        /// sha256 of the tool name and canonical arguments; the decision is bound to it.
        args_sha256: String,
        /// One line for a person, what leaves first: method, host, bytes and
        /// the first characters of the data (`POST api.example.com · 12,345 bytes · {"report": …`).
        #[serde(default)]
        summary: String,
        /// For `http`: the host, which the user may approve for the rest of the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        host: Option<String>,
        /// For a tool from an MCP server: the server and its tool, for which
        /// the user may answer "always" (remembered per server and tool).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        mcp: Option<McpOrigin>,
    },
    /// The decision.
    ApprovalDecided {
        /// The call id.
        call_id: String,
        /// Whether the call may run.
        approved: bool,
        /// Who decided: `policy`, `user`, `no answer`, `mismatch`.
        by: String,
    },
    /// What the tool returned (or why it did not run), as fed back to the model.
    ToolResult {
        /// The call id (empty for a malformed call that had none).
        call_id: String,
        /// The tool (empty for a malformed call).
        name: String,
        /// Whether it succeeded.
        ok: bool,
        /// The structured error's type (`unknown_tool`, `malformed_tool_call`, `arguments_too_large`, ...).
        error: Option<String>,
        /// The text given to the model.
        content: String,
        /// A note when the content was cut.
        truncated: Option<String>,
    },
    /// A tool call from an earlier, killed process that never got its result.
    /// It is not re-run.
    ToolInterrupted {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// The context after a change.
    Gauge {
        /// The figures.
        gauge: Gauge,
        /// When the next compaction is expected (null when unknown: no
        /// round measured yet, or the prompt is not growing).
        #[serde(default)]
        #[cfg_attr(test, ts(optional = nullable))]
        forecast: Option<Forecast>,
    },
    /// Compaction begins: the plan.
    CompactionStarted {
        /// Set when the user asked for this compaction (after the round it
        /// carries); absent for the loop's own, over the threshold.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        by_hand: Option<ByHand>,
        /// The round.
        round: u32,
        /// The strategy.
        strategy: String,
        /// Exact prompt tokens before.
        tokens_before: u32,
        /// Messages before.
        messages_before: u32,
        /// The problem class (v2, v2.1).
        class: Option<String>,
        /// One row per message.
        rows: Vec<PlanRow>,
        /// The full `mf_forgetting::CompactionPlan`.
        #[cfg_attr(test, ts(type = "unknown"))]
        plan: serde_json::Value,
    },
    /// Compaction ended: the forgetting-ledger entry.
    CompactionFinished {
        /// The round.
        round: u32,
        /// Exact prompt tokens before.
        tokens_before: u32,
        /// Exact prompt tokens after.
        tokens_after: u32,
        /// Messages before.
        messages_before: u32,
        /// Messages after.
        messages_after: u32,
        /// Who wrote the summary.
        summary_by: SummaryBy,
        /// Why the fallback was used.
        fallback_reason: Option<String>,
        /// The model's summary text.
        summary: Option<String>,
        /// Whether the summary pass ran as an append to a cached prompt (KV prefix reused).
        appended_to_live_cache: bool,
        /// Which prompt the summary pass used: `live_with_log`, `live_instruction`
        /// (the whole live history + the request), `pinned_prefix` (the cached
        /// pinned zone + the request with its log), `standalone` (system +
        /// request, nothing reused); null without a summary pass.
        #[serde(default)]
        #[cfg_attr(test, ts(optional = nullable))]
        summary_pass: Option<String>,
        /// The model that wrote the summary (the investigation's own, or the
        /// summariser chosen in the settings); null without a model summary,
        /// and in events stored before it was recorded.
        #[serde(default)]
        #[cfg_attr(test, ts(optional = nullable))]
        summary_model: Option<String>,
        /// Wall time of the whole compaction (snapshot, plan, summary pass,
        /// apply, measuring), milliseconds; null only in events stored before it was measured.
        #[serde(default)]
        #[cfg_attr(test, ts(optional = nullable))]
        duration_ms: Option<u64>,
        /// Ids kept verbatim in the summary message.
        verbatim: Vec<String>,
        /// Ids summarised.
        summarised: Vec<String>,
        /// Ids masked.
        masked: Vec<String>,
        /// Ids dropped.
        dropped: Vec<String>,
        /// Notes of the plan and of the budget repair.
        notes: Vec<String>,
        /// The full `mf_forgetting::CompactionReport`.
        #[cfg_attr(test, ts(type = "unknown"))]
        report: serde_json::Value,
    },
    /// The user pinned a message (*keep verbatim*) or unpinned it, between
    /// rounds: a pinned message and the other members of its chain stay
    /// verbatim through every compaction until it is unpinned.
    Pin {
        /// The message the user chose.
        message: String,
        /// Pinned (true) or unpinned (false).
        pinned: bool,
        /// Every message the change holds for: the chosen one and the other
        /// members of its chain (a call, its results, their interpretation).
        members: Vec<String>,
        /// The round after which it happened.
        round: u32,
    },
    /// A compaction could not restore the budget (the loop then exits).
    CompactionFailed {
        /// The round.
        round: u32,
        /// Why.
        message: String,
    },
    /// The KV cache was saved (before a compaction, so it can be undone;
    /// or to the session's file, so a resume need not decode it again).
    KvSnapshot {
        /// The round.
        round: u32,
        /// Why: `before_compaction` or `resume_point`.
        reason: String,
        /// Where: `memory:NAME` or `file:PATH`.
        slot: String,
        /// Tokens it covers.
        tokens: u32,
        /// Bytes of the saved state.
        #[cfg_attr(test, ts(type = "number"))]
        bytes: u64,
        /// Wall time of the save, milliseconds.
        #[cfg_attr(test, ts(type = "number"))]
        ms: u64,
    },
    /// A KV snapshot was (or was not) loaded: on resume, or on undoing a compaction.
    KvRestore {
        /// Where: `memory:NAME` or `file:PATH`.
        slot: String,
        /// Whether the snapshot was loaded into the cache.
        used: bool,
        /// Tokens the snapshot covers (0 when there was none).
        snapshot_tokens: u32,
        /// Tokens of the prompt it was matched against.
        prompt_tokens: u32,
        /// Leading tokens the snapshot and the prompt share.
        matched_tokens: u32,
        /// Why it was not used, or what was done instead (re-decode).
        note: Option<String>,
        /// Why it was not loaded (none when it was).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, ts(optional))]
        miss: Option<KvMiss>,
    },
    /// KV figures of one generation.
    Kv {
        /// The round.
        round: u32,
        /// What the generation was for.
        purpose: Purpose,
        /// Cache figures.
        stats: KvFigures,
        /// Tokens generated.
        completion_tokens: u32,
    },
    /// The loop stopped.
    Exit {
        /// Why.
        reason: ExitReason,
        /// Rounds run.
        rounds: u32,
        /// Compactions run.
        compactions: u32,
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

#[cfg(test)]
mod tests {
    use super::*;
    use ts_rs::TS;

    /// The TypeScript the UI imports, generated from the types of this
    /// module and its submodules.
    fn typescript() -> String {
        let cfg = ts_rs::Config::new().with_large_int("number");
        let mut out = String::from(
            "// GENERATED by crates/mf-agent/src/events.rs (test `typescript_types_are_current`).\n\
             // Do not edit: change the Rust types and run\n\
             //   MF_UPDATE_TS=1 cargo test -p mf-agent typescript\n\n",
        );
        for decl in [
            Gauge::decl(&cfg),
            Forecast::decl(&cfg),
            KvFigures::decl(&cfg),
            Purpose::decl(&cfg),
            ExitReason::decl(&cfg),
            PlanRow::decl(&cfg),
            SummaryBy::decl(&cfg),
            ByHand::decl(&cfg),
            McpOrigin::decl(&cfg),
            KvMiss::decl(&cfg),
            AgentEvent::decl(&cfg),
            crate::store::SessionStatus::decl(&cfg),
            crate::store::InvestigationRow::decl(&cfg),
            crate::tools::Scope::decl(&cfg),
        ] {
            out.push_str("export ");
            out.push_str(decl.trim());
            out.push_str("\n\n");
        }
        out.push_str("/** The `type` tag of every event. */\nexport type AgentEventType = AgentEvent[\"type\"];\n");
        out
    }

    #[test]
    fn typescript_types_are_current() {
        crate::assert_generated_ts("events.ts", &typescript());
    }

    #[test]
    fn events_serialise_with_a_type_tag_and_round_trip() {
        let e = AgentEvent::Gauge {
            gauge: Gauge { pinned: 1, compressible: 2, recent: 3, free: 4, threshold: 5, prompt_tokens: 6, context: 7, reserve: 8, messages: 9 },
            forecast: None,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "gauge");
        assert_eq!(v["gauge"]["threshold"], 5);
        let back: AgentEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
        let x = AgentEvent::Exit { reason: ExitReason::ConsecutiveErrors { count: 3 }, rounds: 4, compactions: 1 };
        let v = serde_json::to_value(&x).unwrap();
        assert_eq!(v["reason"]["kind"], "consecutive_errors");
        assert_eq!(serde_json::from_value::<AgentEvent>(v).unwrap(), x);
        // Events stored before `forecast` existed still read back.
        let old = serde_json::json!({"type": "gauge", "gauge": {"pinned": 1, "compressible": 2, "recent": 3, "free": 4, "threshold": 5, "prompt_tokens": 6, "context": 7, "reserve": 8, "messages": 9}});
        assert!(matches!(serde_json::from_value::<AgentEvent>(old).unwrap(), AgentEvent::Gauge { forecast: None, .. }));
    }
}
