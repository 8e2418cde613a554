//! CI smoke run: three short scenarios on SmolLM2-135M (embedded llama.cpp),
//! every condition, both scorers, checked end to end against the schema.
//! Skipped with a note when the model file is absent (`make models` fetches it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use mf_bench::{Condition, Model, RunConfig, Scorers, load, report, run_suite, schema};
use mf_inference::{LlamaConfig, LlamaSession};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn smoke_three_scenarios_smollm2_both_scorers() {
    let path = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        eprintln!("skipped: {} is missing (run `make models`)", path.display());
        return;
    }
    let scenarios = load::load_dir(
        &root().join("scenarios/compaction"),
        &["lookup-short".to_owned(), "contradiction-short".to_owned(), "temporal-short".to_owned()],
    )
    .unwrap();
    assert_eq!(scenarios.len(), 3);
    let session = LlamaSession::load(LlamaConfig::new(&path).with_n_ctx(2048)).unwrap();
    let model = Model::llama(Arc::new(session)).unwrap();
    // Shorter summaries than the method's 256 tokens keep CI in minutes on 2 cores.
    let mut plan = mf_forgetting::PlanConfig::default();
    plan.sampling.max_tokens = 96;
    let cfg = RunConfig {
        plan,
        conditions: Condition::ALL.to_vec(),
        scorers: Scorers { keyword: true, judge: true },
        answer_max_tokens: 48,
        evaluator_max_tokens: 24,
        scenarios_dir: "scenarios/compaction".to_owned(),
        ..RunConfig::default()
    };
    let mut steps = Vec::new();
    let r = run_suite(&model, None, &scenarios, &cfg, &mut |p| steps.push((p.done, p.total))).unwrap();

    // Every scenario × probe × condition answered and graded.
    assert_eq!(steps.len(), 18);
    assert_eq!(steps.last(), Some(&(18, 18)));
    assert_eq!(r.scores.len(), 3 * 3 * 6);
    assert!(r.scores.iter().all(|s| s.judge_raw.is_some() && s.score <= 3));
    assert_eq!(r.conditions.len(), 6);
    assert_eq!(r.empty_by_budget, 0, "an answer came back empty because of its token budget");
    assert!(r.scores.iter().all(|s| s.thinking_tokens == 0));

    // Controls beside the run: the keyword scorer must bracket exactly.
    assert_eq!(r.controls.len(), 9 * 4);
    assert_eq!(r.control_brackets.probes, 9);
    assert_eq!(r.control_brackets.keyword["identical"], 3.0);
    assert_eq!(r.control_brackets.keyword["empty"], 0.0);
    assert!(r.control_brackets.keyword["contradiction"] < 3.0);
    assert!(!r.control_brackets.judge.is_empty() || r.control_brackets.judge_unparsed == 36);

    // Compaction really compacted: baseline drops the middle of every scenario.
    for c in r.compactions.iter().filter(|c| c.condition == "baseline") {
        assert!(c.tokens_after < c.tokens_before, "{c:?}");
        assert!(c.dropped > 0, "{c:?}");
    }
    assert!(r.compactions.iter().filter(|c| c.condition == "v2.1").all(|c| c.evaluator_calls > 0));

    // Probes of one scenario × condition share the context in the KV cache.
    let ratio = r.speed.probe_prefill_ratio.unwrap();
    assert!(ratio > 0.0 && ratio <= 0.40, "probe prefill ratio {ratio}");

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
