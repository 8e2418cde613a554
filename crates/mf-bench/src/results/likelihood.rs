//! The likelihood figures of a run's rows: per probe ([`probe_facts`]),
//! then summarised with [`crate::likelihood::summarise`] (R and choice with
//! their intervals). Here, not in [`crate::likelihood`], because it reads the
//! results' rows, and the rows carry the likelihood scorer's types.

use std::collections::BTreeMap;

use super::{CompactionRow, ScoreRow};
use crate::likelihood::{LikelihoodSummary, ProbeFacts};

/// The per-probe figures of a run's rows: one [`ProbeFacts`] per scenario,
/// probe and repetition scored by likelihood; a condition whose compaction
/// made the scenario's history no smaller ("grew") is marked on it.
#[must_use]
pub fn probe_facts(rows: &[ScoreRow], comps: &[CompactionRow]) -> Vec<ProbeFacts> {
    let mut out: Vec<ProbeFacts> = Vec::new();
    for r in rows {
        let Some(l) = &r.likelihood else { continue };
        let key = format!("{}/{}#{}", r.scenario, r.probe, r.rep);
        let i = match out.iter().position(|p| p.key == key) {
            Some(i) => i,
            None => {
                let grew = comps
                    .iter()
                    .filter(|c| c.scenario == r.scenario && c.rep == r.rep && c.condition != "full" && c.error.is_none())
                    .filter(|c| c.tokens_after >= c.tokens_before)
                    .map(|c| c.condition.clone())
                    .collect();
                out.push(ProbeFacts {
                    key,
                    class: r.class.clone(),
                    dimension: r.dimension.clone(),
                    nll: BTreeMap::new(),
                    choice: BTreeMap::new(),
                    grew,
                    chance: None,
                });
                out.len() - 1
            }
        };
        let p = &mut out[i];
        p.nll.insert(r.condition.clone(), l.nll_facts);
        if let Some(c) = l.choice {
            p.choice.insert(r.condition.clone(), c);
            p.chance = Some(1.0 / (1.0 + l.wrong_logprob.len() as f64));
        }
    }
    out
}

/// The summary of a run's rows (`None` when no row was scored by likelihood).
#[must_use]
pub fn likelihood_summary(rows: &[ScoreRow], comps: &[CompactionRow], order: &[&str]) -> Option<LikelihoodSummary> {
    let facts = probe_facts(rows, comps);
    (!facts.is_empty()).then(|| crate::likelihood::summarise(&facts, order))
}
