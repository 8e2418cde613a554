//! Investigation commands: start / resume (one `ipc::Channel` per run
//! streaming mf-agent's events), stop, approve, the stored history, undo,
//! and the user's hand between rounds (the message cards, pin, compact now
//! or up to a message; `mf_agent::Sessions::{pin, compact}`).
//! The lifecycle is `mf_agent::Sessions`' (the CLI's too): this module only
//! adapts it to commands.
//!
//! A session's loop is not `Send` (its event sink is a `&mut dyn EventSink`),
//! so each run lives on its own thread with a current-thread runtime. The
//! command waits until that thread has loaded the model and tools and stored
//! the session, so set-up failures reject the `invoke` with a clear error,
//! and then returns the investigation's id while the loop runs on.

use std::sync::{Arc, Mutex};

use mf_agent::{Agent, AgentEvent, ByHand, EventSink, InvestigationRow, Resume, RunSpec, SessionStatus, ToolRunner};
use mf_inference::CancelToken;
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;
use tokio::sync::oneshot;

use crate::AppState;
use crate::approver::{Scope, UiApprover};
use crate::error::{CmdResult, CommandError};

/// One investigation the app started in this process.
pub struct Running {
    /// Stops the current generation.
    cancel: CancelToken,
    /// Its pending approvals.
    approver: Arc<UiApprover>,
    /// The agent once its loop has ended (kept for undo); `None` while it runs.
    agent: Arc<Mutex<Option<Agent>>>,
    /// Whether the loop is still running.
    running: Arc<std::sync::atomic::AtomicBool>,
}

/// Forwards events to the webview; a closed window is not the loop's problem.
struct ChannelSink(Channel<AgentEvent>);

impl EventSink for ChannelSink {
    fn emit(&mut self, event: &AgentEvent) {
        let _ = self.0.send(event.clone());
    }
}

/// What a launch does.
pub(crate) enum Start {
    /// A new session of `question` run as `spec`, with the spec's tools or
    /// these, shown to people as `title` when there is one.
    Fresh { spec: Box<RunSpec>, question: String, title: Option<String>, tools: Option<Arc<dyn ToolRunner>> },
    /// Stored session `id`, with its own spec.
    Resume(i64),
}

fn running_any(state: &AppState) -> CmdResult<bool> {
    let runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
    Ok(runs.values().any(|r| r.running.load(std::sync::atomic::Ordering::SeqCst)))
}

/// Readies the session on a new thread (model, tools, stored row) and runs
/// its loop there; `on_end` runs on that thread when the loop has ended.
/// Returns the investigation's id once it is stored.
pub(crate) async fn launch(state: &AppState, start: Start, channel: Channel<AgentEvent>, on_end: Box<dyn FnOnce() + Send>) -> CmdResult<i64> {
    if running_any(state)? {
        return Err(CommandError::new("busy", "An investigation is already running; stop it first."));
    }
    let sessions = state.sessions.clone();
    let api_key = state.api_key();
    let approver = Arc::new(UiApprover::new(state.approval_timeout));
    let slot: Arc<Mutex<Option<Agent>>> = Arc::new(Mutex::new(None));
    let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (ready_tx, ready_rx) = oneshot::channel::<CmdResult<(i64, CancelToken)>>();
    let (approver2, slot2, running2) = (approver.clone(), slot.clone(), running.clone());
    std::thread::Builder::new()
        .name("investigation".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(CommandError::internal(format!("cannot start the investigation's runtime: {e}"))));
                    return;
                }
            };
            rt.block_on(async move {
                let ready = match start {
                    Start::Fresh { spec, question, title, tools } => {
                        sessions.start_with_tools(*spec, &question, approver2.clone(), api_key, tools).await.map(|l| l.with_title(title))
                    }
                    Start::Resume(id) => sessions.resume(id, Resume::default(), approver2.clone(), api_key).await,
                };
                let launch = match ready {
                    Ok(l) => l,
                    Err(e) => {
                        running2.store(false, std::sync::atomic::Ordering::SeqCst);
                        let _ = ready_tx.send(Err(e.into()));
                        on_end();
                        return;
                    }
                };
                for n in &launch.notes {
                    tracing::info!("investigation {}: {n}", launch.id);
                }
                let _ = ready_tx.send(Ok((launch.id, launch.cancel_token())));
                let mut ui = ChannelSink(channel);
                let (agent, _out) = launch.run(&mut ui).await;
                approver2.deny_all();
                if let Ok(mut s) = slot2.lock() {
                    *s = Some(agent);
                }
                running2.store(false, std::sync::atomic::Ordering::SeqCst);
                on_end();
            });
        })
        .map_err(|e| CommandError::internal(format!("cannot start the investigation thread: {e}")))?;
    let (id, cancel) = ready_rx.await.map_err(|_| CommandError::internal("the investigation thread ended during set-up"))??;
    let mut runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
    runs.insert(id, Running { cancel, approver, agent: slot, running });
    Ok(id)
}

