//! `mf investigate`, `mf tool` and `mf sessions`: the agent loop, one tool,
//! and the stored investigations. Parsing, adapting and printing only; the
//! logic is mf-agent's and mf-tools'.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use futures::future::BoxFuture;
use mf_agent::engine::EngineArgs;
use mf_agent::{
    AgentEvent, Approver, ByHand, Decision, DeltaSource, EventSink, FixedApprover, Launch, Resume, RunSettings, RunSpec, Scope, Sessions, SettingErrors,
    SummaryPass, ToolsSpec,
};
use mf_forgetting::StrategyKind;
use mf_tools::policy::ApprovalRequest;
use mf_tools::{Requirement, ToolRegistry, ToolSettings};

use crate::UsageError;
use crate::terminal::printable;

/// How calls that need approval are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApproveMode {
    /// Approve every call that asks.
    Auto,
    /// Ask on the terminal (no terminal, or no answer: deny).
    Ask,
    /// Deny every call that asks.
    Deny,
}

/// Tool access shared by `investigate` and `tool`.
#[derive(Debug, Clone, clap::Args)]
pub struct ToolArgs {
    /// A folder the file tools may read (repeatable). None: no file tools.
    #[arg(long)]
    pub workspace: Vec<PathBuf>,
    /// A host the http tool may reach (repeatable): `host`, `host:port`,
    /// `*.domain`. Listing a loopback host (127.0.0.1, localhost, [::1]) is
    /// the explicit permission to reach loopback. None: any public host.
    #[arg(long = "allow-host")]
    pub allow_host: Vec<String>,
    /// Offer `run_code` (sandboxed; the `mf-sandbox` helper must sit next to `mf`).
    #[arg(long)]
    pub code: bool,
    /// How calls that need approval (code, non-GET HTTP) are answered.
    #[arg(long, value_enum, default_value = "ask")]
    pub approve: ApproveMode,
    /// Largest tool arguments accepted, in bytes.
    #[arg(long, default_value_t = defaults().max_args_bytes)]
    pub max_args_bytes: usize,
    /// Offer the tools of the MCP servers in this file (the `mcpServers`
    /// JSON shape: `{"mcpServers": {"NAME": {"command": …, "args": […], "env": {…}} | {"url": …}}}`).
    /// Their calls ask for approval (`--approve`); servers stop with the run.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
}

/// The one source of defaults (clap shows them; the settings start from them).
fn defaults() -> RunSettings {
    RunSettings::default()
}

/// The flag that sets each [`RunSettings`] field, for error messages.
fn flag(field: &str) -> &str {
    match field {
        "model_path" | "server_model" => "--model",
        "server_url" => "--openai/--ollama",
        "api_key_env" => "--api-key-env",
        "summariser_model" => "--summariser-model",
        "summariser_url" => "--summariser-url",
        "threads" => "--threads",
        "context" => "--ctx",
        "reserve" => "--reserve",
        "ratio" => "--ratio",
        "recent" => "--recent",
        "strategy" => "--strategy",
        "temperature" => "--temperature",
        "safety_cap" => "--safety-cap",
        "system_prompt" => "--system",
        "max_result_chars" => "--max-result-chars",
        "max_args_bytes" => "--max-args-bytes",
        "workspace_roots" => "--workspace",
        "allowed_hosts" => "--allow-host",
        "mcp_servers" => "--mcp-config",
        other => other,
    }
}

/// Settings that cannot be used, as a usage error (exit status 2) naming each flag.
pub fn setting_errors(e: SettingErrors) -> anyhow::Error {
    let lines: Vec<String> = e.0.iter().map(|e| format!("{}: {}", flag(&e.field), e.message)).collect();
    UsageError(lines.join("\n")).into()
}

impl ToolArgs {
    /// Writes these flags into `s`'s tool fields. A workspace folder is made
    /// absolute against the working directory (the settings hold absolute paths).
    ///
    /// # Errors
    /// An MCP configuration file that cannot be read or is not valid.
    pub fn apply(&self, s: &mut RunSettings) -> anyhow::Result<()> {
        s.workspace_roots = self
            .workspace
            .iter()
            .map(|w| std::fs::canonicalize(w).or_else(|_| std::path::absolute(w)).unwrap_or_else(|_| w.clone()).display().to_string())
            .collect();
        s.allowed_hosts.clone_from(&self.allow_host);
        s.code = self.code;
        s.max_args_bytes = self.max_args_bytes;
        if let Some(file) = &self.mcp_config {
            let config = mf_tools::mcp::McpConfig::load(file).map_err(|e| UsageError(format!("--mcp-config {}: {e}", file.display())))?;
            s.mcp_servers = Some(config.to_value());
        }
        if self.approve == ApproveMode::Deny {
            // Calls that would ask are denied outright; read-only ones still run.
            s.tool_approvals = s.tool_approvals.asks_denied();
        }
        Ok(())
    }

