//! Live agentic worlds: the real `mf-agent` loop against a deterministic JSON
//! API served on 127.0.0.1 by the harness, once per strategy.
//!
//! How the pieces fit: a [`World`] (`scenarios/agentic/*.json`) is a
//! question, a set of JSON endpoints with the facts spread over many calls,
//! and probes on the final answer (required keywords, and *wrong* keywords —
//! values the world attributes to something else, so an answer holding one
//! contradicts a tool result). [`WorldServer`] serves one world at a fixed
//! loopback port (the port is part of the prompt, so it is fixed for the
//! model's behaviour to be reproducible). [`run_world`] drives
//! [`mf_agent::Agent`] with mf-tools' contained `http` tool (loopback allowed
//! for that one host:port) under one [`AgenticStrategy`], and measures the
//! run: rounds reached, compactions, exit reason, which facts were fetched,
//! which the final answer holds, and confabulation. [`summarise`] and
//! [`markdown`] make the tables.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mf_agent::{Agent, AgentEvent, AgentSettings, FixedApprover, VecSink};
use mf_forgetting::StrategyKind;
use mf_forgetting::scenario::Keyword;
use mf_inference::Backend;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// The placeholder for `http://127.0.0.1:PORT` in a world's question and system prompt.
pub const BASE: &str = "{base}";

/// One endpoint of a world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Path, from `/` (a query string is part of it when the world lists one).
    pub path: String,
    /// HTTP status (default 200).
    #[serde(default = "ok_status")]
    pub status: u16,
    /// The JSON body.
    pub body: serde_json::Value,
}

fn ok_status() -> u16 {
    200
}

/// A probe on the final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldProbe {
    /// Id, unique in the world.
    pub id: String,
    /// The fact, in words.
    pub fact: String,
    /// The endpoint whose body holds the fact.
    pub source: String,
    /// Keywords the answer must hold (each a string or a list of variants).
    pub required: Vec<Keyword>,
    /// Keywords worth partial credit.
    #[serde(default)]
    pub partial: Vec<Keyword>,
    /// Values the world gives for *other* things (another host's owner, an
    /// older figure): an answer holding one contradicts a tool result.
    #[serde(default)]
    pub wrong: Vec<Keyword>,
    /// The reference answer for this fact.
    pub reference: String,
}

/// A live world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    /// Id (the file name without `.json`).
    pub id: String,
    /// One line for people.
    pub title: String,
    /// The system prompt (`{base}` is replaced); default: the harness's.
    #[serde(default)]
    pub system: Option<String>,
    /// The question (`{base}` is replaced by `http://127.0.0.1:PORT`).
    pub question: String,
    /// The endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Probes on the final answer.
    pub probes: Vec<WorldProbe>,
}

/// A world and its file.
#[derive(Debug, Clone)]
pub struct LoadedWorld {
    /// The file.
    pub path: PathBuf,
    /// The world.
    pub world: World,
}

/// The system prompt used when a world gives none.
pub const DEFAULT_SYSTEM: &str = "You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n{\"name\": \"http\", \"arguments\": {\"url\": \"{base}/index.json\"}}\n```\nWhen you have the facts, answer in one or two sentences with the names and numbers you found.";

fn invalid(path: &Path, field: impl Into<String>, reason: impl Into<String>) -> BenchError {
    BenchError::InvalidScenario { file: path.to_path_buf(), field: field.into(), reason: reason.into() }
}

