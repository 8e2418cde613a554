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
