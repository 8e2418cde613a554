//! CI smoke runs on SmolLM2-135M (embedded llama.cpp): two short scenarios,
//! every condition and every scorer, checked end to end against the schema; and
//! a tiny live agentic run (one world, two strategies, a small context).
//! Both run in one test binary (one link), side by side on the CI's cores.
//! Skipped with a note when the model file is absent (`make models` fetches it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use mf_bench::agentic::{self, AgenticConfig, AgenticStrategy};
use mf_bench::{Condition, Model, RunConfig, Scorers, Worker, load, report, run_suite_parallel, schema};
use mf_forgetting::StrategyKind;
use mf_inference::{LlamaConfig, LlamaSession};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn smoke_two_scenarios_smollm2_every_scorer() {
    let path = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        // The test command sets MF_REQUIRE_MODELS=1: there a missing model fails the test by name.
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", path.display());
        eprintln!("skipped: {} is missing (run `make models`)", path.display());
        return;
    }
    // Two scenarios on two workers: each worker compacts and answers one.
    let scenarios = load::load_dir(&root().join("scenarios/compaction"), &["lookup-short".to_owned(), "contradiction-short".to_owned()]).unwrap();
    assert_eq!(scenarios.len(), 2);
    // Two one-thread sessions side by side (the CLI's default on 2 cores).
    let workers: Vec<Worker> = (0..2)
        .map(|_| {
            let mut cfg = LlamaConfig::new(&path).with_n_ctx(2048);
            cfg.n_threads = Some(1);
            Worker { model: Model::llama(Arc::new(LlamaSession::load(cfg).unwrap())).unwrap(), judge: None }
        })
        .collect();
    // Shorter summaries than the method's 256 tokens keep CI in minutes on 2 cores.
    let mut plan = mf_forgetting::PlanConfig::default();
    plan.sampling.max_tokens = 96;
    let cfg = RunConfig {
        plan,
        conditions: Condition::ALL.to_vec(),
        scorers: Scorers { keyword: true, judge: true, likelihood: true },
        answer_max_tokens: 48,
        evaluator_max_tokens: 24,
        scenarios_dir: "scenarios/compaction".to_owned(),
        ..RunConfig::default()
    };
    let mut steps = Vec::new();
    let r = run_suite_parallel(workers, &scenarios, &cfg, &mut |p| steps.push((p.done, p.total))).unwrap();
    assert_eq!(r.speed.workers, 2);
    // Results come back in file order whatever worker ran what.
    let order: Vec<&str> = r.compactions.iter().filter(|c| c.condition == "full").map(|c| c.scenario.as_str()).collect();
    assert_eq!(order, ["contradiction-short", "lookup-short"]);
    // An answer is shared only between conditions whose contexts are identical.
    for s in r.scores.iter().filter(|s| s.shared_from.is_some()) {
        let before = |c: &str| r.compactions.iter().find(|x| x.scenario == s.scenario && x.condition == c).map(|x| x.tokens_after);
        assert_eq!(before(&s.condition), before(s.shared_from.as_deref().unwrap()), "{s:?}");
    }

    // Every scenario × probe × condition answered and graded.
    assert_eq!(steps.len(), 12);
    assert_eq!(steps.last(), Some(&(12, 12)));
    assert_eq!(r.scores.len(), 2 * 3 * 6);
    assert!(r.scores.iter().all(|s| s.judge_raw.is_some() && s.score <= 3));
    assert_eq!(r.conditions.len(), 6);
    assert_eq!(r.empty_by_budget, 0, "an answer came back empty because of its token budget");
    assert!(r.scores.iter().all(|s| s.thinking_tokens == 0));

    // Controls beside the run: the keyword scorer must bracket exactly.
    assert_eq!(r.controls.len(), 6 * 4);
    assert_eq!(r.control_brackets.probes, 6);
    assert_eq!(r.control_brackets.keyword["identical"], 3.0);
    assert_eq!(r.control_brackets.keyword["empty"], 0.0);
    assert!(r.control_brackets.keyword["contradiction"] < 3.0);
    assert!(!r.control_brackets.judge.is_empty() || r.control_brackets.judge_unparsed == 24);

    // Compaction really compacted: baseline drops the middle of every scenario.
    for c in r.compactions.iter().filter(|c| c.condition == "baseline") {
        assert!(c.tokens_after < c.tokens_before, "{c:?}");
        assert!(c.dropped > 0, "{c:?}");
    }
    assert!(r.compactions.iter().filter(|c| c.condition == "v2.1").all(|c| c.evaluator_calls > 0));

    // Probes of one scenario × condition share the context in the KV cache.
    let ratio = r.speed.probe_prefill_ratio.unwrap();
    assert!(ratio > 0.0 && ratio <= 0.40, "probe prefill ratio {ratio}");

    // Every row scored by likelihood too; full is the ceiling and baseline the floor by construction.
    assert!(r.scores.iter().filter(|s| s.stop_reason != mf_bench::results::COMPACTION_FAILED).all(|s| s.likelihood.is_some()));
    let l = r.likelihood.as_ref().expect("a likelihood summary");
    assert_eq!(l.conditions.len(), 6);
    assert_eq!(l.probes, 6);
    let full = l.conditions.iter().find(|c| c.condition == "full").unwrap();
    let baseline = l.conditions.iter().find(|c| c.condition == "baseline").unwrap();
    if l.no_signal < l.probes {
        assert!((full.retention.unwrap().value - 1.0).abs() < 1e-9 && baseline.retention.unwrap().value.abs() < 1e-9);
    }
    // The reference is far more likely with the whole history than after a hard truncation.
    let (f, b) = (full.nll_facts.unwrap(), baseline.nll_facts.unwrap());
    assert!(f.value < b.value, "full {f:?} vs baseline {b:?}");

    // The JSON validates against the documented schema, and a broken copy does not.
    let mut doc = serde_json::to_value(vec![r.clone()]).unwrap();
    schema::validate_results(&doc).unwrap();
    doc[0]["scores"][0]["score"] = serde_json::json!(4);
    let e = schema::validate_results(&doc).unwrap_err().to_string();
    assert!(e.contains("$[0].scores[0].score"), "{e}");

    let md = report::markdown(std::slice::from_ref(&r));
    assert!(md.contains("| v2.1 |") && md.contains("Control brackets"), "{md}");
    eprintln!("{md}");
}

