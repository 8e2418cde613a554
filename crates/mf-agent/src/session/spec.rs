//! [`RunSpec`]: everything needed to run a session again, stored with it.
//!
//! Both faces build one the same way: their settings ([`crate::RunSettings`],
//! filled from the CLI's flags or the app's settings file) resolved by
//! [`RunSpec::resolve`] (crate::settings), the only validator.
//! `RunSettings::default` and [`AgentSettings`]'s are the only defaults.

use std::path::PathBuf;

use mf_tools::ToolSettings;
use mf_tools::mcp::{McpApprovals, McpConfig};
use mf_tools::policy::{ApprovalPolicy, Mode};
use serde::{Deserialize, Serialize};

use crate::agent::AgentSettings;
use crate::engine::EngineChoice;
use crate::error::AgentError;

/// The context window `C` a session gets when nothing else is said.
pub const DEFAULT_CONTEXT: u32 = 4096;

/// The tools a session may use and how their calls are approved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
}

/// Everything needed to run a session again: engine and model, context,
/// the loop's settings (strategy and every forgetting setting), tools and policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// The engine and model.
    pub engine: EngineChoice,
    /// Context window `C`, tokens.
    pub context: u32,
    /// The loop: strategy, budget, exits, sampling, plan settings.
    pub agent: AgentSettings,
    /// Tools and approvals.
    #[serde(default)]
    pub tools: ToolsSpec,
    /// Another engine or model that writes the compaction summaries (none:
    /// the investigation's own model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summariser: Option<EngineChoice>,
}

impl RunSpec {
    /// Checks what may have changed since the spec was resolved (a stored
    /// spec resumed later): the model file is still there.
    ///
    /// # Errors
    /// [`AgentError::InvalidSetting`] naming the missing file.
    pub fn check_model_file(&self) -> Result<(), AgentError> {
        for engine in std::iter::once(&self.engine).chain(&self.summariser) {
            if let EngineChoice::Embedded { model, .. } = engine
                && !model.is_file()
            {
                return Err(AgentError::InvalidSetting(format!("no model file at {}", model.display())));
            }
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
        let mut s = RunSpec {
            engine: EngineChoice::OpenAi { url: "http://127.0.0.1:8080/v1".into(), model: "m".into(), tools_in_text: true, key: Default::default() },
            context: 2048,
            agent: AgentSettings::default(),
            tools: ToolsSpec::default(),
            summariser: None,
        };
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
        let mut t = ToolsSpec {
            mcp: Some(serde_json::json!({"mcpServers": {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}}})),
            ..ToolsSpec::default()
        };
        let s = t.settings(100).unwrap();
        assert_eq!(s.mcp.config.servers.len(), 1);
        t.mcp = Some(serde_json::json!({"mcpServers": {"bad": {"args": []}}}));
        let e = t.settings(100).unwrap_err().to_string();
        assert!(e.contains("MCP servers") && e.contains("bad"), "{e}");
    }

    #[test]
    fn a_missing_model_file_is_named() {
        let s = RunSpec {
            engine: EngineChoice::Embedded { model: "/nowhere/x.gguf".into(), threads: None, gpu: false, tool_grammar: false },
            context: 2048,
            agent: AgentSettings::default(),
            tools: ToolsSpec::default(),
            summariser: None,
        };
        assert!(s.check_model_file().unwrap_err().to_string().contains("no model file at /nowhere/x.gguf"));
    }
}
