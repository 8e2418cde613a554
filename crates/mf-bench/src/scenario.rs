//! One scenario in one repetition: its compactions under every condition,
//! each condition's probes over its compacted context, then the controls
//! and the judge's grades (see [`crate::run`] for the call order and why).
//!
//! The probes of one context share it as a prompt prefix. With
//! [`RunConfig::branched`] they are asked in one branched call
//! ([`Model::generate_branches`]): the context is decoded once and the
//! answers are generated side by side; otherwise one after the other, each
//! reusing the cached context.

use mf_forgetting::Message;
use mf_forgetting::scenario::Probe;
use mf_inference::{ChatMessage, Generation, Sampling, StopReason, Thinking};

use crate::condition::{Compacted, Condition, compact};
use crate::config::{PROBE_PROMPT, RunConfig, enum_name};
use crate::error::{BenchError, Result};
use crate::judge::{Control, grade};
use crate::load::LoadedScenario;
use crate::model::{Model, Purpose, to_chat};
use crate::results::{COMPACTION_FAILED, CompactionRow, ControlRow, NOT_GENERATED, ScoreRow};

fn probe_messages(context: &[Message], probe: &Probe) -> Vec<ChatMessage> {
    let mut msgs: Vec<ChatMessage> = context.iter().map(to_chat).collect();
    msgs.push(ChatMessage::user(format!("{PROBE_PROMPT}{}", probe.question.trim())));
    msgs
}

fn probe_sampling(cfg: &RunConfig, seed: u32, max_tokens: u32) -> Sampling {
    Sampling { temperature: cfg.temperature, top_p: 1.0, top_k: 0, seed, max_tokens, stop: Vec::new(), thinking: Thinking::Off }
}

/// An empty answer that spent its budget (or thought it away).
fn empty_by_budget(g: &Generation) -> bool {
    g.content.trim().is_empty() && (g.usage.thinking_tokens > 0 || g.stop_reason == StopReason::MaxTokens)
}

/// Asks every probe over one context; an empty answer that spent its
/// budget (or thinking) is asked again once with thinking off and twice the
/// budget, so the harness never scores an empty answer it caused itself.
fn ask_all(model: &Model, context: &[Message], probes: &[&Probe], cfg: &RunConfig, seed: u32) -> Result<Vec<(Generation, bool)>> {
    let requests: Vec<(Vec<ChatMessage>, Sampling)> =
        probes.iter().map(|p| (probe_messages(context, p), probe_sampling(cfg, seed, cfg.answer_max_tokens))).collect();
    let first = if cfg.branched {
        model.generate_branches(Purpose::Probe, requests.clone())?
    } else {
        requests.iter().map(|(m, s)| model.generate(Purpose::Probe, m.clone(), s.clone())).collect::<Result<Vec<_>>>()?
    };
    let mut out = Vec::with_capacity(first.len());
    for (g, (msgs, _)) in first.into_iter().zip(requests) {
        if empty_by_budget(&g) {
            let g2 = model.generate(Purpose::Probe, msgs, probe_sampling(cfg, seed, cfg.answer_max_tokens.saturating_mul(2)))?;
            out.push((g2, true));
        } else {
            out.push((g, false));
        }
    }
    Ok(out)
}

fn stop_name(s: StopReason) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_else(|| format!("{s:?}"))
}

/// One unit of work: a scenario in one repetition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    pub(crate) rep: u32,
    pub(crate) scenario: usize,
}

/// What one scenario in one repetition produced.
#[derive(Debug, Default)]
pub(crate) struct ScenarioOut {
    pub(crate) rows: Vec<ScoreRow>,
    pub(crate) comps: Vec<CompactionRow>,
    pub(crate) controls: Vec<ControlRow>,
    pub(crate) empty_by_budget: usize,
    pub(crate) answers_shared: usize,
    pub(crate) grades_shared: usize,
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
    let mut asked: Vec<&Probe> = Vec::new();
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
        asked.push(p);
    }
    for (p, (g, retried)) in asked.iter().zip(ask_all(model, &cp.messages, &asked, cfg, seed)?) {
        let answer = g.content.trim().to_owned();
        if empty_by_budget(&g) {
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
            likelihood: None,
        });
    }
    Ok(())
}

