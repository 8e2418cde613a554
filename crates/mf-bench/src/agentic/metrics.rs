//! What a run measured, how an answer is scored, where each expected fact
//! still is in the final context, the per-strategy aggregates and the tables.

use mf_forgetting::Message;
use serde::{Deserialize, Serialize};

use super::scoring::{RunContexts, RunLikelihood};
use super::world::World;
use crate::error::{BenchError, Result};

/// Where an expected fact is in the context the final answer was written from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retention {
    /// Every required keyword is in a message kept as it was (a tool result, a call).
    Verbatim,
    /// Only with a compaction summary's help (its text or its preserved literals).
    Summary,
    /// Not all of them are in the context any more (or were never fetched).
    Gone,
}

/// One probe on one run's final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeOutcome {
    /// Probe id.
    pub probe: String,
    /// Keyword score 0–3 of the final answer.
    pub score: u8,
    /// Whether the agent fetched the endpoint that holds the fact.
    pub fetched: bool,
    /// Wrong values the answer holds (contradicting a tool result).
    pub wrong_found: Vec<String>,
    /// Where the fact is in the final context (absent in results written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
}

/// One world under one strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticRun {
    /// World id.
    pub world: String,
    /// Strategy.
    pub strategy: String,
    /// Who picked the calls: `model` or `route` (absent: `model`, results written before routes existed).
    #[serde(default = "model_driver")]
    pub driver: String,
    /// Rounds reached.
    pub rounds: u32,
    /// Compactions the loop started (planned): `done + refused + failed`.
    pub compactions: u32,
    /// Compactions that replaced the history.
    #[serde(default)]
    pub compactions_done: u32,
    /// Compactions the no-growth guard refused (the history was kept as it was).
    #[serde(default)]
    pub compactions_refused: u32,
    /// Compactions that failed (could not restore the budget).
    #[serde(default)]
    pub compactions_failed: u32,
    /// Exit reason kind (`final_answer`, `context_exhausted`, `world_server_died`, …).
    pub exit: String,
    /// The exit in words.
    pub exit_detail: String,
    /// The final answer (`null`: none was produced).
    pub answer: Option<String>,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tool results that were errors.
    pub tool_errors: u32,
    /// Paths the loop requested from the world, in order (404s included).
    pub requests: Vec<String>,
    /// Distinct world endpoints fetched.
    pub endpoints_fetched: usize,
    /// Endpoints in the world.
    pub endpoints_total: usize,
    /// Calls on the world's route.
    #[serde(default)]
    pub route_total: usize,
    /// Route endpoints fetched (any order).
    #[serde(default)]
    pub route_fetched: usize,
    /// Per probe.
    pub probes: Vec<ProbeOutcome>,
    /// Probes whose required keywords are all in the final answer.
    pub facts_held: usize,
    /// Probes whose source endpoint was fetched.
    pub facts_fetched: usize,
    /// Probes whose fact is in the final context verbatim.
    #[serde(default)]
    pub facts_verbatim: usize,
    /// Probes whose fact is in the final context only through a summary.
    #[serde(default)]
    pub facts_in_summary: usize,
    /// Numbers (2+ digits) in the final answer that are in no tool result, question or system prompt.
    pub unsupported_numbers: Vec<String>,
    /// The final answer contradicts a tool result: it holds a wrong value, or a number no tool gave.
    pub confabulated: bool,
    /// The largest prompt sent (tokens).
    pub max_prompt_tokens: u32,
    /// The context window `C` (for peak use as a share of it).
    #[serde(default)]
    pub n_ctx: u32,
    /// Prompt tokens summed over generations (a naive resend would decode them all).
    pub prompt_tokens: u64,
    /// Of those, decoded (the rest came from the KV cache).
    pub decoded_tokens: u64,
    /// Of those, reused from the KV cache.
    #[serde(default)]
    pub reused_tokens: u64,
    /// Tokens the model generated (replies, summaries, probes, the answer).
    #[serde(default)]
    pub generated_tokens: u64,
    /// Wall time, ms.
    pub wall_ms: u64,
    /// Set when the run did not end with an exit of the loop: the harness or
    /// the loop failed (its `exit` is then [`FAILED`], and its figures are
    /// not counted in the per-strategy aggregates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RunFailure>,
    /// The likelihood scorer's figures (`agentic --scorers likelihood`):
    /// each probe's reference scored on this run's final context, the
    /// world's ceiling and its floor ([`super::scoring`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likelihood: Option<RunLikelihood>,
    /// The contexts the scorer reads, kept in memory between the run and
    /// the scoring of its world (not written to the results).
    #[serde(skip)]
    pub contexts: Option<RunContexts>,
    /// The run's id in the session store of `agentic --store` (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<i64>,
}

