//! Cancel on a real model (SmolLM2-135M, embedded llama.cpp): the model's
//! cancel token (the agent's stop mechanism, `mf_inference::CancelToken`)
//! cuts the generation in progress short, and a run cancelled shortly after
//! it starts ends with `BenchError::Cancelled`, not a result.
//! Skipped with a note when the model file is absent (`make models` fetches it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mf_bench::model::Purpose;
use mf_bench::{BenchError, Condition, Model, RunConfig, Scorers, load, run_suite};
use mf_forgetting::StrategyKind;
use mf_inference::{ChatMessage, LlamaConfig, LlamaSession, Sampling};

fn model() -> Option<Model> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        // The test command sets MF_REQUIRE_MODELS=1: there a missing model fails the test by name.
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", path.display());
        eprintln!("skipped: {} is missing (run `make models`)", path.display());
        return None;
    }
    let mut cfg = LlamaConfig::new(&path).with_n_ctx(4096);
    cfg.n_threads = Some(1);
    Some(Model::llama(Arc::new(LlamaSession::load(cfg).unwrap())).unwrap())
}

/// Cancels `token` after `after`, returning when it did.
fn cancel_after(token: mf_inference::CancelToken, after: Duration) -> std::thread::JoinHandle<Instant> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        token.cancel();
        Instant::now()
    })
}

#[test]
fn cancel_cuts_a_generation_short_and_refuses_later_calls() {
    let Some(model) = model() else { return };
    // SmolLM2 answers with a list of about 120 tokens (≈ 1.2 s on an idle core,
    // prefill 0.2 s): the cancel must land while it is still generating, so it
    // comes 300 ms in, not after a delay an idle machine can outrun (it did at 1.5 s).
    let msgs = vec![ChatMessage::user("Write the numbers from 1 to 2000 in words, one per line, with no other text.")];
    let canceller = cancel_after(model.cancel_token(), Duration::from_millis(300));
    let r = model.generate(Purpose::Probe, msgs.clone(), Sampling::greedy(3000));
    let at = canceller.join().unwrap();
    eprintln!("generate returned {:?} after the cancel", at.elapsed());
    assert!(matches!(r, Err(BenchError::Cancelled)), "{r:?}");
    // A cut-off reply is not recorded as a call.
    assert_eq!(model.stats().get(&Purpose::Probe).map_or(0, |s| s.calls), 0);
    let again = model.generate(Purpose::Probe, msgs, Sampling::greedy(8));
    assert!(matches!(again, Err(BenchError::Cancelled)), "{again:?}");
}

#[test]
fn a_run_cancelled_shortly_after_it_starts_is_cancelled_not_a_result() {
    let Some(model) = model() else { return };
    let scenarios = load::load_dir(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction"), &["lookup-short".to_owned()]).unwrap();
    let cfg = RunConfig {
        conditions: vec![Condition::Full, Condition::of(StrategyKind::V2), Condition::V21],
        scorers: Scorers { keyword: true, judge: true, likelihood: false },
        ..RunConfig::default()
    };
    let canceller = cancel_after(model.cancel_token(), Duration::from_millis(1500));
    let mut steps = Vec::new();
    let r = run_suite(&model, None, &scenarios, &cfg, &mut |p| steps.push(p.label));
    let at = canceller.join().unwrap();
    eprintln!("run_suite returned {:?} after the cancel; steps done before: {steps:?}", at.elapsed());
    match r {
        Err(BenchError::Cancelled) => {}
        Err(e) => panic!("another error than Cancelled: {e}"),
        Ok(r) => panic!("a cancelled run gave a result ({} score rows)", r.scores.len()),
    }
    assert!(steps.len() < 3, "the run went on after the cancel: {steps:?}");
}