/// Parses and checks one world file: unknown or missing fields, an id that
/// differs from the file name, paths not from `/`, duplicate paths, a probe
/// whose `source` is not an endpoint or whose required keywords are not in
/// that endpoint's body (the world would not hold its own answer), a wrong
/// keyword found in the reference.
///
/// # Errors
/// [`BenchError::InvalidScenario`] naming the file and the field.
pub fn parse_world(path: &Path, text: &str) -> Result<World> {
    let w: World = serde_json::from_str(text).map_err(|e| {
        let msg = e.to_string();
        let field = ["unknown field `", "missing field `"]
            .iter()
            .find_map(|m| msg.find(m).map(|p| &msg[p + m.len()..]).and_then(|r| r.find('`').map(|e| r[..e].to_owned())))
            .unwrap_or_else(|| "json".to_owned());
        invalid(path, field, msg)
    })?;
    if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        && stem != w.id
    {
        return Err(invalid(path, "id", format!("{:?} differs from the file name {stem:?}", w.id)));
    }
    if w.question.trim().is_empty() {
        return Err(invalid(path, "question", "empty"));
    }
    if w.endpoints.is_empty() {
        return Err(invalid(path, "endpoints", "a world needs at least one endpoint"));
    }
    for (i, e) in w.endpoints.iter().enumerate() {
        if !e.path.starts_with('/') {
            return Err(invalid(path, format!("endpoints[{i}].path"), format!("{:?} does not start with /", e.path)));
        }
        if w.endpoints[..i].iter().any(|o| o.path == e.path) {
            return Err(invalid(path, format!("endpoints[{i}].path"), format!("{:?} is listed twice", e.path)));
        }
        if !(100..=599).contains(&e.status) {
            return Err(invalid(path, format!("endpoints[{i}].status"), format!("{} is not an HTTP status", e.status)));
        }
    }
    if w.probes.is_empty() {
        return Err(invalid(path, "probes", "a world needs at least one probe"));
    }
    for (i, p) in w.probes.iter().enumerate() {
        if w.probes[..i].iter().any(|o| o.id == p.id) {
            return Err(invalid(path, format!("probes[{i}].id"), format!("{:?} is used twice", p.id)));
        }
        if p.reference.trim().is_empty() {
            return Err(invalid(path, format!("probes[{i}].reference"), "empty"));
        }
        if p.required.is_empty() {
            return Err(invalid(path, format!("probes[{i}].required"), "a probe needs at least one required keyword"));
        }
        let Some(src) = w.endpoints.iter().find(|e| e.path == p.source) else {
            return Err(invalid(path, format!("probes[{i}].source"), format!("{:?} is not an endpoint of this world", p.source)));
        };
        let body = crate::keyword::normalise(&src.body.to_string());
        for (k, kw) in p.required.iter().enumerate() {
            if !crate::keyword::group_matches(&body, kw) {
                return Err(invalid(path, format!("probes[{i}].required[{k}]"), format!("{:?} is not in the body of {}", kw.variants(), p.source)));
            }
        }
        let reference = crate::keyword::normalise(&p.reference);
        for (k, kw) in p.wrong.iter().enumerate() {
            if crate::keyword::group_matches(&reference, kw) {
                return Err(invalid(path, format!("probes[{i}].wrong[{k}]"), "a wrong value appears in the reference answer"));
            }
        }
    }
    Ok(w)
}

/// Loads every `*.json` world of `dir` (sorted), keeping ids that contain one of `filters`.
///
/// # Errors
/// I/O errors, the first malformed world, nothing selected.
pub fn load_worlds(dir: &Path, filters: &[String]) -> Result<Vec<LoadedWorld>> {
    let paths = crate::load::json_files(dir)?;
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|source| BenchError::ReadFile { path: path.clone(), source })?;
        let world = parse_world(&path, &text)?;
        if filters.is_empty() || filters.iter().any(|f| world.id.contains(f.as_str())) {
            out.push(LoadedWorld { path, world });
        }
    }
    if out.is_empty() {
        return Err(BenchError::NoScenarios(dir.to_path_buf()));
    }
    Ok(out)
}

