//! The results file: one object per model. Its top level carries the paper
//! harness's per-model fields (`model`, `overall`, `by_class`,
//! `by_dimension`, `scores[{scenario, probe, condition, dimension, score,
//! answer}]`, keyword scores) plus this harness's additions. The schema is
//! `schema/results.schema.json`; [`crate::schema`] checks a file against it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::CallStats;

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
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Statistic of `(rep, score)` pairs.
pub fn stat(items: &[(u32, f64)]) -> Option<Stat> {
    if items.is_empty() {
        return None;
    }
    let mut per_rep: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (r, s) in items {
        per_rep.entry(*r).or_default().push(*s);
    }
    let rep_means: Vec<f64> = per_rep.values().map(|v| mean(v)).collect();
    let all: Vec<f64> = items.iter().map(|x| x.1).collect();
    Some(Stat { mean: mean(&all), sd: sd(&rep_means), min: all.iter().copied().fold(f64::INFINITY, f64::min), n: all.len() })
}

/// Aggregates of one scorer over rows (`pick` returns the row's score).
pub fn aggregate(rows: &[ScoreRow], pick: impl Fn(&ScoreRow) -> Option<u8>) -> Aggregates {
    let mut overall: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut by_class: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let mut by_dim: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in rows {
        let Some(s) = pick(r) else { continue };
        let s = f64::from(s);
        overall.entry(r.condition.clone()).or_default().push(s);
        by_class.entry(r.class.clone()).or_default().entry(r.condition.clone()).or_default().push(s);
        by_dim.entry(r.dimension.clone()).or_default().entry(r.condition.clone()).or_default().push(s);
    }
    let fold = |m: BTreeMap<String, Vec<f64>>| m.into_iter().map(|(k, v)| (k, mean(&v))).collect::<BTreeMap<_, _>>();
    Aggregates {
        overall: fold(overall),
        by_class: by_class.into_iter().map(|(k, m)| (k, fold(m))).collect(),
        by_dimension: by_dim.into_iter().map(|(k, m)| (k, fold(m))).collect(),
    }
}