/// A row of `p` under `c` with no answer (scored 0), ended by `stop_reason`.
fn unanswered(s: &mf_forgetting::Scenario, p: &Probe, c: Condition, rep: u32, stop_reason: &str) -> ScoreRow {
    ScoreRow {
        scenario: s.id.clone(),
        probe: p.id.clone(),
        condition: c.as_str().to_owned(),
        dimension: enum_name(&p.dimension),
        score: 0,
        answer: String::new(),
        class: enum_name(&s.class),
        length: enum_name(&s.length),
        rep,
        judge: None,
        judge_raw: None,
        stop_reason: stop_reason.to_owned(),
        completion_tokens: 0,
        thinking_tokens: 0,
        retried: false,
        shared_from: None,
        likelihood: None,
    }
}

/// Scores every probe of `s` by likelihood over one condition's compacted
/// context (reference and wrong answers teacher-forced after the context and
/// the question), or copies the scores of an earlier condition whose context
/// was identical. The scores go on the condition's rows, which are made here
/// when no answer was generated.
#[allow(clippy::too_many_arguments)]
fn score_condition(
    model: &Model,
    s: &mf_forgetting::Scenario,
    c: Condition,
    cp: &Compacted,
    rep: u32,
    scored_with: &mut Vec<(String, Condition)>,
    out: &mut ScenarioOut,
) -> Result<()> {
    let key = serde_json::to_string(&cp.messages.iter().map(to_chat).collect::<Vec<_>>())?;
    let same = scored_with.iter().find(|(k, _)| *k == key).map(|(_, c0)| *c0);
    if same.is_none() {
        scored_with.push((key, c));
    }
    for p in &s.probes {
        let earlier = same.and_then(|c0| out.rows.iter().find(|r| r.probe == p.id && r.condition == c0.as_str()).and_then(|r| r.likelihood.clone()));
        let lik = match earlier {
            Some(l) => l,
            None => crate::likelihood::score_probe(model, &cp.messages, p)?,
        };
        match out.rows.iter_mut().find(|r| r.probe == p.id && r.condition == c.as_str()) {
            Some(r) => r.likelihood = Some(lik),
            None => {
                out.rows.push(ScoreRow { shared_from: same.map(|c0| c0.as_str().to_owned()), likelihood: Some(lik), ..unanswered(s, p, c, rep, NOT_GENERATED) })
            }
        }
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
pub(crate) fn run_scenario(
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
    let mut scored_with: Vec<(String, Condition)> = Vec::new();
    // Call order, for the KV cache: `full`'s probes first; then v2.1's
    // compaction, whose first evaluation (the full context) then reuses that
    // context from the cache instead of decoding it again; then the other
    // compactions, then their probes. Rows are put back in condition order.
    let mut order: Vec<Condition> = Vec::new();
    order.extend(cfg.conditions.iter().copied().filter(|c| *c == Condition::Full));
    order.extend(cfg.conditions.iter().copied().filter(|c| *c == Condition::V21));
    order.extend(cfg.conditions.iter().copied().filter(|c| *c != Condition::Full && *c != Condition::V21));
    for &c in &order {
        let cp = match compact(model, c, &s.messages, &cfg.budget, &cfg.plan, cfg.evaluator_max_tokens, cfg.delta) {
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
                    deltas: std::collections::BTreeMap::new(),
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
            deltas: cp.deltas.clone(),
        });
        if c == Condition::Full {
            if cfg.scorers.generates() {
                ask_condition(model, s, c, &cp, rep, seed, cfg, &mut first_with, &mut out)?;
            }
            if cfg.scorers.likelihood {
                score_condition(model, s, c, &cp, rep, &mut scored_with, &mut out)?;
            }
            step(format!("{} · {} · rep {}", s.id, c, rep + 1));
        } else {
            compacted.push((c, cp));
        }
    }
    for c in &failed {
        for p in &s.probes {
            out.rows.push(ScoreRow { judge: cfg.scorers.judge.then_some(0), ..unanswered(s, p, *c, rep, COMPACTION_FAILED) });
        }
        step(format!("{} · {} · rep {} (compaction failed)", s.id, c, rep + 1));
    }
    compacted.sort_by_key(|(c, _)| cfg.conditions.iter().position(|x| x == c));
    for (c, cp) in &compacted {
        if cfg.scorers.generates() {
            ask_condition(model, s, *c, cp, rep, seed, cfg, &mut first_with, &mut out)?;
        }
        if cfg.scorers.likelihood {
            score_condition(model, s, *c, cp, rep, &mut scored_with, &mut out)?;
        }
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
            for r in out.rows.iter_mut().filter(|r| r.probe == p.id && r.was_generated()) {
                let v = grade_once(&r.answer, &mut out.grades_shared)?;
                r.judge = v.score;
                r.judge_raw = Some(v.raw);
            }
        }
    }
    Ok(out)
}
