//! What every plan starts from, and how it is closed.

use crate::budget::Budget;
use crate::chains::chain_of;
use crate::error::ForgettingError;
use crate::estimate::estimate_after;
use crate::message::Message;
use crate::plan::{CompactionPlan, MessagePlan, PlanConfig, StrategyKind, Tier};
use crate::reason::{Reason, Reasons};
use crate::tokens::TokenCounter;
use crate::zones::{Zone, ZoneGauge, Zones, partition_with_chains};

/// Zones, gauge, chains and one entry per message: every message `Keep`,
/// pinned and recent with their zone's reason, compressible ones undecided.
pub(super) struct Base {
    pub zones: Zones,
    pub gauge: ZoneGauge,
    pub plans: Vec<MessagePlan>,
    /// For every message, its chain (the index of its call), if any.
    pub chains: Vec<Option<usize>>,
}

/// Validates the settings and builds the [`Base`].
///
/// # Errors
/// An invalid budget or setting, an empty or questionless history.
pub(super) fn base(messages: &[Message], budget: &Budget, counter: &dyn TokenCounter, config: &PlanConfig) -> Result<Base, ForgettingError> {
    budget.validate()?;
    config.validate()?;
    let chains = chain_of(messages);
    let zones = partition_with_chains(messages, &chains, budget.recent)?;
    let gauge = ZoneGauge::measure(messages, &zones, budget, counter);
    let plans = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let zone = zones.zone_of(i);
            MessagePlan {
                id: m.id.clone(),
                index: i,
                kind: m.kind(),
                zone,
                tokens: counter.count_message(m),
                dimensions: None,
                breadth: None,
                influence: None,
                delta: None,
                tier: Tier::Keep,
                chain: chains[i].map(|c| format!("c{c}")),
                // A message the user pinned says so wherever it stands (in the
                // recent zone it is kept for that reason too).
                reason: Reasons::new(if zones.is_pin(i) || (m.pinned && zone == Zone::Recent) { Reason::UserPinned } else { Reason::of_zone(zone) }),
            }
        })
        .collect();
    Ok(Base { zones, gauge, plans, chains })
}

/// The plan of a [`Base`] whose entries are decided, with its estimate.
pub(super) fn finish(kind: StrategyKind, b: Base, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter, config: &PlanConfig) -> CompactionPlan {
    let mut p = CompactionPlan {
        strategy: kind,
        budget: *budget,
        zones: b.zones,
        gauge: b.gauge,
        needed: budget.should_compact(b.gauge.total(), messages.len()),
        class: None,
        median_influence: None,
        messages: b.plans,
        folds: Vec::new(),
        instructions: Vec::new(),
        estimated_tokens_after: 0,
        summary_limit: None,
        declined: None,
        notes: Vec::new(),
        config: config.clone(),
    };
    p.estimated_tokens_after = estimate_after(&p, messages, counter);
    p
}
