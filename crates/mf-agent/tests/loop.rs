//! The loop over a scripted backend: deterministic transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::{AgentEvent, AgentSettings, Agent, Approver, ExitReason, FixedApprover, NoAnswer, Store, StoreSink, SummaryBy, ToolFailure, ToolReply, ToolRunner, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvSnapshot, KvStats, ModelInfo, SnapshotSlot, StopReason, TokenSink, ToolCall, ToolSpec,
    Usage, common_prefix,
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
    /// Simulate a KV cache (off: the backend keeps none, like an HTTP server).
    kv: bool,
    /// The token ids "in the cache", as the llama.cpp worker keeps them:
    /// the last prompt plus what was generated after it.
    cache: Mutex<Vec<i32>>,
    /// Snapshots by slot.
    slots: Mutex<HashMap<String, Vec<i32>>>,
    /// KV figures of every generation (prefills included), in order.
    kv_log: Mutex<Vec<(&'static str, KvStats)>>,
}

impl Scripted {
    fn new(ctx: u32, script: Vec<Reply>) -> Arc<Self> {
        Arc::new(Self::plain(ctx, script))
    }
    fn with_kv(ctx: u32, script: Vec<Reply>) -> Arc<Self> {
        Arc::new(Scripted { kv: true, ..Self::plain(ctx, script) })
    }
    fn plain(ctx: u32, script: Vec<Reply>) -> Self {
        Scripted {
            ctx,
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            summary: Mutex::new(Ok("- key k1 is value 1001\n- key k2 is value 1002".into())),
            kv: false,
            cache: Mutex::new(Vec::new()),
            slots: Mutex::new(HashMap::new()),
            kv_log: Mutex::new(Vec::new()),
        }
    }
    /// Runs a prompt through the simulated cache exactly as the worker does:
    /// reuse the longest common prefix (the last prompt token is decoded
    /// again when everything matches), trim the rest, decode the remainder.
    fn through_cache(&self, ids: &[i32], generated: &str, kind: &'static str) -> KvStats {
        let mut cache = self.cache.lock().unwrap();
        let mut lcp = common_prefix(&cache, ids);
        if lcp == ids.len() {
            lcp = lcp.saturating_sub(1);
        }
        let stats = KvStats {
            prompt_tokens: ids.len() as u32,
            reused: lcp as u32,
            decoded: (ids.len() - lcp) as u32,
            trimmed: (cache.len() - lcp.min(cache.len())) as u32,
            ..KvStats::default()
        };
        *cache = ids.to_vec();
        cache.extend(text_ids(generated));
        self.kv_log.lock().unwrap().push((kind, stats));
        stats
    }
    fn round_requests(&self) -> Vec<GenerateRequest> {
        self.requests.lock().unwrap().iter().filter(|r| kind_of(r) == "round").cloned().collect()
    }
}

fn hash_id(s: &str) -> i32 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish() as i32
}

/// One token per 4 characters, as `msg_tokens` counts them.
fn text_ids(text: &str) -> Vec<i32> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(4).map(|c| hash_id(&c.iter().collect::<String>())).collect()
}

