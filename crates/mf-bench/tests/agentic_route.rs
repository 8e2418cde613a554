//! The route-driven driver and the world server's death, through the real
//! `mf_agent` loop and the real world server on 127.0.0.1, with a scripted
//! model (token counts of one per four characters): the calls come from the
//! world's route, the summaries and the answer from the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mf_bench::agentic::{self, AgenticConfig, AgenticStrategy, Driver, Retention};
use mf_forgetting::StrategyKind;
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvStats, ModelInfo, Role, StopReason, TokenSink, ToolSpec, Usage};

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

const ANSWER: &str = "Yusuf Adeyemi commands INC-7702; 8,841 subscribers were notified.";
const SUMMARY: &str = "- Yusuf Adeyemi commands INC-7702.\n- 8,841 status subscribers were notified.\n- edge-platform owns the edge gateway.";

/// A model that never picks a call: it summarises, and answers when asked to stop.
struct Scripted {
    ctx: u32,
    requests: Mutex<Vec<GenerateRequest>>,
}

fn tokens(messages: &[ChatMessage], tools: &[ToolSpec]) -> u32 {
    let m: usize = messages
        .iter()
        .map(|m| 4 + (m.content.chars().count() + m.tool_calls.iter().map(|c| c.arguments.to_string().len() + c.name.len()).sum::<usize>()).div_ceil(4))
        .sum();
    u32::try_from(m).unwrap() + 20 * u32::try_from(tools.len()).unwrap()
}

impl Backend for Scripted {
    fn generate<'a>(&'a self, request: GenerateRequest, _sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let prompt = tokens(&request.messages, &request.tools);
            assert!(prompt + request.sampling.max_tokens <= self.ctx, "prompt {prompt} over the window {}", self.ctx);
            let last = request.messages.last().map(|m| m.content.clone()).unwrap_or_default();
            assert!(!agentic::driver::is_investigation_turn(&request), "an investigation turn reached the model: the route driver should have answered it");
            let text = if last.starts_with("Stop calling tools") { ANSWER } else { SUMMARY };
            self.requests.lock().unwrap().push(request);
            Ok(Generation {
                raw_text: text.into(),
                content: text.into(),
                thinking: None,
                tool_calls: Vec::new(),
                tool_parse_error: None,
                stop_reason: StopReason::EndOfTurn,
                usage: Usage { kv: KvStats { prompt_tokens: prompt, decoded: prompt, ..KvStats::default() }, completion_tokens: 20, thinking_tokens: 0 },
            })
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(tokens(messages, tools)) })
    }

    fn context_size(&self) -> u32 {
        self.ctx
    }

    fn model_info(&self) -> ModelInfo {
        ModelInfo {
            name: "scripted".into(),
            backend: "test".into(),
            architecture: None,
            context_size: self.ctx,
            context_train: None,
            parameters: None,
            tool_format: None,
        }
    }
}

fn world(id: &str) -> agentic::World {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/agentic");
    agentic::load_worlds(&root, &[id.to_owned()]).unwrap().remove(0).world
}

fn run(ctx: u32, strategy: AgenticStrategy, port: u16, dies_after: Option<usize>) -> (agentic::AgenticRun, Arc<Scripted>) {
    let w = world("cdn-purge-storm");
    let model = Arc::new(Scripted { ctx, requests: Mutex::new(Vec::new()) });
    let cfg =
        AgenticConfig { strategies: vec![strategy], reserve: 128, port, driver: Driver::Route, server_dies_after: dies_after, ..AgenticConfig::default() };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let r = rt.block_on(agentic::run_world(model.clone(), &w, strategy, &cfg)).unwrap();
    (r, model)
}

#[test]
fn the_route_is_replayed_call_by_call_and_the_model_answers() {
    let w = world("cdn-purge-storm");
    assert!(w.route.len() >= 12, "a long world");
    let (r, model) = run(32_000, AgenticStrategy::Strategy(StrategyKind::None), 18961, None);
    assert_eq!(r.driver, "route");
    assert_eq!(r.requests, w.route, "the calls are the route's, in order");
    assert_eq!((r.route_fetched, r.route_total, r.tool_calls, r.tool_errors), (14, 14, 14, 0));
    assert_eq!(r.rounds, 15, "14 calls, then the answer");
    assert_eq!(r.exit, "final_answer");
    assert_eq!(r.answer.as_deref(), Some(ANSWER));
    assert_eq!(r.compactions, 0);
    // The model was asked once, for the answer, without tools, after the last result.
    let reqs = model.requests.lock().unwrap();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].tools.is_empty());
    assert_eq!(reqs[0].messages.iter().filter(|m| m.role == Role::Tool).count(), 14);
    // Scored: two facts in the answer, every fact fetched and still verbatim in the context.
    assert_eq!((r.facts_held, r.facts_fetched, r.facts_verbatim, r.facts_in_summary), (2, 13, 13, 0));
    assert!(!r.confabulated, "{:?}", r.unsupported_numbers);
}

