//! `mf investigate`, `mf tool` and `mf sessions`: the agent loop, one tool,
//! and the stored investigations. Parsing, adapting and printing only; the
//! logic is mf-agent's and mf-tools'.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use futures::future::BoxFuture;
use mf_agent::{Agent, AgentEvent, AgentSettings, Approver, DeltaSource, EventSink, FixedApprover, Store, StoreSink, SummaryPass};
use mf_forgetting::{Message, StrategyKind};
use mf_inference::{Backend, LlamaConfig, LlamaSession, OpenAiBackend};
use mf_tools::policy::{Approval, ApprovalRequest, Mode};
use mf_tools::{Requirement, ToolRegistry, ToolSettings};

use crate::UsageError;

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
    #[arg(long, default_value_t = 8192)]
    pub max_args_bytes: usize,
}

/// How tools reach a model on an OpenAI-compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OpenAiTools {
    /// As OpenAI's `tools` and `tool_calls` fields.
    Native,
    /// Written into the messages' text, calls read from the reply's text.
    Text,
}

fn is_loopback_host(h: &str) -> bool {
    let host = h.rsplit_once(':').filter(|(a, p)| !a.ends_with(':') && p.chars().all(|c| c.is_ascii_digit())).map_or(h, |(a, _)| a);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.starts_with("127.") || host == "::1"
}

impl ToolArgs {
    /// The tool settings these flags describe.
    pub fn settings(&self) -> anyhow::Result<ToolSettings> {
        let mut s = ToolSettings { workspace: self.workspace.clone(), max_args_bytes: self.max_args_bytes, ..ToolSettings::default() };
        if !self.allow_host.is_empty() {
            s.http.allowed_hosts = Some(self.allow_host.clone());
            s.http.allow_loopback = self.allow_host.iter().any(|h| is_loopback_host(h));
        }
        if self.code {
            s.code = Some(mf_tools::code::CodeConfig::beside_exe().map_err(|e| UsageError(format!("--code: {e}")))?);
        }
        if self.approve == ApproveMode::Deny {
            // Calls that would ask are denied outright; read-only ones still run.
            let p = &mut s.policy;
            for m in [&mut p.files, &mut p.http_get, &mut p.http_write, &mut p.code] {
                if *m == Mode::Ask {
                    *m = Mode::Deny;
                }
            }
        }
        Ok(s)
    }
}

/// Asks on the terminal; anything but `y` is a denial.
struct TerminalApprover;

impl Approver for TerminalApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Approval>> {
        let r = r.clone();
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                return None;
            }
            tokio::task::spawn_blocking(move || {
                eprint!("\napprove {} {} (sha256 {})? [y/N] ", r.tool, r.arguments, &r.args_sha256[..12]);
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).ok()?;
                Some(if line.trim().eq_ignore_ascii_case("y") { r.approve() } else { r.deny() })
            })
            .await
            .ok()
            .flatten()
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

fn parse_strategy(s: &str) -> Result<StrategyKind, String> {
    s.parse::<StrategyKind>().map_err(|e| e.to_string())
}

