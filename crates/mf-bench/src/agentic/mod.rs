//! Live agentic worlds: the real `mf-agent` loop against a deterministic JSON
//! API served on 127.0.0.1 by the harness, once per strategy and driver.
//!
//! How the pieces fit: a [`World`] ([`world`], `scenarios/agentic/*.json`)
//! is a question, JSON endpoints with the facts spread over many calls, the
//! route of calls that answers it, and probes on the final answer (required
//! keywords, and *wrong* keywords — values the world gives for something
//! else). [`WorldServer`] ([`server`]) serves one world at a fixed loopback
//! port (the port is part of the prompt, so it is fixed for the model's
//! behaviour to be reproducible). [`run_world`] drives [`mf_agent::Agent`]
//! with mf-tools' contained `http` tool (loopback allowed for that one
//! host:port) under one [`AgenticStrategy`] and one [`Driver`] ([`driver`]:
//! the model picks its calls, or the world's route is replayed as them), and
//! measures the run ([`metrics`]): rounds reached, compactions planned /
//! done / refused by the guard, peak context, facts fetched, where each
//! expected fact is in the final context, facts in the answer,
//! confabulation, the exit, tokens decoded vs reused, wall time.
//! [`summarise`] and [`markdown`] make the tables.

pub mod calibrate;
pub mod driver;
pub mod job;
pub mod metrics;
pub mod scoring;
pub mod server;
pub mod world;

use std::sync::Arc;
use std::time::Instant;

use mf_agent::{Agent, AgentEvent, AgentSettings, FixedApprover, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::Backend;
use serde::{Deserialize, Serialize};

pub use driver::{Driver, RouteDriven, WatchedTools};
pub use job::{AgenticJob, AgenticModel, progress_line, write_agentic};
pub use metrics::{
    AGENTIC_SCHEMA, AgenticResult, AgenticRun, AgenticSettings, FAILED, ProbeOutcome, Retention, RunFailure, StrategySummary, judge_answer, markdown, numbers,
    retention, summarise, validate_agentic,
};
pub use scoring::{RunContexts, RunLikelihood, WorldProbeScore, likelihood_summary, score_world};
pub use server::WorldServer;
pub use world::{DEFAULT_SYSTEM, Endpoint, LoadedWorld, ProbeKind, World, WorldProbe, load_world, load_worlds, parse_world};

use crate::error::{BenchError, Result};

/// The placeholder for `http://127.0.0.1:PORT` in a world's question and system prompt.
pub const BASE: &str = "{base}";

/// The exit of a run whose world server stopped serving mid-run.
pub const WORLD_SERVER_DIED: &str = "world_server_died";

/// What the loop may do about a growing context: one of mf-forgetting's
/// strategies, or the benchmark's own fixed round cap. Built from
/// [`StrategyKind`], so a strategy added there is run here too, unless
/// [`AgenticStrategy::NOT_LIVE`] leaves it out and says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum AgenticStrategy {
    /// The loop compacting with a strategy of mf-forgetting (`none`: no
    /// compaction, dynamic exits only).
    Strategy(StrategyKind),
    /// No compaction, at most 5 rounds (the fixed cap the method argues against).
    Cap5,
}

impl AgenticStrategy {
    /// Strategies the live runs leave out (as they always have): `baseline`
    /// keeps only the first message and the recent zone, so the question
    /// leaves the loop's context at the first compaction.
    pub const NOT_LIVE: [StrategyKind; 1] = [StrategyKind::Baseline];

    /// All, in table order: mf-forgetting's strategies in theirs (less
    /// [`AgenticStrategy::NOT_LIVE`]), `cap5` right after `none`.
    #[must_use]
    pub fn all() -> Vec<AgenticStrategy> {
        let mut all = Vec::new();
        for kind in StrategyKind::ALL.into_iter().filter(|k| !Self::NOT_LIVE.contains(k)) {
            all.push(AgenticStrategy::Strategy(kind));
            if kind == StrategyKind::None {
                all.push(AgenticStrategy::Cap5);
            }
        }
        all
    }

