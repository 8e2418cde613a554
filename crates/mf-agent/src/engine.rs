//! [`EngineChoice`]: which engine runs the model, and the model it runs.
//!
//! Every face chooses an engine the same way: the app's settings and the
//! CLI's [`EngineArgs`] (feature `clap`) fill the engine fields of a
//! [`crate::RunSettings`], and [`crate::RunSpec::resolve`] turns them into
//! an `EngineChoice`, which is stored with the session and loaded by
//! [`EngineChoice::load`]. Where an OpenAI-compatible server's key comes
//! from is part of the choice ([`KeySource`]); the key itself is never stored.

use std::path::PathBuf;
use std::sync::Arc;

use mf_inference::{Backend, LlamaConfig, LlamaSession, OllamaBackend, OpenAiBackend};
use serde::{Deserialize, Serialize};

use crate::error::AgentError;

/// The environment variable an OpenAI-compatible server's key is read from
/// unless the settings name another.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The kind of engine, as the settings name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// llama.cpp in this process, over a GGUF file.
    #[default]
    Embedded,
    /// An Ollama server.
    Ollama,
    /// An OpenAI-compatible server (llama-server, LM Studio, vLLM, …).
    Openai,
}

impl EngineKind {
    /// Its name in settings and on a command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Embedded => "embedded",
            EngineKind::Ollama => "ollama",
            EngineKind::Openai => "openai",
        }
    }

    /// The server kind for listing a server's models (`None`: no server).
    #[must_use]
    pub fn server(self) -> Option<mf_inference::http::ServerKind> {
        match self {
            EngineKind::Embedded => None,
            EngineKind::Ollama => Some(mf_inference::http::ServerKind::Ollama),
            EngineKind::Openai => Some(mf_inference::http::ServerKind::OpenAi),
        }
    }
}

/// Where an OpenAI-compatible server's API key comes from. A key the face
/// holds (the app's key field, kept in memory) is used before this source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum KeySource {
    /// This environment variable (unset or empty: no key).
    Env {
        /// The variable's name.
        var: String,
    },
    /// No key is sent.
    None,
}

impl Default for KeySource {
    fn default() -> Self {
        KeySource::Env { var: DEFAULT_API_KEY_ENV.into() }
    }
}

impl KeySource {
    /// The source a settings field names: a variable, or none when empty.
    #[must_use]
    pub fn from_env_name(var: &str) -> Self {
        let var = var.trim();
        if var.is_empty() { KeySource::None } else { KeySource::Env { var: var.into() } }
    }

    /// The key: `given` (the face's) first, then this source.
    #[must_use]
    pub fn key(&self, given: Option<String>) -> Option<String> {
        let from_source = || match self {
            KeySource::Env { var } => std::env::var(var).ok(),
            KeySource::None => None,
        };
        given.filter(|k| !k.is_empty()).or_else(from_source).filter(|k| !k.is_empty())
    }
}

/// Which engine runs the model, and the model it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EngineChoice {
    /// llama.cpp in this process, over a GGUF file (stored as `llama` by
    /// earlier versions, which still reads).
    #[serde(alias = "llama")]
    Embedded {
        /// The GGUF file.
        model: PathBuf,
        /// CPU threads (`None`: all).
        #[serde(default)]
        threads: Option<i32>,
        /// Offload every layer to the GPU (Metal/CUDA builds).
        #[serde(default)]
        gpu: bool,
        /// Constrain fenced-JSON tool calls with a grammar.
        #[serde(default)]
        tool_grammar: bool,
    },
    /// An OpenAI-compatible server (llama-server, LM Studio, vLLM, …).
    #[serde(rename = "openai")]
    OpenAi {
        /// Base URL, e.g. `http://127.0.0.1:8080/v1`.
        url: String,
        /// The model name sent to the server.
        model: String,
        /// Tools and tool calls written into the messages' text instead of
        /// OpenAI's `tools` / `tool_calls` fields.
        #[serde(default)]
        tools_in_text: bool,
        /// Where its key comes from (never the key itself).
        #[serde(default)]
        key: KeySource,
    },
    /// An Ollama server; the context size is passed as `num_ctx`.
    Ollama {
        /// Base URL, e.g. `http://127.0.0.1:11434`.
        url: String,
        /// The model name (`qwen3:8b`).
        model: String,
    },
}

impl EngineChoice {
    /// Its kind.
    #[must_use]
    pub fn kind(&self) -> EngineKind {
        match self {
            EngineChoice::Embedded { .. } => EngineKind::Embedded,
            EngineChoice::Ollama { .. } => EngineKind::Ollama,
            EngineChoice::OpenAi { .. } => EngineKind::Openai,
        }
    }

