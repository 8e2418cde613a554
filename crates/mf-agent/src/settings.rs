//! [`RunSettings`] → [`RunSpec`]: the one settings pipeline.
//!
//! `RunSettings` is flat and plain (strings, numbers, lists): what the app's
//! settings file and its window hold, and what the CLI's flags fill. Its
//! `Default` is the only place a default lives. [`RunSpec::resolve`] is the
//! only validator: it checks every field, names each bad one with a message
//! for a user ([`SettingErrors`]), and builds the typed spec a session runs
//! and is stored with. The app shows the messages beside its form's fields;
//! the CLI prints them and exits with status 2.

use std::path::{Path, PathBuf};

use mf_forgetting::StrategyKind;
use mf_tools::mcp::McpApprovals;
use mf_tools::policy::{ApprovalPolicy, Mode};
use serde::{Deserialize, Serialize};

use crate::agent::AgentSettings;
use crate::engine::{EngineChoice, EngineKind, KeySource};
use crate::model::{DeltaSource, SummaryPass};
use crate::session::spec::{DEFAULT_CONTEXT, RunSpec, ToolsSpec};

/// How a group of tool calls is approved (the settings' words for
/// `mf_tools::policy::Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Ask the user; no answer in time is a denial.
    Ask,
    /// Run without asking.
    Allow,
    /// Never run.
    Deny,
}

impl From<Mode> for ApprovalMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Ask => ApprovalMode::Ask,
            Mode::Auto => ApprovalMode::Allow,
            Mode::Deny => ApprovalMode::Deny,
        }
    }
}

impl From<ApprovalMode> for Mode {
    fn from(m: ApprovalMode) -> Self {
        match m {
            ApprovalMode::Ask => Mode::Ask,
            ApprovalMode::Allow => Mode::Auto,
            ApprovalMode::Deny => Mode::Deny,
        }
    }
}

/// The approval mode of each group of mf-tools' policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(default)]
pub struct ToolApprovals {
    /// `list_files`, `read_file`, `search_files`.
    pub files: ApprovalMode,
    /// HTTP GET (and HEAD).
    pub http_get: ApprovalMode,
    /// Any other HTTP method.
    pub http_write: ApprovalMode,
    /// `run_code`; `deny` also stops it being offered.
    pub code: ApprovalMode,
}

impl Default for ToolApprovals {
    fn default() -> Self {
        ToolApprovals::from(&ApprovalPolicy::default())
    }
}

impl From<&ApprovalPolicy> for ToolApprovals {
    fn from(p: &ApprovalPolicy) -> Self {
        ToolApprovals { files: p.files.into(), http_get: p.http_get.into(), http_write: p.http_write.into(), code: p.code.into() }
    }
}

impl ToolApprovals {
    /// mf-tools' policy with these modes.
    #[must_use]
    pub fn policy(&self) -> ApprovalPolicy {
        ApprovalPolicy {
            files: self.files.into(),
            http_get: self.http_get.into(),
            http_write: self.http_write.into(),
            code: self.code.into(),
            ..ApprovalPolicy::default()
        }
    }

    /// Every `ask` turned into `deny` (a face that cannot ask).
    #[must_use]
    pub fn asks_denied(self) -> Self {
        let f = |m: ApprovalMode| if m == ApprovalMode::Ask { ApprovalMode::Deny } else { m };
        ToolApprovals { files: f(self.files), http_get: f(self.http_get), http_write: f(self.http_write), code: f(self.code) }
    }
}

