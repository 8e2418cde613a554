//! The loop with the real SmolLM2-135M against a real HTTP JSON world served
//! on 127.0.0.1 by this test, through mf-tools' contained `http` tool with
//! loopback allowed explicitly. The model is loaded once per test binary.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use mf_agent::{Agent, AgentEvent, AgentSettings, FixedApprover, Purpose, Store, StoreSink, ToolRunner, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{Backend, CancelToken, GenerateRequest, LlamaConfig, LlamaSession, Sampling};
use mf_tools::{ToolRegistry, ToolSettings};

#[path = "support/loopback_world.rs"]
mod loopback_world;
use loopback_world::{PORT, QUESTION, SYSTEM, serve};

const CTX: u32 = 1024;

fn model() -> Arc<LlamaSession> {
    static M: OnceLock<Arc<LlamaSession>> = OnceLock::new();
    M.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert!(path.is_file(), "{} is missing: run scripts/setup.sh", path.display());
        Arc::new(LlamaSession::load(LlamaConfig::new(path).with_n_ctx(CTX)).unwrap())
    })
    .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn smollm2_investigates_a_local_api_compacts_and_stays_in_the_window() {
    let requests = serve();
    let backend = model();
    let mut tools = ToolSettings::default();
    tools.http.allowed_hosts = Some(vec![format!("127.0.0.1:{PORT}")]);
    tools.http.allow_loopback = true;
    let registry = Arc::new(ToolRegistry::new(tools).await.unwrap());
    let settings =
        AgentSettings { system_prompt: SYSTEM.into(), strategy: StrategyKind::V2, reserve: 128, ratio: 0.9, max_result_chars: 250, ..AgentSettings::default() };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("real.db")).unwrap();
    let id = store.create(QUESTION, &serde_json::json!({"test": "real"})).unwrap();
    let specs = registry.specs();
    let mut agent = Agent::new(backend.clone(), registry, Arc::new(FixedApprover(false)), settings).unwrap();
    let mut mirror = VecSink::default();
    let out = {
        let mut sink = StoreSink { store: &store, id, next: &mut mirror, error: None };
        let out = agent.run(QUESTION, &mut sink).await.unwrap();
        assert!(sink.error.is_none(), "{:?}", sink.error);
        out
    };
    let ev = &mirror.events;
    eprintln!("exit {:?} after {} rounds, {} compactions; requests {:?}", out.reason, out.rounds, out.compactions, requests.lock().unwrap());

    // The run completed with an exit event, and the model reached the world.
    assert!(matches!(ev.last(), Some(AgentEvent::Exit { .. })));
    assert!(requests.lock().unwrap().iter().any(|p| p == "/api/disks.json"), "the model never fetched the disks");
    // Compaction fired at the small context.
    assert!(out.compactions >= 1 && ev.iter().any(|e| matches!(e, AgentEvent::CompactionStarted { .. })), "no compaction: {:?}", out.reason);
    // No generation ever asked for more than the window: prompt + its longest reply ≤ C.
    let c = CTX;
    for e in ev {
        if let AgentEvent::Kv { purpose, stats, completion_tokens, .. } = e {
            let most = match purpose {
                Purpose::Summary => 256,
                Purpose::Probe => 64,
                Purpose::Round | Purpose::Answer => 128,
            };
            assert!(stats.prompt_tokens + most <= c, "{purpose:?}: {} + {most} > {c}", stats.prompt_tokens);
            assert!(*completion_tokens <= most);
        }
        if let AgentEvent::Gauge { gauge, .. } = e {
            assert_eq!(gauge.context, c);
        }
    }
    // Every event is in the store, verbatim, and the history too.
    let want: Vec<String> = ev.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    assert_eq!(store.events_json(id).unwrap(), want);
    assert_eq!(store.history(id).unwrap(), out.history);
    assert_ne!(store.get(id).unwrap().status, mf_agent::SessionStatus::Running);
    undo_restores_history_and_kv(&mut agent, &backend, specs, ev).await;
}

