//! The suite: for every repetition and scenario, compact under every
//! condition, ask every probe over each compacted context, then grade.
//!
//! Call order is chosen for the KV cache: all compactions of a scenario run
//! first (their summary passes would otherwise evict the context between
//! probes), then each condition's probes back to back — they share the
//! compacted context as a prompt prefix, so only the question is decoded
//! after the first — and finally the judge, probe by probe, so the rubric,
//! question and reference are decoded once per probe.

use std::time::Instant;

use mf_forgetting::scenario::Probe;
use mf_forgetting::{Budget, Message, PlanConfig};
use mf_inference::{ChatMessage, Generation, Sampling, StopReason, Thinking};

use crate::condition::{Compacted, Condition, compact};
use crate::error::{BenchError, Result};
use crate::judge::{Control, grade};
use crate::load::LoadedScenario;
use crate::model::{CallStats, Model, Purpose, to_chat};
use crate::results::{self, CompactionRow, ConditionSummary, ControlRow, ModelResult, ScoreRow, Settings, Speed};

/// The probe prompt (METHOD.md §6).
pub const PROBE_PROMPT: &str = "Based on our conversation above, answer concisely: ";

/// Which scorers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scorers {
    /// Keyword scorer (always cheap).
    pub keyword: bool,
    /// Model judge.
    pub judge: bool,
}

impl Scorers {
    /// Parses `keyword,judge` (or `all`).
    ///
    /// # Errors
    /// An unknown scorer.
    pub fn parse(s: &str) -> Result<Scorers> {
        let mut out = Scorers { keyword: false, judge: false };
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p {
                "keyword" => out.keyword = true,
                "judge" => out.judge = true,
                "all" => out = Scorers { keyword: true, judge: true },
                other => return Err(BenchError::InvalidSetting { name: "scorers", reason: format!("unknown scorer {other:?} (keyword, judge, all)") }),
            }
        }
        if !out.keyword && !out.judge {
            return Err(BenchError::InvalidSetting { name: "scorers", reason: "no scorer given".to_owned() });
        }
        Ok(out)
    }

    /// Names, for the settings.
    pub fn names(self) -> Vec<String> {
        let mut v = Vec::new();
        if self.keyword {
            v.push("keyword".to_owned());
        }
        if self.judge {
            v.push("judge".to_owned());
        }
        v
    }
}

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Conditions, in order.
    pub conditions: Vec<Condition>,
    /// Scorers.
    pub scorers: Scorers,
    /// Repetitions.
    pub reps: u32,
    /// The compaction budget.
    pub budget: Budget,
    /// Strategy settings.
    pub plan: PlanConfig,
    /// Probe temperature (0.1).
    pub temperature: f32,
    /// Probe answer limit in tokens.
    pub answer_max_tokens: u32,
    /// v2.1 recap limit.
    pub evaluator_max_tokens: u32,
    /// Scenario directory, for the record.
    pub scenarios_dir: String,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            conditions: Condition::ALL.to_vec(),
            scorers: Scorers { keyword: true, judge: true },
            reps: 1,
            budget: Budget { context: 4608, reserve: 512, ratio: 0.75, recent: 2 },
            plan: PlanConfig::default(),
            temperature: 0.1,
            answer_max_tokens: 160,
            evaluator_max_tokens: 48,
            scenarios_dir: String::new(),
        }
    }
}

/// A progress step: one scenario × condition × repetition done.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Steps done.
    pub done: u64,
    /// Steps in all.
    pub total: u64,
    /// What was just done.
    pub label: String,
}

