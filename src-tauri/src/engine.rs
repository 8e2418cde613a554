//! Engine commands: the models a server offers (for the settings panel's
//! picker) and the OpenAI-compatible engine's API key, which is kept in
//! memory only (never in the settings file, never logged).

use tauri::State;

use crate::AppState;
use crate::error::{CmdResult, CommandError};
use mf_agent::EngineKind;

/// The models the server at `url` offers, by name (`engine`: `ollama` or `openai`).
#[tauri::command]
pub async fn list_server_models(state: State<'_, AppState>, engine: EngineKind, url: String) -> CmdResult<Vec<String>> {
    let Some(kind) = engine.server() else {
        return Err(CommandError::invalid("The embedded engine runs a model file; there is no server to ask."));
    };
    let key = state.api_key();
    Ok(mf_inference::http::list_server_models(kind, url.trim(), key.as_deref()).await?)
}

/// Sets (or, with an empty key, forgets) the API key sent to an
/// OpenAI-compatible server. Kept in memory for this run of the app.
#[tauri::command]
pub fn set_api_key(state: State<'_, AppState>, key: String) -> CmdResult<()> {
    let key = key.trim();
    state.set_api_key((!key.is_empty()).then(|| key.to_owned()))
}
