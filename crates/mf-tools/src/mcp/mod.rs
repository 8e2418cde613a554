//! Tools from MCP (Model Context Protocol) servers, on the official Rust SDK
//! (`rmcp`). Knows nothing of models: it starts servers, lists their tools
//! and calls them; every failure is a typed [`ToolError`] (`Mcp*`).
//!
//! How the pieces fit: an [`McpConfig`] (the familiar `mcpServers` JSON,
//! validated by [`McpConfig::parse`]) goes into [`McpSettings`] with the time
//! limits and the remembered approvals; [`crate::ToolSettings::mcp`] carries
//! it into the [`crate::ToolRegistry`], which owns an [`McpHub`]. Nothing is
//! started when the registry is built: [`crate::ToolRegistry::connect_mcp`]
//! (the first list) or the first call starts a server. Its tools are offered
//! as `server__tool` with the server's JSON Schema, go through the approval
//! policy (default *ask*, answers remembered per server and tool), and their
//! results are cut like our tools'. A server that exits is started again on
//! the next call (at most [`McpSettings::max_restarts`] times); a call that
//! outlives [`McpSettings::call_timeout`] fails with
//! [`ToolError::McpTimeout`]. Dropping the registry kills every child.
//!
//! What a server says is bounded, so no server can grow the app's memory or
//! fill the model's window ([`McpLimits`], each bound a parameter whose
//! default is a named constant): its stderr is kept as a bounded tail
//! ([`STDERR_LINES`] lines of at most [`STDERR_LINE_BYTES`] bytes) shown when
//! it fails; one message is at most [`MAX_LINE_BYTES`]; `tools/list` is read
//! page by page, at most [`MAX_LIST_PAGES`] pages and [`MAX_TOOLS_PER_SERVER`]
//! tools, past which the server is refused; a description is cut at
//! [`MAX_DESCRIPTION_CHARS`] characters and a tool whose schema is over
//! [`MAX_SCHEMA_BYTES`] is not offered; and with the model's window given
//! ([`McpWindow`], [`crate::ToolRegistry::connect_mcp_within`]) the MCP tools
//! together take at most [`MAX_WINDOW_SHARE`] of it: a server whose list
//! would pass that is refused with its name and sizes
//! ([`ToolError::McpOverLimit`]), the others are offered.
//!
//! - [`config`]: the `mcpServers` shape, parsed and validated.
//! - `server`: one server's connection (lazy start, restarts, limits).
//! - `stdio` / `http`: the two transports.

pub mod config;
mod http;
mod server;
mod stdio;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use config::{McpConfig, McpServerConfig, McpTransport, NAME_SEPARATOR};
use server::{Limits, Server, Snapshot};
pub use stdio::{INHERITED_ENV, MAX_LINE_BYTES, STDERR_LINE_BYTES, STDERR_LINES};

use crate::ToolError;
use crate::policy::Mode;
pub use crate::policy::{McpApprovals, McpToolRef};

/// Settings of the MCP tools (from the app's settings or `--mcp-config`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpSettings {
    /// The servers.
    pub config: McpConfig,
    /// Longest wait for one call (and for a tool list). Default 60 s.
    pub call_timeout: Duration,
    /// Longest wait for a server to start and finish the handshake. Default 30 s.
    pub start_timeout: Duration,
    /// How many times a server that stopped is started again in one session. Default 3.
    pub max_restarts: u32,
    /// Most bytes of one result given to the model. 0 (the default): the same
    /// limit as one `read_file` page (`FileLimits::max_read_bytes`).
    pub max_result_bytes: usize,
    /// Mode of an MCP tool with no remembered answer. Default: ask.
    pub default_mode: Mode,
    /// Answers remembered per server and tool (they win over `default_mode`).
    pub remembered: McpApprovals,
    /// Bounds on what a server lists.
    pub limits: McpLimits,
}

