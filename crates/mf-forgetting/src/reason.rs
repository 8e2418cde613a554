//! Why a message got its tier, as data.
//!
//! Each [`MessagePlan`](crate::plan::MessagePlan) carries [`Reasons`]: the
//! message's own reason (its zone, or the strategy's rule for that message)
//! and, for v2 and v2.1, what the rules of its *unit* (a tool chain, or the
//! message alone) added afterwards — a class rule, a saturation fold, a
//! budget demotion. Planners push typed [`Reason`]s; the words appear only
//! when a plan is shown or stored.
//!
//! Stored plans keep the text they always had: `Reasons` serialises to
//! `own | unit reason; unit reason`, so a plan written by an earlier version
//! and one written now read the same. Text read back from a file becomes
//! [`Reason::Recorded`]: a stored plan is a record to show, not input to
//! plan with again.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::tier::{Fidelity, Ranking, Tier};

/// One reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// Not yet decided: the state of a compressible message before its
    /// strategy has looked at it (every strategy replaces it).
    Undecided,
    /// In the pinned zone.
    Pinned,
    /// Pinned by the user (itself, or another member of its chain).
    UserPinned,
    /// In the recent zone.
    Recent,
    /// The `none` strategy (control arm).
    NoneControl,
    /// baseline: the first message, kept.
    BaselineFirst,
    /// baseline: dropped by hard truncation.
    BaselineTruncated,
    /// masking: a tool output older than the window, masked.
    MaskOlder {
        /// The window: this many most recent tool outputs keep their content.
        keep_last: usize,
    },
    /// masking: a tool output inside the window, kept.
    MaskInWindow,
    /// masking: not a tool output, kept.
    MaskNotOutput,
    /// masking: masked because the window had to close to restore the budget.
    MaskWindowClosed,
    /// v1: a tool error, shrunk to one line of its type.
    V1Error {
        /// The error's type (`ConnectionError`, `HTTP 503`, …).
        error_type: String,
    },
    /// v1: a tool result, cut then summarised.
    V1Result {
        /// Characters kept before summarising.
        chars: usize,
    },
    /// v1: a tool call, one line then summarised.
    V1Call,
    /// v1: assistant or user text, cut then summarised.
    V1Text {
        /// Characters kept before summarising.
        chars: usize,
    },
    /// v2: a tool error starts heavy (type + one line).
    ErrorOneLine,
    /// v2: influence above the median and three or more dimensions: verbatim.
    Broad {
        /// `I(m)`.
        influence: f64,
        /// Median influence of the compressible zone.
        median: f64,
        /// `B_m`.
        breadth: usize,
    },
    /// v2: a member of a tool chain starts light.
    ChainMember {
        /// `I(m)`.
        influence: f64,
        /// `B_m`.
        breadth: usize,
    },
    /// v2: influence of at least half the median starts light.
    Moderate {
        /// `I(m)`.
        influence: f64,
        /// `B_m`.
        breadth: usize,
    },
    /// v2: low influence starts heavy.
    Low {
        /// `I(m)`.
        influence: f64,
        /// `B_m`.
        breadth: usize,
    },
    /// v2 unit: every tool message of the chain failed, so the chain is heavy.
    FailedChain,
    /// v2 unit: the chain takes its best member's tier.
    Chain {
        /// The chain (index of its call).
        chain: usize,
        /// The tier it takes.
        fidelity: Fidelity,
    },
    /// v2 lookup: the best tool result, verbatim.
    LookupBest,
    /// v2 lookup: everything else compressed hard.
    LookupRest,
    /// v2 multi-hop: a link of the A → B → C chain.
    MultiHopLink,
    /// v2 multi-hop: the last hop, verbatim.
    MultiHopLast,
    /// v2 exploratory: a success, in full.
    ExploratorySuccess,
    /// v2 exploratory: a failure, one line.
    ExploratoryFailure,
    /// v2 aggregation: states a total, verbatim.
    AggregationTotal,
    /// v2 aggregation: a data point, folded into the totals.
    AggregationDataPoint,
    /// v2 contradiction: a side of a conflict, never compressed hard.
    ContradictionSide,
    /// v2 temporal: carries a date, a time or an order.
    TemporalDated,
    /// v2: an older member of a saturation group, folded.
    Saturated {
        /// The group's label (`3 errors of http_get, type: TimeoutError`).
        label: String,
    },
    /// v2.1: the unit's score under the ranking, and what it earned.
    Ranked {
        /// Δ or Φ-influence.
        ranking: Ranking,
        /// The unit's score.
        score: f64,
        /// The tier the score earned (drop, verbatim or light).
        tier: Tier,
        /// The verbatim cut-off as a fraction of the highest score.
        verbatim_fraction: f64,
        /// The highest score of the zone.
        max: f64,
        /// The chain, when the unit has more than one message.
        chain: Option<usize>,
        /// The size of the block of units withheld together, when more than one.
        block: Option<usize>,
    },
    /// A verbatim unit demoted to light so that the plan fits the threshold.
    BudgetDemoted,
    /// Below the threshold, a verbatim unit demoted to light so that the
    /// compacted history is smaller than the history (see [`crate::estimate`]).
    DemotedToShrink,
    /// Text read back from a stored plan.
    Recorded(String),
}