/// Every setting of a run, flat: what the app's settings file and window
/// hold and what the CLI's flags fill. Fields a file leaves out take their
/// default ([`RunSettings::default`], the one place defaults live).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(default)]
pub struct RunSettings {
    /// Which engine runs the model.
    pub engine: EngineKind,
    /// The GGUF model file (embedded engine). No default here: each face
    /// offers the models folder's default model.
    pub model_path: String,
    /// The server's base URL (Ollama or OpenAI-compatible engines).
    pub server_url: String,
    /// The model name on the server.
    pub server_model: String,
    /// OpenAI-compatible engine: write the tools and tool calls into the
    /// messages' text and read calls from the reply's text, for a server
    /// whose chat template shows the model only each message's content.
    /// Off: OpenAI's `tools` and `tool_calls` fields.
    pub server_tools_in_text: bool,
    /// OpenAI-compatible engine: the environment variable its API key is
    /// read from when the face holds none (empty: no key). The key itself
    /// is never stored.
    pub api_key_env: String,
    /// Constrain the embedded model's fenced-JSON tool calls with a grammar
    /// (on: small models often write a call that does not parse; formats
    /// other than fenced JSON are not constrained).
    pub tool_grammar: bool,
    /// CPU threads for the embedded model (`None`: all cores).
    #[cfg_attr(test, ts(optional = nullable))]
    pub threads: Option<u32>,
    /// Offload every layer to the GPU (Metal/CUDA builds only).
    pub gpu: bool,
    /// Context window `C`, tokens.
    pub context: u32,
    /// Generation reserve `G`, tokens (also the longest reply).
    pub reserve: u32,
    /// Compaction fires above `ratio · (C − G)`.
    pub ratio: f64,
    /// Messages at the end kept verbatim.
    pub recent: usize,
    /// Compaction strategy (`none`, `baseline`, `masking`, `v1`, `v2`, `v2.1`).
    pub strategy: String,
    /// Exponent of the influence boost `Φ(B) = B^γ`.
    pub gamma: f64,
    /// How v2.1 ranks: the withholding test asked of the model, or Φ
    /// (`DeltaSource`'s names; the form does not show it).
    #[cfg_attr(test, ts(type = "string"))]
    pub delta: DeltaSource,
    /// Where the summary pass runs when the live history does not fit
    /// (`SummaryPass`'s names; the form does not show it).
    #[cfg_attr(test, ts(type = "string"))]
    pub summary_pass: SummaryPass,
    /// Who writes the compaction summaries: absent, the investigation's own
    /// model; else another engine (`embedded`: a GGUF file; `ollama`;
    /// `openai`, its key from `api_key_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub summariser: Option<EngineKind>,
    /// The summariser's model: a GGUF file (embedded) or its name on the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub summariser_model: Option<String>,
    /// The summariser's server URL (Ollama or OpenAI-compatible).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub summariser_url: Option<String>,
    /// Let thinking models think.
    pub thinking: bool,
    /// Sampling temperature of the replies (0: greedy).
    pub temperature: f32,
    /// Sampling seed.
    pub seed: u32,
    /// Optional cap on rounds (exits are dynamic). 0 stops before the first
    /// round: a stored, resumable investigation that has not called the
    /// model yet (the app's tests resume such a session started by `mf`).
    #[cfg_attr(test, ts(optional = nullable))]
    pub safety_cap: Option<u32>,
    /// The system prompt (`None`: the loop's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub system_prompt: Option<String>,
    /// Tool results longer than this many characters are cut, with a note.
    pub max_result_chars: usize,
    /// Tool arguments longer than this many bytes are refused.
    pub max_args_bytes: usize,
    /// Approval mode per tool group.
    pub tool_approvals: ToolApprovals,
    /// Folders the file tools may read (absolute; none: no file tools).
    pub workspace_roots: Vec<String>,
    /// Hosts the http tool may reach (`host`, `host:port`, `*.domain`); none:
    /// any public host. A loopback entry is the permission to reach loopback.
    pub allowed_hosts: Vec<String>,
    /// Offer `run_code` (sandboxed; needs the `mf-sandbox` helper beside the
    /// binary). Not offered when its approval is `deny`.
    pub code: bool,
    /// MCP servers whose tools are offered, in the `mcpServers` shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "unknown"))]
    pub mcp_servers: Option<serde_json::Value>,
    /// Answers given "always" per MCP server and tool.
    #[serde(skip_serializing_if = "McpApprovals::is_empty")]
    #[cfg_attr(test, ts(optional, type = "Record<string, Record<string, \"auto\" | \"deny\" | \"ask\">>"))]
    pub mcp_approvals: McpApprovals,
}