/// The `exit` of a run that failed.
pub const FAILED: &str = "failed";

/// Why a run failed: the error's kind and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailure {
    /// What failed: `model` (the model backend), `loop` (the investigation
    /// loop, not its model), `setting` (a setting the run could not run
    /// with: the world's port taken, no route to replay), `io`, `harness`,
    /// `results`, `cancelled`.
    pub kind: String,
    /// The error, as a user reads it.
    pub message: String,
}

impl RunFailure {
    /// The failure of a run that ended on `e`.
    #[must_use]
    pub fn of(e: &BenchError) -> RunFailure {
        RunFailure { kind: Self::kind(e).to_owned(), message: e.to_string() }
    }

    /// The kind of `e` (a model's error is the kind of what it wraps).
    fn kind(e: &BenchError) -> &'static str {
        match e {
            BenchError::Model { source, .. } => Self::kind(source),
            BenchError::Loop(mf_agent::AgentError::Inference(_)) | BenchError::Inference(_) => "model",
            BenchError::Loop(_) | BenchError::Forgetting(_) => "loop",
            BenchError::Replay { .. } => "store",
            BenchError::InvalidSetting { .. }
            | BenchError::NothingChosen(_)
            | BenchError::RepsOutOfRange { .. }
            | BenchError::UnknownCondition { .. }
            | BenchError::UnknownScorer(_)
            | BenchError::ModelFileMissing(_)
            | BenchError::UnknownScenarios(_)
            | BenchError::InvalidScenario { .. }
            | BenchError::NoScenarios(_)
            | BenchError::Incomparable(_) => "setting",
            BenchError::ReadDir { .. } | BenchError::ReadFile { .. } | BenchError::WriteFile { .. } => "io",
            BenchError::NoWorkers | BenchError::WorkerPanicked | BenchError::Thread(_) | BenchError::Runtime(_) => "harness",
            BenchError::Json(_) | BenchError::Schema(_) => "results",
            BenchError::Cancelled => "cancelled",
        }
    }
}

fn model_driver() -> String {
    "model".to_owned()
}

impl AgenticRun {
    /// The record of a run of `world` under `strategy` that failed: its
    /// figures are zero, its `exit` is [`FAILED`], `failure` says why.
    #[must_use]
    pub fn failed(world: &World, strategy: &str, driver: &str, failure: RunFailure, wall_ms: u64) -> AgenticRun {
        AgenticRun {
            world: world.id.clone(),
            strategy: strategy.to_owned(),
            driver: driver.to_owned(),
            rounds: 0,
            compactions: 0,
            compactions_done: 0,
            compactions_refused: 0,
            compactions_failed: 0,
            exit: FAILED.to_owned(),
            exit_detail: format!("{}: {}", failure.kind, failure.message),
            answer: None,
            tool_calls: 0,
            tool_errors: 0,
            requests: Vec::new(),
            endpoints_fetched: 0,
            endpoints_total: world.endpoints.len(),
            route_total: world.route.len(),
            route_fetched: 0,
            probes: Vec::new(),
            facts_held: 0,
            facts_fetched: 0,
            facts_verbatim: 0,
            facts_in_summary: 0,
            unsupported_numbers: Vec::new(),
            confabulated: false,
            max_prompt_tokens: 0,
            n_ctx: 0,
            prompt_tokens: 0,
            decoded_tokens: 0,
            reused_tokens: 0,
            generated_tokens: 0,
            wall_ms,
            failure: Some(failure),
            likelihood: None,
            contexts: None,
            session: None,
        }
    }

