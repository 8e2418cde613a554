//! The token budget and the compaction trigger `T_compact = ratio · (C − G)`.

use serde::{Deserialize, Serialize};

use crate::error::ForgettingError;

/// Default context size `C` (a Qwen3-class 8K setting).
pub const DEFAULT_CONTEXT: usize = 8192;
/// Default generation reserve `G`.
pub const DEFAULT_RESERVE: usize = 2048;
/// Default trigger ratio.
pub const DEFAULT_RATIO: f64 = 0.75;
/// Default number of recent messages kept verbatim.
pub const DEFAULT_RECENT: usize = 2;
/// Compaction needs more than this many messages (METHOD.md §2).
pub const MIN_MESSAGES_TO_COMPACT: usize = 4;

/// The budget settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Context size `C` in tokens.
    pub context: usize,
    /// Generation reserve `G` in tokens.
    pub reserve: usize,
    /// Trigger ratio (0, 1].
    pub ratio: f64,
    /// Number of recent messages kept verbatim (widened to keep tool units whole).
    pub recent: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { context: DEFAULT_CONTEXT, reserve: DEFAULT_RESERVE, ratio: DEFAULT_RATIO, recent: DEFAULT_RECENT }
    }
}

impl Budget {
    /// A budget with the given context size and default reserve, ratio, recent.
    pub fn with_context(context: usize) -> Self {
        Budget { context, ..Budget::default() }
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`ForgettingError::InvalidBudget`] when the reserve is not below the
    /// context, the ratio is outside (0, 1] or not finite, or the threshold
    /// would be zero tokens.
    pub fn validate(&self) -> Result<(), ForgettingError> {
        if self.reserve >= self.context {
            return Err(ForgettingError::InvalidBudget(format!("reserve G = {} must be below context C = {}", self.reserve, self.context)));
        }
        if !self.ratio.is_finite() || self.ratio <= 0.0 || self.ratio > 1.0 {
            return Err(ForgettingError::InvalidBudget(format!("ratio = {} must be in (0, 1]", self.ratio)));
        }
        if self.threshold() == 0 {
            return Err(ForgettingError::InvalidBudget("ratio · (C − G) rounds to 0 tokens".to_owned()));
        }
        Ok(())
    }

    /// `T_compact = ⌊ratio · (C − G)⌋` tokens.
    pub fn threshold(&self) -> usize {
        let room = self.context.saturating_sub(self.reserve) as f64;
        (self.ratio * room).floor() as usize
    }

    /// Whether a prompt of `prompt_tokens` over `messages` messages should be compacted.
    pub fn should_compact(&self, prompt_tokens: usize, messages: usize) -> bool {
        prompt_tokens > self.threshold() && messages > MIN_MESSAGES_TO_COMPACT
    }

    /// The budget a plan over the messages alone sees when the prompt also
    /// holds `outside` tokens that no message carries (the tool schemas, the
    /// template's glue): they come off the context, scaled by the ratio, so
    /// the plan's threshold is the prompt's threshold less them (never below
    /// a context one token over the reserve).
    #[must_use]
    pub fn less_outside(self, outside: usize) -> Budget {
        if outside == 0 || self.ratio <= 0.0 {
            return self;
        }
        let cut = (outside as f64 / self.ratio).ceil() as usize;
        Budget { context: self.context.saturating_sub(cut).max(self.reserve + 1), ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_ratio_of_context_minus_reserve() {
        let b = Budget::default();
        assert_eq!(b.threshold(), 4608); // 0.75 · (8192 − 2048)
        assert_eq!(Budget { context: 4096, reserve: 1024, ratio: 0.5, recent: 2 }.threshold(), 1536);
        assert!(b.should_compact(4609, 5));
        assert!(!b.should_compact(4608, 5));
        assert!(!b.should_compact(9000, 4));
    }

    #[test]
    fn tokens_outside_the_messages_come_off_the_threshold() {
        let b = Budget { context: 2048, reserve: 192, ratio: 0.75, recent: 2 };
        assert_eq!(b.threshold(), 1392);
        // 150 tokens of tool schemas: the plan's threshold is 150 lower (to the token, rounded in its favour).
        let p = b.less_outside(150);
        assert_eq!(p.context, 2048 - 200);
        assert_eq!(p.threshold(), 1242);
        assert_eq!(b.less_outside(0), b);
        assert_eq!(b.less_outside(1_000_000).context, 193, "never at or below the reserve");
    }

    #[test]
    fn invalid_budgets_are_typed_errors() {
        let bad = [
            Budget { context: 2048, reserve: 2048, ..Budget::default() },
            Budget { ratio: 0.0, ..Budget::default() },
            Budget { ratio: 1.5, ..Budget::default() },
            Budget { ratio: f64::NAN, ..Budget::default() },
            Budget { context: 2049, reserve: 2048, ratio: 0.5, recent: 2 },
        ];
        for b in bad {
            assert!(matches!(b.validate(), Err(ForgettingError::InvalidBudget(_))), "{b:?}");
        }
        assert!(Budget::default().validate().is_ok());
    }
}