    /// The tool settings these flags describe.
    ///
    /// # Errors
    /// Flags that cannot be used (usage errors), a missing sandbox helper.
    pub fn settings(&self) -> anyhow::Result<ToolSettings> {
        let mut s = defaults();
        self.apply(&mut s)?;
        let spec = ToolsSpec::resolve(&s).map_err(setting_errors)?;
        spec.settings(s.max_args_bytes).map_err(|e| UsageError(e.to_string()).into())
    }
}

/// An answer typed at the approval prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// `y`: this call.
    Yes,
    /// `h`: this call and every later call to its host in this run.
    Host,
    /// `a`: this MCP tool from now on (remembered for the run).
    Always,
    /// `n` (or nothing): deny this call.
    No,
    /// `d`: deny this MCP tool from now on (remembered for the run).
    Never,
}

/// The prompt's choices for `r`: `h` only for a call with a host, `a` and
/// `d` only for a tool from an MCP server.
fn choices(r: &ApprovalRequest) -> String {
    let mut s = "y = yes".to_owned();
    if let Some(host) = &r.host {
        s.push_str(&format!(", h = yes to {host} for this run"));
    }
    if let Some(m) = &r.mcp {
        s.push_str(&format!(", a = always allow {}·{}, d = always deny it", m.server, m.tool));
    }
    s.push_str(", N = no");
    s
}

/// What `line` answers to `r`; a choice the request does not offer, or
/// anything else, is a denial.
fn parse_answer(line: &str, r: &ApprovalRequest) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Yes,
        "h" if r.host.is_some() => Answer::Host,
        "a" if r.mcp.is_some() => Answer::Always,
        "d" if r.mcp.is_some() => Answer::Never,
        _ => Answer::No,
    }
}

impl Answer {
    /// The decision this answer is for `r`.
    fn decision(self, r: &ApprovalRequest) -> Decision {
        match self {
            Answer::Yes => Decision::new(r, true, Scope::Call),
            Answer::Host => Decision::new(r, true, Scope::Host),
            Answer::Always => Decision::new(r, true, Scope::Tool),
            Answer::No => Decision::new(r, false, Scope::Call),
            Answer::Never => Decision::new(r, false, Scope::Tool),
        }
    }
}

/// Asks on the terminal (see [`choices`]); anything else is a denial.
struct TerminalApprover;

impl Approver for TerminalApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Decision>> {
        let r = r.clone();
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                return None;
            }
            let asked = r.clone();
            let answer = tokio::task::spawn_blocking(move || {
                let prompt =
                    format!("\napprove {}\n  {} {} (sha256 {})? [{}] ", asked.summary, asked.tool, asked.arguments, &asked.args_sha256[..12], choices(&asked));
                eprint!("{}", printable(&prompt));
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).ok()?;
                Some(parse_answer(&line, &asked))
            })
            .await
            .ok()
            .flatten()?;
            Some(answer.decision(&r))
        })
    }
}

fn approver(mode: ApproveMode) -> Arc<dyn Approver> {
    match mode {
        ApproveMode::Auto => Arc::new(FixedApprover(true)),
        ApproveMode::Deny => Arc::new(FixedApprover(false)),
        ApproveMode::Ask => Arc::new(TerminalApprover),
    }
}

