//! The one orchestrator of the scenario suite, for every face: a checked
//! job ([`BenchJob`]: the app's request through [`BenchJob::prepare`], the
//! binary's flags through [`BenchJob::new`]), then every model one after the
//! other, each on its workers ([`run_suite_parallel`]), each step reported as
//! a [`BenchEvent`], cancellable through [`BenchRun::cancel`]
//! ([`BenchJob::execute`]; [`spawn`] runs it on a thread of its own). The
//! app's benchmark panel and `bench-forgetting` are adapters over this: they
//! parse, call, and show the events; [`write_results`] keeps the results file
//! both write.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mf_inference::CancelToken;
use serde::{Deserialize, Serialize};

use crate::Condition;
use crate::config::{RunConfig, Scorers, enum_name};
use crate::error::{BenchError, Result};
use crate::events::BenchEvent;
use crate::load::{self, LoadedScenario};
use crate::model::Model;
use crate::results::ModelResult;
use crate::run::{Worker, run_suite_parallel};
use crate::schema;

/// Repetitions a face may ask for.
pub const MAX_REPS: u32 = 100;

/// What a face asks to run (the app's panel sends it as JSON: generated as ui/src/lib/generated/bench-events.ts `BenchRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct BenchRequest {
    /// Model files: names in the models folder, or full paths.
    pub models: Vec<String>,
    /// Scenario ids.
    pub scenarios: Vec<String>,
    /// Condition names (`full`, `baseline`, `masking`, `v1`, `v2`, `v2.1`).
    pub conditions: Vec<String>,
    /// Scorer names (`keyword`, `judge`).
    pub scorers: Vec<String>,
    /// Repetitions, 1 to [`MAX_REPS`].
    pub reps: u32,
    /// Grade with a model on a server instead of the model under test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub judge: Option<JudgeRequest>,
}

/// A judge on a server: it grades the answers instead of the model under
/// test; its control brackets say whether its grades are evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct JudgeRequest {
    /// `openai` (an OpenAI-compatible server; its key from `OPENAI_API_KEY`)
    /// or `ollama`: a judge runs on a server.
    #[cfg_attr(test, ts(type = "'openai' | 'ollama'"))]
    pub engine: mf_agent::EngineKind,
    /// The server's base URL (`http://127.0.0.1:8080/v1`, `http://127.0.0.1:11434`).
    pub url: String,
    /// The model name on the server.
    pub model: String,
}

impl JudgeRequest {
    fn check(&self) -> Result<()> {
        let bad = |reason: String| Err(BenchError::InvalidSetting { name: "judge", reason });
        if self.engine == mf_agent::EngineKind::Embedded {
            return bad("the judge runs on a server: its engine must be openai or ollama".to_owned());
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return bad(format!("the judge's server URL must start with http:// or https:// (got {:?})", self.url));
        }
        if self.model.trim().is_empty() {
            return bad("name the judge's model on its server".to_owned());
        }
        Ok(())
    }

    /// The judge's engine: its server, its model, the key from `OPENAI_API_KEY`.
    #[must_use]
    pub fn choice(&self) -> mf_agent::EngineChoice {
        let (url, model) = (self.url.clone(), self.model.clone());
        match self.engine {
            mf_agent::EngineKind::Ollama => mf_agent::EngineChoice::Ollama { url, model },
            mf_agent::EngineKind::Openai | mf_agent::EngineKind::Embedded => {
                mf_agent::EngineChoice::OpenAi { url, model, tools_in_text: false, key: mf_agent::KeySource::default() }
            }
        }
    }

    /// The judge as a model (no connection is made until it grades).
    ///
    /// # Errors
    /// A URL the client refuses.
    pub fn load(&self, n_ctx: u32) -> Result<Model> {
        Model::load(&self.choice(), n_ctx)
    }
}

/// The model context window the scenario suite runs at: the long scenarios
/// need about 5k tokens uncompressed (the `full` condition), so it is the
/// suite's, not an investigation's, setting (`bench-forgetting --n-ctx`).
pub const SUITE_CONTEXT: u32 = 8192;

/// Where the face keeps models and scenarios, and how it runs a model.
#[derive(Debug, Clone)]
pub struct Environment {
    /// The models folder (relative model names are looked up here).
    pub models_dir: PathBuf,
    /// The scenario folder.
    pub scenarios_dir: PathBuf,
    /// The model's context window ([`SUITE_CONTEXT`] unless the face says otherwise).
    pub n_ctx: u32,
    /// CPU threads (llama.cpp), from the face's settings; `None`: all cores.
    pub threads: Option<i32>,
    /// Model sessions side by side, each with its own KV cache (and its own
    /// copy of the model's context); the threads are shared out among them.
    pub workers: usize,
}