/// Most pages of `tools/list` asked of one server. A server pages its list
/// to keep messages small, so [`MAX_TOOLS_PER_SERVER`] tools take a handful
/// of pages (the servers measured list everything in one); 32 leaves room
/// for pages of 8. A cursor that never ends (a server paging in a loop)
/// stops here instead of at the call's time limit.
pub const MAX_LIST_PAGES: usize = 32;
/// Most tools offered from one server. The largest servers in common use
/// list about a hundred tools (`server-everything` lists 13, the filesystem
/// server 14); past a few hundred no model's window holds the list (256
/// tools of even 150 tokens each are 38,400 tokens) and no model picks well
/// among them. Hundreds of thousands of tools would otherwise be gathered
/// into memory, page after page.
pub const MAX_TOOLS_PER_SERVER: usize = 256;
/// Characters of a tool's description given to the model. A description
/// says when to use the tool in a few sentences (the longest of the test
/// servers' is under 400 characters); 1,024 (about 250 tokens) keeps every
/// real one whole, and cuts a manual, or a page of instructions meant to
/// steer the model, to what fits beside the other tools. Cut with `…`.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Bytes of a tool's JSON Schema (compact JSON). The test servers' largest
/// is under 1.5 KiB; 16 KiB allows a deep schema with long enums. A schema
/// cannot be cut without changing what it accepts, so a tool over it is not
/// offered (a warning names it); its server's other tools are.
pub const MAX_SCHEMA_BYTES: usize = 16 << 10;
/// Share of the model's window the MCP tools may take together. The tool
/// list sits in the pinned zone, which compaction never frees: what it
/// takes is lost to every round. A quarter leaves three quarters for the
/// system prompt, the question, the rounds and the generation reserve; at
/// half, a small window (4,096) holds the question and two or three rounds
/// before the first compaction, and one big server is what made every
/// investigation end at round 1. At 8,192 tokens a quarter is 2,048 tokens:
/// about 15 tools with schemas.
pub const MAX_WINDOW_SHARE: f64 = 0.25;

/// Bounds on what one MCP server lists (the constants' comments say why
/// each default is that number).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct McpLimits {
    /// Most `tools/list` pages asked for. Default [`MAX_LIST_PAGES`].
    pub max_list_pages: usize,
    /// Most tools a server may list; past it, it is refused. Default [`MAX_TOOLS_PER_SERVER`].
    pub max_tools: usize,
    /// Characters of a description kept. Default [`MAX_DESCRIPTION_CHARS`].
    pub max_description_chars: usize,
    /// Largest schema (compact JSON bytes) offered. Default [`MAX_SCHEMA_BYTES`].
    pub max_schema_bytes: usize,
    /// Share of the window the MCP tools may take together (with
    /// [`crate::ToolRegistry::connect_mcp_within`]). Default [`MAX_WINDOW_SHARE`].
    pub max_window_share: f64,
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits {
            max_list_pages: MAX_LIST_PAGES,
            max_tools: MAX_TOOLS_PER_SERVER,
            max_description_chars: MAX_DESCRIPTION_CHARS,
            max_schema_bytes: MAX_SCHEMA_BYTES,
            max_window_share: MAX_WINDOW_SHARE,
        }
    }
}

/// The model's window, for the share of it the MCP tools may take: its size
/// and how the model counts a text's tokens (mf-tools knows nothing of
/// models, so the caller brings both).
#[derive(Clone, Copy)]
pub struct McpWindow<'a> {
    /// Tokens in the model's context window.
    pub context_tokens: usize,
    /// Tokens of a text as the model's tokenizer counts them.
    pub count: &'a (dyn Fn(&str) -> usize + Sync),
}

impl std::fmt::Debug for McpWindow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpWindow").field("context_tokens", &self.context_tokens).finish_non_exhaustive()
    }
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            config: McpConfig::default(),
            call_timeout: Duration::from_secs(60),
            start_timeout: Duration::from_secs(30),
            max_restarts: 3,
            max_result_bytes: 0,
            default_mode: Mode::Ask,
            remembered: McpApprovals::default(),
            limits: McpLimits::default(),
        }
    }
}

/// A tool listed by a server, as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTool {
    /// The name the model calls: `server__tool` (characters outside
    /// `[A-Za-z0-9_-]` become `_`; at most 64 characters).
    pub name: String,
    /// Where it routes.
    pub origin: McpToolRef,
    /// The server's description.
    pub description: String,
    /// The server's JSON Schema of the arguments (without `$schema`).
    pub parameters: serde_json::Value,
    /// The server says it has no side effects (`readOnlyHint`; a hint, not a guarantee).
    pub read_only: bool,
}