    /// What the model is called in lists: the file name or the server's model name.
    #[must_use]
    pub fn model_label(&self) -> String {
        match self {
            EngineChoice::Embedded { model, .. } => model.file_name().map_or_else(|| model.display().to_string(), |n| n.to_string_lossy().into_owned()),
            EngineChoice::OpenAi { model, .. } | EngineChoice::Ollama { model, .. } => model.clone(),
        }
    }

    /// Whether fenced-JSON tool calls are held by a grammar (in-process models only).
    #[must_use]
    pub fn tool_grammar(&self) -> bool {
        matches!(self, EngineChoice::Embedded { tool_grammar: true, .. })
    }

    /// Runs `model` instead: a model file for the embedded engine, a model name on a server.
    pub fn set_model(&mut self, m: PathBuf) {
        match self {
            EngineChoice::Embedded { model, .. } => *model = m,
            EngineChoice::OpenAi { model, .. } | EngineChoice::Ollama { model, .. } => *model = m.to_string_lossy().into_owned(),
        }
    }

    /// The key under which a loaded backend may be reused for another session.
    #[must_use]
    pub fn cache_key(&self, context: u32) -> String {
        format!("{}|{context}", serde_json::to_string(self).unwrap_or_default())
    }

    /// Loads the backend (a model load is blocking work: it runs on a blocking
    /// thread). `api_key`: a key the face holds, used before [`KeySource`].
    ///
    /// # Errors
    /// [`AgentError::Inference`] with the engine's reason; [`AgentError::InvalidSetting`]
    /// for a malformed server URL.
    #[tracing::instrument(skip_all, fields(engine = self.kind().as_str(), model = %self.model_label(), context))]
    pub async fn load(&self, context: u32, api_key: Option<String>) -> Result<Arc<dyn Backend>, AgentError> {
        Ok(match self {
            EngineChoice::Embedded { model, threads, gpu, tool_grammar } => {
                let mut cfg = LlamaConfig::new(model).with_n_ctx(context);
                cfg.n_threads = *threads;
                cfg.n_gpu_layers = if *gpu { u32::MAX } else { 0 };
                cfg.tool_grammar = *tool_grammar;
                let session = tokio::task::spawn_blocking(move || LlamaSession::load(cfg))
                    .await
                    .map_err(|e| AgentError::InvalidSetting(format!("the model loader stopped: {e}")))??;
                Arc::new(session)
            }
            EngineChoice::OpenAi { url, model, tools_in_text, key } => {
                let b = OpenAiBackend::new(url, model.as_str(), key.key(api_key), context).map_err(|e| AgentError::InvalidSetting(e.to_string()))?;
                Arc::new(b.with_tools_in_text(*tools_in_text))
            }
            EngineChoice::Ollama { url, model } => {
                Arc::new(OllamaBackend::new(url, model.as_str(), context).map_err(|e| AgentError::InvalidSetting(e.to_string()))?)
            }
        })
    }
}

/// The engine flags every command that runs a model flattens (`mf
/// investigate`, `mf calibrate`): they fill the engine fields of a
/// [`crate::RunSettings`], which [`crate::RunSpec::resolve`] checks.
#[cfg(feature = "clap")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EngineArgs {
    /// The GGUF model (default: `models/Qwen3-8B-Q4_K_M.gguf` when present,
    /// else the SmolLM2 test model in `models/`); with `--openai` or
    /// `--ollama`, the model name sent to the server (default: `default`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Use an OpenAI-compatible server at this URL (e.g.
    /// `http://127.0.0.1:8080/v1`) instead of running the model in-process;
    /// the key, if any, is read from `--api-key-env`. `--ctx` must not be
    /// more than the server's context. Such a server keeps no KV snapshots
    /// here: a resume decodes the history again.
    #[arg(long, conflicts_with = "ollama")]
    pub openai: Option<String>,
    /// Use an Ollama server at this URL (e.g. `http://127.0.0.1:11434`);
    /// `--ctx` is passed as `num_ctx`.
    #[arg(long)]
    pub ollama: Option<String>,
    /// With `--openai`: `native` sends tools and tool calls as OpenAI fields;
    /// `text` writes them into the messages' text and reads calls from the
    /// reply's text, for a server whose chat template shows the model only
    /// each message's content (llama-cpp-python with SmolLM2's template, for one).
    #[arg(long, value_enum, default_value = "native")]
    pub openai_tools: OpenAiTools,
    /// With `--openai`: the environment variable the API key is read from
    /// (empty: no key).
    #[arg(long, default_value = DEFAULT_API_KEY_ENV)]
    pub api_key_env: String,
    /// Constrain fenced-JSON tool calls with a grammar (in-process models;
    /// other formats are not constrained). `--tool-grammar false` turns it off.
    #[arg(long, default_value_t = crate::RunSettings::default().tool_grammar, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub tool_grammar: bool,
    /// CPU threads for the model (default: all).
    #[arg(long)]
    pub threads: Option<u32>,
}

