//! The session core: one lifecycle under both faces.
//!
//! A session is a stored [`RunSpec`] (engine and model, context, strategy and
//! every forgetting setting, tools and policy) plus its event log, its
//! history and its KV file. [`Sessions`] starts, resumes, follows up and
//! recovers them; the app and the CLI call it and nothing else, so a session
//! started in one face resumes in the other with its own spec.
//!
//! - [`Sessions::start`] stores the spec, loads (or reuses) the backend, sets
//!   up the tools and returns a [`Launch`], which the face runs with its own
//!   event sink and approver ([`Launch::run`]).
//! - [`Sessions::resume`] reads the stored spec and history; a follow-up
//!   question ([`Resume::follow_up`]) is appended as the next user turn.
//! - The KV file (`kv/ID.bin`) is written after every tool-calling reply and
//!   at the end; on resume it is loaded when the model file and context still
//!   match ([`kv::KvIdentity`]), and the `kv_restore` event says which
//!   happened, how many tokens it spared, or why it was not loaded ([`KvMiss`]).
//! - [`Sessions::recover_dead`] marks the sessions of a process that died
//!   `interrupted` (resumable), with an event for every call it cut off.
//! - Between runs the user's hand changes a stored session: [`Sessions::pin`]
//!   keeps a message verbatim, [`Sessions::compact`] compacts now or up to a
//!   message; both are stored as the loop's changes are.

mod by_hand;
pub mod kv;
pub mod spec;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mf_forgetting::Message;
use mf_inference::{Backend, CancelToken};
use mf_tools::ToolRegistry;

pub use crate::agent::next_message_id;
pub use kv::{KvIdentity, KvMiss};
pub use spec::{DEFAULT_CONTEXT, RunSpec, ToolsSpec};

use crate::agent::{Agent, Outcome};
use crate::engine::EngineChoice;
use crate::error::AgentError;
use crate::events::EventSink;
use crate::store::{InvestigationRow, SessionStatus, Store, StoreSink};
use crate::tools::{Approver, ToolRunner};

/// How many saved KV caches are kept by default (the most recent ones).
pub const DEFAULT_KV_KEEP: usize = 3;

/// The sessions of one data folder: the store (`sessions.db`) and the saved
/// KV caches (`kv/`), with the last loaded backend kept for the next session.
pub struct Sessions {
    dir: PathBuf,
    /// The store file (`dir/sessions.db` unless [`Sessions::at_db`] named another).
    db: PathBuf,
    /// How many saved KV caches to keep.
    pub kv_keep: usize,
    /// Whether KV caches are saved at all.
    pub save_kv: bool,
    /// The backend loaded last, by [`EngineChoice::cache_key`].
    backend: tokio::sync::Mutex<Option<(String, Arc<dyn Backend>)>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("dir", &self.dir).field("kv_keep", &self.kv_keep).finish_non_exhaustive()
    }
}

/// What to do differently when resuming a session (all optional).
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// A user message appended before continuing (a follow-up question).
    pub follow_up: Option<String>,
    /// Run this model file (or, on a server, this model name) instead of the stored one.
    pub model: Option<PathBuf>,
    /// Cap the rounds of the resumed run.
    pub safety_cap: Option<u32>,
    /// Decode the history again instead of loading the saved cache.
    pub skip_kv: bool,
}

/// How a launch starts the loop.
enum Start {
    Fresh(String),
    Resume(Vec<Message>),
}

/// A session ready to run: its id, spec, agent and store connection.
pub struct Launch {
    /// The session's id.
    pub id: i64,
    /// The spec it runs with.
    pub spec: RunSpec,
    /// Notes for the user from set-up (e.g. the engine keeps no cache).
    pub notes: Vec<String>,
    agent: Agent,
    store: Store,
    start: Start,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch").field("id", &self.id).finish_non_exhaustive()
    }
}

/// The data folder: `MF_HOME`, else the platform's data folder
/// (`~/.local/share/measured-forgetting` on Linux,
/// `~/Library/Application Support/measured-forgetting` on macOS).
#[must_use]
pub fn default_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("MF_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    if cfg!(target_os = "macos") { home.join("Library/Application Support/measured-forgetting") } else { home.join(".local/share/measured-forgetting") }
}

/// Whether process `pid` is alive (and not this one).
#[must_use]
pub fn process_alive(pid: i64) -> bool {
    if i64::from(std::process::id()) == pid {
        return false;
    }
    if cfg!(target_os = "linux") {
        return Path::new(&format!("/proc/{pid}")).exists();
    }
    // Elsewhere: `kill -0` succeeds for a live process we may signal.
    std::process::Command::new("kill").args(["-0", &pid.to_string()]).stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success())
}