impl Default for RunSettings {
    fn default() -> Self {
        let a = AgentSettings::default();
        RunSettings {
            engine: EngineKind::default(),
            model_path: String::new(),
            server_url: String::new(),
            server_model: String::new(),
            server_tools_in_text: false,
            api_key_env: crate::engine::DEFAULT_API_KEY_ENV.into(),
            tool_grammar: true,
            threads: None,
            gpu: false,
            context: DEFAULT_CONTEXT,
            reserve: a.reserve,
            ratio: a.ratio,
            recent: a.recent,
            strategy: a.strategy.as_str().into(),
            gamma: a.plan.gamma,
            delta: a.delta,
            summary_pass: a.summary_pass,
            summariser: None,
            summariser_model: None,
            summariser_url: None,
            thinking: a.sampling.thinking != mf_inference::Thinking::Off,
            temperature: a.sampling.temperature,
            seed: a.sampling.seed,
            safety_cap: a.safety_cap,
            system_prompt: None,
            max_result_chars: a.max_result_chars,
            max_args_bytes: a.max_argument_bytes,
            tool_approvals: ToolApprovals::default(),
            workspace_roots: Vec::new(),
            allowed_hosts: Vec::new(),
            code: false,
            mcp_servers: None,
            mcp_approvals: McpApprovals::default(),
        }
    }
}

/// One setting that cannot be used: which, and why, in words for a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SettingError {
    /// The [`RunSettings`] field.
    pub field: String,
    /// What is wrong with it and what would do.
    pub message: String,
}

/// Every setting that cannot be used, one entry per field (the first
/// problem found in it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(transparent)]
pub struct SettingErrors(pub Vec<SettingError>);

impl std::fmt::Display for SettingErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self.0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect();
        write!(f, "{} setting(s) need fixing: {}", self.0.len(), list.join(" "))
    }
}

impl SettingErrors {
    /// Notes `message` for `field`, unless the field already has one.
    pub fn add(&mut self, field: &str, message: impl Into<String>) {
        if !self.has(field) {
            self.0.push(SettingError { field: field.into(), message: message.into() });
        }
    }

    /// Whether `field` has a message.
    #[must_use]
    pub fn has(&self, field: &str) -> bool {
        self.0.iter().any(|e| e.field == field)
    }

    /// The message for `field`.
    #[must_use]
    pub fn get(&self, field: &str) -> Option<&str> {
        self.0.iter().find(|e| e.field == field).map(|e| e.message.as_str())
    }

    /// Whether every setting was fine.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields with a message, in order.
    #[must_use]
    pub fn fields(&self) -> Vec<&str> {
        self.0.iter().map(|e| e.field.as_str()).collect()
    }

    fn into_result<T>(self, ok: impl FnOnce() -> T) -> Result<T, SettingErrors> {
        if self.is_empty() { Ok(ok()) } else { Err(self) }
    }
}

impl RunSpec {
    /// Checks every setting of `s` and builds the spec a session runs with.
    /// The only validator of settings, and the only place a default of the
    /// loop is applied (the ones [`RunSettings::default`] does not hold come
    /// from [`AgentSettings::default`]).
    ///
    /// # Errors
    /// [`SettingErrors`] naming every field that cannot be used.
    pub fn resolve(s: &RunSettings) -> Result<RunSpec, SettingErrors> {
        let mut e = SettingErrors::default();
        let engine = resolve_engine(s, &mut e);
        let agent = resolve_agent(s, &mut e);
        let tools = resolve_tools(s, &mut e);
        let summariser = resolve_summariser(s, &mut e);
        e.into_result(|| RunSpec { engine, context: s.context, agent, tools, summariser })
    }
}

