//! The agentic matrix as one job: every world × every strategy on one
//! in-process model ([`AgenticJob::execute`]), each run from an empty KV
//! cache, each world's probes scored by likelihood once its strategies have
//! run, the results file rewritten after every run so a job that stops early
//! keeps every run that finished. `bench-forgetting agentic` parses its flags
//! into an [`AgenticJob`] and prints what it reports ([`progress_line`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use mf_forgetting::Budget;
use mf_inference::{Backend, LlamaConfig, LlamaSession};

use super::{AgenticConfig, AgenticResult, AgenticRun, AgenticSettings, LoadedWorld, likelihood_summary, run_all, summarise, validate_agentic};
use crate::error::{BenchError, Result};

/// The model an agentic job runs, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct AgenticModel {
    /// The GGUF file (run in-process).
    pub path: PathBuf,
    /// The runs' context window `C` (small, so that it fills within a few rounds).
    pub n_ctx: u32,
    /// CPU threads (`None`: all cores).
    pub threads: Option<i32>,
    /// Hold fenced-JSON tool calls to the tools' schemas by a lazy grammar.
    pub tool_grammar: bool,
    /// The scoring session's window, when the worlds' probes are scored by
    /// likelihood: it must hold a world's uncompacted history. `None`: no
    /// scoring.
    pub score_ctx: Option<u32>,
}

/// A checked agentic job.
#[derive(Debug)]
pub struct AgenticJob {
    model: AgenticModel,
    worlds: Vec<LoadedWorld>,
    worlds_dir: PathBuf,
    cfg: AgenticConfig,
}

impl AgenticJob {
    /// A job over `worlds` (read from `worlds_dir`) under `cfg` on `model`.
    ///
    /// # Errors
    /// [`BenchError::NothingChosen`] (no world, no strategy),
    /// [`BenchError::InvalidSetting`] (threads below 1, a ratio or reserve
    /// the budget refuses).
    pub fn new(model: AgenticModel, worlds: Vec<LoadedWorld>, worlds_dir: &Path, cfg: AgenticConfig) -> Result<AgenticJob> {
        if worlds.is_empty() {
            return Err(BenchError::NothingChosen("world"));
        }
        if cfg.strategies.is_empty() {
            return Err(BenchError::NothingChosen("strategy"));
        }
        if model.threads.is_some_and(|t| t < 1) {
            return Err(BenchError::InvalidSetting { name: "threads", reason: "at least 1".to_owned() });
        }
        budget(&model, &cfg).validate()?;
        Ok(AgenticJob { model, worlds, worlds_dir: worlds_dir.to_path_buf(), cfg })
    }

    /// Runs every world under every strategy, in order. After each run (and
    /// after each world's scoring) `progress` sees the runs so far, and the
    /// results are written to `out` when one is given.
    ///
    /// A run that fails is a failed row of the results and the next one
    /// runs ([`run_all`]); count them in the returned result's runs.
    ///
    /// # Errors
    /// The model cannot load (for the runs or for scoring), the runtime
    /// cannot start, the results cannot be written or miss the schema.
    pub fn execute(&self, out: Option<&Path>, progress: &mut dyn FnMut(&[AgenticRun])) -> Result<AgenticResult> {
        let m = &self.model;
        let label = m.path.display().to_string();
        let load = |n_ctx: u32| {
            let mut lc = LlamaConfig::new(&m.path).with_n_ctx(n_ctx);
            lc.n_threads = m.threads;
            lc.tool_grammar = m.tool_grammar;
            LlamaSession::load(lc).map_err(|e| BenchError::Model { model: label.clone(), source: Box::new(e.into()) })
        };
        let session = Arc::new(load(m.n_ctx)?);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(BenchError::Runtime)?;
        let t0 = Instant::now();
        let info = Backend::model_info(session.as_ref());
        // The scorer: a second session on the same file whose window holds a
        // world's uncompacted history (the runs' window is kept small on purpose).
        let scorer = match m.score_ctx {
            Some(n) => Some(load(n)?),
            None => None,
        };
        let settings = AgenticSettings {
            backend: info.backend.clone(),
            driver: self.cfg.driver.as_str().to_owned(),
            n_ctx: info.context_size,
            reserve: self.cfg.reserve,
            ratio: self.cfg.ratio,
            threshold: u32::try_from(budget(m, &self.cfg).threshold()).unwrap_or(u32::MAX),
            max_result_chars: self.cfg.max_result_chars,
            summary_max_tokens: self.cfg.summary_max_tokens,
            max_rounds: self.cfg.max_rounds,
            sampling: "greedy, thinking off".to_owned(),
            tool_grammar: m.tool_grammar,
            worlds: self.worlds.iter().map(|w| w.world.id.clone()).collect(),
            worlds_dir: self.worlds_dir.display().to_string(),
            // The window the scorer really has (a model clamps it to its training context).
            score_ctx: scorer.as_ref().map(Backend::context_size),
        };
        let strategy_names: Vec<&str> = self.cfg.strategies.iter().map(|s| s.as_str()).collect();
        let result = |runs: &[AgenticRun]| AgenticResult {
            model: info.name.clone(),
            summary: summarise(runs, &self.cfg.strategies),
            runs: runs.to_vec(),
            settings: settings.clone(),
            wall_s: t0.elapsed().as_secs_f64(),
            likelihood: likelihood_summary(runs, &strategy_names),
        };
        let mut clear = || -> Result<Arc<dyn Backend>> {
            // Every run starts from an empty KV cache: greedy replies after a
            // reused prefix can differ from a fresh decode, so without this the
            // first strategy of a world would run under other conditions.
            session.clear_blocking()?;
            let backend: Arc<dyn Backend> = session.clone();
            Ok(backend)
        };
        let mut done = |runs: &[AgenticRun]| -> Result<()> {
            progress(runs);
            write_agentic(&result(runs), out).map(drop)
        };
        let worlds: Vec<&super::World> = self.worlds.iter().map(|lw| &lw.world).collect();
        let runs = run_all(&rt, &worlds, &self.cfg, &mut clear, scorer.as_ref().map(|s| s as &dyn Backend), &mut done)?;
        let last = result(&runs);
        write_agentic(&last, out)?;
        Ok(last)
    }
}

