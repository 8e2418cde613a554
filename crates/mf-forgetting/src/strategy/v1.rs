//! Measured forgetting v1 (METHOD.md §2).

use super::Strategy;
use super::base::{base, finish};
use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::estimate::Fit;
use crate::message::{Message, MessageKind};
use crate::plan::{CompactionPlan, PlanConfig, StrategyKind, Tier};
use crate::reason::Reason;
use crate::summary::error_type;
use crate::tokens::TokenCounter;
use crate::zones::Zone;

/// Measured forgetting v1: error-aware input, one self-summary of the whole
/// compressible zone.
#[derive(Debug, Clone, Default)]
pub struct V1 {
    /// Settings.
    pub config: PlanConfig,
}

impl Strategy for V1 {
    fn kind(&self) -> StrategyKind {
        StrategyKind::V1
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let mut b = base(messages, budget, counter, &self.config)?;
        let chars = self.config.result_chars;
        for p in b.plans.iter_mut().filter(|p| p.zone == Zone::Compressible) {
            p.tier = Tier::Summarise;
            p.reason = match p.kind {
                MessageKind::ToolError => Reason::V1Error { error_type: error_type(&messages[p.index].content) },
                MessageKind::ToolResult => Reason::V1Result { chars },
                MessageKind::ToolCall => Reason::V1Call,
                _ => Reason::V1Text { chars },
            }
            .into();
        }
        let mut p = finish(StrategyKind::V1, b, messages, budget, counter, &self.config);
        // v1 has no anchors to trade: it fits, or (below the threshold) declines.
        if p.zones.has_compressible() {
            Fit::measure(&p, messages, counter).settle(&mut p);
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan;
    use super::super::test_support::*;
    use crate::plan::{PlanConfig, StrategyKind, Tier};
    use crate::tokens::ApproxTokenCounter;
    use crate::zones::Zone;
    use serde_json::json;

    #[test]
    fn v1_summarises_the_whole_compressible_zone() {
        let h = history("What is it?", &[R(json!({"u": "/a"}), "ConnectionError: refused", true, None), R(json!({"u": "/b"}), RICH, false, Some("Found it."))]);
        let p = plan(StrategyKind::V1, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        for m in p.messages.iter().filter(|m| m.zone == Zone::Compressible) {
            assert_eq!(m.tier, Tier::Summarise, "{}", m.id);
        }
        assert!(tier(&p, "t0") == Tier::Summarise && p.messages[3].reason.to_string().contains("ConnectionError"));
    }
}
