//! Backends that talk to existing servers over HTTP (streaming).

mod common;
mod ollama;
mod openai;

pub use ollama::OllamaBackend;
pub use openai::OpenAiBackend;

/// Which kind of server a model list is asked of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Ollama (`GET /api/tags`).
    Ollama,
    /// OpenAI-compatible (`GET {base}/models`).
    OpenAi,
}

/// The models a server offers, by the names it takes in requests.
///
/// # Errors
/// [`crate::InferenceError::InvalidRequest`] for a bad URL,
/// [`crate::InferenceError::Http`] when the server cannot be reached (the
/// message names the address tried), [`crate::InferenceError::Protocol`] for
/// an answer that is not a model list.
pub async fn list_server_models(kind: ServerKind, base: &str, api_key: Option<&str>) -> crate::Result<Vec<String>> {
    use crate::InferenceError;
    let base_url = url::Url::parse(base).map_err(|e| InferenceError::InvalidRequest(format!("bad server URL {base:?}: {e}")))?;
    let path = match kind {
        ServerKind::Ollama => "api/tags",
        ServerKind::OpenAi => "models",
    };
    let mut dir = base_url.clone();
    if !dir.path().ends_with('/') {
        dir.set_path(&format!("{}/", dir.path()));
    }
    let url = dir.join(path).map_err(|e| InferenceError::InvalidRequest(e.to_string()))?.to_string();
    let mut req = common::client()?.get(&url).timeout(std::time::Duration::from_secs(10));
    if let Some(k) = api_key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.map_err(|e| common::http_err(&url, &e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| common::http_err(&url, &e))?;
    if !status.is_success() {
        return Err(InferenceError::Protocol { url, reason: format!("HTTP {status}: {text:.200}") });
    }
    let v = common::parse_json(&url, &text)?;
    let (list, key) = match kind {
        ServerKind::Ollama => (v.get("models"), "name"),
        ServerKind::OpenAi => (v.get("data"), "id"),
    };
    let names: Option<Vec<String>> =
        list.and_then(|l| l.as_array()).map(|a| a.iter().filter_map(|m| m.get(key).and_then(|n| n.as_str()).map(str::to_owned)).collect());
    names.ok_or_else(|| InferenceError::Protocol { url, reason: format!("not a model list: {text:.200}") })
}
