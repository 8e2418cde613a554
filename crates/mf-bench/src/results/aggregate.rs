//! Aggregates recomputed from the rows: means and spreads over repetitions,
//! per condition, class and dimension, the worst cells, the control brackets.

use std::collections::BTreeMap;

use super::{Aggregates, Brackets, Cell, CompactionRow, ConditionSummary, ControlRow, ScoreRow, Stat};

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Statistic of `(rep, score)` pairs.
pub fn stat(items: &[(u32, f64)]) -> Option<Stat> {
    if items.is_empty() {
        return None;
    }
    let mut per_rep: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (r, s) in items {
        per_rep.entry(*r).or_default().push(*s);
    }
    let rep_means: Vec<f64> = per_rep.values().map(|v| mean(v)).collect();
    let all: Vec<f64> = items.iter().map(|x| x.1).collect();
    Some(Stat { mean: mean(&all), sd: sd(&rep_means), min: all.iter().copied().fold(f64::INFINITY, f64::min), n: all.len() })
}

/// Aggregates of one scorer over rows (`pick` returns the row's score).
pub fn aggregate(rows: &[ScoreRow], pick: impl Fn(&ScoreRow) -> Option<u8>) -> Aggregates {
    let mut overall: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut by_class: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let mut by_dim: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in rows {
        let Some(s) = pick(r) else { continue };
        let s = f64::from(s);
        overall.entry(r.condition.clone()).or_default().push(s);
        by_class.entry(r.class.clone()).or_default().entry(r.condition.clone()).or_default().push(s);
        by_dim.entry(r.dimension.clone()).or_default().entry(r.condition.clone()).or_default().push(s);
    }
    let fold = |m: BTreeMap<String, Vec<f64>>| m.into_iter().map(|(k, v)| (k, mean(&v))).collect::<BTreeMap<_, _>>();
    Aggregates {
        overall: fold(overall),
        by_class: by_class.into_iter().map(|(k, m)| (k, fold(m))).collect(),
        by_dimension: by_dim.into_iter().map(|(k, m)| (k, fold(m))).collect(),
    }
}

/// Cells (scenario × condition), worst first.
pub fn cells(rows: &[ScoreRow]) -> Vec<Cell> {
    let mut m: BTreeMap<(String, String), Vec<&ScoreRow>> = BTreeMap::new();
    for r in rows {
        m.entry((r.scenario.clone(), r.condition.clone())).or_default().push(r);
    }
    let mut out: Vec<Cell> = m
        .into_iter()
        .map(|((scenario, condition), rs)| {
            let kw: Vec<f64> = rs.iter().map(|r| f64::from(r.score)).collect();
            let j: Vec<u8> = rs.iter().filter_map(|r| r.judge).collect();
            Cell {
                scenario,
                condition,
                keyword_mean: mean(&kw),
                keyword_min: rs.iter().map(|r| r.score).min().unwrap_or(0),
                judge_mean: (!j.is_empty()).then(|| mean(&j.iter().map(|&x| f64::from(x)).collect::<Vec<_>>())),
                judge_min: j.iter().copied().min(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.keyword_mean
            .total_cmp(&b.keyword_mean)
            .then(a.judge_mean.unwrap_or(0.0).total_cmp(&b.judge_mean.unwrap_or(0.0)))
            .then(a.scenario.cmp(&b.scenario))
            .then(a.condition.cmp(&b.condition))
    });
    out
}

/// Per-condition summaries (in `conditions` order) over rows and compactions.
pub fn condition_summaries(conditions: &[&str], rows: &[ScoreRow], comps: &[CompactionRow], judged: bool) -> Vec<ConditionSummary> {
    conditions
        .iter()
        .map(|&name| {
            let rs: Vec<&ScoreRow> = rows.iter().filter(|r| r.condition == name).collect();
            let failures = comps.iter().filter(|r| r.condition == name && r.error.is_some()).count();
            let cs: Vec<&CompactionRow> = comps.iter().filter(|r| r.condition == name && r.error.is_none()).collect();
            let kw: Vec<(u32, f64)> = rs.iter().map(|r| (r.rep, f64::from(r.score))).collect();
            let j: Vec<(u32, f64)> = rs.iter().filter_map(|r| r.judge.map(|s| (r.rep, f64::from(s)))).collect();
            let n = cs.len().max(1) as f64;
            ConditionSummary {
                condition: name.to_owned(),
                keyword: stat(&kw).unwrap_or(Stat { mean: 0.0, sd: 0.0, min: 0.0, n: 0 }),
                judge: if judged { stat(&j) } else { None },
                tokens_before: cs.iter().map(|r| r.tokens_before as f64).sum::<f64>() / n,
                tokens_after: cs.iter().map(|r| r.tokens_after as f64).sum::<f64>() / n,
                fallbacks: cs.iter().filter(|r| r.fallback.is_some()).count(),
                empty_answers: rs.iter().filter(|r| r.answer.is_empty() && r.stop_reason != super::COMPACTION_FAILED).count(),
                compaction_failures: failures,
                not_applied: cs.iter().filter(|r| r.kept_original.is_some()).count(),
            }
        })
        .collect()
}

/// Control brackets over control rows.
pub fn brackets(rows: &[ControlRow], judged: bool) -> Brackets {
    let mut kw: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut j: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut unparsed = 0;
    let mut probes = std::collections::BTreeSet::new();
    for r in rows {
        probes.insert((r.scenario.clone(), r.probe.clone()));
        kw.entry(r.control.clone()).or_default().push(f64::from(r.keyword));
        if judged {
            match r.judge {
                Some(s) => j.entry(r.control.clone()).or_default().push(f64::from(s)),
                None => unparsed += 1,
            }
        }
    }
    let mut b = Brackets {
        keyword: kw.into_iter().map(|(k, v)| (k, mean(&v))).collect(),
        judge: j.into_iter().map(|(k, v)| (k, mean(&v))).collect(),
        judge_unparsed: unparsed,
        probes: probes.len(),
        judge_evidence: None,
    };
    b.judge_evidence = b.judge_holds();
    b
}
