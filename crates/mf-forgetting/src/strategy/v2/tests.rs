//! v2's tier rules per problem class, on small hand-built histories whose
//! expected fate can be read off the method.
use super::super::plan;
use super::super::test_support::*;
use crate::budget::Budget;
use crate::message::Message;
use crate::plan::{Fidelity, PlanConfig, StrategyKind, Tier};
use crate::taxonomy::ProblemClass;
use crate::tokens::ApproxTokenCounter;
use serde_json::json;

#[test]
fn lookup_keeps_the_best_result_verbatim_and_compresses_the_rest_hard() {
    let h = history(
        "Which invoice is the duplicate?",
        &[R(json!({"u": "/health"}), "ok", false, None), R(json!({"u": "/invoices"}), RICH, false, None), R(json!({"u": "/x"}), "fine", false, None)],
    );
    let p = v2(&h, ProblemClass::Lookup);
    assert_eq!(tier(&p, "a1"), Tier::Verbatim);
    assert_eq!(tier(&p, "t1"), Tier::Verbatim);
    for id in ["a0", "t0", "a2", "t2"] {
        assert_eq!(tier(&p, id), Tier::Heavy, "{id}");
    }
}

#[test]
fn multi_hop_keeps_every_link_and_the_last_hop_verbatim() {
    let h = history(
        "Who is on call for the route /checkout?",
        &[
            R(json!({"u": "/routes/checkout"}), r#"{"service": "payments-api"}"#, false, None),
            R(json!({"u": "/services/payments-api"}), r#"{"owner_team": "team-ledger"}"#, false, None),
            R(json!({"team": "team-ledger"}), "ok x", false, None),
        ],
    );
    let p = v2(&h, ProblemClass::MultiHop);
    assert!(tier(&p, "t0").fidelity() >= Some(Fidelity::Light));
    assert!(tier(&p, "t1").fidelity() >= Some(Fidelity::Light));
    assert_eq!(tier(&p, "t2"), Tier::Verbatim, "the last hop, though poor in dimensions, ends the chain");
    assert!(p.messages[6].reason.to_string().contains("multi-hop"), "{}", p.messages[6].reason);
}

#[test]
fn exploratory_keeps_successes_in_full_and_failures_as_one_line() {
    let h = history(
        "Investigate why the nightly export is failing",
        &[
            R(json!({"u": "/run?x=1"}), "ConnectionError: connection refused", true, None),
            R(json!({"u": "/run?x=2"}), "PermissionError: denied", true, None),
            R(json!({"u": "/run?x=3"}), "export ok with --no-compress", false, None),
        ],
    );
    let p = v2(&h, ProblemClass::Exploratory);
    for id in ["a0", "t0", "a1", "t1"] {
        assert_eq!(tier(&p, id), Tier::Heavy, "{id}");
    }
    assert_eq!(tier(&p, "t2"), Tier::Verbatim);
    assert_eq!(tier(&p, "a2"), Tier::Verbatim, "the call goes with its result");
}

#[test]
fn aggregation_keeps_totals_verbatim_and_folds_data_points() {
    let h = history(
        "How many checkouts failed?",
        &[
            R(json!({"r": "eu"}), "eu-west: 41 failed", false, None),
            R(json!({"r": "us"}), "us-east: 56 failed", false, None),
            R(json!({"r": "all"}), "total across regions: 97 failed", false, None),
        ],
    );
    let p = v2(&h, ProblemClass::Aggregation);
    assert_eq!(tier(&p, "t2"), Tier::Verbatim);
    assert!(tier(&p, "t0").fidelity() >= Some(Fidelity::Light));
    assert!(p.instructions.iter().any(|i| i.contains("totals")), "{:?}", p.instructions);
}

#[test]
fn contradiction_never_folds_or_compresses_a_side_hard() {
    // Three near-identical results would be a saturation group in any
    // other class; in a contradiction each of them may be a side.
    let rounds: Vec<R<'_>> =
        ["status: 12 errors", "status: 31 errors", "status: 12 errors"].iter().enumerate().map(|(i, r)| R(json!({"src": i}), r, false, None)).collect();
    let h = history("The dashboard and the logs disagree: which is right?", &rounds);
    let p = v2(&h, ProblemClass::Contradiction);
    assert_eq!(p.folds.len(), 1, "the group is still reported");
    for id in ["t0", "t1", "t2"] {
        assert!(tier(&p, id).fidelity() >= Some(Fidelity::Light), "{id} is {:?}", tier(&p, id));
    }
    assert!(p.instructions.iter().any(|i| i.contains("both versions")));
    // The same history as a lookup demotes the older members.
    let q = v2(&h, ProblemClass::Lookup);
    assert!(["t0", "t1", "t2"].iter().any(|id| tier(&q, id) == Tier::Heavy));
}

#[test]
fn temporal_raises_dated_messages_and_asks_for_chronology() {
    let mut h = history("When did the outage start?", &[R(json!({"u": "/a"}), "x", true, None)]);
    // A plain assistant remark with a date, outside any chain.
    h.insert(4, Message::assistant("note", "the deploy went out 2026-03-01 at 02:00, then alarms"));
    let p = v2(&h, ProblemClass::Temporal);
    assert!(tier(&p, "note").fidelity() >= Some(Fidelity::Light));
    assert!(p.instructions.iter().any(|i| i.contains("chronological")));
}

#[test]
fn saturation_folds_repeated_errors_into_one_labelled_line() {
    let rounds: Vec<R<'_>> = (0..3).map(|i| R(json!({"u": format!("/try/{i}")}), "TimeoutError: upstream timed out", true, None)).collect();
    let h = history("What is the value of x?", &rounds);
    let p = v2(&h, ProblemClass::Lookup);
    assert_eq!(p.folds.len(), 1);
    assert_eq!(p.folds[0].label, "3 errors of http_get, type: TimeoutError");
    assert!(p.instructions.iter().any(|i| i.starts_with("Fold t0, t1, t2")), "{:?}", p.instructions);
}

#[test]
fn a_chain_shares_one_tier() {
    let h = history(
        "Which invoice is the duplicate?",
        &[R(json!({"u": "/health"}), "ok", false, Some("Healthy.")), R(json!({"u": "/inv"}), RICH, false, Some("inv_30602 is the duplicate."))],
    );
    for class in ProblemClass::TIE_ORDER {
        let p = v2(&h, class);
        assert_eq!(tier(&p, "a1"), tier(&p, "t1"), "{class}");
        assert_eq!(tier(&p, "t1"), tier(&p, "i1"), "{class}");
        assert_eq!(tier(&p, "a0"), tier(&p, "i0"), "{class}");
    }
}

#[test]
fn budget_pressure_demotes_verbatim_units_lowest_influence_first() {
    let rounds: Vec<R<'_>> = (0..6).map(|i| R(json!({"u": format!("/inv/{i}")}), RICH, false, None)).collect();
    let h = history("Investigate the duplicate invoice", &rounds);
    let before = v2(&h, ProblemClass::Exploratory).messages.iter().filter(|m| m.tier == Tier::Verbatim).count();
    assert!(before > 0);
    let cfg = PlanConfig { class_override: Some(ProblemClass::Exploratory), ..PlanConfig::default() };
    // Shrink the budget until the planner has to demote.
    let mut demoted = false;
    for context in [4_000usize, 3_000, 2_400, 2_000, 1_600, 1_400, 1_200, 1_000, 800, 600, 500, 400, 300] {
        let tight = Budget { context, reserve: 100, ratio: 0.75, recent: 2 };
        let p = plan(StrategyKind::V2, &h, &tight, &ApproxTokenCounter, &cfg, None).unwrap();
        if p.notes.iter().any(|n| n.contains("budget: verbatim unit")) {
            let after = p.messages.iter().filter(|m| m.tier == Tier::Verbatim).count();
            assert!(after < before, "{after} verbatim after demotion vs {before}");
            demoted = true;
            break;
        }
    }
    assert!(demoted, "no budget forced a demotion");
}

#[test]
fn gamma_changes_the_influence_of_broad_messages_only() {
    let h = history("Which invoice?", &[R(json!({"u": "/inv"}), RICH, false, None)]);
    let at = |gamma: f64| {
        let cfg = PlanConfig { gamma, class_override: Some(ProblemClass::Lookup), ..PlanConfig::default() };
        let p = plan(StrategyKind::V2, &h, &roomy(), &ApproxTokenCounter, &cfg, None).unwrap();
        p.messages[3].influence.unwrap()
    };
    assert!(at(2.0) > at(1.5) && at(1.5) > at(1.0), "B ≥ 2 grows with γ");
}

#[test]
fn over_the_threshold_the_summary_is_squeezed_before_an_anchor_is_demoted() {
    // Six identical results: saturation leaves the newest one verbatim. At
    // this budget the anchor, the literals and a summary of 180 tokens fit
    // the threshold (a full 256 would not): the summary pass is asked for
    // less, the anchor stays.
    let rounds: Vec<R<'_>> = (0..6).map(|i| R(json!({"u": format!("/inv/{i}")}), RICH, false, None)).collect();
    let h = history("Investigate the duplicate invoice", &rounds);
    let cfg = PlanConfig { class_override: Some(ProblemClass::Exploratory), ..PlanConfig::default() };
    let tight = Budget { context: 600, reserve: 100, ratio: 0.75, recent: 2 };
    let p = plan(StrategyKind::V2, &h, &tight, &ApproxTokenCounter, &cfg, None).unwrap();
    assert!(p.gauge.total() > tight.threshold());
    assert_eq!(tier(&p, "t5"), Tier::Verbatim);
    let limit = p.summary_limit.unwrap();
    assert!(limit < 256, "{limit}");
    assert_eq!(p.estimated_tokens_after, tight.threshold(), "the summary gets exactly what the threshold leaves");
    assert!(p.declined.is_none() && p.notes.is_empty(), "{:?}", p.notes);
}

#[test]
fn below_the_threshold_anchors_that_cannot_pay_are_demoted_until_the_compaction_shrinks() {
    // Every success of an exploratory hunt is verbatim; below the threshold
    // the summary message of such a plan (header, anchors, labels) is larger
    // than the messages it replaces. The plan demotes the least influential
    // anchors until the result is smaller, and says why.
    // Five distinct results, long enough that the light tier cuts them.
    let tail = "The legacy path re-issued the invoice without an idempotency key after the gateway timed out at \
        02:13:02 following 60 s of waiting, so Halvorsen Freight AS (cus_8841H) was charged twice for 41 vehicles \
        of Fleet Pro at 450.00 NOK each; finance must refund inv_30602 and keep inv_30571, then close SUP-77310.";
    let texts: Vec<String> =
        ["Billing API customer record", "Invoices listed for March", "Retry worker log lines", "Refund ledger entries", "Gateway status history"]
            .iter()
            .map(|head| format!("{head}: {tail}"))
            .collect();
    let rounds: Vec<R<'_>> = texts.iter().enumerate().map(|(i, t)| R(json!({"u": format!("/inv/{i}")}), t.as_str(), false, None)).collect();
    let h = history("Investigate the duplicate invoice", &rounds);
    let p = v2(&h, ProblemClass::Exploratory);
    assert!(p.gauge.total() <= roomy().threshold());
    assert!(p.declined.is_none(), "{:?}", p.declined);
    assert!(p.estimated_tokens_after < p.gauge.total(), "{} ≥ {}", p.estimated_tokens_after, p.gauge.total());
    let demoted: Vec<&str> = p.messages.iter().filter(|m| m.reason.unit.contains(&crate::reason::Reason::DemotedToShrink)).map(|m| m.id.0.as_str()).collect();
    assert!(!demoted.is_empty(), "no anchor was demoted");
    assert!(p.notes.iter().any(|n| n.starts_with("no growth")), "{:?}", p.notes);
    assert!(p.messages.iter().any(|m| m.tier == Tier::Verbatim), "the most influential anchors stay");
}