    /// Name on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            AgenticStrategy::Strategy(kind) => kind.as_str(),
            AgenticStrategy::Cap5 => "cap5",
        }
    }

    /// The compaction strategy of the loop.
    pub fn kind(self) -> StrategyKind {
        match self {
            AgenticStrategy::Strategy(kind) => kind,
            AgenticStrategy::Cap5 => StrategyKind::None,
        }
    }

    /// Whether the strategy compacts (a run of it that never compacted is
    /// marked "did not compact" and not ranked as the strategy).
    pub fn compacts(self) -> bool {
        self.kind() != StrategyKind::None
    }

    /// Parses a comma-separated list (`all` for every strategy).
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse_list(s: &str) -> Result<Vec<AgenticStrategy>> {
        if s.trim() == "all" {
            return Ok(Self::all());
        }
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let x = p.parse()?;
            if !out.contains(&x) {
                out.push(x);
            }
        }
        if out.is_empty() {
            return Err(BenchError::InvalidSetting { name: "strategies", reason: "no strategy given".to_owned() });
        }
        Ok(out)
    }
}

impl std::str::FromStr for AgenticStrategy {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<AgenticStrategy> {
        let all = Self::all();
        all.iter().copied().find(|x| x.as_str() == s).ok_or_else(|| BenchError::InvalidSetting {
            name: "strategies",
            reason: format!("unknown strategy {s:?} ({}, or all)", all.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ")),
        })
    }
}

serde_by_name!(AgenticStrategy);

/// Settings of an agentic run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticConfig {
    /// Strategies, in order.
    pub strategies: Vec<AgenticStrategy>,
    /// Generation reserve `G` (also the longest reply).
    pub reserve: u32,
    /// Trigger ratio of `C − G`.
    pub ratio: f64,
    /// Tool results longer than this are cut (characters).
    pub max_result_chars: usize,
    /// Summary pass limit (tokens).
    pub summary_max_tokens: u32,
    /// A bound on rounds for every strategy, so a model that keeps calling
    /// new (wrong) URLs cannot run for ever; `cap5` uses 5. Reported as the
    /// exit `safety_cap`.
    pub max_rounds: u32,
    /// The loopback port the worlds are served on.
    pub port: u16,
    /// Who picks the calls.
    pub driver: Driver,
    /// Fault injection: the world server stops serving after this many requests.
    pub server_dies_after: Option<usize>,
    /// Write each run's events (one JSON object per line) into this folder,
    /// as `WORLD-STRATEGY-DRIVER.jsonl`: what a table cannot show (each
    /// compaction's plan and sizes, every tool call, the summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<std::path::PathBuf>,
    /// Keep each run as a stored investigation in this session store, as
    /// `mf investigate` would (its spec names `engine`): `mf replay` and
    /// `mf sessions show` then read it. Each run's `session` is its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreTarget>,
}

/// Where runs are stored (see [`AgenticConfig::store`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreTarget {
    /// The session store (SQLite), made if missing.
    pub db: std::path::PathBuf,
    /// The engine the stored spec names (the model the runs ran on).
    pub engine: mf_agent::EngineChoice,
}

impl Default for AgenticConfig {
    fn default() -> Self {
        AgenticConfig {
            strategies: AgenticStrategy::all(),
            reserve: 192,
            ratio: 0.75,
            max_result_chars: 1200,
            summary_max_tokens: 160,
            max_rounds: 24,
            port: 18940,
            driver: Driver::Model,
            server_dies_after: None,
            trace: None,
            store: None,
        }
    }
}

/// Writes `events` as JSON lines to `dir/name` (the folder is made if missing).
fn write_trace(dir: &std::path::Path, name: &str, events: &[AgentEvent]) -> Result<()> {
    let io = |e: std::io::Error| BenchError::WriteFile { path: dir.join(name), source: e };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut out = String::new();
    for e in events {
        out.push_str(&serde_json::to_string(e).unwrap_or_else(|err| format!("{{\"unserialisable\":\"{err}\"}}")));
        out.push('\n');
    }
    std::fs::write(dir.join(name), out).map_err(io)
}

/// The kind of an exit reason (`final_answer`, `context_exhausted`, …).
fn exit_kind(reason: &mf_agent::ExitReason) -> String {
    serde_json::to_value(reason).ok().and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_owned))).unwrap_or_default()
}