/// Run an investigation: the model calls tools until it answers or a dynamic
/// exit fires, compacting its context by measured forgetting. Events are
/// printed as they happen (or as JSON lines with --json) and stored.
#[derive(Debug, clap::Args)]
pub struct InvestigateArgs {
    /// The question.
    pub question: String,
    /// The GGUF model (default: `models/Qwen3-8B-Q4_K_M.gguf` when present,
    /// else the SmolLM2 test model in `models/`); with `--openai`, the model
    /// name sent to the server (default: `default`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Use an OpenAI-compatible server at this URL (e.g.
    /// `http://127.0.0.1:8080/v1`) instead of running the model in-process;
    /// the key, if any, is read from `OPENAI_API_KEY`. `--ctx` must not be
    /// more than the server's context. Such a server keeps no KV snapshots
    /// here: nothing is saved for `mf sessions resume`, which decodes the
    /// history again.
    #[arg(long)]
    pub openai: Option<String>,
    /// With `--openai`: `native` sends tools and tool calls as OpenAI fields;
    /// `text` writes them into the messages' text and reads calls from the
    /// reply's text, for a server whose chat template shows the model only
    /// each message's content (llama-cpp-python with SmolLM2's template, for one).
    #[arg(long, value_enum, default_value = "native")]
    pub openai_tools: OpenAiTools,
    /// Compaction strategy: none, baseline, masking, v1, v2, v2.1.
    #[arg(long, default_value = "v2", value_parser = parse_strategy)]
    pub strategy: StrategyKind,
    /// Context window C in tokens.
    #[arg(long, default_value_t = 4096)]
    pub ctx: u32,
    /// Generation reserve G in tokens (also the longest reply).
    #[arg(long, default_value_t = 512)]
    pub reserve: u32,
    /// Compaction fires above ratio · (C − G).
    #[arg(long, default_value_t = 0.75)]
    pub ratio: f64,
    /// Messages at the end kept verbatim.
    #[arg(long, default_value_t = 2)]
    pub recent: usize,
    /// How v2.1 ranks: `model` (withholding test asked of the model) or `phi`.
    #[arg(long, default_value = "model", value_parser = ["model", "phi"])]
    pub delta: String,
    /// Optional cap on rounds (off by default: exits are dynamic).
    #[arg(long)]
    pub safety_cap: Option<u32>,
    /// Tool results longer than this (characters) are cut, with a note.
    #[arg(long, default_value_t = 4000)]
    pub max_result_chars: usize,
    /// Sampling temperature of the investigation replies (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u32,
    /// The system prompt (default: mf-agent's).
    #[arg(long)]
    pub system: Option<String>,
    /// CPU threads for the model (default: all).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Tools.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Where the summary pass runs when the live history does not fit:
    /// `pinned` (after the cached pinned zone) or `standalone` (nothing
    /// reused; for measuring the difference).
    #[arg(long, default_value = "pinned", value_parser = ["pinned", "standalone"])]
    pub summary_pass: String,
    /// Do not save the KV cache for `mf sessions resume` (it is saved to
    /// `kv/ID.bin` beside the store after each tool-calling reply and at the end).
    #[arg(long)]
    pub no_kv_save: bool,
    /// How many saved KV caches to keep (the most recent; older ones are
    /// deleted when a run starts: one cache is the whole context's state,
    /// gigabytes for an 8B model at 16K).
    #[arg(long, default_value_t = 3)]
    pub kv_keep: usize,
    /// Print events as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The session store (default: $MF_HOME/sessions.db, MF_HOME defaulting to ~/.local/share/measured-forgetting).
    #[arg(long)]
    pub db: Option<PathBuf>,
}

/// Where the KV cache of investigation `id` is saved for a resume.
pub fn kv_file(db: &Path, id: i64) -> PathBuf {
    db.parent().unwrap_or_else(|| Path::new(".")).join("kv").join(format!("{id}.bin"))
}

/// The cache file of investigation `id`, its folder created and the older
/// caches beyond `keep` deleted (said on stderr).
fn prepare_kv_file(db: &Path, id: i64, keep: usize) -> anyhow::Result<PathBuf> {
    let file = kv_file(db, id);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let pruned = mf_agent::kv_files::prune(dir, keep, Some(&file)).with_context(|| format!("pruning saved caches in {}", dir.display()))?;
        if !pruned.files.is_empty() {
            eprintln!(
                "deleted {} older saved KV cache(s), {:.1} MB (keeping {keep}; --kv-keep)",
                pruned.files.len(),
                pruned.bytes as f64 / 1e6
            );
        }
    }
    Ok(file)
}

/// Where sessions are stored by default.
pub fn default_db() -> PathBuf {
    if let Some(h) = std::env::var_os("MF_HOME") {
        return PathBuf::from(h).join("sessions.db");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/share/measured-forgetting/sessions.db")
}

/// Prints events for people, or as JSON lines.
pub struct Printer {
    json: bool,
    in_text: bool,
}

impl Printer {
    /// A printer.
    pub fn new(json: bool) -> Self {
        Printer { json, in_text: false }
    }
}

fn one_line(s: &str, n: usize) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if flat.chars().count() > n { format!("{}…", flat.chars().take(n).collect::<String>()) } else { flat }
}