impl Sessions {
    /// The sessions kept in `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Sessions { db: dir.join("sessions.db"), dir, kv_keep: DEFAULT_KV_KEEP, save_kv: true, backend: tokio::sync::Mutex::new(None) }
    }

    /// The sessions of a store file, whatever its name: its folder holds the
    /// KV caches.
    pub fn at_db(db: &Path) -> Self {
        let dir = db.parent().filter(|p| !p.as_os_str().is_empty()).map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Sessions { db: db.to_path_buf(), ..Self::new(dir) }
    }

    /// The data folder.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store file.
    #[must_use]
    pub fn db_path(&self) -> PathBuf {
        self.db.clone()
    }

    /// Where the KV cache of session `id` is saved.
    #[must_use]
    pub fn kv_file(&self, id: i64) -> PathBuf {
        self.dir.join("kv").join(format!("{id}.bin"))
    }

    /// A connection to the store.
    ///
    /// # Errors
    /// SQLite errors (unwritable folder, corrupt file).
    pub fn store(&self) -> Result<Store, AgentError> {
        Store::open(&self.db_path())
    }

    /// Marks the sessions of processes that died `interrupted`; returns their ids.
    ///
    /// # Errors
    /// Store errors.
    pub fn recover_dead(&self) -> Result<Vec<i64>, AgentError> {
        self.store()?.recover_dead(process_alive)
    }

    /// Every session, newest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn list(&self) -> Result<Vec<InvestigationRow>, AgentError> {
        self.store()?.list()
    }

    /// The spec session `id` was stored with.
    ///
    /// # Errors
    /// [`AgentError::NotFound`]; [`AgentError::StoredSpec`] when it was stored by
    /// a version whose settings this one cannot read.
    pub fn spec(&self, id: i64) -> Result<RunSpec, AgentError> {
        let v = self.store()?.settings(id)?;
        serde_json::from_value(v).map_err(|e| AgentError::StoredSpec { id, reason: e.to_string() })
    }

    /// The backend for `engine` at `context`: the one loaded last when it
    /// matches, else a new load (the old one is freed first: 8B models are large).
    ///
    /// # Errors
    /// The engine's load error.
    pub async fn backend(&self, engine: &EngineChoice, context: u32, api_key: Option<String>) -> Result<Arc<dyn Backend>, AgentError> {
        let key = engine.cache_key(context);
        let mut slot = self.backend.lock().await;
        if let Some((k, b)) = slot.as_ref()
            && *k == key
        {
            return Ok(b.clone());
        }
        *slot = None;
        let b = engine.load(context, api_key).await?;
        *slot = Some((key, b.clone()));
        Ok(b)
    }

    /// Uses `backend` for the next sessions run on `engine` at `context`
    /// instead of loading one (a face that already holds the model; tests).
    pub async fn use_backend(&self, engine: &EngineChoice, context: u32, backend: Arc<dyn Backend>) {
        *self.backend.lock().await = Some((engine.cache_key(context), backend));
    }

    /// Drops the kept backend (the next session loads its own).
    pub async fn release_backend(&self) {
        *self.backend.lock().await = None;
    }

    /// Stores a new session for `question` run as `spec` and readies it.
    /// `tools` replaces the registry the spec describes (tests, demo worlds).
    ///
    /// # Errors
    /// An invalid spec, a model that does not load, tools that cannot be set up, store errors.
    pub async fn start(&self, spec: RunSpec, question: &str, approver: Arc<dyn Approver>, api_key: Option<String>) -> Result<Launch, AgentError> {
        self.start_with_tools(spec, question, approver, api_key, None).await
    }

    /// [`Sessions::start`] with a tool runner of the caller's.
    ///
    /// # Errors
    /// As [`Sessions::start`].
    #[tracing::instrument(skip_all, fields(engine = %spec.engine.model_label(), context = spec.context))]
    pub async fn start_with_tools(
        &self,
        spec: RunSpec,
        question: &str,
        approver: Arc<dyn Approver>,
        api_key: Option<String>,
        tools: Option<Arc<dyn ToolRunner>>,
    ) -> Result<Launch, AgentError> {
        let question = question.trim();
        if question.is_empty() {
            return Err(AgentError::InvalidSetting("the question is empty".into()));
        }
        spec.check_model_file()?;
        let store = self.store()?;
        let summariser = summariser(&spec, api_key.clone()).await?;
        let backend = self.backend(&spec.engine, spec.context, api_key).await?;
        let (tools, mut notes) = tools_for(&spec, &backend, tools).await?;
        let mut agent = Agent::new(backend, tools, approver, spec.agent.clone())?.with_summariser(summariser);
        let id = store.create(question, &serde_json::to_value(&spec)?)?;
        notes.extend(self.attach_kv(&mut agent, id, &spec, KvLoad::NotAttempted)?);
        Ok(Launch { id, spec, notes, agent, store, start: Start::Fresh(question.to_owned()) })
    }

    /// Readies stored session `id` to continue with its own spec.
    ///
    /// # Errors
    /// Not found, still running in a live process, no stored history, a spec
    /// this version cannot read, or the set-up errors of [`Sessions::start`].
    pub async fn resume(&self, id: i64, how: Resume, approver: Arc<dyn Approver>, api_key: Option<String>) -> Result<Launch, AgentError> {
        self.resume_with_tools(id, how, approver, api_key, None).await
    }

    /// [`Sessions::resume`] with a tool runner of the caller's.
    ///
    /// # Errors
    /// As [`Sessions::resume`].
    #[tracing::instrument(skip_all, fields(id))]
    pub async fn resume_with_tools(
        &self,
        id: i64,
        how: Resume,
        approver: Arc<dyn Approver>,
        api_key: Option<String>,
        tools: Option<Arc<dyn ToolRunner>>,
    ) -> Result<Launch, AgentError> {
        let store = self.store()?;
        store.recover_dead(process_alive)?;
        let row = store.get(id)?;
        if row.status == SessionStatus::Running {
            return Err(AgentError::Busy(id));
        }
        let mut spec = self.spec(id)?;
        let mut history = store.history(id)?;
        if history.is_empty() {
            return Err(AgentError::NotResumable { id, reason: "it has no stored history".into() });
        }
        if let Some(text) = how.follow_up.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            history.push(Message::user(&format!("m{}", next_message_id(&history)), text));
        }
        if let Some(m) = how.model {
            spec.engine.set_model(m);
        }
        if how.safety_cap.is_some() {
            spec.agent.safety_cap = how.safety_cap;
        }
        spec.check_model_file()?;
        let summariser = summariser(&spec, api_key.clone()).await?;
        let backend = self.backend(&spec.engine, spec.context, api_key).await?;
        let (tools, mut notes) = tools_for(&spec, &backend, tools).await?;
        // The title it was started with is shown again on every resume.
        let mut agent = Agent::new(backend, tools, approver, spec.agent.clone())?.with_summariser(summariser).with_title(row.title);
        let load = if how.skip_kv { KvLoad::Miss(KvMiss::Skipped) } else { KvLoad::IfItMatches };
        notes.extend(self.attach_kv(&mut agent, id, &spec, load)?);
        store.mark_running(id)?;
        Ok(Launch { id, spec, notes, agent, store, start: Start::Resume(history) })
    }

    /// Sets where the agent saves its cache and what it does about loading it.
    fn attach_kv(&self, agent: &mut Agent, id: i64, spec: &RunSpec, load: KvLoad) -> Result<Vec<String>, AgentError> {
        let mut notes = Vec::new();
        let now = KvIdentity::of(&spec.engine, spec.context);
        let file = self.kv_file(id);
        let keeps = agent.keeps_kv();
        let plan = match (load, keeps) {
            (KvLoad::NotAttempted, _) => None,
            (_, false) => Some(Err(KvMiss::EngineKeepsNoCache)),
            (KvLoad::Miss(miss), true) => Some(Err(miss)),
            (KvLoad::IfItMatches, true) => Some(KvIdentity::check(&file, KvIdentity::load(&file).as_ref(), now.as_ref())),
        };
        if let Some(plan) = plan {
            agent.plan_kv_load(file.clone(), plan);
        }
        if !keeps {
            notes.push("this engine keeps no KV cache that can be saved (an HTTP server): a resume decodes the history again".into());
            return Ok(notes);
        }
        if !self.save_kv {
            return Ok(notes);
        }
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| AgentError::Io { what: format!("creating {}", dir.display()), reason: e.to_string() })?;
            let pruned = kv::prune(dir, self.kv_keep, Some(&file))
                .map_err(|e| AgentError::Io { what: format!("pruning saved caches in {}", dir.display()), reason: e.to_string() })?;
            if !pruned.files.is_empty() || !pruned.temporary.is_empty() {
                let temporary = match pruned.temporary.len() {
                    0 => String::new(),
                    n => format!(" and {n} temporary file(s) of saves that did not finish"),
                };
                notes.push(format!(
                    "deleted {} older saved KV cache(s){temporary}, {:.1} MB (keeping the {} most recent)",
                    pruned.files.len(),
                    pruned.bytes as f64 / 1e6,
                    self.kv_keep
                ));
            }
        }
        if let Some(id) = &now
            && let Err(e) = id.save(&file)
        {
            notes.push(format!("cannot write {}: {e}; a resume will not know which model the cache was made with", KvIdentity::path_for(&file).display()));
        }
        agent.set_kv_file(file);
        Ok(notes)
    }
}

