//! Calibration: a short fixed run that measures each compacting strategy at
//! each trigger ratio on one model, and recommends the pair that served the
//! investigation best there.
//!
//! Published work finds that the best strategy depends on the model, and
//! peers use one fixed threshold for every model. This measures the choice
//! instead: one long world, route-driven (the calls come from the world so a
//! small model's planning does not decide the outcome) and cut to its first
//! [`CalibrationConfig::route_len`] calls, so the window fills and compaction
//! fires several times within a few minutes. Everything else is the real
//! loop on the real model: its summaries, the context accounting, the
//! closing answer.
//!
//! The ranking, in order: retention `R` by likelihood (the world's probes
//! scored by log-probability on the context each run answers from, against
//! the uncompacted history and its pinned + recent zones:
//! [`super::scoring`]), then how far along the route the run got (a run that
//! stops early cannot answer from what it never fetched), then the shorter
//! wall time. A row without `R` (the engine cannot score, or no probe had
//! signal) ranks below every row with one. How many facts are still in the
//! context by keyword and how many the answer states stay beside it: keyword
//! retention favours strategies that keep literals, and with a reader as
//! small as the test models, answers are near the floor.

use std::sync::Arc;

use mf_forgetting::StrategyKind;
use mf_inference::Backend;
use serde::{Deserialize, Serialize};

use super::scoring::{likelihood_summary, score_world};
use super::{AgenticConfig, AgenticStrategy, Driver, World, run_world};
use crate::error::{BenchError, Result};

/// The world a calibration runs by default (one of `scenarios/agentic/`).
pub const CALIBRATION_WORLD: &str = "cdn-purge-storm";

/// The context window a calibration runs at: the agentic worlds' own, small
/// so that the window fills within a few calls.
pub const CALIBRATION_CONTEXT: u32 = 2048;

/// The window of the session that scores a calibration's runs: it holds the
/// route's uncompacted history (the ceiling), which outgrows the runs' own.
pub const CALIBRATION_SCORE_CONTEXT: u32 = 8192;

/// What a calibration runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationConfig {
    /// Calls of the world's route replayed (the rest is left out).
    pub route_len: usize,
    /// Strategies measured.
    pub strategies: Vec<StrategyKind>,
    /// Trigger ratios measured (of `C − G`).
    pub ratios: Vec<f64>,
    /// The loop's other settings (context from the backend; driver: route).
    pub base: AgenticConfig,
}

impl Default for CalibrationConfig {
    fn default() -> Self {
        CalibrationConfig {
            route_len: 6,
            strategies: vec![StrategyKind::Masking, StrategyKind::V1, StrategyKind::V2],
            ratios: vec![0.6, 0.75, 0.9],
            base: AgenticConfig { driver: Driver::Route, port: 18946, ..AgenticConfig::default() },
        }
    }
}

/// One strategy at one ratio, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CalibrationRow {
    /// Strategy name.
    pub strategy: String,
    /// Trigger ratio.
    pub ratio: f64,
    /// Rounds reached.
    pub rounds: u32,
    /// Route calls made, of `route_total`.
    pub route_done: usize,
    /// Route calls asked for.
    pub route_total: usize,
    /// Compactions done.
    pub compactions: u32,
    /// Facts of the fetched endpoints.
    pub facts_fetched: usize,
    /// Fetched facts still in the final context (verbatim or in a summary).
    pub facts_kept: usize,
    /// Facts the closing answer states.
    pub facts_in_answer: usize,
    /// How the run ended.
    pub exit: String,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Retention by likelihood over the world's probes with signal (1: as
    /// the uncompacted history, 0: as pinned + recent only); absent when the
    /// run could not be scored, and in calibrations stored before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional = nullable))]
    pub retention: Option<f64>,
    /// Probes with signal that `retention` rests on.
    #[serde(default)]
    pub retention_probes: usize,
}

