//! The results file: one object per model. Its top level carries the paper
//! harness's per-model fields (`model`, `overall`, `by_class`,
//! `by_dimension`, `scores[{scenario, probe, condition, dimension, score,
//! answer}]`, keyword scores) plus this harness's additions. The schema is
//! `schema/results.schema.json`; [`crate::schema`] checks a file against it.//!
//! The rows and aggregates are defined here; `aggregate` computes the
//! aggregates from the rows and `merge` joins runs over disjoint scenario
//! sets.

mod aggregate;
mod likelihood;
mod merge;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::CallStats;
pub use aggregate::{aggregate, brackets, cells, condition_summaries, stat};
pub use likelihood::{likelihood_summary, probe_facts};
pub use merge::merge;

/// The stop reason of a row whose answer was not generated (only the
/// likelihood scorer ran): its keyword score means nothing.
pub const NOT_GENERATED: &str = "not_generated";

/// The stop reason of a row whose condition's compaction could not fit the
/// budget: no answer was possible, and it scores 0.
pub const COMPACTION_FAILED: &str = "compaction_failed";

/// The rows with a generated answer (what the keyword scorer and the judge grade).
#[must_use]
pub fn answered(rows: &[ScoreRow]) -> Vec<ScoreRow> {
    rows.iter().filter(|r| r.stop_reason != NOT_GENERATED).cloned().collect()
}

/// Whether a run generated any answer at all: not when only the likelihood
/// scorer ran, whose rows are [`NOT_GENERATED`] but for the
/// [`COMPACTION_FAILED`] ones, which no scorer could answer.
#[must_use]
pub fn generated_answers(rows: &[ScoreRow]) -> bool {
    rows.iter().any(ScoreRow::was_generated)
}

/// One probe answered under one condition in one repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ScoreRow {
    /// Scenario id.
    pub scenario: String,
    /// Probe id.
    pub probe: String,
    /// Condition.
    pub condition: String,
    /// Probe dimension.
    pub dimension: String,
    /// Keyword score 0–3 (the paper's `score`).
    pub score: u8,
    /// The model's answer.
    pub answer: String,
    /// Problem class of the scenario.
    pub class: String,
    /// Length bucket.
    pub length: String,
    /// Repetition, from 0.
    pub rep: u32,
    /// Judge score 0–3; `null` when the judge was not run or gave no grade.
    pub judge: Option<u8>,
    /// The judge's raw reply.
    pub judge_raw: Option<String>,
    /// Why generation stopped.
    pub stop_reason: String,
    /// Tokens generated.
    pub completion_tokens: u32,
    /// Of those, thinking.
    pub thinking_tokens: u32,
    /// Whether the answer was asked again because the first came back empty with its budget spent.
    pub retried: bool,
    /// When this condition's compacted context was identical, message for
    /// message, to an earlier condition's, that condition: the answer was
    /// asked once (same prompt, seed and sampling) and is reused here.
    #[serde(default)]
    pub shared_from: Option<String>,
    /// The likelihood scorer's figures for this probe and condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likelihood: Option<crate::likelihood::LikelihoodScore>,
}

impl ScoreRow {
    /// Whether the model generated this answer: neither [`NOT_GENERATED`]
    /// (only the likelihood scorer ran) nor [`COMPACTION_FAILED`].
    #[must_use]
    pub fn was_generated(&self) -> bool {
        self.stop_reason != NOT_GENERATED && self.stop_reason != COMPACTION_FAILED
    }
}

/// A control answer's grades.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ControlRow {
    /// Scenario id.
    pub scenario: String,
    /// Probe id.
    pub probe: String,
    /// Which control.
    pub control: String,
    /// The control answer.
    pub answer: String,
    /// Keyword score.
    pub keyword: u8,
    /// Judge score (`null`: not run or no grade).
    pub judge: Option<u8>,
}