/// Run an investigation: the model calls tools until it answers or a dynamic
/// exit fires, compacting its context by measured forgetting. Events are
/// printed as they happen (or as JSON lines with --json) and stored.
#[derive(Debug, clap::Args)]
pub struct InvestigateArgs {
    /// The question.
    pub question: String,
    /// The engine and model.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Compaction strategy: none, baseline, masking, v1, v2, v2.1.
    #[arg(long, default_value_t = mf_agent::AgentSettings::default().strategy)]
    pub strategy: StrategyKind,
    /// Context window C in tokens.
    #[arg(long, default_value_t = defaults().context)]
    pub ctx: u32,
    /// Generation reserve G in tokens (also the longest reply).
    #[arg(long, default_value_t = defaults().reserve)]
    pub reserve: u32,
    /// Compaction fires above ratio · (C − G).
    #[arg(long, default_value_t = defaults().ratio)]
    pub ratio: f64,
    /// Messages at the end kept verbatim.
    #[arg(long, default_value_t = defaults().recent)]
    pub recent: usize,
    /// How v2.1 ranks: `likelihood` (the withholding test scored by log-probability; the model's answers on an engine that cannot score), `model` (the test asked of the model's answers) or `phi`.
    #[arg(long, default_value_t = defaults().delta)]
    pub delta: DeltaSource,
    /// Optional cap on rounds (off by default: exits are dynamic).
    #[arg(long)]
    pub safety_cap: Option<u32>,
    /// Tool results longer than this (characters) are cut, with a note.
    #[arg(long, default_value_t = defaults().max_result_chars)]
    pub max_result_chars: usize,
    /// Sampling temperature of the investigation replies (0: greedy).
    #[arg(long, default_value_t = defaults().temperature)]
    pub temperature: f32,
    /// Sampling seed.
    #[arg(long, default_value_t = defaults().seed)]
    pub seed: u32,
    /// The system prompt (default: mf-agent's).
    #[arg(long)]
    pub system: Option<String>,
    /// Tools.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Where the summary pass runs when the live history does not fit:
    /// `pinned-prefix` (after the cached pinned zone) or `standalone`
    /// (nothing reused; for measuring the difference).
    #[arg(long, default_value_t = defaults().summary_pass)]
    pub summary_pass: SummaryPass,
    /// Have another engine write the compaction summaries: `embedded` (a
    /// GGUF file), `ollama` or `openai` (its key from the engine's key
    /// variable); by default the investigation's own model writes them.
    #[arg(long, value_enum, requires = "summariser_model")]
    pub summariser: Option<mf_agent::EngineKind>,
    /// The summariser's model: a GGUF file (embedded) or its name on the server.
    #[arg(long, requires = "summariser")]
    pub summariser_model: Option<String>,
    /// The summariser's server URL (with `--summariser ollama|openai`).
    #[arg(long, requires = "summariser")]
    pub summariser_url: Option<String>,
    /// Do not save the KV cache (it is saved to `kv/ID.bin` in the data
    /// folder after each tool-calling reply and at the end, for a resume).
    #[arg(long)]
    pub no_kv_save: bool,
    /// How many saved KV caches to keep (the most recent; older ones are
    /// deleted when a run starts: one cache is the whole context's state,
    /// gigabytes for an 8B model at 16K).
    #[arg(long, default_value_t = mf_agent::session::DEFAULT_KV_KEEP)]
    pub kv_keep: usize,
    /// Print events as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The session store (default: $MF_HOME/sessions.db, MF_HOME defaulting
    /// to ~/.local/share/measured-forgetting; the app uses the same folder).
    #[arg(long)]
    pub db: Option<PathBuf>,
}

impl InvestigateArgs {
    /// The settings these flags describe: [`RunSettings::default`] with every
    /// flag applied; notes for the user (which default model was picked).
    ///
    /// # Errors
    /// An MCP configuration file that cannot be read.
    fn settings(&self) -> anyhow::Result<(RunSettings, Vec<String>)> {
        let mut s = defaults();
        let notes = self.engine.apply(&mut s);
        s.strategy = self.strategy.as_str().into();
        s.context = self.ctx;
        s.reserve = self.reserve;
        s.ratio = self.ratio;
        s.recent = self.recent;
        s.delta = self.delta;
        s.safety_cap = self.safety_cap;
        s.max_result_chars = self.max_result_chars;
        s.temperature = self.temperature;
        s.seed = self.seed;
        s.system_prompt.clone_from(&self.system);
        s.summary_pass = self.summary_pass;
        s.summariser = self.summariser;
        s.summariser_model.clone_from(&self.summariser_model);
        s.summariser_url.clone_from(&self.summariser_url);
        self.tools.apply(&mut s)?;
        Ok((s, notes))
    }

    /// The run spec these flags describe.
    ///
    /// # Errors
    /// Usage errors naming each flag that cannot be used.
    fn spec(&self) -> anyhow::Result<RunSpec> {
        let (s, notes) = self.settings()?;
        for n in notes {
            eprintln!("note: {}", printable(&n));
        }
        if s.engine == mf_agent::EngineKind::Embedded && s.model_path.is_empty() {
            return Err(UsageError("no --model given and no default model in ./models (run `make setup` or `mf models download`)".into()).into());
        }
        RunSpec::resolve(&s).map_err(setting_errors)
    }
}

