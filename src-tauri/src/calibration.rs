//! Calibration in the app: the recommendation stored for the settings'
//! engine and model (by `mf calibrate` or by the button in Settings), and a run of
//! mf-bench's calibration with its progress on a channel. Taking the
//! recommendation is the user's choice: Settings fills the strategy and
//! ratio, and nothing changes until they are saved.

use std::path::{Path, PathBuf};

use mf_agent::EngineChoice;
use mf_bench::agentic::calibrate::{self, CALIBRATION_CONTEXT, CALIBRATION_WORLD, Calibration, CalibrationConfig, CalibrationRow};
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};

/// What a calibration run reports (generated as ui/src/lib/generated/app.ts `CalibrationEvent`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CalibrationEvent {
    /// One strategy at one ratio measured.
    Progress {
        /// Runs done.
        done: usize,
        /// Runs in all.
        total: usize,
        /// The run just measured.
        #[cfg_attr(test, ts(type = "CalibrationRow"))]
        row: CalibrationRow,
    },
    /// Every run done; the result is stored.
    Finished {
        /// The result.
        #[cfg_attr(test, ts(type = "Calibration"))]
        calibration: Calibration,
    },
    /// The calibration failed.
    Error {
        /// Why.
        message: String,
    },
}

/// The data folder (where the session store is, shared with `mf`).
fn data_dir(state: &AppState) -> PathBuf {
    state.paths.db.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The calibration stored for the settings' model, if any.
#[tauri::command]
pub fn calibration(state: State<'_, AppState>) -> CmdResult<Option<Calibration>> {
    stored(&state)
}

/// What `calibration` returns.
///
/// # Errors
/// Unreadable settings.
pub fn stored(state: &AppState) -> CmdResult<Option<Calibration>> {
    let s = state.settings()?;
    let engine = EngineChoice::named(&s);
    Ok(calibrate::load_stored(&data_dir(state), &calibrate::model_key(&engine)))
}

/// Calibrates the settings' model on a thread of its own (a few minutes on
/// the small test models); the events go to `on_event`.
#[tauri::command]
pub fn calibrate_model(state: State<'_, AppState>, on_event: Channel<CalibrationEvent>) -> CmdResult<()> {
    start(&state, move |e| {
        let _ = on_event.send(e);
    })
}

/// What `calibrate_model` does, with the events going to `send`: the
/// settings' engine and model (a model file, or a server's model), loaded at
/// the calibration's small context.
///
/// # Errors
/// `invalid` when the embedded engine's model file is missing or the
/// calibration world is not there; `internal` when the thread cannot start.
pub fn start(state: &AppState, send: impl Fn(CalibrationEvent) + Send + 'static) -> CmdResult<()> {
    let s = state.settings()?;
    let engine = EngineChoice::resolve(&s).map_err(|e| crate::settings::invalid(&e))?;
    let key = calibrate::model_key(&engine);
    let world = mf_bench::agentic::load_world(&state.paths.worlds, CALIBRATION_WORLD)
        .map_err(|e| CommandError::invalid(e.to_string()))?
        .ok_or_else(|| CommandError::invalid(format!("The calibration world {CALIBRATION_WORLD} is not in {}.", state.paths.worlds.display())))?;
    let dir = data_dir(state);
    let api_key = state.api_key();
    std::thread::Builder::new()
        .name("calibration".into())
        .spawn(move || {
            let run = || -> Result<Calibration, String> {
                let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
                let state_key = api_key.clone();
                let backend = rt.block_on(engine.load(CALIBRATION_CONTEXT, api_key)).map_err(|e| format!("cannot load {}: {e}", engine.model_label()))?;
                let mut progress = |done, total, row: &CalibrationRow| send(CalibrationEvent::Progress { done, total, row: row.clone() });
                // The runs are scored on a second session whose window holds the route's uncompacted history.
                let scorer = rt
                    .block_on(engine.load(calibrate::CALIBRATION_SCORE_CONTEXT, state_key.clone()))
                    .map_err(|e| format!("cannot load {} for scoring: {e}", engine.model_label()))?;
                let c = rt
                    .block_on(calibrate::calibrate(backend, Some(scorer), &world, &CalibrationConfig::default(), &mut progress))
                    .map_err(|e| e.to_string())?;
                calibrate::store(&dir, &key, &c).map_err(|e| e.to_string())?;
                Ok(c)
            };
            match run() {
                Ok(calibration) => send(CalibrationEvent::Finished { calibration }),
                Err(message) => send(CalibrationEvent::Error { message }),
            }
        })
        .map_err(|e| CommandError::internal(format!("cannot start the calibration: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use mf_agent::EngineKind;

    use crate::testing::state;

    #[test]
    fn the_stored_calibration_is_the_settings_models_and_a_run_needs_its_file() {
        let d = tempfile::tempdir().unwrap();
        let st = state(d.path());
        let model = d.path().join("models/tiny.gguf");
        std::fs::write(&model, "GGUF").unwrap();
        st.update_settings(|s| s.model_path = model.display().to_string()).unwrap();
        assert!(stored(&st).unwrap().is_none(), "nothing stored yet");
        // The model file gone since it was saved: refused before any thread starts.
        std::fs::remove_file(&model).unwrap();
        let e = start(&st, |_| {}).unwrap_err();
        assert!(e.to_string().contains("No model file"), "{e}");
        // What `mf calibrate` stores for this file is what Settings shows.
        let c = Calibration {
            model: "tiny".into(),
            world: CALIBRATION_WORLD.into(),
            route_len: 6,
            n_ctx: CALIBRATION_CONTEXT,
            reserve: 192,
            measured_at: 0,
            rows: Vec::new(),
            recommended: Some(calibrate::Recommendation { strategy: "v2".into(), ratio: 0.75 }),
            reason: "measured".into(),
        };
        calibrate::store(&d.path().join("data"), "tiny.gguf", &c).unwrap();
        assert_eq!(stored(&st).unwrap(), Some(c.clone()));
        // On a server engine, the server's model has its own calibration
        // (`mf calibrate --ollama URL --model qwen3:8b` stores it there).
        st.update_settings(|s| {
            s.engine = EngineKind::Ollama;
            s.server_url = "http://127.0.0.1:11434".into();
            s.server_model = "qwen3:8b".into();
        })
        .unwrap();
        assert!(stored(&st).unwrap().is_none(), "the file's calibration is not the server model's");
        calibrate::store(&d.path().join("data"), "ollama-qwen3_8b", &c).unwrap();
        assert_eq!(stored(&st).unwrap(), Some(c));
    }
}
