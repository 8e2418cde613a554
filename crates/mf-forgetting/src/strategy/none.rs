//! The control arm: changes nothing.

use super::Strategy;
use super::base::{base, finish};
use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::message::Message;
use crate::plan::{CompactionPlan, PlanConfig, StrategyKind};
use crate::reason::Reason;
use crate::tokens::TokenCounter;
use crate::zones::Zone;

/// Control arm: changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoneStrategy;

impl Strategy for NoneStrategy {
    fn kind(&self) -> StrategyKind {
        StrategyKind::None
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let config = PlanConfig::default();
        let mut b = base(messages, budget, counter, &config)?;
        for p in b.plans.iter_mut().filter(|p| p.zone == Zone::Compressible) {
            p.reason = Reason::NoneControl.into();
        }
        Ok(finish(StrategyKind::None, b, messages, budget, counter, &config))
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
    fn none_keeps_everything() {
        let h = history("What is the duplicate invoice?", &[R(json!({"u": "/a"}), "ok", false, None)]);
        let p = plan(StrategyKind::None, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        assert!(p.messages.iter().all(|m| m.tier == Tier::Keep));
        assert_eq!(p.estimated_tokens_after, p.gauge.total());
    }
}
