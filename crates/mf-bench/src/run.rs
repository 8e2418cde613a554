//! The suite: for every repetition and scenario, compact under every
//! condition, ask every probe over each compacted context, then grade.
//!
//! Call order is chosen for the KV cache: `full`'s probes first, then v2.1's
//! compaction (its first evaluation is the full context, still in the
//! cache), then the other compactions (their summary passes would otherwise
//! evict a context between its probes), then each condition's probes back to
//! back — they share the compacted context as a prompt prefix, so only the
//! question is decoded after the first — and finally the judge, probe by
//! probe, so the rubric, question and reference are decoded once per probe.
//!
//! [`run_suite_parallel`] runs scenarios side by side, one per [`Worker`]
//! (each its own model session and KV cache); a scenario's calls do not
//! depend on which worker runs it.

use std::time::Instant;

pub use crate::config::{PROBE_PROMPT, RunConfig, Scorers, enum_name};
use crate::error::{BenchError, Result};
use crate::load::LoadedScenario;
use crate::model::{CallStats, Model, Purpose};
use crate::results::{self, CompactionRow, ControlRow, ModelResult, ScoreRow, Settings, Speed};
use crate::scenario::{Item, ScenarioOut, run_scenario};

/// A progress step: one scenario × condition × repetition done.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Steps done.
    pub done: u64,
    /// Steps in all.
    pub total: u64,
    /// What was just done.
    pub label: String,
    /// Work done, in steps weighted by their scenario's size (characters of
    /// its messages): a long scenario's step takes longer, so an ETA from
    /// these is steadier than one from the steps.
    pub work_done: u64,
    /// Work in all, in the same unit.
    pub work_total: u64,
}

/// A model and (optionally) its own judge: one worker of a parallel run.
/// Each worker owns its llama.cpp session (its own KV cache), so workers run
/// scenarios side by side without sharing any state.
#[derive(Debug)]
pub struct Worker {
    /// The model under test.
    pub model: Model,
    /// The judge, when it is another model than the one under test.
    pub judge: Option<Model>,
}

/// The weight of one step of `item` (see [`Progress::work_done`]).
fn weight(scenarios: &[LoadedScenario], item: Item) -> u64 {
    scenarios[item.scenario].scenario.messages.iter().map(|m| m.content.len() as u64).sum::<u64>().max(1)
}

fn work_total(scenarios: &[LoadedScenario], cfg: &RunConfig) -> u64 {
    items(scenarios, cfg.reps).into_iter().map(|i| weight(scenarios, i)).sum::<u64>() * cfg.conditions.len() as u64
}

/// Work items, the longest scenarios first so that parallel workers finish together.
fn items(scenarios: &[LoadedScenario], reps: u32) -> Vec<Item> {
    let mut v: Vec<Item> = (0..reps).flat_map(|rep| (0..scenarios.len()).map(move |scenario| Item { rep, scenario })).collect();
    let size = |i: &Item| scenarios[i.scenario].scenario.messages.iter().map(|m| m.content.len()).sum::<usize>();
    v.sort_by(|a, b| size(b).cmp(&size(a)).then(a.rep.cmp(&b.rep)).then(a.scenario.cmp(&b.scenario)));
    v
}

fn check(cfg: &RunConfig) -> Result<()> {
    if cfg.reps == 0 {
        return Err(BenchError::NothingChosen("repetition"));
    }
    cfg.budget.validate()?;
    cfg.plan.validate()?;
    Ok(())
}