impl EngineChoice {
    /// The engine the settings choose (the engine part of [`RunSpec::resolve`]).
    ///
    /// # Errors
    /// [`SettingErrors`] naming the engine fields that cannot be used.
    pub fn resolve(s: &RunSettings) -> Result<EngineChoice, SettingErrors> {
        let mut e = SettingErrors::default();
        let engine = resolve_engine(s, &mut e);
        e.into_result(|| engine)
    }

    /// The engine the settings name, unchecked: to look up what is kept for
    /// it (a calibration) whether or not it would run now.
    #[must_use]
    pub fn named(s: &RunSettings) -> EngineChoice {
        resolve_engine(s, &mut SettingErrors::default())
    }
}

impl ToolsSpec {
    /// The tools the settings describe (the tools part of [`RunSpec::resolve`],
    /// for a face that runs tools without a model).
    ///
    /// # Errors
    /// [`SettingErrors`] naming the tool fields that cannot be used.
    pub fn resolve(s: &RunSettings) -> Result<ToolsSpec, SettingErrors> {
        let mut e = SettingErrors::default();
        let tools = resolve_tools(s, &mut e);
        e.into_result(|| tools)
    }
}

fn resolve_engine(s: &RunSettings, e: &mut SettingErrors) -> EngineChoice {
    if let Some(t) = s.threads
        && !(1..=256).contains(&t)
    {
        e.add("threads", "Threads must be a whole number from 1 to 256.");
    }
    if s.engine == EngineKind::Embedded {
        let path = s.model_path.trim();
        if path.is_empty() {
            e.add("model_path", "Choose a model file.");
        } else if !path.to_ascii_lowercase().ends_with(".gguf") {
            e.add("model_path", "The model must be a .gguf file.");
        } else if !Path::new(path).is_file() {
            e.add("model_path", format!("No model file at {path}."));
        }
        return EngineChoice::Embedded {
            model: PathBuf::from(path),
            threads: s.threads.and_then(|t| i32::try_from(t).ok()),
            gpu: s.gpu,
            tool_grammar: s.tool_grammar,
        };
    }
    let url = s.server_url.trim();
    if !is_server_url(url) {
        e.add("server_url", "The server URL must start with http:// or https://.");
    }
    let model = s.server_model.trim();
    if model.is_empty() {
        e.add("server_model", "Name the model the server should run.");
    }
    let (url, model) = (url.to_owned(), model.to_owned());
    match s.engine {
        EngineKind::Ollama => EngineChoice::Ollama { url, model },
        EngineKind::Openai | EngineKind::Embedded => {
            EngineChoice::OpenAi { url, model, tools_in_text: s.server_tools_in_text, key: KeySource::from_env_name(&s.api_key_env) }
        }
    }
}

/// Whether `url` can name a server: `http://` or `https://`, then a host, no whitespace.
fn is_server_url(url: &str) -> bool {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| !r.is_empty() && !r.contains(char::is_whitespace))
}

/// The summariser the settings choose, if any (on the engine's threads and GPU setting).
fn resolve_summariser(s: &RunSettings, e: &mut SettingErrors) -> Option<EngineChoice> {
    let kind = s.summariser?;
    let model = s.summariser_model.as_deref().unwrap_or_default().trim().to_owned();
    if model.is_empty() {
        e.add("summariser_model", "Name the model that writes the summaries (a .gguf file, or its name on the server).");
    }
    if kind == EngineKind::Embedded {
        if !model.is_empty() && !Path::new(&model).is_file() {
            e.add("summariser_model", format!("No model file at {model}."));
        }
        let threads = s.threads.and_then(|t| i32::try_from(t).ok());
        return Some(EngineChoice::Embedded { model: PathBuf::from(model), threads, gpu: s.gpu, tool_grammar: false });
    }
    let url = s.summariser_url.as_deref().unwrap_or_default().trim().to_owned();
    if !is_server_url(&url) {
        e.add("summariser_url", "The summariser's server URL must start with http:// or https://.");
    }
    Some(match kind {
        EngineKind::Ollama => EngineChoice::Ollama { url, model },
        EngineKind::Openai | EngineKind::Embedded => EngineChoice::OpenAi { url, model, tools_in_text: false, key: KeySource::from_env_name(&s.api_key_env) },
    })
}

