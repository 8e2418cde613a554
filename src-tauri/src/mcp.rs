//! Settings → *Test* beside the MCP servers: starts the servers the form
//! describes (not yet saved), lists their tools, and says which failed and
//! why, with the same configuration, bounds and environment an investigation
//! gives them. The servers stop when the test ends.

use mf_tools::ToolRegistry;
use mf_tools::mcp::McpServerState;
use serde::Serialize;

use crate::error::{CmdResult, CommandError};
use crate::settings::Settings;

/// One MCP server as the test found it (generated as ui/src/lib/generated/app.ts `McpTestRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct McpTestRow {
    /// The server's name in the configuration.
    pub name: String,
    /// Whether it started and listed its tools.
    pub ok: bool,
    /// What happened, for the user (why it failed, or that it is disabled).
    pub message: String,
    /// The tools it offers, as the model sees their names.
    pub tools: Vec<String>,
}

/// Starts the MCP servers of `settings` and lists their tools.
#[tauri::command]
pub async fn test_mcp_servers(settings: Settings) -> CmdResult<Vec<McpTestRow>> {
    test(settings).await
}

/// What `test_mcp_servers` does.
///
/// # Errors
/// `invalid_settings` when the servers' JSON (or another tool setting) cannot
/// be used; `invalid_argument` when there is no server to test; `tools` when
/// the tools cannot be set up.
pub async fn test(settings: Settings) -> CmdResult<Vec<McpTestRow>> {
    // Only the MCP servers are tested: no code helper is looked for.
    let settings = Settings { code: false, ..settings };
    let spec = mf_agent::ToolsSpec::resolve(&settings).map_err(|e| crate::settings::invalid(&e))?;
    let tools = spec.settings(settings.max_args_bytes).map_err(CommandError::from)?;
    if tools.mcp.config.servers.is_empty() {
        return Err(CommandError::invalid("There is no MCP server to test: write one in the mcpServers JSON."));
    }
    let registry = ToolRegistry::new(tools).await?;
    let rows = registry
        .connect_mcp()
        .await
        .into_iter()
        .map(|s| {
            let (ok, message) = match s.state {
                McpServerState::Running { pid } => (true, pid.map_or_else(|| "running".to_owned(), |p| format!("running (process {p})"))),
                McpServerState::Failed { error } => (false, error),
                McpServerState::Disabled => (false, "disabled in the configuration".to_owned()),
                McpServerState::NotStarted => (false, "not started".to_owned()),
            };
            McpTestRow { name: s.name, ok, message, tools: s.tools }
        })
        .collect();
    Ok(rows)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn with_servers(v: serde_json::Value) -> Settings {
        Settings { mcp_servers: Some(v), ..Settings::default() }
    }

    #[tokio::test]
    async fn a_server_that_cannot_start_is_named_with_why_and_bad_json_is_a_field_error() {
        let rows = test(with_servers(serde_json::json!({"mcpServers": {"nothere": {"command": "/nonexistent/mcp-server"}}}))).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "nothere");
        assert!(!rows[0].ok && rows[0].tools.is_empty());
        assert!(rows[0].message.contains("/nonexistent/mcp-server"), "{}", rows[0].message);
        let e = test(with_servers(serde_json::json!({"mcpServers": {"bad": {"args": []}}}))).await.unwrap_err();
        assert_eq!(e.code, "invalid_settings", "{}", e.message);
        let e = test(Settings::default()).await.unwrap_err();
        assert_eq!(e.code, "invalid_argument");
    }

    /// A real server (the test servers the set-up installs): started, its tools listed under their model-facing names.
    #[tokio::test]
    async fn a_real_server_lists_its_tools() {
        let dir = std::env::var_os("MF_MCP_SERVERS")
            .map_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/measured-forgetting/mcp"), std::path::PathBuf::from);
        let bin = dir.join("node_modules/.bin/mcp-server-everything");
        if !bin.exists() {
            assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing: run scripts/setup.sh", bin.display());
            eprintln!("skipped: {} is missing", bin.display());
            return;
        }
        let rows = test(with_servers(serde_json::json!({"mcpServers": {"everything": {"command": bin, "args": ["stdio"]}}}))).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].ok, "{:?}", rows[0]);
        assert!(rows[0].tools.iter().any(|t| t == "everything__echo"), "{:?}", rows[0].tools);
    }
}
