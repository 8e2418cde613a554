//! Units and their tiers, and the budget step that v2 and v2.1 share.
//!
//! A unit is a tool chain (call → results → interpretation) or a message
//! alone; its members always share one tier. v2 grades units and v2.1 ranks
//! them, each by its own score; both then write the tiers into the plan and
//! restore the budget the same way, here.

use std::collections::BTreeMap;

use crate::apply::estimate_after;
use crate::message::Message;
use crate::plan::{CompactionPlan, Fidelity, Tier};
use crate::reason::Reason;
use crate::tokens::TokenCounter;

/// Unit key → members (in history order), as [`super::analysis::Analysis::units`].
pub(super) type Units = BTreeMap<usize, Vec<usize>>;

/// The tier of each unit and what decided it.
#[derive(Debug, Default)]
pub(super) struct UnitTiers {
    /// Unit key → tier.
    pub tier: BTreeMap<usize, Tier>,
    /// Unit key → the reasons its rules added, in order.
    pub why: BTreeMap<usize, Vec<Reason>>,
}

impl UnitTiers {
    /// Where unit `u` sits on heavy < light < verbatim.
    pub fn fidelity(&self, u: usize) -> Option<Fidelity> {
        self.tier.get(&u).and_then(|t| t.fidelity())
    }

    /// Records a reason for unit `u`.
    pub fn note(&mut self, u: usize, why: Reason) {
        self.why.entry(u).or_default().push(why);
    }

    /// Sets unit `u` to `to` and records why.
    pub fn set(&mut self, u: usize, to: Fidelity, why: Reason) {
        if let Some(t) = self.tier.get_mut(&u) {
            *t = to.into();
            self.note(u, why);
        }
    }

    /// Raises unit `u` to `to` when it is below it (and records why); never lowers.
    pub fn raise(&mut self, u: usize, to: Fidelity, why: Reason) {
        if self.tier.contains_key(&u) && self.fidelity(u) < Some(to) {
            self.set(u, to, why);
        }
    }

    /// Writes every unit's tier into its members, with the unit's reasons
    /// after each member's own; `own` may replace the own reason given the
    /// unit and its tier (v2.1's reason names the tier its score earned).
    pub fn write(&self, p: &mut CompactionPlan, units: &Units, own: &dyn Fn(usize, Tier) -> Option<Reason>) {
        for (&u, members) in units {
            let t = self.tier.get(&u).copied().unwrap_or(Tier::Keep);
            for &i in members {
                let mp = &mut p.messages[i];
                mp.tier = t;
                if let Some(r) = own(u, t) {
                    mp.reason.own = r;
                }
                mp.reason.unit = self.why.get(&u).cloned().unwrap_or_default();
            }
        }
    }
}

/// Writes the units' tiers into the plan, then restores the budget: while
/// the plan's estimate is over the threshold, the verbatim unit with the
/// lowest `score` (on a tie, the later unit) is demoted to light. Stops when
/// the estimate fits or no verbatim unit is left (then `apply`'s repair
/// takes over).
pub(super) fn restore_budget(
    p: &mut CompactionPlan,
    messages: &[Message],
    counter: &dyn TokenCounter,
    units: &Units,
    ut: &mut UnitTiers,
    score: &dyn Fn(usize) -> f64,
    own: &dyn Fn(usize, Tier) -> Option<Reason>,
) {
    let threshold = p.budget.threshold();
    ut.write(p, units, own);
    p.estimated_tokens_after = estimate_after(p, messages, counter);
    while p.estimated_tokens_after > threshold {
        let victim = ut
            .tier
            .iter()
            .filter(|(_, t)| **t == Tier::Verbatim)
            .map(|(u, _)| *u)
            .min_by(|x, y| score(*x).total_cmp(&score(*y)).then(y.cmp(x)));
        let Some(u) = victim else { break };
        ut.set(u, Fidelity::Light, Reason::BudgetDemoted);
        p.notes.push(format!("budget: verbatim unit c{u} demoted to light to fit the threshold"));
        ut.write(p, units, own);
        p.estimated_tokens_after = estimate_after(p, messages, counter);
    }
}
