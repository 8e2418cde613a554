//! The loop owns the window, whatever it holds: a property test over random
//! tool-result sizes (tiny to larger than the window), every strategy and
//! several budgets, on a backend that counts like a real chat template (the
//! whole prompt is not the sum of its messages counted alone) and refuses a
//! prompt that does not fit, as the llama.cpp worker does.
//!
//! Every run ends with a typed exit (never an error), no call is sent with
//! more than `C − G` prompt tokens, and every compaction ends at or under
//! its target, or says it was refused, or is followed by another (or by
//! the end of the run) before the round is sent.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::{Agent, AgentEvent, AgentSettings, NoAnswer, ToolFailure, ToolReply, ToolRunner, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, InferenceError, KvStats, ModelInfo, StopReason, TokenSink, ToolCall, ToolSpec, Usage,
};
use mf_tools::Requirement;
use mf_tools::policy::Approval;
use proptest::prelude::*;
use serde_json::json;

use crate::scripted::kind_of;

/// Tokens of a text: one per 4 characters.
fn text_tokens(s: &str) -> u32 {
    s.chars().count().div_ceil(4) as u32
}

/// A chat template's count: a BOS token; a tool block (header, then each
/// tool's name, description and schema) when tools are offered; per message
/// a role header, the content and calls, an end-of-turn marker; and the
/// generation prompt. A message counted alone pays the BOS and the
/// generation prompt again, as a real template's count does.
/// `summary_glue`: tokens the template adds around a compaction summary
/// inside a conversation, which the summary counted alone does not show.
fn template_tokens(messages: &[ChatMessage], tools: &[ToolSpec], summary_glue: u32) -> u32 {
    let mut n = 1;
    if !tools.is_empty() {
        n += 12;
        n += tools.iter().map(|t| 6 + text_tokens(&t.name) + text_tokens(&t.description) + text_tokens(&t.parameters.to_string())).sum::<u32>();
    }
    for m in messages {
        let calls: String = m.tool_calls.iter().map(|c| format!("{{\"name\": \"{}\", \"arguments\": {}}}", c.name, c.arguments)).collect();
        n += 3 + text_tokens(&m.content) + text_tokens(&calls) + 2;
        if messages.len() > 1 && m.content.starts_with("[Summary of the prior investigation") {
            n += summary_glue;
        }
    }
    n + 3
}

/// One call the loop made: its purpose, prompt tokens, reply limit.
#[derive(Debug, Clone)]
struct Sent {
    kind: &'static str,
    prompt: u32,
    max_tokens: u32,
}

/// The model: a round calls `lookup` for the next key until the plan is
/// done, then answers; a summary is `summary_tokens` long (cut at the
/// request's limit); probes and the closing answer name a value.
///
/// When the plan is done, the answer turn's prompt holds `unseen` tokens
/// more than the loop counted: what a backend adds to the request it is
/// given (the benchmark's route driver asks for the answer with a request
/// of its own). The loop cannot see them; the model refuses the prompt if
/// they take it over the window.
struct Templated {
    ctx: u32,
    calls: u32,
    next: Mutex<u32>,
    summary_tokens: u32,
    unseen: u32,
    summary_glue: u32,
    sent: Mutex<Vec<Sent>>,
}

fn generation(text: String, calls: Vec<ToolCall>, prompt: u32, completion: u32) -> Generation {
    Generation {
        raw_text: text.clone(),
        content: text,
        thinking: None,
        tool_calls: calls,
        tool_parse_error: None,
        stop_reason: StopReason::EndOfTurn,
        usage: Usage { kv: KvStats { prompt_tokens: prompt, decoded: prompt, ..KvStats::default() }, completion_tokens: completion, thinking_tokens: 0 },
    }
}