impl Reason {
    /// A zone's own reason, when the zone decides the message's fate.
    pub fn of_zone(zone: crate::zones::Zone) -> Reason {
        match zone {
            crate::zones::Zone::Pinned => Reason::Pinned,
            crate::zones::Zone::Recent => Reason::Recent,
            crate::zones::Zone::Compressible => Reason::Undecided,
        }
    }
}

fn ranking_name(r: Ranking) -> &'static str {
    match r {
        Ranking::Withholding => "Δ",
        Ranking::Phi => "Φ-influence",
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Undecided => f.write_str("undecided"),
            Reason::Pinned => f.write_str("pinned: system prompt through the original question"),
            Reason::UserPinned => f.write_str("pinned by the user: kept verbatim"),
            Reason::Recent => f.write_str("recent: kept verbatim"),
            Reason::NoneControl => f.write_str("none: control arm, nothing changes"),
            Reason::BaselineFirst => f.write_str("baseline: the first message is kept"),
            Reason::BaselineTruncated => f.write_str("baseline: hard truncation drops everything but the first and the recent messages"),
            Reason::MaskOlder { keep_last } => write!(f, "masking: older than the last {keep_last} tool outputs → placeholder"),
            Reason::MaskInWindow => f.write_str("masking: inside the window of recent tool outputs"),
            Reason::MaskNotOutput => f.write_str("masking: not a tool output, kept"),
            Reason::MaskWindowClosed => f.write_str("masking: window closed to restore the budget → placeholder"),
            Reason::V1Error { error_type } => write!(f, "v1: error → one line ({error_type})"),
            Reason::V1Result { chars } => write!(f, "v1: result → {chars} chars, summarised"),
            Reason::V1Call => f.write_str("v1: call → one line, summarised"),
            Reason::V1Text { chars } => write!(f, "v1: text → {chars} chars, summarised"),
            Reason::ErrorOneLine => f.write_str("error → type + one line"),
            Reason::Broad { influence, median, breadth } => {
                write!(f, "I={influence:.2} > median {median:.2} and B={breadth} ≥ 3")
            }
            Reason::ChainMember { influence, breadth } => write!(f, "chain member, I={influence:.2}, B={breadth}"),
            Reason::Moderate { influence, breadth } => write!(f, "moderate influence, I={influence:.2}, B={breadth}"),
            Reason::Low { influence, breadth } => write!(f, "low influence I={influence:.2}, B={breadth}"),
            Reason::FailedChain => f.write_str("chain of failed calls → heavy"),
            Reason::Chain { chain, fidelity } => write!(f, "chain c{chain} → {}", Tier::from(*fidelity).label()),
            Reason::LookupBest => f.write_str("lookup: best tool result → verbatim"),
            Reason::LookupRest => f.write_str("lookup: the rest compressed hard"),
            Reason::MultiHopLink => f.write_str("multi-hop: link of the chain"),
            Reason::MultiHopLast => f.write_str("multi-hop: last hop → verbatim"),
            Reason::ExploratorySuccess => f.write_str("exploratory: success in full"),
            Reason::ExploratoryFailure => f.write_str("exploratory: failure, one line"),
            Reason::AggregationTotal => f.write_str("aggregation: states a total → verbatim"),
            Reason::AggregationDataPoint => f.write_str("aggregation: data point, folded into totals"),
            Reason::ContradictionSide => f.write_str("contradiction: a side of a conflict is never compressed hard"),
            Reason::TemporalDated => f.write_str("temporal: carries a date, time or order"),
            Reason::Saturated { label } => write!(f, "saturated: {label}"),
            Reason::Ranked { ranking, score, tier, verbatim_fraction, max, chain, block } => {
                let name = ranking_name(*ranking);
                match tier {
                    Tier::Drop => write!(f, "{name}={score:.3} ≈ 0 → drop")?,
                    Tier::Verbatim => write!(f, "{name}={score:.3} ≥ {verbatim_fraction:.2}·max {max:.3} → verbatim")?,
                    _ => write!(f, "{name}={score:.3} low → summarised")?,
                }
                if let Some(c) = chain {
                    write!(f, " (chain c{c} as one unit)")?;
                }
                if let Some(k) = block {
                    write!(f, " (Δ of a block of {k} units withheld together)")?;
                }
                Ok(())
            }
            Reason::BudgetDemoted => f.write_str("budget: demoted to light"),
            Reason::DemotedToShrink => f.write_str("no growth: demoted to light so that the compaction shrinks the history"),
            Reason::Recorded(text) => f.write_str(text),
        }
    }
}