    /// Peak prompt as a share of `C` (0 when `C` is unknown).
    pub fn peak_use(&self) -> f64 {
        if self.n_ctx == 0 { 0.0 } else { f64::from(self.max_prompt_tokens) / f64::from(self.n_ctx) }
    }
}

/// Per-strategy aggregates (one driver).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategySummary {
    /// Strategy.
    pub strategy: String,
    /// Driver (`model` or `route`).
    #[serde(default = "model_driver")]
    pub driver: String,
    /// Runs (worlds).
    pub runs: usize,
    /// Mean rounds reached.
    pub rounds_mean: f64,
    /// Most rounds reached.
    pub rounds_max: u32,
    /// Mean compactions.
    pub compactions_mean: f64,
    /// Compactions planned / done / refused by the guard, summed.
    #[serde(default)]
    pub compactions_planned: u32,
    /// See `compactions_planned`.
    #[serde(default)]
    pub compactions_done: u32,
    /// See `compactions_planned`.
    #[serde(default)]
    pub compactions_refused: u32,
    /// Runs of a compacting strategy in which no compaction was carried out
    /// ("did not compact": such a run measures the uncompacted history, not the strategy).
    #[serde(default)]
    pub did_not_compact: usize,
    /// Runs that fetched every endpoint of the route.
    #[serde(default)]
    pub route_completed: usize,
    /// Runs that produced a final answer.
    pub answered: usize,
    /// Facts held by final answers, over all probes.
    pub facts_held: usize,
    /// Facts fetched, over all probes.
    pub facts_fetched: usize,
    /// Facts in the final context verbatim / through a summary, over all probes.
    #[serde(default)]
    pub facts_verbatim: usize,
    /// See `facts_verbatim`.
    #[serde(default)]
    pub facts_in_summary: usize,
    /// Probes in all.
    pub facts_total: usize,
    /// Mean keyword score of the final answers.
    pub score_mean: f64,
    /// Runs whose answer contradicts a tool result.
    pub confabulated: usize,
    /// Highest peak prompt over the runs, as a share of `C`.
    #[serde(default)]
    pub peak_use_max: f64,
    /// Tokens decoded and reused, summed.
    #[serde(default)]
    pub decoded_tokens: u64,
    /// See `decoded_tokens`.
    #[serde(default)]
    pub reused_tokens: u64,
    /// Wall time, summed, seconds.
    #[serde(default)]
    pub wall_s: f64,
    /// Exit kind → runs.
    pub exits: std::collections::BTreeMap<String, usize>,
    /// Runs that failed (not counted in `runs` nor in any figure above).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: usize,
}

/// serde's `skip_serializing_if` takes the field by reference.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Settings recorded with the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticSettings {
    /// Backend.
    pub backend: String,
    /// Who picked the calls: `model` or `route` (absent: `model`).
    #[serde(default = "model_driver")]
    pub driver: String,
    /// Context window `C`.
    pub n_ctx: u32,
    /// Generation reserve `G`.
    pub reserve: u32,
    /// Trigger ratio.
    pub ratio: f64,
    /// The threshold `ratio · (C − G)`.
    pub threshold: u32,
    /// Result cut (characters).
    pub max_result_chars: usize,
    /// Summary limit (tokens).
    pub summary_max_tokens: u32,
    /// Round bound for every strategy (`cap5`: 5).
    pub max_rounds: u32,
    /// Sampling of replies.
    pub sampling: String,
    /// Whether tool calls were held to the tools' schemas by a lazy grammar
    /// (absent in results written before it existed).
    #[serde(default)]
    pub tool_grammar: bool,
    /// Worlds run.
    pub worlds: Vec<String>,
    /// World directory.
    pub worlds_dir: String,
    /// The scoring session's window when the likelihood scorer ran (it
    /// holds the uncompacted ceiling); absent when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_ctx: Option<u32>,
}