/// Runs the suite on `model`, grading with `judge` (the model itself when `None`).
///
/// Cancelling `model.cancel_token()` (or the judge's) stops the call in
/// progress at its next token (or prefill batch) and ends the run with
/// [`BenchError::Cancelled`], whatever that call then reported: a cancelled
/// run gives no partial numbers.
///
/// # Errors
/// Model and planner errors; bad settings; [`BenchError::Cancelled`].
pub fn run_suite(
    model: &Model,
    judge: Option<&Model>,
    scenarios: &[LoadedScenario],
    cfg: &RunConfig,
    progress: &mut dyn FnMut(Progress),
) -> Result<ModelResult> {
    check(cfg)?;
    let judge_model = judge.unwrap_or(model);
    let t0 = Instant::now();
    model.reset_stats();
    model.set_branched(cfg.branched);
    if !std::ptr::eq(judge_model, model) {
        judge_model.reset_stats();
    }
    let total = u64::from(cfg.reps) * scenarios.len() as u64 * cfg.conditions.len() as u64;
    let mut done = 0;
    let (mut work_done, work_total) = (0, work_total(scenarios, cfg));
    let mut outs = Vec::new();
    let cancelled = || model.is_cancelled() || judge_model.is_cancelled();
    for item in items(scenarios, cfg.reps) {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        let w = weight(scenarios, item);
        let out = run_scenario(model, judge_model, scenarios, item, cfg, &mut |label| {
            done += 1;
            work_done += w;
            progress(Progress { done, total, label, work_done, work_total });
        })
        .map_err(|e| if cancelled() { BenchError::Cancelled } else { e })?;
        outs.push((item, out));
    }
    // A call cut short by the cancel may have been absorbed (a summary's
    // fallback): the run is still cancelled.
    if cancelled() {
        return Err(BenchError::Cancelled);
    }
    let mut stats = vec![model.stats()];
    if !std::ptr::eq(judge_model, model) {
        stats.push(judge_model.stats());
    }
    Ok(assemble(model, judge_model, scenarios, cfg, outs, stats, 1, t0))
}