/// The simulated tokenisation of a prompt: 20 tokens per tool, then per
/// message 4 header tokens and one per 4 characters (exactly `msg_tokens`).
fn prompt_ids(messages: &[ChatMessage], tools: &[ToolSpec]) -> Vec<i32> {
    let mut ids = Vec::new();
    for t in tools {
        ids.extend((0..20).map(|i| hash_id(&format!("{}#{i}", t.name))));
    }
    for m in messages {
        ids.extend([hash_id(&format!("{:?}", m.role)), hash_id(m.tool_call_id.as_deref().unwrap_or("")), hash_id(m.name.as_deref().unwrap_or("")), 0]);
        let calls: String = m.tool_calls.iter().map(|c| format!("{}{}", c.name, c.arguments)).collect();
        ids.extend(text_ids(&format!("{}{calls}", m.content)));
    }
    ids
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
            if self.kv && request.sampling.max_tokens == 0 {
                // A prefill: the prompt goes into the cache, nothing is generated.
                let stats = self.through_cache(&prompt_ids(&request.messages, &request.tools), "", "prefill");
                let mut g = generation("", vec![], None, prompt);
                g.usage.kv = stats;
                g.usage.completion_tokens = 0;
                g.stop_reason = StopReason::MaxTokens;
                return Ok(g);
            }
            let ids = prompt_ids(&request.messages, &request.tools);
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
            let mut g = g;
            if self.kv {
                g.usage.kv = self.through_cache(&ids, &g.raw_text, kind);
            }
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

    fn keeps_kv(&self) -> bool {
        self.kv
    }

    fn prompt_token_ids<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<Vec<i32>>> {
        Box::pin(async move { Ok(prompt_ids(messages, tools)) })
    }

    fn cached_token_ids(&self) -> BoxFuture<'_, mf_inference::Result<Vec<i32>>> {
        Box::pin(async move { Ok(self.cache.lock().unwrap().clone()) })
    }

    fn kv_snapshot<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, mf_inference::Result<KvSnapshot>> {
        Box::pin(async move {
            assert!(self.kv, "snapshot asked of a backend without a cache");
            let tokens = self.cache.lock().unwrap().clone();
            if let SnapshotSlot::File(p) = slot {
                std::fs::write(p, serde_json::to_vec(&tokens).unwrap()).unwrap();
            }
            self.slots.lock().unwrap().insert(slot.to_string(), tokens.clone());
            Ok(KvSnapshot { bytes: 4 * tokens.len() as u64, tokens, key: "scripted".into() })
        })
    }

    fn kv_restore<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, mf_inference::Result<KvSnapshot>> {
        Box::pin(async move {
            let tokens = match slot {
                SnapshotSlot::File(p) => match std::fs::read(p) {
                    Ok(b) => serde_json::from_slice::<Vec<i32>>(&b).unwrap(),
                    Err(e) => return Err(mf_inference::InferenceError::Snapshot { path: p.clone(), reason: e.to_string() }),
                },
                SnapshotSlot::Memory(_) => match self.slots.lock().unwrap().get(&slot.to_string()) {
                    Some(t) => t.clone(),
                    None => return Err(mf_inference::InferenceError::Snapshot { path: slot.to_string().into(), reason: "no such snapshot".into() }),
                },
            };
            *self.cache.lock().unwrap() = tokens.clone();
            Ok(KvSnapshot { bytes: 4 * tokens.len() as u64, tokens, key: "scripted".into() })
        })
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
        let v: serde_json::Value = serde_json::from_str(args_json).map_err(|e| ToolFailure::new(mf_agent::FailureKind::Tool("invalid_arguments".into()), e.to_string()))?;
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
                _ => Err(ToolFailure::new(mf_agent::FailureKind::Tool("timeout".into()), "upstream timed out")),
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
    sink.events.iter().filter_map(|e| if let AgentEvent::Gauge { gauge, .. } = e { Some(*gauge) } else { None }).collect()
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
        let before: Vec<_> = sink.events[..first].iter().filter_map(|e| if let AgentEvent::Gauge { gauge, .. } = e { Some(gauge.prompt_tokens) } else { None }).collect();
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
    assert_eq!(row.status, mf_agent::SessionStatus::Finished);
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

fn first_round_kv(sink: &VecSink) -> KvStats {
    sink.events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Kv { purpose: mf_agent::Purpose::Round, stats, .. } => Some(KvStats {
                prompt_tokens: stats.prompt_tokens,
                reused: stats.reused,
                decoded: stats.decoded,
                trimmed: stats.trimmed,
                ..KvStats::default()
            }),
            _ => None,
        })
        .unwrap()
}

fn kv_restore(sink: &VecSink) -> (bool, u32, u32, Option<String>) {
    sink.events
        .iter()
        .find_map(|e| match e {
            AgentEvent::KvRestore { used, matched_tokens, prompt_tokens, note, .. } => Some((*used, *matched_tokens, *prompt_tokens, note.clone())),
            _ => None,
        })
        .expect("no kv_restore event")
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

// ---------- the session core ----------

/// A session started through `Sessions` stores its spec, saves its KV cache
/// and, resumed by a fresh `Sessions` (another process, another face), runs
/// with the stored spec and loads the cache; a changed model file or context
/// is said and the history decoded again.
#[tokio::test]
async fn sessions_store_the_spec_save_the_cache_and_resume_with_both() {
    use mf_agent::{EngineSpec, KvMiss, Resume, RunSpec, SessionStatus, Sessions};
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    std::fs::write(&model, b"GGUF test model").unwrap();
    let mut spec = RunSpec::default();
    spec.engine = EngineSpec::Llama { model: model.clone(), threads: Some(1), gpu: false, tool_grammar: false };
    spec.context = 4096;
    spec.agent = settings(StrategyKind::V1);
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
    assert!(changed.events.iter().any(|e| matches!(e, AgentEvent::KvRestore { used: false, miss: Some(KvMiss::ModelChanged), .. })), "{:?}", kv_restore(&changed));
    assert_eq!(first_round_kv(&changed).reused, 0);
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
    let script: Vec<Reply> = (0..30).map(|i| Reply::Call("lookup", json!({"key": format!("k{i}"), "pad": "p".repeat(600)}))).chain([Reply::Text("k1 is 1001.")]).collect();
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