/// Runs every world of `worlds` under every strategy of `cfg`, in that
/// order, each on the backend `prepare` gives just before it (the binary
/// clears the model's KV cache there). A run that fails — its world cannot
/// be served, the loop ends on an error — is recorded as a failed run
/// ([`AgenticRun::failed`]: the error's kind and message) and the next run
/// runs: one failure does not cost the runs after it. With a `scorer`,
/// once every strategy of a world has run, its probes are scored by
/// likelihood on each run's final context against the world's ceiling and
/// floor ([`scoring::score_world`]). `done` sees the runs so far after each
/// one and after each world's scoring (the binary rewrites its results file
/// there).
///
/// # Errors
/// Only what `done` returns (the runs cannot be kept).
pub fn run_all<E>(
    rt: &tokio::runtime::Runtime,
    worlds: &[&World],
    cfg: &AgenticConfig,
    prepare: &mut dyn FnMut() -> Result<Arc<dyn Backend>>,
    scorer: Option<&dyn Backend>,
    done: &mut dyn FnMut(&[AgenticRun]) -> std::result::Result<(), E>,
) -> std::result::Result<Vec<AgenticRun>, E> {
    let mut runs = Vec::new();
    for world in worlds {
        let first = runs.len();
        for &strategy in &cfg.strategies {
            let t = Instant::now();
            let run = prepare().and_then(|backend| rt.block_on(run_world(backend, world, strategy, cfg)));
            let run = run.unwrap_or_else(|e| {
                let wall_ms = t.elapsed().as_millis() as u64;
                AgenticRun::failed(world, strategy.as_str(), cfg.driver.as_str(), RunFailure::of(&e), wall_ms)
            });
            let mut run = run;
            if scorer.is_none() {
                // Nothing will read them: the memory goes now.
                run.contexts = None;
            }
            runs.push(run);
            done(&runs)?;
        }
        if let Some(scorer) = scorer {
            rt.block_on(score_world(scorer, world, &mut runs[first..]));
            // The contexts were kept for this; the next world needs the memory.
            for r in &mut runs[first..] {
                r.contexts = None;
            }
            done(&runs)?;
        }
    }
    Ok(runs)
}

