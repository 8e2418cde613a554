//! The user's hand between rounds: a pinned message survives the loop's
//! compactions under every strategy (with the summary pass working, failing
//! into the fallback, and writing more than the budget holds, which the
//! repair cuts); compactions by hand on a stored session (*summarise up to
//! here*, *compact now*) keep the pins, are undone like any, and a resume
//! continues from them.

use std::sync::Arc;

use mf_agent::{Agent, AgentEvent, ByHand, DeltaSource, NoAnswer, SummaryBy, VecSink, keep_pins, pin};
use mf_forgetting::{Message, Role, StrategyKind};
use serde_json::json;

use crate::harness::*;
use crate::scripted::*;

/// How the summary pass answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pass {
    /// A short bullet list.
    Model,
    /// An error: the fallback.
    Fails,
    /// Far more than the budget holds: the repair cuts it.
    Long,
}

fn long_summary() -> String {
    (1..=80).map(|n| format!("- key k{n} is value {}, owned by Alice since 2024-03-{:02}", 1000 + n, n % 28 + 1)).collect::<Vec<_>>().join("\n")
}

/// The arms of the live benchmark (`cap5` is `none` stopped after 5
/// rounds), the paper's baseline, and v2.1 ranked by Φ as well as by Δ:
/// the scripted model answers every probe alike, so each Δ is 0 and v2.1
/// by Δ drops the zone without a summary pass; by Φ it summarises.
const ARMS: [(&str, StrategyKind, Option<u32>, DeltaSource); 8] = [
    ("none", StrategyKind::None, None, DeltaSource::Likelihood),
    ("cap5", StrategyKind::None, Some(5), DeltaSource::Likelihood),
    ("baseline", StrategyKind::Baseline, None, DeltaSource::Likelihood),
    ("masking", StrategyKind::Masking, None, DeltaSource::Likelihood),
    ("v1", StrategyKind::V1, None, DeltaSource::Likelihood),
    ("v2", StrategyKind::V2, None, DeltaSource::Likelihood),
    ("v2.1", StrategyKind::V21, None, DeltaSource::Likelihood),
    ("v2.1 by Φ", StrategyKind::V21, None, DeltaSource::Phi),
];

/// The calls of keys `from..=to`, then an answer.
fn calls(from: u32, to: u32) -> Vec<Reply> {
    const KEYS: [&str; 12] = ["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k12"];
    let mut v: Vec<Reply> = KEYS[from as usize - 1..to as usize].iter().map(|k| Reply::Call("lookup", json!({"key": k}))).collect();
    v.push(Reply::Text("The value of k1 is 1001."));
    v
}

#[tokio::test]
async fn a_pinned_message_survives_every_strategy_its_fallback_and_its_budget_repair() {
    for (name, strategy, cap, delta) in ARMS {
        for pass in [Pass::Model, Pass::Fails, Pass::Long] {
            let what = format!("{name}, summary {pass:?}");
            // Two lookups and an answer, below the threshold.
            let first = Scripted::new(1024, calls(1, 2));
            let (out, _) = run(first, world(), Arc::new(NoAnswer), settings(strategy), "What is the value of k1?").await;
            let mut history = out.history;
            // Pin the first result: its call comes with it.
            assert_eq!(pin(&mut history, "m3", true).unwrap(), vec!["m2", "m3"], "{what}");
            let pinned: Vec<Message> = history[2..4].to_vec();
            assert_eq!(pinned[1].role, Role::Tool);
            history.push(Message::user("m7", "And the other keys?"));

            // Resumed with nine more lookups: the window fills, the strategy compacts.
            let backend = Scripted::new(1024, calls(3, 11));
            *backend.summary.lock().unwrap() = match pass {
                Pass::Model => Ok("- key k2 is value 1002\n- key k3 is value 1003".into()),
                Pass::Fails => Err("the summary pass failed".into()),
                Pass::Long => Ok(long_summary()),
            };
            let mut s = settings(strategy);
            s.safety_cap = cap;
            s.delta = delta;
            let mut agent = Agent::new(backend.clone(), world(), Arc::new(NoAnswer), s).unwrap();
            let mut sink = VecSink::default();
            let out = agent.resume(history, &mut sink).await.unwrap();

            // Every round's prompt holds the pinned call and result as they were.
            let rounds = backend.round_requests();
            assert!(!rounds.is_empty(), "{what}");
            for (k, r) in rounds.iter().enumerate() {
                let kept = mf_agent::compact::chat_history(&pinned);
                let at = r.messages.iter().position(|m| *m == kept[0]);
                assert!(at.is_some_and(|i| r.messages.get(i + 1) == Some(&kept[1])), "{what}: round {k}'s prompt lost the pinned messages");
            }
            // So does the final history, with the pins still set.
            for p in &pinned {
                let m = out.history.iter().find(|m| m.id == p.id).unwrap_or_else(|| panic!("{what}: {} is gone", p.id));
                assert_eq!(m, p, "{what}");
            }
            let finished: Vec<(SummaryBy, Vec<String>)> = sink
                .events
                .iter()
                .filter_map(|e| match e {
                    AgentEvent::CompactionFinished { summary_by, notes, .. } => Some((*summary_by, notes.clone())),
                    _ => None,
                })
                .collect();
            // Nothing pinned ever had a fate in a compaction's plan.
            for e in &sink.events {
                if let AgentEvent::CompactionStarted { rows, .. } = e {
                    for r in rows.iter().filter(|r| r.id == "m2" || r.id == "m3") {
                        assert_eq!((r.zone.as_str(), r.tier.as_str()), ("pinned", "keep"), "{what}: {r:?}");
                        assert!(r.reason.contains("pinned by the user"), "{what}: {}", r.reason);
                    }
                }
            }
            // The window made every compacting strategy compact, and the
            // summary pass did what it was set to do.
            if strategy != StrategyKind::None {
                assert!(!finished.is_empty(), "{what}: no compaction");
            }
            if strategy.summarises() && !(strategy == StrategyKind::V21 && delta != DeltaSource::Phi) {
                let by: Vec<SummaryBy> = finished.iter().map(|f| f.0).collect();
                match pass {
                    Pass::Model | Pass::Long => assert!(by.contains(&SummaryBy::Model), "{what}: {by:?}"),
                    Pass::Fails => assert!(by.iter().all(|b| *b != SummaryBy::Model) && by.contains(&SummaryBy::Fallback), "{what}: {by:?}"),
                }
                if pass == Pass::Long {
                    let repaired = finished.iter().flat_map(|f| &f.1).any(|n| n.starts_with("budget: model summary cut"));
                    assert!(repaired, "{what}: the long summary was never cut: {finished:?}");
                }
            }
        }
    }
}