/// Everything after the run in one place (the run is the expensive part).
async fn undo_restores_history_and_kv(agent: &mut Agent, backend: &LlamaSession, specs: Vec<mf_inference::ToolSpec>, ev: &[AgentEvent]) {
    for e in ev {
        if let AgentEvent::CompactionFinished { duration_ms, summary_pass, tokens_before, tokens_after, .. } = e {
            assert!(duration_ms.unwrap() > 0);
            eprintln!("compaction {tokens_before} → {tokens_after} in {} ms, summary pass {summary_pass:?}", duration_ms.unwrap());
        }
    }
    let undone = agent.undo_compaction().await.unwrap().expect("a compaction to undo");
    assert_eq!(undone.kv_error, None);
    let kv = undone.kv.unwrap();
    let chat = mf_agent::compact::chat_history(&undone.history);
    // The restored cache holds exactly the tokens cached before the
    // compaction: the undone history's prompt up to the last round's reply.
    assert_eq!(backend.cached_token_ids().await.unwrap(), kv.tokens);
    let want = backend.prompt_token_ids(&chat, &specs).await.unwrap();
    let before_last_round = backend.prompt_token_ids(&chat[..chat.len() - 2], &specs).await.unwrap();
    let shared = mf_inference::common_prefix(&kv.tokens, &want);
    assert!(shared + 8 >= before_last_round.len(), "the snapshot covers the history through the last round's prompt: {shared} of {}", before_last_round.len());
    // Continuing from the restored cache decodes only what follows that.
    let req = GenerateRequest { messages: chat, tools: specs, sampling: Sampling::greedy(24) };
    let after = Backend::generate(backend, req.clone(), None, CancelToken::new()).await.unwrap();
    assert_eq!(after.usage.kv.reused as usize, shared, "{:?}", after.usage.kv);
    assert_eq!(after.usage.kv.decoded as usize, want.len() - shared);
    // The restore replaces the whole cache: disturbed by another prompt and
    // cleared, a second restore continues exactly the same.
    let other = GenerateRequest { messages: vec![mf_inference::ChatMessage::user("Say hello.")], tools: Vec::new(), sampling: Sampling::greedy(4) };
    Backend::generate(backend, other, None, CancelToken::new()).await.unwrap();
    let again = backend.kv_restore(&mf_inference::SnapshotSlot::Memory(mf_agent::BEFORE_COMPACTION.into())).await.unwrap();
    assert_eq!(again.tokens, kv.tokens);
    let after2 = Backend::generate(backend, req.clone(), None, CancelToken::new()).await.unwrap();
    assert_eq!(after2.usage.kv, mf_inference::KvStats { prefill_ms: after2.usage.kv.prefill_ms, decode_ms: after2.usage.kv.decode_ms, ..after.usage.kv });
    assert_eq!(after2.raw_text, after.raw_text);
    // Against a one-shot decode of the same prompt from an empty cache: the
    // cache was built over several rounds (batches of other sizes, generated
    // tokens one by one), and llama.cpp's CPU kernels round differently per
    // batch shape, so a near-tie can tip the greedy pick after a few tokens.
    // Equality with a fresh decode of a one-shot cache is tested in
    // mf-inference (`memory_snapshot_round_trip`); here it is measured.
    backend.clear().await.unwrap();
    let fresh = Backend::generate(backend, req, None, CancelToken::new()).await.unwrap();
    assert_eq!(fresh.usage.kv.decoded, fresh.usage.kv.prompt_tokens);
    let same = after.raw_text.chars().zip(fresh.raw_text.chars()).take_while(|(a, b)| a == b).count();
    eprintln!("undo continuation vs one-shot fresh decode: {same} leading characters equal of {:?} / {:?}", after.raw_text, fresh.raw_text);
    eprintln!("undo: {} tokens restored", kv.tokens.len());
}
