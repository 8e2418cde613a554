//! The one event vocabulary: what the loop did, in order.
//!
//! Serialised as `{"type": "...", ...}` JSON objects. The same values go to
//! the UI, to `mf investigate --json` (one per line) and into the store
//! (verbatim). The TypeScript types in `ui/src/lib/generated/events.ts` are
//! generated from these definitions by the test `typescript_types_are_current`
//! (run `MF_UPDATE_TS=1 cargo test -p mf-agent typescript` after a change; CI
//! fails while the checked-in file is stale).

use mf_forgetting::{CompactionPlan, CompactionReport, Message};
use mf_inference::KvStats;
use serde::{Deserialize, Serialize};

/// Tokens per zone against the budget, measured with the model's tokenizer.
///
/// `pinned`, `compressible` and `recent` are per-message counts (each message
/// rendered alone with the model's template, the system message with the
/// tool descriptions), the same counts the compaction plan uses; they
/// slightly over-count the real prompt. `prompt_tokens` is the exact count of
/// the whole rendered prompt, which the trigger compares with `threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Gauge {
    /// Tokens of the pinned zone (system prompt through the question).
    pub pinned: u32,
    /// Tokens of the compressible zone.
    pub compressible: u32,
    /// Tokens of the recent zone.
    pub recent: u32,
    /// `C − G − prompt_tokens` (0 when over).
    pub free: u32,
    /// The compaction threshold `⌊ratio · (C − G)⌋`.
    pub threshold: u32,
    /// Exact tokens of the whole rendered prompt (tools included).
    pub prompt_tokens: u32,
    /// Context size `C`.
    pub context: u32,
    /// Generation reserve `G`.
    pub reserve: u32,
    /// Messages in the history.
    pub messages: u32,
}

/// When the next compaction is expected, from the recent prompt growth.
///
/// The loop compacts at the start of a round whose prompt is over the
/// threshold. With the prompt growing by `mean_tokens_per_round` a round,
/// it crosses the threshold after `⌊tokens_left / mean⌋ + 1` more rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Forecast {
    /// `threshold − prompt_tokens` (0 when at or over it).
    pub tokens_left: u32,
    /// Mean prompt growth per round over the last `window` rounds (no
    /// compaction inside a measured step).
    pub mean_tokens_per_round: f64,
    /// Rounds until the compaction is expected to fire (1: at the next round's start).
    pub rounds_until_compaction: u32,
    /// Rounds the mean is taken over.
    pub window: u32,
}

impl Forecast {
    /// The forecast from the growth of the last rounds; `None` when nothing
    /// was measured yet or the prompt is not growing.
    #[must_use]
    pub fn from_growth(gauge: &Gauge, growth: &[u32]) -> Option<Forecast> {
        if growth.is_empty() {
            return None;
        }
        let mean = f64::from(growth.iter().sum::<u32>()) / growth.len() as f64;
        if mean <= 0.0 {
            return None;
        }
        let left = gauge.threshold.saturating_sub(gauge.prompt_tokens);
        let rounds = (f64::from(left) / mean).floor() as u32 + 1;
        Some(Forecast { tokens_left: left, mean_tokens_per_round: mean, rounds_until_compaction: rounds, window: u32::try_from(growth.len()).unwrap_or(u32::MAX) })
    }
}

/// KV figures of one generation (mirror of `mf_inference::KvStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct KvFigures {
    /// Tokens of the prompt.
    pub prompt_tokens: u32,
    /// Prompt tokens found in the cache (not decoded again).
    pub reused: u32,
    /// Prompt tokens decoded.
    pub decoded: u32,
    /// Cached tokens removed because the prompt diverged.
    pub trimmed: u32,
    /// The whole cache had to be cleared.
    pub full_clear: bool,
    /// Prefill time, milliseconds.
    #[cfg_attr(test, ts(type = "number"))]
    pub prefill_ms: u64,
    /// Generation time, milliseconds.
    #[cfg_attr(test, ts(type = "number"))]
    pub decode_ms: u64,
}

impl From<KvStats> for KvFigures {
    fn from(k: KvStats) -> Self {
        KvFigures {
            prompt_tokens: k.prompt_tokens,
            reused: k.reused,
            decoded: k.decoded,
            trimmed: k.trimmed,
            full_clear: k.full_clear,
            prefill_ms: k.prefill_ms,
            decode_ms: k.decode_ms,
        }
    }
}

/// What a generation was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum Purpose {
    /// A round of the investigation.
    Round,
    /// The summary pass of a compaction.
    Summary,
    /// A withholding-test probe of v2.1 (Δ by the model).
    Probe,
    /// The closing answer after a dynamic exit.
    Answer,
}

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

/// One message of a compaction plan, for the timeline (the full plan is in
/// [`AgentEvent::CompactionStarted::plan`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PlanRow {
    /// Message id.
    pub id: String,
    /// `system`, `user`, `tool_call`, `tool_result`, `tool_error`, `summary`, ...
    pub kind: String,
    /// `pinned`, `compressible` or `recent`.
    pub zone: String,
    /// `keep`, `verbatim`, `light`, `heavy`, `summarise`, `mask`, `drop`.
    pub tier: String,
    /// Tokens of the message.
    pub tokens: u32,
    /// v2 influence `I(m)`.
    pub influence: Option<f64>,
    /// v2.1 withholding Δ.
    pub delta: Option<f64>,
    /// Chain (call → result → interpretation) it belongs to.
    pub chain: Option<String>,
    /// Why this tier.
    pub reason: String,
}

fn label<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