impl CalibrationRow {
    /// The ranking key (larger is better; see the module docs): R in
    /// thousandths (a row without R below any with it), route progress, then
    /// the shorter wall time.
    fn key(&self) -> (bool, i64, usize, i64) {
        let r = self.retention.filter(|r| r.is_finite());
        (r.is_some(), r.map_or(0, |r| (r * 1000.0).round() as i64), self.route_done, -(self.wall_s * 1000.0) as i64)
    }
}

/// The recommendation: a strategy and a ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Recommendation {
    /// Strategy name (as the settings take it).
    pub strategy: String,
    /// Trigger ratio.
    pub ratio: f64,
}

/// A calibration's result: every row and what they recommend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Calibration {
    /// The model (file name or server name).
    pub model: String,
    /// The world and how many of its calls were replayed.
    pub world: String,
    /// Route calls replayed.
    pub route_len: usize,
    /// Context window `C` and reserve `G` of the runs.
    pub n_ctx: u32,
    /// See `n_ctx`.
    pub reserve: u32,
    /// When it was measured (seconds since the Unix epoch).
    pub measured_at: u64,
    /// Every strategy × ratio, in the order run.
    pub rows: Vec<CalibrationRow>,
    /// The best row's strategy and ratio (`None` when nothing ran).
    pub recommended: Option<Recommendation>,
    /// Why, in one sentence with its numbers.
    pub reason: String,
}

/// The name a model's calibration is stored under: the model file's name
/// for the embedded engine; for a server, the engine and the server's model
/// name (`ollama-qwen3_8b`, `openai-Qwen_Qwen3-8B`), so the same name on two
/// engines are two calibrations. Characters other than letters, digits, `.`,
/// `-` and `_` become `_`.
#[must_use]
pub fn model_key(engine: &mf_agent::EngineChoice) -> String {
    let safe = |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect::<String>();
    match engine {
        mf_agent::EngineChoice::Embedded { .. } => safe(&engine.model_label()),
        mf_agent::EngineChoice::Ollama { model, .. } => format!("ollama-{}", safe(model)),
        mf_agent::EngineChoice::OpenAi { model, .. } => format!("openai-{}", safe(model)),
    }
}

/// Where a model's calibration is kept in the data folder `dir` (the one
/// `mf` and the app share): `calibration/KEY.json` ([`model_key`]).
#[must_use]
pub fn stored_path(dir: &std::path::Path, key: &str) -> std::path::PathBuf {
    dir.join("calibration").join(format!("{key}.json"))
}

