//! Every conversation under `scenarios/compaction/` parses, validates and
//! plans with every strategy (v2.1 through the offline keyword oracle).

use mf_forgetting::{
    ApproxTokenCounter, Budget, ForgettingError, KeywordOracle, PlanConfig, Scenario, StrategyKind, Summarizer, SummaryRequest, Tier, TokenCounter, apply, plan,
};

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

/// A summary pass at its worst: exactly as many (approximate) tokens as the
/// request allows, as distinct bullet lines, recording how often it ran.
struct AtTheLimit(usize);
impl Summarizer for AtTheLimit {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
        self.0 += 1;
        // "- fact N" is three approximate tokens.
        Ok((0..request.params.max_tokens / 3).map(|k| format!("- fact {k}")).collect::<Vec<_>>().join("\n"))
    }
}

/// The shipped short scenarios, compacted the way the benchmark does (its
/// budget: C 4608, G 512, so every short history is below the threshold)
/// with a summariser that writes as much as it is allowed. Measured on the
/// previous planner: v2 made the history larger on 6 of 6 (its summary
/// message held nearly every message verbatim, plus a header, labels,
/// literals and a summary slot as large as the pass's limit), and the guard
/// in `apply` had to refuse each one — after the summary pass was spent.
/// Now a summarising plan either shrinks the history or declines before
/// any pass, and the guard never has to fire.
#[test]
fn short_scenarios_compact_to_less_or_decline_before_the_summary_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction");
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().ends_with("-short.json")).collect();
    paths.sort();
    assert_eq!(paths.len(), 6);
    let budget = Budget { context: 4608, reserve: 512, ratio: 0.75, recent: 2 };
    let c = ApproxTokenCounter;
    let mut v2_compacted = 0;
    for kind in [StrategyKind::V1, StrategyKind::V2, StrategyKind::V21] {
        for path in &paths {
            let s = Scenario::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
            let mut oracle = KeywordOracle::new(s.probes.clone());
            let p = plan(kind, &s.messages, &budget, &c, &PlanConfig::default(), Some(&mut oracle)).unwrap();
            let replaced: usize = p.zones.compressible().into_iter().map(|i| c.count_message(&s.messages[i])).sum();
            let verbatim: usize = p.messages.iter().filter(|m| m.tier == Tier::Verbatim).map(|m| m.tokens).sum();
            let mut pass = AtTheLimit(0);
            let out = apply(&p, &s.messages, &mut pass, &c).unwrap();
            let summary_message = out.messages.iter().find(|m| m.summary).map_or(0, |m| c.count_message(m));
            eprintln!(
                "{kind:4} {:22} before {:4} replaced {:4} (verbatim {:4}) → summary message {:4} (limit {:>4}), after {:4}{}",
                s.id,
                out.report.tokens_before.total,
                replaced,
                verbatim,
                summary_message,
                p.summary_limit.map_or_else(|| "-".to_owned(), |l| l.to_string()),
                out.report.tokens_after.total,
                if p.declined.is_some() { "  declined" } else { "" },
            );
            assert!(out.report.kept_original.is_none(), "{kind} {}: the guard fired: {:?}", s.id, out.report.kept_original);
            if p.declined.is_some() {
                assert_eq!(pass.0, 0, "{kind} {}: a summary pass for a declined plan", s.id);
                assert_eq!(out.messages, s.messages);
            } else {
                assert!(out.report.tokens_after.total < out.report.tokens_before.total, "{kind} {}", s.id);
                assert!(summary_message < replaced, "{kind} {}: {summary_message} ≥ {replaced}", s.id);
                assert!(out.report.tokens_after.total <= p.estimated_tokens_after, "{kind} {}: over the estimate", s.id);
                if kind == StrategyKind::V2 {
                    v2_compacted += 1;
                }
            }
        }
    }
    assert!(v2_compacted >= 1, "v2 compacted none of the six short scenarios");
}
