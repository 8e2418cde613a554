//! Two runs of the same suite side by side (`bench-forgetting compare`): the
//! wall time and the decoded tokens of each kind of call, and whether the
//! answers agree. It is the check that a faster path (branched calls, a
//! new build) changes no result: where the compacted context is the same,
//! greedy answers should be the same, and where they differ the table says
//! how often.
//!
//! "Same context" is exact for `full`, `baseline` and `masking` (no model
//! call shapes them). For `v1`, `v2` and `v2.1` a summary or the withholding
//! test is model output; the compaction counts as the same when its size in
//! messages and tokens, what it kept verbatim and dropped, and its fallback
//! are equal. That is a proxy, and the table names it.
//!
//! It is also how two ways of measuring v2.1's `Δ` are compared (`--delta
//! model` against `--delta likelihood`): where both runs recorded the
//! withholding test's `Δ` per message, the rankings' agreement (Spearman's
//! ρ per compaction), the v2.1 compactions' wall time and evaluator calls,
//! and the retention `R` each condition kept. Runs of different condition
//! sets are compared over the conditions they share.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{BenchError, Result};
use crate::likelihood::{Interval, fmt_interval};
use crate::model::CallStats;
use crate::results::{CompactionRow, ModelResult, NOT_GENERATED, generated_answers};

/// Conditions whose compacted context no model call shapes.
const DETERMINISTIC: [&str; 3] = ["full", "baseline", "masking"];

/// One kind of call (probe, summary, evaluator, judge) in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct KindRow {
    /// The kind (`probe`, `summary`, `evaluator`, `judge`).
    pub kind: String,
    /// Its calls in the first run.
    pub before: CallStats,
    /// Its calls in the second run.
    pub after: CallStats,
}

/// The answers of one condition in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionRow {
    /// The condition.
    pub condition: String,
    /// Probe answers found in both runs.
    pub answers: usize,
    /// Of those, identical text.
    pub equal_answers: usize,
    /// Of those, the same keyword score.
    pub equal_scores: usize,
    /// Compactions found in both runs.
    pub compactions: usize,
    /// Of those, the same compacted context (exact for deterministic
    /// conditions, else the size proxy of the module docs).
    pub same_context: usize,
    /// Answers whose compacted context was the same.
    pub answers_same_context: usize,
    /// Of those, identical text.
    pub equal_answers_same_context: usize,
    /// Keyword mean, first run (`None` when it generated no answer here: a likelihood-only run).
    pub keyword_before: Option<f64>,
    /// Keyword mean, second run (`None` as above).
    pub keyword_after: Option<f64>,
    /// Retention by likelihood in each run (when it was scored).
    pub retention: (Option<Interval>, Option<Interval>),
    /// Compaction wall time summed over the condition's compactions, ms, in each run.
    pub compaction_ms: (u64, u64),
    /// v2.1 evaluator calls summed over them, in each run.
    pub evaluator_calls: (usize, usize),
}

/// How the two runs' v2.1 rankings agree, where both recorded `Δ`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaAgreement {
    /// How each run measured `Δ` (`model`, `likelihood`, `phi`).
    pub sources: (String, String),
    /// Spearman's ρ between the two runs' `Δ` over the messages both
    /// ranked, per compaction (`scenario#rep`), in scenario order; `None`
    /// where one ranking is constant (every unit the same `Δ`).
    pub rho: Vec<(String, Option<f64>)>,
}

impl DeltaAgreement {
    /// The mean ρ over compactions where it is defined, and how many those are.
    #[must_use]
    pub fn mean(&self) -> (Option<f64>, usize) {
        let v: Vec<f64> = self.rho.iter().filter_map(|(_, r)| *r).collect();
        ((!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64), v.len())
    }
}

/// Ranks with ties averaged (1-based).
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut out = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            out[k] = r;
        }
        i = j + 1;
    }
    out
}

/// Spearman's ρ (Pearson's r of the tie-averaged ranks); `None` for fewer
/// than two pairs or a constant side.
#[must_use]
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

