//! [`RunSpec`]: everything needed to run a session again, stored with it.
//!
//! Both faces build one: the CLI from its flags (each flag an override of
//! [`RunSpec::default`]), the app from its settings panel. `Default` here and
//! in [`AgentSettings`] is the only place a default lives.

use std::path::PathBuf;
use std::sync::Arc;

use mf_inference::{Backend, LlamaConfig, LlamaSession, OllamaBackend, OpenAiBackend};
use mf_tools::ToolSettings;
use mf_tools::mcp::{McpApprovals, McpConfig};
use mf_tools::policy::{ApprovalPolicy, Mode};
use serde::{Deserialize, Serialize};

use crate::agent::AgentSettings;
use crate::error::AgentError;

/// The context window `C` a session gets when nothing else is said.
pub const DEFAULT_CONTEXT: u32 = 4096;

/// Which engine runs the model, and the model it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EngineSpec {
    /// llama.cpp in this process, over a GGUF file.
    Llama {
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
    /// An OpenAI-compatible server (llama-server, LM Studio, vLLM, …). Its
    /// key is never stored: it comes from `OPENAI_API_KEY` or the face.
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
    },
    /// An Ollama server; the context size is passed as `num_ctx`.
    Ollama {
        /// Base URL, e.g. `http://127.0.0.1:11434`.
        url: String,
        /// The model name (`qwen3:8b`).
        model: String,
    },
}

impl EngineSpec {
    /// What the model is called in lists: the file name or the server's model name.
    #[must_use]
    pub fn model_label(&self) -> String {
        match self {
            EngineSpec::Llama { model, .. } => model.file_name().map_or_else(|| model.display().to_string(), |n| n.to_string_lossy().into_owned()),
            EngineSpec::OpenAi { model, .. } | EngineSpec::Ollama { model, .. } => model.clone(),
        }
    }

    /// Whether fenced-JSON tool calls are held by a grammar (in-process models only).
    #[must_use]
    pub fn tool_grammar(&self) -> bool {
        matches!(self, EngineSpec::Llama { tool_grammar: true, .. })
    }

    /// The key under which a loaded backend may be reused for another session.
    #[must_use]
    pub fn cache_key(&self, context: u32) -> String {
        format!("{}|{context}", serde_json::to_string(self).unwrap_or_default())
    }

    /// Loads the backend (a model load is blocking work: it runs on a blocking thread).
    ///
    /// # Errors
    /// [`AgentError::Inference`] with the engine's reason; [`AgentError::InvalidSetting`]
    /// for a malformed server URL.
    pub async fn load(&self, context: u32, api_key: Option<String>) -> Result<Arc<dyn Backend>, AgentError> {
        Ok(match self {
            EngineSpec::Llama { model, threads, gpu, tool_grammar } => {
                let mut cfg = LlamaConfig::new(model).with_n_ctx(context);
                cfg.n_threads = *threads;
                cfg.n_gpu_layers = if *gpu { u32::MAX } else { 0 };
                cfg.tool_grammar = *tool_grammar;
                let session = tokio::task::spawn_blocking(move || LlamaSession::load(cfg))
                    .await
                    .map_err(|e| AgentError::InvalidSetting(format!("the model loader stopped: {e}")))??;
                Arc::new(session)
            }
            EngineSpec::OpenAi { url, model, tools_in_text } => {
                let key = api_key.or_else(|| std::env::var("OPENAI_API_KEY").ok()).filter(|k| !k.is_empty());
                let b = OpenAiBackend::new(url, model.as_str(), key, context).map_err(|e| AgentError::InvalidSetting(e.to_string()))?;
                Arc::new(b.with_tools_in_text(*tools_in_text))
            }
            EngineSpec::Ollama { url, model } => {
                Arc::new(OllamaBackend::new(url, model.as_str(), context).map_err(|e| AgentError::InvalidSetting(e.to_string()))?)
            }
        })
    }
}

/// The tools a session may use and how their calls are approved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolsSpec {
    /// Folders the file tools may read (none: no file tools).
    pub workspace: Vec<PathBuf>,
    /// Hosts the http tool may reach (`host`, `host:port`, `*.domain`); none:
    /// any public host. A loopback entry is the explicit permission to reach loopback.
    pub allowed_hosts: Vec<String>,
    /// Offer `run_code` (needs the `mf-sandbox` helper beside the binary).
    pub code: bool,
    /// Approval mode per tool group.
    pub policy: ApprovalPolicy,
    /// MCP servers whose tools are offered, in the `mcpServers` shape
    /// (`{"mcpServers": {"name": {"command": …, "args": […]} | {"url": …}}}`);
    /// stored whole so a resumed session starts the same servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<serde_json::Value>,
    /// Answers remembered per MCP server and tool (`{"server": {"tool": "auto"}}`);
    /// a tool without one asks.
    #[serde(skip_serializing_if = "McpApprovals::is_empty_map")]
    pub mcp_approvals: McpApprovals,
}

impl Default for ToolsSpec {
    fn default() -> Self {
        ToolsSpec {
            workspace: Vec::new(),
            allowed_hosts: Vec::new(),
            code: false,
            policy: ApprovalPolicy::default(),
            mcp: None,
            mcp_approvals: McpApprovals::default(),
        }
    }
}

/// `skip_serializing_if` helper for the remembered MCP answers.
trait EmptyMap {
    fn is_empty_map(&self) -> bool;
}

impl EmptyMap for McpApprovals {
    fn is_empty_map(&self) -> bool {
        self.0.is_empty()
    }
}

