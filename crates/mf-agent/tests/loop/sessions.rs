//! The session core: a session stores its spec and its cache, and resumes
//! with both in another process.

use std::sync::Arc;

use mf_agent::{AgentEvent, ExitReason, NoAnswer, VecSink};
use mf_forgetting::StrategyKind;

use crate::harness::*;
use crate::scripted::*;

// ---------- the session core ----------

/// A session started through `Sessions` stores its spec, saves its KV cache
/// and, resumed by a fresh `Sessions` (another process, another face), runs
/// with the stored spec and loads the cache; a changed model file or context
/// is said and the history decoded again.
#[tokio::test]
async fn sessions_store_the_spec_save_the_cache_and_resume_with_both() {
    use mf_agent::{EngineChoice, KvMiss, Resume, RunSpec, SessionStatus, Sessions, ToolsSpec};
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    std::fs::write(&model, b"GGUF test model").unwrap();
    let mut spec = RunSpec {
        engine: EngineChoice::Embedded { model: model.clone(), threads: Some(1), gpu: false, tool_grammar: false },
        context: 4096,
        agent: settings(StrategyKind::V1),
        tools: ToolsSpec::default(),
        summariser: None,
    };
    spec.agent.safety_cap = Some(9);

    let started = Sessions::new(dir.path());
    started.use_backend(&spec.engine, spec.context, Scripted::with_kv(4096, lookups(2))).await;
    let launch = started.start_with_tools(spec.clone(), "What is the value of k1?", Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let id = launch.id;
    let mut sink = VecSink::default();
    let (_agent, out) = launch.run(&mut sink).await;
    assert_eq!(out.unwrap().reason, ExitReason::FinalAnswer);
    assert!(started.kv_file(id).is_file(), "the cache was saved");
    assert_eq!(started.spec(id).unwrap(), spec, "the spec is stored whole");
    assert_eq!(started.list().unwrap()[0].status, SessionStatus::Finished);

    // Another process resumes it with a follow-up: its own spec, the cache loaded.
    let resume = |skip_kv: bool| {
        let dir = dir.path().to_path_buf();
        let engine = spec.engine.clone();
        async move {
            let later = Sessions::new(&dir);
            later.use_backend(&engine, 4096, Scripted::with_kv(4096, vec![Reply::Text("The value of k2 is 1002.")])).await;
            let how = Resume { follow_up: Some("And the value of k2?".into()), skip_kv, ..Resume::default() };
            let launch = later.resume_with_tools(id, how, Arc::new(NoAnswer), None, Some(world())).await.unwrap();
            assert_eq!(launch.spec.agent.safety_cap, Some(9), "the stored spec, not a default");
            let mut sink = VecSink::default();
            let (_agent, out) = launch.run(&mut sink).await;
            assert_eq!(out.unwrap().reason, ExitReason::FinalAnswer);
            sink
        }
    };
    let loaded = resume(false).await;
    let (used, matched, _, note) = kv_restore(&loaded);
    assert!(used && matched > 0, "{note:?}");
    let first = first_round_kv(&loaded);
    assert_eq!(first.reused, matched, "the next round reuses what was loaded");
    assert_eq!(first.decoded, first.prompt_tokens - matched, "and decodes only the new tokens");

    // Skipped by the user: said so, decoded again.
    let skipped = resume(true).await;
    assert!(skipped.events.iter().any(|e| matches!(e, AgentEvent::KvRestore { used: false, miss: Some(KvMiss::Skipped), .. })));

    // The model file changed since the cache was saved: not loaded, and why.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&model, b"GGUF another test model").unwrap();
    let changed = resume(false).await;
    assert!(
        changed.events.iter().any(|e| matches!(e, AgentEvent::KvRestore { used: false, miss: Some(KvMiss::ModelChanged), .. })),
        "{:?}",
        kv_restore(&changed)
    );
    assert_eq!(first_round_kv(&changed).reused, 0);
}

/// A store file of another name than `sessions.db` is the one used (`--db FILE`):
/// it was taken for its folder alone, and `sessions.db` beside it made or read instead.
#[test]
fn a_store_file_of_any_name_is_the_one_used() {
    use mf_agent::Sessions;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench-runs.db");
    let sessions = Sessions::at_db(&db);
    assert_eq!(sessions.db_path(), db);
    let id = sessions.store().unwrap().create("q", &serde_json::json!({})).unwrap();
    assert!(db.is_file() && !dir.path().join("sessions.db").exists());
    assert_eq!(Sessions::at_db(&db).store().unwrap().get(id).unwrap().question, "q");
    assert_eq!(sessions.kv_file(id), dir.path().join("kv").join(format!("{id}.bin")));
    // A bare file name is in the working folder.
    assert_eq!(Sessions::at_db(std::path::Path::new("runs.db")).dir(), std::path::Path::new("."));
}

/// A session started with a title (a demo's plain question) shows it in its
/// `started` event and its stored row, the question the model was asked kept
/// beside it, and shows it again when resumed; a session without one has none.
#[tokio::test]
async fn a_title_is_shown_stored_and_given_again_on_resume() {
    use mf_agent::{Resume, Sessions};
    let dir = tempfile::tempdir().unwrap();
    let spec = scripted_spec(dir.path(), StrategyKind::V1);
    let route = "Call the http tool on {base}/k1.json, then say the value of k1.";
    let sessions = Sessions::new(dir.path());
    sessions.use_backend(&spec.engine, spec.context, Scripted::with_kv(4096, lookups(1))).await;
    let launch = sessions.start_with_tools(spec.clone(), route, Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let id = launch.id;
    let launch = launch.with_title(Some("  What is k1?  ".into()));
    let mut sink = VecSink::default();
    launch.run(&mut sink).await.1.unwrap();
    let title_of = |sink: &VecSink| {
        sink.events.iter().find_map(|e| match e {
            AgentEvent::Started { question, title, .. } => Some((question.clone(), title.clone())),
            _ => None,
        })
    };
    assert_eq!(title_of(&sink), Some((route.to_owned(), Some("What is k1?".to_owned()))), "trimmed, the question kept beside it");
    let row = sessions.store().unwrap().get(id).unwrap();
    assert_eq!((row.question.as_str(), row.title.as_deref()), (route, Some("What is k1?")));

    sessions.use_backend(&spec.engine, spec.context, Scripted::with_kv(4096, vec![Reply::Text("k2 is 1002.")])).await;
    let how = Resume { follow_up: Some("And k2?".into()), ..Resume::default() };
    let mut sink = VecSink::default();
    sessions.resume_with_tools(id, how, Arc::new(NoAnswer), None, Some(world())).await.unwrap().run(&mut sink).await.1.unwrap();
    assert_eq!(title_of(&sink).and_then(|(_, t)| t).as_deref(), Some("What is k1?"), "given again on resume");

    // Without a title: none, and the row shows the question.
    sessions.use_backend(&spec.engine, spec.context, Scripted::with_kv(4096, lookups(1))).await;
    let plain = sessions.start_with_tools(spec, "What is k1?", Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let plain_id = plain.id;
    let mut sink = VecSink::default();
    plain.with_title(Some("   ".into())).run(&mut sink).await.1.unwrap();
    assert_eq!(title_of(&sink).and_then(|(_, t)| t), None, "a blank title is none");
    assert_eq!(sessions.store().unwrap().get(plain_id).unwrap().title, None);
    let json = serde_json::to_string(&sink.events[0]).unwrap();
    assert!(!json.contains("title"), "an event without a title is stored as before: {json}");
}
