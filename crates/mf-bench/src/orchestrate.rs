//! A benchmark run as a face starts it: a request checked against the
//! scenario and model folders ([`BenchJob::prepare`]), then every model one
//! after the other on a thread of its own ([`spawn`]), each step reported as
//! a [`BenchEvent`], cancellable through [`BenchRun::cancel`]. The app's
//! benchmark panel is an adapter over this (parse, call, forward events);
//! the context size and threads come from the face's settings.

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
use crate::run::run_suite;

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
    models: Vec<PathBuf>,
    scenarios: Vec<LoadedScenario>,
    cfg: RunConfig,
    n_ctx: u32,
    threads: Option<i32>,
    judge: Option<JudgeRequest>,
}

impl BenchJob {
    /// Checks `request` and loads its scenarios.
    ///
    /// # Errors
    /// [`BenchError::NothingChosen`], [`BenchError::RepsOutOfRange`],
    /// [`BenchError::ModelFileMissing`], [`BenchError::UnknownScenarios`],
    /// an unknown condition or scorer, an unreadable scenario.
    pub fn prepare(request: &BenchRequest, env: &Environment) -> Result<BenchJob> {
        if request.models.is_empty() {
            return Err(BenchError::NothingChosen("model"));
        }
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
        let mut models = Vec::new();
        for m in &request.models {
            let p = PathBuf::from(m);
            let path = if p.is_absolute() { p } else { env.models_dir.join(m) };
            if !path.is_file() {
                return Err(BenchError::ModelFileMissing(path));
            }
            models.push(path);
        }
        let scenarios: Vec<LoadedScenario> =
            load::load_dir(&env.scenarios_dir, &request.scenarios)?.into_iter().filter(|s| request.scenarios.contains(&s.scenario.id)).collect();
        let missing: Vec<String> = request.scenarios.iter().filter(|id| !scenarios.iter().any(|s| &s.scenario.id == *id)).cloned().collect();
        if !missing.is_empty() {
            return Err(BenchError::UnknownScenarios(missing));
        }
        let cfg = RunConfig { conditions, scorers, reps: request.reps, scenarios_dir: env.scenarios_dir.display().to_string(), ..RunConfig::default() };
        let judge = request.judge.clone().filter(|_| scorers.judge);
        Ok(BenchJob { models, scenarios, cfg, n_ctx: env.n_ctx, threads: env.threads, judge })
    }

    fn per_model(&self) -> u64 {
        u64::from(self.cfg.reps) * self.scenarios.len() as u64 * self.cfg.conditions.len() as u64
    }

    /// Steps in all (models × reps × scenarios × conditions).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.per_model() * self.models.len() as u64
    }

    fn run_model(&self, path: &Path, offset: u64, run: &BenchRun, send: &dyn Fn(BenchEvent)) -> Result<ModelResult> {
        if run.cancel.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        let choice = mf_agent::EngineChoice::Embedded { model: path.to_path_buf(), threads: self.threads, gpu: false, tool_grammar: false };
        let model = Model::load(&choice, self.n_ctx)?.with_cancel(run.cancel.clone());
        let judge = match &self.judge {
            Some(j) => Some(j.load(self.n_ctx)?.with_cancel(run.cancel.clone())),
            None => None,
        };
        let total = self.total();
        run_suite(&model, judge.as_ref(), &self.scenarios, &self.cfg, &mut |p| {
            send(BenchEvent::Progress { done: offset + p.done, total, label: p.label });
        })
    }

    /// Runs every model in turn on this thread: `started`, progress, one
    /// `model_result` per model, then `finished`, or `cancelled` / `error`
    /// (which end the run).
    pub fn run(&self, run_id: &str, run: &BenchRun, send: &dyn Fn(BenchEvent)) {
        send(BenchEvent::Started { run_id: run_id.to_owned(), total: self.total() });
        for (i, path) in self.models.iter().enumerate() {
            let outcome = self.run_model(path, self.per_model() * i as u64, run, send);
            match outcome {
                _ if run.cancel.is_cancelled() => {
                    send(BenchEvent::Cancelled);
                    return;
                }
                Ok(r) => {
                    if let Ok(mut all) = run.results.lock() {
                        all.push(r.clone());
                    }
                    send(BenchEvent::ModelResult { result: Box::new(r) });
                }
                Err(e) => {
                    send(BenchEvent::Error { message: format!("{}: {e}", path.display()) });
                    return;
                }
            }
        }
        send(BenchEvent::Finished);
    }
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
        assert_eq!(with.judge, j);
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