/// What a launch does about the session's saved KV cache.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KvLoad {
    /// A fresh start: there is no cache to load (it is only saved).
    NotAttempted,
    /// A resume: load the cache when it still matches the model and context.
    IfItMatches,
    /// A resume that decodes the history again instead, for this reason.
    Miss(KvMiss),
}

/// The caller's tools, or the registry the spec describes, with set-up notes.
async fn tools_for(spec: &RunSpec, backend: &Arc<dyn Backend>, tools: Option<Arc<dyn ToolRunner>>) -> Result<(Arc<dyn ToolRunner>, Vec<String>), AgentError> {
    match tools {
        Some(t) => Ok((t, Vec::new())),
        None => {
            let (r, n) = registry(spec, backend).await?;
            Ok((r, n))
        }
    }
}

/// The tools a spec describes, its MCP servers started and listed (a server
/// that fails, or whose tools would take more than their share of the
/// model's window, is a note, and its tools are not offered).
async fn registry(spec: &RunSpec, backend: &Arc<dyn Backend>) -> Result<(Arc<ToolRegistry>, Vec<String>), AgentError> {
    let registry =
        Arc::new(ToolRegistry::new(spec.tools.settings(spec.agent.max_argument_bytes)?).await.map_err(|e| AgentError::InvalidSetting(format!("tools: {e}")))?);
    let mut notes = Vec::new();
    if registry.mcp_status().is_empty() {
        return Ok((registry, notes));
    }
    for s in connect_mcp(registry.clone(), backend.clone()).await? {
        if let mf_tools::mcp::McpServerState::Failed { error } = &s.state {
            notes.push(format!("MCP server {}: {error}; its tools are not offered", s.name));
        }
    }
    Ok((registry, notes))
}

