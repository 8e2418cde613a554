//! The loop over a scripted backend: deterministic transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::{AgentEvent, AgentSettings, Agent, Approver, ExitReason, FixedApprover, NoAnswer, Store, StoreSink, SummaryBy, ToolFailure, ToolReply, ToolRunner, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvStats, ModelInfo, StopReason, TokenSink, ToolCall, ToolSpec, Usage,
};
use mf_tools::Requirement;
use mf_tools::policy::{Approval, ApprovalRequest};
use serde_json::json;

// ---------- the scripted backend ----------

#[derive(Clone, Debug)]
enum Reply {
    Text(&'static str),
    Call(&'static str, serde_json::Value),
    Malformed,
}

struct Scripted {
    ctx: u32,
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<GenerateRequest>>,
    summary: Mutex<Result<String, String>>,
}

impl Scripted {
    fn new(ctx: u32, script: Vec<Reply>) -> Arc<Self> {
        Arc::new(Scripted {
            ctx,
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            summary: Mutex::new(Ok("- key k1 is value 1001\n- key k2 is value 1002".into())),
        })
    }
    fn round_requests(&self) -> Vec<GenerateRequest> {
        self.requests.lock().unwrap().iter().filter(|r| kind_of(r) == "round").cloned().collect()
    }
}

fn msg_tokens(m: &ChatMessage) -> u32 {
    let calls: usize = m.tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum();
    4 + (m.content.chars().count() + calls).div_ceil(4) as u32
}

fn kind_of(r: &GenerateRequest) -> &'static str {
    let last = r.messages.last().map(|m| m.content.as_str()).unwrap_or("");
    if r.messages.iter().any(|m| m.content.contains("You compress the log")) {
        "summary"
    } else if last.starts_with("Based only on the conversation above") {
        "probe"
    } else if last.starts_with("Stop calling tools") {
        "closing"
    } else {
        "round"
    }
}

fn generation(text: &str, calls: Vec<ToolCall>, parse_error: Option<String>, prompt: u32) -> Generation {
    Generation {
        raw_text: text.into(),
        content: text.into(),
        thinking: None,
        tool_calls: calls,
        tool_parse_error: parse_error,
        stop_reason: StopReason::EndOfTurn,
        usage: Usage { kv: KvStats { prompt_tokens: prompt, ..KvStats::default() }, completion_tokens: 5, thinking_tokens: 0 },
    }
}

impl Backend for Scripted {
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let prompt = request.messages.iter().map(msg_tokens).sum::<u32>() + 20 * request.tools.len() as u32;
            assert!(prompt + request.sampling.max_tokens <= self.ctx, "prompt {prompt} + {} over the window {}", request.sampling.max_tokens, self.ctx);
            let kind = kind_of(&request);
            self.requests.lock().unwrap().push(request);
            let g = match kind {
                "summary" => match self.summary.lock().unwrap().clone() {
                    Ok(s) => generation(&s, vec![], None, prompt),
                    Err(e) => return Err(mf_inference::InferenceError::Decode(e)),
                },
                "probe" => generation("The value is 1001 (key k1).", vec![], None, prompt),
                "closing" => generation("closing: value 1001", vec![], None, prompt),
                _ => match self.script.lock().unwrap().pop_front().unwrap_or(Reply::Text("script ended")) {
                    Reply::Text(t) => {
                        if let Some(s) = &sink {
                            let _ = s.send(mf_inference::StreamEvent::Text(t.into()));
                        }
                        generation(t, vec![], None, prompt)
                    }
                    Reply::Call(name, args) => generation("", vec![ToolCall { id: String::new(), name: name.into(), arguments: args }], None, prompt),
                    Reply::Malformed => generation("<tool_call>{\"name\": lookup", vec![], Some("invalid JSON in tool call".into()), prompt),
                },
            };
            Ok(g)
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(messages.iter().map(msg_tokens).sum::<u32>() + 20 * tools.len() as u32) })
    }

    fn context_size(&self) -> u32 {
        self.ctx
    }

    fn model_info(&self) -> ModelInfo {
        ModelInfo { name: "scripted".into(), backend: "test".into(), architecture: None, context_size: self.ctx, context_train: None, parameters: None, tool_format: None }
    }
}

// ---------- the tools ----------

struct World {
    runs: Mutex<Vec<String>>,
}

impl ToolRunner for World {
    fn specs(&self) -> Vec<ToolSpec> {
        ["lookup", "fail", "write"]
            .iter()
            .map(|n| ToolSpec { name: (*n).into(), description: format!("{n} tool"), parameters: json!({"type": "object"}) })
            .collect()
    }
    fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> Result<Requirement, ToolFailure> {
        let v: serde_json::Value = serde_json::from_str(args_json).map_err(|e| ToolFailure::new("invalid_arguments", e.to_string()))?;
        Ok(if name == "write" { Requirement::Ask(ApprovalRequest::new(call_id, name, &v)) } else { Requirement::Auto })
    }
    fn run<'a>(&'a self, _call_id: &'a str, name: &'a str, args_json: &'a str, approval: Option<&'a Approval>) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            self.runs.lock().unwrap().push(format!("{name} {args_json}"));
            let v: serde_json::Value = serde_json::from_str(args_json).unwrap();
            match name {
                "lookup" => {
                    let k = v["key"].as_str().unwrap_or("?");
                    let n: u32 = k.trim_start_matches('k').parse().unwrap_or(0);
                    let filler = "the record says nothing else of note here; ".repeat(12);
                    Ok(ToolReply { content: format!("key {k} is value {} owned by Alice. {filler}", 1000 + n), truncated: None })
                }
                "write" => {
                    assert!(approval.is_some(), "write ran without an approval");
                    Ok(ToolReply { content: "written".into(), truncated: None })
                }
                _ => Err(ToolFailure::new("timeout", "upstream timed out")),
            }
        })
    }
}