/// What one compaction did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CompactionRow {
    /// Scenario id.
    pub scenario: String,
    /// Condition.
    pub condition: String,
    /// Repetition.
    pub rep: u32,
    /// Prompt tokens of the history before (model template).
    pub tokens_before: usize,
    /// After.
    pub tokens_after: usize,
    /// Messages before.
    pub messages_before: usize,
    /// After.
    pub messages_after: usize,
    /// Why the 500-character fallback replaced the model summary, if it did.
    pub fallback: Option<String>,
    /// Messages kept verbatim inside the summary.
    pub verbatim: usize,
    /// Messages dropped.
    pub dropped: usize,
    /// v2.1 evaluator calls.
    pub evaluator_calls: usize,
    /// Whether per-message token counts were approximate (HTTP backends).
    pub approximate_counts: bool,
    /// Wall time, ms.
    pub compaction_ms: u64,
    /// Why the compaction failed (the strategy could not get under the threshold); its probes then score 0.
    pub error: Option<String>,
    /// Set when the compaction was not applied because it would not have
    /// shrunk the history (`mf_forgetting::CompactionReport::kept_original`):
    /// the probes then ran over the original history. Absent in results
    /// written before that guard existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional = nullable))]
    pub kept_original: Option<String>,
    /// Which prompt the summary pass used (`live_with_log`,
    /// `live_instruction`, `pinned_prefix`, `standalone`: the app's adapter,
    /// `mf_agent::model`); absent without a pass and in results written
    /// before the benchmark used the app's adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional = nullable))]
    pub summary_prompt: Option<String>,
    /// What the adapter noted, e.g. v2.1 ranked by Φ because the model's
    /// withholding test could not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(test, ts(as = "Option<Vec<String>>", optional))]
    pub notes: Vec<String>,
    /// v2.1: the withholding test's `Δ` per compressible message id (units
    /// withheld as one block share it), so two runs' rankings can be
    /// compared (`bench-forgetting compare`); absent otherwise and in results
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[cfg_attr(test, ts(as = "Option<std::collections::BTreeMap<String, f64>>", optional))]
    pub deltas: std::collections::BTreeMap<String, f64>,
}

/// Mean and spread of a score over repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Stat {
    /// Mean over every score.
    pub mean: f64,
    /// Sample standard deviation of the per-repetition means (0 with one repetition).
    pub sd: f64,
    /// Lowest single score.
    pub min: f64,
    /// Scores counted.
    pub n: usize,
}

/// One condition's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ConditionSummary {
    /// Condition.
    pub condition: String,
    /// Keyword score.
    pub keyword: Stat,
    /// Judge score (`null` without judge).
    pub judge: Option<Stat>,
    /// Mean prompt tokens before compaction.
    pub tokens_before: f64,
    /// Mean prompt tokens after.
    pub tokens_after: f64,
    /// Compactions that used the fallback.
    pub fallbacks: usize,
    /// Empty answers.
    pub empty_answers: usize,
    /// Scenarios where the strategy could not get under the threshold (probes scored 0).
    pub compaction_failures: usize,
    /// Compactions not applied because they would not have shrunk the history.
    #[serde(default)]
    pub not_applied: usize,
}

/// A (scenario × condition) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Cell {
    /// Scenario id.
    pub scenario: String,
    /// Condition.
    pub condition: String,
    /// Mean keyword score of the cell.
    pub keyword_mean: f64,
    /// Worst keyword score in the cell.
    pub keyword_min: u8,
    /// Mean judge score.
    pub judge_mean: Option<f64>,
    /// Worst judge score.
    pub judge_min: Option<u8>,
}

/// One scorer's aggregates: per condition, per class × condition, per dimension × condition.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Aggregates {
    /// Mean per condition.
    pub overall: BTreeMap<String, f64>,
    /// Mean per class, per condition.
    pub by_class: BTreeMap<String, BTreeMap<String, f64>>,
    /// Mean per probe dimension, per condition.
    pub by_dimension: BTreeMap<String, BTreeMap<String, f64>>,
}

/// The control brackets: mean score per control, per scorer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Brackets {
    /// Keyword scorer: control → mean.
    pub keyword: BTreeMap<String, f64>,
    /// Judge: control → mean (empty without judge).
    pub judge: BTreeMap<String, f64>,
    /// Judge replies without a grade, over the controls.
    pub judge_unparsed: usize,
    /// Probes bracketed.
    pub probes: usize,
    /// Whether the judge's grades pass the brackets ([`Brackets::judge_holds`],
    /// set by the aggregate; absent in older files): a face shows a failing
    /// judge's figures as not evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_evidence: Option<bool>,
}

/// What a judge must grade its controls to count as evidence (means over
/// every bracketed probe): the reference itself at least this…
pub const JUDGE_IDENTICAL_AT_LEAST: f64 = 2.5;
/// …a faithful paraphrase at least this…
pub const JUDGE_PARAPHRASE_AT_LEAST: f64 = 2.0;
/// …a contradiction at most this…
pub const JUDGE_CONTRADICTION_AT_MOST: f64 = 1.0;
/// …and the empty answer at most this.
pub const JUDGE_EMPTY_AT_MOST: f64 = 0.5;

impl Brackets {
    /// Whether the judge's grades of its controls pass the brackets (see
    /// the `JUDGE_*` bounds); `None` when no judge ran. A judge that fails
    /// cannot tell a good answer from a bad one: its column is not evidence.
    #[must_use]
    pub fn judge_holds(&self) -> Option<bool> {
        if self.judge.is_empty() {
            return None;
        }
        let g = |k: &str| self.judge.get(k).copied();
        Some(
            g("identical").is_some_and(|v| v >= JUDGE_IDENTICAL_AT_LEAST)
                && g("paraphrase").is_some_and(|v| v >= JUDGE_PARAPHRASE_AT_LEAST)
                && g("contradiction").is_some_and(|v| v <= JUDGE_CONTRADICTION_AT_MOST)
                && g("empty").is_some_and(|v| v <= JUDGE_EMPTY_AT_MOST),
        )
    }