/// Starts an investigation of `question` with the saved settings; its events
/// stream to `on_event`. Returns its id.
#[tauri::command]
pub async fn start_investigation(state: State<'_, AppState>, question: String, on_event: Channel<AgentEvent>) -> CmdResult<i64> {
    let question = question.trim().to_owned();
    if question.is_empty() {
        return Err(CommandError::invalid("Type a question first."));
    }
    let mut settings = state.settings()?;
    // run_code is offered when its helper sits beside the app (and its approval is not deny).
    settings.code = mf_tools::code::CodeConfig::beside_exe().is_ok();
    let spec = Box::new(crate::settings::resolve(&settings)?);
    launch(&state, Start::Fresh { spec, question, title: None, tools: None }, on_event, Box::new(|| {})).await
}

/// Stops investigation `id`: the current generation ends at its next token,
/// pending approvals are denied.
#[tauri::command]
pub fn stop_investigation(state: State<'_, AppState>, id: i64) -> CmdResult<()> {
    let runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
    let r = runs.get(&id).ok_or_else(|| CommandError::new("not_found", format!("Investigation {id} is not running in this window.")))?;
    r.cancel.cancel();
    r.approver.deny_all();
    Ok(())
}

/// The user's decision on a tool call that asked, bound to the argument hash
/// shown. `scope: "host"` approves the call's host for the rest of the
/// session (later calls to it that carry data run unasked); `scope: "tool"`
/// answers a call of a tool from an MCP server for good: the answer holds
/// for that server's tool for the rest of the session and is kept in the
/// settings (`mcp_approvals`) for later investigations.
#[tauri::command]
pub fn approve_tool_call(state: State<'_, AppState>, id: i64, call_id: String, arguments_hash: String, approved: bool, scope: Option<String>) -> CmdResult<()> {
    let scope = match scope.as_deref() {
        None | Some("call") => Scope::Call,
        Some("host") => Scope::Host,
        Some("tool") => Scope::Tool,
        Some(other) => return Err(CommandError::invalid(format!("Unknown approval scope {other:?} (call, host or tool)."))),
    };
    let approver = {
        let runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
        runs.get(&id).map(|r| r.approver.clone()).ok_or_else(|| CommandError::new("not_found", format!("Investigation {id} is not running in this window.")))?
    };
    if let Some(origin) = approver.answer_scoped(&call_id, &arguments_hash, approved, scope)? {
        let mode = if approved { mf_tools::policy::Mode::Auto } else { mf_tools::policy::Mode::Deny };
        state.update_settings(|s| s.mcp_approvals.set(&origin.server, &origin.tool, mode))?;
    }
    Ok(())
}

/// Stored investigations, newest first.
#[tauri::command]
pub fn list_investigations(state: State<'_, AppState>) -> CmdResult<Vec<InvestigationRow>> {
    // A run whose process has died since the app started (another window, `mf`,
    // a crash) is marked interrupted, so History offers to resume it.
    if let Err(e) = state.sessions.recover_dead() {
        tracing::warn!("recovering interrupted investigations: {e}");
    }
    Ok(state.store()?.list()?)
}

/// Every stored event of investigation `id`, in order.
#[tauri::command]
pub fn investigation_events(state: State<'_, AppState>, id: i64) -> CmdResult<Vec<AgentEvent>> {
    let store = state.store()?;
    store.get(id)?;
    Ok(store.events(id)?)
}

