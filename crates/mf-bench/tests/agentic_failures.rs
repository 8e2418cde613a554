//! A run that fails does not stop the others: `agentic::run_all` over three
//! worlds with a scripted model that answers at once, except on one world,
//! where it fails as a backend does (a decode error). The other runs
//! complete, the failed one is a `failed` row of the results, with its
//! error's kind and message, in both tables.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use mf_bench::agentic::{self, AgenticConfig, AgenticStrategy, Driver, FAILED};
use mf_forgetting::StrategyKind;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, InferenceError, KvStats, ModelInfo, Role, StopReason, TokenSink, ToolSpec, Usage,
};

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The world whose run fails.
const BROKEN: &str = "runbook-disk";

/// A model that answers at once, except on the broken world's question,
/// where it fails as a backend does (a decode error).
struct Scripted;

fn tokens(messages: &[ChatMessage], tools: &[ToolSpec]) -> u32 {
    let m: usize =
        messages.iter().map(|m| 4 + (m.content.chars().count() + m.tool_calls.iter().map(|c| c.arguments.to_string().len()).sum::<usize>()).div_ceil(4)).sum();
    u32::try_from(m).unwrap() + 20 * u32::try_from(tools.len()).unwrap()
}

impl Backend for Scripted {
    fn generate<'a>(&'a self, request: GenerateRequest, _sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let question = request.messages.iter().find(|m| m.role == Role::User).map(|m| m.content.clone()).unwrap_or_default();
            if question.contains("/disks/page1.json") {
                return Err(InferenceError::Decode("the model crashed on purpose".into()));
            }
            let prompt = tokens(&request.messages, &request.tools);
            Ok(Generation {
                raw_text: "The answer.".into(),
                content: "The answer.".into(),
                thinking: None,
                tool_calls: Vec::new(),
                tool_parse_error: None,
                stop_reason: StopReason::EndOfTurn,
                usage: Usage { kv: KvStats { prompt_tokens: prompt, decoded: prompt, ..KvStats::default() }, completion_tokens: 3, thinking_tokens: 0 },
            })
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(tokens(messages, tools)) })
    }

    fn context_size(&self) -> u32 {
        32_000
    }

    fn model_info(&self) -> ModelInfo {
        ModelInfo {
            name: "scripted".into(),
            backend: "test".into(),
            architecture: None,
            context_size: 32_000,
            context_train: None,
            parameters: None,
            tool_format: None,
        }
    }
}

#[test]
fn a_failed_run_is_a_failed_row_and_the_runs_after_it_run() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/agentic");
    let ids = ["pipeline-crawl", BROKEN, "checkout-incident"];
    let loaded = agentic::load_worlds(&root, &ids.map(str::to_owned)).unwrap();
    let mut worlds: Vec<&agentic::World> = loaded.iter().map(|lw| &lw.world).collect();
    // In the order above: the broken world in the middle.
    worlds.sort_by_key(|w| ids.iter().position(|id| *id == w.id));
    assert_eq!(worlds.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), ids);
    let strategies = vec![AgenticStrategy::Strategy(StrategyKind::None), AgenticStrategy::Strategy(StrategyKind::V1)];
    let cfg = AgenticConfig { strategies: strategies.clone(), reserve: 128, port: 18971, driver: Driver::Model, ..AgenticConfig::default() };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut seen = Vec::new();
    let runs = agentic::run_all::<std::convert::Infallible>(&rt, &worlds, &cfg, &mut || Ok(Arc::new(Scripted) as Arc<dyn Backend>), None, &mut |runs| {
        seen.push(runs.len());
        Ok(())
    })
    .unwrap();

    assert_eq!(seen, vec![1, 2, 3, 4, 5, 6], "the results are kept after every run, the failed ones included");
    assert_eq!(runs.len(), 6);
    for r in &runs {
        if r.world == BROKEN {
            assert_eq!(r.exit, FAILED, "{r:?}");
            let f = r.failure.as_ref().unwrap();
            assert_eq!(f.kind, "model", "a model failure, not a setting: {f:?}");
            assert!(f.message.contains("the model crashed on purpose"), "{}", f.message);
            assert!(!f.message.contains("invalid setting"), "{}", f.message);
        } else {
            assert!(r.failure.is_none(), "{r:?}");
            assert_eq!((r.exit.as_str(), r.rounds, r.answer.as_deref()), ("final_answer", 1, Some("The answer.")), "{r:?}");
        }
    }

    // The results file holds the failed runs and is valid; both tables show them.
    let result = agentic::AgenticResult {
        model: "scripted".into(),
        summary: agentic::summarise(&runs, &strategies),
        runs: runs.clone(),
        likelihood: None,
        settings: agentic::AgenticSettings {
            backend: "test".into(),
            driver: "model".into(),
            n_ctx: 32_000,
            reserve: 128,
            ratio: 0.75,
            threshold: 23_904,
            max_result_chars: 1200,
            summary_max_tokens: 160,
            max_rounds: 24,
            sampling: "scripted".into(),
            tool_grammar: false,
            worlds: ids.map(str::to_owned).to_vec(),
            worlds_dir: "scenarios/agentic".into(),
            score_ctx: None,
        },
        wall_s: 0.0,
    };
    for s in &result.summary {
        assert_eq!((s.runs, s.failed), (2, 1), "{s:?}");
        assert_eq!(s.answered, 2, "the failed run counts in no figure: {s:?}");
    }
    let json = serde_json::to_string(&vec![result.clone()]).unwrap();
    agentic::validate_agentic(&serde_json::from_str(&json).unwrap()).unwrap();
    let back: Vec<agentic::AgenticResult> = serde_json::from_str(&json).unwrap();
    assert_eq!(back[0], result);
    let md = agentic::markdown(&back);
    assert_eq!(md.matches("**failed ×1**").count(), 2, "one per strategy row of the summary table:\n{md}");
    let failed_rows: Vec<&str> = md.lines().filter(|l| l.starts_with(&format!("| {BROKEN} |"))).collect();
    assert_eq!(failed_rows.len(), 2, "{md}");
    assert!(failed_rows.iter().all(|l| l.contains("**failed** (model)") && l.contains("the model crashed on purpose")), "{failed_rows:?}");
}