/// The results of `bench-forgetting agentic` for one model and one driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticResult {
    /// Model name.
    pub model: String,
    /// Per strategy.
    pub summary: Vec<StrategySummary>,
    /// Every run.
    pub runs: Vec<AgenticRun>,
    /// Settings.
    pub settings: AgenticSettings,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Retention and choice per strategy and world by the likelihood scorer
    /// ([`super::scoring::likelihood_summary`]); absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub likelihood: Option<crate::likelihood::LikelihoodSummary>,
}

/// The schema of `bench-forgetting agentic --json` (an array of [`AgenticResult`]).
pub const AGENTIC_SCHEMA: &str = include_str!("../../schema/agentic.schema.json");

/// Validates an agentic results document.
///
/// # Errors
/// [`crate::BenchError::Schema`] with the path of the first mismatch.
pub fn validate_agentic(doc: &serde_json::Value) -> Result<()> {
    let schema: serde_json::Value = serde_json::from_str(AGENTIC_SCHEMA)?;
    crate::schema::validate(&schema, doc)
}

/// Numbers of 2+ digits in a text (separators removed: `6,404` → `6404`).
pub fn numbers(text: &str) -> Vec<String> {
    let norm = crate::keyword::normalise(text);
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in norm.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            cur.push(c);
        } else {
            if cur.len() >= 2 && !out.contains(&cur) {
                out.push(cur.clone());
            }
            cur.clear();
        }
    }
    out
}

/// Scores a final answer against the world, given the tool results the agent saw.
pub fn judge_answer(world: &World, answer: Option<&str>, fetched: &[String], seen_text: &str) -> (Vec<ProbeOutcome>, Vec<String>) {
    let a = answer.unwrap_or("");
    let norm = crate::keyword::normalise(a);
    let probes = world
        .probes
        .iter()
        .map(|p| {
            let score = crate::keyword::score(a, &p.required, &p.partial);
            let wrong_found = if score == 3 {
                Vec::new()
            } else {
                p.wrong.iter().filter(|k| crate::keyword::group_matches(&norm, k)).filter_map(|k| k.variants().first().map(|s| (*s).to_owned())).collect()
            };
            ProbeOutcome { probe: p.id.clone(), score, fetched: fetched.contains(&p.source), wrong_found, retention: None }
        })
        .collect();
    let seen = numbers(seen_text);
    let unsupported = numbers(a).into_iter().filter(|n| !seen.contains(n)).collect();
    (probes, unsupported)
}

/// Where each probe's fact is in `context` (the messages the final answer was
/// written from): every required keyword in messages that are not summaries
/// → verbatim; only with the summaries' text too → summary; else gone.
///
/// A caveat that the tables repeat: retention by keyword favours strategies
/// that keep literals (a summary that keeps "84,213.50" retains the fact even
/// if it lost what the number was).
pub fn retention(world: &World, context: &[Message]) -> Vec<Retention> {
    let text = |summary: bool| {
        let mut s = String::new();
        for m in context.iter().filter(|m| summary || !m.summary) {
            s.push_str(&m.content);
            for c in &m.tool_calls {
                s.push('\n');
                s.push_str(&c.arguments.to_string());
            }
            s.push('\n');
        }
        crate::keyword::normalise(&s)
    };
    let (plain, all) = (text(false), text(true));
    world
        .probes
        .iter()
        .map(|p| {
            if p.required.iter().all(|k| crate::keyword::group_matches(&plain, k)) {
                Retention::Verbatim
            } else if p.required.iter().all(|k| crate::keyword::group_matches(&all, k)) {
                Retention::Summary
            } else {
                Retention::Gone
            }
        })
        .collect()
}