impl PlanRow {
    /// The rows of a plan.
    #[must_use]
    pub fn of(plan: &CompactionPlan) -> Vec<PlanRow> {
        plan.messages
            .iter()
            .map(|m| PlanRow {
                id: m.id.0.clone(),
                kind: label(&m.kind),
                zone: label(&m.zone),
                tier: label(&m.tier),
                tokens: u32::try_from(m.tokens).unwrap_or(u32::MAX),
                influence: m.influence,
                delta: m.delta,
                chain: m.chain.clone(),
                reason: m.reason.to_string(),
            })
            .collect()
    }
}

/// How the summary of a compaction was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum SummaryBy {
    /// No summary (none, baseline, masking, or nothing to summarise).
    None,
    /// The model's summary pass.
    Model,
    /// The 500-character fallback after the summary pass failed.
    Fallback,
}

/// The MCP server and tool behind a model-facing tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct McpOrigin {
    /// The server's configured name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum AgentEvent {
    /// The investigation began (or resumed).
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
        miss: Option<crate::session::KvMiss>,
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

impl AgentEvent {
    /// The compaction-started event of a plan.
    #[must_use]
    pub fn compaction_started(round: u32, tokens_before: u32, plan: &CompactionPlan) -> Self {
        AgentEvent::CompactionStarted {
            round,
            strategy: plan.strategy.as_str().into(),
            tokens_before,
            messages_before: u32::try_from(plan.messages.len()).unwrap_or(u32::MAX),
            class: plan.class.as_ref().map(|c| label(&c.class)),
            rows: PlanRow::of(plan),
            plan: serde_json::to_value(plan).unwrap_or(serde_json::Value::Null),
        }
    }

    /// The compaction-finished event of a report.
    #[must_use]
    pub fn compaction_finished(
        round: u32,
        tokens_before: u32,
        tokens_after: u32,
        report: &CompactionReport,
        summary_pass: Option<&str>,
        duration_ms: u64,
    ) -> Self {
        let appended = summary_pass.is_some_and(|p| p != "standalone");
        let ids = |v: &[mf_forgetting::MessageId]| v.iter().map(|i| i.0.clone()).collect::<Vec<_>>();
        let summary_by = if report.fallback.is_some() {
            SummaryBy::Fallback
        } else if report.summary.is_some() {
            SummaryBy::Model
        } else {
            SummaryBy::None
        };
        AgentEvent::CompactionFinished {
            round,
            tokens_before,
            tokens_after,
            messages_before: u32::try_from(report.messages_before).unwrap_or(u32::MAX),
            messages_after: u32::try_from(report.messages_after).unwrap_or(u32::MAX),
            summary_by,
            fallback_reason: report.fallback.clone(),
            summary: report.summary.clone(),
            appended_to_live_cache: appended && summary_by != SummaryBy::None,
            summary_pass: summary_pass.filter(|_| summary_by != SummaryBy::None).map(str::to_owned),
            duration_ms: Some(duration_ms),
            verbatim: ids(&report.verbatim),
            summarised: ids(&report.summarised),
            masked: ids(&report.masked),
            dropped: ids(&report.dropped),
            notes: report.notes.clone(),
            report: serde_json::to_value(report).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// Where events go: the CLI printer, the UI channel, the store.
pub trait EventSink {
    /// Receives one event.
    fn emit(&mut self, event: &AgentEvent);

    /// The history after a change (the store keeps it; others ignore it).
    fn history(&mut self, _messages: &[Message]) {}
}

impl<F: FnMut(&AgentEvent)> EventSink for F {
    fn emit(&mut self, event: &AgentEvent) {
        self(event)
    }
}

/// Collects events in memory (tests, the benchmark).
#[derive(Debug, Default, Clone)]
pub struct VecSink {
    /// The events, in order.
    pub events: Vec<AgentEvent>,
    /// The last history seen.
    pub last_history: Vec<Message>,
}

impl EventSink for VecSink {
    fn emit(&mut self, event: &AgentEvent) {
        self.events.push(event.clone());
    }
    fn history(&mut self, messages: &[Message]) {
        self.last_history = messages.to_vec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ts_rs::TS;

    /// The TypeScript the UI imports, generated from the types above.
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
            McpOrigin::decl(&cfg),
            crate::session::KvMiss::decl(&cfg),
            AgentEvent::decl(&cfg),
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
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/generated/events.ts");
        let want = typescript();
        if std::env::var_os("MF_UPDATE_TS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: run `MF_UPDATE_TS=1 cargo test -p mf-agent typescript` and commit it",
            path.display()
        );
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

    #[test]
    fn the_forecast_counts_rounds_until_the_prompt_crosses_the_threshold() {
        let g = |prompt| Gauge { pinned: 0, compressible: 0, recent: 0, free: 0, threshold: 600, prompt_tokens: prompt, context: 1024, reserve: 256, messages: 4 };
        assert_eq!(Forecast::from_growth(&g(400), &[]), None, "nothing measured yet");
        assert_eq!(Forecast::from_growth(&g(400), &[0, 0]), None, "not growing");
        let f = Forecast::from_growth(&g(400), &[90, 110]).unwrap();
        assert_eq!((f.tokens_left, f.mean_tokens_per_round, f.window), (200, 100.0, 2));
        // 400 → 500 → 600 (not over) → 700: the third round's start compacts.
        assert_eq!(f.rounds_until_compaction, 3);
        assert_eq!(Forecast::from_growth(&g(599), &[100]).unwrap().rounds_until_compaction, 1);
        assert_eq!(Forecast::from_growth(&g(650), &[100]).unwrap().tokens_left, 0);
    }
}