/// Cells (scenario × condition), worst first.
pub fn cells(rows: &[ScoreRow]) -> Vec<Cell> {
    let mut m: BTreeMap<(String, String), Vec<&ScoreRow>> = BTreeMap::new();
    for r in rows {
        m.entry((r.scenario.clone(), r.condition.clone())).or_default().push(r);
    }
    let mut out: Vec<Cell> = m
        .into_iter()
        .map(|((scenario, condition), rs)| {
            let kw: Vec<f64> = rs.iter().map(|r| f64::from(r.score)).collect();
            let j: Vec<u8> = rs.iter().filter_map(|r| r.judge).collect();
            Cell {
                scenario,
                condition,
                keyword_mean: mean(&kw),
                keyword_min: rs.iter().map(|r| r.score).min().unwrap_or(0),
                judge_mean: (!j.is_empty()).then(|| mean(&j.iter().map(|&x| f64::from(x)).collect::<Vec<_>>())),
                judge_min: j.iter().copied().min(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.keyword_mean
            .total_cmp(&b.keyword_mean)
            .then(a.judge_mean.unwrap_or(0.0).total_cmp(&b.judge_mean.unwrap_or(0.0)))
            .then(a.scenario.cmp(&b.scenario))
            .then(a.condition.cmp(&b.condition))
    });
    out
}

/// Per-condition summaries (in `conditions` order) over rows and compactions.
pub fn condition_summaries(conditions: &[&str], rows: &[ScoreRow], comps: &[CompactionRow], judged: bool) -> Vec<ConditionSummary> {
    conditions
        .iter()
        .map(|&name| {
            let rs: Vec<&ScoreRow> = rows.iter().filter(|r| r.condition == name).collect();
            let failures = comps.iter().filter(|r| r.condition == name && r.error.is_some()).count();
            let cs: Vec<&CompactionRow> = comps.iter().filter(|r| r.condition == name && r.error.is_none()).collect();
            let kw: Vec<(u32, f64)> = rs.iter().map(|r| (r.rep, f64::from(r.score))).collect();
            let j: Vec<(u32, f64)> = rs.iter().filter_map(|r| r.judge.map(|s| (r.rep, f64::from(s)))).collect();
            let n = cs.len().max(1) as f64;
            ConditionSummary {
                condition: name.to_owned(),
                keyword: stat(&kw).unwrap_or(Stat { mean: 0.0, sd: 0.0, min: 0.0, n: 0 }),
                judge: if judged { stat(&j) } else { None },
                tokens_before: cs.iter().map(|r| r.tokens_before as f64).sum::<f64>() / n,
                tokens_after: cs.iter().map(|r| r.tokens_after as f64).sum::<f64>() / n,
                fallbacks: cs.iter().filter(|r| r.fallback.is_some()).count(),
                empty_answers: rs.iter().filter(|r| r.answer.is_empty() && r.stop_reason != "compaction_failed").count(),
                compaction_failures: failures,
                not_applied: cs.iter().filter(|r| r.kept_original.is_some()).count(),
            }
        })
        .collect()
}

/// The withholding budget of two runs merged. An exact run (budget 0) merges
/// with a budgeted run (budget B) when each of its v2.1 compactions made at
/// most B evaluations: with budget B those compactions would have run the
/// exact test too (a budget above the unit count is the exact test), so both
/// runs are what budget B gives. Otherwise the settings differ.
fn merged_withholding_budget(a: &ModelResult, b: &ModelResult) -> Result<usize, String> {
    let (x, y) = (a.settings.withholding_budget, b.settings.withholding_budget);
    if x == y {
        return Ok(x);
    }
    let (exact, budget) = match (x, y) {
        (0, n) => (a, n),
        (n, 0) => (b, n),
        _ => return Err(format!("{}: the runs' v2.1 withholding budgets differ ({x} vs {y})", a.model)),
    };
    let over = exact.compactions.iter().find(|c| c.condition == "v2.1" && c.evaluator_calls > budget);
    match over {
        None => Ok(budget),
        Some(c) => Err(format!(
            "{}: the exact run's v2.1 compaction of {} made {} evaluations, more than the other run's budget of {budget}: the runs are not comparable",
            a.model, c.scenario, c.evaluator_calls
        )),
    }
}

/// Merges results of one model run over disjoint scenario sets (e.g. the
/// short, medium and long scenarios run one after the other) into one, with
/// every aggregate recomputed from the rows. Wall times and call figures add
/// up; the settings must agree except for the scenario list.
///
/// # Errors
/// Nothing to merge, different models, or settings that differ.
pub fn merge(parts: Vec<ModelResult>) -> Result<ModelResult, String> {
    let mut it = parts.into_iter();
    let Some(mut m) = it.next() else { return Err("nothing to merge".to_owned()) };
    for p in it {
        if p.model != m.model {
            return Err(format!("cannot merge results of {} with {}", p.model, m.model));
        }
        let budget = merged_withholding_budget(&m, &p)?;
        let mut a = p.settings.clone();
        let mut b = m.settings.clone();
        a.scenarios.clear();
        b.scenarios.clear();
        a.withholding_budget = budget;
        b.withholding_budget = budget;
        m.settings.withholding_budget = budget;
        if a != b {
            return Err(format!("{}: the runs' settings differ ({a:?} vs {b:?})", m.model));
        }
        if p.settings.scenarios.iter().any(|s| m.settings.scenarios.contains(s)) {
            return Err(format!("{}: the runs share scenarios", m.model));
        }
        m.settings.scenarios.extend(p.settings.scenarios);
        m.scores.extend(p.scores);
        m.controls.extend(p.controls);
        m.compactions.extend(p.compactions);
        m.empty_by_budget += p.empty_by_budget;
        m.wall_s += p.wall_s;
        for (k, v) in p.speed.calls {
            m.speed.calls.entry(k).or_default().merge(&v);
        }
        m.speed.answers_shared += p.speed.answers_shared;
        m.speed.grades_shared += p.speed.grades_shared;
    }
    let judged = m.judge.is_some();
    let names: Vec<String> = m.conditions.iter().map(|c| c.condition.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    m.conditions = condition_summaries(&names, &m.scores, &m.compactions, judged);
    let kw = aggregate(&m.scores, |r| Some(r.score));
    m.overall = kw.overall;
    m.by_class = kw.by_class;
    m.by_dimension = kw.by_dimension;
    m.judge = judged.then(|| aggregate(&m.scores, |r| r.judge));
    m.worst_cells = cells(&m.scores);
    m.control_brackets = brackets(&m.controls, judged);
    if m.speed.probe_prefill_ratio.is_some() {
        let probe = m.speed.calls.get("probe").copied().unwrap_or_default();
        let mut all = CallStats::default();
        for v in m.speed.calls.values() {
            all.merge(v);
        }
        m.speed.probe_prefill_ratio = probe.prefill_ratio();
        m.speed.total_prefill_ratio = all.prefill_ratio();
    }
    Ok(m)
}

/// Control brackets over control rows.
pub fn brackets(rows: &[ControlRow], judged: bool) -> Brackets {
    let mut kw: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut j: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut unparsed = 0;
    let mut probes = std::collections::BTreeSet::new();
    for r in rows {
        probes.insert((r.scenario.clone(), r.probe.clone()));
        kw.entry(r.control.clone()).or_default().push(f64::from(r.keyword));
        if judged {
            match r.judge {
                Some(s) => j.entry(r.control.clone()).or_default().push(f64::from(s)),
                None => unparsed += 1,
            }
        }
    }
    Brackets {
        keyword: kw.into_iter().map(|(k, v)| (k, mean(&v))).collect(),
        judge: j.into_iter().map(|(k, v)| (k, mean(&v))).collect(),
        judge_unparsed: unparsed,
        probes: probes.len(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn row(scenario: &str, condition: &str, rep: u32, score: u8, judge: Option<u8>) -> ScoreRow {
        ScoreRow {
            scenario: scenario.into(),
            probe: "p1".into(),
            condition: condition.into(),
            dimension: "fact_retention".into(),
            score,
            answer: "a".into(),
            class: "lookup".into(),
            length: "short".into(),
            rep,
            judge,
            judge_raw: None,
            stop_reason: "end_of_turn".into(),
            completion_tokens: 3,
            thinking_tokens: 0,
            retried: false,
            shared_from: None,
        }
    }

    fn result(scenario: &str, rows: Vec<ScoreRow>) -> ModelResult {
        let comps = vec![CompactionRow {
            scenario: scenario.into(),
            condition: "v1".into(),
            rep: 0,
            tokens_before: 100,
            tokens_after: 40,
            messages_before: 10,
            messages_after: 4,
            fallback: None,
            verbatim: 0,
            dropped: 0,
            evaluator_calls: 0,
            approximate_counts: false,
            compaction_ms: 5,
            error: None,
            kept_original: None,
            summary_prompt: None,
            notes: Vec::new(),
        }];
        let mut calls = BTreeMap::new();
        calls.insert("probe".to_owned(), CallStats { calls: 1, prompt_tokens: 100, decoded_tokens: 30, ..CallStats::default() });
        let names = ["v1"];
        ModelResult {
            model: "m".into(),
            overall: aggregate(&rows, |r| Some(r.score)).overall,
            by_class: BTreeMap::new(),
            by_dimension: BTreeMap::new(),
            conditions: condition_summaries(&names, &rows, &comps, true),
            judge: Some(aggregate(&rows, |r| r.judge)),
            control_brackets: Brackets::default(),
            controls: Vec::new(),
            worst_cells: cells(&rows),
            compactions: comps,
            scores: rows,
            speed: Speed { calls, probe_prefill_ratio: Some(0.3), total_prefill_ratio: Some(0.3), ..Speed::default() },
            settings: Settings {
                backend: "llama.cpp".into(),
                n_ctx: 8192,
                budget_context: 4608,
                budget_reserve: 512,
                budget_recent: 2,
                temperature: 0.1,
                answer_max_tokens: 96,
                thinking: "off".into(),
                probe_prompt: "p".into(),
                reps: 1,
                scorers: vec!["keyword".into(), "judge".into()],
                judge_model: Some("m".into()),
                evaluator_max_tokens: 32,
                summary_max_tokens: Some(256),
                withholding_budget: 0,
                scenarios_dir: "d".into(),
                scenarios: vec![scenario.into()],
            },
            empty_by_budget: 0,
            wall_s: 10.0,
        }
    }

    #[test]
    fn merging_runs_recomputes_every_aggregate() {
        let a = result("a", vec![row("a", "v1", 0, 3, Some(3))]);
        let b = result("b", vec![row("b", "v1", 0, 0, Some(1)), row("b", "v1", 0, 0, Some(1))]);
        let m = merge(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(m.overall["v1"], 1.0);
        assert_eq!(m.conditions[0].keyword.n, 3);
        assert!((m.conditions[0].judge.unwrap().mean - 5.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.worst_cells[0].scenario, "b");
        assert_eq!(m.settings.scenarios, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(m.wall_s, 20.0);
        assert_eq!(m.speed.calls["probe"].calls, 2);
        assert_eq!(m.speed.probe_prefill_ratio, Some(0.3));
        // The same scenario twice, another model, or other settings are refused.
        assert!(merge(vec![a.clone(), a.clone()]).unwrap_err().contains("share"));
        let mut c = b.clone();
        c.model = "other".into();
        assert!(merge(vec![a.clone(), c]).unwrap_err().contains("other"));
        let mut d = b;
        d.settings.answer_max_tokens = 160;
        assert!(merge(vec![a, d]).unwrap_err().contains("differ"));
        assert!(merge(Vec::new()).is_err());
    }

    #[test]
    fn compactions_kept_as_they_were_are_counted_and_old_rows_still_parse() {
        let mut r = result("s-short", vec![row("s-short", "v1", 0, 2, Some(2))]);
        r.compactions[0].kept_original = Some("would be 120 tokens, not fewer than 100".into());
        let names = ["v1"];
        let summary = condition_summaries(&names, &r.scores, &r.compactions, true);
        assert_eq!(summary[0].not_applied, 1);
        assert_eq!(summary[0].compaction_failures, 0);
        // Rows and summaries written before the guard existed have neither field.
        let mut old = serde_json::to_value(&r.compactions[0]).unwrap();
        old.as_object_mut().unwrap().remove("kept_original");
        let back: CompactionRow = serde_json::from_value(old).unwrap();
        assert!(back.kept_original.is_none());
        let mut old_summary = serde_json::to_value(&summary[0]).unwrap();
        old_summary.as_object_mut().unwrap().remove("not_applied");
        let back: ConditionSummary = serde_json::from_value(old_summary).unwrap();
        assert_eq!(back.not_applied, 0);
    }

    #[test]
    fn an_exact_run_merges_with_a_budgeted_one_only_where_the_budget_did_not_bind() {
        let v21 = |scenario: &str, calls: usize| {
            let mut r = result(scenario, vec![row(scenario, "v1", 0, 2, Some(2))]);
            r.compactions[0].condition = "v2.1".into();
            r.compactions[0].evaluator_calls = calls;
            r.settings.scenarios = vec![scenario.into()];
            r
        };
        let short = v21("a-short", 7);
        let mut long = v21("a-long", 16);
        long.settings.withholding_budget = 16;
        let m = merge(vec![short.clone(), long.clone()]).unwrap();
        assert_eq!(m.settings.withholding_budget, 16);
        let m = merge(vec![long.clone(), short]).unwrap();
        assert_eq!(m.settings.withholding_budget, 16);
        // An exact compaction of 34 evaluations is not what a budget of 16 gives.
        let exact_long = v21("b-long", 34);
        let e = merge(vec![exact_long, long.clone()]).unwrap_err();
        assert!(e.contains("b-long") && e.contains("34"), "{e}");
        let mut other = v21("c-long", 8);
        other.settings.withholding_budget = 8;
        assert!(merge(vec![other, long]).unwrap_err().contains("budgets differ"));
    }

    #[test]
    fn stats_over_reps() {
        let s = stat(&[(0, 3.0), (0, 1.0), (1, 2.0), (1, 2.0)]).unwrap();
        assert_eq!(s.mean, 2.0);
        assert_eq!(s.sd, 0.0);
        assert_eq!(s.min, 1.0);
        let s = stat(&[(0, 3.0), (1, 1.0)]).unwrap();
        assert!((s.sd - std::f64::consts::SQRT_2).abs() < 1e-12);
        assert!(stat(&[]).is_none());
    }

    #[test]
    fn aggregates_and_worst_cells() {
        let rows = vec![row("a", "v1", 0, 3, Some(2)), row("a", "v1", 0, 1, None), row("b", "v1", 0, 0, Some(0)), row("a", "full", 0, 3, Some(3))];
        let a = aggregate(&rows, |r| Some(r.score));
        assert!((a.overall["v1"] - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(a.by_class["lookup"]["full"], 3.0);
        let j = aggregate(&rows, |r| r.judge);
        assert_eq!(j.overall["v1"], 1.0);
        let c = cells(&rows);
        assert_eq!((c[0].scenario.as_str(), c[0].condition.as_str(), c[0].keyword_min), ("b", "v1", 0));
        assert_eq!(c.last().unwrap().condition, "full");
        assert_eq!(c[1].keyword_min, 1);
        assert_eq!(c[1].judge_min, Some(2));
    }
}