/// Per-strategy aggregates of one driver's runs, in `strategies` order.
pub fn summarise(runs: &[AgenticRun], strategies: &[super::AgenticStrategy]) -> Vec<StrategySummary> {
    strategies
        .iter()
        // A strategy not reached (a run stopped early) gets no row.
        .filter(|s| runs.iter().any(|r| r.strategy == s.as_str()))
        .map(|s| {
            let failed = runs.iter().filter(|r| r.strategy == s.as_str() && r.failure.is_some()).count();
            let rs: Vec<&AgenticRun> = runs.iter().filter(|r| r.strategy == s.as_str() && r.failure.is_none()).collect();
            let n = rs.len().max(1) as f64;
            let scores: Vec<f64> = rs.iter().flat_map(|r| r.probes.iter().map(|p| f64::from(p.score))).collect();
            let mut exits = std::collections::BTreeMap::new();
            for r in &rs {
                *exits.entry(r.exit.clone()).or_insert(0) += 1;
            }
            StrategySummary {
                strategy: s.as_str().to_owned(),
                driver: runs.iter().find(|r| r.strategy == s.as_str()).map_or_else(model_driver, |r| r.driver.clone()),
                runs: rs.len(),
                rounds_mean: rs.iter().map(|r| f64::from(r.rounds)).sum::<f64>() / n,
                rounds_max: rs.iter().map(|r| r.rounds).max().unwrap_or(0),
                compactions_mean: rs.iter().map(|r| f64::from(r.compactions)).sum::<f64>() / n,
                compactions_planned: rs.iter().map(|r| r.compactions).sum(),
                compactions_done: rs.iter().map(|r| r.compactions_done).sum(),
                compactions_refused: rs.iter().map(|r| r.compactions_refused).sum(),
                did_not_compact: if s.compacts() { rs.iter().filter(|r| r.compactions_done == 0).count() } else { 0 },
                route_completed: rs.iter().filter(|r| r.route_total > 0 && r.route_fetched == r.route_total).count(),
                answered: rs.iter().filter(|r| r.answer.as_deref().is_some_and(|a| !a.trim().is_empty())).count(),
                facts_held: rs.iter().map(|r| r.facts_held).sum(),
                facts_fetched: rs.iter().map(|r| r.facts_fetched).sum(),
                facts_verbatim: rs.iter().map(|r| r.facts_verbatim).sum(),
                facts_in_summary: rs.iter().map(|r| r.facts_in_summary).sum(),
                facts_total: rs.iter().map(|r| r.probes.len()).sum(),
                score_mean: if scores.is_empty() { 0.0 } else { scores.iter().sum::<f64>() / scores.len() as f64 },
                confabulated: rs.iter().filter(|r| r.confabulated).count(),
                peak_use_max: rs.iter().map(|r| r.peak_use()).fold(0.0, f64::max),
                decoded_tokens: rs.iter().map(|r| r.decoded_tokens).sum(),
                reused_tokens: rs.iter().map(|r| r.reused_tokens).sum(),
                wall_s: rs.iter().map(|r| r.wall_ms as f64 / 1000.0).sum(),
                exits,
                failed,
            }
        })
        .collect()
}

fn cell(s: &str, max: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one.chars().take(max).collect();
    // A model's text is not a link (a cut URL would point anywhere): `\/`
    // renders as `/` and is no autolink.
    let cut = cut.replace('|', "\\|").replace("://", ":\\/\\/");
    if one.chars().count() > max { format!("{cut}…") } else { cut }
}