/// Where sessions are stored by default.
pub fn default_db() -> PathBuf {
    mf_agent::session::default_dir().join("sessions.db")
}

/// The sessions of `db` (default: the data folder), with those of dead processes marked interrupted.
fn open_sessions(db: Option<&Path>) -> anyhow::Result<Sessions> {
    let path = db.map_or_else(default_db, Path::to_path_buf);
    let sessions = Sessions::at_db(&path);
    sessions.recover_dead().with_context(|| format!("opening the session store {}", path.display()))?;
    Ok(sessions)
}

/// Prints events for people, or as JSON lines. Human lines carry text from
/// tools, the model and the store: they go out through [`printable`].
pub struct Printer {
    json: bool,
    in_text: bool,
    out: Box<dyn std::io::Write + Send>,
}

impl Printer {
    /// A printer to standard output.
    pub fn new(json: bool) -> Self {
        Self::to(json, Box::new(std::io::stdout()))
    }

    /// A printer to `out`.
    fn to(json: bool, out: Box<dyn std::io::Write + Send>) -> Self {
        Printer { json, in_text: false, out }
    }
}

/// `s` on one line of at most `n` visible characters: controls stripped
/// first, so that a cut never leaves half an escape sequence and the count
/// is of what is shown.
fn one_line(s: &str, n: usize) -> String {
    let flat: String = printable(s).chars().map(|c| if c == '\n' || c == '\t' { ' ' } else { c }).collect();
    if flat.chars().count() > n { format!("{}…", flat.chars().take(n).collect::<String>()) } else { flat }
}
/// The human line of an event (`None`: not shown).
pub fn describe(e: &AgentEvent) -> Option<String> {
    Some(match e {
        AgentEvent::Started { question, title, strategy, model, context, reserve, threshold, tools, resumed } => format!(
            "{} {}{}\n  model {model} · strategy {strategy} · C {context} · G {reserve} · threshold {threshold} · tools {}",
            if *resumed { "resumed:" } else { "investigating:" },
            title.as_deref().unwrap_or(question),
            title.as_ref().map(|_| format!("\n  instructions: {}", one_line(question, 240))).unwrap_or_default(),
            tools.join(", ")
        ),
        AgentEvent::Round { round } => format!("── round {round}"),
        AgentEvent::Token { .. } | AgentEvent::ThinkingToken { .. } | AgentEvent::Kv { .. } => return None,
        AgentEvent::ToolCall { name, arguments, .. } => format!("→ {name} {arguments}"),
        AgentEvent::ApprovalRequested { name, summary, arguments, .. } => {
            if summary.is_empty() {
                format!("? approval asked for {name} {arguments}")
            } else {
                format!("? approval asked: {summary}\n    {name} {}", one_line(arguments, 300))
            }
        }
        AgentEvent::ApprovalDecided { approved, by, .. } => {
            if *approved && by == "policy" {
                return None;
            }
            format!("  {} by {by}", if *approved { "approved" } else { "denied" })
        }
        AgentEvent::ToolResult { ok, content, truncated, error, .. } => format!(
            "← {} {} chars: {}{}",
            if *ok { "ok".to_string() } else { format!("ERROR {}", error.as_deref().unwrap_or("")) },
            content.chars().count(),
            one_line(content, 100),
            truncated.as_ref().map(|t| format!(" [{t}]")).unwrap_or_default()
        ),
        AgentEvent::ToolInterrupted { name, call_id } => format!("✗ {name} ({call_id}) was interrupted"),
        AgentEvent::Gauge { gauge: g, forecast } => format!(
            "[gauge] pinned {} | compressible {} | recent {} | prompt {} / threshold {} | free {} (C {}, G {}){}",
            g.pinned,
            g.compressible,
            g.recent,
            g.prompt_tokens,
            g.threshold,
            g.free,
            g.context,
            g.reserve,
            forecast
                .map(|f| format!(" | next compaction in ~{} rounds (+{:.0} tokens/round)", f.rounds_until_compaction, f.mean_tokens_per_round))
                .unwrap_or_default()
        ),
        AgentEvent::CompactionStarted { strategy, tokens_before, messages_before, class, by_hand, .. } => format!(
            "⟳ compaction{} ({strategy}{}) at {tokens_before} tokens, {messages_before} messages",
            by_hand.as_ref().map(|b| format!(" by hand: {b}")).unwrap_or_default(),
            class.as_ref().map(|c| format!(", class {c}")).unwrap_or_default()
        ),
        AgentEvent::Pin { message, pinned, members, .. } => {
            let with: Vec<&str> = members.iter().map(String::as_str).filter(|m| m != message).collect();
            let chain = if with.is_empty() { String::new() } else { format!(" (with its chain: {})", with.join(", ")) };
            if *pinned {
                format!("◆ {message} pinned{chain}: kept verbatim through every compaction")
            } else {
                format!("◇ {message} unpinned{chain}: compacted like any message again")
            }
        }
        AgentEvent::CompactionFinished {
            tokens_before,
            tokens_after,
            messages_before,
            messages_after,
            summary_by,
            fallback_reason,
            summary_pass,
            duration_ms,
            ..
        } => format!(
            "⟳ compacted {tokens_before} → {tokens_after} tokens, {messages_before} → {messages_after} messages, summary by {summary_by:?}{}{}{}",
            summary_pass.as_ref().map(|p| format!(" (pass: {p})")).unwrap_or_default(),
            duration_ms.map(|d| format!(" in {d} ms")).unwrap_or_default(),
            fallback_reason.as_ref().map(|r| format!(" — fallback: {r}")).unwrap_or_default()
        ),
        AgentEvent::CompactionFailed { message, .. } => format!("⟳ compaction failed: {message}"),
        AgentEvent::KvSnapshot { reason, slot, tokens, bytes, ms, .. } => {
            format!("  kv saved ({reason}): {tokens} tokens, {} KiB to {slot} in {ms} ms", bytes / 1024)
        }
        AgentEvent::KvRestore { used, snapshot_tokens, prompt_tokens, matched_tokens, note, .. } => {
            if *used {
                format!(
                    "  KV cache loaded: {matched_tokens} tokens not decoded again ({} of the prompt's {prompt_tokens} left to decode)",
                    prompt_tokens.saturating_sub(*matched_tokens)
                )
            } else {
                format!("  KV cache not loaded (snapshot {snapshot_tokens} tokens): {}", note.as_deref().unwrap_or("decoding the history again"))
            }
        }
        AgentEvent::Exit { reason, rounds, compactions } => format!("■ exit: {} after {rounds} rounds, {compactions} compactions", reason.describe()),
        AgentEvent::FinalAnswer { text } => format!("answer: {text}"),
        AgentEvent::Error { message } => format!("! {message}"),
    })
}

