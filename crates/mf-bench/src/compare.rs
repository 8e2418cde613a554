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

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{BenchError, Result};
use crate::model::CallStats;
use crate::results::{CompactionRow, ModelResult};

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
    /// Keyword mean, first run.
    pub keyword_before: f64,
    /// Keyword mean, second run.
    pub keyword_after: f64,
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
    /// Per condition, in the first run's order.
    pub conditions: Vec<ConditionRow>,
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

/// Compares two runs of the same model over the same scenarios, conditions
/// and repetitions.
///
/// # Errors
/// [`BenchError::Incomparable`] when the runs are of different models, scenario
/// sets or conditions: their answers could not be paired.
pub fn compare(before: &ModelResult, after: &ModelResult) -> Result<Comparison> {
    let refuse = BenchError::Incomparable;
    if before.model != after.model {
        return Err(refuse(format!("the runs are of two models ({} and {})", before.model, after.model)));
    }
    if before.settings.scenarios != after.settings.scenarios {
        return Err(refuse("the runs are over different scenarios".into()));
    }
    let conditions = |r: &ModelResult| r.conditions.iter().map(|c| c.condition.clone()).collect::<Vec<_>>();
    if conditions(before) != conditions(after) {
        return Err(refuse("the runs are of different conditions".into()));
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
    let mut rows = Vec::new();
    for c in &before.conditions {
        let mut row = ConditionRow {
            condition: c.condition.clone(),
            answers: 0,
            equal_answers: 0,
            equal_scores: 0,
            compactions: 0,
            same_context: 0,
            answers_same_context: 0,
            equal_answers_same_context: 0,
            keyword_before: c.keyword.mean,
            keyword_after: after.conditions.iter().find(|x| x.condition == c.condition).map_or(0.0, |x| x.keyword.mean),
        };
        for (_, &s) in same.iter().filter(|(k, _)| k.1 == c.condition) {
            row.compactions += 1;
            row.same_context += usize::from(s);
        }
        for b in before.scores.iter().filter(|s| s.condition == c.condition) {
            let Some(a) = after_answers.get(&(b.scenario.clone(), b.condition.clone(), b.rep, b.probe.clone())) else { continue };
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
    })
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
            "\n| condition | same answer | same keyword score | same compacted context | same answer where the context is the same | keyword mean, first → second |"
        );
        let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | --- |");
        for r in &c.conditions {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {}{} | {} | {:.2} → {:.2} |",
                r.condition,
                of(r.equal_answers, r.answers),
                of(r.equal_scores, r.answers),
                of(r.same_context, r.compactions),
                if DETERMINISTIC.contains(&r.condition.as_str()) { "" } else { " (by size)" },
                of(r.equal_answers_same_context, r.answers_same_context),
                r.keyword_before,
                r.keyword_after
            );
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
    fn runs_that_cannot_be_paired_are_refused() {
        let a = committed("smollm2-multihop-medium-plain.json");
        let mut b = a.clone();
        b.model = "another".into();
        assert!(compare(&a, &b).unwrap_err().to_string().contains("two models"));
        let mut b = a.clone();
        b.settings.scenarios.push("lookup-short".into());
        assert!(compare(&a, &b).unwrap_err().to_string().contains("different scenarios"));
        assert!(compare_files(&[a.clone()], &[]).unwrap_err().to_string().contains("second file has no run"));
    }
}