/// One scenario a face lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ScenarioOption {
    /// Its id.
    pub id: String,
    /// Its problem class.
    pub class: String,
}

/// The scenarios of `dir`, for a face's list.
///
/// # Errors
/// A directory or scenario file that cannot be read.
pub fn scenario_options(dir: &Path) -> Result<Vec<ScenarioOption>> {
    Ok(load::load_dir(dir, &[])?.into_iter().map(|s| ScenarioOption { id: s.scenario.id, class: enum_name(&s.scenario.class) }).collect())
}

/// The scorer names a face offers.
pub const SCORERS: [&str; 3] = ["likelihood", "keyword", "judge"];

/// A checked request, ready to run.
#[derive(Debug)]
pub struct BenchJob {
    /// Each model's engine; an in-process one carries its threads per worker.
    models: Vec<mf_agent::EngineChoice>,
    scenarios: Vec<LoadedScenario>,
    cfg: RunConfig,
    n_ctx: u32,
    workers: usize,
    judge: Option<mf_agent::EngineChoice>,
    /// Another model that writes every compaction summary (none: the model under test).
    summariser: Option<mf_agent::EngineChoice>,
}

impl BenchJob {
    /// A job from choices a face has already checked (`bench-forgetting`'s
    /// flags): `models` in order, each run by `workers` sessions side by side
    /// (an in-process model's `threads` are each worker's), graded by `judge`
    /// when the judge scorer runs (the model under test when `None`).
    ///
    /// # Errors
    /// [`BenchError::NothingChosen`] (no model, no scenario, no repetition),
    /// [`BenchError::NoWorkers`], a budget or plan setting out of range.
    pub fn new(
        models: Vec<mf_agent::EngineChoice>,
        scenarios: Vec<LoadedScenario>,
        cfg: RunConfig,
        n_ctx: u32,
        workers: usize,
        judge: Option<mf_agent::EngineChoice>,
    ) -> Result<BenchJob> {
        if models.is_empty() {
            return Err(BenchError::NothingChosen("model"));
        }
        if scenarios.is_empty() {
            return Err(BenchError::NothingChosen("scenario"));
        }
        if cfg.reps == 0 {
            return Err(BenchError::NothingChosen("repetition"));
        }
        if workers == 0 {
            return Err(BenchError::NoWorkers);
        }
        cfg.budget.validate()?;
        cfg.plan.validate()?;
        let judge = judge.filter(|_| cfg.scorers.judge);
        Ok(BenchJob { models, scenarios, cfg, n_ctx, workers, judge, summariser: None })
    }

    /// Has `summariser` (loaded once per worker) write every compaction
    /// summary instead of the model under test, so a run can compare "own
    /// model" with "a stronger summariser"; the results name it.
    #[must_use]
    pub fn with_summariser(mut self, summariser: Option<mf_agent::EngineChoice>) -> Self {
        self.summariser = summariser;
        self
    }

    /// Checks `request` (the app's panel) and loads its scenarios.
    ///
    /// # Errors
    /// [`BenchError::NothingChosen`], [`BenchError::RepsOutOfRange`],
    /// [`BenchError::ModelFileMissing`], [`BenchError::UnknownScenarios`],
    /// an unknown condition or scorer, an unreadable scenario.
    pub fn prepare(request: &BenchRequest, env: &Environment) -> Result<BenchJob> {
        // No model is refused by `new`, before anything loads; no scenario
        // here, since an empty filter would load every scenario.
        if request.scenarios.is_empty() {
            return Err(BenchError::NothingChosen("scenario"));
        }
        if request.reps == 0 || request.reps > MAX_REPS {
            return Err(BenchError::RepsOutOfRange { given: request.reps, max: MAX_REPS });
        }
        let conditions = Condition::parse_list(&request.conditions.join(","))?;
        let scorers = Scorers::parse(&request.scorers.join(","))?;
        if let Some(j) = &request.judge {
            j.check()?;
        }
        let workers = env.workers.max(1);
        // The face's threads, shared out among the workers.
        let threads = env.threads.map(|t| (t / i32::try_from(workers).unwrap_or(i32::MAX)).max(1));
        let mut models = Vec::new();
        for m in &request.models {
            let p = PathBuf::from(m);
            let path = if p.is_absolute() { p } else { env.models_dir.join(m) };
            if !path.is_file() {
                return Err(BenchError::ModelFileMissing(path));
            }
            models.push(mf_agent::EngineChoice::Embedded { model: path, threads, gpu: false, tool_grammar: false });
        }
        let scenarios: Vec<LoadedScenario> =
            load::load_dir(&env.scenarios_dir, &request.scenarios)?.into_iter().filter(|s| request.scenarios.contains(&s.scenario.id)).collect();
        let missing: Vec<String> = request.scenarios.iter().filter(|id| !scenarios.iter().any(|s| &s.scenario.id == *id)).cloned().collect();
        if !missing.is_empty() {
            return Err(BenchError::UnknownScenarios(missing));
        }
        let cfg = RunConfig { conditions, scorers, reps: request.reps, scenarios_dir: env.scenarios_dir.display().to_string(), ..RunConfig::default() };
        let judge = request.judge.as_ref().map(JudgeRequest::choice);
        BenchJob::new(models, scenarios, cfg, env.n_ctx, workers, judge)
    }