/// The calibration stored under `key` in `dir`, if any (a file that
/// does not parse counts as none).
#[must_use]
pub fn load_stored(dir: &std::path::Path, key: &str) -> Option<Calibration> {
    let text = std::fs::read_to_string(stored_path(dir, key)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes `c` as the calibration stored under `key` in `dir`.
///
/// # Errors
/// The folder or file cannot be written.
pub fn store(dir: &std::path::Path, key: &str, c: &Calibration) -> Result<std::path::PathBuf> {
    let path = stored_path(dir, key);
    let io = |e: std::io::Error| BenchError::WriteFile { path: path.clone(), source: e };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(c)?).map_err(io)?;
    Ok(path)
}

/// Runs the calibration of `backend` on `world` (its route cut to
/// `cfg.route_len` calls); `progress(done, total, row)` after each run. The
/// runs are then scored by likelihood on `scorer` (a session of the same
/// model with a window that holds the route's uncompacted history,
/// [`CALIBRATION_SCORE_CONTEXT`]), or on `backend` itself without one (what
/// does not fit its window is not scored).
///
/// # Errors
/// An empty strategy or ratio list, a ratio outside (0, 1], a world without
/// a route, or a run that fails (see [`run_world`]).
pub async fn calibrate(
    backend: Arc<dyn Backend>,
    scorer: Option<Arc<dyn Backend>>,
    world: &World,
    cfg: &CalibrationConfig,
    progress: &mut dyn FnMut(usize, usize, &CalibrationRow),
) -> Result<Calibration> {
    let bad = |reason: String| Err(BenchError::InvalidSetting { name: "calibration", reason });
    if cfg.strategies.is_empty() || cfg.ratios.is_empty() {
        return bad("choose at least one strategy and one ratio".to_owned());
    }
    if let Some(r) = cfg.ratios.iter().find(|r| !(r.is_finite() && **r > 0.0 && **r <= 1.0)) {
        return bad(format!("ratio {r} is outside (0, 1]"));
    }
    if world.route.is_empty() || cfg.route_len == 0 {
        return bad(format!("world {} has no route to replay", world.id));
    }
    let mut w = world.clone();
    w.route.truncate(cfg.route_len);
    let total = cfg.strategies.len() * cfg.ratios.len();
    let mut rows = Vec::with_capacity(total);
    let mut runs = Vec::with_capacity(total);
    for &strategy in &cfg.strategies {
        for &ratio in &cfg.ratios {
            let run_cfg = AgenticConfig { ratio, driver: Driver::Route, ..cfg.base.clone() };
            let r = run_world(backend.clone(), &w, AgenticStrategy::Strategy(strategy), &run_cfg).await?;
            let row = CalibrationRow {
                strategy: strategy.as_str().to_owned(),
                ratio,
                rounds: r.rounds,
                route_done: r.route_fetched,
                route_total: r.route_total,
                compactions: r.compactions_done,
                facts_fetched: r.facts_fetched,
                facts_kept: r.facts_verbatim + r.facts_in_summary,
                facts_in_answer: r.facts_held,
                exit: r.exit.clone(),
                wall_s: r.wall_ms as f64 / 1000.0,
                retention: None,
                retention_probes: 0,
            };
            rows.push(row);
            runs.push(r);
            progress(rows.len(), total, &rows[rows.len() - 1]);
        }
    }
    // Every run of a calibration is one world: one ceiling and floor for all.
    // The rows differ in the ratio as well as the strategy, so each run is
    // scored as a "strategy" of its own row.
    let scorer = scorer.unwrap_or_else(|| backend.clone());
    for (i, r) in runs.iter_mut().enumerate() {
        r.strategy = format!("row{i}");
    }
    score_world(scorer.as_ref(), &w, &mut runs).await;
    let names: Vec<String> = (0..runs.len()).map(|i| format!("row{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Some(summary) = likelihood_summary(&runs, &refs) {
        for (row, name) in rows.iter_mut().zip(&names) {
            if let Some(c) = summary.conditions.iter().find(|c| &c.condition == name).and_then(|c| c.retention) {
                row.retention = Some(c.value);
                row.retention_probes = c.n;
            }
        }
    }
    let (recommended, reason) = recommend(&rows);
    let measured_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(Calibration {
        model: backend.model_info().name,
        world: world.id.clone(),
        route_len: w.route.len(),
        n_ctx: backend.context_size(),
        reserve: cfg.base.reserve,
        measured_at,
        rows,
        recommended,
        reason,
    })
}

/// The best row by [`CalibrationRow::key`] (the first of equals), and why.
fn recommend(rows: &[CalibrationRow]) -> (Option<Recommendation>, String) {
    let Some(best) = rows.iter().reduce(|a, b| if b.key() > a.key() { b } else { a }) else {
        return (None, "nothing was measured".to_owned());
    };
    let reason = match best.retention {
        Some(r) => format!(
            "{} at ratio {} kept the most by likelihood (R {r:.2} over {} probes: 1 is the uncompacted history, 0 pinned + recent only), got {}/{} calls along the route, {} of {} facts in its final context by keyword, {} in its answer, in {:.0} s",
            best.strategy,
            best.ratio,
            best.retention_probes,
            best.route_done,
            best.route_total,
            best.facts_kept,
            best.facts_fetched,
            best.facts_in_answer,
            best.wall_s
        ),
        None => format!(
            "{} at ratio {} got furthest along the route ({}/{} calls), in {:.0} s; no run could be scored by likelihood (the engine cannot score, or no probe separated the uncompacted history from pinned + recent), so retention did not rank them",
            best.strategy, best.ratio, best.route_done, best.route_total, best.wall_s
        ),
    };
    (Some(Recommendation { strategy: best.strategy.clone(), ratio: best.ratio }), reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(strategy: &str, ratio: f64, route_done: usize, kept: usize, answer: usize, wall_s: f64) -> CalibrationRow {
        CalibrationRow {
            strategy: strategy.into(),
            ratio,
            rounds: 0,
            route_done,
            route_total: 6,
            compactions: 0,
            facts_fetched: 5,
            facts_kept: kept,
            facts_in_answer: answer,
            exit: "final_answer".into(),
            wall_s,
            retention: None,
            retention_probes: 0,
        }
    }

    #[test]
    fn each_engine_and_model_has_its_own_file_name() {
        use mf_agent::{EngineChoice, KeySource};
        let llama = EngineChoice::Embedded { model: "/m/SmolLM2-135M-Instruct.Q4_1.gguf".into(), threads: None, gpu: false, tool_grammar: true };
        assert_eq!(model_key(&llama), "SmolLM2-135M-Instruct.Q4_1.gguf");
        let ollama = EngineChoice::Ollama { url: "http://127.0.0.1:11434".into(), model: "qwen3:8b".into() };
        assert_eq!(model_key(&ollama), "ollama-qwen3_8b");
        let openai =
            EngineChoice::OpenAi { url: "http://127.0.0.1:8080/v1".into(), model: "../Qwen/Qwen3-8B".into(), tools_in_text: false, key: KeySource::default() };
        assert_eq!(model_key(&openai), "openai-.._Qwen_Qwen3-8B");
        let keyless =
            EngineChoice::OpenAi { key: KeySource::None, tools_in_text: true, url: "http://10.0.0.2:8080/v1".into(), model: "../Qwen/Qwen3-8B".into() };
        assert_eq!(model_key(&keyless), model_key(&openai), "where the key comes from and where the server is do not make another calibration");
        assert_eq!(stored_path(std::path::Path::new("/d"), &model_key(&openai)), std::path::Path::new("/d/calibration/openai-.._Qwen_Qwen3-8B.json"));
    }

    #[test]
    fn the_recommendation_keeps_most_by_likelihood_then_goes_furthest_then_is_fastest() {
        let with_r = |mut r: CalibrationRow, x: f64| {
            r.retention = Some(x);
            r.retention_probes = 4;
            r
        };
        // Without R anywhere: the route, then time.
        let rows = vec![row("masking", 0.75, 4, 4, 0, 30.0), row("v1", 0.75, 6, 1, 0, 90.0), row("v2", 0.75, 6, 2, 1, 95.0), row("v2", 0.9, 6, 2, 1, 80.0)];
        let (r, why) = recommend(&rows);
        assert_eq!(r, Some(Recommendation { strategy: "v2".into(), ratio: 0.9 }));
        assert!(why.contains("6/6 calls") && why.contains("no run could be scored"), "{why}");
        // R first: a higher R beats a longer route; a row without R ranks last.
        let rows = vec![
            with_r(row("masking", 0.75, 4, 4, 0, 15.0), 0.81),
            with_r(row("v1", 0.75, 6, 1, 0, 90.0), 0.42),
            row("v2", 0.9, 6, 2, 1, 10.0),
            with_r(row("v2", 0.6, 4, 2, 1, 20.0), 0.81),
        ];
        let (r, why) = recommend(&rows);
        assert_eq!(r, Some(Recommendation { strategy: "masking".into(), ratio: 0.75 }), "equal R and route: the faster");
        assert!(why.contains("R 0.81 over 4 probes") && why.contains("4/6 calls"), "{why}");
        assert_eq!(recommend(&[]).0, None);
    }
}