#[test]
fn agentic_tiny_run_smollm2_two_strategies() {
    let path = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        // The test command sets MF_REQUIRE_MODELS=1: there a missing model fails the test by name.
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", path.display());
        eprintln!("skipped: {} is missing (run `make models`)", path.display());
        return;
    }
    let worlds = agentic::load_worlds(&root().join("scenarios/agentic"), &["runbook-disk".to_owned()]).unwrap();
    assert_eq!(worlds.len(), 1);
    let mut lc = LlamaConfig::new(&path).with_n_ctx(1024);
    lc.n_threads = Some(1);
    let session = Arc::new(LlamaSession::load(lc).unwrap());
    // A small context so that v2 compacts within a few rounds; a port of its own (the CLI's is 18940).
    let cfg = AgenticConfig {
        strategies: vec![AgenticStrategy::Strategy(StrategyKind::None), AgenticStrategy::Strategy(StrategyKind::V2)],
        reserve: 128,
        max_result_chars: 250,
        summary_max_tokens: 96,
        max_rounds: 4,
        port: 18941,
        ..AgenticConfig::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut runs = Vec::new();
    for &s in &cfg.strategies {
        let r = rt.block_on(agentic::run_world(session.clone(), &worlds[0].world, s, &cfg)).unwrap();
        eprintln!("{} · {}: {} rounds, {} compactions, exit {}, answer {:?}", r.world, r.strategy, r.rounds, r.compactions, r.exit, r.answer);
        runs.push(r);
    }
    let (none, v2) = (&runs[0], &runs[1]);
    // The loop really ran, and every run ended with a reason. (Whether SmolLM2
    // manages a well-formed call is the model's business, not the harness's:
    // the server itself is tested in the unit tests.)
    assert!(runs.iter().all(|r| r.rounds >= 1 && !r.exit.is_empty() && r.endpoints_total == 8));
    assert!(runs.iter().all(|r| r.endpoints_fetched <= r.requests.len() && r.tool_errors <= r.rounds));
    assert!(runs.iter().all(|r| r.prompt_tokens >= r.decoded_tokens && r.prompt_tokens > 0));
    // `none` never compacts; no run ever sent more than the window.
    assert_eq!(none.compactions, 0);
    assert!(runs.iter().all(|r| r.max_prompt_tokens + 128 <= 1024), "{runs:?}");
    assert!(v2.rounds <= 4 && none.rounds <= 4);
    // Facts and confabulation are consistent with the probes.
    for r in &runs {
        assert_eq!(r.probes.len(), 4);
        assert_eq!(r.facts_held, r.probes.iter().filter(|p| p.score == 3).count());
        assert_eq!(r.confabulated, r.answer.is_some() && (r.probes.iter().any(|p| !p.wrong_found.is_empty()) || !r.unsupported_numbers.is_empty()));
    }
    // The likelihood scorer on the world: a second session whose window
    // holds the uncompacted transcript.
    let mut sc = LlamaConfig::new(&path).with_n_ctx(4096);
    sc.n_threads = Some(1);
    let scorer = LlamaSession::load(sc).unwrap();
    rt.block_on(agentic::score_world(&scorer, &worlds[0].world, &mut runs));
    for r in &runs {
        let l = r.likelihood.as_ref().unwrap_or_else(|| panic!("{} was not scored", r.strategy));
        assert!(l.unscored.is_empty(), "{:?}", l.unscored);
        assert_eq!(l.probes.len(), 4);
        assert!(l.floor_messages <= l.ceiling_messages);
        // Ceiling and floor are the world's, the same for every run.
        for (a, b) in runs[0].likelihood.as_ref().unwrap().probes.iter().zip(&l.probes) {
            assert_eq!((&a.full, &a.floor), (&b.full, &b.floor));
        }
        // A run whose context is the ceiling's scores exactly as the ceiling (same prompt, same batch shape).
        let c = r.contexts.as_ref().unwrap();
        if r.strategy == l.ceiling_from && c.context == c.transcript {
            for p in &l.probes {
                assert!((p.context.nll_facts - p.full.nll_facts).abs() < 1e-9, "{p:?}");
            }
        }
    }
    let lsum = agentic::likelihood_summary(&runs, &["none", "v2"]).unwrap();
    let names: Vec<&str> = lsum.conditions.iter().map(|c| c.condition.as_str()).collect();
    assert_eq!(names, ["full", "baseline", "none", "v2"]);
    assert_eq!(lsum.probes, 4);
    let result = agentic::AgenticResult {
        model: "SmolLM2".into(),
        summary: agentic::summarise(&runs, &cfg.strategies),
        runs: runs.clone(),
        likelihood: Some(lsum),
        settings: agentic::AgenticSettings {
            backend: "llama.cpp".into(),
            driver: "model".into(),
            n_ctx: 1024,
            reserve: 128,
            ratio: 0.75,
            threshold: 672,
            max_result_chars: 250,
            summary_max_tokens: 96,
            max_rounds: 4,
            sampling: "greedy".into(),
            tool_grammar: false,
            worlds: vec!["runbook-disk".into()],
            worlds_dir: "scenarios/agentic".into(),
            score_ctx: Some(4096),
        },
        wall_s: 1.0,
    };
    assert_eq!(result.summary[1].compactions_mean, f64::from(runs[1].compactions));
    let mut doc = serde_json::to_value(vec![result.clone()]).unwrap();
    agentic::validate_agentic(&doc).unwrap();
    doc[0]["runs"][0]["strategy"] = serde_json::json!("v3");
    assert!(agentic::validate_agentic(&doc).unwrap_err().to_string().contains("$[0].runs[0].strategy"));
    let md = agentic::markdown(&[result]);
    assert!(md.contains("| none |") && md.contains("| v2 |"), "{md}");
    assert!(md.contains("retention R") && md.contains("| full |"), "{md}");
    eprintln!("{md}");
}