    fn per_model(&self) -> u64 {
        u64::from(self.cfg.reps) * self.scenarios.len() as u64 * self.cfg.conditions.len() as u64
    }

    /// Steps in all (models × reps × scenarios × conditions).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.per_model() * self.models.len() as u64
    }

    /// The models' names as the results will carry them, in run order.
    #[must_use]
    pub fn model_labels(&self) -> Vec<String> {
        self.models.iter().map(mf_agent::EngineChoice::model_label).collect()
    }

    fn run_model(&self, choice: &mf_agent::EngineChoice, index: usize, run: &BenchRun, send: &dyn Fn(BenchEvent)) -> Result<ModelResult> {
        let mut workers = Vec::with_capacity(self.workers);
        for _ in 0..self.workers {
            if run.cancel.is_cancelled() {
                return Err(BenchError::Cancelled);
            }
            let mut model = Model::load(choice, self.n_ctx)?.with_cancel(run.cancel.clone());
            if let Some(s) = &self.summariser {
                model = model.with_summariser(Model::load(s, self.n_ctx)?);
            }
            let judge = match &self.judge {
                Some(j) => Some(Model::load(j, self.n_ctx)?.with_cancel(run.cancel.clone())),
                None => None,
            };
            workers.push(Worker { model, judge });
        }
        let local = workers[0].model.reports_kv;
        let (total, before, models) = (self.total(), index as u64, self.models.len() as u64);
        let mut r = run_suite_parallel(workers, &self.scenarios, &self.cfg, &mut |p| {
            // Every model runs the same steps: the models before this one did all of theirs.
            send(BenchEvent::Progress {
                done: self.per_model() * before + p.done,
                total,
                label: p.label,
                work_done: p.work_total * before + p.work_done,
                work_total: p.work_total * models,
            });
        })?;
        if local && let mf_agent::EngineChoice::Embedded { threads: Some(t), .. } = choice {
            r.speed.threads_per_worker = Some(*t);
        }
        Ok(r)
    }

    /// Runs every model in turn on this thread, reporting `started`,
    /// progress and one `model_result` per model (not `finished`,
    /// `cancelled` or `error`: the caller has the outcome). Returns every
    /// model's results.
    ///
    /// # Errors
    /// [`BenchError::Cancelled`] when the run was cancelled (no result for
    /// the model it was on); [`BenchError::Model`] naming the model whose
    /// load or run failed.
    pub fn execute(&self, run_id: &str, run: &BenchRun, send: &dyn Fn(BenchEvent)) -> Result<Vec<ModelResult>> {
        send(BenchEvent::Started { run_id: run_id.to_owned(), total: self.total() });
        let mut all = Vec::with_capacity(self.models.len());
        for (i, choice) in self.models.iter().enumerate() {
            let outcome = self.run_model(choice, i, run, send);
            if run.cancel.is_cancelled() {
                return Err(BenchError::Cancelled);
            }
            let r = outcome.map_err(|e| BenchError::Model { model: choice.model_label(), source: Box::new(e) })?;
            if let Ok(mut kept) = run.results.lock() {
                kept.push(r.clone());
            }
            send(BenchEvent::ModelResult { result: Box::new(r.clone()) });
            all.push(r);
        }
        Ok(all)
    }

    /// Runs every model in turn on this thread: `started`, progress, one
    /// `model_result` per model, then `finished`, or `cancelled` / `error`
    /// (which end the run).
    pub fn run(&self, run_id: &str, run: &BenchRun, send: &dyn Fn(BenchEvent)) {
        match self.execute(run_id, run, send) {
            Ok(_) => send(BenchEvent::Finished),
            Err(BenchError::Cancelled) => send(BenchEvent::Cancelled),
            Err(e) => send(BenchEvent::Error { message: e.to_string() }),
        }
    }
}