/// A world served on `127.0.0.1:port` until dropped; it records every path requested.
#[derive(Debug)]
pub struct WorldServer {
    port: u16,
    stop: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WorldServer {
    /// Serves `world` on `127.0.0.1:port`.
    ///
    /// # Errors
    /// The port is taken (named in the message).
    pub fn start(world: &World, port: u16) -> Result<WorldServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| BenchError::InvalidSetting { name: "port", reason: format!("cannot serve the world on 127.0.0.1:{port}: {e}") })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| BenchError::InvalidSetting { name: "port", reason: e.to_string() })?;
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let pages: Vec<(String, u16, String)> = world.endpoints.iter().map(|e| (e.path.clone(), e.status, e.body.to_string())).collect();
        let (stop2, req2) = (stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                        let path = read_request_path(&mut c);
                        if let Ok(mut r) = req2.lock() {
                            r.push(path.clone());
                        }
                        let (status, body) = match pages.iter().find(|(p, _, _)| *p == path) {
                            Some((_, s, b)) => (*s, b.clone()),
                            None => (404, r#"{"error": "no such endpoint"}"#.to_owned()),
                        };
                        let _ = write!(
                            c,
                            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            reason(status),
                            body.len()
                        );
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(WorldServer { port, stop, requests, thread: Some(thread) })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Paths requested so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for WorldServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Reads the request head and returns its path.
fn read_request_path(c: &mut std::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace().nth(1).unwrap_or("/").to_owned()
}

/// What the loop may do about a growing context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgenticStrategy {
    /// No compaction; dynamic exits only.
    #[serde(rename = "none")]
    None,
    /// No compaction, at most 5 rounds (the fixed cap the method argues against).
    #[serde(rename = "cap5")]
    Cap5,
    /// Measured forgetting v1.
    #[serde(rename = "v1")]
    V1,
    /// Dimension-aware v2.
    #[serde(rename = "v2")]
    V2,
    /// v2.1: Δ by the withholding test, the model as evaluator.
    #[serde(rename = "v2.1")]
    V21,
}

impl AgenticStrategy {
    /// All, in table order.
    pub const ALL: [AgenticStrategy; 5] = [AgenticStrategy::None, AgenticStrategy::Cap5, AgenticStrategy::V1, AgenticStrategy::V2, AgenticStrategy::V21];

    /// Name on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            AgenticStrategy::None => "none",
            AgenticStrategy::Cap5 => "cap5",
            AgenticStrategy::V1 => "v1",
            AgenticStrategy::V2 => "v2",
            AgenticStrategy::V21 => "v2.1",
        }
    }

    /// The compaction strategy of the loop.
    pub fn kind(self) -> StrategyKind {
        match self {
            AgenticStrategy::None | AgenticStrategy::Cap5 => StrategyKind::None,
            AgenticStrategy::V1 => StrategyKind::V1,
            AgenticStrategy::V2 => StrategyKind::V2,
            AgenticStrategy::V21 => StrategyKind::V21,
        }
    }

    /// Parses a comma-separated list (`all` for every strategy).
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse_list(s: &str) -> Result<Vec<AgenticStrategy>> {
        if s.trim() == "all" {
            return Ok(Self::ALL.to_vec());
        }
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let x = Self::ALL.into_iter().find(|x| x.as_str() == p).ok_or_else(|| BenchError::InvalidSetting {
                name: "strategies",
                reason: format!("unknown strategy {p:?} (none, cap5, v1, v2, v2.1, or all)"),
            })?;
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
}

impl Default for AgenticConfig {
    fn default() -> Self {
        AgenticConfig {
            strategies: AgenticStrategy::ALL.to_vec(),
            reserve: 192,
            ratio: 0.75,
            max_result_chars: 700,
            summary_max_tokens: 160,
            max_rounds: 16,
            port: 18940,
        }
    }
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
}

/// One world under one strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticRun {
    /// World id.
    pub world: String,
    /// Strategy.
    pub strategy: String,
    /// Rounds reached.
    pub rounds: u32,
    /// Compactions run.
    pub compactions: u32,
    /// Exit reason kind (`final_answer`, `repeated_tool_call`, …).
    pub exit: String,
    /// The exit in words.
    pub exit_detail: String,
    /// The final answer (`null`: none was produced).
    pub answer: Option<String>,
    /// Tool calls the model made.
    pub tool_calls: u32,
    /// Tool results that were errors.
    pub tool_errors: u32,
    /// Paths the loop requested from the world, in order (404s included).
    pub requests: Vec<String>,
    /// Distinct world endpoints fetched.
    pub endpoints_fetched: usize,
    /// Endpoints in the world.
    pub endpoints_total: usize,
    /// Per probe.
    pub probes: Vec<ProbeOutcome>,
    /// Probes whose required keywords are all in the final answer.
    pub facts_held: usize,
    /// Probes whose source endpoint was fetched.
    pub facts_fetched: usize,
    /// Numbers (2+ digits) in the final answer that are in no tool result, question or system prompt.
    pub unsupported_numbers: Vec<String>,
    /// The final answer contradicts a tool result: it holds a wrong value, or a number no tool gave.
    pub confabulated: bool,
    /// The largest prompt sent (tokens).
    pub max_prompt_tokens: u32,
    /// Prompt tokens summed over generations (a naive resend would decode them all).
    pub prompt_tokens: u64,
    /// Of those, decoded (the rest came from the KV cache).
    pub decoded_tokens: u64,
    /// Wall time, ms.
    pub wall_ms: u64,
}

/// Per-strategy aggregates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategySummary {
    /// Strategy.
    pub strategy: String,
    /// Runs (worlds).
    pub runs: usize,
    /// Mean rounds reached.
    pub rounds_mean: f64,
    /// Most rounds reached.
    pub rounds_max: u32,
    /// Mean compactions.
    pub compactions_mean: f64,
    /// Runs that produced a final answer.
    pub answered: usize,
    /// Facts held by final answers, over all probes.
    pub facts_held: usize,
    /// Facts fetched, over all probes.
    pub facts_fetched: usize,
    /// Probes in all.
    pub facts_total: usize,
    /// Mean keyword score of the final answers.
    pub score_mean: f64,
    /// Runs whose answer contradicts a tool result.
    pub confabulated: usize,
    /// Exit kind → runs.
    pub exits: std::collections::BTreeMap<String, usize>,
}