/// v2.1's Δ by likelihood on the real model: the full-context recap
/// generated once, every trial scored (no generation per trial), and the
/// plan ranked by it rather than falling back to Φ.
#[test]
fn v21_delta_by_likelihood_smollm2() {
    let path = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing", path.display());
        eprintln!("skipped: {} is missing (run `make models`)", path.display());
        return;
    }
    let scenarios = load::load_dir(&root().join("scenarios/compaction"), &["lookup-short".to_owned()]).unwrap();
    let mut lc = LlamaConfig::new(&path).with_n_ctx(2048);
    lc.n_threads = Some(1);
    let model = Model::llama(Arc::new(LlamaSession::load(lc).unwrap())).unwrap();
    let s = &scenarios[0].scenario;
    let budget = RunConfig::default().budget;
    let mut plan = mf_forgetting::PlanConfig::default();
    plan.sampling.max_tokens = 48;
    let cp = mf_bench::condition::compact(&model, Condition::V21, &s.messages, &budget, &plan, 24, mf_agent::model::DeltaSource::Likelihood).unwrap();
    eprintln!("notes: {:?}", cp.notes);
    assert!(cp.evaluator_calls > 1, "one evaluation per trial: {}", cp.evaluator_calls);
    assert!(!cp.notes.iter().any(|n| n.contains("ranked by Φ instead")), "Δ by likelihood did not fall back: {:?}", cp.notes);
    let stats = model.stats();
    let ev = stats.get(&mf_bench::model::Purpose::Evaluator).copied().unwrap_or_default();
    // One generation (the recap on the full context), then scoring: the trials generate nothing.
    assert!(ev.completion_tokens <= 24, "only the full-context recap is generated: {ev:?}");
    assert!(ev.calls as usize > cp.evaluator_calls, "each trial's scoring is reported as a call: {ev:?}");
}

