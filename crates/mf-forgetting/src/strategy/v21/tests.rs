//! v2.1's ranking, exact and budgeted withholding, and the Φ ablation.
use super::super::plan;
use super::super::test_support::*;
use crate::error::ForgettingError;
use crate::evaluator::{KeywordOracle, ProbeEvaluator};
use crate::message::Message;
use crate::plan::{PlanConfig, Ranking, StrategyKind, Tier};
use crate::reason::Reason;
use crate::scenario::{Keyword, Probe, ProbeDimension};
use crate::tokens::ApproxTokenCounter;
use serde_json::json;

fn probe(keyword: &str) -> Probe {
    Probe {
        id: "p".into(),
        question: "who?".into(),
        dimension: ProbeDimension::EntityRecall,
        required: vec![Keyword::One(keyword.into())],
        partial: vec![],
        reference: keyword.into(),
        wrong: vec![],
    }
}

#[test]
fn v21_keeps_high_delta_verbatim_and_drops_zero_delta() {
    let h = history(
        "Who owns the service?",
        &[R(json!({"u": "/noise"}), "nothing here", false, None), R(json!({"u": "/owner"}), "owner: team-ledger", false, None)],
    );
    let mut oracle = KeywordOracle::new(vec![probe("team-ledger")]);
    let e: &mut dyn ProbeEvaluator = &mut oracle;
    let p = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), Some(e)).unwrap();
    assert_eq!(tier(&p, "t1"), Tier::Verbatim);
    assert_eq!(tier(&p, "a1"), Tier::Verbatim);
    assert_eq!(tier(&p, "t0"), Tier::Drop);
    assert!(p.messages[5].delta.unwrap() > 0.0 && p.messages[3].delta == Some(0.0));
}

/// Counts evaluations, delegating to the keyword oracle.
struct Counting(KeywordOracle, usize);
impl ProbeEvaluator for Counting {
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
        self.1 += 1;
        self.0.perf(context)
    }
    fn describe(&self) -> String {
        "counting oracle".to_owned()
    }
}

/// Twelve rounds, two of which hold what the probes ask.
fn twelve_rounds() -> Vec<Message> {
    let rounds: Vec<R<'_>> = (0..12)
        .map(|k| match k {
            3 => R(json!({"u": "/owner"}), "owner: team-ledger", false, None),
            9 => R(json!({"u": "/budget"}), "budget code BX-4471", false, None),
            _ => R(json!({"u": format!("/noise/{k}")}), "nothing relevant here", false, None),
        })
        .collect();
    history("Who owns the service and what is its budget?", &rounds)
}

#[test]
fn v21_budgeted_withholding_finds_the_same_tiers_with_fewer_evaluations() {
    let h = twelve_rounds();
    let probes = || vec![probe("team-ledger"), probe("BX-4471")];
    let mut exact = Counting(KeywordOracle::new(probes()), 0);
    let pe = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), Some(&mut exact)).unwrap();
    assert_eq!(exact.1, 13, "the exact test: the full context + one per unit");
    let cfg = PlanConfig { withholding_budget: 9, ..PlanConfig::default() };
    let mut budgeted = Counting(KeywordOracle::new(probes()), 0);
    let pb = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, Some(&mut budgeted)).unwrap();
    assert!(budgeted.1 <= 9, "{} evaluations over the budget", budgeted.1);
    for (a, b) in pe.messages.iter().zip(&pb.messages) {
        assert_eq!(a.tier, b.tier, "{}: exact {:?}, budgeted {:?} ({})", a.id.0, a.tier, b.tier, b.reason);
    }
    assert_eq!(tier(&pb, "t3"), Tier::Verbatim);
    assert_eq!(tier(&pb, "t9"), Tier::Verbatim);
    assert_eq!(tier(&pb, "t0"), Tier::Drop);
    assert!(pb.notes.iter().any(|n| n.contains("budgeted withholding test")), "{:?}", pb.notes);
    assert!(pb.messages.iter().any(|m| m.reason.to_string().contains("withheld together")));
    // A budget as large as the exact test's is the exact test.
    let cfg = PlanConfig { withholding_budget: 13, ..PlanConfig::default() };
    let mut same = Counting(KeywordOracle::new(probes()), 0);
    let ps = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, Some(&mut same)).unwrap();
    assert_eq!(same.1, 13);
    assert_eq!(ps.messages, pe.messages);
}

#[test]
fn v21_a_tight_budget_keeps_whole_blocks_rather_than_losing_a_fact() {
    // Two evaluations: the full context and all units withheld together;
    // the block's Δ is the highest, so every unit earns verbatim, none is
    // dropped. (Below the threshold twelve verbatim rounds would outgrow
    // themselves in the summary message, so they are then demoted to light
    // until it shrinks: summarised, their literals kept, still not dropped.)
    let h = twelve_rounds();
    let cfg = PlanConfig { withholding_budget: 2, ..PlanConfig::default() };
    let mut e = Counting(KeywordOracle::new(vec![probe("team-ledger")]), 0);
    let p = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, Some(&mut e)).unwrap();
    assert_eq!(e.1, 2);
    for m in p.messages.iter().filter(|m| m.zone == crate::zones::Zone::Compressible) {
        assert!(matches!(m.reason.own, Reason::Ranked { tier: Tier::Verbatim, .. }), "{}: {}", m.id, m.reason);
        assert_ne!(m.tier, Tier::Drop, "{}", m.id);
    }
    let bad = PlanConfig { withholding_budget: 1, ..PlanConfig::default() };
    assert!(matches!(bad.validate(), Err(ForgettingError::InvalidSetting { name: "withholding_budget", .. })));
}

#[test]
fn v21_needs_an_evaluator_unless_ranking_by_phi() {
    let h = history("Who?", &[R(json!({"u": "/a"}), RICH, false, None)]);
    let err = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap_err();
    assert!(matches!(err, ForgettingError::InvalidSetting { name: "evaluator", .. }));
    let cfg = PlanConfig { ranking: Ranking::Phi, ..PlanConfig::default() };
    let p = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, None).unwrap();
    assert_eq!(tier(&p, "t0"), Tier::Verbatim, "the only unit has the highest Φ score");
    assert!(p.notes.iter().any(|n| n.contains("ablation")));
}