/// A message's reasons: its own, then its unit's.
#[derive(Debug, Clone, PartialEq)]
pub struct Reasons {
    /// The message's own reason.
    pub own: Reason,
    /// What its unit's rules added, in the order they applied.
    pub unit: Vec<Reason>,
}

impl Reasons {
    /// Just one reason.
    pub fn new(own: Reason) -> Self {
        Reasons { own, unit: Vec::new() }
    }
}

impl From<Reason> for Reasons {
    fn from(own: Reason) -> Self {
        Reasons::new(own)
    }
}

impl fmt::Display for Reasons {
    /// `own`, or `own | unit; unit; …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.own)?;
        for (k, r) in self.unit.iter().enumerate() {
            f.write_str(if k == 0 { " | " } else { "; " })?;
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl Serialize for Reasons {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Reasons {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Reasons::new(Reason::Recorded(String::deserialize(d)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_reasons_follow_the_own_one_after_a_bar() {
        let r = Reasons {
            own: Reason::ChainMember { influence: 1.234, breadth: 2 },
            unit: vec![Reason::Chain { chain: 4, fidelity: Fidelity::Light }, Reason::BudgetDemoted],
        };
        assert_eq!(r.to_string(), "chain member, I=1.23, B=2 | chain c4 → light; budget: demoted to light");
        assert_eq!(Reasons::new(Reason::Recent).to_string(), "recent: kept verbatim");
    }

    #[test]
    fn stored_text_round_trips_as_the_same_string() {
        let r = Reasons { own: Reason::LookupBest, unit: vec![Reason::Saturated { label: "3 errors".into() }] };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, "\"lookup: best tool result → verbatim | saturated: 3 errors\"");
        let back: Reasons = serde_json::from_str(&json).unwrap();
        assert_eq!(back.to_string(), r.to_string());
    }

    #[test]
    fn ranked_reasons_name_the_ranking_and_the_qualifiers() {
        let r = Reason::Ranked {
            ranking: Ranking::Withholding,
            score: 0.5,
            tier: Tier::Verbatim,
            verbatim_fraction: 0.5,
            max: 1.0,
            chain: Some(2),
            block: Some(3),
        };
        assert_eq!(r.to_string(), "Δ=0.500 ≥ 0.50·max 1.000 → verbatim (chain c2 as one unit) (Δ of a block of 3 units withheld together)");
    }
}
