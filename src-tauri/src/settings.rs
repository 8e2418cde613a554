//! The app's settings (ui/src/lib/api.ts `Settings`): persisted as JSON in
//! the app's config folder, validated field by field with messages the
//! settings panel shows next to each field, and turned into the one run
//! spec every face builds ([`mf_agent::RunSpec`], whose defaults are the
//! only defaults: [`Settings::defaults`] starts from them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mf_agent::{AgentSettings, EngineSpec, RunSpec, ToolsSpec};
use mf_forgetting::StrategyKind;
use mf_tools::ToolSettings;
use mf_tools::mcp::McpApprovals;
use mf_tools::policy::{ApprovalPolicy, Mode};
use serde::{Deserialize, Serialize};

use crate::error::CommandError;

/// How a group of tool calls is approved (the UI's words for `mf_tools::policy::Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// The approval groups of `mf_tools::policy::ApprovalPolicy`, by the names
/// the UI shows (`files` = list/read/search files).
pub const APPROVAL_GROUPS: [&str; 4] = ["files", "http_get", "http_write", "code"];

/// Which engine runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// llama.cpp inside the app, over `model_path`.
    #[default]
    Embedded,
    /// An Ollama server at `server_url`, model `server_model`.
    Ollama,
    /// An OpenAI-compatible server at `server_url`, model `server_model`
    /// (its API key, if any, is never written to the settings file).
    Openai,
}

/// Every setting of the app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Which engine runs the model.
    #[serde(default)]
    pub engine: Engine,
    /// Path of the GGUF model file (embedded engine).
    pub model_path: String,
    /// The server's base URL (Ollama or OpenAI-compatible engines).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server_url: String,
    /// The model name on the server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server_model: String,
    /// OpenAI-compatible engine: write the tools and tool calls into the
    /// messages' text and read calls from the reply's text, for a server
    /// whose chat template shows the model only each message's content
    /// (llama-cpp-python with SmolLM2's template, for one). Off: OpenAI's
    /// `tools` and `tool_calls` fields.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_tools_in_text: bool,
    /// Constrain the embedded model's fenced-JSON tool calls with a grammar
    /// (on by default: small models often write a call that does not parse;
    /// formats other than fenced JSON are not constrained).
    #[serde(default = "on")]
    pub tool_grammar: bool,
    /// Context size `C`, tokens.
    pub context: u32,
    /// Generation reserve `G`, tokens.
    pub reserve: u32,
    /// Compaction trigger ratio of `C − G`.
    pub ratio: f64,
    /// Recent messages kept verbatim.
    pub recent: usize,
    /// Compaction strategy (`none`, `baseline`, `masking`, `v1`, `v2`, `v2.1`).
    pub strategy: String,
    /// Exponent of `Φ(B) = B^γ`.
    pub gamma: f64,
    /// CPU threads for the model.
    pub threads: u32,
    /// Offload layers to the GPU (Metal/CUDA builds only).
    pub gpu: bool,
    /// Let thinking models think.
    pub thinking: bool,
    /// Per approval group (see [`APPROVAL_GROUPS`]): ask, allow or deny.
    pub tool_approvals: BTreeMap<String, ApprovalMode>,
    /// Folders the file tools may read.
    pub workspace_roots: Vec<String>,
    /// Hosts the http tool may reach (`host`, `host:port`, `*.domain`); a
    /// loopback host here is the explicit permission to reach loopback.
    pub allowed_hosts: Vec<String>,
    /// MCP servers whose tools investigations offer, in the `mcpServers`
    /// shape (`{"mcpServers": {"NAME": {"command": …, "args": […]} | {"url": …}}}`);
    /// their calls ask by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<serde_json::Value>,
    /// Answers the user gave "always" to, per MCP server and tool
    /// (`{"SERVER": {"TOOL": "auto" | "deny"}}`): such calls run, or are
    /// refused, without asking. Written by the approval prompt; remove an
    /// entry to be asked again.
    #[serde(default, skip_serializing_if = "McpApprovals::is_empty")]
    pub mcp_approvals: McpApprovals,
    /// Advanced (settings file only): the system prompt; `None` is mf-agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Advanced (settings file only): tool results longer than this many
    /// characters are cut, with a note; `None` is mf-agent's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_chars: Option<usize>,
}