/// Starts and lists `registry`'s MCP servers within their share of
/// `backend`'s window, each tool counted as the loop counts a message (the
/// model's tokenizer through [`ModelCounter`]).
///
/// mf-tools takes a synchronous count and the model counts asynchronously:
/// the connection runs on a blocking thread, where each count waits for its
/// reply (the embedded engine answers from its own thread, a server through
/// the runtime's other threads), and no runtime worker is held meanwhile.
async fn connect_mcp(registry: Arc<ToolRegistry>, backend: Arc<dyn Backend>) -> Result<Vec<mf_tools::mcp::McpServerStatus>, AgentError> {
    let context_tokens = backend.context_size() as usize;
    let counter = crate::compact::ModelCounter::new(backend, Vec::new());
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let empty = futures::executor::block_on(counter.count_async(&Message::user("", "")));
        let count = |text: &str| futures::executor::block_on(counter.count_async(&Message::user("", text))).saturating_sub(empty);
        handle.block_on(registry.connect_mcp_within(mf_tools::mcp::McpWindow { context_tokens, count: &count }))
    })
    .await
    .map_err(|e| AgentError::InvalidSetting(format!("tools: connecting the MCP servers stopped: {e}")))
}

/// The summariser `spec` chooses, loaded at the investigation's window (a
/// server engine connects on first use); none: the investigation's model
/// writes its own summaries.
///
/// # Errors
/// The summariser's load error.
pub(crate) async fn summariser(spec: &RunSpec, api_key: Option<String>) -> Result<Option<Arc<dyn Backend>>, AgentError> {
    match &spec.summariser {
        Some(engine) => Ok(Some(engine.load(spec.context, api_key).await?)),
        None => Ok(None),
    }
}

impl Launch {
    /// Shows `title` to people in place of the question (see
    /// [`Agent::with_title`]); stored with the run's first event, and given
    /// again on every resume.
    #[must_use]
    pub fn with_title(mut self, title: Option<String>) -> Self {
        self.agent = self.agent.with_title(title);
        self
    }

    /// The token that stops this session's loop.
    #[must_use]
    pub fn cancel_token(&self) -> CancelToken {
        self.agent.cancel_token()
    }

    /// Runs the loop to its end, every event stored and passed to `sink`. A
    /// failure the loop cannot turn into an exit marks the session `failed`.
    /// Gives the agent back (for undoing the last compaction) with the outcome.
    pub async fn run(self, sink: &mut dyn EventSink) -> (Agent, Result<Outcome, AgentError>) {
        let Launch { id, mut agent, store, start, .. } = self;
        let mut sink = StoreSink { store: &store, id, next: sink, error: None };
        let out = match start {
            Start::Fresh(q) => agent.run(&q, &mut sink).await,
            Start::Resume(h) => agent.resume(h, &mut sink).await,
        };
        let not_saved = sink.error.take();
        if let Some(e) = &not_saved {
            tracing::warn!("{e}");
        }
        if let Err(e) = &out {
            let _ = store.mark_failed(id, &e.to_string());
        }
        let out = out.map(|o| Outcome { not_saved: not_saved.map(|e| e.to_string()), ..o });
        (agent, out)
    }
}