/// A session stopped after its answer: pinned, summarised up to a message,
/// compacted now, the last compaction undone (the pins as they are now),
/// then resumed: the stored history and every event say so.
#[tokio::test]
async fn compactions_by_hand_keep_the_pins_are_undone_and_resumed_from() {
    use mf_agent::{Resume, SessionStatus, Sessions};
    let dir = tempfile::tempdir().unwrap();
    let spec = scripted_spec(dir.path(), StrategyKind::V1);
    let sessions = Sessions::new(dir.path());
    let backend = Scripted::with_kv(4096, calls(1, 6));
    sessions.use_backend(&spec.engine, spec.context, backend.clone()).await;
    let launch = sessions.start_with_tools(spec.clone(), "What is the value of k1?", Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let id = launch.id;
    let (agent, out) = launch.run(&mut VecSink::default()).await;
    let out = out.unwrap();
    assert_eq!(out.compactions, 0, "below the threshold: the loop compacted nothing");
    // m0 system, m1 question, m2–m13 six calls and results, m14 the answer.
    let ids = |h: &[Message]| h.iter().map(|m| m.id.0.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&out.history), ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10", "m11", "m12", "m13", "m14"]);
    let store = sessions.store().unwrap();

    // Keep verbatim: the result m3 (its call m2 comes with it), stored with an event.
    let mut sink = VecSink::default();
    assert_eq!(sessions.pin(id, "m3", true, &mut sink).unwrap(), vec!["m2", "m3"]);
    assert!(matches!(&sink.events[..], [AgentEvent::Pin { message, pinned: true, round: 7, .. }] if message == "m3"), "{:?}", sink.events);
    assert!(store.history(id).unwrap()[3].pinned);
    assert!(matches!(sessions.pin(id, "m99", true, &mut sink), Err(mf_agent::AgentError::NoSuchMessage(m)) if m == "m99"));

    // Summarise up to m6, a call: its result m7 goes with it, as do m4 and
    // m5; the pins stay, everything after m7 stays. The agent comes from a
    // run the user stopped: its summary pass is not cancelled for that.
    agent.cancel_token().cancel();
    let before = store.history(id).unwrap();
    let mut sink = VecSink::default();
    let (agent, done) = sessions.compact(id, Some(agent), ByHand::UpTo { message: "m6".into() }, None, None, &mut sink).await.unwrap();
    let done = done.unwrap();
    assert_eq!(done.unchanged, None, "{:?}", sink.events);
    assert!(done.tokens_after < done.tokens_before);
    let h = store.history(id).unwrap();
    assert_eq!(h, done.history, "the store holds the compacted history");
    assert_eq!(ids(&h), ["m0", "m1", "m2", "m3", "summary-m4", "m8", "m9", "m10", "m11", "m12", "m13", "m14"]);
    assert_eq!(h[..4], before[..4], "the pinned zone and the pins, byte for byte");
    assert_eq!(h[5..], before[8..], "everything after m7, verbatim");
    assert!(h[4].content.contains("messages m4–m7 (4 messages)"), "{}", h[4].content);
    let started = sink.events.iter().find_map(|e| match e {
        AgentEvent::CompactionStarted { by_hand, round, strategy, .. } => Some((by_hand.clone(), *round, strategy.clone())),
        _ => None,
    });
    assert_eq!(started, Some((Some(ByHand::UpTo { message: "m6".into() }), 7, "v1".into())));
    assert!(sink.events.iter().any(|e| matches!(e, AgentEvent::KvSnapshot { reason, .. } if reason == "before_compaction")), "an undo point with the cache");
    assert!(sink.events.iter().any(|e| matches!(e, AgentEvent::CompactionFinished { summary_by: SummaryBy::Model, .. })), "{:?}", sink.events);

    // Compact now, with another strategy: the summary and m8–m11 go (m12–m14 are recent).
    let mut sink = VecSink::default();
    let (mut agent, done) = sessions.compact(id, Some(agent), ByHand::CompactNow, Some(StrategyKind::V2), None, &mut sink).await.unwrap();
    let done = done.unwrap();
    assert_eq!(done.unchanged, None, "{:?}", sink.events);
    let compacted = store.history(id).unwrap();
    assert_eq!(ids(&compacted)[..4], ["m0", "m1", "m2", "m3"]);
    assert_eq!(ids(&compacted)[ids(&compacted).len() - 3..], ["m12", "m13", "m14"]);
    assert_eq!(compacted[..4], before[..4], "the pins, byte for byte");
    assert!(sink.events.iter().any(|e| matches!(e, AgentEvent::CompactionStarted { by_hand: Some(ByHand::CompactNow), strategy, .. } if strategy == "v2")));

    // A pin after the compaction (m13, recent), then the compaction undone:
    // the history before it comes back with the pins as they are now.
    sessions.pin(id, "m13", true, &mut VecSink::default()).unwrap();
    let undone = agent.undo_compaction().await.unwrap().unwrap();
    assert_eq!(undone.kv_error, None, "the cache before the compaction is restored");
    let mut restored = undone.history;
    keep_pins(&store.history(id).unwrap(), &mut restored);
    assert_eq!(ids(&restored), ids(&h));
    assert_eq!(restored.iter().filter(|m| m.pinned).map(|m| m.id.as_str()).collect::<Vec<_>>(), ["m3", "m13"]);
    store.save_history(id, &restored).unwrap();

    // Changes by hand leave the session's standing as it was.
    assert_eq!(sessions.list().unwrap()[0].status, SessionStatus::Finished);

    // Resumed with a follow-up: the pinned result is in the prompt, the pins stay stored.
    let later = Sessions::new(dir.path());
    let next = Scripted::with_kv(4096, vec![Reply::Text("k2 is 1002.")]);
    later.use_backend(&spec.engine, spec.context, next.clone()).await;
    let how = Resume { follow_up: Some("And k2?".into()), ..Resume::default() };
    let launch = later.resume_with_tools(id, how, Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let (_, out) = launch.run(&mut VecSink::default()).await;
    assert_eq!(out.unwrap().answer.as_deref(), Some("k2 is 1002."));
    let prompt = &next.round_requests()[0].messages;
    assert_eq!(prompt[3], mf_agent::compact::chat_history(&restored[3..4])[0], "the pinned result, as it was");
    let stored = store.history(id).unwrap();
    assert_eq!(stored.iter().filter(|m| m.pinned).map(|m| m.id.as_str()).collect::<Vec<_>>(), ["m3", "m13"]);
    // The ledger: two compactions by hand and two pins, in the stored events.
    let events = store.events(id).unwrap();
    let by_hand = events.iter().filter(|e| matches!(e, AgentEvent::CompactionStarted { by_hand: Some(_), .. })).count();
    let pins = events.iter().filter(|e| matches!(e, AgentEvent::Pin { .. })).count();
    assert_eq!((by_hand, pins), (2, 2));

    // A session whose loop runs is left alone.
    let running = store.create("q", &serde_json::to_value(&spec).unwrap()).unwrap();
    assert!(matches!(sessions.pin(running, "m0", true, &mut VecSink::default()), Err(mf_agent::AgentError::Busy(i)) if i == running));
    let refused = sessions.compact(running, None, ByHand::CompactNow, None, None, &mut VecSink::default()).await;
    assert!(matches!(refused, Err(mf_agent::AgentError::Busy(i)) if i == running));
}
