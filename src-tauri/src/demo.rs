//! Demo investigations: the benchmark's live worlds (`scenarios/agentic/`),
//! one click each from the empty state. The world's API is served on
//! loopback while its run lasts, and only that run may reach it.

use std::sync::{Arc, Mutex};

use mf_agent::AgentEvent;
use mf_bench::agentic::{BASE, DEFAULT_SYSTEM, WorldServer, load_world, load_worlds};
use mf_tools::policy::Mode;
use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};
use crate::investigation::{Start, launch};

/// A demo world as the empty state lists it (generated as ui/src/lib/generated/app.ts `DemoWorld`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct DemoWorld {
    /// The world's id (its file name).
    pub id: String,
    /// One line for people.
    pub title: String,
    /// The question it asks, as a person would (the world's `plain_question`
    /// when it has one; else its whole question).
    pub question: String,
    /// What the model is told besides (the step-by-step route a small model
    /// needs), when the world separates it: shown folded.
    #[cfg_attr(test, ts(optional))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Endpoints the world serves (what the model can call).
    pub tools: usize,
}

/// What the question says in place of the server's address before it runs.
const DEMO_API: &str = "the demo API";

/// The demo worlds.
#[tauri::command]
pub fn list_demo_worlds(state: State<'_, AppState>) -> CmdResult<Vec<DemoWorld>> {
    let worlds = load_worlds(&state.paths.worlds, &[])?;
    Ok(worlds
        .into_iter()
        .map(|w| {
            // The routed question names the demo API; with a plain question beside it, it is the instructions.
            let routed = w.world.question.replace(BASE, DEMO_API);
            let (question, instructions) = match w.world.plain_question.clone() {
                Some(plain) => (plain, Some(routed)),
                None => (routed, None),
            };
            DemoWorld { id: w.world.id.clone(), title: w.world.title.clone(), question, instructions, tools: w.world.endpoints.len() }
        })
        .collect())
}

/// A free loopback port (the world server binds it right after).
fn free_port() -> CmdResult<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| CommandError::internal(format!("no free loopback port: {e}")))?;
    Ok(l.local_addr().map_err(|e| CommandError::internal(e.to_string()))?.port())
}

/// Starts world `world` on the current model and engine: its API is served on
/// loopback for this run, the http tool may reach only it (without asking),
/// and no other tool is offered. Returns the investigation's id; its events
/// stream to `on_event` like `start_investigation`'s.
#[tauri::command]
pub async fn start_demo(state: State<'_, AppState>, world: String, on_event: Channel<AgentEvent>) -> CmdResult<i64> {
    let w = load_world(&state.paths.worlds, &world)?.ok_or_else(|| CommandError::new("not_found", format!("No demo world named {world}.")))?;
    let mut settings = state.settings()?;
    settings.code = false;
    let mut spec = crate::settings::resolve(&settings)?;
    let port = free_port()?;
    let server = WorldServer::start(&w, port)?;
    let base = server.base();
    spec.tools.workspace.clear();
    spec.tools.allowed_hosts = vec![format!("127.0.0.1:{port}")];
    spec.tools.policy.http_get = Mode::Auto;
    spec.agent.system_prompt = w.system.as_deref().unwrap_or(DEFAULT_SYSTEM).replace(BASE, &base);
    let question = w.question.replace(BASE, &base);
    // The server lives as long as the run: dropped (stopped) when its loop ends.
    let server = Arc::new(Mutex::new(Some(server)));
    let on_end = {
        let server = server.clone();
        Box::new(move || {
            if let Ok(mut s) = server.lock() {
                s.take();
            }
        })
    };
    let title = w.plain_question.clone();
    launch(&state, Start::Fresh { spec: Box::new(spec), question, title, tools: None }, on_event, on_end).await
}