fn resolve_agent(s: &RunSettings, e: &mut SettingErrors) -> AgentSettings {
    let mut a = AgentSettings::default();
    if s.context < 512 {
        e.add("context", "Context size must be a whole number of at least 512 tokens.");
    }
    if s.reserve < 1 {
        e.add("reserve", "Generation reserve must be a whole number of at least 1 token.");
    } else if s.reserve >= s.context {
        e.add("reserve", format!("Generation reserve must be smaller than the context size ({}).", s.context));
    }
    if !(s.ratio.is_finite() && s.ratio > 0.0 && s.ratio <= 1.0) {
        e.add("ratio", "Threshold ratio must be above 0 and at most 1.");
    }
    if !e.has("context") && !e.has("reserve") && !e.has("ratio") {
        let budget = mf_forgetting::Budget { context: s.context as usize, reserve: s.reserve as usize, ratio: s.ratio, recent: s.recent };
        if let Err(err) = budget.validate() {
            e.add("ratio", format!("{err}; raise the ratio or the context size."));
        }
    }
    match s.strategy.parse::<StrategyKind>() {
        Ok(k) => a.strategy = k,
        Err(_) => e.add("strategy", format!("Unknown strategy; choose one of {}.", StrategyKind::ALL.map(StrategyKind::as_str).join(", "))),
    }
    if !(s.gamma.is_finite() && s.gamma > 0.0 && s.gamma <= 4.0) {
        e.add("gamma", "γ must be above 0 and at most 4 (the method uses 1.5).");
    }
    if !(s.temperature.is_finite() && s.temperature >= 0.0) {
        e.add("temperature", "The temperature must be 0 (greedy) or more.");
    }
    if s.system_prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
        e.add("system_prompt", "The system prompt must not be empty (remove it to use the default).");
    }
    if s.max_result_chars < 100 {
        e.add("max_result_chars", "Tool results must keep at least 100 characters.");
    }
    if s.max_args_bytes == 0 {
        e.add("max_args_bytes", "Tool arguments must be allowed at least 1 byte.");
    }
    a.reserve = s.reserve;
    a.ratio = s.ratio;
    a.recent = s.recent;
    a.plan.gamma = s.gamma;
    a.delta = s.delta;
    a.summary_pass = s.summary_pass;
    a.safety_cap = s.safety_cap;
    a.max_result_chars = s.max_result_chars;
    a.max_argument_bytes = s.max_args_bytes;
    if let Some(p) = &s.system_prompt {
        a.system_prompt.clone_from(p);
    }
    a.sampling.temperature = s.temperature;
    a.sampling.seed = s.seed;
    if s.temperature > 0.0 {
        // Sampling at a temperature: nucleus sampling keeps the tail out.
        a.sampling.top_p = 0.9;
    }
    a.sampling.thinking = if s.thinking { mf_inference::Thinking::On } else { mf_inference::Thinking::Off };
    if !e.has("gamma")
        && let Err(err) = a.plan.validate()
    {
        e.add("gamma", err.to_string());
    }
    a
}

