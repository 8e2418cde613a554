//! A stored investigation, made by the real loop on SmolLM2 (a long world,
//! route-driven and cut so that compaction fires several times at a small
//! window), replayed under every strategy and scored by what it did next.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use mf_bench::Model;
use mf_bench::agentic::{self, AgenticConfig, AgenticStrategy, Driver, StoreTarget};
use mf_bench::replay::{ReplayConfig, markdown, replay};
use mf_forgetting::{Budget, StrategyKind};
use mf_inference::{LlamaConfig, LlamaSession};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_stored_investigation_is_replayed_under_every_strategy_smollm2() {
    let path = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        assert!(std::env::var_os("MF_REQUIRE_MODELS").is_none(), "{} is missing and MF_REQUIRE_MODELS is set", path.display());
        eprintln!("skipped: {} is missing (run `make models`)", path.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let mut world = agentic::load_worlds(&root().join("scenarios/agentic"), &["cdn-purge-storm".to_owned()]).unwrap().remove(0).world;
    world.route.truncate(6);
    let (ctx, reserve) = (2048, 192);
    // The only test of its binary: both cores (`cargo test` runs binaries one at a time).
    let mut lc = LlamaConfig::new(&path).with_n_ctx(ctx);
    lc.n_threads = Some(2);
    let session = Arc::new(LlamaSession::load(lc).unwrap());
    let strategy = AgenticStrategy::Strategy(StrategyKind::V1);
    let cfg = AgenticConfig {
        strategies: vec![strategy],
        reserve,
        summary_max_tokens: 96,
        port: 18944,
        driver: Driver::Route,
        store: Some(StoreTarget {
            db: db.clone(),
            engine: mf_agent::EngineChoice::Embedded { model: path.clone(), threads: Some(1), gpu: false, tool_grammar: true },
        }),
        ..AgenticConfig::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let run = rt.block_on(agentic::run_world(session.clone(), &world, strategy, &cfg)).unwrap();
    drop(rt);
    eprintln!("stored run: {} rounds, {} compactions, exit {}", run.rounds, run.compactions_done, run.exit);
    assert!(run.compactions_done >= 2, "the window is small enough for compaction to fire several times: {run:?}");
    let id = run.session.expect("the run was stored");

    // What `mf replay` reads: the stored spec and the transcript.
    let sessions = mf_agent::Sessions::at_db(&db);
    let spec = sessions.spec(id).unwrap();
    assert_eq!(spec.context, ctx);
    let store = sessions.store().unwrap();
    let transcript = store.transcript(id).unwrap();
    assert!(transcript.len() > store.history(id).unwrap().len(), "the transcript keeps what compaction took");
    assert!(transcript.iter().all(|m| !m.summary));

    let budget = Budget { context: ctx as usize, reserve: reserve as usize, ratio: spec.agent.ratio, recent: spec.agent.recent };
    // `baseline` is the floor, always scored: asking for it changes nothing.
    let all = vec![StrategyKind::Baseline, StrategyKind::Masking, StrategyKind::V1, StrategyKind::V2, StrategyKind::V21];
    let mut rcfg = ReplayConfig { strategies: all.clone(), targets: 2, points: 2, ..ReplayConfig::for_budget(budget, spec.agent.plan.clone()) };
    // Kept short for the test's time: the summaries the live run wrote, the withholding test budgeted.
    rcfg.plan.withholding_budget = 6;
    rcfg.plan.sampling.max_tokens = 96;
    let model = Model::llama(session).unwrap();
    let mut sc = LlamaConfig::new(&path).with_n_ctx(8192);
    sc.n_threads = Some(2);
    let scorer = Model::llama(Arc::new(LlamaSession::load(sc).unwrap())).unwrap();
    let mut steps = 0;
    let r = replay(&model, &scorer, &transcript, &rcfg, &mut |done, total, what| {
        steps += 1;
        assert!(done <= total);
        eprintln!("[{done}/{total}] {what}");
    })
    .unwrap();
    eprintln!("{}", markdown(&r));

    // The shape: points in order, over the trigger, each with every strategy.
    assert!(!r.points.is_empty() && r.points.len() <= 2, "{:?}", r.points);
    assert_eq!(steps, r.points.len() * all.len());
    assert!(r.points.windows(2).all(|w| w[0].at < w[1].at));
    for p in &r.points {
        assert!(p.tokens > r.threshold, "a point is over the trigger: {p:?}");
        let names: Vec<&str> = p.compactions.iter().map(|c| c.strategy.as_str()).collect();
        assert_eq!(names, ["masking", "v1", "v2", "v2.1"]);
        assert!(p.compactions.iter().all(|c| c.error.is_some() || c.grew || c.tokens_after < p.tokens), "{p:?}");
        assert!(!p.targets.is_empty() && p.targets.iter().all(|&t| t >= p.at));
    }
    assert!(r.unscored.is_empty(), "{:?}", r.unscored);
    let l = r.likelihood.as_ref().unwrap();
    let conds: Vec<&str> = l.conditions.iter().map(|c| c.condition.as_str()).collect();
    assert_eq!(conds, ["full", "baseline", "masking", "v1", "v2", "v2.1"]);
    // Every target was scored after the ceiling and the floor.
    assert!(r.scores.iter().all(|s| s.nll.contains_key("full") && s.nll.contains_key("baseline") && s.tokens > 0));

    // The ceiling against the floor, point by point: say where the whole
    // history did not make the investigation's own next steps likelier.
    let mean = |p: usize, c: &str| {
        let v: Vec<f64> = r.scores.iter().filter(|s| s.point == p).filter_map(|s| s.nll.get(c).copied()).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    for p in 0..r.points.len() {
        let (f, b) = (mean(p, "full"), mean(p, "baseline"));
        if f > b {
            eprintln!("point {}: full {f:.3} > baseline {b:.3} nats/token: the replies there are predictable from the question and the last call alone", p + 1);
        }
    }
    // Over all targets the whole history is never worse than the floor by
    // more than the margin that separates signal from noise: a larger gap
    // would mean the contexts were mixed up.
    let pooled = |c: &str| r.scores.iter().filter_map(|s| s.nll.get(c).copied()).sum::<f64>() / r.scores.len() as f64;
    assert!(pooled("full") <= pooled("baseline") + mf_bench::likelihood::SIGNAL_MARGIN, "full {} vs baseline {}", pooled("full"), pooled("baseline"));
    // The JSON round-trips.
    let json = serde_json::to_string(&r).unwrap();
    let back: mf_bench::replay::ReplayResult = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), json);
}
