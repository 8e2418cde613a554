//! Dimension-aware compression (METHOD.md §3).
//!
//! [`V2::plan`] in named steps:
//!
//! 1. `grade_messages`: each compressible message starts heavy, light or
//!    verbatim by its influence `I(m)`, its breadth `B_m` and whether it is
//!    a chain member or an error;
//! 2. `grade_units`: a unit (a tool chain, never split) takes its best
//!    member's grade — but a chain whose tool messages all failed is heavy;
//! 3. `rules::class_rules`: the problem class raises or lowers units;
//! 4. `rules::fold_saturated`: 3+ messages with the same kind of
//!    information fold into one line;
//! 5. `units::restore_budget`: the tiers are written and verbatim
//!    units are demoted, lowest influence first, until the estimate fits.

mod rules;

use std::collections::BTreeMap;

use super::Strategy;
use super::analysis::{Analysis, analyse};
use super::base::{base, finish};
use super::units::{UnitTiers, restore_budget};
use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::message::{Message, MessageKind};
use crate::plan::{CompactionPlan, Fidelity, PlanConfig, StrategyKind};
use crate::reason::Reason;
use crate::tokens::TokenCounter;

/// Dimension-aware compression (METHOD.md §3).
#[derive(Debug, Clone, Default)]
pub struct V2 {
    /// Settings.
    pub config: PlanConfig,
}

impl Strategy for V2 {
    fn kind(&self) -> StrategyKind {
        StrategyKind::V2
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let cfg = &self.config;
        let b = base(messages, budget, counter, cfg)?;
        let a = analyse(messages, &b.zones, &b.chains, cfg);
        let chains = b.chains.clone();
        let mut p = finish(StrategyKind::V2, b, messages, budget, counter, cfg);
        a.record(&mut p);
        let grades = grade_messages(&mut p, &a, &chains);
        let mut units = grade_units(&p, &a, &grades);
        rules::class_rules(&mut p, &a, messages, &mut units);
        rules::fold_saturated(&mut p, &a, messages, &chains, &mut units);
        restore_budget(&mut p, messages, counter, &a.units, &mut units, &|u| a.unit_max_influence(u));
        p.median_influence = Some(a.median);
        p.class = Some(a.class);
        Ok(p)
    }
}

/// Step 1: each compressible message's own grade, and its reason.
///
/// An error is heavy; influence above the median with three or more
/// dimensions is verbatim; a chain member, or influence of at least half the
/// median, is light; anything else is heavy.
fn grade_messages(p: &mut CompactionPlan, a: &Analysis, chains: &[Option<usize>]) -> BTreeMap<usize, Fidelity> {
    let mut grades = BTreeMap::new();
    for (&i, s) in &a.scores {
        let influence = a.influence[&i];
        let breadth = s.breadth();
        let mp = &mut p.messages[i];
        let (grade, why) = if mp.kind == MessageKind::ToolError {
            (Fidelity::Heavy, Reason::ErrorOneLine)
        } else if influence > a.median && breadth >= 3 {
            (Fidelity::Verbatim, Reason::Broad { influence, median: a.median, breadth })
        } else if chains[i].is_some() {
            (Fidelity::Light, Reason::ChainMember { influence, breadth })
        } else if influence > 0.0 && influence >= a.median / 2.0 {
            (Fidelity::Light, Reason::Moderate { influence, breadth })
        } else {
            (Fidelity::Heavy, Reason::Low { influence, breadth })
        };
        grades.insert(i, grade);
        mp.reason = why.into();
    }
    grades
}

/// Step 2: one grade per unit (chains are never split): the best member's,
/// but a chain whose tool messages all failed is heavy.
fn grade_units(p: &CompactionPlan, a: &Analysis, grades: &BTreeMap<usize, Fidelity>) -> UnitTiers {
    let mut units = UnitTiers::default();
    for (&u, members) in &a.units {
        let mut tools = members.iter().map(|&i| p.messages[i].kind).filter(|k| matches!(k, MessageKind::ToolResult | MessageKind::ToolError)).peekable();
        let all_failed = tools.peek().is_some() && tools.all(|k| k == MessageKind::ToolError);
        let grade = if all_failed { Fidelity::Heavy } else { members.iter().map(|i| grades[i]).max().unwrap_or(Fidelity::Heavy) };
        units.tier.insert(u, grade.into());
        if members.len() > 1 {
            units.note(u, if all_failed { Reason::FailedChain } else { Reason::Chain { chain: u, fidelity: grade } });
        }
    }
    units
}

#[cfg(test)]
mod tests;