fn world() -> Arc<World> {
    Arc::new(World { runs: Mutex::new(Vec::new()) })
}

fn settings(strategy: StrategyKind) -> AgentSettings {
    AgentSettings { strategy, reserve: 256, system_prompt: "You investigate.".into(), ..AgentSettings::default() }
}

fn lookups(n: u32) -> Vec<Reply> {
    let keys = ["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10"];
    let mut v: Vec<Reply> = keys[..n as usize].iter().map(|k| Reply::Call("lookup", json!({"key": k}))).collect();
    v.push(Reply::Text("The value of k1 is 1001."));
    v
}

async fn run(backend: Arc<Scripted>, tools: Arc<World>, approver: Arc<dyn Approver>, s: AgentSettings, q: &str) -> (mf_agent::Outcome, VecSink) {
    let mut agent = Agent::new(backend, tools, approver, s).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run(q, &mut sink).await.unwrap();
    (out, sink)
}

fn gauges(sink: &VecSink) -> Vec<mf_agent::Gauge> {
    sink.events.iter().filter_map(|e| if let AgentEvent::Gauge { gauge } = e { Some(*gauge) } else { None }).collect()
}

fn tool_errors(sink: &VecSink) -> Vec<String> {
    sink.events.iter().filter_map(|e| if let AgentEvent::ToolResult { ok: false, error, .. } = e { error.clone() } else { None }).collect()
}

// ---------- tests ----------

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
        let before: Vec<_> = sink.events[..first].iter().filter_map(|e| if let AgentEvent::Gauge { gauge } = e { Some(gauge.prompt_tokens) } else { None }).collect();
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
    let script = vec![
        Reply::Call("fail", json!({"n": 1})),
        Reply::Call("fail", json!({"n": 2})),
        Reply::Call("fail", json!({"n": 3})),
        Reply::Text("never"),
    ];
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
    let mut s = settings(StrategyKind::V1);
    s.exit.min_freed_fraction = 0.99;
    let (out, _) = run(Scripted::new(1024, lookups(8)), world(), Arc::new(NoAnswer), s, "What is the value of k1?").await;
    assert!(matches!(out.reason, ExitReason::CompactionIneffective { .. }), "{:?}", out.reason);
}

struct WrongApprover;
impl Approver for WrongApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Approval>> {
        // Approves other arguments than the ones asked about.
        let other = ApprovalRequest::new(&r.call_id, &r.tool, &json!({"path": "/etc/passwd"}));
        Box::pin(async move { Some(other.approve()) })
    }
}

#[tokio::test]
async fn approvals_are_bound_to_the_call_and_its_arguments() {
    let script = || vec![Reply::Call("write", json!({"path": "a.txt"})), Reply::Text("done")];
    let cases: Vec<(Arc<dyn Approver>, bool, &str)> = vec![
        (Arc::new(FixedApprover(true)), true, "user"),
        (Arc::new(FixedApprover(false)), false, "user"),
        (Arc::new(NoAnswer), false, "no answer"),
        (Arc::new(WrongApprover), false, "mismatch"),
    ];
    for (approver, runs, by) in cases {
        let tools = world();
        let (_, sink) = run(Scripted::new(4096, script()), tools.clone(), approver, settings(StrategyKind::V2), "write it").await;
        let (call_id, hash) = sink
            .events
            .iter()
            .find_map(|e| if let AgentEvent::ApprovalRequested { call_id, args_sha256, .. } = e { Some((call_id.clone(), args_sha256.clone())) } else { None })
            .unwrap();
        assert_eq!(hash, ApprovalRequest::new(&call_id, "write", &json!({"path": "a.txt"})).args_sha256);
        let decided = sink.events.iter().find_map(|e| if let AgentEvent::ApprovalDecided { approved, by, .. } = e { Some((*approved, by.clone())) } else { None }).unwrap();
        assert_eq!(decided, (runs, by.to_string()));
        assert_eq!(tools.runs.lock().unwrap().len(), usize::from(runs), "{by}");
    }
}

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
    let row = store.get(id).unwrap();
    assert_eq!(row.status, "finished");
    assert_eq!(row.exit_reason.as_deref(), Some("final answer"));
}

// ---------- crash safety: kill -9 mid-investigation ----------

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
    fn run<'a>(&'a self, _call_id: &'a str, name: &'a str, _args_json: &'a str, _approval: Option<&'a Approval>) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
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
        .args(["crash_child_process", "--exact", "--nocapture", "--test-threads=1"])
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
    assert_eq!(store.get(1).unwrap().status, "running");

    // Restart: listed as interrupted, the open call marked interrupted, nothing re-run.
    assert_eq!(store.recover().unwrap(), vec![1]);
    assert_eq!(store.get(1).unwrap().status, "interrupted");
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
    assert_eq!(store.get(1).unwrap().status, "finished");
}
