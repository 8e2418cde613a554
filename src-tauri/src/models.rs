//! Model commands: the models in `models/`, which one runs by default (and
//! the notice when it is only the test model), the file picker and the
//! recommended model's download.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};

/// The recommended model's file name in `models/`.
pub const RECOMMENDED_FILE: &str = "Qwen3-8B-Q4_K_M.gguf";
/// The small instruct test model `scripts/setup.sh` fetches.
pub const TEST_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// A model file (ui/src/lib/api.ts `ModelInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    /// File name.
    pub name: String,
    /// Full path.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
}

/// The `.gguf` files in `dir`, by name; a missing folder is an empty list.
///
/// # Errors
/// `models_dir` when the folder exists but cannot be read.
pub fn local_models(dir: &Path) -> CmdResult<Vec<ModelInfo>> {
    let err = |e: std::io::Error| CommandError::new("models_dir", format!("cannot read {}: {e}", dir.display()));
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(err(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".gguf") {
            continue;
        }
        let Ok(meta) = std::fs::metadata(entry.path()) else { continue };
        if meta.is_file() {
            out.push(ModelInfo { name, path: entry.path().display().to_string(), size_bytes: meta.len() });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The default model in `dir` and, when it is only the test model, a notice
/// for the UI. `None` when neither is there.
#[must_use]
pub fn default_model(dir: &Path) -> Option<(PathBuf, Option<String>)> {
    let rec = dir.join(RECOMMENDED_FILE);
    if rec.is_file() {
        return Some((rec, None));
    }
    let test = dir.join(TEST_MODEL_FILE);
    test.is_file().then(|| {
        (
            test,
            Some(format!(
                "Running the small test model {TEST_MODEL_FILE}: it works end to end but answers poorly. Put {RECOMMENDED_FILE} in {} (or choose a model in Settings) for real investigations.",
                dir.display()
            )),
        )
    })
}

/// What the app runs with (shown as a banner when `notice` is set).
#[derive(Debug, Clone, Serialize)]
pub struct AppInfo {
    /// The app's version.
    pub version: String,
    /// The model in the settings.
    pub model_path: String,
    /// Something the user should know (the test model is in use, no model found).
    pub notice: Option<String>,
    /// Where models are looked for.
    pub models_dir: String,
    /// The settings file.
    pub settings_file: String,
}

/// What the app runs with.
#[tauri::command]
pub fn app_info(state: State<'_, AppState>) -> CmdResult<AppInfo> {
    let s = state.settings()?;
    let mut notice = None;
    if !Path::new(&s.model_path).is_file() {
        notice = Some(format!("No model file at {:?}. Run scripts/setup.sh to fetch the test models, or choose a model in Settings.", s.model_path));
    } else if Path::new(&s.model_path).file_name().and_then(|n| n.to_str()) == Some(TEST_MODEL_FILE) {
        notice = default_model(&state.paths.models).and_then(|(_, n)| n);
    }
    Ok(AppInfo {
        version: env!("CARGO_PKG_VERSION").into(),
        model_path: s.model_path,
        notice,
        models_dir: state.paths.models.display().to_string(),
        settings_file: state.paths.settings.display().to_string(),
    })
}

/// The model files in `models/`.
#[tauri::command]
pub fn list_models(state: State<'_, AppState>) -> CmdResult<Vec<ModelInfo>> {
    local_models(&state.paths.models)
}

/// A native file dialog needs a plugin this build does not carry (the
/// webview gets no file-system access): the path is typed, or chosen from
/// the `models/` list.
#[tauri::command]
pub fn pick_model_file() -> CmdResult<Option<String>> {
    Err(CommandError::new("unsupported", "This build has no file dialog: type the model's path, or pick one from the models/ list."))
}

/// The download of the recommended model is not wired yet (see the report):
/// the UI says so instead of pretending.
#[tauri::command]
pub fn download_recommended_model(state: State<'_, AppState>, on_event: Channel<serde_json::Value>) -> CmdResult<()> {
    let _ = on_event;
    Err(CommandError::new(
        "unsupported",
        format!("Downloading from the app is not available in this build: put {RECOMMENDED_FILE} into {} yourself.", state.paths.models.display()),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn lists_gguf_files_and_prefers_the_recommended_model() {
        let d = tempfile::tempdir().unwrap();
        assert!(local_models(&d.path().join("absent")).unwrap().is_empty());
        assert_eq!(default_model(d.path()), None);
        std::fs::write(d.path().join("notes.txt"), "x").unwrap();
        std::fs::write(d.path().join(TEST_MODEL_FILE), "GGUF1234").unwrap();
        std::fs::create_dir(d.path().join("dir.gguf")).unwrap();
        let l = local_models(d.path()).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].name.as_str(), l[0].size_bytes), (TEST_MODEL_FILE, 8));
        let (p, notice) = default_model(d.path()).unwrap();
        assert!(p.ends_with(TEST_MODEL_FILE));
        assert!(notice.unwrap().contains("small test model"));
        std::fs::write(d.path().join(RECOMMENDED_FILE), "GGUF").unwrap();
        assert_eq!(default_model(d.path()), Some((d.path().join(RECOMMENDED_FILE), None)));
    }
}
