//! Calibration in the app: the recommendation stored for the settings'
//! model (by `mf calibrate` or by the button in Settings), and a run of
//! mf-bench's calibration with its progress on a channel. Taking the
//! recommendation is the user's choice: Settings fills the strategy and
//! ratio, and nothing changes until they are saved.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mf_bench::agentic::calibrate::{self, CALIBRATION_CONTEXT, CALIBRATION_WORLD, Calibration, CalibrationConfig, CalibrationRow};
use mf_inference::LlamaSession;
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};
use crate::settings::Engine;

/// What a calibration run reports (ui/src/lib/api.ts `CalibrationEvent`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CalibrationEvent {
    /// One strategy at one ratio measured.
    Progress {
        /// Runs done.
        done: usize,
        /// Runs in all.
        total: usize,
        /// The run just measured.
        row: CalibrationRow,
    },
    /// Every run done; the result is stored.
    Finished {
        /// The result.
        calibration: Calibration,
    },
    /// The calibration failed.
    Error {
        /// Why.
        message: String,
    },
}

/// The model file's name, the key of its stored calibration.
fn model_file(path: &str) -> Option<String> {
    Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned())
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
    Ok(model_file(&s.model_path).and_then(|f| calibrate::load_stored(&data_dir(state), &f)))
}

/// Calibrates the settings' model on a thread of its own (a few minutes on
/// the small test models); the events go to `on_event`.
#[tauri::command]
pub fn calibrate_model(state: State<'_, AppState>, on_event: Channel<CalibrationEvent>) -> CmdResult<()> {
    start(&state, move |e| {
        let _ = on_event.send(e);
    })
}

/// What `calibrate_model` does, with the events going to `send`.
///
/// # Errors
/// `invalid` when the engine is not the embedded one, the model file is
/// missing or the calibration world is not there; `internal` when the thread
/// cannot start.
pub fn start(state: &AppState, send: impl Fn(CalibrationEvent) + Send + 'static) -> CmdResult<()> {
    let s = state.settings()?;
    if s.engine != Engine::Embedded {
        return Err(CommandError::invalid("Calibration measures the embedded engine's model file: choose the embedded engine in Settings."));
    }
    let model = PathBuf::from(&s.model_path);
    let Some(file) = model_file(&s.model_path).filter(|_| model.is_file()) else {
        return Err(CommandError::invalid(format!("No model file at {:?}.", s.model_path)));
    };
    let world = mf_bench::agentic::load_world(&state.paths.worlds, CALIBRATION_WORLD)
        .map_err(|e| CommandError::invalid(e.to_string()))?
        .ok_or_else(|| CommandError::invalid(format!("The calibration world {CALIBRATION_WORLD} is not in {}.", state.paths.worlds.display())))?;
    let dir = data_dir(state);
    let threads = i32::try_from(s.threads).ok().filter(|t| *t > 0);
    std::thread::Builder::new()
        .name("calibration".into())
        .spawn(move || {
            let run = || -> Result<Calibration, String> {
                let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
                let session = LlamaSession::load(calibrate::llama_config(&model, CALIBRATION_CONTEXT, threads)).map_err(|e| format!("cannot load {}: {e}", model.display()))?;
                let mut progress = |done, total, row: &CalibrationRow| send(CalibrationEvent::Progress { done, total, row: row.clone() });
                let c = rt
                    .block_on(calibrate::calibrate(Arc::new(session), &world, &CalibrationConfig::default(), &mut progress))
                    .map_err(|e| e.to_string())?;
                calibrate::store(&dir, &file, &c).map_err(|e| e.to_string())?;
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
    use crate::Paths;

    fn state(dir: &Path) -> AppState {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::create_dir_all(dir.join("models")).unwrap();
        AppState::new(Paths {
            settings: dir.join("config/settings.json"),
            db: dir.join("data/sessions.db"),
            models: dir.join("models"),
            scenarios: repo.join("scenarios/compaction"),
            worlds: repo.join("scenarios/agentic"),
            exports: dir.join("data/exports"),
        })
        .unwrap()
    }

    #[test]
    fn the_stored_calibration_is_the_settings_models_and_a_run_needs_the_embedded_engine_and_its_file() {
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
        // Another engine: refused, with what to do.
        std::fs::write(&model, "GGUF").unwrap();
        st.update_settings(|s| {
            s.engine = Engine::Ollama;
            s.server_url = "http://127.0.0.1:11434".into();
            s.server_model = "qwen3:8b".into();
        })
        .unwrap();
        let e = start(&st, |_| {}).unwrap_err();
        assert!(e.to_string().contains("embedded engine"), "{e}");
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
        assert_eq!(stored(&st).unwrap(), Some(c));
    }
}