/// The budget the runs compact by: `C` of the model, `G` and the ratio of the config.
fn budget(model: &AgenticModel, cfg: &AgenticConfig) -> Budget {
    Budget { context: model.n_ctx as usize, reserve: cfg.reserve as usize, ratio: cfg.ratio, ..Budget::default() }
}

/// The results JSON of one agentic job (an array of one result, what
/// `bench-forgetting agentic --json` prints), checked against the schema and
/// written to `out` when one is given.
///
/// # Errors
/// [`BenchError::Schema`], [`BenchError::WriteFile`].
pub fn write_agentic(result: &AgenticResult, out: Option<&Path>) -> Result<String> {
    let json = serde_json::to_string_pretty(std::slice::from_ref(result))?;
    validate_agentic(&serde_json::from_str(&json)?)?;
    if let Some(out) = out {
        std::fs::write(out, &json).map_err(|source| BenchError::WriteFile { path: out.to_path_buf(), source })?;
    }
    Ok(json)
}

/// One line on the latest of `runs` (`at` seconds into the job): how the run
/// went, or, after a world's scoring, what the scoring found.
#[must_use]
pub fn progress_line(runs: &[AgenticRun], at: f64) -> Option<String> {
    let r = runs.last()?;
    if let Some(l) = &r.likelihood {
        let scored: Vec<&AgenticRun> = runs.iter().filter(|x| x.world == r.world && x.likelihood.is_some()).collect();
        let unscored: usize = scored.iter().filter_map(|x| x.likelihood.as_ref()).map(|l| l.unscored.len()).sum();
        return Some(format!(
            "[{at:>6.0} s] {}: scored by likelihood on {} run(s) (ceiling: the {} run's {} messages){}",
            r.world,
            scored.len(),
            l.ceiling_from,
            l.ceiling_messages,
            if unscored > 0 { format!(", {unscored} probe score(s) missing (see `unscored`)") } else { String::new() }
        ));
    }
    Some(match &r.failure {
        Some(f) => format!("[{at:>6.0} s] {} · {} · {}: FAILED ({}): {}", r.world, r.driver, r.strategy, f.kind, f.message),
        None => format!(
            "[{at:>6.0} s] {} · {} · {}: {} rounds, route {}/{}, compactions {} planned / {} done / {} refused, peak {:.0} %, exit {}, facts fetched {} · kept {}+{} · in answer {}/{}{}",
            r.world,
            r.driver,
            r.strategy,
            r.rounds,
            r.route_fetched,
            r.route_total,
            r.compactions,
            r.compactions_done,
            r.compactions_refused,
            r.peak_use() * 100.0,
            r.exit,
            r.facts_fetched,
            r.facts_verbatim,
            r.facts_in_summary,
            r.facts_held,
            r.probes.len(),
            if r.confabulated { ", confabulated" } else { "" }
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn model() -> AgenticModel {
        AgenticModel { path: PathBuf::from("m.gguf"), n_ctx: 2048, threads: Some(1), tool_grammar: true, score_ctx: None }
    }

    #[test]
    fn a_job_is_checked_before_a_model_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/agentic");
        let worlds = super::super::load_worlds(&dir, &["cdn-purge-storm".to_owned()]).unwrap();
        let job = |m: AgenticModel, w: Vec<LoadedWorld>, cfg: AgenticConfig| AgenticJob::new(m, w, &dir, cfg).map(drop);
        assert!(matches!(job(model(), vec![], AgenticConfig::default()).unwrap_err(), BenchError::NothingChosen("world")));
        let none = AgenticConfig { strategies: vec![], ..AgenticConfig::default() };
        assert!(matches!(job(model(), worlds.clone(), none).unwrap_err(), BenchError::NothingChosen("strategy")));
        let e = job(AgenticModel { threads: Some(0), ..model() }, worlds.clone(), AgenticConfig::default()).unwrap_err();
        assert!(matches!(e, BenchError::InvalidSetting { name: "threads", .. }), "{e}");
        // A reserve that leaves no room below the window.
        assert!(job(model(), worlds.clone(), AgenticConfig { reserve: 4096, ..AgenticConfig::default() }).is_err());
        job(model(), worlds, AgenticConfig::default()).unwrap();
    }

    #[test]
    fn a_model_that_cannot_load_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broken.gguf");
        std::fs::write(&file, b"not a model").unwrap();
        let wdir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/agentic");
        let worlds = super::super::load_worlds(&wdir, &["cdn-purge-storm".to_owned()]).unwrap();
        let job = AgenticJob::new(AgenticModel { path: file.clone(), ..model() }, worlds, &wdir, AgenticConfig::default()).unwrap();
        let out = dir.path().join("r.json");
        let e = job.execute(Some(&out), &mut |_| panic!("nothing ran")).unwrap_err();
        assert!(matches!(&e, BenchError::Model { model, .. } if model.contains("broken.gguf")), "{e}");
        assert!(!out.exists(), "no results file for a job that never ran");
    }
}