/// Runs `world` under `strategy` with the real loop and `cfg.driver`, the
/// world served on `cfg.port`. A world server that dies mid-run ends the run
/// with the exit [`WORLD_SERVER_DIED`] (a run, not an error, so the results
/// keep it beside the others).
///
/// # Errors
/// The port is taken; the tool registry cannot be built; the world has no
/// route for the route driver ([`BenchError::InvalidSetting`]); the loop
/// ends on an error instead of an exit ([`BenchError::Loop`]); the trace
/// cannot be written.
pub async fn run_world(backend: Arc<dyn Backend>, world: &World, strategy: AgenticStrategy, cfg: &AgenticConfig) -> Result<AgenticRun> {
    if cfg.driver == Driver::Route && world.route.is_empty() {
        return Err(BenchError::InvalidSetting { name: "driver", reason: format!("world {} has no route to replay", world.id) });
    }
    let server = WorldServer::start_dying(world, cfg.port, cfg.server_dies_after)?;
    let base = server.base();
    let mut tools = mf_tools::ToolSettings::default();
    tools.http.allowed_hosts = Some(vec![format!("127.0.0.1:{}", cfg.port)]);
    tools.http.allow_loopback = true;
    let registry = mf_tools::ToolRegistry::new(tools).await.map_err(|e| BenchError::InvalidSetting { name: "tools", reason: e.to_string() })?;
    let watched = Arc::new(WatchedTools::new(Arc::new(registry), server.alive_flag()));
    let system = world.system.as_deref().unwrap_or(DEFAULT_SYSTEM).replace(BASE, &base);
    let question = world.question.replace(BASE, &base);
    let n_ctx = backend.context_size();
    let route = match cfg.driver {
        Driver::Route => Some(Arc::new(RouteDriven::new(backend.clone(), world.route.iter().map(|p| format!("{base}{p}")).collect(), backend.keeps_kv()))),
        Driver::Model => None,
    };
    let driven: Arc<dyn Backend> = match &route {
        Some(r) => r.clone(),
        None => backend,
    };
    let mut plan = mf_forgetting::PlanConfig::default();
    plan.sampling.max_tokens = cfg.summary_max_tokens;
    let settings = AgentSettings {
        system_prompt: system.clone(),
        strategy: strategy.kind(),
        reserve: cfg.reserve,
        ratio: cfg.ratio,
        max_result_chars: cfg.max_result_chars,
        safety_cap: Some(if strategy == AgenticStrategy::Cap5 { 5 } else { cfg.max_rounds }),
        plan,
        ..AgentSettings::default()
    };
    let t = Instant::now();
    let mut agent = Agent::new(driven, watched.clone(), Arc::new(FixedApprover(false)), settings).map_err(|e| match e {
        mf_agent::AgentError::InvalidSetting(reason) => BenchError::InvalidSetting { name: "agent", reason },
        e => BenchError::Loop(e),
    })?;
    watched.watch(agent.cancel_token());
    let mut sink = VecSink::default();
    let (out, session) = match &cfg.store {
        None => (agent.run(&question, &mut sink).await, None),
        Some(target) => {
            // The store's errors name its file.
            let store_err = |e: mf_agent::AgentError| BenchError::InvalidSetting { name: "store", reason: e.to_string() };
            let store = mf_agent::Store::open(&target.db).map_err(store_err)?;
            let spec = mf_agent::RunSpec {
                engine: target.engine.clone(),
                context: n_ctx,
                agent: agent.settings().clone(),
                tools: mf_agent::ToolsSpec::default(),
                summariser: None,
            };
            let id = store.create(&question, &serde_json::to_value(&spec)?).map_err(store_err)?;
            let mut stored = mf_agent::StoreSink { store: &store, id, next: &mut sink, error: None };
            let out = agent.run(&question, &mut stored).await;
            if let Some(e) = stored.error.take() {
                return Err(store_err(e));
            }
            (out, Some(id))
        }
    };
    let wall_ms = t.elapsed().as_millis() as u64;
    // The trace of a failed run too: it shows what the loop did up to the failure.
    if let Some(dir) = &cfg.trace {
        write_trace(dir, &format!("{}-{}-{}.jsonl", world.id, strategy.as_str(), cfg.driver.as_str()), &sink.events)?;
    }
    let out = out.map_err(BenchError::Loop)?;
    let requests = server.requests();
    drop(server);
    let mut seen = format!("{system}\n{question}\n");
    let (mut tool_calls, mut tool_errors) = (0u32, 0u32);
    let (mut prompt_tokens, mut decoded_tokens, mut reused_tokens, mut generated_tokens) = (0u64, 0u64, 0u64, 0u64);
    let (mut done, mut refused, mut failed) = (0u32, 0u32, 0u32);
    for e in &sink.events {
        match e {
            AgentEvent::ToolCall { .. } => tool_calls += 1,
            AgentEvent::ToolResult { ok, content, .. } => {
                if *ok {
                    seen.push_str(content);
                    seen.push('\n');
                } else {
                    tool_errors += 1;
                }
            }
            AgentEvent::Kv { stats, completion_tokens, .. } => {
                prompt_tokens += u64::from(stats.prompt_tokens);
                decoded_tokens += u64::from(stats.decoded);
                reused_tokens += u64::from(stats.reused);
                generated_tokens += u64::from(*completion_tokens);
            }
            AgentEvent::CompactionFinished { report, .. } => {
                if report.get("kept_original").is_some_and(|v| !v.is_null()) {
                    refused += 1;
                } else {
                    done += 1;
                }
            }
            AgentEvent::CompactionFailed { .. } => failed += 1,
            _ => {}
        }
    }
    let fetched: Vec<String> = world.endpoints.iter().filter(|e| requests.contains(&e.path)).map(|e| e.path.clone()).collect();
    let (mut probes, unsupported_numbers) = judge_answer(world, out.answer.as_deref(), &fetched, &seen);
    // The context the answer was written from: the final history without the answer itself.
    let mut context = out.history.clone();
    if out.answer.is_some() && context.last().is_some_and(|m| m.role == mf_forgetting::Role::Assistant && m.tool_calls.is_empty()) {
        context.pop();
    }
    for (p, r) in probes.iter_mut().zip(retention(world, &context)) {
        p.retention = Some(if p.fetched { r } else { Retention::Gone });
    }
    let mut transcript = out.transcript.clone();
    if out.answer.is_some() && transcript.last().is_some_and(|m| m.role == mf_forgetting::Role::Assistant && m.tool_calls.is_empty()) {
        transcript.pop();
    }
    let contexts = RunContexts { context: context.clone(), transcript, tools: mf_agent::ToolRunner::specs(watched.as_ref()), recent: agent.settings().recent };
    let (exit, exit_detail) = if watched.world_died() {
        (WORLD_SERVER_DIED.to_owned(), format!("the world server stopped serving after {} request(s); the run was stopped", requests.len()))
    } else {
        (exit_kind(&out.reason), out.reason.describe())
    };
    let confabulated = out.answer.is_some() && (probes.iter().any(|p| !p.wrong_found.is_empty()) || !unsupported_numbers.is_empty());
    Ok(AgenticRun {
        world: world.id.clone(),
        strategy: strategy.as_str().to_owned(),
        driver: cfg.driver.as_str().to_owned(),
        rounds: out.rounds,
        compactions: out.compactions,
        compactions_done: done,
        compactions_refused: refused,
        compactions_failed: failed,
        exit,
        exit_detail,
        answer: out.answer.clone(),
        tool_calls,
        tool_errors,
        route_total: world.route.len(),
        route_fetched: world.route.iter().filter(|p| requests.contains(p)).count(),
        requests,
        endpoints_fetched: fetched.len(),
        endpoints_total: world.endpoints.len(),
        facts_held: probes.iter().filter(|p| p.score == 3).count(),
        facts_fetched: probes.iter().filter(|p| p.fetched).count(),
        facts_verbatim: probes.iter().filter(|p| p.retention == Some(Retention::Verbatim)).count(),
        facts_in_summary: probes.iter().filter(|p| p.retention == Some(Retention::Summary)).count(),
        probes,
        unsupported_numbers,
        confabulated,
        max_prompt_tokens: out.max_prompt_tokens,
        n_ctx,
        prompt_tokens,
        decoded_tokens,
        reused_tokens,
        generated_tokens,
        wall_ms,
        failure: None,
        likelihood: None,
        contexts: Some(contexts),
        session,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::io::{Read as _, Write as _};
    use std::path::{Path, PathBuf};

    use super::*;

    const WORLD: &str = r#"{
      "id": "tiny", "title": "t",
      "question": "Who owns web-03? Start at {base}/index.json",
      "endpoints": [
        {"path": "/index.json", "body": {"next": "/hosts/web-03.json"}},
        {"path": "/hosts/web-03.json", "body": {"owner": "Priya Raman", "disk_used_pct": 97}},
        {"path": "/hosts/web-04.json", "body": {"owner": "Tomas Berg", "disk_used_pct": 41}}
      ],
      "probes": [{"id": "owner", "fact": "the owner", "source": "/hosts/web-03.json",
                  "required": [["Priya Raman", "Priya"]], "wrong": ["Tomas Berg"], "reference": "Priya Raman owns web-03."}]
    }"#;

    fn parse(text: &str) -> Result<World> {
        parse_world(Path::new("tiny.json"), text)
    }

    #[test]
    fn a_good_world_parses() {
        let w = parse(WORLD).unwrap();
        assert_eq!(w.endpoints[0].status, 200);
        assert_eq!(w.probes[0].wrong.len(), 1);
    }

    #[test]
    fn malformed_worlds_name_the_field() {
        let cases: Vec<(String, &str)> = vec![
            (WORLD.replace("\"title\": \"t\",", "\"title\": \"t\", \"extra\": 1,"), "extra"),
            (WORLD.replace("\"id\": \"tiny\"", "\"id\": \"other\""), "id"),
            (WORLD.replace("\"/index.json\", \"body\"", "\"index.json\", \"body\""), "endpoints[0].path"),
            (WORLD.replace("\"source\": \"/hosts/web-03.json\"", "\"source\": \"/nope\""), "probes[0].source"),
            (WORLD.replace("[\"Priya Raman\", \"Priya\"]", "\"Anna Lind\""), "probes[0].required[0]"),
            (WORLD.replace("\"wrong\": [\"Tomas Berg\"]", "\"wrong\": [\"Raman\"]"), "probes[0].wrong[0]"),
            (WORLD.replace("\"fact\": \"the owner\", ", ""), "fact"),
            (WORLD.replace("\"/hosts/web-04.json\"", "\"/hosts/web-03.json\""), "endpoints[2].path"),
            (WORLD.replace("\"endpoints\"", "\"route\": [\"/index.json\", \"/nope.json\"], \"endpoints\""), "route[1]"),
            (WORLD.replace("\"endpoints\"", "\"route\": [\"/index.json\", \"/index.json\"], \"endpoints\""), "route[1]"),
            (WORLD.replace("\"reference\": \"Priya", "\"kind\": \"rumour\", \"reference\": \"Priya"), "kind"),
            (WORLD.replace("\"title\": \"t\",", "\"title\": \"t\", \"plain_question\": \" \","), "plain_question"),
            (WORLD.replace("\"title\": \"t\",", "\"title\": \"t\", \"plain_question\": \"Who owns {base}?\","), "plain_question"),
        ];
        for (text, field) in cases {
            match parse(&text) {
                Err(BenchError::InvalidScenario { field: f, file, .. }) => {
                    assert_eq!(f, field, "{text}");
                    assert_eq!(file, PathBuf::from("tiny.json"));
                }
                other => panic!("{field}: expected an error, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_plain_question_is_kept_beside_the_question() {
        let w = parse(&WORLD.replace("\"title\": \"t\",", "\"title\": \"t\", \"plain_question\": \"Who owns web-03?\",")).unwrap();
        assert_eq!(w.plain_question.as_deref(), Some("Who owns web-03?"));
        assert!(w.question.contains("{base}"));
        assert_eq!(parse(WORLD).unwrap().plain_question, None);
    }

    #[test]
    fn answers_are_scored_and_confabulation_caught() {
        let w = parse(WORLD).unwrap();
        // What the agent saw: the question and the one tool result.
        let seen = format!("{}\n{}", w.question, r#"{"owner": "Priya Raman", "disk_used_pct": 97}"#);
        let seen = seen.as_str();
        let fetched = vec!["/hosts/web-03.json".to_owned()];
        let (p, un) = judge_answer(&w, Some("Priya Raman owns web-03; its disk is at 97%."), &fetched, seen);
        assert_eq!((p[0].score, p[0].fetched, p[0].wrong_found.len(), un.len()), (3, true, 0, 0));
        // The other host's owner, and a number no tool gave.
        let (p, un) = judge_answer(&w, Some("Tomas Berg owns it; the disk is at 88%."), &[], seen);
        assert_eq!((p[0].score, p[0].fetched), (0, false));
        assert_eq!(p[0].wrong_found, vec!["Tomas Berg".to_owned()]);
        assert_eq!(un, vec!["88".to_owned()]);
        // Separators are folded; a time gives two numbers.
        assert_eq!(numbers("6,404 rows at 03:10, build #4817"), vec!["6404", "03", "10", "4817"]);
    }

    #[test]
    fn strategies_parse() {
        let all = AgenticStrategy::parse_list("all").unwrap();
        // The names and the order the committed results use.
        assert_eq!(all.iter().map(|x| x.as_str()).collect::<Vec<_>>(), ["none", "cap5", "masking", "v1", "v2", "v2.1"]);
        let masking = AgenticStrategy::Strategy(StrategyKind::Masking);
        assert_eq!(AgenticStrategy::parse_list("masking").unwrap(), vec![masking]);
        assert!(masking.compacts() && !AgenticStrategy::Cap5.compacts());
        assert_eq!(AgenticStrategy::parse_list("cap5, v2.1").unwrap(), vec![AgenticStrategy::Cap5, AgenticStrategy::Strategy(StrategyKind::V21)]);
        let e = AgenticStrategy::parse_list("v9").unwrap_err().to_string();
        assert!(e.contains("v9") && e.contains("none, cap5, masking, v1, v2, v2.1, or all"), "{e}");
        assert!(AgenticStrategy::parse_list("baseline").is_err(), "left out of the live runs");
        assert_eq!(AgenticStrategy::Cap5.kind(), StrategyKind::None);
        for x in all {
            assert_eq!(serde_json::to_value(x).unwrap(), serde_json::json!(x.as_str()));
            assert_eq!(serde_json::from_value::<AgenticStrategy>(serde_json::json!(x.as_str())).unwrap(), x);
        }
    }

    #[test]
    fn the_server_serves_the_world_and_logs_paths() {
        let w = parse(WORLD).unwrap();
        let port = 18957;
        let s = WorldServer::start(&w, port).unwrap();
        let get = |path: &str| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
            let mut r = String::new();
            c.read_to_string(&mut r).unwrap();
            r
        };
        let r = get("/hosts/web-03.json");
        assert!(r.starts_with("HTTP/1.1 200") && r.contains("Priya Raman"), "{r}");
        assert!(get("/missing").starts_with("HTTP/1.1 404"));
        assert_eq!(s.requests(), vec!["/hosts/web-03.json".to_owned(), "/missing".to_owned()]);
        // The port is taken while it serves.
        assert!(WorldServer::start(&w, port).unwrap_err().to_string().contains("18957"));
        drop(s);
        // And free again after.
        drop(WorldServer::start(&w, port).unwrap());
    }
}
