//! Observation masking: old tool outputs become a placeholder.

use super::Strategy;
use super::base::{base, finish};
use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::estimate::estimate_after;
use crate::message::{Message, MessageKind};
use crate::plan::{CompactionPlan, PlanConfig, StrategyKind, Tier};
use crate::reason::Reason;
use crate::tokens::TokenCounter;
use crate::zones::Zone;

/// Observation masking: tool outputs older than the last `mask_keep_last`
/// become a placeholder; calls and the model's own text stay. When the plan
/// is still over the threshold, the window closes: every compressible tool
/// output is masked.
#[derive(Debug, Clone, Default)]
pub struct Masking {
    /// Settings.
    pub config: PlanConfig,
}

impl Strategy for Masking {
    fn kind(&self) -> StrategyKind {
        StrategyKind::Masking
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let b = base(messages, budget, counter, &self.config)?;
        let outputs: Vec<usize> =
            messages.iter().enumerate().filter(|(_, m)| matches!(m.kind(), MessageKind::ToolResult | MessageKind::ToolError)).map(|(i, _)| i).collect();
        let window_start = outputs.len().checked_sub(self.config.mask_keep_last).and_then(|k| outputs.get(k).copied()).unwrap_or(0);
        let mut p = finish(StrategyKind::Masking, b, messages, budget, counter, &self.config);
        let compressible = p.zones.compressible();
        for &i in outputs.iter().filter(|i| compressible.binary_search(i).is_ok()) {
            if i < window_start {
                p.messages[i].tier = Tier::Mask;
                p.messages[i].reason = Reason::MaskOlder { keep_last: self.config.mask_keep_last }.into();
            } else {
                p.messages[i].reason = Reason::MaskInWindow.into();
            }
        }
        for m in p.messages.iter_mut().filter(|m| m.zone == Zone::Compressible && m.reason.own == Reason::Undecided) {
            m.reason = Reason::MaskNotOutput.into();
        }
        p.estimated_tokens_after = estimate_after(&p, messages, counter);
        if p.estimated_tokens_after > budget.threshold() {
            let mut widened = false;
            for &i in outputs.iter().filter(|i| compressible.binary_search(i).is_ok()) {
                if p.messages[i].tier != Tier::Mask {
                    p.messages[i].tier = Tier::Mask;
                    p.messages[i].reason = Reason::MaskWindowClosed.into();
                    widened = true;
                }
            }
            if widened {
                p.notes.push("still over the threshold with the window: masked every compressible tool output".to_owned());
                p.estimated_tokens_after = estimate_after(&p, messages, counter);
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan;
    use super::super::test_support::*;
    use crate::budget::Budget;
    use crate::plan::{PlanConfig, StrategyKind, Tier};
    use crate::tokens::ApproxTokenCounter;
    use serde_json::json;

    #[test]
    fn masking_elides_tool_outputs_older_than_the_window() {
        let rounds: Vec<R<'_>> = (0..4).map(|i| R(json!({"u": format!("/p/{i}")}), "payload", false, None)).collect();
        let h = history("What is it?", &rounds);
        let p = plan(StrategyKind::Masking, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        assert_eq!(tier(&p, "t0"), Tier::Mask);
        assert_eq!(tier(&p, "t1"), Tier::Mask);
        assert_eq!(tier(&p, "t2"), Tier::Keep, "inside the window of the last 2 outputs");
        assert_eq!(tier(&p, "t3"), Tier::Keep);
        assert_eq!(tier(&p, "a0"), Tier::Keep, "calls are never masked");
    }

    #[test]
    fn masking_closes_the_window_when_the_budget_demands() {
        let big = "z".repeat(4_000);
        let rounds: Vec<R<'_>> = (0..4).map(|i| R(json!({"u": format!("/p/{i}")}), big.as_str(), false, None)).collect();
        let h = history("What is it?", &rounds);
        let b = Budget { context: 2_048, reserve: 512, ratio: 0.75, recent: 2 };
        let p = plan(StrategyKind::Masking, &h, &b, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        assert!(["t0", "t1", "t2", "t3"].iter().all(|id| tier(&p, id) == Tier::Mask));
        assert!(p.notes.iter().any(|n| n.contains("masked every")), "{:?}", p.notes);
    }
}