impl Backend for Templated {
    fn generate<'a>(&'a self, request: GenerateRequest, _sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let prompt = template_tokens(&request.messages, &request.tools, self.summary_glue);
            let kind = kind_of(&request);
            let max = request.sampling.max_tokens;
            self.sent.lock().unwrap().push(Sent { kind, prompt, max_tokens: max });
            let unseen = if kind == "round" && *self.next.lock().unwrap() >= self.calls { self.unseen } else { 0 };
            // What the llama.cpp worker does with a prompt that does not fit.
            if prompt + unseen + max > self.ctx {
                return Err(InferenceError::PromptTooLong { prompt_tokens: prompt + unseen, reserve: max, context_size: self.ctx });
            }
            Ok(match kind {
                "summary" => {
                    let n = self.summary_tokens.min(max) as usize;
                    let text: String = "- key k1 is value 1001; ".chars().cycle().take(n * 4).collect();
                    generation(text, vec![], prompt, n as u32)
                }
                "probe" => generation("The value is 1001 (key k1).".into(), vec![], prompt, 8),
                "closing" => generation("closing: value 1001".into(), vec![], prompt, 6),
                _ => {
                    let mut next = self.next.lock().unwrap();
                    if *next >= self.calls {
                        generation("The value of k1 is 1001.".into(), vec![], prompt, 8)
                    } else {
                        *next += 1;
                        let call = ToolCall { id: String::new(), name: "lookup".into(), arguments: json!({"key": format!("k{next}")}) };
                        generation(String::new(), vec![call], prompt, 12)
                    }
                }
            })
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(template_tokens(messages, tools, self.summary_glue)) })
    }

    fn context_size(&self) -> u32 {
        self.ctx
    }

    fn model_info(&self) -> ModelInfo {
        ModelInfo {
            name: "templated".into(),
            backend: "test".into(),
            architecture: None,
            context_size: self.ctx,
            context_train: None,
            parameters: None,
            tool_format: None,
        }
    }
}

/// `lookup` of key `kN` returns a result of `sizes[N − 1]` characters.
struct Sized {
    sizes: Vec<usize>,
}

impl ToolRunner for Sized {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![ToolSpec { name: "lookup".into(), description: "look a key up".into(), parameters: json!({"type": "object"}) }]
    }
    fn requirement(&self, _call_id: &str, _name: &str, _args_json: &str) -> Result<Requirement, ToolFailure> {
        Ok(Requirement::Auto)
    }
    fn run<'a>(
        &'a self,
        _call_id: &'a str,
        _name: &'a str,
        args_json: &'a str,
        _approval: Option<&'a Approval>,
    ) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            let v: serde_json::Value = serde_json::from_str(args_json).unwrap();
            let k = v["key"].as_str().unwrap_or("k0");
            let n: usize = k.trim_start_matches('k').parse().unwrap_or(0);
            let size = self.sizes.get(n.saturating_sub(1)).copied().unwrap_or(10);
            let head = format!("key {k} is value {}. ", 1000 + n);
            let filler: String = "the record says nothing else of note; ".chars().cycle().take(size.saturating_sub(head.len())).collect();
            Ok(ToolReply { content: format!("{head}{filler}"), truncated: None })
        })
    }
}

/// A tool-result size: tiny, middling, about the window, or well over it.
fn result_size(ctx: u32) -> impl Strategy<Value = usize> {
    let chars = ctx as usize * 4;
    prop_oneof![3 => 5usize..80, 3 => 80usize..800, 2 => (chars / 4)..chars, 1 => chars..(chars * 3)]
}

#[derive(Debug, Clone)]
struct Case {
    strategy: StrategyKind,
    ctx: u32,
    reserve: u32,
    ratio: f64,
    summary_max: u32,
    summary_tokens: u32,
    unseen: u32,
    summary_glue: u32,
    sizes: Vec<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    let strategy = prop::sample::select(StrategyKind::ALL.to_vec());
    let budget = prop::sample::select(vec![(512u32, 64u32), (768, 128), (1024, 192), (2048, 192), (1024, 256)]);
    let ratio = prop::sample::select(vec![0.5, 0.75, 0.9]);
    let unseen = prop::sample::select(vec![0u32, 0, 0, 40, 400]);
    let summary_glue = prop::sample::select(vec![0u32, 0, 0, 60, 250]);
    (strategy, budget, ratio, prop::sample::select(vec![64u32, 160, 256]), 8u32..400, unseen, summary_glue).prop_flat_map(
        |(strategy, (ctx, reserve), ratio, summary_max, summary_tokens, unseen, summary_glue)| {
            prop::collection::vec(result_size(ctx), 1..10).prop_map(move |sizes| Case {
                strategy,
                ctx,
                reserve,
                ratio,
                summary_max,
                summary_tokens,
                unseen,
                summary_glue,
                sizes,
            })
        },
    )
}