/// The human line of an event (`None`: not shown).
pub fn describe(e: &AgentEvent) -> Option<String> {
    Some(match e {
        AgentEvent::Started { question, strategy, model, context, reserve, threshold, tools, resumed } => format!(
            "{} {question}\n  model {model} · strategy {strategy} · C {context} · G {reserve} · threshold {threshold} · tools {}",
            if *resumed { "resumed:" } else { "investigating:" },
            tools.join(", ")
        ),
        AgentEvent::Round { round } => format!("── round {round}"),
        AgentEvent::Token { .. } | AgentEvent::ThinkingToken { .. } | AgentEvent::Kv { .. } => return None,
        AgentEvent::ToolCall { name, arguments, .. } => format!("→ {name} {arguments}"),
        AgentEvent::ApprovalRequested { name, arguments, .. } => format!("? approval asked for {name} {arguments}"),
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
        AgentEvent::CompactionStarted { strategy, tokens_before, messages_before, class, .. } => format!(
            "⟳ compaction ({strategy}{}) at {tokens_before} tokens, {messages_before} messages",
            class.as_ref().map(|c| format!(", class {c}")).unwrap_or_default()
        ),
        AgentEvent::CompactionFinished { tokens_before, tokens_after, messages_before, messages_after, summary_by, fallback_reason, summary_pass, duration_ms, .. } => format!(
            "⟳ compacted {tokens_before} → {tokens_after} tokens, {messages_before} → {messages_after} messages, summary by {summary_by:?}{}{}{}",
            summary_pass.as_ref().map(|p| format!(" (pass: {p})")).unwrap_or_default(),
            duration_ms.map(|d| format!(" in {d} ms")).unwrap_or_default(),
            fallback_reason.as_ref().map(|r| format!(" — fallback: {r}")).unwrap_or_default()
        ),
        AgentEvent::CompactionFailed { message, .. } => format!("⟳ compaction failed: {message}"),
        AgentEvent::KvSnapshot { reason, slot, tokens, bytes, ms, .. } => format!("  kv saved ({reason}): {tokens} tokens, {} KiB to {slot} in {ms} ms", bytes / 1024),
        AgentEvent::KvRestore { slot, used, snapshot_tokens, prompt_tokens, matched_tokens, note } => format!(
            "  kv {} {slot}: snapshot {snapshot_tokens} tokens, {matched_tokens} of the prompt's {prompt_tokens} in common{}",
            if *used { "restored from" } else { "not restored from" },
            note.as_ref().map(|n| format!(" — {n}")).unwrap_or_default()
        ),
        AgentEvent::Exit { reason, rounds, compactions } => format!("■ exit: {} after {rounds} rounds, {compactions} compactions", reason.describe()),
        AgentEvent::FinalAnswer { text } => format!("answer: {text}"),
        AgentEvent::Error { message } => format!("! {message}"),
    })
}

