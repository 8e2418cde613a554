//! The tool list the agent hands to the model, and dispatch with the
//! approval policy enforced.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ToolError;
use crate::code::{self, CodeArgs, CodeConfig, CodeResult};
use crate::files::{self, FileLimits, FilePage, ListArgs, Listing, ReadArgs, SearchArgs, SearchResult, Workspace};
use crate::http::{self, HttpArgs, HttpMethod, HttpPolicy, HttpResponse, Outgoing, Supplied};
use crate::mcp::{McpApprovals, McpHub, McpOutput, McpServerStatus, McpSettings, McpToolRef, McpWindow};
use crate::policy::{Approval, ApprovalPolicy, ApprovalRequest, Decision, Mode};

/// Settings of all tools (from the user's settings file or CLI flags).
#[derive(Debug, Clone, Default)]
pub struct ToolSettings {
    /// Workspace roots for the file tools (none: file tools are not offered).
    pub workspace: Vec<PathBuf>,
    /// File limits.
    pub file_limits: FileLimits,
    /// Hosts and limits of `http`.
    pub http: HttpPolicy,
    /// Sandbox of `run_code` (`None`: not offered).
    pub code: Option<CodeConfig>,
    /// Approval modes.
    pub policy: ApprovalPolicy,
    /// Largest arguments JSON accepted. 0 means the default, 512 KiB.
    pub max_args_bytes: usize,
    /// MCP servers whose tools are offered too (none by default).
    pub mcp: McpSettings,
}

/// What the model is told about one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDescriptor {
    /// Name the model calls.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
    /// True when the tool has no side effects.
    pub read_only: bool,
}

/// A tool's successful result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolOutput {
    /// From `http`.
    Http(HttpResponse),
    /// From `list_files`.
    Listing(Listing),
    /// From `read_file`.
    FilePage(FilePage),
    /// From `search_files`.
    Search(SearchResult),
    /// From `run_code`.
    Code(CodeResult),
    /// From a tool of an MCP server.
    Mcp(McpOutput),
}

impl ToolOutput {
    /// A note for the model and the UI when the result was cut.
    pub fn truncation_note(&self) -> Option<String> {
        match self {
            ToolOutput::Http(r) => r.truncated.then(|| format!("body cut at {} bytes", r.body_bytes)),
            ToolOutput::Listing(l) => l.note.clone().or_else(|| l.truncated.then(|| format!("listing cut at {} entries", l.entries.len()))),
            ToolOutput::FilePage(p) => p.next_offset.map(|n| format!("page of {} of {} bytes; continue with offset {n}", p.bytes, p.size)),
            ToolOutput::Search(s) => {
                s.note.clone().or_else(|| s.truncated.then(|| format!("search stopped at {} matches / {} files", s.matches.len(), s.files_searched)))
            }
            ToolOutput::Code(c) => c.note.clone(),
            ToolOutput::Mcp(m) => m.truncated.then(|| format!("result cut at {} of {} bytes", m.text.len(), m.bytes)),
        }
    }
}

/// Whether a call may run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// It runs without asking.
    Auto,
    /// Ask the user this; pass their [`Approval`] to [`ToolRegistry::run`].
    Ask(ApprovalRequest),
}

/// Tool names.
pub const HTTP: &str = "http";
/// Tool names.
pub const LIST_FILES: &str = "list_files";
/// Tool names.
pub const READ_FILE: &str = "read_file";
/// Tool names.
pub const SEARCH_FILES: &str = "search_files";
/// Tool names.
pub const RUN_CODE: &str = "run_code";

enum Parsed {
    Http(HttpArgs),
    List(ListArgs),
    Read(ReadArgs),
    Search(SearchArgs),
    Code(CodeArgs),
    Mcp(McpToolRef, serde_json::Map<String, serde_json::Value>),
}