    /// The judge column's heading: `judge (0–3)`, marked when its brackets fail.
    #[must_use]
    pub fn judge_heading(&self) -> &'static str {
        if self.judge_holds() == Some(false) { "judge (0–3; not evidence: its brackets fail)" } else { "judge (0–3)" }
    }
}

/// Prefill figures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Speed {
    /// Per purpose (`probe`, `summary`, `evaluator`, `judge`).
    pub calls: BTreeMap<String, CallStats>,
    /// Probe calls: decoded ÷ prompt tokens (naive resend = 1.0); `null` when the backend reports no KV figures.
    pub probe_prefill_ratio: Option<f64>,
    /// Every call: decoded ÷ prompt tokens.
    pub total_prefill_ratio: Option<f64>,
    /// Probe answers reused because two conditions gave identical contexts.
    #[serde(default)]
    pub answers_shared: usize,
    /// Judge grades reused for an answer already graded on the same probe.
    #[serde(default)]
    pub grades_shared: usize,
    /// Workers that ran scenarios side by side (each its own model session).
    #[serde(default)]
    pub workers: usize,
    /// CPU threads per worker (llama.cpp), when known.
    #[serde(default)]
    pub threads_per_worker: Option<i32>,
}

/// The run's settings, for reproduction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Settings {
    /// Backend (`llama.cpp`, `ollama`, `openai`).
    pub backend: String,
    /// Context window of the model.
    pub n_ctx: u32,
    /// Compaction budget context `C`.
    pub budget_context: usize,
    /// Generation reserve `G`.
    pub budget_reserve: usize,
    /// Recent messages kept.
    pub budget_recent: usize,
    /// Probe temperature.
    pub temperature: f32,
    /// Probe answer limit.
    pub answer_max_tokens: u32,
    /// Thinking mode of every call (`off`).
    pub thinking: String,
    /// The probe prompt prefix.
    pub probe_prompt: String,
    /// Repetitions.
    pub reps: u32,
    /// Scorers run.
    pub scorers: Vec<String>,
    /// The judge model.
    pub judge_model: Option<String>,
    /// v2.1: tokens of each withholding-test answer (before the benchmark
    /// used the app's adapter: of the recap it compared).
    pub evaluator_max_tokens: u32,
    /// Summary pass limit (METHOD.md §2: 256).
    #[serde(default)]
    pub summary_max_tokens: Option<u32>,
    /// v2.1: evaluations allowed to the withholding test per compaction (0 or
    /// absent: one per unit, the exact test).
    #[serde(default)]
    pub withholding_budget: usize,
    /// Whether calls over a shared prefix ran branched (`--branched`: the
    /// probes of one context, the withholding test's trials); absent in
    /// results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional = nullable))]
    pub branched: Option<bool>,
    /// How v2.1's withholding test measured Perf (`model`: an answer
    /// generated per trial; `likelihood`; `phi`); absent in results written
    /// before it was recorded (they used `model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional = nullable))]
    pub delta: Option<String>,
    /// The model that wrote the compaction summaries when it was not the
    /// model under test (`bench-forgetting --summariser`); absent: its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional = nullable))]
    pub summariser: Option<String>,
    /// Scenario directory.
    pub scenarios_dir: String,
    /// Scenarios run.
    pub scenarios: Vec<String>,
}

/// Everything measured for one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ModelResult {
    /// Model name.
    pub model: String,
    /// Keyword score per condition (paper-compatible).
    pub overall: BTreeMap<String, f64>,
    /// Keyword score per class per condition.
    pub by_class: BTreeMap<String, BTreeMap<String, f64>>,
    /// Keyword score per dimension per condition.
    pub by_dimension: BTreeMap<String, BTreeMap<String, f64>>,
    /// Every answer.
    pub scores: Vec<ScoreRow>,
    /// Conditions run, in order.
    pub conditions: Vec<ConditionSummary>,
    /// Judge aggregates (`null` without judge).
    pub judge: Option<Aggregates>,
    /// Control brackets.
    pub control_brackets: Brackets,
    /// Every control grade.
    pub controls: Vec<ControlRow>,
    /// Cells, worst first (by keyword mean, then judge mean).
    pub worst_cells: Vec<Cell>,
    /// Every compaction.
    pub compactions: Vec<CompactionRow>,
    /// Prefill and reuse.
    pub speed: Speed,
    /// Settings.
    pub settings: Settings,
    /// Empty answers caused by the token budget (must be 0).
    pub empty_by_budget: usize,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// The likelihood scorer's summary (when it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likelihood: Option<crate::likelihood::LikelihoodSummary>,
}