/// Continues stored investigation `id` with its own stored spec (a session
/// started by `mf investigate` runs with the CLI's settings, not the app's);
/// its events stream to `on_event`, starting with whether the saved KV cache
/// was loaded.
#[tauri::command]
pub async fn resume_investigation(state: State<'_, AppState>, id: i64, on_event: Channel<AgentEvent>) -> CmdResult<i64> {
    {
        let store = state.store()?;
        let row = store.get(id)?;
        if row.status == SessionStatus::Running {
            return Err(CommandError::new("busy", format!("Investigation {id} is still running.")));
        }
    }
    launch(&state, Start::Resume(id), on_event, Box::new(|| {})).await
}

/// Restores the history (and the KV cache, when a snapshot was made) from
/// before the last compaction of investigation `id`, which must be the one
/// at `round`, so a resume continues from it.
#[tauri::command]
pub async fn undo_compaction(state: State<'_, AppState>, id: i64, round: u32) -> CmdResult<()> {
    let slot = {
        let runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
        let r = runs
            .get(&id)
            .ok_or_else(|| CommandError::new("not_found", format!("Investigation {id} was not run in this window; only its compactions can be undone.")))?;
        if r.running.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(CommandError::new("busy", "Stop the investigation before undoing a compaction."));
        }
        r.agent.clone()
    };
    let store = state.store()?;
    let last = store.events(id)?.iter().rev().find_map(|e| match e {
        AgentEvent::CompactionFinished { round, .. } => Some(*round),
        _ => None,
    });
    if last != Some(round) {
        return Err(CommandError::new(
            "not_undoable",
            format!("Only the most recent compaction can be undone (round {}).", last.map_or("none".into(), |r| r.to_string())),
        ));
    }
    let mut agent = slot
        .lock()
        .map_err(|_| CommandError::internal("agent slot poisoned"))?
        .take()
        .ok_or_else(|| CommandError::new("not_undoable", "This investigation's agent is busy or gone."))?;
    // The agent's future is not `Send`: it runs on a blocking thread.
    let (agent, undone) = tauri::async_runtime::spawn_blocking(move || {
        let undone = tauri::async_runtime::block_on(agent.undo_compaction());
        (agent, undone)
    })
    .await
    .map_err(|e| CommandError::internal(format!("undo: {e}")))?;
    if let Ok(mut s) = slot.lock() {
        *s = Some(agent);
    }
    let undone = undone?.ok_or_else(|| CommandError::new("not_undoable", "This compaction was already undone."))?;
    if let Some(why) = &undone.kv_error {
        tracing::info!("undo of investigation {id}: the KV cache was not restored ({why}); a resume decodes the history again");
    }
    // The pins as they are now, not as they were before the compaction.
    let mut history = undone.history;
    mf_agent::keep_pins(&store.history(id)?, &mut history);
    store.save_history(id, &history)?;
    Ok(())
}

/// One message of a stored investigation's history, as its card shows it:
/// what the user may keep verbatim or summarise up to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MessageCard {
    /// The message's id (`m4`, `summary-m2`).
    pub id: String,
    /// `system`, `user`, `assistant`, `tool-call`, `tool-result`, `tool-error` or `summary`.
    pub kind: String,
    /// Its zone now, under the investigation's own recent setting:
    /// `pinned`, `compressible` or `recent`.
    pub zone: String,
    /// Whether the user pinned this message (*keep verbatim*).
    pub pinned: bool,
    /// Whether it is kept verbatim through the pin of another member of
    /// its chain (a call, its results, their interpretation).
    pub pinned_with_chain: bool,
    /// Whether *summarise up to here* applies: the message comes after the
    /// question (the system prompt and the question are never compacted).
    pub summarisable: bool,
    /// Its text (a tool call's name and arguments), at most
    /// [`CARD_TEXT_CHARS`] characters.
    pub text: String,
}

/// Characters of a message shown on its card: enough to recognise it (a
/// result's first lines); the whole text is in the round above it.
pub const CARD_TEXT_CHARS: usize = 600;

/// What a compaction by hand did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct HandResult {
    /// Prompt tokens before.
    pub tokens_before: u32,
    /// Prompt tokens after (equal to before when nothing changed).
    pub tokens_after: u32,
    /// Why the history is unchanged, when it is.
    pub unchanged: Option<String>,
}

