//! The dynamic exits, and what is fed back to the model on the way.

use std::sync::Arc;

use mf_agent::{Agent, AgentEvent, ExitReason, NoAnswer, VecSink};
use mf_forgetting::StrategyKind;
use serde_json::json;

use crate::harness::*;
use crate::scripted::*;

#[tokio::test]
async fn without_compaction_the_context_is_exhausted() {
    let backend = Scripted::new(1024, lookups(10));
    let (out, sink) = run(backend, world(), Arc::new(NoAnswer), settings(StrategyKind::None), "What is the value of k1?").await;
    assert!(matches!(out.reason, ExitReason::ContextExhausted { .. }), "{:?}", out.reason);
    assert_eq!(out.compactions, 0);
    assert!(!sink.events.iter().any(|e| matches!(e, AgentEvent::CompactionStarted { .. })));
    assert!(matches!(sink.events.last(), Some(AgentEvent::Exit { reason: ExitReason::ContextExhausted { .. }, .. })));
}

#[tokio::test]
async fn a_repeated_call_exits_and_the_model_is_asked_for_an_answer() {
    let script = vec![Reply::Call("lookup", json!({"key": "k1"})), Reply::Call("lookup", json!({"key": "k1"})), Reply::Text("never")];
    let tools = world();
    let (out, sink) = run(Scripted::new(4096, script), tools.clone(), Arc::new(NoAnswer), settings(StrategyKind::V2), "k1?").await;
    assert!(matches!(&out.reason, ExitReason::RepeatedToolCall { name, .. } if name == "lookup"), "{:?}", out.reason);
    assert_eq!(tools.runs.lock().unwrap().len(), 1, "the repeat must not run");
    assert_eq!(out.answer.as_deref(), Some("closing: value 1001"));
    assert_eq!(tool_errors(&sink), vec!["repeated_call"]);
}

#[tokio::test]
async fn consecutive_errors_exit_after_three() {
    let script = vec![Reply::Call("fail", json!({"n": 1})), Reply::Call("fail", json!({"n": 2})), Reply::Call("fail", json!({"n": 3})), Reply::Text("never")];
    let (out, _) = run(Scripted::new(4096, script), world(), Arc::new(NoAnswer), settings(StrategyKind::V2), "q?").await;
    assert_eq!(out.reason, ExitReason::ConsecutiveErrors { count: 3 });
    let script = vec![Reply::Malformed, Reply::Malformed, Reply::Malformed, Reply::Text("never")];
    let (out, sink) = run(Scripted::new(4096, script), world(), Arc::new(NoAnswer), settings(StrategyKind::V2), "q?").await;
    assert_eq!(out.reason, ExitReason::ConsecutiveErrors { count: 3 });
    assert_eq!(tool_errors(&sink), vec!["malformed_tool_call"; 3]);
}

#[tokio::test]
async fn malformed_unknown_and_oversized_calls_are_fed_back_and_the_loop_goes_on() {
    let big = "x".repeat(9000);
    let script = vec![
        Reply::Malformed,
        Reply::Call("nope", json!({})),
        Reply::Call("lookup", json!({"key": big})),
        Reply::Call("lookup", json!({"key": "k1"})),
        Reply::Text("The value of k1 is 1001."),
    ];
    let backend = Scripted::new(8192, script);
    let mut s = settings(StrategyKind::V2);
    s.exit.max_consecutive_errors = 5;
    let tools = world();
    let (out, sink) = run(backend.clone(), tools.clone(), Arc::new(NoAnswer), s, "k1?").await;
    assert_eq!(out.reason, ExitReason::FinalAnswer);
    assert_eq!(tool_errors(&sink), vec!["malformed_tool_call", "unknown_tool", "arguments_too_large"]);
    assert_eq!(tools.runs.lock().unwrap().len(), 1, "only the valid call runs");
    // Each error is in the prompt of the next round.
    let rounds = backend.round_requests();
    assert!(rounds[1].messages.last().unwrap().content.starts_with("ERROR malformed_tool_call"));
    assert!(rounds[2].messages.last().unwrap().content.starts_with("ERROR unknown_tool: no tool named `nope`"));
    assert!(rounds[3].messages.last().unwrap().content.starts_with("ERROR arguments_too_large"));
}

#[tokio::test]
async fn the_compaction_loop_guard_and_the_ineffective_compaction_exit() {
    let mut s = settings(StrategyKind::V1);
    s.exit.max_compactions_without_progress = 1;
    let (out, _) = run(Scripted::new(1024, lookups(8)), world(), Arc::new(NoAnswer), s, "What is the value of k1?").await;
    assert_eq!(out.reason, ExitReason::CompactionLoop { compactions: 1 });
    // Freeing less than asked is not an exit when the history got under the
    // threshold: the run goes on and compacts again as results come in (the
    // exit itself, over the threshold, is mf-forgetting's ExitMonitor test).
    let mut s = settings(StrategyKind::V1);
    s.exit.min_freed_fraction = 0.99;
    let (out, sink) = run(Scripted::new(1024, lookups(8)), world(), Arc::new(NoAnswer), s, "What is the value of k1?").await;
    assert!(!matches!(out.reason, ExitReason::CompactionIneffective { .. }), "{:?}", out.reason);
    let compacted = sink.events.iter().filter(|e| matches!(e, AgentEvent::CompactionFinished { .. })).count();
    assert!(compacted >= 2, "it went on past the first compaction: {compacted} compaction(s), exit {:?}", out.reason);
}

/// A refused oversized call is kept as a short note (not its arguments), and
/// when the history no longer fits, the closing answer still comes: the
/// oldest exchanges are left out for it.
#[tokio::test]
async fn an_oversized_call_is_kept_as_a_note_and_the_run_still_answers() {
    let big = "x".repeat(20_000);
    let backend = Scripted::new(4096, vec![Reply::Call("lookup", json!({"key": big})), Reply::Text("k1 is 1001.")]);
    let mut s = settings(StrategyKind::None);
    s.max_argument_bytes = 1000;
    let mut agent = Agent::new(backend, world(), Arc::new(NoAnswer), s).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
    let call = out.history.iter().flat_map(|m| m.tool_calls.iter()).next().unwrap();
    let kept = call.arguments.to_string();
    assert!(kept.len() < 200 && kept.contains("refused"), "{kept}");
    assert!(out.history.iter().any(|m| m.is_error && m.content.contains("arguments_too_large")));
    assert_eq!(out.answer.as_deref(), Some("k1 is 1001."));
}

#[tokio::test]
async fn a_spent_window_still_gets_a_closing_answer() {
    // Each lookup result is long; no compaction (strategy none): the window fills.
    let script: Vec<Reply> =
        (0..30).map(|i| Reply::Call("lookup", json!({"key": format!("k{i}"), "pad": "p".repeat(600)}))).chain([Reply::Text("k1 is 1001.")]).collect();
    let backend = Scripted::new(1200, script);
    let mut s = settings(StrategyKind::None);
    s.reserve = 200;
    let mut agent = Agent::new(backend, world(), Arc::new(NoAnswer), s).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
    assert!(matches!(out.reason, ExitReason::ContextExhausted { .. }), "{:?}", out.reason);
    assert_eq!(out.answer.as_deref(), Some("closing: value 1001"), "the closing answer came despite the full window");
    assert!(sink.events.iter().any(|e| matches!(e, AgentEvent::Error { message } if message.contains("left out to fit"))));
}
