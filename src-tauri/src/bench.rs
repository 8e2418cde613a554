//! Benchmark commands: an adapter over `mf_bench::orchestrate` (the panel's
//! options, a run in the background with its `BenchEvent`s forwarded to an
//! `ipc::Channel`, cancel, export). The run itself is `mf_bench::BenchJob`,
//! the orchestrator `bench-forgetting` runs too, at the suite's context
//! window (or the settings' when larger) with the settings' threads.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mf_bench::orchestrate::{self, ScenarioOption};
use mf_bench::{BenchError, BenchJob, Condition, Environment, report};
pub use mf_bench::{BenchEvent, BenchRequest, BenchRun};
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};

/// What the panel offers (generated as ui/src/lib/generated/app.ts `BenchOptions`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct BenchOptions {
    /// Model files (names in `models/`, or a full path for the settings' model elsewhere).
    pub models: Vec<String>,
    /// Scenarios with their class.
    #[cfg_attr(test, ts(type = "ScenarioOption[]"))]
    pub scenarios: Vec<ScenarioOption>,
    /// Condition names.
    pub conditions: Vec<String>,
    /// Scorer names.
    pub scorers: Vec<String>,
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
    Ok(BenchOptions {
        models,
        scenarios: orchestrate::scenario_options(&state.paths.scenarios)?,
        conditions: Condition::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
        scorers: orchestrate::SCORERS.iter().map(|s| (*s).to_owned()).collect(),
    })
}

/// Starts a benchmark run in the background; its events stream to `on_event`. Returns the run id.
#[tauri::command]
pub fn run_benchmark(state: State<'_, AppState>, request: BenchRequest, on_event: Channel<BenchEvent>) -> CmdResult<String> {
    start(&state, request, move |e| {
        let _ = on_event.send(e);
    })
}

/// A request the user can fix is `invalid`; anything else is `bench`.
fn request_error(e: BenchError) -> CommandError {
    match e {
        BenchError::NothingChosen(_) | BenchError::RepsOutOfRange { .. } | BenchError::ModelFileMissing(_) | BenchError::UnknownScenarios(_) => {
            CommandError::invalid(e.to_string())
        }
        other => other.into(),
    }
}

/// What `run_benchmark` does, with the events going to `send`: checks the
/// request, then runs each model on a thread of its own. Returns the run id.
///
/// # Errors
/// `invalid` / `bench` for a request that cannot run.
pub fn start(state: &AppState, request: BenchRequest, send: impl Fn(BenchEvent) + Send + 'static) -> CmdResult<String> {
    let settings = state.settings()?;
    let env = Environment {
        models_dir: state.paths.models.clone(),
        scenarios_dir: state.paths.scenarios.clone(),
        // The suite's window, not the investigation's: its scenarios are
        // written for it (the `full` condition holds a long one whole).
        n_ctx: orchestrate::SUITE_CONTEXT.max(settings.context),
        threads: settings.threads.and_then(|t| i32::try_from(t).ok()),
        // One session: the investigation's model may be large, and each
        // worker holds a context of its own.
        workers: 1,
    };
    let job = BenchJob::prepare(&request, &env).map_err(request_error)?;
    let run_id = format!("bench-{}", state.next_run_id());
    let run = Arc::new(BenchRun::default());
    state.benches.lock().map_err(|_| CommandError::internal("bench table poisoned"))?.insert(run_id.clone(), run.clone());
    orchestrate::spawn(job, run_id.clone(), run, send)?;
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
    let results = state.bench(run_id)?.results();
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
