//! The store: every event and the history, and nothing lost to a kill -9.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::{Agent, AgentEvent, ExitReason, NoAnswer, Store, StoreSink, ToolFailure, ToolReply, ToolRunner, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::ToolSpec;
use mf_tools::Requirement;
use mf_tools::policy::Approval;
use serde_json::json;

use crate::harness::*;
use crate::scripted::*;

#[tokio::test]
async fn every_event_and_the_history_are_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let id = store.create("What is the value of k1?", &json!({})).unwrap();
    let mut mirror = VecSink::default();
    let mut agent = Agent::new(Scripted::new(1024, lookups(8)), world(), Arc::new(NoAnswer), settings(StrategyKind::V2)).unwrap();
    let out = {
        let mut sink = StoreSink { store: &store, id, next: &mut mirror, error: None };
        let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
        assert!(sink.error.is_none());
        out
    };
    assert!(out.compactions >= 1);
    drop(store);
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    let want: Vec<String> = mirror.events.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    assert_eq!(store.events_json(id).unwrap(), want);
    assert_eq!(store.events(id).unwrap().len(), want.len());
    assert_eq!(store.history(id).unwrap(), out.history);
    // The transcript: what compaction took is still there, as first written,
    // the same as the loop's own record of it.
    assert_ne!(out.transcript, out.history);
    assert_eq!(store.transcript(id).unwrap(), out.transcript);
    let row = store.get(id).unwrap();
    assert_eq!(row.status, mf_agent::SessionStatus::Finished);
    assert_eq!(row.exit_reason.as_deref(), Some("final answer"));
}

/// `lookup` answers at once; `slow` hangs (the call the crash interrupts).
struct SlowWorld {
    runs: Mutex<Vec<String>>,
}

impl ToolRunner for SlowWorld {
    fn specs(&self) -> Vec<ToolSpec> {
        ["lookup", "slow"].iter().map(|n| ToolSpec { name: (*n).into(), description: format!("{n} tool"), parameters: json!({"type": "object"}) }).collect()
    }
    fn requirement(&self, _call_id: &str, _name: &str, _args_json: &str) -> Result<Requirement, ToolFailure> {
        Ok(Requirement::Auto)
    }
    fn run<'a>(
        &'a self,
        _call_id: &'a str,
        name: &'a str,
        _args_json: &'a str,
        _approval: Option<&'a Approval>,
    ) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            self.runs.lock().unwrap().push(name.to_string());
            if name == "slow" {
                tokio::time::sleep(std::time::Duration::from_secs(120)).await;
            }
            Ok(ToolReply { content: format!("{name}: key k1 is value 1001"), truncated: None })
        })
    }
}

const CRASH_DB: &str = "MF_AGENT_CRASH_CHILD_DB";

/// The child test's name as this binary lists it (`store::crash_child_process`).
fn crash_child_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::crash_child_process")
}

/// The child side of `kill_9_mid_investigation_loses_nothing` (a no-op in a normal run).
#[tokio::test]
async fn crash_child_process() {
    let Ok(db) = std::env::var(CRASH_DB) else { return };
    let store = Store::open(std::path::Path::new(&db)).unwrap();
    let id = store.create("What is the value of k1?", &json!({})).unwrap();
    let script = vec![Reply::Call("lookup", json!({"key": "k1"})), Reply::Call("slow", json!({"key": "k1"})), Reply::Text("never")];
    let tools = Arc::new(SlowWorld { runs: Mutex::new(Vec::new()) });
    let mut agent = Agent::new(Scripted::new(4096, script), tools, Arc::new(NoAnswer), settings(StrategyKind::V2)).unwrap();
    let mut next = VecSink::default();
    let mut sink = StoreSink { store: &store, id, next: &mut next, error: None };
    let _ = agent.run("What is the value of k1?", &mut sink).await;
    unreachable!("the parent kills this process during the slow call");
}