fn resolve_tools(s: &RunSettings, e: &mut SettingErrors) -> ToolsSpec {
    for root in &s.workspace_roots {
        let p = Path::new(root);
        if !p.is_absolute() {
            e.add("workspace_roots", format!("Workspace root \"{root}\" must be an absolute path."));
        } else if p.components().any(|c| c == std::path::Component::ParentDir) {
            e.add("workspace_roots", format!("Workspace root \"{root}\" must not contain \"..\"."));
        } else if !p.is_dir() {
            e.add("workspace_roots", format!("Workspace root \"{root}\" is not a folder."));
        }
    }
    for host in &s.allowed_hosts {
        if let Err(m) = check_host(host) {
            e.add("allowed_hosts", m);
        }
    }
    if let Some(v) = &s.mcp_servers
        && let Err(err) = mf_tools::mcp::McpConfig::from_value(v)
    {
        e.add("mcp_servers", err.to_string());
    }
    ToolsSpec {
        workspace: s.workspace_roots.iter().map(PathBuf::from).collect(),
        allowed_hosts: s.allowed_hosts.clone(),
        code: s.code && s.tool_approvals.code != ApprovalMode::Deny,
        policy: s.tool_approvals.policy(),
        mcp: s.mcp_servers.clone(),
        mcp_approvals: s.mcp_approvals.clone(),
    }
}