/// How tools reach a model on an OpenAI-compatible server.
#[cfg(feature = "clap")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OpenAiTools {
    /// As OpenAI's `tools` and `tool_calls` fields.
    #[default]
    Native,
    /// Written into the messages' text, calls read from the reply's text.
    Text,
}

#[cfg(feature = "clap")]
impl EngineArgs {
    /// Whether a server runs the model.
    #[must_use]
    pub fn on_server(&self) -> bool {
        self.openai.is_some() || self.ollama.is_some()
    }

    /// Writes these flags into `s`'s engine fields. Without `--model`, a
    /// server's model is `default` and the embedded engine's is the models
    /// folder's default model (`models/` of the working directory); the
    /// notes say which was picked and why. A model file's path is made
    /// absolute, so a session resumes from another folder.
    pub fn apply(&self, s: &mut crate::RunSettings) -> Vec<String> {
        let mut notes = Vec::new();
        s.engine = match (&self.openai, &self.ollama) {
            (Some(_), _) => EngineKind::Openai,
            (None, Some(_)) => EngineKind::Ollama,
            (None, None) => EngineKind::Embedded,
        };
        if let Some(url) = self.openai.as_ref().or(self.ollama.as_ref()) {
            s.server_url.clone_from(url);
            s.server_model = self.model.as_ref().map_or_else(|| "default".into(), |m| m.to_string_lossy().into_owned());
        } else {
            let model = match &self.model {
                Some(m) => Some(m.clone()),
                None => match mf_inference::models::default_model(std::path::Path::new("models")) {
                    Some(mf_inference::models::DefaultModel::Recommended { path }) => Some(path),
                    Some(mf_inference::models::DefaultModel::TestFallback { path, passed_over }) => {
                        notes.extend(passed_over);
                        notes.push(format!("using the small test model {} (answers poorly); `mf models download` fetches Qwen3 8B", path.display()));
                        Some(path)
                    }
                    None => None,
                },
            };
            s.model_path = model.map(|m| std::fs::canonicalize(&m).unwrap_or(m).display().to_string()).unwrap_or_default();
        }
        s.server_tools_in_text = self.openai_tools == OpenAiTools::Text;
        s.api_key_env.clone_from(&self.api_key_env);
        s.tool_grammar = self.tool_grammar;
        s.threads = self.threads;
        notes
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn sessions_stored_with_the_former_engine_names_still_read() {
        let old = serde_json::json!({"kind": "llama", "model": "/m/x.gguf", "threads": 2, "gpu": false, "tool_grammar": true});
        let c: EngineChoice = serde_json::from_value(old).unwrap();
        assert_eq!(c, EngineChoice::Embedded { model: "/m/x.gguf".into(), threads: Some(2), gpu: false, tool_grammar: true });
        let old = serde_json::json!({"kind": "openai", "url": "http://127.0.0.1:8080/v1", "model": "m", "tools_in_text": true});
        let c: EngineChoice = serde_json::from_value(old).unwrap();
        assert_eq!(c, EngineChoice::OpenAi { url: "http://127.0.0.1:8080/v1".into(), model: "m".into(), tools_in_text: true, key: KeySource::default() });
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["key"], serde_json::json!({"from": "env", "var": "OPENAI_API_KEY"}));
    }

    #[test]
    fn the_key_comes_from_the_face_then_the_source() {
        let var = "MF_AGENT_TEST_KEY_SOURCE";
        // SAFETY: only this test reads or writes this variable.
        unsafe { std::env::set_var(var, "from-env") };
        let env = KeySource::Env { var: var.into() };
        assert_eq!(env.key(None).as_deref(), Some("from-env"));
        assert_eq!(env.key(Some("typed".into())).as_deref(), Some("typed"));
        assert_eq!(env.key(Some(String::new())).as_deref(), Some("from-env"), "an empty typed key is no key");
        assert_eq!(KeySource::None.key(None), None);
        assert_eq!(KeySource::from_env_name("  "), KeySource::None);
        assert_eq!(KeySource::from_env_name(var), env);
    }
}