/// Asks one probe over a context; an empty answer that spent its budget (or
/// thinking) is asked again once with thinking off and twice the budget, so
/// the harness never scores an empty answer it caused itself.
fn ask(model: &Model, context: &[Message], probe: &Probe, cfg: &RunConfig, seed: u32) -> Result<(Generation, bool)> {
    let mut msgs: Vec<ChatMessage> = context.iter().map(to_chat).collect();
    msgs.push(ChatMessage::user(format!("{PROBE_PROMPT}{}", probe.question.trim())));
    let sampling = |max| Sampling { temperature: cfg.temperature, top_p: 1.0, top_k: 0, seed, max_tokens: max, stop: Vec::new(), thinking: Thinking::Off };
    let g = model.generate(Purpose::Probe, msgs.clone(), sampling(cfg.answer_max_tokens))?;
    if g.content.trim().is_empty() && (g.usage.thinking_tokens > 0 || g.stop_reason == StopReason::MaxTokens) {
        let g2 = model.generate(Purpose::Probe, msgs, sampling(cfg.answer_max_tokens.saturating_mul(2)))?;
        return Ok((g2, true));
    }
    Ok((g, false))
}

fn stop_name(s: StopReason) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| format!("{s:?}"))
}

/// Runs the suite on `model`, grading with `judge` (the model itself when `None`).
///
/// # Errors
/// Model and planner errors; bad settings.
pub fn run_suite(
    model: &Model,
    judge: Option<&Model>,
    scenarios: &[LoadedScenario],
    cfg: &RunConfig,
    progress: &mut dyn FnMut(Progress),
) -> Result<ModelResult> {
    if cfg.reps == 0 {
        return Err(BenchError::InvalidSetting { name: "reps", reason: "must be at least 1".to_owned() });
    }
    cfg.budget.validate()?;
    cfg.plan.validate()?;
    let judge_model = judge.unwrap_or(model);
    let t0 = Instant::now();
    model.reset_stats();
    if !std::ptr::eq(judge_model, model) {
        judge_model.reset_stats();
    }
    let total = u64::from(cfg.reps) * scenarios.len() as u64 * cfg.conditions.len() as u64;
    let mut done = 0;
    let mut rows: Vec<ScoreRow> = Vec::new();
    let mut comps: Vec<CompactionRow> = Vec::new();
    let mut controls: Vec<ControlRow> = Vec::new();
    let mut empty_by_budget = 0;
    // A required keyword of another scenario, as a wrong entity for contradiction controls:
    // never one this probe itself accepts.
    let other_entity = |si: usize, p: &Probe| -> String {
        let own = crate::keyword::normalise(&p.reference);
        let accepted: Vec<String> = p.required.iter().chain(&p.partial).flat_map(|k| k.variants()).map(crate::keyword::normalise).collect();
        scenarios
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != si)
            .flat_map(|(_, s)| s.scenario.probes.iter())
            .flat_map(|q| q.required.iter())
            .flat_map(|k| k.variants())
            .find(|v| {
                let n = crate::keyword::normalise(v);
                !v.chars().any(|c| c.is_ascii_digit()) && !accepted.contains(&n) && !own.contains(&n)
            })
            .unwrap_or("an unrelated service")
            .to_owned()
    };
    for rep in 0..cfg.reps {
        for (si, ls) in scenarios.iter().enumerate() {
            let s = &ls.scenario;
            let seed = rep.wrapping_mul(7919).wrapping_add(17);
            let mut compacted: Vec<(Condition, Compacted)> = Vec::new();
            let mut failed: Vec<Condition> = Vec::new();
            for &c in &cfg.conditions {
                let cp = match compact(model, c, &s.messages, &cfg.budget, &cfg.plan, seed, cfg.evaluator_max_tokens) {
                    Ok(cp) => cp,
                    // The strategy cannot fit the budget: the app's loop would have to stop here.
                    // Recorded, and its probes score 0 (an answer was never possible).
                    Err(BenchError::Forgetting(e @ mf_forgetting::ForgettingError::BudgetNotRestored { .. })) => {
                        comps.push(CompactionRow {
                            scenario: s.id.clone(),
                            condition: c.as_str().to_owned(),
                            rep,
                            tokens_before: 0,
                            tokens_after: 0,
                            messages_before: s.messages.len(),
                            messages_after: 0,
                            fallback: None,
                            verbatim: 0,
                            dropped: 0,
                            evaluator_calls: 0,
                            approximate_counts: false,
                            compaction_ms: 0,
                            error: Some(e.to_string()),
                        });
                        failed.push(c);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                comps.push(CompactionRow {
                    scenario: s.id.clone(),
                    condition: c.as_str().to_owned(),
                    rep,
                    tokens_before: cp.tokens_before,
                    tokens_after: cp.tokens_after,
                    messages_before: s.messages.len(),
                    messages_after: cp.messages.len(),
                    fallback: cp.report.as_ref().and_then(|r| r.fallback.clone()),
                    verbatim: cp.report.as_ref().map_or(0, |r| r.verbatim.len()),
                    dropped: cp.report.as_ref().map_or(0, |r| r.dropped.len()),
                    evaluator_calls: cp.evaluator_calls,
                    approximate_counts: cp.approximate_counts,
                    compaction_ms: cp.compaction_ms,
                    error: None,
                });
                compacted.push((c, cp));
            }
            let first_row = rows.len();
            for c in &failed {
                for p in &s.probes {
                    rows.push(ScoreRow {
                        scenario: s.id.clone(),
                        probe: p.id.clone(),
                        condition: c.as_str().to_owned(),
                        dimension: enum_name(&p.dimension),
                        score: 0,
                        answer: String::new(),
                        class: enum_name(&s.class),
                        length: enum_name(&s.length),
                        rep,
                        judge: cfg.scorers.judge.then_some(0),
                        judge_raw: None,
                        stop_reason: "compaction_failed".to_owned(),
                        completion_tokens: 0,
                        thinking_tokens: 0,
                        retried: false,
                    });
                }
                done += 1;
                progress(Progress { done, total, label: format!("{} · {} · rep {} (compaction failed)", s.id, c, rep + 1) });
            }
            for (c, cp) in &compacted {
                for p in &s.probes {
                    let (g, retried) = ask(model, &cp.messages, p, cfg, seed)?;
                    let answer = g.content.trim().to_owned();
                    if answer.is_empty() && (g.usage.thinking_tokens > 0 || g.stop_reason == StopReason::MaxTokens) {
                        empty_by_budget += 1;
                    }
                    rows.push(ScoreRow {
                        scenario: s.id.clone(),
                        probe: p.id.clone(),
                        condition: c.as_str().to_owned(),
                        dimension: enum_name(&p.dimension),
                        score: crate::keyword::score(&answer, &p.required, &p.partial),
                        answer,
                        class: enum_name(&s.class),
                        length: enum_name(&s.length),
                        rep,
                        judge: None,
                        judge_raw: None,
                        stop_reason: stop_name(g.stop_reason),
                        completion_tokens: g.usage.completion_tokens,
                        thinking_tokens: g.usage.thinking_tokens,
                        retried,
                    });
                }
                done += 1;
                progress(Progress { done, total, label: format!("{} · {} · rep {}", s.id, c, rep + 1) });
            }
            // Controls (once per probe, first repetition) and judge grades, probe by probe.
            for p in &s.probes {
                if rep == 0 {
                    let other = other_entity(si, p);
                    for ctl in Control::ALL {
                        let answer = ctl.answer(p, &other);
                        let judge_score = if cfg.scorers.judge { grade(judge_model, p, &answer)?.score } else { None };
                        controls.push(ControlRow {
                            scenario: s.id.clone(),
                            probe: p.id.clone(),
                            control: ctl.as_str().to_owned(),
                            keyword: crate::keyword::score(&answer, &p.required, &p.partial),
                            answer,
                            judge: judge_score,
                        });
                    }
                }
                if cfg.scorers.judge {
                    for r in rows[first_row..].iter_mut().filter(|r| r.probe == p.id && r.stop_reason != "compaction_failed") {
                        let v = grade(judge_model, p, &r.answer)?;
                        r.judge = v.score;
                        r.judge_raw = Some(v.raw);
                    }
                }
            }
        }
    }
    let mut speed = Speed::default();
    let mut all = CallStats::default();
    let mut probe = CallStats::default();
    let mut add = |stats: std::collections::HashMap<Purpose, CallStats>| {
        for (k, v) in stats {
            let name = enum_name(&k);
            speed.calls.entry(name).or_default().merge(&v);
            all.merge(&v);
            if k == Purpose::Probe {
                probe.merge(&v);
            }
        }
    };
    add(model.stats());
    if !std::ptr::eq(judge_model, model) {
        add(judge_model.stats());
    }
    if model.reports_kv {
        speed.probe_prefill_ratio = probe.prefill_ratio();
        speed.total_prefill_ratio = all.prefill_ratio();
    }
    let keyword = results::aggregate(&rows, |r| Some(r.score));
    let judge_agg = cfg.scorers.judge.then(|| results::aggregate(&rows, |r| r.judge));
    let conditions = cfg
        .conditions
        .iter()
        .map(|c| {
            let name = c.as_str();
            let rs: Vec<&ScoreRow> = rows.iter().filter(|r| r.condition == name).collect();
            let failures = comps.iter().filter(|r| r.condition == name && r.error.is_some()).count();
            let cs: Vec<&CompactionRow> = comps.iter().filter(|r| r.condition == name && r.error.is_none()).collect();
            let kw: Vec<(u32, f64)> = rs.iter().map(|r| (r.rep, f64::from(r.score))).collect();
            let j: Vec<(u32, f64)> = rs.iter().filter_map(|r| r.judge.map(|s| (r.rep, f64::from(s)))).collect();
            let n = cs.len().max(1) as f64;
            ConditionSummary {
                condition: name.to_owned(),
                keyword: results::stat(&kw).unwrap_or(results::Stat { mean: 0.0, sd: 0.0, min: 0.0, n: 0 }),
                judge: if cfg.scorers.judge { results::stat(&j) } else { None },
                tokens_before: cs.iter().map(|r| r.tokens_before as f64).sum::<f64>() / n,
                tokens_after: cs.iter().map(|r| r.tokens_after as f64).sum::<f64>() / n,
                fallbacks: cs.iter().filter(|r| r.fallback.is_some()).count(),
                empty_answers: rs.iter().filter(|r| r.answer.is_empty() && r.stop_reason != "compaction_failed").count(),
                compaction_failures: failures,
            }
        })
        .collect();
    let info = model.info();
    Ok(ModelResult {
        model: info.name.clone(),
        overall: keyword.overall,
        by_class: keyword.by_class,
        by_dimension: keyword.by_dimension,
        worst_cells: results::cells(&rows),
        scores: rows,
        conditions,
        judge: judge_agg,
        control_brackets: results::brackets(&controls, cfg.scorers.judge),
        controls,
        compactions: comps,
        speed,
        settings: Settings {
            backend: info.backend.clone(),
            n_ctx: info.context_size,
            budget_context: cfg.budget.context,
            budget_reserve: cfg.budget.reserve,
            budget_recent: cfg.budget.recent,
            temperature: cfg.temperature,
            answer_max_tokens: cfg.answer_max_tokens,
            thinking: "off".to_owned(),
            probe_prompt: PROBE_PROMPT.to_owned(),
            reps: cfg.reps,
            scorers: cfg.scorers.names(),
            judge_model: cfg.scorers.judge.then(|| judge_model.info().name.clone()),
            evaluator_max_tokens: cfg.evaluator_max_tokens,
            scenarios_dir: cfg.scenarios_dir.clone(),
            scenarios: scenarios.iter().map(|s| s.scenario.id.clone()).collect(),
        },
        empty_by_budget,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The serde name of a unit enum variant.
pub fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn scorers_parse() {
        assert_eq!(Scorers::parse("keyword").unwrap(), Scorers { keyword: true, judge: false });
        assert_eq!(Scorers::parse("all").unwrap(), Scorers { keyword: true, judge: true });
        assert!(Scorers::parse("vibes").unwrap_err().to_string().contains("vibes"));
        assert!(Scorers::parse("").is_err());
    }
}