/// The tools, configured; build once per investigation.
#[derive(Debug)]
pub struct ToolRegistry {
    /// Shared with the blocking threads that walk it.
    workspace: Arc<Workspace>,
    /// Hosts the user approved for this session ([`ToolRegistry::approve_host`]).
    approved_hosts: Mutex<BTreeSet<String>>,
    /// Hosts named exactly (no wildcard) in the allow-list: the user typed
    /// them, so their names are not data (their paths still are).
    listed_hosts: BTreeSet<String>,
    /// What the user and approved pages supplied ([`Supplied`]).
    supplied: Mutex<Supplied>,
    http: HttpPolicy,
    code: Option<CodeConfig>,
    /// `Ok(mechanism)` when the sandbox probe passed, else why not.
    code_status: Result<String, ToolError>,
    policy: ApprovalPolicy,
    max_args_bytes: usize,
    mcp: McpHub,
}

impl ToolRegistry {
    /// Open the workspace and probe the code sandbox.
    ///
    /// # Errors
    /// [`ToolError::Io`] when a workspace folder cannot be opened. A failed
    /// sandbox probe is not an error: `run_code` is then not offered and refuses.
    pub async fn new(s: ToolSettings) -> Result<ToolRegistry, ToolError> {
        let mcp_bytes = if s.mcp.max_result_bytes == 0 { usize::try_from(s.file_limits.max_read_bytes).unwrap_or(usize::MAX) } else { s.mcp.max_result_bytes };
        let mcp = McpHub::new(s.mcp.clone(), mcp_bytes);
        let workspace = Workspace::open(&s.workspace, s.file_limits)?;
        let code_status = match &s.code {
            None => Err(ToolError::SandboxUnavailable("code execution is not enabled".into())),
            Some(cfg) => code::probe(cfg).await.map(|r| r.mechanism),
        };
        if let Err(e) = &code_status {
            tracing::warn!(error = %e, "run_code unavailable");
        }
        let listed_hosts = s.http.allowed_hosts.iter().flatten().filter(|e| !e.contains('*')).filter_map(|e| http::host_key_of(e)).collect();
        Ok(ToolRegistry {
            workspace: Arc::new(workspace),
            approved_hosts: Mutex::new(BTreeSet::new()),
            listed_hosts,
            supplied: Mutex::new(Supplied::default()),
            http: s.http,
            code: s.code,
            code_status,
            policy: s.policy,
            max_args_bytes: if s.max_args_bytes == 0 { 512 << 10 } else { s.max_args_bytes },
            mcp,
        })
    }

    /// Starts the MCP servers not yet listed and lists their tools (all at
    /// once), so that [`ToolRegistry::descriptors`] offers them. Call it
    /// before handing the tools to the model; nothing is started before.
    /// A server that fails is reported in its status and its tools are not
    /// offered; it is not an error.
    ///
    /// Nothing bounds here the share of the window the tool list takes:
    /// prefer [`ToolRegistry::connect_mcp_within`] when the model is known.
    pub async fn connect_mcp(&self) -> Vec<McpServerStatus> {
        self.mcp.connect(None).await
    }

    /// As [`ToolRegistry::connect_mcp`], with the MCP tools kept within
    /// [`crate::mcp::McpLimits::max_window_share`] of the model's `window`:
    /// a server whose tool list would pass it is refused (its status says
    /// which server, how many tools, tokens and bytes, and the budget), the
    /// others are offered.
    pub async fn connect_mcp_within(&self, window: McpWindow<'_>) -> Vec<McpServerStatus> {
        self.mcp.connect(Some(window)).await
    }

    /// Every configured MCP server's state and tools, without starting any.
    pub fn mcp_status(&self) -> Vec<McpServerStatus> {
        self.mcp.status()
    }

    /// The server and tool behind a model-facing MCP tool name (`server__tool`),
    /// for an approval prompt or to remember an answer; `None` for our own tools.
    pub fn mcp_tool(&self, name: &str) -> Option<McpToolRef> {
        self.mcp.find(name).map(|t| t.origin)
    }