impl EventSink for Printer {
    fn emit(&mut self, e: &AgentEvent) {
        let mut out = std::io::stdout().lock();
        if self.json {
            if let Ok(line) = serde_json::to_string(e) {
                let _ = writeln!(out, "{line}");
            }
        } else if let AgentEvent::Token { text } = e {
            if !self.in_text {
                let _ = write!(out, "  ");
                self.in_text = true;
            }
            let _ = write!(out, "{text}");
        } else if let Some(line) = describe(e) {
            if self.in_text {
                let _ = writeln!(out);
                self.in_text = false;
            }
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
}

fn process_alive(pid: i64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && i64::from(std::process::id()) != pid
}

/// Opens the store and marks investigations of dead processes interrupted.
pub fn open_store(db: Option<&Path>) -> anyhow::Result<Store> {
    let path = db.map_or_else(default_db, Path::to_path_buf);
    let store = Store::open(&path).with_context(|| format!("opening the session store {}", path.display()))?;
    store.recover_dead(process_alive)?;
    Ok(store)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredSettings {
    /// A GGUF path, or the server's model name when `openai` is set.
    model: PathBuf,
    /// The OpenAI-compatible server the investigation ran on (absent: in-process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    openai: Option<String>,
    /// Tool turns in the text on that server (`--openai-tools text`).
    #[serde(default)]
    openai_tools_in_text: bool,
    ctx: u32,
    threads: Option<i32>,
    agent: AgentSettings,
    workspace: Vec<PathBuf>,
    allow_host: Vec<String>,
    code: bool,
}

async fn load_model(path: &Path, ctx: u32, threads: Option<i32>) -> anyhow::Result<Arc<LlamaSession>> {
    let mut cfg = LlamaConfig::new(path).with_n_ctx(ctx);
    cfg.n_threads = threads;
    let p = path.display().to_string();
    let session = tokio::task::spawn_blocking(move || LlamaSession::load(cfg)).await?.with_context(|| format!("loading {p}"))?;
    Ok(Arc::new(session))
}

/// The backend: an OpenAI-compatible server when `openai` is given (then
/// `model` is the server's model name), else the GGUF at `model` in-process.
async fn load_backend(model: &Path, openai: Option<&str>, tools_in_text: bool, ctx: u32, threads: Option<i32>) -> anyhow::Result<Arc<dyn Backend>> {
    let backend: Arc<dyn Backend> = match openai {
        Some(url) => {
            let name = model.to_string_lossy();
            let backend = OpenAiBackend::new(url, name.as_ref(), std::env::var("OPENAI_API_KEY").ok(), ctx).map_err(|e| UsageError(e.to_string()))?;
            Arc::new(backend.with_tools_in_text(tools_in_text))
        }
        None => load_model(model, ctx, threads).await?,
    };
    Ok(backend)
}

/// The line said when the KV cache cannot be saved for a resume.
const NO_KV_NOTE: &str = "note: this backend keeps no KV cache that can be saved (HTTP server): nothing is saved for `mf sessions resume`, which will decode the history again";

async fn drive(
    store: &Store,
    id: i64,
    agent: &mut Agent,
    json: bool,
    start: Result<String, Vec<Message>>,
) -> anyhow::Result<mf_agent::Outcome> {
    let mut printer = Printer::new(json);
    let mut sink = StoreSink { store, id, next: &mut printer, error: None };
    let cancel = agent.cancel_token();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let out = match start {
        Ok(q) => agent.run(&q, &mut sink).await,
        Err(h) => agent.resume(h, &mut sink).await,
    };
    ctrl_c.abort();
    if let Some(e) = sink.error.take() {
        eprintln!("warning: the session store failed: {e}");
    }
    match out {
        Ok(o) => Ok(o),
        Err(e) => {
            store.mark_failed(id, &e.to_string())?;
            Err(e.into())
        }
    }
}

/// Runs `mf investigate`.
pub async fn investigate(mut a: InvestigateArgs) -> anyhow::Result<()> {
    let model = match a.model.take() {
        Some(m) => m,
        None if a.openai.is_some() => PathBuf::from("default"),
        None => match mf_inference::models::default_model(Path::new("models")) {
            Some(mf_inference::models::DefaultModel::Recommended { path }) => path,
            Some(mf_inference::models::DefaultModel::TestFallback { path }) => {
                eprintln!("note: using the small test model {} (answers poorly); `mf models download` fetches Qwen3 8B", path.display());
                path
            }
            None => {
                return Err(UsageError(
                    "no --model given and no default model in ./models (run `make setup` or `mf models download`)".into(),
                )
                .into());
            }
        },
    };
    if a.openai.is_none() && !model.is_file() {
        return Err(UsageError(format!("no model file at {}", model.display())).into());
    }
    let db = a.db.clone().unwrap_or_else(default_db);
    let store = open_store(Some(db.as_path()))?;
    let settings = AgentSettings {
        strategy: a.strategy,
        reserve: a.reserve,
        ratio: a.ratio,
        recent: a.recent,
        safety_cap: a.safety_cap,
        max_result_chars: a.max_result_chars,
        max_argument_bytes: a.tools.max_args_bytes,
        delta: if a.delta == "phi" { DeltaSource::Phi } else { DeltaSource::Model },
        summary_pass: if a.summary_pass == "standalone" { SummaryPass::Standalone } else { SummaryPass::PinnedPrefix },
        ..AgentSettings::default()
    };
    let mut settings = settings;
    settings.sampling.temperature = a.temperature;
    settings.sampling.seed = a.seed;
    if a.temperature > 0.0 {
        settings.sampling.top_p = 0.9;
    }
    let settings = match &a.system {
        Some(p) => AgentSettings { system_prompt: p.clone(), ..settings },
        None => settings,
    };
    let tools_in_text = a.openai_tools == OpenAiTools::Text;
    let backend = load_backend(&model, a.openai.as_deref(), tools_in_text, a.ctx, a.threads).await?;
    let keeps_kv = backend.keeps_kv();
    let registry = Arc::new(ToolRegistry::new(a.tools.settings()?).await.context("setting up the tools")?);
    let mut agent = Agent::new(backend, registry, approver(a.tools.approve), settings.clone()).map_err(|e| UsageError(e.to_string()))?;
    let stored = StoredSettings {
        model: if a.openai.is_some() { model.clone() } else { std::fs::canonicalize(&model).unwrap_or(model.clone()) },
        openai: a.openai.clone(),
        openai_tools_in_text: tools_in_text,
        ctx: a.ctx,
        threads: a.threads,
        agent: settings,
        workspace: a.tools.workspace.clone(),
        allow_host: a.tools.allow_host.clone(),
        code: a.tools.code,
    };
    let id = store.create(&a.question, &serde_json::to_value(&stored)?)?;
    if !a.no_kv_save {
        if keeps_kv {
            agent.set_kv_file(prepare_kv_file(&db, id, a.kv_keep)?);
        } else {
            eprintln!("{NO_KV_NOTE}");
        }
    }
    if !a.json {
        println!("session {id}");
    }
    drive(&store, id, &mut agent, a.json, Ok(a.question.clone())).await?;
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
    let call_id = "cli";
    let approval = match registry.requirement(call_id, &a.name, &a.args) {
        Err(e) => {
            println!("{}", serde_json::json!({"ok": false, "error": e.code(), "message": e.to_string()}));
            return Ok(false);
        }
        Ok(Requirement::Auto) => None,
        Ok(Requirement::Ask(req)) => approver(a.tools.approve).decide(&req).await,
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

/// List, show or resume stored investigations.
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
        #[arg(long, default_value_t = 3)]
        kv_keep: usize,
    },
}

/// Runs `mf sessions`.
pub async fn sessions(a: SessionsArgs) -> anyhow::Result<()> {
    let db = a.db.clone().unwrap_or_else(default_db);
    let store = open_store(Some(db.as_path()))?;
    match a.action {
        SessionsAction::List => {
            let rows = store.list()?;
            if a.json {
                println!("{}", serde_json::to_string(&rows)?);
            } else if rows.is_empty() {
                println!("no investigations");
            } else {
                for r in rows {
                    println!("{:>4}  {:<11}  {:>5} events  {}  {}", r.id, r.status, r.events, one_line(&r.question, 60), r.exit_reason.unwrap_or_default());
                }
            }
        }
        SessionsAction::Show { id } => {
            let row = store.get(id)?;
            let mut p = Printer::new(a.json);
            if !a.json {
                println!("session {} · {} · {}", row.id, row.status, row.exit_reason.unwrap_or_default());
            }
            for e in store.events(id)? {
                p.emit(&e);
            }
        }
        SessionsAction::Resume { id, model, approve, follow_up, safety_cap, no_kv, kv_keep } => {
            let row = store.get(id)?;
            if row.status == "running" {
                bail!("investigation {id} is still running in another process");
            }
            let s: StoredSettings = serde_json::from_value(store.settings(id)?).context("stored settings")?;
            let mut history = store.history(id)?;
            if history.is_empty() {
                bail!("investigation {id} has no stored history");
            }
            if let Some(text) = follow_up {
                let next = history.iter().filter_map(|m| m.id.0.strip_prefix('m').and_then(|n| n.parse::<usize>().ok())).max().map_or(history.len(), |n| n + 1);
                history.push(Message::user(&format!("m{next}"), &text));
            }
            let model = model.unwrap_or(s.model);
            let backend = load_backend(&model, s.openai.as_deref(), s.openai_tools_in_text, s.ctx, s.threads).await?;
            let keeps_kv = backend.keeps_kv();
            let tools = ToolArgs { workspace: s.workspace, allow_host: s.allow_host, code: s.code, approve, max_args_bytes: s.agent.max_argument_bytes };
            let registry = Arc::new(ToolRegistry::new(tools.settings()?).await?);
            let mut settings = s.agent;
            if safety_cap.is_some() {
                settings.safety_cap = safety_cap;
            }
            let mut agent = Agent::new(backend, registry, approver(approve), settings)?;
            // Saved again as the resumed run goes on; loaded first unless --no-kv.
            if keeps_kv {
                agent.set_kv_file(prepare_kv_file(&db, id, kv_keep)?);
            } else {
                eprintln!("{NO_KV_NOTE}");
            }
            if no_kv {
                agent.skip_kv_load();
            }
            store.mark_running(id)?;
            drive(&store, id, &mut agent, a.json, Err(history)).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in ["127.0.0.1", "127.0.0.1:8080", "localhost", "localhost:3000", "[::1]:80", "::1"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["example.com", "10.0.0.1:80", "*.local"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
