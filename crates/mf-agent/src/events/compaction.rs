//! The compaction events' parts: one row per message of the plan, who
//! wrote the summary, and the two events built from a plan and a report.

use mf_forgetting::{CompactionPlan, CompactionReport};
use serde::{Deserialize, Serialize};

use super::AgentEvent;

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

/// A compaction the user asked for, between rounds (the loop's own, over
/// the threshold, carry none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum ByHand {
    /// *Compact now*: the strategy on the history as it is, whatever the threshold says.
    CompactNow,
    /// *Summarise up to here*: this message, the rest of its chain and every
    /// message before them (after the pinned zone) are compressible for this
    /// one compaction; every message after them stays verbatim.
    UpTo {
        /// The message's id.
        message: String,
    },
}

impl std::fmt::Display for ByHand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ByHand::CompactNow => f.write_str("compact now"),
            ByHand::UpTo { message } => write!(f, "summarise up to {message}"),
        }
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

impl AgentEvent {
    /// The compaction-started event of a plan; `by_hand` when the user asked for it.
    #[must_use]
    pub fn compaction_started(round: u32, tokens_before: u32, plan: &CompactionPlan, by_hand: Option<ByHand>) -> Self {
        AgentEvent::CompactionStarted {
            by_hand,
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
        summary_model: Option<&str>,
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
            summary_model: summary_model.filter(|_| summary_by == SummaryBy::Model).map(str::to_owned),
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