impl ToolsSpec {
    /// mf-tools' settings for this spec. `run_code` is offered only when
    /// asked for and not denied; its sandbox helper is looked up beside the
    /// running binary.
    ///
    /// # Errors
    /// [`AgentError::InvalidSetting`] when `run_code` is asked for and its helper is missing.
    pub fn settings(&self, max_args_bytes: usize) -> Result<ToolSettings, AgentError> {
        let mut s = ToolSettings { workspace: self.workspace.clone(), max_args_bytes, policy: self.policy.clone(), ..ToolSettings::default() };
        if !self.allowed_hosts.is_empty() {
            // An exact loopback entry (`127.0.0.1:8080`) opens that address
            // alone (mf-tools' rule); no entry opens loopback for other names.
            s.http.allowed_hosts = Some(self.allowed_hosts.clone());
        }
        if let Some(v) = &self.mcp {
            s.mcp.config = McpConfig::from_value(v).map_err(|e| AgentError::InvalidSetting(format!("MCP servers: {e}")))?;
            s.mcp.remembered = self.mcp_approvals.clone();
        }
        if self.code && self.policy.code != Mode::Deny {
            s.code = Some(mf_tools::code::CodeConfig::beside_exe().map_err(|e| AgentError::InvalidSetting(format!("run_code: {e}")))?);
        }
        Ok(s)
    }

    /// Turns every `ask` into `deny` (a face that cannot ask: `--approve deny`).
    pub fn deny_asks(&mut self) {
        let p = &mut self.policy;
        for m in [&mut p.files, &mut p.http_get, &mut p.http_write, &mut p.code] {
            if *m == Mode::Ask {
                *m = Mode::Deny;
            }
        }
    }
}

/// Everything needed to run a session again: engine and model, context,
/// the loop's settings (strategy and every forgetting setting), tools and policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// The engine and model.
    pub engine: EngineSpec,
    /// Context window `C`, tokens.
    pub context: u32,
    /// The loop: strategy, budget, exits, sampling, plan settings.
    pub agent: AgentSettings,
    /// Tools and approvals.
    #[serde(default)]
    pub tools: ToolsSpec,
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            engine: EngineSpec::Llama {
                model: PathBuf::from("models").join(mf_inference::models::RECOMMENDED_FILE),
                threads: None,
                gpu: false,
                tool_grammar: true,
            },
            context: DEFAULT_CONTEXT,
            agent: AgentSettings::default(),
            tools: ToolsSpec::default(),
        }
    }
}

impl RunSpec {
    /// Checks what can be checked before loading anything.
    ///
    /// # Errors
    /// [`AgentError::InvalidSetting`] naming the setting.
    pub fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: String| Err(AgentError::InvalidSetting(m));
        if self.context < 512 {
            return bad(format!("context {} is below 512 tokens", self.context));
        }
        let budget =
            mf_forgetting::Budget { context: self.context as usize, reserve: self.agent.reserve as usize, ratio: self.agent.ratio, recent: self.agent.recent };
        budget.validate().map_err(|e| AgentError::InvalidSetting(e.to_string()))?;
        self.agent.plan.validate().map_err(|e| AgentError::InvalidSetting(e.to_string()))?;
        if let EngineSpec::Llama { model, .. } = &self.engine
            && !model.is_file()
        {
            return bad(format!("no model file at {}", model.display()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_spec_round_trips_through_json_and_keeps_every_setting() {
        let mut s = RunSpec::default();
        s.engine = EngineSpec::OpenAi { url: "http://127.0.0.1:8080/v1".into(), model: "m".into(), tools_in_text: true };
        s.context = 2048;
        s.agent.strategy = mf_forgetting::StrategyKind::V1;
        s.tools.allowed_hosts = vec!["127.0.0.1:9".into()];
        let back: RunSpec = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let t = s.tools.settings(100).unwrap();
        assert_eq!(t.http.allowed_hosts.as_deref(), Some(&["127.0.0.1:9".to_owned()][..]));
        assert!(!t.http.allow_loopback, "an exact loopback entry opens only itself");
        assert_eq!(t.max_args_bytes, 100);
    }

    #[test]
    fn mcp_servers_in_a_spec_are_checked_and_reach_the_tools() {
        let mut t = ToolsSpec::default();
        t.mcp = Some(serde_json::json!({"mcpServers": {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}}}));
        let s = t.settings(100).unwrap();
        assert_eq!(s.mcp.config.servers.len(), 1);
        t.mcp = Some(serde_json::json!({"mcpServers": {"bad": {"args": []}}}));
        let e = t.settings(100).unwrap_err().to_string();
        assert!(e.contains("MCP servers") && e.contains("bad"), "{e}");
    }

    #[test]
    fn deny_asks_turns_only_asks_into_denials() {
        let mut t = ToolsSpec::default();
        t.deny_asks();
        assert_eq!(t.policy.files, Mode::Auto);
        assert_eq!(t.policy.http_write, Mode::Deny);
        assert_eq!(t.policy.code, Mode::Deny);
    }

    #[test]
    fn validation_names_the_bad_setting() {
        let mut s = RunSpec::default();
        s.engine = EngineSpec::Llama { model: "/nowhere/x.gguf".into(), threads: None, gpu: false, tool_grammar: false };
        assert!(s.validate().unwrap_err().to_string().contains("no model file"));
        s.engine = EngineSpec::Ollama { url: "http://127.0.0.1:11434".into(), model: "m".into() };
        s.context = 100;
        assert!(s.validate().unwrap_err().to_string().contains("below 512"));
    }
}