/// Runs one case; `Err` names the property it broke.
fn check(rt: &tokio::runtime::Runtime, c: &Case) -> Result<VecSink, String> {
    let backend = Arc::new(Templated {
        ctx: c.ctx,
        calls: c.sizes.len() as u32,
        next: Mutex::new(0),
        summary_tokens: c.summary_tokens,
        unseen: c.unseen,
        summary_glue: c.summary_glue,
        sent: Mutex::new(Vec::new()),
    });
    let mut settings = AgentSettings {
        strategy: c.strategy,
        reserve: c.reserve,
        ratio: c.ratio,
        system_prompt: "You investigate.".into(),
        max_result_chars: 1 << 20,
        ..AgentSettings::default()
    };
    settings.plan.sampling.max_tokens = c.summary_max;
    let mut agent = Agent::new(backend.clone(), Arc::new(Sized { sizes: c.sizes.clone() }), Arc::new(NoAnswer), settings).map_err(|e| e.to_string())?;
    let threshold = agent.threshold();
    let room = c.ctx - c.reserve;
    let mut sink = VecSink::default();
    let out = rt.block_on(agent.run("What is the value of k1?", &mut sink)).map_err(|e| format!("the loop ended on an error: {e}"))?;
    if !matches!(sink.events.last(), Some(AgentEvent::Exit { reason, .. }) if *reason == out.reason) {
        return Err(format!("the last event is not the exit {:?}", out.reason));
    }
    for s in backend.sent.lock().unwrap().iter() {
        if s.prompt > room {
            return Err(format!("a {} call was sent with {} prompt tokens (max_tokens {}), over C − G = {room}", s.kind, s.prompt, s.max_tokens));
        }
    }
    for (i, e) in sink.events.iter().enumerate() {
        // A plan whose target could be above C − G is a bug of the loop.
        if let AgentEvent::CompactionStarted { round, plan, .. } = e {
            let b: mf_forgetting::Budget = serde_json::from_value(plan["budget"].clone()).unwrap();
            if b.context - b.reserve > room as usize || b.threshold() > room as usize {
                return Err(format!("the plan of round {round} was made for {b:?}, over C − G = {room}"));
            }
        }
        if let AgentEvent::CompactionFinished { round, tokens_after, report, notes, .. } = e {
            let refused = ["kept_original", "declined"].iter().any(|k| report.get(*k).is_some_and(|v| !v.is_null()));
            // The target: the threshold, or C − G when the compaction said
            // the pinned and recent zones leave no room under the threshold.
            let within = report.get("within_budget").and_then(serde_json::Value::as_bool).unwrap_or(false);
            let target = if within { threshold } else { room };
            // Over its target (the model counts the whole prompt, the plan its
            // messages): the loop compacts again, or ends, before it sends the round.
            let sent_anyway = || {
                for e in &sink.events[i + 1..] {
                    match e {
                        AgentEvent::CompactionStarted { round: r, .. } | AgentEvent::CompactionFailed { round: r, .. } if r == round => return false,
                        AgentEvent::Kv { purpose: mf_agent::Purpose::Round, round: r, .. } if r == round => return true,
                        AgentEvent::Round { .. } => return false,
                        _ => {}
                    }
                }
                false
            };
            if !refused && *tokens_after > target && sent_anyway() {
                return Err(format!("the compaction of round {round} ended at {tokens_after} tokens, over its target {target}, and the round was sent"));
            }
            // What the trace shows of it: the target and the tokens after, or that it was refused.
            let said = if refused { "refused: ".to_owned() } else { format!("target {target} tokens (") };
            if !notes.iter().any(|n| n.starts_with(&said) && n.contains(&format!("{tokens_after}"))) {
                return Err(format!("the compaction of round {round} does not say `{said}…{tokens_after}…` in its notes: {notes:?}"));
            }
        }
    }
    Ok(sink)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_run_ends_with_a_typed_exit_and_no_call_overflows_the_window(c in case()) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        if let Err(why) = check(&rt, &c) {
            prop_assert!(false, "{why}\n{c:?}");
        }
    }
}

/// A compaction that leaves the prompt over `C − G` (here a template that
/// wraps a summary in more tokens than the summary counted alone) is
/// followed by another in the same round, before the round is sent.
#[test]
fn a_compaction_that_leaves_the_prompt_over_the_window_is_followed_by_another() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let c = Case {
        strategy: StrategyKind::V1,
        ctx: 1024,
        reserve: 128,
        ratio: 0.75,
        summary_max: 160,
        summary_tokens: 120,
        unseen: 0,
        summary_glue: 250,
        sizes: vec![700; 8],
    };
    let sink = check(&rt, &c).unwrap();
    let mut per_round = std::collections::BTreeMap::new();
    for e in &sink.events {
        if let AgentEvent::CompactionStarted { round, .. } = e {
            *per_round.entry(*round).or_insert(0) += 1;
        }
    }
    assert!(per_round.values().any(|n| *n > 1), "no round compacted twice: {per_round:?}");
}