/// Two runs of one model over the same scenarios.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The model.
    pub model: String,
    /// Scenarios in each run.
    pub scenarios: usize,
    /// Workers of each run.
    pub workers: (usize, usize),
    /// Wall time of each run, seconds.
    pub wall_s: (f64, f64),
    /// Per kind of call, in name order.
    pub kinds: Vec<KindRow>,
    /// Per condition both runs have, in the first run's order.
    pub conditions: Vec<ConditionRow>,
    /// v2.1's rankings compared, when both runs recorded them.
    pub delta: Option<DeltaAgreement>,
}

fn same_compaction(a: &CompactionRow, b: &CompactionRow) -> bool {
    a.tokens_after == b.tokens_after
        && a.messages_after == b.messages_after
        && a.verbatim == b.verbatim
        && a.dropped == b.dropped
        && a.fallback == b.fallback
        && a.error == b.error
        && a.kept_original == b.kept_original
}

/// Compares two runs of the same model over the same scenarios and
/// repetitions, on the conditions both ran.
///
/// # Errors
/// [`BenchError::Incomparable`] when the runs are of different models or
/// scenario sets, or share no condition: their answers could not be paired.
pub fn compare(before: &ModelResult, after: &ModelResult) -> Result<Comparison> {
    let refuse = BenchError::Incomparable;
    if before.model != after.model {
        return Err(refuse(format!("the runs are of two models ({} and {})", before.model, after.model)));
    }
    if before.settings.scenarios != after.settings.scenarios {
        return Err(refuse("the runs are over different scenarios".into()));
    }
    let shared: Vec<&str> = before.conditions.iter().map(|c| c.condition.as_str()).filter(|c| after.conditions.iter().any(|a| a.condition == *c)).collect();
    if shared.is_empty() {
        return Err(refuse("the runs share no condition".into()));
    }
    let mut names: Vec<&String> = before.speed.calls.keys().chain(after.speed.calls.keys()).collect();
    names.sort();
    names.dedup();
    let kinds = names
        .into_iter()
        .map(|k| KindRow {
            kind: k.clone(),
            before: before.speed.calls.get(k).cloned().unwrap_or_default(),
            after: after.speed.calls.get(k).cloned().unwrap_or_default(),
        })
        .collect();

    let key = |s: &str, c: &str, rep: u32| (s.to_owned(), c.to_owned(), rep);
    let after_compactions: BTreeMap<_, _> = after.compactions.iter().map(|c| (key(&c.scenario, &c.condition, c.rep), c)).collect();
    let same: BTreeMap<_, bool> = before
        .compactions
        .iter()
        .filter_map(|b| {
            let a = after_compactions.get(&key(&b.scenario, &b.condition, b.rep))?;
            let exact = DETERMINISTIC.contains(&b.condition.as_str());
            Some((key(&b.scenario, &b.condition, b.rep), exact || same_compaction(b, a)))
        })
        .collect();
    let after_answers: BTreeMap<_, _> = after.scores.iter().map(|s| ((s.scenario.clone(), s.condition.clone(), s.rep, s.probe.clone()), s)).collect();
    let retention = |r: &ModelResult, c: &str| r.likelihood.as_ref().and_then(|l| l.conditions.iter().find(|x| x.condition == c)).and_then(|x| x.retention);
    let comp_sums = |r: &ModelResult, c: &str| {
        r.compactions.iter().filter(|x| x.condition == c).fold((0u64, 0usize), |(ms, calls), x| (ms + x.compaction_ms, calls + x.evaluator_calls))
    };
    // A run scored by likelihood alone has rows without answers: nothing to pair or average there.
    let (generated_before, generated_after) = (generated_answers(&before.scores), generated_answers(&after.scores));
    let mut rows = Vec::new();
    for c in before.conditions.iter().filter(|c| shared.contains(&c.condition.as_str())) {
        let (ms0, ev0) = comp_sums(before, &c.condition);
        let (ms1, ev1) = comp_sums(after, &c.condition);
        let mut row = ConditionRow {
            condition: c.condition.clone(),
            answers: 0,
            equal_answers: 0,
            equal_scores: 0,
            compactions: 0,
            same_context: 0,
            answers_same_context: 0,
            equal_answers_same_context: 0,
            keyword_before: generated_before.then_some(c.keyword.mean),
            keyword_after: after.conditions.iter().find(|x| x.condition == c.condition).filter(|_| generated_after).map(|x| x.keyword.mean),
            retention: (retention(before, &c.condition), retention(after, &c.condition)),
            compaction_ms: (ms0, ms1),
            evaluator_calls: (ev0, ev1),
        };
        for (_, &s) in same.iter().filter(|(k, _)| k.1 == c.condition) {
            row.compactions += 1;
            row.same_context += usize::from(s);
        }
        for b in before.scores.iter().filter(|s| s.condition == c.condition) {
            let Some(a) = after_answers.get(&(b.scenario.clone(), b.condition.clone(), b.rep, b.probe.clone())) else { continue };
            if a.stop_reason == NOT_GENERATED || b.stop_reason == NOT_GENERATED {
                continue;
            }
            let equal = a.answer == b.answer;
            row.answers += 1;
            row.equal_answers += usize::from(equal);
            row.equal_scores += usize::from(a.score == b.score);
            if same.get(&key(&b.scenario, &b.condition, b.rep)).copied().unwrap_or(false) {
                row.answers_same_context += 1;
                row.equal_answers_same_context += usize::from(equal);
            }
        }
        rows.push(row);
    }
    Ok(Comparison {
        model: before.model.clone(),
        scenarios: before.settings.scenarios.len(),
        workers: (before.speed.workers, after.speed.workers),
        wall_s: (before.wall_s, after.wall_s),
        kinds,
        conditions: rows,
        delta: delta_agreement(before, after),
    })
}