/// Settings recorded with the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticSettings {
    /// Backend.
    pub backend: String,
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
    /// (`--tool-grammar`; absent in results written before it existed).
    #[serde(default)]
    pub tool_grammar: bool,
    /// Worlds run.
    pub worlds: Vec<String>,
    /// World directory.
    pub worlds_dir: String,
}

/// The results of `bench-forgetting agentic` for one model.
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
}

/// The schema of `bench-forgetting agentic --json` (an array of [`AgenticResult`]).
pub const AGENTIC_SCHEMA: &str = include_str!("../schema/agentic.schema.json");

/// Validates an agentic results document.
///
/// # Errors
/// [`BenchError::Schema`] with the path of the first mismatch.
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
                p.wrong
                    .iter()
                    .filter(|k| crate::keyword::group_matches(&norm, k))
                    .filter_map(|k| k.variants().first().map(|s| (*s).to_owned()))
                    .collect()
            };
            ProbeOutcome { probe: p.id.clone(), score, fetched: fetched.contains(&p.source), wrong_found }
        })
        .collect();
    let seen = numbers(seen_text);
    let unsupported = numbers(a).into_iter().filter(|n| !seen.contains(n)).collect();
    (probes, unsupported)
}

/// Runs `world` under `strategy` with the real loop, the world served on `cfg.port`.
///
/// # Errors
/// The port is taken; the tool registry cannot be built; a model failure the loop cannot turn into an exit.
pub async fn run_world(backend: Arc<dyn Backend>, world: &World, strategy: AgenticStrategy, cfg: &AgenticConfig) -> Result<AgenticRun> {
    let server = WorldServer::start(world, cfg.port)?;
    let base = server.base();
    let mut tools = mf_tools::ToolSettings::default();
    tools.http.allowed_hosts = Some(vec![format!("127.0.0.1:{}", cfg.port)]);
    tools.http.allow_loopback = true;
    let registry = mf_tools::ToolRegistry::new(tools)
        .await
        .map_err(|e| BenchError::InvalidSetting { name: "tools", reason: e.to_string() })?;
    let system = world.system.as_deref().unwrap_or(DEFAULT_SYSTEM).replace(BASE, &base);
    let question = world.question.replace(BASE, &base);
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
    let mut agent = Agent::new(backend, Arc::new(registry), Arc::new(FixedApprover(false)), settings)
        .map_err(|e| BenchError::InvalidSetting { name: "agent", reason: e.to_string() })?;
    let mut sink = VecSink::default();
    let out = agent
        .run(&question, &mut sink)
        .await
        .map_err(|e| BenchError::InvalidSetting { name: "agent", reason: format!("the loop failed: {e}") })?;
    let wall_ms = t.elapsed().as_millis() as u64;
    let requests = server.requests();
    drop(server);
    let mut seen = format!("{system}\n{question}\n");
    let (mut tool_calls, mut tool_errors, mut prompt_tokens, mut decoded_tokens) = (0u32, 0u32, 0u64, 0u64);
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
            AgentEvent::Kv { stats, .. } => {
                prompt_tokens += u64::from(stats.prompt_tokens);
                decoded_tokens += u64::from(stats.decoded);
            }
            _ => {}
        }
    }
    let fetched: Vec<String> = world.endpoints.iter().filter(|e| requests.contains(&e.path)).map(|e| e.path.clone()).collect();
    let (probes, unsupported_numbers) = judge_answer(world, out.answer.as_deref(), &fetched, &seen);
    let exit_kind = serde_json::to_value(&out.reason)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_owned)))
        .unwrap_or_default();
    let confabulated = out.answer.is_some() && (probes.iter().any(|p| !p.wrong_found.is_empty()) || !unsupported_numbers.is_empty());
    Ok(AgenticRun {
        world: world.id.clone(),
        strategy: strategy.as_str().to_owned(),
        rounds: out.rounds,
        compactions: out.compactions,
        exit: exit_kind,
        exit_detail: out.reason.describe(),
        answer: out.answer.clone(),
        tool_calls,
        tool_errors,
        requests,
        endpoints_fetched: fetched.len(),
        endpoints_total: world.endpoints.len(),
        facts_held: probes.iter().filter(|p| p.score == 3).count(),
        facts_fetched: probes.iter().filter(|p| p.fetched).count(),
        probes,
        unsupported_numbers,
        confabulated,
        max_prompt_tokens: out.max_prompt_tokens,
        prompt_tokens,
        decoded_tokens,
        wall_ms,
    })
}

