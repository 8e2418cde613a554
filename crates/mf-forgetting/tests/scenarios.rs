//! Every conversation under `scenarios/compaction/` parses, validates and
//! plans with every strategy (v2.1 through the offline keyword oracle).

use mf_forgetting::{ApproxTokenCounter, Budget, KeywordOracle, PlanConfig, Scenario, StrategyKind, plan};

#[test]
fn every_scenario_parses_and_plans_with_every_strategy() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let s = Scenario::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let budget = Budget { context: 2048, reserve: 512, ratio: 0.75, recent: 2 };
        for kind in StrategyKind::ALL {
            let mut oracle = KeywordOracle::new(s.probes.clone());
            let p = plan(kind, &s.messages, &budget, &ApproxTokenCounter, &PlanConfig::default(), Some(&mut oracle))
                .unwrap_or_else(|e| panic!("{} {kind}: {e}", path.display()));
            assert_eq!(p.messages.len(), s.messages.len());
        }
        n += 1;
    }
    assert!(n > 0, "no scenario files in {}", dir.display());
}

/// The classifier sees only the question and the history's shape, while a
/// scenario's class is its author's intent: they can honestly differ (an
/// "exploratory" hunt may be phrased as a count). This records how often
/// they agree, prints the confusion, and fails if agreement regresses below
/// the level measured when the rules were last tuned.
#[test]
fn classifier_agrees_with_most_declared_classes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction");
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let s = Scenario::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let budget = Budget { context: 2048, reserve: 512, ratio: 0.75, recent: 2 };
        let p = plan(StrategyKind::V2, &s.messages, &budget, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let got = p.class.unwrap().class;
        rows.push((s.id.clone(), s.class, got));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let agree = rows.iter().filter(|(_, want, got)| want == got).count();
    for (id, want, got) in &rows {
        eprintln!("{id:24} declared {want:14} classified {got:14}{}", if want == got { "" } else { "  ✗" });
    }
    eprintln!("agreement: {agree}/{}", rows.len());
    assert!(agree >= MIN_AGREEMENT, "classifier agrees on {agree}/{} scenarios, fewer than {MIN_AGREEMENT}", rows.len());
}

/// Measured 2026-12-03: 11 of 18 (the misses are listed by the test).
const MIN_AGREEMENT: usize = 11;