/// v2.1's rankings in both runs compared, compaction by compaction.
fn delta_agreement(before: &ModelResult, after: &ModelResult) -> Option<DeltaAgreement> {
    let mut rho = Vec::new();
    for b in before.compactions.iter().filter(|c| c.condition == "v2.1" && !c.deltas.is_empty()) {
        let Some(a) = after.compactions.iter().find(|a| a.condition == "v2.1" && a.scenario == b.scenario && a.rep == b.rep && !a.deltas.is_empty()) else {
            continue;
        };
        let (xs, ys): (Vec<f64>, Vec<f64>) = b.deltas.iter().filter_map(|(id, x)| a.deltas.get(id).map(|y| (*x, *y))).unzip();
        rho.push((format!("{}#{}", b.scenario, b.rep), spearman(&xs, &ys)));
    }
    let source = |r: &ModelResult| r.settings.delta.clone().unwrap_or_else(|| "model".to_owned());
    (!rho.is_empty()).then(|| DeltaAgreement { sources: (source(before), source(after)), rho })
}

/// Compares every model of `after` with the same model in `before`.
///
/// # Errors
/// As [`compare`]; a model of one file missing from the other.
pub fn compare_files(before: &[ModelResult], after: &[ModelResult]) -> Result<Vec<Comparison>> {
    let mut out = Vec::new();
    for b in before {
        let a = after.iter().find(|a| a.model == b.model).ok_or_else(|| BenchError::Incomparable(format!("the second file has no run of {}", b.model)))?;
        out.push(compare(b, a)?);
    }
    if let Some(a) = after.iter().find(|a| !before.iter().any(|b| b.model == a.model)) {
        return Err(BenchError::Incomparable(format!("the first file has no run of {}", a.model)));
    }
    Ok(out)
}

fn ratio(before: f64, after: f64) -> String {
    if before > 0.0 { format!("{:.2}", after / before) } else { "–".to_owned() }
}

fn of(n: usize, total: usize) -> String {
    if total == 0 { "–".to_owned() } else { format!("{n}/{total}") }
}