/// Checks one allowed host: a name, an IPv4 or a bracketed IPv6 address,
/// an optional `*.` and an optional port; no scheme, no path.
fn check_host(host: &str) -> Result<(), String> {
    let bad = || format!("\"{host}\" is not a host name or address (no scheme, no path).");
    if host.is_empty() || host.contains("://") || host.contains('/') || host.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad());
        }
        (None, after.strip_prefix(':'))
    } else {
        match host.rsplit_once(':') {
            Some((n, p)) => (Some(n), Some(p)),
            None => (Some(host), None),
        }
    };
    if let Some(p) = port
        && p.parse::<u16>().is_err()
    {
        return Err(format!("\"{host}\" has a port that is not a number from 0 to 65535."));
    }
    if let Some(n) = name {
        let n = n.strip_prefix("*.").unwrap_or(n);
        let label_ok =
            |l: &str| !l.is_empty() && l.len() <= 63 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') && !l.starts_with('-') && !l.ends_with('-');
        if !n.split('.').all(label_ok) {
            return Err(bad());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn model() -> (tempfile::TempDir, String) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.gguf");
        std::fs::write(&p, "GGUF").unwrap();
        (d, p.display().to_string())
    }

    #[test]
    fn the_defaults_with_a_model_resolve_to_the_loops_defaults() {
        let (_d, m) = model();
        let s = RunSettings { model_path: m.clone(), ..RunSettings::default() };
        let spec = RunSpec::resolve(&s).unwrap();
        assert_eq!(spec.agent, AgentSettings::default());
        assert_eq!(spec.context, DEFAULT_CONTEXT);
        assert_eq!(spec.engine, EngineChoice::Embedded { model: m.into(), threads: None, gpu: false, tool_grammar: true });
        assert_eq!(spec.tools, ToolsSpec::default());
    }

    #[test]
    fn a_summariser_is_another_engine_checked_like_the_model() {
        let (_d, m) = model();
        let base = RunSettings { model_path: m.clone(), ..RunSettings::default() };
        assert_eq!(RunSpec::resolve(&base).unwrap().summariser, None, "by default the model writes its own summaries");
        let file = RunSettings { summariser: Some(EngineKind::Embedded), summariser_model: Some(m.clone()), threads: Some(2), ..base.clone() };
        assert_eq!(
            RunSpec::resolve(&file).unwrap().summariser,
            Some(EngineChoice::Embedded { model: m.clone().into(), threads: Some(2), gpu: false, tool_grammar: false })
        );
        let server = RunSettings {
            summariser: Some(EngineKind::Openai),
            summariser_model: Some("big".into()),
            summariser_url: Some("http://127.0.0.1:8080/v1".into()),
            ..base.clone()
        };
        assert!(matches!(RunSpec::resolve(&server).unwrap().summariser, Some(EngineChoice::OpenAi { model, .. }) if model == "big"));
        let bad = [
            (RunSettings { summariser: Some(EngineKind::Embedded), summariser_model: Some("/nowhere/s.gguf".into()), ..base.clone() }, "summariser_model"),
            (RunSettings { summariser: Some(EngineKind::Ollama), summariser_url: Some("http://h:1".into()), ..base.clone() }, "summariser_model"),
            (
                RunSettings { summariser: Some(EngineKind::Ollama), summariser_model: Some("m".into()), summariser_url: Some("h:1".into()), ..base.clone() },
                "summariser_url",
            ),
            // A scheme with no host is no server either (the model's URL is held to the same rule).
            (
                RunSettings {
                    summariser: Some(EngineKind::Openai),
                    summariser_model: Some("m".into()),
                    summariser_url: Some("http://".into()),
                    ..base.clone()
                },
                "summariser_url",
            ),
        ];
        for (s, field) in bad {
            assert_eq!(RunSpec::resolve(&s).unwrap_err().fields(), vec![field]);
        }
        // A stored spec without one reads as before.
        let spec = RunSpec::resolve(&base).unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        assert!(json.get("summariser").is_none());
        assert_eq!(serde_json::from_value::<RunSpec>(json).unwrap(), spec);
    }

    #[test]
    fn every_bad_field_gets_its_own_message() {
        let s = RunSettings {
            model_path: "/nowhere/x.gguf".into(),
            context: 256,
            ratio: 1.5,
            strategy: "v9".into(),
            gamma: f64::NAN,
            threads: Some(0),
            workspace_roots: vec!["relative/dir".into()],
            allowed_hosts: vec!["http://example.com/x".into()],
            max_result_chars: 10,
            system_prompt: Some(" ".into()),
            mcp_servers: Some(serde_json::json!({"mcpServers": {"bad": {"args": []}}})),
            ..RunSettings::default()
        };
        let e = RunSpec::resolve(&s).unwrap_err();
        let mut fields = e.fields();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "allowed_hosts",
                "context",
                "gamma",
                "max_result_chars",
                "mcp_servers",
                "model_path",
                "ratio",
                "reserve",
                "strategy",
                "system_prompt",
                "threads",
                "workspace_roots"
            ]
        );
        assert_eq!(e.get("reserve"), Some("Generation reserve must be smaller than the context size (256)."));
        assert_eq!(e.get("model_path"), Some("No model file at /nowhere/x.gguf."));
        assert!(e.to_string().starts_with("12 setting(s) need fixing"), "{e}");
    }

    #[test]
    fn a_server_engine_needs_a_url_and_a_model_name_and_no_file() {
        let s = RunSettings { engine: EngineKind::Ollama, server_url: "127.0.0.1:11434".into(), ..RunSettings::default() };
        let e = RunSpec::resolve(&s).unwrap_err();
        assert_eq!(e.fields(), ["server_url", "server_model"]);
        let s = RunSettings {
            engine: EngineKind::Openai,
            server_url: " http://127.0.0.1:8080/v1 ".into(),
            server_model: "m".into(),
            server_tools_in_text: true,
            api_key_env: String::new(),
            ..RunSettings::default()
        };
        let spec = RunSpec::resolve(&s).unwrap();
        assert_eq!(spec.engine, EngineChoice::OpenAi { url: "http://127.0.0.1:8080/v1".into(), model: "m".into(), tools_in_text: true, key: KeySource::None });
        assert_eq!(EngineChoice::resolve(&s).unwrap(), spec.engine);
    }

    #[test]
    fn a_ratio_whose_threshold_rounds_to_nothing_is_named() {
        let (_d, m) = model();
        let s = RunSettings { model_path: m, context: 512, reserve: 511, ratio: 0.5, ..RunSettings::default() };
        let e = RunSpec::resolve(&s).unwrap_err();
        assert_eq!(e.fields(), ["ratio"]);
        assert!(e.get("ratio").unwrap().contains("rounds to 0"), "{e}");
    }

    #[test]
    fn tools_and_sampling_follow_the_settings() {
        let (d, m) = model();
        let root = d.path().display().to_string();
        let s = RunSettings {
            model_path: m,
            workspace_roots: vec![root.clone()],
            allowed_hosts: vec!["127.0.0.1:9".into(), "*.example.com".into(), "[::1]:80".into()],
            code: true,
            tool_approvals: ToolApprovals { code: ApprovalMode::Deny, http_get: ApprovalMode::Ask, ..ToolApprovals::default() },
            temperature: 0.7,
            thinking: true,
            strategy: "v2.1".into(),
            ..RunSettings::default()
        };
        let spec = RunSpec::resolve(&s).unwrap();
        assert_eq!(spec.tools.workspace, [PathBuf::from(root)]);
        assert!(!spec.tools.code, "run_code is not offered when its approval is deny");
        assert_eq!(spec.tools.policy.http_get, Mode::Ask);
        assert_eq!(spec.tools.policy.files, Mode::Auto);
        assert_eq!(spec.agent.strategy, StrategyKind::V21);
        assert_eq!(spec.agent.sampling.top_p, 0.9, "sampling at a temperature keeps the tail out");
        assert_eq!(spec.agent.sampling.thinking, mf_inference::Thinking::On);
        assert_eq!(s.tool_approvals.asks_denied().http_get, ApprovalMode::Deny);
    }

    /// The TypeScript the UI's settings form imports, generated from these
    /// types (and the strategy names from mf-forgetting's list).
    fn typescript() -> String {
        use ts_rs::TS;
        let cfg = ts_rs::Config::new().with_large_int("number");
        let mut out = String::from(
            "// GENERATED by crates/mf-agent/src/settings.rs (test `typescript_types_are_current`).\n\
             // Do not edit: change the Rust types and run\n\
             //   MF_UPDATE_TS=1 cargo test -p mf-agent typescript\n\n",
        );
        for decl in [EngineKind::decl(&cfg), ApprovalMode::decl(&cfg), ToolApprovals::decl(&cfg), RunSettings::decl(&cfg), SettingError::decl(&cfg)] {
            out.push_str("export ");
            out.push_str(decl.trim());
            out.push_str("\n\n");
        }
        let names: Vec<String> = StrategyKind::ALL.iter().map(|k| format!("'{}'", k.as_str())).collect();
        out.push_str(&format!("/** Every compaction strategy, by the name `strategy` takes. */\nexport const STRATEGIES = [{}] as const;\n", names.join(", ")));
        out
    }

    #[test]
    fn typescript_types_are_current() {
        crate::assert_generated_ts("settings.ts", &typescript());
    }

    #[test]
    fn hosts_are_checked() {
        for ok in ["127.0.0.1:18931", "localhost", "api.example.com", "*.example.com", "[::1]:80"] {
            check_host(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "http://x", "a/b", "exa mple.com", "host:99999", "[zz]:1", "-bad.com"] {
            assert!(check_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_settings_file_of_the_former_shape_reads() {
        // What the app wrote before the settings were one type: threads as a
        // number, approvals as a map, no loop fields.
        let old = serde_json::json!({
            "engine": "ollama", "model_path": "/m/x.gguf", "server_url": "http://127.0.0.1:11434", "server_model": "qwen3:8b",
            "tool_grammar": true, "context": 8192, "reserve": 1024, "ratio": 0.6, "recent": 3, "strategy": "v1", "gamma": 1.2,
            "threads": 6, "gpu": false, "thinking": true,
            "tool_approvals": {"files": "allow", "http_get": "ask", "http_write": "deny", "code": "ask"},
            "workspace_roots": [], "allowed_hosts": ["example.com"],
            "mcp_approvals": {"files": {"write_file": "auto"}}, "max_result_chars": 2000
        });
        let s: RunSettings = serde_json::from_value(old).unwrap();
        assert_eq!(s.threads, Some(6));
        assert_eq!(s.tool_approvals.http_write, ApprovalMode::Deny);
        assert_eq!(s.max_result_chars, 2000);
        assert_eq!(s.temperature, RunSettings::default().temperature);
        let back: RunSettings = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
