//! Results of one model run over disjoint scenario sets, merged into one.

use super::{ModelResult, aggregate, brackets, cells, condition_summaries};
use crate::model::CallStats;

/// The withholding budget of two runs merged. An exact run (budget 0) merges
/// with a budgeted run (budget B) when each of its v2.1 compactions made at
/// most B evaluations: with budget B those compactions would have run the
/// exact test too (a budget above the unit count is the exact test), so both
/// runs are what budget B gives. Otherwise the settings differ.
fn merged_withholding_budget(a: &ModelResult, b: &ModelResult) -> Result<usize, String> {
    let (x, y) = (a.settings.withholding_budget, b.settings.withholding_budget);
    if x == y {
        return Ok(x);
    }
    let (exact, budget) = match (x, y) {
        (0, n) => (a, n),
        (n, 0) => (b, n),
        _ => return Err(format!("{}: the runs' v2.1 withholding budgets differ ({x} vs {y})", a.model)),
    };
    let over = exact.compactions.iter().find(|c| c.condition == "v2.1" && c.evaluator_calls > budget);
    match over {
        None => Ok(budget),
        Some(c) => Err(format!(
            "{}: the exact run's v2.1 compaction of {} made {} evaluations, more than the other run's budget of {budget}: the runs are not comparable",
            a.model, c.scenario, c.evaluator_calls
        )),
    }
}

/// Merges results of one model run over disjoint scenario sets (e.g. the
/// short, medium and long scenarios run one after the other) into one, with
/// every aggregate recomputed from the rows. Wall times and call figures add
/// up; the settings must agree except for the scenario list.
///
/// # Errors
/// Nothing to merge, different models, or settings that differ.
pub fn merge(parts: Vec<ModelResult>) -> Result<ModelResult, String> {
    let mut it = parts.into_iter();
    let Some(mut m) = it.next() else { return Err("nothing to merge".to_owned()) };
    for p in it {
        if p.model != m.model {
            return Err(format!("cannot merge results of {} with {}", p.model, m.model));
        }
        let budget = merged_withholding_budget(&m, &p)?;
        let mut a = p.settings.clone();
        let mut b = m.settings.clone();
        a.scenarios.clear();
        b.scenarios.clear();
        a.withholding_budget = budget;
        b.withholding_budget = budget;
        m.settings.withholding_budget = budget;
        if a != b {
            return Err(format!("{}: the runs' settings differ ({a:?} vs {b:?})", m.model));
        }
        if p.settings.scenarios.iter().any(|s| m.settings.scenarios.contains(s)) {
            return Err(format!("{}: the runs share scenarios", m.model));
        }
        m.settings.scenarios.extend(p.settings.scenarios);
        m.scores.extend(p.scores);
        m.controls.extend(p.controls);
        m.compactions.extend(p.compactions);
        m.empty_by_budget += p.empty_by_budget;
        m.wall_s += p.wall_s;
        for (k, v) in p.speed.calls {
            m.speed.calls.entry(k).or_default().merge(&v);
        }
        m.speed.answers_shared += p.speed.answers_shared;
        m.speed.grades_shared += p.speed.grades_shared;
    }
    let judged = m.judge.is_some();
    let names: Vec<String> = m.conditions.iter().map(|c| c.condition.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let rows = super::answered(&m.scores);
    m.conditions = condition_summaries(&names, &rows, &m.compactions, judged);
    let kw = aggregate(&rows, |r| Some(r.score));
    m.overall = kw.overall;
    m.by_class = kw.by_class;
    m.by_dimension = kw.by_dimension;
    m.judge = judged.then(|| aggregate(&rows, |r| r.judge));
    m.worst_cells = cells(&rows);
    m.likelihood = super::likelihood_summary(&m.scores, &m.compactions, &names);
    m.control_brackets = brackets(&m.controls, judged);
    if m.speed.probe_prefill_ratio.is_some() {
        let probe = m.speed.calls.get("probe").copied().unwrap_or_default();
        let mut all = CallStats::default();
        for v in m.speed.calls.values() {
            all.merge(v);
        }
        m.speed.probe_prefill_ratio = probe.prefill_ratio();
        m.speed.total_prefill_ratio = all.prefill_ratio();
    }
    Ok(m)
}