/// Per-strategy aggregates, in `strategies` order.
pub fn summarise(runs: &[AgenticRun], strategies: &[AgenticStrategy]) -> Vec<StrategySummary> {
    strategies
        .iter()
        .map(|s| {
            let rs: Vec<&AgenticRun> = runs.iter().filter(|r| r.strategy == s.as_str()).collect();
            let n = rs.len().max(1) as f64;
            let scores: Vec<f64> = rs.iter().flat_map(|r| r.probes.iter().map(|p| f64::from(p.score))).collect();
            let mut exits = std::collections::BTreeMap::new();
            for r in &rs {
                *exits.entry(r.exit.clone()).or_insert(0) += 1;
            }
            StrategySummary {
                strategy: s.as_str().to_owned(),
                runs: rs.len(),
                rounds_mean: rs.iter().map(|r| f64::from(r.rounds)).sum::<f64>() / n,
                rounds_max: rs.iter().map(|r| r.rounds).max().unwrap_or(0),
                compactions_mean: rs.iter().map(|r| f64::from(r.compactions)).sum::<f64>() / n,
                answered: rs.iter().filter(|r| r.answer.as_deref().is_some_and(|a| !a.trim().is_empty())).count(),
                facts_held: rs.iter().map(|r| r.facts_held).sum(),
                facts_fetched: rs.iter().map(|r| r.facts_fetched).sum(),
                facts_total: rs.iter().map(|r| r.probes.len()).sum(),
                score_mean: if scores.is_empty() { 0.0 } else { scores.iter().sum::<f64>() / scores.len() as f64 },
                confabulated: rs.iter().filter(|r| r.confabulated).count(),
                exits,
            }
        })
        .collect()
}

/// Markdown tables of agentic results.
pub fn markdown(results: &[AgenticResult]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for r in results {
        let s = &r.settings;
        let _ = writeln!(out, "### {} — live agentic worlds\n", r.model);
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
            if s.tool_grammar { ", tool calls held to the schemas by a grammar" } else { "" },
            s.max_rounds,
            r.wall_s
        );
        let _ = writeln!(out, "| strategy | runs | rounds (mean / max) | compactions (mean) | answered | facts fetched | facts in answer | answer keyword (0–3) | confabulated | exits |");
        let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
        for x in &r.summary {
            let exits: Vec<String> = x.exits.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} / {} | {:.1} | {} | {}/{} | {}/{} | {:.2} | {} | {} |",
                x.strategy,
                x.runs,
                x.rounds_mean,
                x.rounds_max,
                x.compactions_mean,
                x.answered,
                x.facts_fetched,
                x.facts_total,
                x.facts_held,
                x.facts_total,
                x.score_mean,
                x.confabulated,
                exits.join(", ")
            );
        }
        let _ = writeln!(out, "\n| world | strategy | rounds | compactions | exit | endpoints | facts in answer | confabulation | answer |");
        let _ = writeln!(out, "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- |");
        for x in &r.runs {
            let mut conf: Vec<String> = x.probes.iter().flat_map(|p| p.wrong_found.iter().map(|w| format!("wrong: {w}"))).collect();
            conf.extend(x.unsupported_numbers.iter().map(|n| format!("unsupported: {n}")));
            let answer = x.answer.as_deref().map_or("–".to_owned(), |a| {
                let one: String = a.split_whitespace().collect::<Vec<_>>().join(" ");
                let cut: String = one.chars().take(90).collect();
                let cut = cut.replace('|', "\\|");
                if one.chars().count() > 90 { format!("{cut}…") } else { cut }
            });
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {}/{} | {}/{} | {} | {} |",
                x.world,
                x.strategy,
                x.rounds,
                x.compactions,
                x.exit,
                x.endpoints_fetched,
                x.endpoints_total,
                x.facts_held,
                x.probes.len(),
                if conf.is_empty() { "–".to_owned() } else { conf.join(", ") },
                answer
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
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
        assert_eq!(AgenticStrategy::parse_list("all").unwrap().len(), 5);
        assert_eq!(AgenticStrategy::parse_list("cap5, v2.1").unwrap(), vec![AgenticStrategy::Cap5, AgenticStrategy::V21]);
        assert!(AgenticStrategy::parse_list("v9").unwrap_err().to_string().contains("v9"));
        assert_eq!(AgenticStrategy::Cap5.kind(), StrategyKind::None);
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
