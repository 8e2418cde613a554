//! The KV cache: a snapshot before each compaction and undo, and resume
//! from the saved cache.

use std::sync::Arc;

use mf_agent::{Agent, AgentEvent, ExitReason, NoAnswer, ToolRunner as _, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{Backend, CancelToken, GenerateRequest, common_prefix};

use crate::harness::*;
use crate::scripted::*;

#[tokio::test]
async fn a_kv_snapshot_before_each_compaction_and_undo_restores_history_and_cache() {
    let backend = Scripted::with_kv(1024, lookups(8));
    let mut agent = Agent::new(backend.clone(), world(), Arc::new(NoAnswer), settings(StrategyKind::V1)).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
    assert_eq!(out.reason, ExitReason::FinalAnswer);
    assert!(out.compactions >= 1);
    let ev = &sink.events;
    // Every compaction is preceded by a snapshot of the cache as it was:
    // the last round's prompt and reply (nothing decoded for it).
    let mut last_before = None;
    for (i, e) in ev.iter().enumerate() {
        if let AgentEvent::CompactionStarted { messages_before, rows, .. } = e {
            let AgentEvent::KvSnapshot { reason, slot, tokens, .. } = &ev[i - 1] else { panic!("no snapshot before the compaction: {:?}", ev[i - 1]) };
            assert_eq!(reason, "before_compaction");
            assert_eq!(slot, "memory:before_compaction");
            let AgentEvent::Gauge { .. } = &ev[i - 2] else { panic!("the snapshot decoded something: {:?}", ev[i - 2]) };
            last_before = Some((*messages_before, rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), *tokens));
        }
    }
    let (n, ids, tokens) = last_before.unwrap();
    let log = backend.kv_log.lock().unwrap().clone();
    assert!(log.iter().all(|(k, _)| *k != "prefill"));

    // Undo: the history before the last compaction and its cache come back.
    let undone = agent.undo_compaction().await.unwrap().unwrap();
    assert_eq!(undone.kv_error, None);
    assert_eq!(undone.history.len() as u32, n);
    assert_eq!(undone.history.iter().map(|m| m.id.0.clone()).collect::<Vec<_>>(), ids);
    let chat = mf_agent::compact::chat_history(&undone.history);
    let specs = world().specs();
    let want = prompt_ids(&chat, &specs);
    let kv = undone.kv.unwrap();
    assert_eq!(kv.tokens.len() as u32, tokens);
    assert_eq!(*backend.cache.lock().unwrap(), kv.tokens, "the cache holds the snapshot again");
    // It is the prompt through the last round (the undone history less its
    // last call and result), then that round's reply.
    let through_last_round = prompt_ids(&chat[..chat.len() - 2], &specs);
    assert_eq!(&kv.tokens[..through_last_round.len()], &through_last_round[..]);
    assert_eq!(common_prefix(&kv.tokens, &want), through_last_round.len());
    // Continuing from it decodes only the last call and its result.
    let g = backend
        .generate(GenerateRequest { messages: chat, tools: specs, sampling: mf_inference::Sampling::greedy(8) }, None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(g.usage.kv.reused as usize, through_last_round.len(), "{:?}", g.usage.kv);
    assert_eq!(g.usage.kv.decoded as usize, want.len() - through_last_round.len());
    // Taken once.
    assert!(agent.undo_compaction().await.unwrap().is_none());
}

#[tokio::test]
async fn a_backend_without_a_cache_compacts_without_snapshots_and_undo_gives_the_history() {
    let backend = Scripted::new(1024, lookups(8));
    let mut agent = Agent::new(backend, world(), Arc::new(NoAnswer), settings(StrategyKind::V1)).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
    assert!(out.compactions >= 1);
    assert!(!sink.events.iter().any(|e| matches!(e, AgentEvent::KvSnapshot { .. })));
    let undone = agent.undo_compaction().await.unwrap().unwrap();
    assert!(undone.kv.is_none());
    assert!(undone.kv_error.unwrap().contains("no KV snapshot"));
    assert!(undone.history.len() > 4);
}

#[tokio::test]
async fn resume_loads_the_saved_cache_when_it_matches_and_decodes_again_when_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kv.bin");
    // A first run that saves its cache at every resume point.
    let backend = Scripted::with_kv(4096, lookups(3));
    let mut agent = Agent::new(backend.clone(), world(), Arc::new(NoAnswer), settings(StrategyKind::V2)).unwrap();
    agent.set_kv_file(&file);
    let mut sink = VecSink::default();
    let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
    assert_eq!(out.reason, ExitReason::FinalAnswer);
    let saves = sink.events.iter().filter(|e| matches!(e, AgentEvent::KvSnapshot { reason, .. } if reason == "resume_point")).count();
    assert_eq!(saves, 4, "one per tool-calling reply (3) and one at the end");
    let mut history = out.history.clone();
    history.push(mf_forgetting::Message::user("m99", "And the value of k2?"));

    // Resume in a fresh process (an empty cache) with the file: loaded.
    let resume = |load: bool, file: std::path::PathBuf, history: Vec<mf_forgetting::Message>| async move {
        let backend = Scripted::with_kv(4096, vec![Reply::Text("The value of k2 is 1002.")]);
        let mut agent = Agent::new(backend, world(), Arc::new(NoAnswer), settings(StrategyKind::V2)).unwrap();
        agent.set_kv_file(file);
        if !load {
            agent.skip_kv_load();
        }
        let mut sink = VecSink::default();
        let out = agent.resume(history, &mut sink).await.unwrap();
        assert_eq!(out.reason, ExitReason::FinalAnswer);
        sink
    };
    let with = resume(true, file.clone(), history.clone()).await;
    let (used, matched, prompt, _) = kv_restore(&with);
    assert!(used);
    let kv_with = first_round_kv(&with);
    assert_eq!(kv_with.prompt_tokens, prompt);
    assert_eq!(kv_with.reused, matched, "the first round reuses exactly what matched");
    // Only the follow-up (and the final answer's re-rendering) is decoded.
    assert!(kv_with.decoded * 10 < kv_with.prompt_tokens, "{kv_with:?}");

    // The same resume without it decodes everything.
    std::fs::copy(&file, dir.path().join("kv2.bin")).unwrap();
    let without = resume(false, dir.path().join("kv2.bin"), history.clone()).await;
    let (used, _, _, note) = kv_restore(&without);
    assert!(!used && note.unwrap().contains("decoding the history again"));
    let kv_without = first_round_kv(&without);
    assert_eq!(kv_without.decoded, kv_without.prompt_tokens);
    assert_eq!(kv_without.prompt_tokens, kv_with.prompt_tokens);

    // A snapshot of another investigation (another question) is loaded but
    // diverges inside the pinned zone: not used, the history is decoded again.
    let mut other = history.clone();
    other[1].content = "What is the value of k9?".into();
    let stale = resume(true, file.clone(), other).await;
    let (used, matched, _, note) = kv_restore(&stale);
    assert!(!used, "{note:?}");
    assert!(note.unwrap().contains("inside the pinned zone"));
    let kv = first_round_kv(&stale);
    assert_eq!(kv.reused, matched.min(kv.prompt_tokens));
    assert!(kv.decoded > kv.prompt_tokens / 2, "{kv:?}");

    // No file: said so, decoded again.
    let none = resume(true, dir.path().join("missing.bin"), history).await;
    let (used, _, _, note) = kv_restore(&none);
    assert!(!used && note.unwrap().contains("no KV cache was saved"));
}
