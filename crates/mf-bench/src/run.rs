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

use mf_forgetting::scenario::Probe;
use mf_forgetting::{Budget, Message, PlanConfig};
use mf_inference::{ChatMessage, Generation, Sampling, StopReason, Thinking};

use crate::condition::{Compacted, Condition, compact};
use crate::error::{BenchError, Result};
use crate::judge::{Control, grade};
use crate::load::LoadedScenario;
use crate::model::{CallStats, Model, Purpose, to_chat};
use crate::results::{self, CompactionRow, ControlRow, ModelResult, ScoreRow, Settings, Speed};

/// The probe prompt (METHOD.md §6).
pub const PROBE_PROMPT: &str = include_str!("prompts/probe.txt");

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
                other => return Err(BenchError::UnknownScorer(other.to_owned())),
            }
        }
        if !out.keyword && !out.judge {
            return Err(BenchError::NothingChosen("scorer"));
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
    /// v2.1: tokens of each withholding-test answer (the app's
    /// [`mf_agent::model::PROBE_MAX_TOKENS`] by default).
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
            answer_max_tokens: 96,
            evaluator_max_tokens: mf_agent::model::PROBE_MAX_TOKENS,
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

/// One unit of work: a scenario in one repetition.
#[derive(Debug, Clone, Copy)]
struct Item {
    rep: u32,
    scenario: usize,
}

/// What one scenario in one repetition produced.
#[derive(Debug, Default)]
struct ScenarioOut {
    rows: Vec<ScoreRow>,
    comps: Vec<CompactionRow>,
    controls: Vec<ControlRow>,
    empty_by_budget: usize,
    answers_shared: usize,
    grades_shared: usize,
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

/// A required keyword of another scenario, as a wrong entity for contradiction
/// controls: never one this probe itself accepts.
fn other_entity(scenarios: &[LoadedScenario], si: usize, p: &Probe) -> String {
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
}

/// Asks every probe of `s` over one condition's compacted context, or reuses
/// the answers of an earlier condition whose context was identical.
#[allow(clippy::too_many_arguments)]
fn ask_condition(
    model: &Model,
    s: &mf_forgetting::Scenario,
    c: Condition,
    cp: &Compacted,
    rep: u32,
    seed: u32,
    cfg: &RunConfig,
    first_with: &mut Vec<(String, Condition)>,
    out: &mut ScenarioOut,
) -> Result<()> {
    let key = serde_json::to_string(&cp.messages.iter().map(to_chat).collect::<Vec<_>>())?;
    let same = first_with.iter().find(|(k, _)| *k == key).map(|(_, c0)| *c0);
    if same.is_none() {
        first_with.push((key, c));
    }
    for p in &s.probes {
        if let Some(c0) = same
            && let Some(mut r) = out.rows.iter().find(|r| r.probe == p.id && r.condition == c0.as_str()).cloned()
        {
            r.condition = c.as_str().to_owned();
            r.shared_from = Some(c0.as_str().to_owned());
            out.answers_shared += 1;
            out.rows.push(r);
            continue;
        }
        let (g, retried) = ask(model, &cp.messages, p, cfg, seed)?;
        let answer = g.content.trim().to_owned();
        if answer.is_empty() && (g.usage.thinking_tokens > 0 || g.stop_reason == StopReason::MaxTokens) {
            out.empty_by_budget += 1;
        }
        out.rows.push(ScoreRow {
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
            shared_from: None,
        });
    }
    Ok(())
}

/// Runs one scenario in one repetition: the compactions, then each
/// condition's probes back to back (see the call order below), then controls
/// and judge grades probe by probe. `step` is called after each condition (a progress label).
///
/// Work that would repeat itself is shared, never skipped: two conditions
/// whose compacted contexts are identical get the same prompt, seed and
/// sampling, so the first answer is reused for the second (and marked
/// `shared_from`); an answer the judge has already graded for this probe
/// (another condition's identical answer, or a control equal to it) keeps its
/// grade, because the judge is greedy.
fn run_scenario(
    model: &Model,
    judge_model: &Model,
    scenarios: &[LoadedScenario],
    item: Item,
    cfg: &RunConfig,
    step: &mut dyn FnMut(String),
) -> Result<ScenarioOut> {
    let Item { rep, scenario: si } = item;
    let s = &scenarios[si].scenario;
    let seed = rep.wrapping_mul(7919).wrapping_add(17);
    let mut out = ScenarioOut::default();
    let mut compacted: Vec<(Condition, Compacted)> = Vec::new();
    let mut failed: Vec<Condition> = Vec::new();
    // Identical contexts (the exact chat messages the model would see) share their answers.
    let mut first_with: Vec<(String, Condition)> = Vec::new();
    // Call order, for the KV cache: `full`'s probes first; then v2.1's
    // compaction, whose first evaluation (the full context) then reuses that
    // context from the cache instead of decoding it again; then the other
    // compactions, then their probes. Rows are put back in condition order.
    let mut order: Vec<Condition> = Vec::new();
    order.extend(cfg.conditions.iter().copied().filter(|c| *c == Condition::Full));
    order.extend(cfg.conditions.iter().copied().filter(|c| *c == Condition::V21));
    order.extend(cfg.conditions.iter().copied().filter(|c| *c != Condition::Full && *c != Condition::V21));
    for &c in &order {
        let cp = match compact(model, c, &s.messages, &cfg.budget, &cfg.plan, cfg.evaluator_max_tokens) {
            Ok(cp) => cp,
            // The strategy cannot fit the budget: the app's loop would have to stop here.
            // Recorded, and its probes score 0 (an answer was never possible).
            Err(BenchError::Forgetting(e @ mf_forgetting::ForgettingError::BudgetNotRestored { .. })) => {
                out.comps.push(CompactionRow {
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
                    kept_original: None,
                    summary_prompt: None,
                    notes: Vec::new(),
                });
                failed.push(c);
                continue;
            }
            Err(e) => return Err(e),
        };
        out.comps.push(CompactionRow {
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
            kept_original: cp.report.as_ref().and_then(|r| r.kept_original.clone()),
            summary_prompt: cp.summary_prompt.map(str::to_owned),
            notes: cp.notes.clone(),
        });
        if c == Condition::Full {
            ask_condition(model, s, c, &cp, rep, seed, cfg, &mut first_with, &mut out)?;
            step(format!("{} · {} · rep {}", s.id, c, rep + 1));
        } else {
            compacted.push((c, cp));
        }
    }
    for c in &failed {
        for p in &s.probes {
            out.rows.push(ScoreRow {
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
                shared_from: None,
            });
        }
        step(format!("{} · {} · rep {} (compaction failed)", s.id, c, rep + 1));
    }
    compacted.sort_by_key(|(c, _)| cfg.conditions.iter().position(|x| x == c));
    for (c, cp) in &compacted {
        ask_condition(model, s, *c, cp, rep, seed, cfg, &mut first_with, &mut out)?;
        step(format!("{} · {} · rep {}", s.id, c, rep + 1));
    }
    let pos = |c: &str| cfg.conditions.iter().position(|x| x.as_str() == c);
    let probe_pos = |id: &str| s.probes.iter().position(|p| p.id == id);
    out.rows.sort_by_key(|r| (pos(&r.condition), probe_pos(&r.probe)));
    out.comps.sort_by_key(|r| pos(&r.condition));
    // Controls (once per probe, first repetition) and judge grades, probe by probe.
    for p in &s.probes {
        let mut graded: Vec<(String, crate::judge::Verdict)> = Vec::new();
        let mut grade_once = |answer: &str, shared: &mut usize| -> Result<crate::judge::Verdict> {
            if let Some((_, v)) = graded.iter().find(|(a, _)| a == answer) {
                *shared += 1;
                return Ok(v.clone());
            }
            let v = grade(judge_model, p, answer)?;
            graded.push((answer.to_owned(), v.clone()));
            Ok(v)
        };
        if rep == 0 {
            let other = other_entity(scenarios, si, p);
            for ctl in Control::ALL {
                let answer = ctl.answer(p, &other);
                let judge_score = if cfg.scorers.judge { grade_once(&answer, &mut out.grades_shared)?.score } else { None };
                out.controls.push(ControlRow {
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
            for r in out.rows.iter_mut().filter(|r| r.probe == p.id && r.stop_reason != "compaction_failed") {
                let v = grade_once(&r.answer, &mut out.grades_shared)?;
                r.judge = v.score;
                r.judge_raw = Some(v.raw);
            }
        }
    }
    Ok(out)
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
    if !std::ptr::eq(judge_model, model) {
        judge_model.reset_stats();
    }
    let total = u64::from(cfg.reps) * scenarios.len() as u64 * cfg.conditions.len() as u64;
    let mut done = 0;
    let mut outs = Vec::new();
    let cancelled = || model.is_cancelled() || judge_model.is_cancelled();
    for item in items(scenarios, cfg.reps) {
        if cancelled() {
            return Err(BenchError::Cancelled);
        }
        let out = run_scenario(model, judge_model, scenarios, item, cfg, &mut |label| {
            done += 1;
            progress(Progress { done, total, label });
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
        Step(String),
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
                    if let Some(j) = &w.judge {
                        j.reset_stats();
                    }
                    let judge = w.judge.as_ref().unwrap_or(&w.model);
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) && !w.model.is_cancelled() && !judge.is_cancelled() {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(&item) = work.get(i) else { break };
                        let r = run_scenario(&w.model, judge, scenarios, item, cfg, &mut |label| {
                            let _ = tx.send(Msg::Step(label));
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
        for m in rx {
            match m {
                Msg::Step(label) => {
                    done += 1;
                    progress(Progress { done, total, label });
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
    let keyword = results::aggregate(&rows, |r| Some(r.score));
    let judge_agg = cfg.scorers.judge.then(|| results::aggregate(&rows, |r| r.judge));
    let names: Vec<&str> = cfg.conditions.iter().map(|c| c.as_str()).collect();
    let conditions = results::condition_summaries(&names, &rows, &comps, cfg.scorers.judge);
    let info = model.info();
    ModelResult {
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
            summary_max_tokens: Some(cfg.plan.sampling.max_tokens),
            withholding_budget: cfg.plan.withholding_budget,
            scenarios_dir: cfg.scenarios_dir.clone(),
            scenarios: scenarios.iter().map(|s| s.scenario.id.clone()).collect(),
        },
        empty_by_budget,
        wall_s: t0.elapsed().as_secs_f64(),
    }
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
    fn prompt_files_are_read_without_a_trailing_newline() {
        // The results record the probe prompt: a stray newline in the file would change every answer.
        assert_eq!(PROBE_PROMPT, "Based on our conversation above, answer concisely: ");
        assert!(crate::judge::JUDGE_SYSTEM.starts_with("You grade answers.") && crate::judge::JUDGE_SYSTEM.ends_with("or is empty"));
    }

    #[test]
    fn scorers_parse() {
        assert_eq!(Scorers::parse("keyword").unwrap(), Scorers { keyword: true, judge: false });
        assert_eq!(Scorers::parse("all").unwrap(), Scorers { keyword: true, judge: true });
        assert!(Scorers::parse("vibes").unwrap_err().to_string().contains("vibes"));
        assert!(Scorers::parse("").is_err());
    }
}