    /// Remembers the user's answer for `tool` on `server` for the rest of this
    /// registry's life: `Auto` runs it without asking, `Deny` refuses it
    /// without asking, `Ask` forgets the answer. Save [`ToolRegistry::mcp_remembered`]
    /// into [`McpSettings::remembered`] to keep it across sessions.
    pub fn remember_mcp(&self, server: &str, tool: &str, mode: Mode) {
        self.mcp.remember(server, tool, mode);
    }

    /// The remembered MCP answers (the settings' plus those of this session).
    pub fn mcp_remembered(&self) -> McpApprovals {
        self.mcp.remembered()
    }

    /// Approve `host` for the rest of this registry's life (the session):
    /// `http` calls to it then run without asking, data-carrying ones
    /// included, unless the policy denies their method. Give the
    /// [`ApprovalRequest::host`] of the call the user answered "approve this
    /// host for the session" to (or a host as the user typed it:
    /// `api.example.com`, `127.0.0.1:8080`). Approving a host does not open
    /// an address the allow-list or the SSRF guard refuses. Returns the host
    /// as it was recorded.
    ///
    /// # Errors
    /// [`ToolError::InvalidArguments`] when `host` is not a host name or address.
    pub fn approve_host(&self, host: &str) -> Result<String, ToolError> {
        let key = http::host_key_of(host)
            .ok_or_else(|| ToolError::InvalidArguments { tool: HTTP.into(), message: format!("`{host}` is not a host name or address") })?;
        self.approved_hosts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.clone());
        Ok(key)
    }

    /// Text the user wrote (the question, a follow-up, the system prompt
    /// they set, the arguments of a call they typed): what it names (URLs,
    /// paths, hosts, values) an `http` call may repeat without it counting
    /// as data. Everything else in a request to a host not approved for the
    /// session is data, and asks (see [`ApprovalPolicy`]). Pages fetched by
    /// requests that carried no data are added by the registry itself.
    pub fn supplied_by_user(&self, text: &str) {
        self.supplied.lock().unwrap_or_else(std::sync::PoisonError::into_inner).add_user(text);
    }

    /// The hosts approved for this session, sorted.
    pub fn approved_hosts(&self) -> Vec<String> {
        self.approved_hosts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect()
    }

    fn host_approved(&self, host: Option<&str>) -> bool {
        host.is_some_and(|h| self.approved_hosts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(h))
    }

    /// Why `run_code` is or is not available (the mechanism in words, or the refusal).
    pub fn code_status(&self) -> &Result<String, ToolError> {
        &self.code_status
    }

    /// The tools offered to the model (unavailable ones are left out).
    pub fn descriptors(&self) -> Vec<ToolDescriptor> {
        let d = |name: &str, description: &str, parameters: serde_json::Value, read_only| ToolDescriptor {
            name: name.into(),
            description: description.into(),
            parameters,
            read_only,
        };
        let root = json!({"type": "string", "description": "workspace root name (default: the first)"});
        let mut v = vec![d(
            HTTP,
            "Make an HTTP GET or POST request to an API and return status and body.",
            json!({"type": "object", "properties": {
                "method": {"type": "string", "enum": ["GET", "POST"], "default": "GET"},
                "url": {"type": "string", "description": "absolute http(s) URL"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"description": "request body: a string, or JSON"}
            }, "required": ["url"], "additionalProperties": false}),
            false,
        )];
        if !self.workspace.roots().is_empty() {
            v.push(d(
                LIST_FILES,
                "List a folder of the workspace.",
                json!({"type": "object", "properties": {"path": {"type": "string", "default": "."}, "root": root},
                    "additionalProperties": false}),
                true,
            ));
            v.push(d(
                READ_FILE,
                "Read a text file of the workspace, one page at a time (use next_offset to continue).",
                json!({"type": "object", "properties": {"path": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0, "default": 0},
                    "max_bytes": {"type": "integer", "minimum": 1}, "root": root},
                    "required": ["path"], "additionalProperties": false}),
                true,
            ));
            v.push(d(
                SEARCH_FILES,
                "Search the workspace's text files for a string or regular expression.",
                json!({"type": "object", "properties": {"pattern": {"type": "string"},
                    "regex": {"type": "boolean", "default": false}, "ignore_case": {"type": "boolean", "default": false},
                    "path": {"type": "string", "default": "."}, "root": root},
                    "required": ["pattern"], "additionalProperties": false}),
                true,
            ));
        }
        if self.code_status.is_ok() {
            v.push(d(RUN_CODE, "Run a short Python or sh program in an isolated sandbox (no network, no access to your files; /tmp is scratch). Returns exit code, stdout, stderr.",
                json!({"type": "object", "properties": {"language": {"type": "string", "enum": ["python", "sh"]},
                    "code": {"type": "string"}}, "required": ["language", "code"], "additionalProperties": false}), false));
        }
        v.extend(self.mcp.tools().into_iter().map(|t| ToolDescriptor {
            name: t.name,
            description: t.description,
            parameters: t.parameters,
            read_only: t.read_only,
        }));
        v
    }

    fn parse(&self, name: &str, args_json: &str) -> Result<(Parsed, serde_json::Value), ToolError> {
        if args_json.len() > self.max_args_bytes {
            return Err(ToolError::ArgumentsTooLarge { len: args_json.len(), max: self.max_args_bytes });
        }
        let bad = |e: serde_json::Error| ToolError::InvalidArguments { tool: name.into(), message: e.to_string() };
        let value: serde_json::Value = serde_json::from_str(if args_json.trim().is_empty() { "{}" } else { args_json }).map_err(bad)?;
        let p = match name {
            HTTP => Parsed::Http(serde_json::from_value(value.clone()).map_err(bad)?),
            LIST_FILES => Parsed::List(serde_json::from_value(value.clone()).map_err(bad)?),
            READ_FILE => Parsed::Read(serde_json::from_value(value.clone()).map_err(bad)?),
            SEARCH_FILES => Parsed::Search(serde_json::from_value(value.clone()).map_err(bad)?),
            RUN_CODE => Parsed::Code(serde_json::from_value(value.clone()).map_err(bad)?),
            other => match self.mcp.find(other) {
                Some(t) => match &value {
                    serde_json::Value::Object(m) => Parsed::Mcp(t.origin, m.clone()),
                    _ => return Err(ToolError::InvalidArguments { tool: name.into(), message: "the arguments must be a JSON object".into() }),
                },
                None => return Err(ToolError::UnknownTool(other.to_string())),
            },
        };
        Ok((p, value))
    }

    fn mode(&self, p: &Parsed) -> Mode {
        match p {
            Parsed::Http(a) => self.http_mode(a),
            Parsed::List(_) | Parsed::Read(_) | Parsed::Search(_) => self.policy.files,
            Parsed::Code(_) => self.policy.code,
            Parsed::Mcp(t, _) => self.mcp.mode(&t.server, &t.tool),
        }
    }

    /// What `a` would send, data being what the user and approved pages did not supply.
    fn http_out(&self, a: &HttpArgs) -> Outgoing {
        let host = http::host_key_of(&a.url);
        let known = host.as_deref().is_some_and(|h| self.listed_hosts.contains(h)) || self.host_approved(host.as_deref());
        http::outgoing_given(a, &self.supplied.lock().unwrap_or_else(std::sync::PoisonError::into_inner), known)
    }

    /// See [`ApprovalPolicy`] for the order of the rules.
    fn http_mode(&self, a: &HttpArgs) -> Mode {
        let base = if a.method == HttpMethod::Get { self.policy.http_get } else { self.policy.http_write };
        if base == Mode::Deny {
            return Mode::Deny;
        }
        let out = self.http_out(a);
        if self.host_approved(out.host.as_deref()) {
            return Mode::Auto;
        }
        if out.carries_data() { base.stricter(self.policy.http_data) } else { base }
    }

    /// Does this call need the user's approval? Parses and validates the arguments.
    ///
    /// # Errors
    /// Invalid arguments, unknown tool, or [`ToolError::DeniedByPolicy`].
    pub fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> Result<Requirement, ToolError> {
        let (p, value) = self.parse(name, args_json)?;
        match self.mode(&p) {
            Mode::Auto => Ok(Requirement::Auto),
            Mode::Deny => Err(ToolError::DeniedByPolicy(name.into())),
            Mode::Ask => Ok(Requirement::Ask(match p {
                Parsed::Mcp(origin, _) => ApprovalRequest::for_mcp(call_id, name, origin, &value),
                Parsed::Http(a) => ApprovalRequest::for_http(call_id, &value, &self.http_out(&a), &a.url),
                _ => ApprovalRequest::new(call_id, name, &value),
            })),
        }
    }

    /// Run one call. Calls whose mode is `ask` run only with an [`Approval`]
    /// for this call id and these exact arguments; `None` means deny.
    ///
    /// # Errors
    /// Any [`ToolError`]; see [`ToolError::is_refusal`].
    pub async fn run(&self, call_id: &str, name: &str, args_json: &str, approval: Option<&Approval>) -> Result<ToolOutput, ToolError> {
        let (p, value) = self.parse(name, args_json)?;
        match self.mode(&p) {
            Mode::Auto => {}
            Mode::Deny => return Err(ToolError::DeniedByPolicy(name.into())),
            Mode::Ask => {
                let req = ApprovalRequest::new(call_id, name, &value);
                match approval {
                    None => return Err(ToolError::ApprovalRequired { tool: name.into(), call_id: call_id.into() }),
                    Some(a) if a.call_id != req.call_id || a.args_sha256 != req.args_sha256 => {
                        return Err(ToolError::ApprovalMismatch(call_id.into()));
                    }
                    Some(a) => match a.decision {
                        Decision::Approved => {}
                        Decision::Denied => return Err(ToolError::ApprovalDenied(call_id.into())),
                    },
                }
            }
        }
        match p {
            Parsed::Http(a) => {
                // A page fetched with nothing but supplied text holds nothing
                // of the workspace's: its links may be followed unasked.
                let carried = self.http_out(&a).carries_data();
                let r = http::run(&a, &self.http).await?;
                if !carried && let Ok(url) = url::Url::parse(&r.url) {
                    self.supplied.lock().unwrap_or_else(std::sync::PoisonError::into_inner).add_page(&url, &r.body);
                }
                Ok(ToolOutput::Http(r))
            }
            // The file tools block (a walk lasts up to its deadline): run them
            // on tokio's blocking pool, never on a runtime worker.
            Parsed::List(a) => self.blocking(move |ws| files::list(ws, &a).map(ToolOutput::Listing)).await,
            Parsed::Read(a) => self.blocking(move |ws| files::read(ws, &a).map(ToolOutput::FilePage)).await,
            Parsed::Search(a) => self.blocking(move |ws| files::search(ws, &a).map(ToolOutput::Search)).await,
            Parsed::Code(a) => {
                if let Err(e) = &self.code_status {
                    return Err(e.clone());
                }
                let Some(cfg) = &self.code else {
                    return Err(ToolError::SandboxUnavailable("code execution is not enabled".into()));
                };
                code::run(&a, cfg).await.map(ToolOutput::Code)
            }
            Parsed::Mcp(t, args) => self.mcp.call(&t, args).await.map(ToolOutput::Mcp),
        }
    }

    async fn blocking(&self, f: impl FnOnce(&Workspace) -> Result<ToolOutput, ToolError> + Send + 'static) -> Result<ToolOutput, ToolError> {
        let ws = self.workspace.clone();
        tokio::task::spawn_blocking(move || f(&ws))
            .await
            .unwrap_or_else(|e| Err(ToolError::Io { path: ".".into(), message: format!("the file tool stopped: {e}") }))
    }
}
