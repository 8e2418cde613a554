//! *Compare strategies* on a stored investigation (History): it is replayed
//! under each strategy and scored by what it really did next, on the path
//! `mf replay` takes ([`mf_bench::replay::replay_session`]). Minutes on the
//! small test models: it runs on a thread of its own and reports each step.

use std::sync::Arc;

use mf_bench::BenchError;
use mf_bench::export::{UserProbe, export_session};
use mf_bench::replay::{ReplayRequest, ReplayResult, replay_session};
use serde::{Deserialize, Serialize};
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};

/// What a replay reports (generated as ui/src/lib/generated/app.ts `ReplayEvent`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReplayEvent {
    /// A strategy compacted at a point, or a point's targets scored.
    Progress {
        /// Steps done.
        done: usize,
        /// Steps in all.
        total: usize,
        /// What was just done.
        label: String,
    },
    /// The comparison.
    Finished {
        /// R per strategy, per point, with the compactions' sizes and times.
        #[cfg_attr(test, ts(type = "ReplayResult"))]
        result: Box<ReplayResult>,
    },
    /// The replay could not run or failed (the engine cannot score, the
    /// history never reached its trigger, the model is gone).
    Error {
        /// Why, for a user.
        message: String,
    },
}

/// Replays investigation `id` under `strategies` (names as in Settings:
/// `masking`, `v1`, `v2`, `v2.1`); the events go to `on_event`.
#[tauri::command]
pub fn replay_investigation(state: State<'_, AppState>, id: i64, strategies: Vec<String>, on_event: Channel<ReplayEvent>) -> CmdResult<()> {
    start(&state, id, &strategies, move |e| {
        let _ = on_event.send(e);
    })
}

/// What `replay_investigation` does, the events going to `send`.
///
/// # Errors
/// `invalid_argument` for an unknown strategy or none; `internal` when the
/// thread cannot start. Everything later is an [`ReplayEvent::Error`].
pub fn start(state: &AppState, id: i64, strategies: &[String], send: impl Fn(ReplayEvent) + Send + Sync + 'static) -> CmdResult<()> {
    let mut kinds = Vec::new();
    for s in strategies {
        kinds.push(mf_agent::parse_strategy(s.trim()).map_err(|e| CommandError::invalid(e.to_string()))?);
    }
    if kinds.is_empty() {
        return Err(CommandError::invalid("Choose at least one strategy to compare."));
    }
    let req = ReplayRequest { strategies: kinds, ..ReplayRequest::default() };
    let db = state.paths.db.clone();
    let api_key = state.api_key();
    let send = Arc::new(send);
    std::thread::Builder::new()
        .name("replay".into())
        .spawn(move || {
            let progress = {
                let send = send.clone();
                move |done: usize, total: usize, label: &str| send(ReplayEvent::Progress { done, total, label: label.to_owned() })
            };
            let run = || -> Result<ReplayResult, String> {
                let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
                let sessions = mf_agent::Sessions::at_db(&db);
                rt.block_on(replay_session(&sessions, id, &req, api_key, progress)).map_err(|e| e.to_string())
            };
            match run() {
                Ok(result) => send(ReplayEvent::Finished { result: Box::new(result) }),
                Err(message) => send(ReplayEvent::Error { message }),
            }
        })
        .map_err(|e| CommandError::internal(format!("cannot start the replay: {e}")))?;
    Ok(())
}

/// A probe the user wrote for an exported scenario (generated as
/// ui/src/lib/generated/app.ts `ProbeText`).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProbeText {
    /// The question asked after compaction.
    pub question: String,
    /// The answer expected.
    pub answer: String,
}

/// What an export wrote (generated as ui/src/lib/generated/app.ts `ScenarioExport`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ScenarioExport {
    /// The scenario file.
    pub path: String,
    /// Messages it holds (those before the first compaction point).
    pub messages: usize,
    /// Messages the investigation had in all.
    pub transcript_messages: usize,
    /// Probes it carries.
    pub probes: usize,
    /// What the export left out, and rules the file does not meet.
    pub notes: Vec<String>,
}

