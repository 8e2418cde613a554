//! Units and their tiers, and the budget step that v2 and v2.1 share.
//!
//! A unit is a tool chain (call → results → interpretation) or a message
//! alone; its members always share one tier. v2 grades units and v2.1 ranks
//! them, each by its own score; both then write the tiers into the plan and
//! restore the budget the same way, here.

use std::collections::BTreeMap;

use crate::estimate::{Fit, estimate_after};
use crate::message::Message;
use crate::plan::{CompactionPlan, Decline, Fidelity, Tier};
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

    /// Writes every unit's tier into its members, and the unit's reasons
    /// after each member's own.
    pub fn write(&self, p: &mut CompactionPlan, units: &Units) {
        for (&u, members) in units {
            let t = self.tier.get(&u).copied().unwrap_or(Tier::Keep);
            for &i in members {
                let mp = &mut p.messages[i];
                mp.tier = t;
                mp.reason.unit = self.why.get(&u).cloned().unwrap_or_default();
            }
        }
    }
}

/// Writes the units' tiers into the plan, then fits it (see
/// [`crate::estimate`]): while the least result — the summary message's
/// fixed part plus room for the fallback — is over the target, the verbatim
/// unit with the lowest `score` (on a tie, the later unit) is demoted to
/// light. The target is the threshold, and below the threshold one token
/// fewer than the history has. When no verbatim unit is left the plan is
/// settled as it is: over the threshold `apply` repairs the budget; below it
/// the plan declines, and shows its tiers as graded (the demotions bought
/// nothing) with the least result the demotions reached.
pub(super) fn restore_budget(
    p: &mut CompactionPlan,
    messages: &[Message],
    counter: &dyn TokenCounter,
    units: &Units,
    ut: &mut UnitTiers,
    score: &dyn Fn(usize) -> f64,
) {
    ut.write(p, units);
    if !p.zones.has_compressible() {
        p.estimated_tokens_after = estimate_after(p, messages, counter);
        return;
    }
    let graded = (ut.tier.clone(), ut.why.clone(), p.notes.len());
    loop {
        let fit = Fit::measure(p, messages, counter);
        let victim = ut.tier.iter().filter(|(_, t)| **t == Tier::Verbatim).map(|(u, _)| *u).min_by(|x, y| score(*x).total_cmp(&score(*y)).then(y.cmp(x)));
        let Some(u) = victim.filter(|_| !fit.feasible()) else {
            if !fit.feasible() && !fit.over_threshold {
                // Declined: the demotions bought nothing, so the plan shows
                // the tiers as graded, with the decline.
                (ut.tier, ut.why) = (graded.0, graded.1);
                p.notes.truncate(graded.2);
                ut.write(p, units);
                let graded_fit = Fit::measure(p, messages, counter);
                graded_fit.settle(p);
                p.declined = Some(Decline::WouldNotShrink { tokens_before: fit.before, least_after: fit.least() });
                return;
            }
            fit.settle(p);
            return;
        };
        if fit.over_threshold {
            ut.set(u, Fidelity::Light, Reason::BudgetDemoted);
            p.notes.push(format!("budget: verbatim unit c{u} demoted to light to fit the threshold"));
        } else {
            ut.set(u, Fidelity::Light, Reason::DemotedToShrink);
            p.notes
                .push(format!("no growth: verbatim unit c{u} demoted to light so that the compacted history is smaller than the {} tokens it has", fit.before));
        }
        ut.write(p, units);
    }
}
