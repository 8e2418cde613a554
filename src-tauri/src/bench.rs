//! Benchmark commands: the panel's options, a run in the background with
//! progress on an `ipc::Channel`, cancel, and export. The run itself is
//! `mf_bench::run_suite`, the same code `bench-forgetting` runs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mf_bench::{Condition, Model, ModelResult, RunConfig, Scorers, load, report, run_suite};
use mf_inference::{CancelToken, LlamaConfig, LlamaSession};
use serde::{Deserialize, Serialize};
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};

/// What the panel offers (ui/src/lib/api.ts `BenchOptions`).
#[derive(Debug, Clone, Serialize)]
pub struct BenchOptions {
    /// Model files (names in `models/`, or a full path for the settings' model elsewhere).
    pub models: Vec<String>,
    /// Scenarios with their class.
    pub scenarios: Vec<ScenarioOption>,
    /// Condition names.
    pub conditions: Vec<String>,
    /// Scorer names.
    pub scorers: Vec<String>,
}

/// One scenario the panel lists.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioOption {
    /// Its id.
    pub id: String,
    /// Its problem class.
    pub class: String,
}

/// What the panel asks to run (ui/src/lib/api.ts `BenchRequest`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchRequest {
    /// Models as offered.
    pub models: Vec<String>,
    /// Scenario ids.
    pub scenarios: Vec<String>,
    /// Condition names.
    pub conditions: Vec<String>,
    /// Scorer names.
    pub scorers: Vec<String>,
    /// Repetitions.
    pub reps: u32,
}

/// What the run reports (ui/src/lib/api.ts `BenchEvent`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BenchEvent {
    /// The run began.
    Started {
        /// Its id.
        run_id: String,
        /// Steps in all (models × reps × scenarios × conditions).
        total: u64,
    },
    /// One step done.
    Progress {
        /// Steps done.
        done: u64,
        /// Steps in all.
        total: u64,
        /// What was just done.
        label: String,
    },
    /// One model finished.
    ModelResult {
        /// Everything measured for it.
        result: Box<ModelResult>,
    },
    /// All models finished.
    Finished,
    /// Stopped by the user.
    Cancelled,
    /// The run failed.
    Error {
        /// Why.
        message: String,
    },
}

/// A run of this process.
#[derive(Default)]
pub struct BenchRun {
    /// Cancelled by `cancel_benchmark`: every model of the run generates with
    /// it (`mf_bench::Model::with_cancel`), so the call in progress stops at
    /// its next token and `run_suite` ends with `BenchError::Cancelled`.
    cancel: CancelToken,
    /// Results so far.
    results: Mutex<Vec<ModelResult>>,
}

