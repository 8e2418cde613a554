//! The words a plan and its reasons share: what happens to a message
//! ([`Tier`]), the heavy < light < verbatim scale v2 moves units along
//! ([`Fidelity`]), and how v2.1 ranks units ([`Ranking`]).
//!
//! A leaf: it uses nothing of this crate. [`plan`](mod@crate::plan) holds
//! these in its types and [`crate::reason`] names them in its words, and
//! `plan` holds [`Reasons`](crate::reason::Reasons): were they defined in
//! `plan`, the two modules would import each other. `crate::plan`
//! re-exports all three, so their paths there keep working.

use serde::{Deserialize, Serialize};

/// What happens to one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Stays where it is, unchanged (pinned, recent, or the `none` strategy).
    Keep,
    /// Copied verbatim into the summary message as an anchor.
    Verbatim,
    /// Cut to 300 characters, then summarised.
    Light,
    /// Reduced to type + one line, then summarised.
    Heavy,
    /// v1: errors to one line, results to 400 characters, then summarised.
    Summarise,
    /// masking: content replaced in place by a placeholder.
    Mask,
    /// Removed without trace.
    Drop,
}

/// The three tiers of METHOD.md §3 in the order of how much of a message
/// survives: heavy < light < verbatim. v2 raises and lowers units along it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    /// Type + one line, then summarised.
    Heavy,
    /// Cut, then summarised.
    Light,
    /// Copied verbatim as an anchor.
    Verbatim,
}

impl From<Fidelity> for Tier {
    fn from(f: Fidelity) -> Tier {
        match f {
            Fidelity::Heavy => Tier::Heavy,
            Fidelity::Light => Tier::Light,
            Fidelity::Verbatim => Tier::Verbatim,
        }
    }
}

impl Tier {
    /// Where the tier sits among heavy < light < verbatim; `None` for the
    /// tiers outside that scale (keep, summarise, mask, drop), which compare
    /// below all three (`Option`'s order).
    pub fn fidelity(self) -> Option<Fidelity> {
        match self {
            Tier::Verbatim => Some(Fidelity::Verbatim),
            Tier::Light => Some(Fidelity::Light),
            Tier::Heavy => Some(Fidelity::Heavy),
            Tier::Keep | Tier::Summarise | Tier::Mask | Tier::Drop => None,
        }
    }

    /// Whether the message's (shrunk) text goes to the summariser.
    pub fn is_summarised(self) -> bool {
        matches!(self, Tier::Light | Tier::Heavy | Tier::Summarise)
    }

    /// A short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Tier::Keep => "keep",
            Tier::Verbatim => "verbatim",
            Tier::Light => "light",
            Tier::Heavy => "heavy",
            Tier::Summarise => "summarise",
            Tier::Mask => "mask",
            Tier::Drop => "drop",
        }
    }
}

/// How v2.1 ranks messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    /// Δ(m) from the injected probe evaluator.
    Withholding,
    /// Φ-weighted influence (the v2 score), kept as an ablation arm.
    Phi,
}