impl EventSink for Printer {
    fn emit(&mut self, e: &AgentEvent) {
        let out = &mut self.out;
        if self.json {
            if let Ok(line) = serde_json::to_string(e) {
                let _ = writeln!(out, "{line}");
            }
        } else if let AgentEvent::Token { text } = e {
            if !self.in_text {
                let _ = write!(out, "  ");
                self.in_text = true;
            }
            let _ = write!(out, "{}", printable(text));
        } else if let Some(line) = describe(e) {
            if self.in_text {
                let _ = writeln!(out);
                self.in_text = false;
            }
            let _ = writeln!(out, "{}", printable(&line));
        }
        let _ = out.flush();
    }
}

/// Runs a launched session to its end, Ctrl-C stopping it.
async fn drive(launch: Launch, json: bool) -> anyhow::Result<mf_agent::Outcome> {
    for n in &launch.notes {
        eprintln!("note: {}", printable(n));
    }
    if !json {
        println!("session {}", launch.id);
    }
    let cancel = launch.cancel_token();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let mut printer = Printer::new(json);
    let id = launch.id;
    let (_agent, out) = launch.run(&mut printer).await;
    ctrl_c.abort();
    let out = out?;
    if let Some(why) = &out.not_saved {
        // After the exit line: the run ended, its record did not all make it.
        anyhow::bail!("session {id} was not fully saved: {why}");
    }
    Ok(out)
}

fn usage(e: mf_agent::AgentError) -> anyhow::Error {
    match e {
        mf_agent::AgentError::InvalidSetting(_)
        | mf_agent::AgentError::Busy(_)
        | mf_agent::AgentError::NotResumable { .. }
        | mf_agent::AgentError::NoSuchMessage(_) => UsageError(e.to_string()).into(),
        e => e.into(),
    }
}

/// Runs `mf investigate`.
pub async fn investigate(a: InvestigateArgs) -> anyhow::Result<()> {
    let spec = a.spec()?;
    let mut sessions = open_sessions(a.db.as_deref())?;
    sessions.save_kv = !a.no_kv_save;
    sessions.kv_keep = a.kv_keep;
    let launch = sessions.start(spec, &a.question, approver(a.tools.approve), None).await.map_err(usage)?;
    drive(launch, a.json).await?;
    Ok(())
}