impl BenchRun {
    /// Cancels the run (see [`cancel_benchmark`]).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// Runs of this process by id.
pub type BenchRuns = Mutex<HashMap<String, Arc<BenchRun>>>;

/// The panel's choices: models on disk, scenarios, conditions, scorers.
#[tauri::command]
pub fn bench_options(state: State<'_, AppState>) -> CmdResult<BenchOptions> {
    let mut models: Vec<String> = crate::models::local_models(&state.paths.models)?.into_iter().map(|m| m.name).collect();
    let chosen = PathBuf::from(state.settings()?.model_path);
    if chosen.is_file() && chosen.parent() != Some(state.paths.models.as_path()) {
        models.push(chosen.display().to_string());
    }
    let scenarios = load::load_dir(&state.paths.scenarios, &[])?
        .into_iter()
        .map(|s| ScenarioOption { id: s.scenario.id, class: mf_bench::run::enum_name(&s.scenario.class) })
        .collect();
    Ok(BenchOptions {
        models,
        scenarios,
        conditions: Condition::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
        scorers: vec!["keyword".into(), "judge".into()],
    })
}

/// Starts a benchmark run in the background; its events stream to `on_event`. Returns the run id.
#[tauri::command]
pub fn run_benchmark(state: State<'_, AppState>, request: BenchRequest, on_event: Channel<BenchEvent>) -> CmdResult<String> {
    start(&state, request, move |e| {
        let _ = on_event.send(e);
    })
}

/// What `run_benchmark` does, with the events going to `send`: checks the
/// request, then runs each model on a thread of its own. Returns the run id.
///
/// # Errors
/// `invalid` / `bench` for a request that cannot run.
pub fn start(state: &AppState, request: BenchRequest, send: impl Fn(BenchEvent) + Send + 'static) -> CmdResult<String> {
    if request.models.is_empty() {
        return Err(CommandError::invalid("Choose at least one model."));
    }
    if request.scenarios.is_empty() {
        return Err(CommandError::invalid("Choose at least one scenario."));
    }
    if request.reps == 0 || request.reps > 100 {
        return Err(CommandError::invalid("Repetitions must be from 1 to 100."));
    }
    let conditions = Condition::parse_list(&request.conditions.join(","))?;
    let scorers = Scorers::parse(&request.scorers.join(","))?;
    let mut models = Vec::new();
    for m in &request.models {
        let p = PathBuf::from(m);
        let path = if p.is_absolute() { p } else { state.paths.models.join(m) };
        if !path.is_file() {
            return Err(CommandError::invalid(format!("No model file {}.", path.display())));
        }
        models.push(path);
    }
    let scenarios: Vec<_> = load::load_dir(&state.paths.scenarios, &request.scenarios)?
        .into_iter()
        .filter(|s| request.scenarios.contains(&s.scenario.id))
        .collect();
    if scenarios.len() != request.scenarios.len() {
        return Err(CommandError::invalid("Some chosen scenarios do not exist."));
    }
    let threads = i32::try_from(state.settings()?.threads).ok();
    let cfg = RunConfig { conditions, scorers, reps: request.reps, scenarios_dir: state.paths.scenarios.display().to_string(), ..RunConfig::default() };
    let per_model = u64::from(cfg.reps) * scenarios.len() as u64 * cfg.conditions.len() as u64;
    let total = per_model * models.len() as u64;
    let run_id = format!("bench-{}", state.next_run_id());
    let run = Arc::new(BenchRun::default());
    state.benches.lock().map_err(|_| CommandError::internal("bench table poisoned"))?.insert(run_id.clone(), run.clone());
    let rid = run_id.clone();
    std::thread::Builder::new()
        .name("benchmark".into())
        .spawn(move || {
            send(BenchEvent::Started { run_id: rid, total });
            let cancelled = || run.cancel.is_cancelled();
            for (i, path) in models.iter().enumerate() {
                let offset = per_model * i as u64;
                let outcome = (|| -> Result<ModelResult, CommandError> {
                    // Long scenarios need ~5k tokens uncompressed (the `full` condition), as in bench-forgetting.
                    let mut lc = LlamaConfig::new(path).with_n_ctx(8192);
                    lc.n_threads = threads;
                    if cancelled() {
                        return Err(mf_bench::BenchError::Cancelled.into());
                    }
                    let session = Arc::new(LlamaSession::load(lc)?);
                    let model = Model::llama(session)?.with_cancel(run.cancel.clone());
                    let r = run_suite(&model, None, &scenarios, &cfg, &mut |p| {
                        send(BenchEvent::Progress { done: offset + p.done, total, label: p.label });
                    })?;
                    Ok(r)
                })();
                match outcome {
                    _ if cancelled() => {
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
                        send(BenchEvent::Error { message: format!("{}: {}", path.display(), e.message) });
                        return;
                    }
                }
            }
            send(BenchEvent::Finished);
        })
        .map_err(|e| CommandError::internal(format!("cannot start the benchmark thread: {e}")))?;
    Ok(run_id)
}

/// Cancels run `run_id`: the generation in progress stops at its next token
/// (or prefill batch), no later call starts, and the run reports `cancelled`
/// with no result for the model it was on. (A model still loading finishes
/// loading first.)
#[tauri::command]
pub fn cancel_benchmark(state: State<'_, AppState>, run_id: String) -> CmdResult<()> {
    state.bench(&run_id)?.cancel();
    Ok(())
}

/// Writes the results of run `run_id` so far into the exports folder, as
/// the results JSON (an array with one object per model, what
/// `bench-forgetting --json` writes) or as Markdown. Returns the file's path.
#[tauri::command]
pub fn export_benchmark(state: State<'_, AppState>, run_id: String, format: String) -> CmdResult<String> {
    export(&state, &run_id, &format)
}

/// What `export_benchmark` does.
///
/// # Errors
/// `not_found`, `invalid` (format), `export` (cannot write).
pub fn export(state: &AppState, run_id: &str, format: &str) -> CmdResult<String> {
    let run = state.bench(run_id)?;
    let results = run.results.lock().map_err(|_| CommandError::internal("results poisoned"))?.clone();
    let (text, ext) = match format {
        "json" => (serde_json::to_string_pretty(&results).map_err(|e| CommandError::internal(e.to_string()))?, "json"),
        "markdown" => (report::markdown(&results), "md"),
        other => return Err(CommandError::invalid(format!("Unknown export format {other:?}; use json or markdown."))),
    };
    let dir = &state.paths.exports;
    let path = dir.join(format!("{run_id}.{ext}"));
    let err = |e: std::io::Error| CommandError::new("export", format!("cannot write {}: {e}", path.display()));
    std::fs::create_dir_all(dir).map_err(err)?;
    std::fs::write(&path, text).map_err(err)?;
    Ok(path.display().to_string())
}