/// The stored history of investigation `id`, one card per message.
#[tauri::command]
pub fn investigation_history(state: State<'_, AppState>, id: i64) -> CmdResult<Vec<MessageCard>> {
    let store = state.store()?;
    store.get(id)?;
    let history = store.history(id)?;
    let recent = state.sessions.spec(id).map_or(mf_agent::AgentSettings::default().recent, |s| s.agent.recent);
    let zones = mf_forgetting::zones::partition(&history, recent).ok();
    let question = mf_forgetting::message::question_index(&history);
    Ok(history
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let zone = zones.as_ref().map_or(mf_forgetting::Zone::Pinned, |z| z.zone_of(i));
            MessageCard {
                id: m.id.0.clone(),
                kind: m.kind().label().to_owned(),
                zone: serde_json::to_value(zone).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
                pinned: m.pinned,
                pinned_with_chain: !m.pinned && zones.as_ref().is_some_and(|z| z.is_pin(i)),
                summarisable: question.is_some_and(|q| i > q),
                text: mf_forgetting::summary::cut_chars(&m.analysis_text(), CARD_TEXT_CHARS),
            }
        })
        .collect())
}

/// Refuses while investigation `id` (or any: the model is shared) runs in
/// this window, and takes the agent kept from its last run, if any.
fn stopped_agent(state: &AppState, id: i64) -> CmdResult<Option<Agent>> {
    if running_any(state)? {
        return Err(CommandError::new("busy", "An investigation is running; stop it first."));
    }
    let runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
    Ok(runs.get(&id).and_then(|r| r.agent.lock().ok().and_then(|mut a| a.take())))
}

/// Keeps `agent` as investigation `id`'s, for undoing its last compaction.
fn keep_agent(state: &AppState, id: i64, agent: Agent) -> CmdResult<()> {
    let mut runs = state.runs.lock().map_err(|_| CommandError::internal("run table poisoned"))?;
    let r = runs.entry(id).or_insert_with(|| Running {
        cancel: CancelToken::new(),
        approver: Arc::new(UiApprover::new(state.approval_timeout)),
        agent: Arc::new(Mutex::new(None)),
        running: Arc::new(std::sync::atomic::AtomicBool::new(false)),
    });
    if let Ok(mut slot) = r.agent.lock() {
        *slot = Some(agent);
    }
    Ok(())
}

/// Keeps message `message` of stopped investigation `id` verbatim
/// (`pinned`) or lets it be compacted again; the `pin` event goes to
/// `on_event` and the store. Returns the ids it holds for (its chain).
#[tauri::command]
pub fn pin_message(state: State<'_, AppState>, id: i64, message: String, pinned: bool, on_event: Channel<AgentEvent>) -> CmdResult<Vec<String>> {
    if running_any(&state)? {
        return Err(CommandError::new("busy", "An investigation is running; stop it first."));
    }
    Ok(state.sessions.pin(id, &message, pinned, &mut ChannelSink(on_event))?)
}

/// Compacts stopped investigation `id` now (`up_to` absent: *compact now*)
/// or up to message `up_to` (*summarise up to here*), with `strategy` or
/// its own, whatever the threshold says. The compaction's events stream to
/// `on_event` and are stored; it is undone like any (`undo_compaction`).
#[tauri::command]
pub async fn compact_investigation(
    state: State<'_, AppState>,
    id: i64,
    up_to: Option<String>,
    strategy: Option<String>,
    on_event: Channel<AgentEvent>,
) -> CmdResult<HandResult> {
    let strategy = strategy.map(|s| mf_agent::parse_strategy(&s)).transpose()?;
    let by = up_to.map_or(ByHand::CompactNow, |message| ByHand::UpTo { message });
    let agent = stopped_agent(&state, id)?;
    let (sessions, api_key) = (state.sessions.clone(), state.api_key());
    // The agent's future is not `Send`: it runs on a blocking thread.
    let run = tauri::async_runtime::spawn_blocking(move || {
        let mut sink = ChannelSink(on_event);
        tauri::async_runtime::block_on(sessions.compact(id, agent, by, strategy, api_key, &mut sink))
    })
    .await
    .map_err(|e| CommandError::internal(format!("compaction: {e}")))?;
    let (agent, done) = run?;
    keep_agent(&state, id, agent)?;
    let done = done?;
    Ok(HandResult { tokens_before: done.tokens_before, tokens_after: done.tokens_after, unchanged: done.unchanged })
}