/// Runs the suite with one scenario at a time per worker, the workers side
/// by side (each on its own thread with its own model session). Results are
/// in the same order, and hold the same answers, as [`run_suite`]'s: a
/// scenario's calls depend only on the scenario, the settings and the seed.
///
/// Cancelling any worker's token (share one with [`Model::with_cancel`])
/// ends the run with [`BenchError::Cancelled`], as in [`run_suite`].
///
/// # Errors
/// The first worker's error (the others stop after their current scenario); no workers;
/// [`BenchError::Cancelled`].
pub fn run_suite_parallel(workers: Vec<Worker>, scenarios: &[LoadedScenario], cfg: &RunConfig, progress: &mut dyn FnMut(Progress)) -> Result<ModelResult> {
    check(cfg)?;
    let n_workers = workers.len();
    if n_workers == 0 {
        return Err(BenchError::NoWorkers);
    }
    let t0 = Instant::now();
    let work = items(scenarios, cfg.reps);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let total = u64::from(cfg.reps) * scenarios.len() as u64 * cfg.conditions.len() as u64;
    enum Msg {
        Step(String, u64),
        Done(usize, Box<Result<ScenarioOut>>),
    }
    let (tx, rx) = std::sync::mpsc::channel::<Msg>();
    let mut outs: Vec<(usize, Result<ScenarioOut>)> = Vec::new();
    let mut finished: Vec<Worker> = Vec::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|w| {
                let tx = tx.clone();
                let (work, next, stop) = (&work, &next, &stop);
                scope.spawn(move || {
                    w.model.reset_stats();
                    w.model.set_branched(cfg.branched);
                    if let Some(j) = &w.judge {
                        j.reset_stats();
                    }
                    let judge = w.judge.as_ref().unwrap_or(&w.model);
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) && !w.model.is_cancelled() && !judge.is_cancelled() {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(&item) = work.get(i) else { break };
                        let weight = weight(scenarios, item);
                        let r = run_scenario(&w.model, judge, scenarios, item, cfg, &mut |label| {
                            let _ = tx.send(Msg::Step(label, weight));
                        });
                        if r.is_err() {
                            stop.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                        let _ = tx.send(Msg::Done(i, Box::new(r)));
                    }
                    w
                })
            })
            .collect();
        drop(tx);
        let mut done = 0;
        let (mut work_done, work_total) = (0, work_total(scenarios, cfg));
        for m in rx {
            match m {
                Msg::Step(label, w) => {
                    done += 1;
                    work_done += w;
                    progress(Progress { done, total, label, work_done, work_total });
                }
                Msg::Done(i, r) => outs.push((i, *r)),
            }
        }
        for h in handles {
            if let Ok(w) = h.join() {
                finished.push(w);
            }
        }
    });
    if finished.len() != n_workers {
        return Err(BenchError::WorkerPanicked);
    }
    if finished.iter().any(|w| w.model.is_cancelled() || w.judge.as_ref().is_some_and(Model::is_cancelled)) {
        return Err(BenchError::Cancelled);
    }
    outs.sort_by_key(|(i, _)| *i);
    let mut ok = Vec::new();
    for (i, r) in outs {
        ok.push((work[i], r?));
    }
    let mut stats = Vec::new();
    for w in &finished {
        stats.push(w.model.stats());
        if let Some(j) = &w.judge {
            stats.push(j.stats());
        }
    }
    let w0 = &finished[0];
    Ok(assemble(&w0.model, w0.judge.as_ref().unwrap_or(&w0.model), scenarios, cfg, ok, stats, n_workers, t0))
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    model: &Model,
    judge_model: &Model,
    scenarios: &[LoadedScenario],
    cfg: &RunConfig,
    mut outs: Vec<(Item, ScenarioOut)>,
    stats: Vec<std::collections::HashMap<Purpose, CallStats>>,
    workers: usize,
    t0: Instant,
) -> ModelResult {
    // Scenario order (rep, then file order), whatever order the work ran in.
    outs.sort_by_key(|(it, _)| (it.rep, it.scenario));
    let mut rows: Vec<ScoreRow> = Vec::new();
    let mut comps: Vec<CompactionRow> = Vec::new();
    let mut controls: Vec<ControlRow> = Vec::new();
    let mut empty_by_budget = 0;
    let mut speed = Speed::default();
    for (_, o) in outs {
        rows.extend(o.rows);
        comps.extend(o.comps);
        controls.extend(o.controls);
        empty_by_budget += o.empty_by_budget;
        speed.answers_shared += o.answers_shared;
        speed.grades_shared += o.grades_shared;
    }
    speed.workers = workers;
    let mut all = CallStats::default();
    let mut probe = CallStats::default();
    for st in stats {
        for (k, v) in st {
            let name = enum_name(&k);
            speed.calls.entry(name).or_default().merge(&v);
            all.merge(&v);
            if k == Purpose::Probe {
                probe.merge(&v);
            }
        }
    }
    if model.reports_kv {
        speed.probe_prefill_ratio = probe.prefill_ratio();
        speed.total_prefill_ratio = all.prefill_ratio();
    }
    // Rows only the likelihood scorer filled have no answer to grade.
    let answered = results::answered(&rows);
    let keyword = results::aggregate(&answered, |r| Some(r.score));
    let judge_agg = cfg.scorers.judge.then(|| results::aggregate(&answered, |r| r.judge));
    let names: Vec<&str> = cfg.conditions.iter().map(|c| c.as_str()).collect();
    let conditions = results::condition_summaries(&names, &answered, &comps, cfg.scorers.judge);
    let likelihood = crate::results::likelihood_summary(&rows, &comps, &names);
    let info = model.info();
    ModelResult {
        model: info.name.clone(),
        overall: keyword.overall,
        by_class: keyword.by_class,
        by_dimension: keyword.by_dimension,
        worst_cells: results::cells(&answered),
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
            summary_max_tokens: Some(cfg.plan.sampling.max_tokens),
            withholding_budget: cfg.plan.withholding_budget,
            branched: Some(cfg.branched),
            delta: Some(cfg.delta.as_str().to_owned()),
            summariser: model.summariser_name().map(str::to_owned),
            scenarios_dir: cfg.scenarios_dir.clone(),
            scenarios: scenarios.iter().map(|s| s.scenario.id.clone()).collect(),
        },
        empty_by_budget,
        wall_s: t0.elapsed().as_secs_f64(),
        likelihood,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn prompt_files_are_read_without_a_trailing_newline() {
        // The results record the probe prompt: a stray newline in the file would change every answer.
        assert_eq!(PROBE_PROMPT, "Based on our conversation above, answer concisely: ");
        assert!(crate::judge::JUDGE_SYSTEM.starts_with("You grade answers.") && crate::judge::JUDGE_SYSTEM.ends_with("or is empty"));
    }

    #[test]
    fn scorers_parse() {
        assert_eq!(Scorers::parse("keyword").unwrap(), Scorers { keyword: true, judge: false, likelihood: false });
        assert_eq!(Scorers::parse("likelihood").unwrap(), Scorers::DEFAULT);
        assert!(!Scorers::DEFAULT.generates());
        assert_eq!(Scorers::parse("all").unwrap(), Scorers { keyword: true, judge: true, likelihood: true });
        assert!(Scorers::parse("vibes").unwrap_err().to_string().contains("vibes"));
        assert!(Scorers::parse("").is_err());
    }
}