#[test]
fn without_compaction_the_window_fills_and_with_it_the_route_is_finished() {
    let (none, _) = run(1600, AgenticStrategy::Strategy(StrategyKind::None), 18962, None);
    assert_eq!(none.exit, "context_exhausted", "{none:?}");
    assert!(none.rounds < 8 && none.route_fetched < none.route_total, "{} rounds", none.rounds);

    let (v1, model) = run(1600, AgenticStrategy::Strategy(StrategyKind::V1), 18963, None);
    assert_eq!(v1.route_fetched, v1.route_total, "{v1:?}");
    assert!(v1.compactions_done >= 2, "{} compactions done", v1.compactions_done);
    assert_eq!(v1.compactions, v1.compactions_done + v1.compactions_refused + v1.compactions_failed);
    assert_eq!(v1.exit, "final_answer");
    // The early fact (the commander, call 1) lives on through the summaries only.
    let commander = v1.probes.iter().find(|p| p.probe == "commander").unwrap();
    assert_eq!(commander.retention, Some(Retention::Summary));
    assert_eq!(commander.score, 3);
    // The last call's fact is still verbatim.
    let oncall = v1.probes.iter().find(|p| p.probe == "oncall").unwrap();
    assert_eq!(oncall.retention, Some(Retention::Verbatim));
    // A fact that no summary kept is gone.
    let cost = v1.probes.iter().find(|p| p.probe == "region").unwrap();
    assert_eq!(cost.retention, Some(Retention::Gone));
    assert!(model.requests.lock().unwrap().len() > v1.compactions_done as usize, "a summary per compaction, then the answer");
    assert!(v1.peak_use() < 1.0);
}

#[test]
fn a_world_server_that_dies_ends_the_run_with_a_typed_reason() {
    let (r, _) = run(32_000, AgenticStrategy::Strategy(StrategyKind::None), 18964, Some(3));
    assert_eq!(r.exit, agentic::WORLD_SERVER_DIED, "{r:?}");
    assert_eq!(r.requests.len(), 3);
    assert!(r.rounds <= 5, "{} rounds", r.rounds);
    assert_eq!(r.answer, None);
    assert!(r.exit_detail.contains("3 request"), "{}", r.exit_detail);
    // The results of such a run are a valid results file.
    let result = agentic::AgenticResult {
        model: "scripted".into(),
        summary: agentic::summarise(std::slice::from_ref(&r), &[AgenticStrategy::Strategy(StrategyKind::None)]),
        runs: vec![r],
        likelihood: None,
        settings: agentic::AgenticSettings {
            backend: "test".into(),
            driver: "route".into(),
            n_ctx: 32_000,
            reserve: 128,
            ratio: 0.75,
            threshold: 23_904,
            max_result_chars: 1200,
            summary_max_tokens: 160,
            max_rounds: 24,
            sampling: "scripted".into(),
            tool_grammar: false,
            worlds: vec!["cdn-purge-storm".into()],
            worlds_dir: "scenarios/agentic".into(),
            score_ctx: None,
        },
        wall_s: 1.0,
    };
    agentic::validate_agentic(&serde_json::to_value(vec![result.clone()]).unwrap()).unwrap();
    let md = agentic::markdown(&[result]);
    assert!(md.contains("route-driven") && md.contains("world_server_died"), "{md}");
}

#[test]
fn every_world_of_the_repository_loads_and_long_ones_need_twelve_calls() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/agentic");
    let worlds = agentic::load_worlds(&root, &[]).unwrap();
    let long: Vec<_> = worlds.iter().filter(|w| w.world.route.len() >= 12).collect();
    assert!(long.len() >= 4, "{} long worlds", long.len());
    for w in long {
        let sources: std::collections::BTreeSet<&str> = w.world.probes.iter().map(|p| p.source.as_str()).collect();
        assert!(sources.len() >= 12, "{}: facts from {} endpoints", w.world.id, sources.len());
        assert!(w.world.probes.iter().any(|p| p.kind == agentic::ProbeKind::Contradiction), "{}", w.world.id);
        assert!(w.world.probes.iter().any(|p| p.kind == agentic::ProbeKind::Order), "{}", w.world.id);
        assert!(w.world.probes.iter().filter(|p| !p.wrong.is_empty()).count() >= 3, "{}", w.world.id);
        assert!(sources.iter().all(|s| w.world.route.iter().any(|r| r == s)), "{}: a source off the route", w.world.id);
    }
}