/// `bench-forgetting --summariser`: the summaries of a run come from another
/// model (Gemma 3 for SmolLM2 here), and the results name it.
#[test]
fn a_run_whose_summaries_come_from_another_model() {
    let (model, summariser) = (root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"), root().join("models/gemma-3-270m-q4_k_m.gguf"));
    for p in [&model, &summariser] {
        assert!(p.exists() || std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", p.display());
        if !p.exists() {
            eprintln!("skipped: {} is missing (run `make models`)", p.display());
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_bench-forgetting"))
        .current_dir(root())
        .args(["--model", model.to_str().unwrap(), "--summariser", summariser.to_str().unwrap()])
        .args(["--filter", "lookup-short", "--conditions", "baseline,v1", "--scorers", "likelihood", "--threads", "1", "--summary-tokens", "48"])
        .args(["--n-ctx", "4096", "--out", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    schema::validate_results(&doc).unwrap();
    assert_eq!(doc[0]["model"], "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(doc[0]["settings"]["summariser"], "gemma-3-270m-q4_k_m", "{}", doc[0]["settings"]);
    let summaries = doc[0]["speed"]["calls"]["summary"]["calls"].as_u64().unwrap_or(0);
    assert!(summaries >= 1, "v1 asked the summariser: {}", doc[0]["speed"]);
}
