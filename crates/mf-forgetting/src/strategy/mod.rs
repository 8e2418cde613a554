//! The strategies behind one trait, each a pure function from a history to a
//! [`CompactionPlan`], one module each.
//!
//! Every plan starts from the same [`base`](base::base): zones, the gauge and
//! one [`MessagePlan`](crate::plan::MessagePlan) per message (pinned and
//! recent decided by their zone). Then:
//!
//! - [`none`], [`baseline`], [`masking`] and [`v1`] set each compressible
//!   message's tier by one rule;
//! - [`v2`] scores every compressible message ([`analysis`]), grades units
//!   (tool chains, never split) along heavy < light < verbatim, applies the
//!   problem class's rules and saturation folds ([`v2::rules`]);
//! - [`v21`] ranks units by the withholding test ([`withholding`]) or by Φ;
//! - v2 and v2.1 then share one budget step ([`units`], the rule in
//!   [`crate::estimate`]): verbatim units are
//!   demoted to light, lowest score first, until the result fits the
//!   threshold and, below it, is smaller than the history (or the plan declines).

mod analysis;
mod base;
pub mod baseline;
pub mod masking;
pub mod none;
mod units;
pub mod v1;
pub mod v2;
pub mod v21;
mod withholding;

#[cfg(test)]
mod test_support;

use crate::budget::Budget;
use crate::error::ForgettingError;
use crate::evaluator::ProbeEvaluator;
use crate::message::Message;
use crate::plan::{CompactionPlan, PlanConfig, Ranking, StrategyKind};
use crate::tokens::TokenCounter;

pub use baseline::Baseline;
pub use masking::Masking;
pub use none::NoneStrategy;
pub use v1::V1;
pub use v2::V2;
pub use v21::V21;

/// A compaction strategy: history → plan. Pure given its inputs.
pub trait Strategy {
    /// Which strategy.
    fn kind(&self) -> StrategyKind;

    /// Plans a compaction of `messages` under `budget`.
    ///
    /// # Errors
    /// Invalid budget or settings, an empty or questionless history, or (v2.1)
    /// a failing evaluator.
    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError>;
}

/// The error of v2.1 asked to rank by Δ without an evaluator.
pub(crate) fn needs_evaluator() -> ForgettingError {
    ForgettingError::InvalidSetting { name: "evaluator", reason: "v2.1 ranks by Δ, which needs a probe evaluator (a model, or an offline proxy)".to_owned() }
}

/// The strategies that need no evaluator, by kind (v2.1 with Φ ranking too).
///
/// # Errors
/// [`ForgettingError::InvalidSetting`] for v2.1 with the withholding ranking:
/// Δ needs a probe evaluator, use [`V21::new`].
pub fn strategy(kind: StrategyKind, config: PlanConfig) -> Result<Box<dyn Strategy>, ForgettingError> {
    Ok(match kind {
        StrategyKind::None => Box::new(NoneStrategy),
        StrategyKind::Baseline => Box::new(Baseline),
        StrategyKind::Masking => Box::new(Masking { config }),
        StrategyKind::V1 => Box::new(V1 { config }),
        StrategyKind::V2 => Box::new(V2 { config }),
        StrategyKind::V21 => {
            if config.ranking == Ranking::Withholding {
                return Err(needs_evaluator());
            }
            Box::new(V21::phi(config))
        }
    })
}

/// Plans with any strategy; `evaluator` is used by v2.1 only.
///
/// # Errors
/// As [`Strategy::plan`], and v2.1 with Δ ranking and no evaluator.
pub fn plan(
    kind: StrategyKind,
    messages: &[Message],
    budget: &Budget,
    counter: &dyn TokenCounter,
    config: &PlanConfig,
    evaluator: Option<&mut dyn ProbeEvaluator>,
) -> Result<CompactionPlan, ForgettingError> {
    if kind == StrategyKind::V21
        && let Some(e) = evaluator
    {
        return V21::new(config.clone(), e).plan(messages, budget, counter);
    }
    strategy(kind, config.clone())?.plan(messages, budget, counter)
}
