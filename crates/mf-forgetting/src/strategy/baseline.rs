//! The paper's baseline: hard truncation.

use super::Strategy;
use super::base::{base, finish};
use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::message::Message;
use crate::plan::{CompactionPlan, PlanConfig, StrategyKind, Tier};
use crate::reason::Reason;
use crate::tokens::TokenCounter;
use crate::zones::Zone;

/// The paper's baseline: keep the first message and the recent zone, drop
/// the rest — but the messages the user pinned, which no strategy drops.
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline;

impl Strategy for Baseline {
    fn kind(&self) -> StrategyKind {
        StrategyKind::Baseline
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let config = PlanConfig::default();
        let mut b = base(messages, budget, counter, &config)?;
        for p in b.plans.iter_mut() {
            if b.zones.is_pin(p.index) {
                // Pinned by the user: kept, as in every strategy.
            } else if p.index == 0 {
                p.reason = Reason::BaselineFirst.into();
            } else if p.zone != Zone::Recent {
                p.tier = Tier::Drop;
                p.reason = Reason::BaselineTruncated.into();
            }
        }
        Ok(finish(StrategyKind::Baseline, b, messages, budget, counter, &config))
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan;
    use super::super::test_support::*;
    use crate::plan::{PlanConfig, StrategyKind, Tier};
    use crate::tokens::ApproxTokenCounter;
    use serde_json::json;

    #[test]
    fn baseline_keeps_the_first_message_and_the_recent_zone() {
        let h = history("What is it?", &[R(json!({"u": "/a"}), "x", false, Some("seen"))]);
        let p = plan(StrategyKind::Baseline, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let kept: Vec<&str> = p.messages.iter().filter(|m| m.tier != Tier::Drop).map(|m| m.id.0.as_str()).collect();
        assert_eq!(kept, vec!["sys", "more", "done"]);
    }
}