/// An MCP tool's result, as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpOutput {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The result's content as text (images and other binary parts are named, not included).
    pub text: String,
    /// Bytes of the whole text before it was cut.
    pub bytes: usize,
    /// True when `text` was cut to the limit.
    pub truncated: bool,
}

/// The state of one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum McpServerState {
    /// Configured with `disabled: true`.
    Disabled,
    /// Not started yet (servers start on the first list or call).
    NotStarted,
    /// Running (`pid` for a local server, when known).
    Running {
        /// Its process id.
        pid: Option<u32>,
    },
    /// It failed to start or stopped; why.
    Failed {
        /// The reason, for the user.
        error: String,
    },
}

/// One server's name, state and listed tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerStatus {
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: McpServerState,
    /// Model-facing names of its tools (empty until listed).
    pub tools: Vec<String>,
}

/// Longest model-facing tool name (OpenAI-style function names allow 64).
pub const MAX_TOOL_NAME: usize = 64;

/// The model-facing name of `tool` on `server`.
#[must_use]
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean: String = tool.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    let mut name = format!("{server}{NAME_SEPARATOR}{clean}");
    name.truncate(MAX_TOOL_NAME);
    name
}

/// The servers of one registry, and the tools they listed.
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    tools: RwLock<BTreeMap<String, Vec<McpTool>>>,
    failures: RwLock<BTreeMap<String, String>>,
    remembered: RwLock<McpApprovals>,
    default_mode: Mode,
    max_result_bytes: usize,
    limits: McpLimits,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").field("servers", &self.servers.iter().map(|s| &s.cfg.name).collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl McpHub {
    /// Builds the hub; starts nothing. `max_result_bytes` is already resolved (not 0).
    #[must_use]
    pub fn new(s: McpSettings, max_result_bytes: usize) -> Self {
        let limits = Limits {
            start: s.start_timeout,
            call: s.call_timeout,
            max_restarts: s.max_restarts,
            max_pages: s.limits.max_list_pages,
            max_tools: s.limits.max_tools,
        };
        let servers = s.config.servers.iter().filter(|c| !c.disabled).map(|c| Arc::new(Server::new(c.clone(), limits))).collect();
        McpHub {
            servers,
            tools: RwLock::new(BTreeMap::new()),
            failures: RwLock::new(BTreeMap::new()),
            remembered: RwLock::new(s.remembered),
            default_mode: s.default_mode,
            max_result_bytes,
            limits: s.limits,
        }
    }

    fn server(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.cfg.name == name)
    }

    /// Starts every server not yet listed and lists its tools, all servers at
    /// once. A server that fails is reported in its status, not as an error:
    /// its tools are simply not offered. With `window`, servers are taken in
    /// name order while the MCP tools together stay within
    /// [`McpLimits::max_window_share`] of it; a server that would pass it is
    /// refused with its name and sizes, and later (smaller) ones may still fit.
    pub async fn connect(&self, window: Option<McpWindow<'_>>) -> Vec<McpServerStatus> {
        let todo: Vec<Arc<Server>> = {
            let listed = self.tools.read().map(|t| t.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
            self.servers.iter().filter(|s| !listed.contains(&s.cfg.name)).cloned().collect()
        };
        let lists = futures::future::join_all(todo.iter().map(|s| async move { (s.cfg.name.clone(), s.list_tools().await) })).await;
        let mut used = window.map(|w| self.tools().iter().map(|t| (w.count)(&rendered(t))).sum::<usize>()).unwrap_or(0);
        for (name, r) in lists {
            let r = r.map(|tools| self.offer(&name, tools)).and_then(|offered| match window {
                None => Ok(offered),
                Some(w) => {
                    let text: Vec<String> = offered.iter().map(rendered).collect();
                    let tokens: usize = text.iter().map(|t| (w.count)(t)).sum();
                    let bytes: usize = text.iter().map(String::len).sum();
                    let budget = (w.context_tokens as f64 * self.limits.max_window_share) as usize;
                    if used + tokens > budget {
                        return Err(ToolError::McpOverLimit {
                            server: name.clone(),
                            message: format!(
                                "its {} tools take {} tokens ({} bytes), and the MCP tools may take {}% of the {}-token window: {} tokens, {} of them already taken",
                                offered.len(),
                                tokens,
                                bytes,
                                (self.limits.max_window_share * 100.0).round(),
                                w.context_tokens,
                                budget,
                                used
                            ),
                        });
                    }
                    used += tokens;
                    Ok(offered)
                }
            });
            match r {
                Ok(offered) => {
                    if let Ok(mut t) = self.tools.write() {
                        t.insert(name.clone(), offered);
                    }
                    if let Ok(mut f) = self.failures.write() {
                        f.remove(&name);
                    }
                }
                Err(e) => {
                    tracing::warn!(server = %name, error = %e, "MCP server unavailable");
                    if let Ok(mut f) = self.failures.write() {
                        f.insert(name, e.to_string());
                    }
                }
            }
        }
        self.status()
    }

    fn offer(&self, server: &str, tools: Vec<rmcp::model::Tool>) -> Vec<McpTool> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for t in tools {
            let name = tool_name(server, &t.name);
            if !seen.insert(name.clone()) {
                tracing::warn!(server, tool = %t.name, "two tools map to the name `{name}`; the second is not offered");
                continue;
            }
            let mut schema = (*t.input_schema).clone();
            schema.remove("$schema");
            if !schema.contains_key("type") {
                schema.insert("type".into(), serde_json::json!("object"));
            }
            let schema = serde_json::Value::Object(schema);
            let schema_bytes = schema.to_string().len();
            if schema_bytes > self.limits.max_schema_bytes {
                tracing::warn!(
                    server,
                    tool = %t.name,
                    "the tool's schema is {schema_bytes} bytes, more than {}; the tool is not offered",
                    self.limits.max_schema_bytes
                );
                continue;
            }
            let description = t.description.as_deref().map(|d| cut_chars(d, self.limits.max_description_chars));
            out.push(McpTool {
                name,
                origin: McpToolRef { server: server.to_owned(), tool: t.name.to_string() },
                description: description.map_or_else(|| format!("Tool `{}` of the MCP server `{server}`.", t.name), |d| format!("{d} (MCP server `{server}`)")),
                parameters: schema,
                read_only: t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true),
            });
        }
        out
    }

    /// Every listed tool, servers by name.
    #[must_use]
    pub fn tools(&self) -> Vec<McpTool> {
        let Ok(t) = self.tools.read() else { return Vec::new() };
        self.servers.iter().filter_map(|s| t.get(&s.cfg.name)).flatten().cloned().collect()
    }

    /// The listed tool with this model-facing name.
    #[must_use]
    pub fn find(&self, name: &str) -> Option<McpTool> {
        let t = self.tools.read().ok()?;
        t.values().flatten().find(|x| x.name == name).cloned()
    }

    /// Every configured server's state and tools.
    #[must_use]
    pub fn status(&self) -> Vec<McpServerStatus> {
        let tools = self.tools.read().map(|t| t.clone()).unwrap_or_default();
        let failures = self.failures.read().map(|f| f.clone()).unwrap_or_default();
        self.servers
            .iter()
            .map(|s| {
                let state = match s.snapshot() {
                    Snapshot::Running { pid } => McpServerState::Running { pid },
                    Snapshot::Stopped(e) => McpServerState::Failed { error: e },
                    Snapshot::NotStarted => match failures.get(&s.cfg.name) {
                        Some(e) => McpServerState::Failed { error: e.clone() },
                        None => McpServerState::NotStarted,
                    },
                };
                let state = match (state, failures.get(&s.cfg.name)) {
                    (McpServerState::NotStarted | McpServerState::Running { .. }, Some(e)) if !tools.contains_key(&s.cfg.name) => {
                        McpServerState::Failed { error: e.clone() }
                    }
                    (st, _) => st,
                };
                McpServerStatus {
                    name: s.cfg.name.clone(),
                    state,
                    tools: tools.get(&s.cfg.name).map(|v| v.iter().map(|t| t.name.clone()).collect()).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The mode of a call to `tool` on `server`: a remembered answer, else the default.
    #[must_use]
    pub fn mode(&self, server: &str, tool: &str) -> Mode {
        self.remembered.read().ok().and_then(|r| r.get(server, tool)).unwrap_or(self.default_mode)
    }

    /// Remembers `mode` for `tool` on `server` for the rest of this registry's life.
    pub fn remember(&self, server: &str, tool: &str, mode: Mode) {
        if let Ok(mut r) = self.remembered.write() {
            r.set(server, tool, mode);
        }
    }

    /// Everything remembered (for the app to save).
    #[must_use]
    pub fn remembered(&self) -> McpApprovals {
        self.remembered.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// Calls `tool` (already resolved from its model-facing name).
    ///
    /// # Errors
    /// [`ToolError::UnknownTool`] for a server not configured, else the `Mcp*` errors.
    pub async fn call(&self, origin: &McpToolRef, arguments: serde_json::Map<String, serde_json::Value>) -> Result<McpOutput, ToolError> {
        let server = self.server(&origin.server).ok_or_else(|| ToolError::UnknownTool(tool_name(&origin.server, &origin.tool)))?;
        let r = server.call(&origin.tool, arguments).await?;
        let (text, bytes, truncated) = cut(result_text(&r), self.max_result_bytes);
        if r.is_error == Some(true) {
            return Err(ToolError::McpToolFailed { server: origin.server.clone(), tool: origin.tool.clone(), message: text });
        }
        Ok(McpOutput { server: origin.server.clone(), tool: origin.tool.clone(), text, bytes, truncated })
    }
}

/// The result's content as text: text parts as they are, embedded text
/// resources by their text, binary parts and links named.
fn result_text(r: &rmcp::model::CallToolResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in &r.content {
        let v = serde_json::to_value(c).unwrap_or_default();
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
        match v.get("type").and_then(|t| t.as_str()).unwrap_or("") {
            "text" => parts.push(s("text")),
            "image" | "audio" => parts.push(format!("[{} {}, {} bytes of base64, not shown]", s("type"), s("mimeType"), s("data").len())),
            "resource" => {
                let res = v.get("resource").cloned().unwrap_or_default();
                let uri = res.get("uri").and_then(|x| x.as_str()).unwrap_or("");
                match res.get("text").and_then(|x| x.as_str()) {
                    Some(t) => parts.push(format!("[resource {uri}]\n{t}")),
                    None => parts.push(format!("[binary resource {uri}, not shown]")),
                }
            }
            "resource_link" => parts.push(format!("[resource link {} {}]", s("uri"), s("name"))),
            other => parts.push(format!("[{other} content, not shown]")),
        }
    }
    if parts.is_empty()
        && let Some(sc) = &r.structured_content
    {
        parts.push(sc.to_string());
    }
    parts.join("\n")
}

/// A tool as the model is shown it (name, description, schema), for counting its tokens.
fn rendered(t: &McpTool) -> String {
    serde_json::json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}).to_string()
}

/// `text` cut to at most `max` characters, with `…` when cut.
fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: String, max: usize) -> (String, usize, bool) {
    let bytes = text.len();
    if bytes <= max {
        return (text, bytes, false);
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), bytes, true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn names_are_namespaced_and_clean() {
        assert_eq!(tool_name("fs", "read_file"), "fs__read_file");
        assert_eq!(tool_name("ev", "get-sum"), "ev__get-sum");
        assert_eq!(tool_name("ev", "a.b c/d"), "ev__a_b_c_d");
        assert_eq!(tool_name("s", &"x".repeat(100)).len(), MAX_TOOL_NAME);
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        assert_eq!(cut("héllo".into(), 2), ("h".into(), 6, true));
        assert_eq!(cut("abc".into(), 3), ("abc".into(), 3, false));
    }

    #[test]
    fn remembered_answers_by_server_and_tool() {
        let mut a = McpApprovals::default();
        a.set("fs", "write_file", Mode::Deny);
        a.set("fs", "read_file", Mode::Auto);
        assert_eq!(a.get("fs", "write_file"), Some(Mode::Deny));
        assert_eq!(a.get("other", "write_file"), None);
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"fs":{"read_file":"auto","write_file":"deny"}}"#);
        a.set("fs", "write_file", Mode::Ask);
        a.set("fs", "read_file", Mode::Ask);
        assert_eq!(a, McpApprovals::default());
    }
}
