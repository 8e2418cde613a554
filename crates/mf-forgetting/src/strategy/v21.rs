//! v2.1: units ranked by the withholding test (METHOD.md §4), Φ as ablation.
//!
//! [`V21::plan`] in steps: score every unit (`V21::scores`: Δ through the
//! injected evaluator, or Φ-influence), give each a tier by its score
//! (`tiers`: ≈ 0 drop, at least a fraction of the highest verbatim, light
//! otherwise), then the budget step shared with v2
//! (`units::restore_budget`).

use std::collections::BTreeMap;

use super::analysis::{Analysis, analyse};
use super::base::{base, finish};
use super::units::{UnitTiers, restore_budget};
use super::withholding::withholding;
use super::{Strategy, needs_evaluator};
use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::evaluator::ProbeEvaluator;
use crate::message::Message;
use crate::plan::{CompactionPlan, PlanConfig, Ranking, StrategyKind, Tier};
use crate::reason::Reason;
use crate::tokens::TokenCounter;

/// v2.1: the withholding test `Δ(m) = Perf(ctx) − Perf(ctx \ m)` per unit:
/// high Δ verbatim, low Δ summarised, Δ ≈ 0 dropped. With
/// [`Ranking::Phi`] the v2 influence takes Δ's place (the ablation arm).
pub struct V21<'a> {
    /// Settings.
    pub config: PlanConfig,
    evaluator: Option<&'a mut dyn ProbeEvaluator>,
}

impl<'a> V21<'a> {
    /// v2.1 ranking by Δ through `evaluator`.
    pub fn new(config: PlanConfig, evaluator: &'a mut dyn ProbeEvaluator) -> Self {
        V21 { config, evaluator: Some(evaluator) }
    }

    /// v2.1 with the Φ ranking (no evaluator).
    pub fn phi(mut config: PlanConfig) -> Self {
        config.ranking = Ranking::Phi;
        V21 { config, evaluator: None }
    }
}

/// Each unit's score, and the size of the block it was withheld in (when
/// the budgeted test withheld it with others).
struct Scored {
    score: BTreeMap<usize, f64>,
    block: BTreeMap<usize, usize>,
}

impl V21<'_> {
    /// Step 1: a score per unit, Δ or Φ-influence; notes what was measured.
    fn scores(&mut self, p: &mut CompactionPlan, a: &Analysis, messages: &[Message]) -> Result<Scored, ForgettingError> {
        let cfg = &self.config;
        let mut s = Scored { score: BTreeMap::new(), block: BTreeMap::new() };
        match (cfg.ranking, self.evaluator.as_deref_mut()) {
            (Ranking::Withholding, Some(e)) => {
                p.notes.push(format!("Δ by {}", e.describe()));
                if a.units.is_empty() {
                    return Ok(s);
                }
                let w = withholding(e, messages, &a.units, cfg.withholding_budget, cfg.drop_epsilon)?;
                if w.evaluations <= a.units.len() {
                    p.notes.push(format!(
                        "budgeted withholding test: {} evaluations for {} units (the exact test takes {}); units share the Δ of the block they were withheld in",
                        w.evaluations,
                        a.units.len(),
                        a.units.len() + 1
                    ));
                }
                for (&u, &(d, size)) in &w.delta {
                    s.score.insert(u, d);
                    if size > 1 {
                        s.block.insert(u, size);
                    }
                    for &i in &a.units[&u] {
                        p.messages[i].delta = Some(d);
                    }
                }
            }
            (Ranking::Withholding, None) => return Err(needs_evaluator()),
            (Ranking::Phi, _) => {
                p.notes.push("ranking by Φ-weighted influence (ablation arm of v2.1)".to_owned());
                for &u in a.units.keys() {
                    s.score.insert(u, a.unit_max_influence(u));
                }
            }
        }
        Ok(s)
    }
}

/// Step 2: a tier per unit from its score: at most `drop_epsilon` drop, at
/// least `verbatim_fraction` of the highest verbatim, light otherwise.
fn tiers(score: &BTreeMap<usize, f64>, max: f64, cfg: &PlanConfig) -> UnitTiers {
    let mut units = UnitTiers::default();
    for (&u, &s) in score {
        let t = if s <= cfg.drop_epsilon {
            Tier::Drop
        } else if s >= cfg.verbatim_fraction * max {
            Tier::Verbatim
        } else {
            Tier::Light
        };
        units.tier.insert(u, t);
    }
    units
}

impl Strategy for V21<'_> {
    fn kind(&self) -> StrategyKind {
        StrategyKind::V21
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let cfg = self.config.clone();
        let b = base(messages, budget, counter, &cfg)?;
        let a = analyse(messages, &b.zones, &b.chains, &cfg);
        let mut p = finish(StrategyKind::V21, b, messages, budget, counter, &cfg);
        a.record(&mut p);
        let Scored { score, block } = self.scores(&mut p, &a, messages)?;
        let max = score.values().copied().fold(0.0, f64::max);
        let mut units = tiers(&score, max, &cfg);
        if max <= cfg.drop_epsilon && !score.is_empty() {
            let name = match cfg.ranking {
                Ranking::Withholding => "Δ",
                Ranking::Phi => "Φ-influence",
            };
            p.notes.push(format!("every {name} is ≈ 0: the whole compressible zone is dropped"));
        }
        // Each member's own reason: the unit's score and the tier it earned
        // (a later demotion is a unit reason after it).
        for (&u, members) in &a.units {
            let earned = Reason::Ranked {
                ranking: cfg.ranking,
                score: score[&u],
                tier: units.tier[&u],
                verbatim_fraction: cfg.verbatim_fraction,
                max,
                chain: (members.len() > 1).then_some(u),
                block: block.get(&u).copied(),
            };
            for &i in members {
                p.messages[i].reason = earned.clone().into();
            }
        }
        restore_budget(&mut p, messages, counter, &a.units, &mut units, &|u| score[&u]);
        p.median_influence = Some(a.median);
        p.class = Some(a.class);
        Ok(p)
    }
}

#[cfg(test)]
mod tests;