/// The comparisons as Markdown: the time table, then the agreement table.
#[must_use]
pub fn markdown(comparisons: &[Comparison]) -> String {
    let mut out = String::new();
    for c in comparisons {
        let _ = writeln!(out, "#### {}: first run → second run\n", c.model);
        let _ = writeln!(out, "{} scenarios; {} worker(s) → {} worker(s).\n", c.scenarios, c.workers.0, c.workers.1);
        let _ = writeln!(out, "| | first | second | second / first |");
        let _ = writeln!(out, "| --- | ---: | ---: | ---: |");
        let _ = writeln!(out, "| wall time | {:.0} s | {:.0} s | {} |", c.wall_s.0, c.wall_s.1, ratio(c.wall_s.0, c.wall_s.1));
        let total = |f: &dyn Fn(&CallStats) -> u64, after: bool| c.kinds.iter().map(|k| f(if after { &k.after } else { &k.before })).sum::<u64>();
        let decoded = |s: &CallStats| s.decoded_tokens;
        let (d0, d1) = (total(&decoded, false), total(&decoded, true));
        let _ = writeln!(out, "| tokens decoded, all calls | {d0} | {d1} | {} |", ratio(d0 as f64, d1 as f64));
        for k in &c.kinds {
            let (b, a) = (k.before.decoded_tokens, k.after.decoded_tokens);
            let _ = writeln!(out, "| tokens decoded, {} | {b} | {a} | {} |", k.kind, ratio(b as f64, a as f64));
        }
        for k in &c.kinds {
            let (b, a) = (k.before.wall_ms as f64 / 1000.0, k.after.wall_ms as f64 / 1000.0);
            let _ = writeln!(out, "| call time, {} (summed over workers) | {b:.0} s | {a:.0} s | {} |", k.kind, ratio(b, a));
        }
        let _ = writeln!(
            out,
            "\n| condition | same answer | same keyword score | same compacted context | same answer where the context is the same | keyword mean, first → second | retention R, first → second | compaction time, first → second | evaluator calls, first → second |"
        );
        let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |");
        for r in &c.conditions {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {}{} | {} | {} → {} | {} → {} | {:.0} s → {:.0} s | {} → {} |",
                r.condition,
                of(r.equal_answers, r.answers),
                of(r.equal_scores, r.answers),
                of(r.same_context, r.compactions),
                if DETERMINISTIC.contains(&r.condition.as_str()) { "" } else { " (by size)" },
                of(r.equal_answers_same_context, r.answers_same_context),
                r.keyword_before.map_or("–".to_owned(), |k| format!("{k:.2}")),
                r.keyword_after.map_or("–".to_owned(), |k| format!("{k:.2}")),
                fmt_interval(r.retention.0.as_ref()),
                fmt_interval(r.retention.1.as_ref()),
                r.compaction_ms.0 as f64 / 1000.0,
                r.compaction_ms.1 as f64 / 1000.0,
                r.evaluator_calls.0,
                r.evaluator_calls.1
            );
        }
        if let Some(d) = &c.delta {
            let (mean, n) = d.mean();
            let lo = d.rho.iter().filter_map(|(_, r)| *r).fold(f64::INFINITY, f64::min);
            let hi = d.rho.iter().filter_map(|(_, r)| *r).fold(f64::NEG_INFINITY, f64::max);
            let _ = writeln!(
                out,
                "\nv2.1's Δ, {} (first) against {} (second): Spearman's ρ between the two rankings over the messages both ranked, {} of {} compactions with a defined ρ (a constant ranking has none): mean {}{}.\n",
                d.sources.0,
                d.sources.1,
                n,
                d.rho.len(),
                mean.map_or("–".to_owned(), |m| format!("{m:.2}")),
                if n > 0 { format!(", range [{lo:.2}, {hi:.2}]") } else { String::new() }
            );
            let _ = writeln!(out, "| compaction | ρ |");
            let _ = writeln!(out, "| --- | ---: |");
            for (k, r) in &d.rho {
                let _ = writeln!(out, "| {k} | {} |", r.map_or("– (constant)".to_owned(), |r| format!("{r:.2}")));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::results::ModelResult;

    fn committed(name: &str) -> ModelResult {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results").join(name);
        let crate::report::ResultsFile::Suite(mut r) = crate::report::read_results(&path).unwrap() else { panic!("not a suite file") };
        r.remove(0)
    }

    #[test]
    fn a_run_compared_with_itself_agrees_everywhere() {
        let r = committed("smollm2-multihop-medium-plain.json");
        let c = compare(&r, &r).unwrap();
        assert_eq!(c.conditions.len(), 6);
        for row in &c.conditions {
            assert_eq!(row.answers, 3, "{row:?}");
            assert_eq!(row.equal_answers, row.answers);
            assert_eq!(row.same_context, row.compactions);
            assert_eq!(row.equal_answers_same_context, row.answers_same_context);
        }
        assert!(markdown(&[c]).contains("| full | 3/3 | 3/3 | 1/1 | 3/3 | 0.00 → 0.00 |"));
    }

    #[test]
    fn a_changed_answer_and_a_changed_summary_are_counted() {
        let before = committed("smollm2-multihop-medium-plain.json");
        let mut after = before.clone();
        let i = after.scores.iter().position(|s| s.condition == "full").unwrap();
        after.scores[i].answer.push_str(" (changed)");
        let v1 = after.compactions.iter_mut().find(|c| c.condition == "v1").unwrap();
        v1.tokens_after += 1;
        after.wall_s = before.wall_s / 2.0;
        let c = compare(&before, &after).unwrap();
        let row = |name: &str| c.conditions.iter().find(|r| r.condition == name).unwrap().clone();
        assert_eq!((row("full").equal_answers, row("full").answers), (2, 3));
        assert_eq!(row("full").equal_scores, 3, "the keyword score did not change");
        assert_eq!((row("v1").same_context, row("v1").answers_same_context), (0, 0));
        assert_eq!(row("v1").equal_answers, 3);
        assert!(markdown(&[c]).contains("| 0.50 |"), "the wall-time ratio");
    }

    #[test]
    fn a_run_without_answers_pairs_none_and_shows_no_keyword_mean() {
        let before = committed("smollm2-multihop-medium-plain.json");
        let mut after = before.clone();
        for s in after.scores.iter_mut() {
            s.stop_reason = NOT_GENERATED.to_owned();
            s.answer.clear();
        }
        let c = compare(&before, &after).unwrap();
        for row in &c.conditions {
            assert_eq!((row.answers, row.answers_same_context), (0, 0), "{row:?}");
            assert_eq!((row.keyword_before.is_some(), row.keyword_after), (true, None), "{row:?}");
        }
        assert!(markdown(&[c]).contains("| full | – | – | 1/1 | – | 0.00 → – |"));
    }

    #[test]
    fn runs_that_cannot_be_paired_are_refused() {
        let a = committed("smollm2-multihop-medium-plain.json");
        let mut b = a.clone();
        b.model = "another".into();
        assert!(compare(&a, &b).unwrap_err().to_string().contains("two models"));
        let mut b = a.clone();
        b.settings.scenarios.push("lookup-short".into());
        assert!(compare(&a, &b).unwrap_err().to_string().contains("different scenarios"));
        assert!(compare_files(std::slice::from_ref(&a), &[]).unwrap_err().to_string().contains("second file has no run"));
        let mut b = a.clone();
        b.conditions.retain(|c| c.condition == "v2.1");
        assert_eq!(compare(&a, &b).unwrap().conditions.len(), 1, "compared on the shared conditions");
        b.conditions.clear();
        assert!(compare(&a, &b).unwrap_err().to_string().contains("share no condition"));
    }

    #[test]
    fn spearman_handles_ties_and_constants() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
        // Ties take their average rank: [1, 2.5, 2.5, 4] against [1, 2, 3, 4].
        let r = spearman(&[0.1, 0.5, 0.5, 0.9], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((r - 0.9486832980505138).abs() < 1e-9, "{r}");
        assert_eq!(spearman(&[0.2, 0.2, 0.2], &[1.0, 2.0, 3.0]), None);
        assert_eq!(spearman(&[1.0], &[1.0]), None);
    }

    #[test]
    fn two_delta_sources_are_compared_on_the_messages_both_ranked() {
        let before = committed("smollm2-multihop-medium-plain.json");
        let mut after = before.clone();
        after.settings.delta = Some("likelihood".into());
        let i = before.compactions.iter().position(|c| c.condition == "v2.1").unwrap();
        let mut b = before.clone();
        b.compactions[i].deltas = [("m2", 0.5), ("m3", 0.1), ("m4", 0.3)].into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        after.compactions[i].deltas = [("m2", 0.9), ("m3", 0.0), ("m4", 0.2), ("m9", 1.0)].into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let c = compare(&b, &after).unwrap();
        let d = c.delta.clone().unwrap();
        assert_eq!(d.sources, ("model".to_owned(), "likelihood".to_owned()));
        assert_eq!(d.rho.len(), 1);
        assert!((d.rho[0].1.unwrap() - 1.0).abs() < 1e-12, "same order over m2, m3, m4: {d:?}");
        assert!(markdown(&[c]).contains("model (first) against likelihood (second)"));
        assert!(compare(&before, &before).unwrap().delta.is_none(), "no Δ recorded, no agreement table");
    }
}