/// Writes investigation `id` as a scenario of the benchmark suite into the
/// exports folder (`scenarios/investigation-ID.json`), with the user's
/// probes first (blank rows are skipped): what `mf replay ID --export DIR`
/// writes. No model is loaded.
#[tauri::command]
pub fn export_investigation(state: State<'_, AppState>, id: i64, probes: Vec<ProbeText>) -> CmdResult<ScenarioExport> {
    export(&state, id, &probes)
}

/// What `export_investigation` does.
///
/// # Errors
/// `invalid_argument` for a probe with a question and no answer (or the
/// reverse), or an investigation that never reached its trigger;
/// `not_found`; `store`; `export` when the file cannot be written.
pub fn export(state: &AppState, id: i64, probes: &[ProbeText]) -> CmdResult<ScenarioExport> {
    let mut user = Vec::new();
    for (i, p) in probes.iter().enumerate() {
        let (q, a) = (p.question.trim(), p.answer.trim());
        match (q.is_empty(), a.is_empty()) {
            (true, true) => {}
            (false, false) => user.push(UserProbe { question: q.to_owned(), reference: a.to_owned() }),
            _ => return Err(CommandError::invalid(format!("Probe {}: write both the question and the answer you expect.", i + 1))),
        }
    }
    let sessions = mf_agent::Sessions::at_db(&state.paths.db);
    let dir = state.paths.exports.join("scenarios");
    let (path, exported) = export_session(&sessions, id, &dir, &user, ReplayRequest::default().targets).map_err(|e| match e {
        BenchError::Replay { source, .. } => CommandError::from(source),
        e @ BenchError::InvalidSetting { .. } => CommandError::invalid(e.to_string()),
        e => CommandError::new("export", e.to_string()),
    })?;
    let s = &exported.scenario;
    Ok(ScenarioExport {
        path: path.display().to_string(),
        messages: s.messages.len(),
        transcript_messages: s.origin.as_ref().map_or(s.messages.len(), |o| o.transcript_messages),
        probes: s.probes.len(),
        notes: exported.notes,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::Mutex;

    use crate::testing::state;

    #[test]
    fn strategies_are_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let s = state(dir.path());
        let e = start(&s, 1, &["v3".into()], |_| {}).unwrap_err();
        assert_eq!(e.code, "invalid_argument");
        assert!(e.message.contains("v3"), "{}", e.message);
        assert_eq!(start(&s, 1, &[], |_| {}).unwrap_err().code, "invalid_argument");
    }

    #[test]
    fn a_missing_investigation_is_an_error_event_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = state(dir.path());
        let events = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = events.clone();
        start(&s, 4242, &["v1".into()], move |e| {
            let end = !matches!(e, ReplayEvent::Progress { .. });
            seen.lock().unwrap().push(e);
            if end {
                let _ = tx.send(());
            }
        })
        .unwrap();
        rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
        let events = events.lock().unwrap();
        match events.last().unwrap() {
            ReplayEvent::Error { message } => assert!(message.contains("4242"), "{message}"),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn an_export_checks_its_probes_and_names_the_investigation() {
        let dir = tempfile::tempdir().unwrap();
        let s = state(dir.path());
        let half = ProbeText { question: "Who?".into(), answer: " ".into() };
        let e = export(&s, 1, &[half]).unwrap_err();
        assert_eq!(e.code, "invalid_argument");
        assert!(e.message.contains("Probe 1"), "{}", e.message);
        let blank = ProbeText { question: String::new(), answer: String::new() };
        let e = export(&s, 4242, &[blank]).unwrap_err();
        assert_eq!(e.code, "not_found", "{}", e.message);
        assert!(e.message.contains("4242"), "{}", e.message);
        assert!(!s.paths.exports.join("scenarios").join("investigation-4242.json").exists());
    }
}
