//! The benchmark's compaction conditions send the very requests the app's
//! loop sends: for the same history, the summary pass (and v2.1's
//! withholding test) rendered through a chat template is the same text,
//! byte for byte, with the same tools and sampling, whether it comes from
//! `mf_agent::compact::CompactionJob` (the loop) or from
//! `mf_bench::condition::compact` (the benchmark).
//!
//! The backend is a recording fake: it renders each request with the
//! built-in ChatML template, counts one token per 4 bytes of the rendered
//! text, and answers from a script (a bullet for a summary, a sentence with
//! a number for a probe). Two windows: a wide one where the summary is an
//! append to the live history, and a narrow one where it falls back to the
//! pinned prefix with its log cut.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::compact::{CompactionJob, DeltaSource, ModelCounter, SummaryPass};
use mf_bench::condition::{Condition, compact};
use mf_bench::{Model, load};
use mf_forgetting::{Budget, Message, PlanConfig, StrategyKind};
use mf_inference::template::{ChatTemplate, RenderOptions};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvStats, ModelInfo, StopReason, TokenSink, ToolSpec, Usage};
use pretty_assertions::assert_eq;

/// One generation as the backend saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    kind: &'static str,
    rendered: String,
    request: GenerateRequest,
}

struct Recording {
    template: ChatTemplate,
    ctx: u32,
    seen: Mutex<Vec<Seen>>,
}

impl Recording {
    fn new(ctx: u32) -> Arc<Self> {
        Arc::new(Recording { template: ChatTemplate::for_model(None, None, "", "").unwrap(), ctx, seen: Mutex::new(Vec::new()) })
    }

    fn render(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> mf_inference::Result<String> {
        Ok(self.template.render(messages, tools, RenderOptions::default())?.text)
    }

    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Backend for Recording {
    fn generate<'a>(&'a self, request: GenerateRequest, _sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let rendered = self.render(&request.messages, &request.tools)?;
            let kind = if rendered.contains("You compress the log") { "summary" } else { "probe" };
            let text = if kind == "summary" { "- checkout failed on build 4817 (HTTP 503)" } else { "Build 4817 on us-east-1." };
            let prompt_tokens = rendered.len().div_ceil(4) as u32;
            self.seen.lock().unwrap().push(Seen { kind, rendered, request });
            Ok(Generation {
                raw_text: text.into(),
                content: text.into(),
                thinking: None,
                tool_calls: Vec::new(),
                tool_parse_error: None,
                stop_reason: StopReason::EndOfTurn,
                usage: Usage { kv: KvStats { prompt_tokens, ..KvStats::default() }, completion_tokens: 12, thinking_tokens: 0 },
            })
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(self.render(messages, tools)?.len().div_ceil(4) as u32) })
    }

    fn context_size(&self) -> u32 {
        self.ctx
    }

    fn model_info(&self) -> ModelInfo {
        ModelInfo {
            name: "recording".into(),
            backend: "test".into(),
            architecture: None,
            context_size: self.ctx,
            context_train: None,
            parameters: None,
            tool_format: None,
        }
    }
}

fn history(id: &str) -> Vec<Message> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction");
    load::load_dir(&dir, &[id.to_owned()]).unwrap().into_iter().find(|s| s.scenario.id == id).unwrap().scenario.messages
}

/// What the loop sends when it compacts `history` under `condition`'s strategy.
fn agent_requests(backend: &Arc<Recording>, history: &[Message], condition: Condition, budget: Budget, config: &PlanConfig) -> Vec<Seen> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dyn_backend: Arc<dyn Backend> = backend.clone();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let job = CompactionJob {
        backend: dyn_backend.clone(),
        counter: Arc::new(ModelCounter::new(dyn_backend, Vec::new())),
        tools: Vec::new(),
        history: history.to_vec(),
        strategy: condition.strategy(),
        budget,
        config: config.clone(),
        delta: DeltaSource::Model,
        summary_pass: SummaryPass::PinnedPrefix,
        cancel: CancelToken::new(),
        events: tx,
        round: 3,
        tokens_before: 0,
        by_hand: None,
        summariser: None,
    };
    let run = rt.block_on(job.run()).unwrap();
    run.result.unwrap();
    backend.take()
}

/// What the benchmark sends for the same history and condition.
fn bench_requests(backend: &Arc<Recording>, history: &[Message], condition: Condition, budget: Budget, config: &PlanConfig) -> Vec<Seen> {
    let model = Model::new(backend.clone()).unwrap();
    compact(&model, condition, history, &budget, config, mf_agent::model::PROBE_MAX_TOKENS, DeltaSource::Model).unwrap();
    backend.take()
}

fn assert_same(ctx: u32, scenario: &str, expect_live: bool) {
    let h = history(scenario);
    let budget = Budget { context: 900, reserve: 128, ratio: 0.75, recent: 2 };
    let config = PlanConfig::default();
    for condition in [Condition::of(StrategyKind::V1), Condition::of(StrategyKind::V2), Condition::V21] {
        let backend = Recording::new(ctx);
        let agent = agent_requests(&backend, &h, condition, budget, &config);
        let bench = bench_requests(&backend, &h, condition, budget, &config);
        let summaries = agent.iter().filter(|s| s.kind == "summary").count();
        if condition == Condition::V21 {
            // v2.1 may keep or drop every unit (no summary); its withholding test always runs.
            assert!(summaries <= 1, "{scenario} v2.1: {summaries} summary passes");
            assert!(agent.iter().filter(|s| s.kind == "probe").count() > 1, "{scenario}: v2.1 ran no withholding test");
        } else {
            assert_eq!(summaries, 1, "{scenario} {condition}: one summary pass expected, saw {summaries}");
        }
        if let Some(summary) = agent.iter().find(|s| s.kind == "summary") {
            let live = summary.request.messages.len() > h.len();
            assert_eq!(live, expect_live, "{scenario} {condition} at n_ctx {ctx}: {} messages in the summary request", summary.request.messages.len());
        }
        // Same requests, in the same order: rendered text, tools, sampling.
        assert_eq!(bench, agent, "{scenario} {condition} at n_ctx {ctx}");
    }
}

#[test]
fn the_benchmark_sends_the_apps_summary_request_when_the_live_history_fits() {
    assert_same(8192, "aggregation-short", true);
    assert_same(8192, "lookup-short", true);
}

#[test]
fn the_benchmark_sends_the_apps_pinned_prefix_request_when_it_does_not() {
    // Window under the live history plus the request, over the pinned zone plus a cut request.
    let h = history("aggregation-short");
    let backend = Recording::new(100_000);
    let live = backend.render(&mf_agent::model::chat_history(&h), &[]).unwrap().len().div_ceil(4) as u32;
    assert_same(live + 200, "aggregation-short", false);
}