impl Settings {
    /// The defaults, with `model_path` the default model in `models_dir`.
    #[must_use]
    pub fn defaults(model_path: &Path) -> Self {
        let spec = RunSpec::default();
        let agent = spec.agent;
        let threads = std::thread::available_parallelism().map_or(4, |n| u32::try_from(n.get()).unwrap_or(4));
        let p = spec.tools.policy;
        Self {
            engine: Engine::Embedded,
            model_path: model_path.display().to_string(),
            server_url: String::new(),
            server_model: String::new(),
            server_tools_in_text: false,
            tool_grammar: true,
            context: spec.context,
            reserve: agent.reserve,
            ratio: agent.ratio,
            recent: agent.recent,
            strategy: agent.strategy.as_str().into(),
            gamma: agent.plan.gamma,
            threads,
            gpu: false,
            thinking: false,
            tool_approvals: [("files", p.files), ("http_get", p.http_get), ("http_write", p.http_write), ("code", p.code)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), ApprovalMode::from(v)))
                .collect(),
            workspace_roots: Vec::new(),
            allowed_hosts: Vec::new(),
            mcp_servers: None,
            mcp_approvals: McpApprovals::default(),
            system_prompt: None,
            max_result_chars: None,
        }
    }

    /// Checks every field; the error's `details.fields` maps each bad field
    /// to its message (the same words as ui/src/lib/validate.ts where they overlap).
    ///
    /// # Errors
    /// `invalid_settings` listing every bad field.
    pub fn validate(&self) -> Result<(), CommandError> {
        let mut f: BTreeMap<&'static str, String> = BTreeMap::new();
        let path = self.model_path.trim();
        if self.engine != Engine::Embedded {
            let url = self.server_url.trim();
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(char::is_whitespace) {
                f.insert("server_url", "The server URL must start with http:// or https://.".into());
            }
            if self.server_model.trim().is_empty() {
                f.insert("server_model", "Name the model the server should run.".into());
            }
        } else if path.is_empty() {
            f.insert("model_path", "Choose a model file.".into());
        } else if !path.to_ascii_lowercase().ends_with(".gguf") {
            f.insert("model_path", "The model must be a .gguf file.".into());
        } else if !Path::new(path).is_file() {
            f.insert("model_path", format!("No model file at {path}."));
        }
        if self.context < 512 {
            f.insert("context", "Context size must be a whole number of at least 512 tokens.".into());
        }
        if self.reserve < 1 {
            f.insert("reserve", "Generation reserve must be a whole number of at least 1 token.".into());
        } else if self.reserve >= self.context {
            f.insert("reserve", format!("Generation reserve must be smaller than the context size ({}).", self.context));
        }
        if !(self.ratio.is_finite() && self.ratio > 0.0 && self.ratio <= 1.0) {
            f.insert("ratio", "Threshold ratio must be above 0 and at most 1.".into());
        }
        if let Err(e) = self.strategy_kind() {
            f.insert("strategy", e);
        }
        if !(self.gamma.is_finite() && self.gamma > 0.0 && self.gamma <= 4.0) {
            f.insert("gamma", "γ must be above 0 and at most 4 (the method uses 1.5).".into());
        }
        if !(1..=256).contains(&self.threads) {
            f.insert("threads", "Threads must be a whole number from 1 to 256.".into());
        }
        let groups: Vec<&str> = self.tool_approvals.keys().map(String::as_str).collect();
        if groups != APPROVAL_GROUPS.iter().copied().collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>() {
            f.insert("tool_approvals", format!("Tool approvals must name exactly {}.", APPROVAL_GROUPS.join(", ")));
        }
        for root in &self.workspace_roots {
            let p = Path::new(root);
            if !p.is_absolute() {
                f.insert("workspace_roots", format!("Workspace root \"{root}\" must be an absolute path."));
                break;
            }
            if p.components().any(|c| c == std::path::Component::ParentDir) {
                f.insert("workspace_roots", format!("Workspace root \"{root}\" must not contain \"..\"."));
                break;
            }
            if !p.is_dir() {
                f.insert("workspace_roots", format!("Workspace root \"{root}\" is not a folder."));
                break;
            }
        }
        if self.system_prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
            f.insert("system_prompt", "The system prompt must not be empty (remove it to use the default).".into());
        }
        if self.max_result_chars.is_some_and(|n| n < 100) {
            f.insert("max_result_chars", "Tool results must keep at least 100 characters.".into());
        }
        for host in &self.allowed_hosts {
            if let Err(e) = check_host(host) {
                f.insert("allowed_hosts", e);
                break;
            }
        }
        if let Some(v) = &self.mcp_servers
            && let Err(e) = mf_tools::mcp::McpConfig::from_value(v)
        {
            f.insert("mcp_servers", e.to_string());
        }
        if f.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = f.values().cloned().collect();
        Err(CommandError::new("invalid_settings", format!("{} setting(s) need fixing: {}", f.len(), list.join(" ")))
            .with_details(serde_json::json!({ "fields": f })))
    }

    /// The strategy as mf-forgetting's kind.
    ///
    /// # Errors
    /// The message for an unknown name.
    pub fn strategy_kind(&self) -> Result<StrategyKind, String> {
        self.strategy
            .parse::<StrategyKind>()
            .map_err(|_| format!("Unknown strategy; choose one of {}.", StrategyKind::ALL.map(StrategyKind::as_str).join(", ")))
    }

    /// The agent's settings: the crate's defaults with this budget and strategy.
    #[must_use]
    pub fn agent(&self) -> AgentSettings {
        let mut a = AgentSettings::default();
        if let Ok(k) = self.strategy_kind() {
            a.strategy = k;
        }
        a.reserve = self.reserve;
        a.ratio = self.ratio;
        a.recent = self.recent;
        a.plan.gamma = self.gamma;
        if let Some(p) = &self.system_prompt {
            a.system_prompt.clone_from(p);
        }
        if let Some(n) = self.max_result_chars {
            a.max_result_chars = n;
        }
        a.sampling.thinking = if self.thinking { mf_inference::Thinking::On } else { mf_inference::Thinking::Off };
        a
    }

    /// Whether `run_code` is switched off: its approval is `deny`, so it is
    /// not offered at all (a tool that is always refused only costs context).
    #[must_use]
    pub fn code_denied(&self) -> bool {
        self.tool_approvals.get("code") == Some(&ApprovalMode::Deny)
    }

    /// The approval policy of these settings.
    #[must_use]
    pub fn policy(&self) -> ApprovalPolicy {
        let mut p = ApprovalPolicy::default();
        let mode = |g: &str| self.tool_approvals.get(g).copied().map(Mode::from);
        for (g, slot) in [("files", &mut p.files), ("http_get", &mut p.http_get), ("http_write", &mut p.http_write), ("code", &mut p.code)] {
            if let Some(m) = mode(g) {
                *slot = m;
            }
        }
        p
    }

    /// The engine these settings name.
    #[must_use]
    pub fn engine_spec(&self) -> EngineSpec {
        match self.engine {
            Engine::Embedded => EngineSpec::Llama {
                model: PathBuf::from(self.model_path.trim()),
                threads: i32::try_from(self.threads).ok(),
                gpu: self.gpu,
                tool_grammar: self.tool_grammar,
            },
            Engine::Ollama => EngineSpec::Ollama { url: self.server_url.trim().to_owned(), model: self.server_model.trim().to_owned() },
            Engine::Openai => EngineSpec::OpenAi {
                url: self.server_url.trim().to_owned(),
                model: self.server_model.trim().to_owned(),
                tools_in_text: self.server_tools_in_text,
            },
        }
    }

    /// The run spec a new investigation is stored and run with. `code`:
    /// whether the `run_code` sandbox helper is available (it is offered
    /// when it is and its approval is not `deny`).
    #[must_use]
    pub fn run_spec(&self, code: bool) -> RunSpec {
        RunSpec {
            engine: self.engine_spec(),
            context: self.context,
            agent: self.agent(),
            tools: ToolsSpec {
                workspace: self.workspace_roots.iter().map(PathBuf::from).collect(),
                allowed_hosts: self.allowed_hosts.clone(),
                code: code && !self.code_denied(),
                policy: self.policy(),
                mcp: self.mcp_servers.clone(),
                mcp_approvals: self.mcp_approvals.clone(),
            },
        }
    }

    /// The tools' settings (what the investigation offers), with the sandbox
    /// config given (`None`: no helper).
    #[must_use]
    pub fn tools_with(&self, code: Option<mf_tools::code::CodeConfig>) -> ToolSettings {
        let spec = self.run_spec(false).tools;
        let mut t = spec.settings(self.agent().max_argument_bytes).unwrap_or_default();
        t.code = code.filter(|_| !self.code_denied());
        t
    }

    /// Reads the settings file; `None` when there is none yet.
    ///
    /// # Errors
    /// `settings_file` when the file exists but is unreadable or not valid settings JSON.
    pub fn load(path: &Path) -> Result<Option<Self>, CommandError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CommandError::new("settings_file", format!("cannot read {}: {e}", path.display()))),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| CommandError::new("settings_file", format!("{} is not valid settings JSON: {e}", path.display())))
    }

    /// Writes the settings file atomically (temp file + rename).
    ///
    /// # Errors
    /// `settings_file` when the folder or file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), CommandError> {
        let err = |e: std::io::Error| CommandError::new("settings_file", format!("cannot write {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| CommandError::internal(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}

/// Serde's default for settings that are on unless the file says otherwise.
const fn on() -> bool {
    true
}

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

    fn model() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.gguf");
        std::fs::write(&p, "GGUF").unwrap();
        (d, p)
    }

    fn fields(e: &CommandError) -> Vec<String> {
        e.details["fields"].as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn defaults_are_valid_and_round_trip_through_the_file() {
        let (d, p) = model();
        let s = Settings::defaults(&p);
        s.validate().unwrap();
        let file = d.path().join("cfg/settings.json");
        assert_eq!(Settings::load(&file).unwrap(), None);
        s.save(&file).unwrap();
        assert_eq!(Settings::load(&file).unwrap(), Some(s));
    }

    #[test]
    fn every_bad_field_gets_its_own_message() {
        let (_d, p) = model();
        let mut s = Settings::defaults(&p);
        s.model_path = "/nowhere/x.gguf".into();
        s.context = 256;
        s.ratio = 1.5;
        s.strategy = "v9".into();
        s.gamma = f64::NAN;
        s.threads = 0;
        s.tool_approvals.remove("code");
        s.workspace_roots = vec!["relative/dir".into()];
        s.allowed_hosts = vec!["http://example.com/x".into()];
        let e = s.validate().unwrap_err();
        assert_eq!(e.code, "invalid_settings");
        assert_eq!(
            fields(&e),
            ["allowed_hosts", "context", "gamma", "model_path", "ratio", "reserve", "strategy", "threads", "tool_approvals", "workspace_roots"]
        );
        assert_eq!(e.details["fields"]["reserve"], "Generation reserve must be smaller than the context size (256).");
        assert!(e.message.starts_with("10 setting(s) need fixing"), "{}", e.message);
    }

    #[test]
    fn hosts_are_checked_like_the_ui_does() {
        for ok in ["127.0.0.1:18931", "localhost", "api.example.com", "*.example.com", "[::1]:80"] {
            check_host(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "http://x", "a/b", "exa mple.com", "host:99999", "[zz]:1", "-bad.com"] {
            assert!(check_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn maps_onto_the_crates_settings() {
        let (_d, p) = model();
        let mut s = Settings::defaults(&p);
        s.allowed_hosts = vec!["127.0.0.1:9".into()];
        s.tool_approvals.insert("http_get".into(), ApprovalMode::Ask);
        s.strategy = "v2.1".into();
        let t = s.tools_with(None);
        assert_eq!(t.http.allowed_hosts, Some(vec!["127.0.0.1:9".to_owned()]));
        assert_eq!(t.policy.http_get, Mode::Ask);
        assert_eq!(t.policy.files, Mode::Auto);
        assert_eq!(s.agent().strategy, StrategyKind::V21);
        assert_eq!(s.agent().reserve, s.reserve);
        s.allowed_hosts = vec!["example.com".into()];
        assert!(!s.tools_with(None).http.allow_loopback, "no entry opens loopback for every name");
        // run_code: offered with a helper, unless its approval is deny.
        let helper = mf_tools::code::CodeConfig::new("/opt/mf/mf-sandbox");
        assert!(s.tools_with(None).code.is_none());
        assert_eq!(s.tools_with(Some(helper.clone())).code.map(|c| c.helper), Some(PathBuf::from("/opt/mf/mf-sandbox")));
        s.tool_approvals.insert("code".into(), ApprovalMode::Deny);
        assert!(s.tools_with(Some(helper)).code.is_none());
    }

    #[test]
    fn a_corrupt_file_is_a_clear_error_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("settings.json");
        std::fs::write(&f, "{\"context\": \"big\"}").unwrap();
        let e = Settings::load(&f).unwrap_err();
        assert_eq!(e.code, "settings_file");
        assert!(e.message.contains("not valid settings JSON"), "{}", e.message);
    }
}