/// The results JSON of a run (an array with one object per model, what
/// `bench-forgetting --json` prints), checked against the documented schema,
/// and written to `out` when one is given. A run of an hour is not thrown
/// away for a schema mismatch: the results then go beside `out` as
/// `NAME.rejected.json`, and the error says where.
///
/// # Errors
/// [`BenchError::Schema`] (the results were kept as said), [`BenchError::WriteFile`].
pub fn write_results(results: &[ModelResult], out: Option<&Path>) -> Result<String> {
    let json = serde_json::to_string_pretty(results)?;
    let write = |path: &Path| std::fs::write(path, &json).map_err(|source| BenchError::WriteFile { path: path.to_path_buf(), source });
    if let Err(e) = schema::validate_results(&serde_json::from_str(&json)?) {
        return Err(match out {
            Some(out) => {
                let kept = out.with_extension("rejected.json");
                write(&kept)?;
                let why = match e {
                    BenchError::Schema(why) => why,
                    other => other.to_string(),
                };
                BenchError::Schema(format!("{why}; the results were written to {} instead of {}", kept.display(), out.display()))
            }
            None => e,
        });
    }
    if let Some(out) = out {
        write(out)?;
    }
    Ok(json)
}

/// A run in progress: its cancel token and its results so far.
#[derive(Debug, Default)]
pub struct BenchRun {
    /// Every model of the run generates with it (`Model::with_cancel`), so
    /// the call in progress stops at its next token and the run reports
    /// `cancelled` with no result for the model it was on.
    cancel: CancelToken,
    results: Mutex<Vec<ModelResult>>,
}

