//! The context against its budget, and when the next compaction is expected.

use serde::{Deserialize, Serialize};

/// Tokens per zone against the budget, measured with the model's tokenizer.
///
/// `pinned`, `compressible` and `recent` are per-message counts (each message
/// rendered alone with the model's template, the system message with the
/// tool descriptions), the same counts the compaction plan uses; they
/// slightly over-count the real prompt. `prompt_tokens` is the exact count of
/// the whole rendered prompt, which the trigger compares with `threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Gauge {
    /// Tokens of the pinned zone (system prompt through the question).
    pub pinned: u32,
    /// Tokens of the compressible zone.
    pub compressible: u32,
    /// Tokens of the recent zone.
    pub recent: u32,
    /// `C − G − prompt_tokens` (0 when over).
    pub free: u32,
    /// The compaction threshold `⌊ratio · (C − G)⌋`.
    pub threshold: u32,
    /// Exact tokens of the whole rendered prompt (tools included).
    pub prompt_tokens: u32,
    /// Context size `C`.
    pub context: u32,
    /// Generation reserve `G`.
    pub reserve: u32,
    /// Messages in the history.
    pub messages: u32,
}

impl Gauge {
    /// Tokens of the prompt that no message's own count holds (the tool
    /// schemas, the template's glue): `prompt_tokens` less the three zones.
    /// The plan sums the messages, so this is what comes off its budget
    /// (`Budget::less_outside`).
    #[must_use]
    pub fn outside_messages(&self) -> usize {
        let counted = u64::from(self.pinned) + u64::from(self.compressible) + u64::from(self.recent);
        u64::from(self.prompt_tokens).saturating_sub(counted) as usize
    }
}

/// When the next compaction is expected, from the recent prompt growth.
///
/// The loop compacts at the start of a round whose prompt is over the
/// threshold. With the prompt growing by `mean_tokens_per_round` a round,
/// it crosses the threshold after `⌊tokens_left / mean⌋ + 1` more rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Forecast {
    /// `threshold − prompt_tokens` (0 when at or over it).
    pub tokens_left: u32,
    /// Mean prompt growth per round over the last `window` rounds (no
    /// compaction inside a measured step).
    pub mean_tokens_per_round: f64,
    /// Rounds until the compaction is expected to fire (1: at the next round's start).
    pub rounds_until_compaction: u32,
    /// Rounds the mean is taken over.
    pub window: u32,
}

impl Forecast {
    /// The forecast from the growth of the last rounds; `None` when nothing
    /// was measured yet or the prompt is not growing.
    #[must_use]
    pub fn from_growth(gauge: &Gauge, growth: &[u32]) -> Option<Forecast> {
        if growth.is_empty() {
            return None;
        }
        let mean = f64::from(growth.iter().sum::<u32>()) / growth.len() as f64;
        if mean <= 0.0 {
            return None;
        }
        let left = gauge.threshold.saturating_sub(gauge.prompt_tokens);
        let rounds = (f64::from(left) / mean).floor() as u32 + 1;
        Some(Forecast {
            tokens_left: left,
            mean_tokens_per_round: mean,
            rounds_until_compaction: rounds,
            window: u32::try_from(growth.len()).unwrap_or(u32::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forecast_counts_rounds_until_the_prompt_crosses_the_threshold() {
        let g =
            |prompt| Gauge { pinned: 0, compressible: 0, recent: 0, free: 0, threshold: 600, prompt_tokens: prompt, context: 1024, reserve: 256, messages: 4 };
        assert_eq!(Forecast::from_growth(&g(400), &[]), None, "nothing measured yet");
        assert_eq!(Forecast::from_growth(&g(400), &[0, 0]), None, "not growing");
        let f = Forecast::from_growth(&g(400), &[90, 110]).unwrap();
        assert_eq!((f.tokens_left, f.mean_tokens_per_round, f.window), (200, 100.0, 2));
        // 400 → 500 → 600 (not over) → 700: the third round's start compacts.
        assert_eq!(f.rounds_until_compaction, 3);
        assert_eq!(Forecast::from_growth(&g(599), &[100]).unwrap().rounds_until_compaction, 1);
        assert_eq!(Forecast::from_growth(&g(650), &[100]).unwrap().tokens_left, 0);
    }
}
