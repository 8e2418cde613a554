//! The plan: what a strategy would do to each message, before anything is done.

use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::dimensions::Scores;
use crate::error::ForgettingError;
use crate::literals::LiteralLimits;
use crate::message::{MessageId, MessageKind};
use crate::reason::Reasons;
use crate::summary::SamplingParams;
use crate::taxonomy::{Classification, ProblemClass};
use crate::zones::{Zone, ZoneGauge, Zones};

// At home in the leaf module `tier`, which `reason` imports too; re-exported
// here, where they were first defined, so `crate::plan::Tier` keeps working.
pub use crate::tier::{Fidelity, Ranking, Tier};

/// The strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StrategyKind {
    /// Control: change nothing.
    #[serde(rename = "none")]
    None,
    /// The paper's hard truncation: keep the first message and the recent zone.
    #[serde(rename = "baseline")]
    Baseline,
    /// Observation masking: old tool outputs become a placeholder.
    #[serde(rename = "masking")]
    Masking,
    /// Measured forgetting v1: error-aware input, one summary.
    #[serde(rename = "v1")]
    V1,
    /// Dimension-aware compression.
    #[serde(rename = "v2")]
    V2,
    /// Withholding-test ranking (Δ), Φ as ablation.
    #[serde(rename = "v2.1")]
    V21,
}

impl StrategyKind {
    /// All strategies, in the order of the command line help.
    pub const ALL: [StrategyKind; 6] =
        [StrategyKind::None, StrategyKind::Baseline, StrategyKind::Masking, StrategyKind::V1, StrategyKind::V2, StrategyKind::V21];

    /// The name on the command line and in files.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyKind::None => "none",
            StrategyKind::Baseline => "baseline",
            StrategyKind::Masking => "masking",
            StrategyKind::V1 => "v1",
            StrategyKind::V2 => "v2",
            StrategyKind::V21 => "v2.1",
        }
    }

    /// Whether the strategy replaces the compressible zone by one summary message.
    pub fn summarises(self) -> bool {
        matches!(self, StrategyKind::V1 | StrategyKind::V2 | StrategyKind::V21)
    }
}

impl std::fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for StrategyKind {
    type Err = ForgettingError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StrategyKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| ForgettingError::InvalidSetting {
            name: "strategy",
            reason: format!("unknown strategy {s:?} ({})", StrategyKind::ALL.map(StrategyKind::as_str).join(", ")),
        })
    }
}

/// The plan for one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagePlan {
    /// Message id.
    pub id: MessageId,
    /// Position in the history.
    pub index: usize,
    /// Derived kind.
    pub kind: MessageKind,
    /// Zone.
    pub zone: Zone,
    /// Tokens (by the plan's counter).
    pub tokens: usize,
    /// `C_d` (v2, v2.1; compressible zone only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<Scores>,
    /// `B`, the number of dimensions carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breadth: Option<usize>,
    /// `I(m) = Φ(B) · Σ w_d C_d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub influence: Option<f64>,
    /// `Δ(m)` of the withholding test (v2.1), for the message's whole chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// What happens to it.
    pub tier: Tier,
    /// Chain id (`c<index of the call>`), when in a tool chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// Why: the message's own reason and its unit's (stored as the words).
    pub reason: Reasons,
}

/// A saturation group: 3+ messages carrying the same kind of information.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldGroup {
    /// What they share, e.g. `3 errors of http_get, type: ConnectionError`.
    pub label: String,
    /// Indices of the members.
    pub members: Vec<usize>,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionPlan {
    /// Strategy.
    pub strategy: StrategyKind,
    /// Budget used.
    pub budget: Budget,
    /// Zone edges.
    pub zones: Zones,
    /// Tokens per zone before compaction.
    pub gauge: ZoneGauge,
    /// Whether the trigger fires (over the threshold with more than 4 messages).
    pub needed: bool,
    /// Problem class (v2, v2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Classification>,
    /// Median influence of the compressible zone (v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_influence: Option<f64>,
    /// One entry per message, in order.
    pub messages: Vec<MessagePlan>,
    /// Saturation groups to fold.
    pub folds: Vec<FoldGroup>,
    /// Extra instructions for the summariser (class rules, folds).
    pub instructions: Vec<String>,
    /// Estimated tokens after compaction (by the plan's counter; the model
    /// summary counted at `summary_limit`, or the fallback when longer).
    pub estimated_tokens_after: usize,
    /// v1, v2, v2.1: the summary pass's token limit for this plan — at most
    /// `config.sampling.max_tokens`, at most the tokens of the summariser's
    /// input, at most what the compaction can afford (see [`crate::estimate`]).
    /// `None` when nothing is summarised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_limit: Option<u32>,
    /// Set when the plan declines to compact: below the threshold the
    /// result would not be smaller than the history, even with every
    /// verbatim unit demoted. `apply` then keeps the history as it is and
    /// runs no summary pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declined: Option<Decline>,
    /// Notes: budget demotions, evaluator caveats.
    pub notes: Vec<String>,
    /// The settings the plan was made with (apply uses them too).
    pub config: PlanConfig,
}