impl BenchRun {
    /// Cancels the run. (A model still loading finishes loading first.)
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The results of the models finished so far.
    pub fn results(&self) -> Vec<ModelResult> {
        self.results.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// Runs `job` on a thread of its own (see [`BenchJob::run`]).
///
/// # Errors
/// [`BenchError::Thread`] when the thread cannot start.
pub fn spawn(job: BenchJob, run_id: String, run: Arc<BenchRun>, send: impl Fn(BenchEvent) + Send + 'static) -> Result<()> {
    std::thread::Builder::new().name("benchmark".into()).spawn(move || job.run(&run_id, &run, &send)).map_err(BenchError::Thread)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env(dir: &Path) -> Environment {
        Environment {
            models_dir: dir.to_path_buf(),
            scenarios_dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction"),
            n_ctx: 4096,
            threads: Some(1),
            workers: 1,
        }
    }

    fn request() -> BenchRequest {
        BenchRequest {
            models: vec!["m.gguf".into()],
            scenarios: vec!["lookup-short".into()],
            conditions: vec!["baseline".into(), "v2".into()],
            scorers: vec!["keyword".into()],
            reps: 2,
            judge: None,
        }
    }

    #[test]
    fn a_request_is_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let e = env(dir.path());
        let err = |r: BenchRequest| BenchJob::prepare(&r, &e).unwrap_err();
        assert!(matches!(err(BenchRequest { models: vec![], ..request() }), BenchError::NothingChosen("model")));
        assert!(matches!(err(BenchRequest { scenarios: vec![], ..request() }), BenchError::NothingChosen("scenario")));
        assert!(matches!(err(BenchRequest { reps: 0, ..request() }), BenchError::RepsOutOfRange { given: 0, .. }));
        assert!(matches!(err(BenchRequest { reps: 101, ..request() }), BenchError::RepsOutOfRange { given: 101, .. }));
        assert!(matches!(err(request()), BenchError::ModelFileMissing(p) if p == dir.path().join("m.gguf")));
        std::fs::write(dir.path().join("m.gguf"), b"x").unwrap();
        match err(BenchRequest { scenarios: vec!["lookup-short".into(), "nope".into()], ..request() }) {
            BenchError::UnknownScenarios(v) => assert_eq!(v, vec!["nope".to_owned()]),
            other => panic!("{other}"),
        }
        assert!(err(BenchRequest { conditions: vec!["v3".into()], ..request() }).to_string().contains("v3"));
        let judge = |engine: &str, url: &str, model: &str| {
            Some(JudgeRequest { engine: serde_json::from_value(serde_json::json!(engine)).unwrap(), url: url.into(), model: model.into() })
        };
        let unknown = serde_json::json!({"engine": "vllm", "url": "http://127.0.0.1:8080/v1", "model": "m"});
        assert!(
            serde_json::from_value::<JudgeRequest>(unknown).unwrap_err().to_string().contains("vllm"),
            "an engine that is none of the kinds does not parse"
        );
        for (j, says) in [
            (judge("embedded", "http://127.0.0.1:8080/v1", "m"), "openai or ollama"),
            (judge("openai", "127.0.0.1:8080", "m"), "http://"),
            (judge("ollama", "http://127.0.0.1:11434", " "), "name the judge's model"),
        ] {
            let e = err(BenchRequest { judge: j, ..request() }).to_string();
            assert!(e.contains("judge") && e.contains(says), "{e}");
        }
        let job = BenchJob::prepare(&request(), &e).unwrap();
        assert_eq!(job.total(), 2 * 2);
        assert_eq!(job.n_ctx, 4096);
        // A judge is kept only when the judge scorer runs.
        let j = judge("openai", "http://127.0.0.1:8080/v1", "big-judge");
        assert!(BenchJob::prepare(&BenchRequest { judge: j.clone(), ..request() }, &e).unwrap().judge.is_none());
        let with = BenchJob::prepare(&BenchRequest { judge: j.clone(), scorers: vec!["keyword".into(), "judge".into()], ..request() }, &e).unwrap();
        assert_eq!(with.judge, j.as_ref().map(JudgeRequest::choice));
        // The face's threads are shared out among its workers.
        let two = BenchJob::prepare(&request(), &Environment { threads: Some(4), workers: 2, ..e.clone() }).unwrap();
        assert_eq!(two.workers, 2);
        assert!(matches!(&two.models[0], mf_agent::EngineChoice::Embedded { threads: Some(2), .. }), "{:?}", two.models[0]);
    }

    #[test]
    fn a_job_from_flags_is_checked_too() {
        let dir = tempfile::tempdir().unwrap();
        let e = env(dir.path());
        std::fs::write(dir.path().join("m.gguf"), b"x").unwrap();
        let job = BenchJob::prepare(&request(), &e).unwrap();
        let model = || job.models.clone();
        let new = |models, scenarios: Vec<LoadedScenario>, cfg: RunConfig, workers| BenchJob::new(models, scenarios, cfg, 4096, workers, None);
        assert!(matches!(new(vec![], job.scenarios.clone(), job.cfg.clone(), 1).unwrap_err(), BenchError::NothingChosen("model")));
        assert!(matches!(new(model(), vec![], job.cfg.clone(), 1).unwrap_err(), BenchError::NothingChosen("scenario")));
        assert!(matches!(
            new(model(), job.scenarios.clone(), RunConfig { reps: 0, ..job.cfg.clone() }, 1).unwrap_err(),
            BenchError::NothingChosen("repetition")
        ));
        assert!(matches!(new(model(), job.scenarios.clone(), job.cfg.clone(), 0).unwrap_err(), BenchError::NoWorkers));
        let mut bad = job.cfg.clone();
        bad.budget.reserve = bad.budget.context;
        assert!(new(model(), job.scenarios.clone(), bad, 1).is_err(), "a budget with no room is refused before a model loads");
    }

    #[test]
    fn results_that_miss_the_schema_are_kept_beside_the_file_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        // An empty run is valid JSON for the schema (an array of models).
        assert_eq!(write_results(&[], Some(&out)).unwrap().trim(), "[]");
        assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "[]");
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/suite-smollm2-short-likelihood.json");
        let mut bad: Vec<ModelResult> = serde_json::from_str(&std::fs::read_to_string(committed).unwrap()).unwrap();
        assert!(write_results(&bad, None).is_ok(), "a committed results file passes");
        // Not a number: serialised as null, which the schema refuses.
        bad[0].wall_s = f64::NAN;
        let err = write_results(&bad, Some(&dir.path().join("s.json"))).unwrap_err().to_string();
        let kept = dir.path().join("s.rejected.json");
        assert!(err.contains(&kept.display().to_string()) && err.contains("instead of"), "{err}");
        assert!(kept.is_file() && !dir.path().join("s.json").exists());
        let unwritable = dir.path().join("no-such-dir").join("r.json");
        assert!(matches!(write_results(&[], Some(&unwritable)).unwrap_err(), BenchError::WriteFile { path, .. } if path == unwritable));
    }

    #[test]
    fn a_model_that_cannot_load_ends_the_run_with_an_error_event() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.gguf"), b"not a model").unwrap();
        let job = BenchJob::prepare(&request(), &env(dir.path())).unwrap();
        let seen = Mutex::new(Vec::new());
        job.run("bench-1", &BenchRun::default(), &|e| seen.lock().unwrap().push(serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_owned()));
        assert_eq!(seen.into_inner().unwrap(), vec!["started", "error"]);
    }
}