/// Run one tool with the same containment as in an investigation (for
/// debugging and tests). Prints the result as JSON; exit code 1 when the tool
/// refused or failed.
#[derive(Debug, clap::Args)]
pub struct ToolCmdArgs {
    /// The tool: http, list_files, read_file, search_files, run_code.
    pub name: String,
    /// Its arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Tools.
    #[command(flatten)]
    pub tools: ToolArgs,
}

/// Runs `mf tool`. Returns whether the tool succeeded.
pub async fn tool(a: ToolCmdArgs) -> anyhow::Result<bool> {
    let registry = ToolRegistry::new(a.tools.settings()?).await.context("setting up the tools")?;
    // The user typed this call whole: what it sends is theirs, not data
    // taken from the workspace (the host is still checked against the allow-list).
    registry.supplied_by_user(&a.args);
    let call_id = "cli";
    let approval = match registry.requirement(call_id, &a.name, &a.args) {
        Err(e) => {
            println!("{}", serde_json::json!({"ok": false, "error": e.code(), "message": e.to_string()}));
            return Ok(false);
        }
        Ok(Requirement::Auto) => None,
        Ok(Requirement::Ask(req)) => approver(a.tools.approve).decide(&req).await.map(|d| d.approval),
    };
    match registry.run(call_id, &a.name, &a.args, approval.as_ref()).await {
        Ok(out) => {
            println!("{}", serde_json::json!({"ok": true, "result": out, "truncated": out.truncation_note()}));
            Ok(true)
        }
        Err(e) => {
            println!("{}", serde_json::json!({"ok": false, "error": e.code(), "message": e.to_string()}));
            Ok(false)
        }
    }
}

/// List, show, resume, compact or pin stored investigations.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: SessionsAction,
    /// The session store (default as for `investigate`).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// JSON output.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `mf sessions` actions.
#[derive(Debug, clap::Subcommand)]
pub enum SessionsAction {
    /// List investigations, newest first (those of dead processes are marked interrupted).
    List,
    /// Print the events of one investigation.
    Show {
        /// Its id.
        id: i64,
    },
    /// Continue an interrupted investigation (a call cut off by the crash is not re-run).
    Resume {
        /// Its id.
        id: i64,
        /// Use this model file (or, for a run on a server, this model name) instead of the stored one.
        #[arg(long)]
        model: Option<PathBuf>,
        /// How calls that need approval are answered.
        #[arg(long, value_enum, default_value = "ask")]
        approve: ApproveMode,
        /// A user message to add before continuing (a follow-up to a finished investigation).
        #[arg(long)]
        follow_up: Option<String>,
        /// Cap the rounds of this resumed run (default: the stored setting).
        #[arg(long)]
        safety_cap: Option<u32>,
        /// Decode the stored history again instead of loading the saved KV cache.
        #[arg(long)]
        no_kv: bool,
        /// How many saved KV caches to keep (see `mf investigate --kv-keep`).
        #[arg(long, default_value_t = mf_agent::session::DEFAULT_KV_KEEP)]
        kv_keep: usize,
    },
    /// Print the stored history of one investigation: each message's id (for
    /// `compact --up-to`, `pin`, `unpin`), kind, whether it is pinned, and its first line.
    History {
        /// Its id.
        id: i64,
    },
    /// Compact a stopped investigation now, whatever the threshold says (its
    /// next resume continues from the compacted history).
    Compact {
        /// Its id.
        id: i64,
        /// Summarise up to this message: it (with the rest of its tool chain)
        /// and every message before it after the pinned zone are compacted,
        /// every message after it stays verbatim.
        #[arg(long, value_name = "MESSAGE")]
        up_to: Option<String>,
        /// The strategy (default: the investigation's own).
        #[arg(long)]
        strategy: Option<StrategyKind>,
    },
    /// Keep a message verbatim: it and the rest of its tool chain join the
    /// pinned zone, and no compaction summarises, masks or drops them.
    Pin {
        /// The investigation's id.
        id: i64,
        /// The message's id (see `mf sessions history`).
        message: String,
    },
    /// Undo `pin`: the message (and its chain) can be compacted again.
    Unpin {
        /// The investigation's id.
        id: i64,
        /// The message's id.
        message: String,
    },
}