/// Markdown tables of agentic results: one section per model and driver.
pub fn markdown(results: &[AgenticResult]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for r in results {
        let s = &r.settings;
        let driver = super::Driver::parse(&s.driver).map_or(s.driver.clone(), |d| d.label().to_owned());
        let _ = writeln!(out, "### {} — live agentic worlds, {driver}\n", r.model);
        let _ = writeln!(
            out,
            "{} world(s); backend {}, C={} G={} threshold {} (ratio {}); tool results cut to {} chars; summaries ≤ {} tokens; replies {}{}; every strategy bounded at {} rounds (cap5: 5); wall {:.0} s.\n",
            s.worlds.len(),
            s.backend,
            s.n_ctx,
            s.reserve,
            s.threshold,
            s.ratio,
            s.max_result_chars,
            s.summary_max_tokens,
            s.sampling,
            if s.tool_grammar { ", tool calls held to the schemas by a grammar" } else { ", no tool-call grammar" },
            s.max_rounds,
            r.wall_s
        );
        let _ = writeln!(
            out,
            "| driver | strategy | runs | rounds (mean / max) | route done | compactions planned / done / refused | peak context | facts fetched | facts in final context (verbatim + summary) | facts in answer | answer keyword (0–3) | confabulated | tokens decoded / reused | wall s | exits |"
        );
        let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
        // Files written before empty rows were left out can hold rows of strategies that never ran.
        for x in r.summary.iter().filter(|x| x.runs > 0 || x.failed > 0) {
            let mut exits: Vec<String> = x.exits.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
            if x.failed > 0 {
                exits.push(format!("**{FAILED} ×{}** (not counted in the other columns)", x.failed));
            }
            let strategy = if x.did_not_compact > 0 && x.did_not_compact == x.runs {
                format!("{} (did not compact)", x.strategy)
            } else if x.did_not_compact > 0 {
                format!("{} ({} of {} runs did not compact)", x.strategy, x.did_not_compact, x.runs)
            } else {
                x.strategy.clone()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} / {} | {}/{} | {} / {} / {} | {:.0} % | {}/{} | {} + {} /{} | {}/{} | {:.2} | {} | {} / {} | {:.0} | {} |",
                x.driver,
                strategy,
                x.runs,
                x.rounds_mean,
                x.rounds_max,
                x.route_completed,
                x.runs,
                x.compactions_planned,
                x.compactions_done,
                x.compactions_refused,
                x.peak_use_max * 100.0,
                x.facts_fetched,
                x.facts_total,
                x.facts_verbatim,
                x.facts_in_summary,
                x.facts_total,
                x.facts_held,
                x.facts_total,
                x.score_mean,
                x.confabulated,
                x.decoded_tokens,
                x.reused_tokens,
                x.wall_s,
                exits.join(", ")
            );
        }
        if let Some(l) = &r.likelihood {
            let _ = writeln!(
                out,
                "\nBy likelihood (scoring window {} tokens): each probe's reference scored after each run's final context; **full** is the world's uncompacted history (that of the run which fetched most of it), **baseline** its pinned and recent zones only. Below, \"class\" is the world and \"dimension\" the probe's kind.\n",
                s.score_ctx.map_or("–".to_owned(), |c| c.to_string())
            );
            crate::likelihood::markdown(&mut out, l);
        }
        let _ = writeln!(
            out,
            "\nRetention (facts in the final context) is by keyword: it favours strategies that keep literals. A strategy marked \"did not compact\" ran uncompacted there and is not ranked as that strategy.\n"
        );
        let _ = writeln!(
            out,
            "| world | driver | strategy | rounds | route | compactions p / d / r | peak | exit | facts fetched | retained v / s / gone | facts in answer | confabulation | answer |"
        );
        let _ = writeln!(out, "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |");
        for x in &r.runs {
            if let Some(f) = &x.failure {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | – | –/{} | – | – | **{FAILED}** ({}) | – | – | – | – | {} |",
                    x.world,
                    x.driver,
                    x.strategy,
                    x.route_total,
                    f.kind,
                    cell(&f.message, 120)
                );
                continue;
            }
            let mut conf: Vec<String> = x.probes.iter().flat_map(|p| p.wrong_found.iter().map(|w| format!("wrong: {w}"))).collect();
            conf.extend(x.unsupported_numbers.iter().map(|n| format!("unsupported: {n}")));
            let gone = x.probes.len().saturating_sub(x.facts_verbatim + x.facts_in_summary);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {}/{} | {} / {} / {} | {:.0} % | {} | {}/{} | {} / {} / {} | {}/{} | {} | {} |",
                x.world,
                x.driver,
                x.strategy,
                x.rounds,
                x.route_fetched,
                x.route_total,
                x.compactions,
                x.compactions_done,
                x.compactions_refused,
                x.peak_use() * 100.0,
                x.exit,
                x.facts_fetched,
                x.probes.len(),
                x.facts_verbatim,
                x.facts_in_summary,
                gone,
                x.facts_held,
                x.probes.len(),
                if conf.is_empty() { "–".to_owned() } else { cell(&conf.join(", "), 60) },
                x.answer.as_deref().map_or("–".to_owned(), |a| cell(a, 90))
            );
        }
        out.push('\n');
    }
    out
}