#[tokio::test]
async fn kill_9_mid_investigation_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([crash_child_name().as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CRASH_DB, &db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the child is inside the slow call.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let seen = loop {
        assert!(std::time::Instant::now() < deadline, "the child never reached the slow call");
        if db.exists()
            && let Ok(store) = Store::open(&db)
            && let Ok(events) = store.events(1)
            && events.iter().any(|e| matches!(e, AgentEvent::ToolCall { name, .. } if name == "slow"))
        {
            break events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let store = Store::open(&db).unwrap();
    let before = store.events(1).unwrap();
    assert!(before.len() >= seen.len(), "events were lost: {} < {}", before.len(), seen.len());
    assert_eq!(&before[..seen.len()], &seen[..]);
    assert!(!before.iter().any(|e| matches!(e, AgentEvent::ToolResult { name, .. } if name == "slow")), "the slow call cannot have a result");
    assert!(before.iter().any(|e| matches!(e, AgentEvent::ToolResult { name, ok: true, .. } if name == "lookup")));
    let history = store.history(1).unwrap();
    assert_eq!(history.last().unwrap().tool_calls[0].name, "slow", "the call is in the stored history");
    assert_eq!(store.get(1).unwrap().status, mf_agent::SessionStatus::Running);

    // Restart: listed as interrupted, the open call marked interrupted, nothing re-run.
    assert_eq!(store.recover().unwrap(), vec![1]);
    assert_eq!(store.get(1).unwrap().status, mf_agent::SessionStatus::Interrupted);
    let after = store.events(1).unwrap();
    assert_eq!(after.len(), before.len() + 1);
    assert!(matches!(after.last(), Some(AgentEvent::ToolInterrupted { name, .. }) if name == "slow"));

    let tools = Arc::new(SlowWorld { runs: Mutex::new(Vec::new()) });
    let backend = Scripted::new(4096, vec![Reply::Text("The value of k1 is 1001.")]);
    let mut agent = Agent::new(backend.clone(), tools.clone(), Arc::new(NoAnswer), settings(StrategyKind::V2)).unwrap();
    let mut next = VecSink::default();
    let out = {
        let mut sink = StoreSink { store: &store, id: 1, next: &mut next, error: None };
        agent.resume(history, &mut sink).await.unwrap()
    };
    assert_eq!(out.reason, ExitReason::FinalAnswer);
    assert!(tools.runs.lock().unwrap().is_empty(), "the interrupted call was re-run");
    let prompt = &backend.round_requests()[0].messages;
    assert!(prompt.last().unwrap().content.starts_with("ERROR interrupted"), "{:?}", prompt.last());
    assert_eq!(store.get(1).unwrap().status, mf_agent::SessionStatus::Finished);
}

/// A finished run keeps its exit's kind beside its text, and whether it can
/// be continued is a field: cancelled and safety-capped runs can, an answered
/// one cannot. A store made before the kind was kept gains it from its events.
#[test]
fn the_exit_kind_is_stored_and_resumable_is_a_field() {
    use mf_agent::SessionStatus;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = Store::open(&db).unwrap();
    let exits = [ExitReason::SafetyCap { rounds: 3 }, ExitReason::FinalAnswer, ExitReason::Cancelled];
    for reason in &exits {
        let id = store.create("q", &json!({})).unwrap();
        store.append_event(id, &AgentEvent::Exit { reason: reason.clone(), rounds: 3, compactions: 0 }).unwrap();
    }
    let failed = store.create("q", &json!({})).unwrap();
    store.mark_failed(failed, "the model stopped").unwrap();
    let rows = store.list().unwrap();
    let seen: Vec<(Option<&str>, bool)> = rows.iter().map(|r| (r.exit_kind.as_deref(), r.resumable)).collect();
    assert_eq!(seen, [(None, true), (Some("cancelled"), true), (Some("final_answer"), false), (Some("safety_cap"), true)]);
    assert_eq!(rows[3].exit_reason.as_deref(), Some(ExitReason::SafetyCap { rounds: 3 }.describe().as_str()), "the text stays beside the kind");
    assert_eq!(rows[0].status, SessionStatus::Failed);
    drop(store);

    // The former schema: no exit_kind column; opening fills it from the events.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("ALTER TABLE investigations DROP COLUMN exit_kind;").unwrap();
    drop(conn);
    let rows = Store::open(&db).unwrap().list().unwrap();
    let seen: Vec<(Option<&str>, bool)> = rows.iter().map(|r| (r.exit_kind.as_deref(), r.resumable)).collect();
    assert_eq!(seen, [(None, true), (Some("cancelled"), true), (Some("final_answer"), false), (Some("safety_cap"), true)]);
}

/// The bytes of a file.
fn bytes(p: &std::path::Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// A store whose file is damaged (a page overwritten, or not a database at
/// all) is refused before anything is written to it, with its path and how
/// to recover; the file stays as it was, and later opens refuse it too.
#[test]
fn a_damaged_store_is_refused_named_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    {
        let store = Store::open(&path).unwrap();
        for i in 0..40 {
            let id = store.create(&format!("question {i} {}", "x".repeat(300)), &json!({"n": i})).unwrap();
            store.append_event(id, &AgentEvent::Error { message: "y".repeat(500) }).unwrap();
        }
    }
    let mut data = bytes(&path);
    assert!(data.len() > 4 * 4096, "several pages: {}", data.len());
    // Page 3 (a b-tree page of the tables above) overwritten.
    for b in &mut data[2 * 4096..3 * 4096] {
        *b = 0xA5;
    }
    std::fs::write(&path, &data).unwrap();
    for attempt in 0..2 {
        let e = Store::open(&path).unwrap_err();
        assert!(matches!(&e, mf_agent::AgentError::StoreCorrupt { path: p, .. } if p == &path), "attempt {attempt}: {e}");
        let said = e.to_string();
        assert!(said.contains(&path.display().to_string()) && said.contains(".recover") && said.contains("nothing more is written"), "{said}");
        assert_eq!(bytes(&path), data, "the damaged file is not written to");
    }

    let junk = dir.path().join("junk.db");
    let noise: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&junk, &noise).unwrap();
    let e = Store::open(&junk).unwrap_err();
    assert!(matches!(&e, mf_agent::AgentError::StoreCorrupt { .. }), "{e}");
    assert_eq!(bytes(&junk), noise);
}

/// Every store error names its file (here a stored row that does not decode).
#[test]
fn store_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("named.db");
    let store = Store::open(&path).unwrap();
    let id = store.create("q", &json!({})).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("UPDATE investigations SET settings = '{not json' WHERE id = ?1", [id]).unwrap();
    raw.execute("INSERT INTO events (investigation, seq, json) VALUES (?1, 99, 'not json either')", [id]).unwrap();
    for e in [store.settings(id).unwrap_err(), store.events(id).unwrap_err()] {
        assert!(matches!(&e, mf_agent::AgentError::StoreFile { path: p, .. } if p == &path), "{e}");
        assert!(e.to_string().starts_with(&format!("session store {}: bad stored JSON", path.display())), "{e}");
    }
    // A missing investigation is still that, not a store failure.
    assert!(matches!(store.settings(404), Err(mf_agent::AgentError::NotFound(404))));
}

/// Writes that start failing mid-run (SQLite refuses every event after the
/// fifth) are said where the user reads the run, once, with the file; the
/// run goes on to its exit, and its outcome says it was not fully saved.
#[tokio::test]
async fn a_store_that_fails_mid_run_is_said_and_the_run_goes_on() {
    use mf_agent::Sessions;
    let dir = tempfile::tempdir().unwrap();
    let spec = scripted_spec(dir.path(), StrategyKind::V2);
    let sessions = Sessions::new(dir.path());
    drop(sessions.store().unwrap());
    let raw = rusqlite::Connection::open(sessions.db_path()).unwrap();
    raw.execute_batch(
        "CREATE TRIGGER full_disk BEFORE INSERT ON events WHEN (SELECT COUNT(*) FROM events) >= 5
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    drop(raw);
    sessions.use_backend(&spec.engine, spec.context, Scripted::new(4096, lookups(4))).await;
    let launch = sessions.start_with_tools(spec, "What is the value of k1?", Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let mut seen = VecSink::default();
    let (_agent, out) = launch.run(&mut seen).await;
    let out = out.unwrap();
    let db = sessions.db_path().display().to_string();
    let why = out.not_saved.expect("the outcome says the run was not fully saved");
    assert!(why.contains(&db) && why.contains("disk is full"), "{why}");
    let said: Vec<&String> = seen.events.iter().filter_map(|e| if let AgentEvent::Error { message } = e { Some(message) } else { None }).collect();
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert!(said[0].starts_with("not saved: ") && said[0].contains(&db), "{}", said[0]);
    assert!(matches!(seen.events.last(), Some(AgentEvent::Exit { .. } | AgentEvent::FinalAnswer { .. })), "the run went on to its end");
    assert_eq!(sessions.store().unwrap().events(1).unwrap().len(), 5, "what was written before the failure is kept");
}
