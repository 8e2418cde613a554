#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use super::*;
use crate::model::CallStats;

fn row(scenario: &str, condition: &str, rep: u32, score: u8, judge: Option<u8>) -> ScoreRow {
    ScoreRow {
        scenario: scenario.into(),
        probe: "p1".into(),
        condition: condition.into(),
        dimension: "fact_retention".into(),
        score,
        answer: "a".into(),
        class: "lookup".into(),
        length: "short".into(),
        rep,
        judge,
        judge_raw: None,
        stop_reason: "end_of_turn".into(),
        completion_tokens: 3,
        thinking_tokens: 0,
        retried: false,
        shared_from: None,
        likelihood: None,
    }
}

fn result(scenario: &str, rows: Vec<ScoreRow>) -> ModelResult {
    let comps = vec![CompactionRow {
        scenario: scenario.into(),
        condition: "v1".into(),
        rep: 0,
        tokens_before: 100,
        tokens_after: 40,
        messages_before: 10,
        messages_after: 4,
        fallback: None,
        verbatim: 0,
        dropped: 0,
        evaluator_calls: 0,
        approximate_counts: false,
        compaction_ms: 5,
        error: None,
        kept_original: None,
        summary_prompt: None,
        notes: Vec::new(),
        deltas: BTreeMap::new(),
    }];
    let mut calls = BTreeMap::new();
    calls.insert("probe".to_owned(), CallStats { calls: 1, prompt_tokens: 100, decoded_tokens: 30, ..CallStats::default() });
    let names = ["v1"];
    ModelResult {
        model: "m".into(),
        overall: aggregate(&rows, |r| Some(r.score)).overall,
        by_class: BTreeMap::new(),
        by_dimension: BTreeMap::new(),
        conditions: condition_summaries(&names, &rows, &comps, true),
        judge: Some(aggregate(&rows, |r| r.judge)),
        control_brackets: Brackets::default(),
        controls: Vec::new(),
        worst_cells: cells(&rows),
        compactions: comps,
        scores: rows,
        speed: Speed { calls, probe_prefill_ratio: Some(0.3), total_prefill_ratio: Some(0.3), ..Speed::default() },
        settings: Settings {
            backend: "llama.cpp".into(),
            n_ctx: 8192,
            budget_context: 4608,
            budget_reserve: 512,
            budget_recent: 2,
            temperature: 0.1,
            answer_max_tokens: 96,
            thinking: "off".into(),
            probe_prompt: "p".into(),
            reps: 1,
            scorers: vec!["keyword".into(), "judge".into()],
            judge_model: Some("m".into()),
            evaluator_max_tokens: 32,
            summary_max_tokens: Some(256),
            withholding_budget: 0,
            branched: None,
            delta: None,
            summariser: None,
            scenarios_dir: "d".into(),
            scenarios: vec![scenario.into()],
        },
        empty_by_budget: 0,
        wall_s: 10.0,
        likelihood: None,
    }
}

