//! Compaction in the loop: when it fires, what it keeps, the summary pass
//! and where it runs.

use std::sync::Arc;

use mf_agent::{Agent, AgentEvent, ExitReason, NoAnswer, SummaryBy, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{ChatMessage, GenerateRequest, KvStats};

use crate::harness::*;
use crate::scripted::*;

#[tokio::test]
async fn compaction_fires_at_the_threshold_keeps_pinned_and_fits_for_every_strategy() {
    for strategy in [StrategyKind::Baseline, StrategyKind::Masking, StrategyKind::V1, StrategyKind::V2, StrategyKind::V21] {
        let backend = Scripted::new(1024, lookups(8));
        let (out, sink) = run(backend.clone(), world(), Arc::new(NoAnswer), settings(strategy), "What is the value of k1?").await;
        let threshold = 576; // 0.75 · (1024 − 256)
        let failed: Vec<_> = sink.events.iter().filter(|e| matches!(e, AgentEvent::CompactionFailed { .. } | AgentEvent::Error { .. })).collect();
        if strategy == StrategyKind::Baseline {
            // The paper's baseline keeps the first message and the last 2: the
            // question goes, so a second compaction has nothing to anchor on.
            assert!(matches!(out.reason, ExitReason::FinalAnswer | ExitReason::ContextExhausted { .. }), "{:?}", out.reason);
        } else {
            assert_eq!(out.reason, ExitReason::FinalAnswer, "{strategy}: {:?} {failed:?}", out.reason);
        }
        assert!(out.compactions >= 1, "{strategy}: no compaction");
        // It fired on the first round over the threshold, not before.
        let first = sink.events.iter().position(|e| matches!(e, AgentEvent::CompactionStarted { .. })).unwrap();
        let before: Vec<_> =
            sink.events[..first].iter().filter_map(|e| if let AgentEvent::Gauge { gauge, .. } = e { Some(gauge.prompt_tokens) } else { None }).collect();
        let (last, earlier) = before.split_last().unwrap();
        assert!(*last > threshold, "{strategy}: fired at {last}");
        assert!(earlier.iter().all(|t| *t <= threshold), "{strategy}: should have fired earlier: {earlier:?}");
        for e in &sink.events {
            if let AgentEvent::CompactionFinished { tokens_before, tokens_after, .. } = e {
                assert!(tokens_after < tokens_before && *tokens_after <= threshold, "{strategy}: {tokens_before} → {tokens_after}");
            }
        }
        // Pinned zone byte-identical in every round's prompt; nothing over C − G.
        for r in backend.round_requests().iter().filter(|_| strategy != StrategyKind::Baseline) {
            assert_eq!(r.messages[0], ChatMessage::system("You investigate."));
            assert_eq!(r.messages[1], ChatMessage::user("What is the value of k1?"));
        }
        assert!(gauges(&sink).iter().all(|g| g.prompt_tokens + g.reserve <= g.context));
        assert!(out.max_prompt_tokens <= 1024 - 256);
        // A gauge follows every compaction.
        for (i, e) in sink.events.iter().enumerate() {
            if matches!(e, AgentEvent::CompactionFinished { .. }) {
                assert!(matches!(sink.events[i + 1], AgentEvent::Gauge { .. }), "{strategy}");
            }
        }
        // The transcript is the history as if nothing had been compacted: every
        // tool result as the tools returned it, in order, no summary, each
        // message once; and the final history's own messages are in it.
        let results: Vec<&str> =
            sink.events.iter().filter_map(|e| if let AgentEvent::ToolResult { content, .. } = e { Some(content.as_str()) } else { None }).collect();
        let in_transcript: Vec<&str> = out.transcript.iter().filter(|m| m.role == mf_forgetting::Role::Tool).map(|m| m.content.as_str()).collect();
        assert_eq!(in_transcript, results, "{strategy}");
        assert!(out.transcript.iter().all(|m| !m.summary), "{strategy}");
        let mut ids: Vec<&str> = out.transcript.iter().map(|m| m.id.as_str()).collect();
        ids.dedup();
        assert_eq!(ids.len(), out.transcript.len(), "{strategy}");
        assert!(out.history.iter().filter(|m| !m.summary).all(|m| out.transcript.iter().any(|t| t.id == m.id)), "{strategy}");
        assert_ne!(out.transcript, out.history, "{strategy}: the transcript keeps what compaction took (masking: the original texts)");
    }
}

#[tokio::test]
async fn summary_pass_appends_to_the_live_prompt_and_falls_back_on_failure() {
    let backend = Scripted::new(2048, lookups(10));
    let mut s = settings(StrategyKind::V1);
    s.reserve = 512;
    let (_, sink) = run(backend.clone(), world(), Arc::new(NoAnswer), s, "What is the value of k1?").await;
    let fin = sink.events.iter().find_map(|e| match e {
        AgentEvent::CompactionFinished { summary_by, appended_to_live_cache, summary, .. } => Some((*summary_by, *appended_to_live_cache, summary.clone())),
        _ => None,
    });
    let (by, appended, summary) = fin.unwrap();
    assert_eq!(by, SummaryBy::Model);
    assert!(appended);
    assert!(summary.unwrap().contains("value 1001"));
    // The summary request starts with the live history (the cached prefix).
    let reqs = backend.requests.lock().unwrap().clone();
    let i = reqs.iter().position(|r| kind_of(r) == "summary").unwrap();
    let prev = &reqs[i - 1];
    assert_eq!(&reqs[i].messages[..prev.messages.len()], &prev.messages[..], "summary pass is not an append");
    assert_eq!(reqs[i].sampling.max_tokens, 256);
    assert!((reqs[i].sampling.temperature - 0.2).abs() < 1e-6);

    // The summary pass fails: the 500-character fallback.
    let backend = Scripted::new(1024, lookups(8));
    *backend.summary.lock().unwrap() = Err("model crashed".into());
    let (out, sink) = run(backend, world(), Arc::new(NoAnswer), settings(StrategyKind::V1), "What is the value of k1?").await;
    assert_eq!(out.reason, ExitReason::FinalAnswer);
    let (by, reason, summary) = sink
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::CompactionFinished { summary_by, fallback_reason, summary, .. } => Some((*summary_by, fallback_reason.clone(), summary.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(by, SummaryBy::Fallback);
    assert!(reason.unwrap().contains("model crashed"));
    assert!(summary.unwrap().chars().count() <= 500);
}

/// Decoded tokens of the summary pass plus the round after it, and the summary request.
async fn compaction_cost(pass: mf_agent::SummaryPass) -> (u32, u32, KvStats, KvStats, GenerateRequest) {
    let backend = Scripted::with_kv(900, lookups(8));
    let mut s = settings(StrategyKind::V1);
    s.reserve = 200;
    s.ratio = 0.9;
    s.summary_pass = pass;
    let mut agent = Agent::new(backend.clone(), world(), Arc::new(NoAnswer), s).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
    assert!(out.compactions >= 1, "{:?}", out.reason);
    let log = backend.kv_log.lock().unwrap().clone();
    let i = log.iter().position(|(k, _)| *k == "summary").expect("a summary pass");
    let (summary, next) = (log[i].1, log[i + 1].1);
    assert_eq!(log[i + 1].0, "round");
    let req = backend.requests.lock().unwrap().iter().find(|r| kind_of(r) == "summary").cloned().unwrap();
    let used = sink.events.iter().find_map(|e| match e {
        AgentEvent::CompactionFinished { summary_pass, .. } => Some(summary_pass.clone()),
        _ => None,
    });
    let want = match pass {
        mf_agent::SummaryPass::PinnedPrefix => "pinned_prefix",
        mf_agent::SummaryPass::Standalone => "standalone",
    };
    assert_eq!(used.flatten().as_deref(), Some(want));
    (summary.decoded + next.decoded, summary.reused + next.reused, summary, next, req)
}

#[tokio::test]
async fn when_the_live_history_does_not_fit_the_summary_pass_reuses_the_cached_pinned_prefix() {
    let (reuse_decoded, _, summary, next, req) = compaction_cost(mf_agent::SummaryPass::PinnedPrefix).await;
    // The request follows the pinned zone exactly as it sits in the cache.
    assert_eq!(req.messages[0], ChatMessage::system("You investigate."));
    assert_eq!(req.messages[1], ChatMessage::user("What is the value of k1?"));
    assert_eq!(req.messages.len(), 3);
    assert_eq!(req.tools.len(), 3, "the tools are part of the cached prefix");
    let pinned = prompt_ids(&req.messages[..2], &req.tools).len() as u32;
    assert!(summary.reused >= pinned, "summary pass reused {} < pinned {pinned}", summary.reused);
    // The next round trims back to the pinned prefix and decodes only summary + recent.
    assert!(next.reused >= pinned, "{next:?}");

    let (standalone_decoded, standalone_reused, _, next_s, req_s) = compaction_cost(mf_agent::SummaryPass::Standalone).await;
    assert!(req_s.tools.is_empty() && req_s.messages[0].content.contains("You compress the log"));
    assert_eq!(standalone_reused, 0, "a standalone pass shares no prefix with the cache");
    assert_eq!(next_s.decoded, next_s.prompt_tokens);
    assert!(reuse_decoded + pinned <= standalone_decoded, "reuse {reuse_decoded} vs standalone {standalone_decoded} (pinned {pinned})");
}