/// Why a plan declines to compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decline {
    /// Below the threshold, the least the compacted history can take — the
    /// kept messages, the summary message's header, anchors and literals, and
    /// room for the fallback summary — is not fewer tokens than the history
    /// has now, with every verbatim unit already demoted.
    WouldNotShrink {
        /// Tokens of the history.
        tokens_before: usize,
        /// The least the compacted history would take.
        least_after: usize,
    },
}

impl std::fmt::Display for Decline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decline::WouldNotShrink { tokens_before, least_after } => write!(
                f,
                "below the threshold the compacted history would take at least {least_after} tokens \
                 (header, anchors, literals and room for the fallback summary), not fewer than the \
                 {tokens_before} it has: not compacted, no summary pass spent"
            ),
        }
    }
}

impl CompactionPlan {
    /// The plan of the message at `index`.
    pub fn message(&self, index: usize) -> Option<&MessagePlan> {
        self.messages.get(index)
    }

    /// Ids with the given tier.
    pub fn ids_with(&self, tier: Tier) -> Vec<MessageId> {
        self.messages.iter().filter(|m| m.tier == tier).map(|m| m.id.clone()).collect()
    }
}

/// Every strategy setting, with the method's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanConfig {
    /// γ of Φ(B) = B^γ (1.5).
    pub gamma: f64,
    /// λ of the susceptibility decay (0.7).
    pub lambda: f64,
    /// v1: successful tool results are cut to this many characters (400).
    pub result_chars: usize,
    /// v2: light-tier messages are cut to this many characters (300).
    pub light_chars: usize,
    /// Fallback: the summariser input hard-truncated to this many characters (500).
    pub fallback_chars: usize,
    /// masking: this many most recent tool outputs keep their content (2).
    pub mask_keep_last: usize,
    /// v2: this many messages of one kind make a saturation group (3).
    pub saturation: usize,
    /// Literal list bounds.
    pub literals: LiteralLimits,
    /// Summary pass sampling.
    pub sampling: SamplingParams,
    /// Use this class instead of the classifier's.
    pub class_override: Option<ProblemClass>,
    /// v2.1 ranking.
    pub ranking: Ranking,
    /// v2.1: verbatim when the score is at least this fraction of the highest (0.5).
    pub verbatim_fraction: f64,
    /// v2.1: dropped when the score is at most this (≈ 0).
    pub drop_epsilon: f64,
    /// v2.1: at most this many evaluations of the withholding test per
    /// compaction, the full context's included (0: one per unit — the exact
    /// test). With fewer than one per unit, contiguous blocks of units are
    /// withheld together, the blocks with the highest Δ are split and tested
    /// again while evaluations remain, and each unit takes the Δ of the
    /// smallest block it was tested in (a block with Δ ≈ 0 is dropped whole).
    pub withholding_budget: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            gamma: 1.5,
            lambda: 0.7,
            result_chars: 400,
            light_chars: 300,
            fallback_chars: 500,
            mask_keep_last: 2,
            saturation: 3,
            literals: LiteralLimits::default(),
            sampling: SamplingParams::default(),
            class_override: None,
            ranking: Ranking::Withholding,
            verbatim_fraction: 0.5,
            drop_epsilon: 1e-6,
            withholding_budget: 0,
        }
    }
}

impl PlanConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// [`ForgettingError::InvalidSetting`] naming the first bad setting.
    pub fn validate(&self) -> Result<(), ForgettingError> {
        let bad = |name: &'static str, reason: String| Err(ForgettingError::InvalidSetting { name, reason });
        if !self.gamma.is_finite() || self.gamma < 0.0 || self.gamma > 8.0 {
            return bad("gamma", format!("{} must be in [0, 8]", self.gamma));
        }
        if !self.lambda.is_finite() || self.lambda <= 0.0 || self.lambda > 1.0 {
            return bad("lambda", format!("{} must be in (0, 1]", self.lambda));
        }
        if self.saturation < 2 {
            return bad("saturation", format!("{} must be at least 2", self.saturation));
        }
        if !(0.0..=1.0).contains(&self.verbatim_fraction) {
            return bad("verbatim_fraction", format!("{} must be in [0, 1]", self.verbatim_fraction));
        }
        if !self.drop_epsilon.is_finite() || self.drop_epsilon < 0.0 {
            return bad("drop_epsilon", format!("{} must be ≥ 0", self.drop_epsilon));
        }
        if self.withholding_budget == 1 {
            return bad("withholding_budget", "1 leaves no evaluation after the full context's: use 0 (exact, one per unit) or at least 2".to_owned());
        }
        if self.fallback_chars == 0 {
            return bad("fallback_chars", "must be at least 1".to_owned());
        }
        Ok(())
    }
}