/// One line of `mf sessions history`.
fn history_line(m: &mf_forgetting::Message) -> String {
    let mut text = m.content.clone();
    for c in &m.tool_calls {
        text.push_str(&format!(" {} {}", c.name, c.arguments));
    }
    format!("{:>12}  {:<11}  {:<6}  {}", m.id.as_str(), m.kind().label(), if m.pinned { "pinned" } else { "" }, one_line(text.trim(), 90))
}

/// Runs `mf sessions`.
pub async fn sessions(a: SessionsArgs) -> anyhow::Result<()> {
    let mut sessions = open_sessions(a.db.as_deref())?;
    match a.action {
        SessionsAction::List => {
            let rows = sessions.list()?;
            if a.json {
                println!("{}", serde_json::to_string(&rows)?);
            } else if rows.is_empty() {
                println!("no investigations");
            } else {
                for r in rows {
                    let line =
                        format!("{:>4}  {:<11}  {:>5} events  {}  {}", r.id, r.status, r.events, one_line(&r.question, 60), r.exit_reason.unwrap_or_default());
                    println!("{}", printable(&line));
                }
            }
        }
        SessionsAction::Show { id } => {
            let store = sessions.store()?;
            let row = store.get(id)?;
            let mut p = Printer::new(a.json);
            if !a.json {
                println!("{}", printable(&format!("session {} · {} · {}", row.id, row.status, row.exit_reason.unwrap_or_default())));
            }
            for e in store.events(id)? {
                p.emit(&e);
            }
        }
        SessionsAction::Resume { id, model, approve, follow_up, safety_cap, no_kv, kv_keep } => {
            sessions.kv_keep = kv_keep;
            let how = Resume { follow_up, model, safety_cap, skip_kv: no_kv };
            let launch = sessions.resume(id, how, approver(approve), None).await.map_err(usage)?;
            drive(launch, a.json).await?;
        }
        SessionsAction::History { id } => {
            let store = sessions.store()?;
            store.get(id)?;
            let history = store.history(id)?;
            if a.json {
                println!("{}", serde_json::to_string(&history)?);
            } else {
                for m in &history {
                    println!("{}", printable(&history_line(m)));
                }
            }
        }
        SessionsAction::Compact { id, up_to, strategy } => {
            let by = up_to.map_or(ByHand::CompactNow, |message| ByHand::UpTo { message });
            let mut printer = Printer::new(a.json);
            let (_agent, done) = sessions.compact(id, None, by, strategy, None, &mut printer).await.map_err(usage)?;
            let done = done.map_err(usage)?;
            if !a.json {
                match &done.unchanged {
                    Some(why) => println!("{}", printable(&format!("session {id}: not compacted: {why}"))),
                    None => println!("session {id}: compacted, {} → {} prompt tokens", done.tokens_before, done.tokens_after),
                }
            }
        }
        SessionsAction::Pin { id, message } => {
            sessions.pin(id, &message, true, &mut Printer::new(a.json)).map_err(usage)?;
        }
        SessionsAction::Unpin { id, message } => {
            sessions.pin(id, &message, false, &mut Printer::new(a.json)).map_err(usage)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn request(host: Option<&str>, mcp: bool) -> ApprovalRequest {
        let mut r = ApprovalRequest::new("call_1", "http", &serde_json::json!({"url": "https://api.example.com/x"}));
        r.host = host.map(str::to_owned);
        r.mcp = mcp.then(|| mf_tools::mcp::McpToolRef { server: "files".into(), tool: "read".into() });
        r
    }

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Text from a tool, the model or the store that carries terminal
    /// commands (set the title, clear the screen, colour, a C1 CSI, a
    /// hyperlink, carriage return, backspace, bell) reaches the human output
    /// as its visible text only, through every event that carries such text.
    #[test]
    fn the_printer_strips_terminal_controls_from_untrusted_text() {
        const EVIL: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mSAFE\u{1b}[0m\u{9b}1m\u{9d}8;;http://127.0.0.1/\u{9c}\r\u{8}\u{7}";
        let events = [
            serde_json::json!({"type": "started", "question": EVIL, "strategy": EVIL, "model": EVIL, "context": 1024, "reserve": 128, "threshold": 700, "tools": [EVIL], "resumed": false}),
            serde_json::json!({"type": "token", "text": EVIL}),
            serde_json::json!({"type": "token", "text": "\u{1b}"}), // a sequence split between two tokens
            serde_json::json!({"type": "token", "text": "]0;split\u{7}"}),
            serde_json::json!({"type": "tool_call", "call_id": "c1", "name": EVIL, "arguments": {"path": "SAFE"}}),
            serde_json::json!({"type": "approval_requested", "call_id": "c1", "name": EVIL, "arguments": EVIL, "args_sha256": "0".repeat(64), "summary": EVIL}),
            serde_json::json!({"type": "tool_result", "call_id": "c1", "name": EVIL, "ok": false, "error": EVIL, "content": EVIL, "truncated": EVIL}),
            serde_json::json!({"type": "compaction_failed", "round": 1, "message": EVIL}),
            serde_json::json!({"type": "kv_snapshot", "round": 1, "reason": EVIL, "slot": EVIL, "tokens": 1, "bytes": 1, "ms": 1}),
            serde_json::json!({"type": "kv_restore", "slot": EVIL, "used": false, "snapshot_tokens": 0, "prompt_tokens": 0, "matched_tokens": 0, "note": EVIL}),
            serde_json::json!({"type": "final_answer", "text": EVIL}),
            serde_json::json!({"type": "error", "message": EVIL}),
        ];
        let out = Captured::default();
        let mut p = Printer::to(false, Box::new(out.clone()));
        for e in &events {
            p.emit(&serde_json::from_value(e.clone()).unwrap());
        }
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let controls: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n' && *c != '\t').collect();
        assert!(controls.is_empty(), "controls reached the terminal: {controls:?} in {text:?}");
        assert!(!text.contains("pwned") && !text.contains("2J") && !text.contains("127.0.0.1"), "a sequence left its body: {text:?}");
        // Every event that carries the text printed its visible part.
        assert!(text.matches("SAFE").count() >= 12, "{text}");
        assert!(text.contains("answer: SAFE"), "{text}");

        // The JSON lines carry the text whole, escaped (for programs, not terminals).
        let json = Captured::default();
        let mut p = Printer::to(true, Box::new(json.clone()));
        p.emit(&serde_json::from_value(events[10].clone()).unwrap());
        let line = String::from_utf8(json.0.lock().unwrap().clone()).unwrap();
        assert!(line.contains("\\u001b]0;pwned\\u0007") && !line.contains('\u{1b}'), "{line}");
    }

    #[test]
    fn one_line_cuts_visible_text_never_half_a_sequence() {
        assert_eq!(one_line("ab\u{1b}[31mcdef", 4), "abcd…");
        assert_eq!(one_line("a\nb\tc\u{7}", 10), "a b c");
    }

    #[test]
    fn the_prompt_offers_host_and_tool_answers_only_where_they_apply() {
        let plain = request(None, false);
        assert_eq!(choices(&plain), "y = yes, N = no");
        assert_eq!(parse_answer("y\n", &plain), Answer::Yes);
        assert_eq!(parse_answer("YES", &plain), Answer::Yes);
        for other in ["", "n", "h", "a", "d", "sure"] {
            assert_eq!(parse_answer(other, &plain), Answer::No, "{other:?}: a choice not offered is a denial");
        }
        let http = request(Some("api.example.com"), false);
        assert!(choices(&http).contains("h = yes to api.example.com for this run"));
        assert_eq!(parse_answer("h", &http), Answer::Host);
        assert_eq!(parse_answer("a", &http), Answer::No);
        let tool = request(None, true);
        assert!(choices(&tool).contains("a = always allow files·read, d = always deny it"));
        assert_eq!(parse_answer("a", &tool), Answer::Always);
        assert_eq!(parse_answer(" D ", &tool), Answer::Never);
    }

    #[test]
    fn each_answer_carries_its_scope_where_the_call_allows_it() {
        let scoped = |a: Answer, r: &ApprovalRequest| {
            let d = a.decision(r);
            (d.approved(), d.scope)
        };
        let http = request(Some("api.example.com"), false);
        assert_eq!(scoped(Answer::Yes, &http), (true, Scope::Call));
        assert_eq!(scoped(Answer::Host, &http), (true, Scope::Host));
        assert_eq!(scoped(Answer::No, &http), (false, Scope::Call));
        let tool = request(None, true);
        assert_eq!(scoped(Answer::Always, &tool), (true, Scope::Tool));
        assert_eq!(scoped(Answer::Never, &tool), (false, Scope::Tool));
        // A scope the request cannot have narrows to this call.
        assert_eq!(scoped(Answer::Host, &tool), (true, Scope::Call));
        assert_eq!(scoped(Answer::Always, &http), (true, Scope::Call));
    }
}