#[test]
fn merging_runs_recomputes_every_aggregate() {
    let a = result("a", vec![row("a", "v1", 0, 3, Some(3))]);
    let b = result("b", vec![row("b", "v1", 0, 0, Some(1)), row("b", "v1", 0, 0, Some(1))]);
    let m = merge(vec![a.clone(), b.clone()]).unwrap();
    assert_eq!(m.overall["v1"], 1.0);
    assert_eq!(m.conditions[0].keyword.n, 3);
    assert!((m.conditions[0].judge.unwrap().mean - 5.0 / 3.0).abs() < 1e-12);
    assert_eq!(m.worst_cells[0].scenario, "b");
    assert_eq!(m.settings.scenarios, vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(m.wall_s, 20.0);
    assert_eq!(m.speed.calls["probe"].calls, 2);
    assert_eq!(m.speed.probe_prefill_ratio, Some(0.3));
    // The same scenario twice, another model, or other settings are refused.
    assert!(merge(vec![a.clone(), a.clone()]).unwrap_err().contains("share"));
    let mut c = b.clone();
    c.model = "other".into();
    assert!(merge(vec![a.clone(), c]).unwrap_err().contains("other"));
    let mut d = b;
    d.settings.answer_max_tokens = 160;
    assert!(merge(vec![a, d]).unwrap_err().contains("differ"));
    assert!(merge(Vec::new()).is_err());
}

#[test]
fn compactions_kept_as_they_were_are_counted_and_old_rows_still_parse() {
    let mut r = result("s-short", vec![row("s-short", "v1", 0, 2, Some(2))]);
    r.compactions[0].kept_original = Some("would be 120 tokens, not fewer than 100".into());
    let names = ["v1"];
    let summary = condition_summaries(&names, &r.scores, &r.compactions, true);
    assert_eq!(summary[0].not_applied, 1);
    assert_eq!(summary[0].compaction_failures, 0);
    // Rows and summaries written before the guard existed have neither field.
    let mut old = serde_json::to_value(&r.compactions[0]).unwrap();
    old.as_object_mut().unwrap().remove("kept_original");
    let back: CompactionRow = serde_json::from_value(old).unwrap();
    assert!(back.kept_original.is_none());
    let mut old_summary = serde_json::to_value(&summary[0]).unwrap();
    old_summary.as_object_mut().unwrap().remove("not_applied");
    let back: ConditionSummary = serde_json::from_value(old_summary).unwrap();
    assert_eq!(back.not_applied, 0);
}

#[test]
fn an_exact_run_merges_with_a_budgeted_one_only_where_the_budget_did_not_bind() {
    let v21 = |scenario: &str, calls: usize| {
        let mut r = result(scenario, vec![row(scenario, "v1", 0, 2, Some(2))]);
        r.compactions[0].condition = "v2.1".into();
        r.compactions[0].evaluator_calls = calls;
        r.settings.scenarios = vec![scenario.into()];
        r
    };
    let short = v21("a-short", 7);
    let mut long = v21("a-long", 16);
    long.settings.withholding_budget = 16;
    let m = merge(vec![short.clone(), long.clone()]).unwrap();
    assert_eq!(m.settings.withholding_budget, 16);
    let m = merge(vec![long.clone(), short]).unwrap();
    assert_eq!(m.settings.withholding_budget, 16);
    // An exact compaction of 34 evaluations is not what a budget of 16 gives.
    let exact_long = v21("b-long", 34);
    let e = merge(vec![exact_long, long.clone()]).unwrap_err();
    assert!(e.contains("b-long") && e.contains("34"), "{e}");
    let mut other = v21("c-long", 8);
    other.settings.withholding_budget = 8;
    assert!(merge(vec![other, long]).unwrap_err().contains("budgets differ"));
}

#[test]
fn stats_over_reps() {
    let s = stat(&[(0, 3.0), (0, 1.0), (1, 2.0), (1, 2.0)]).unwrap();
    assert_eq!(s.mean, 2.0);
    assert_eq!(s.sd, 0.0);
    assert_eq!(s.min, 1.0);
    let s = stat(&[(0, 3.0), (1, 1.0)]).unwrap();
    assert!((s.sd - std::f64::consts::SQRT_2).abs() < 1e-12);
    assert!(stat(&[]).is_none());
}

#[test]
fn aggregates_and_worst_cells() {
    let rows = vec![row("a", "v1", 0, 3, Some(2)), row("a", "v1", 0, 1, None), row("b", "v1", 0, 0, Some(0)), row("a", "full", 0, 3, Some(3))];
    let a = aggregate(&rows, |r| Some(r.score));
    assert!((a.overall["v1"] - 4.0 / 3.0).abs() < 1e-12);
    assert_eq!(a.by_class["lookup"]["full"], 3.0);
    let j = aggregate(&rows, |r| r.judge);
    assert_eq!(j.overall["v1"], 1.0);
    let c = cells(&rows);
    assert_eq!((c[0].scenario.as_str(), c[0].condition.as_str(), c[0].keyword_min), ("b", "v1", 0));
    assert_eq!(c.last().unwrap().condition, "full");
    assert_eq!(c[1].keyword_min, 1);
    assert_eq!(c[1].judge_min, Some(2));
}

#[test]
fn a_judge_is_evidence_only_when_all_four_brackets_hold() {
    let with = |identical: f64, paraphrase: f64, contradiction: f64, empty: f64| Brackets {
        judge: [("identical", identical), ("paraphrase", paraphrase), ("contradiction", contradiction), ("empty", empty)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        ..Brackets::default()
    };
    assert_eq!(Brackets::default().judge_holds(), None, "no judge ran");
    assert_eq!(with(3.0, 2.5, 0.3, 0.0).judge_holds(), Some(true));
    assert_eq!(with(3.0, 2.5, 0.3, 0.0).judge_heading(), "judge (0–3)");
    // Grades everything alike (the small models here), or misses one bound.
    assert_eq!(with(3.0, 3.0, 3.0, 3.0).judge_holds(), Some(false));
    assert_eq!(with(2.0, 2.5, 0.3, 0.0).judge_holds(), Some(false));
    assert_eq!(with(3.0, 1.5, 0.3, 0.0).judge_holds(), Some(false));
    assert_eq!(with(3.0, 2.5, 0.3, 1.0).judge_holds(), Some(false));
    assert!(with(3.0, 3.0, 3.0, 3.0).judge_heading().contains("not evidence"));
}
