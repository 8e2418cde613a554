//! The three zones: pinned, compressible, recent.
//!
//! *Pinned* is index 0 through the original question (the first user message),
//! *recent* is the last N messages, *compressible* is what lies between. A
//! zone edge never separates the members of a tool chain — the assistant
//! tool-call message, the tool messages that answer it (together a "tool
//! unit") and the assistant text that interprets them: the pinned edge moves
//! forward and the recent edge moves back until no chain straddles them.
//!
//! Zones depend on [`crate::chains`] (the trace topology), never the reverse.

use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::chains::chain_of;
use crate::error::ForgettingError;
use crate::message::{Message, question_index};
use crate::tokens::TokenCounter;

/// Which zone a message is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Zone {
    /// Never compressed or dropped.
    Pinned,
    /// Candidate for compaction.
    Compressible,
    /// Kept verbatim.
    Recent,
}

impl Zone {
    /// A short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Zone::Pinned => "pinned",
            Zone::Compressible => "compress",
            Zone::Recent => "recent",
        }
    }
}

/// The partition as two edges: `[0, pinned_end)`, `[pinned_end, recent_start)`,
/// `[recent_start, len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zones {
    /// One past the last pinned message.
    pub pinned_end: usize,
    /// First recent message (`== len` when there is none).
    pub recent_start: usize,
    /// Number of messages.
    pub len: usize,
}

impl Zones {
    /// The zone of message `index`.
    pub fn zone_of(&self, index: usize) -> Zone {
        if index < self.pinned_end {
            Zone::Pinned
        } else if index < self.recent_start {
            Zone::Compressible
        } else {
            Zone::Recent
        }
    }

    /// Indices of the compressible zone.
    pub fn compressible(&self) -> std::ops::Range<usize> {
        self.pinned_end..self.recent_start
    }

    /// Whether there is anything to compress.
    pub fn has_compressible(&self) -> bool {
        self.recent_start > self.pinned_end
    }
}

/// Partitions a history into zones.
///
/// An edge never separates the members of a tool chain (the assistant
/// message that calls, the tool messages that answer, and the assistant text
/// that interprets them, see [`crate::chains::chain_of`]): the pinned edge
/// moves forward and the recent edge moves back until no chain straddles
/// them. Keeping the interpretation with its result matters because the
/// interpretation is only meaningful beside what it interprets — a recent
/// "so the owner is team-ledger" whose result was summarised away invites
/// exactly the confabulation this crate exists to prevent.
///
/// # Errors
/// [`ForgettingError::EmptyHistory`] for no messages,
/// [`ForgettingError::NoUserMessage`] when there is no question to pin.
pub fn partition(messages: &[Message], recent: usize) -> Result<Zones, ForgettingError> {
    partition_with_chains(messages, &chain_of(messages), recent)
}

/// [`partition`] with the chains already computed by
/// [`crate::chains::chain_of`], for planners that need them too.
///
/// # Errors
/// As [`partition`].
pub fn partition_with_chains(messages: &[Message], chains: &[Option<usize>], recent: usize) -> Result<Zones, ForgettingError> {
    if messages.is_empty() {
        return Err(ForgettingError::EmptyHistory);
    }
    let q = question_index(messages).ok_or(ForgettingError::NoUserMessage)?;
    let len = messages.len();
    // The first member of each message's group: its chain, else itself.
    let heads: Vec<usize> = chains.iter().enumerate().map(|(i, c)| c.unwrap_or(i)).collect();
    // Last member of each group.
    let mut group_end: Vec<usize> = (0..len).collect();
    for (i, &h) in heads.iter().enumerate() {
        if i > group_end[h] {
            group_end[h] = i;
        }
    }
    // Pinned edge: forward until no group that starts in pinned ends after it.
    let mut pinned_end = q + 1;
    loop {
        let needed = (0..pinned_end).map(|i| group_end[heads[i]]).max().unwrap_or(0) + 1;
        if needed > pinned_end {
            pinned_end = needed.min(len);
        } else {
            break;
        }
    }
    // Recent edge: back until no group that ends in recent starts before it.
    let mut recent_start = len.saturating_sub(recent).max(pinned_end);
    loop {
        let needed = (recent_start..len).map(|i| heads[i]).min().unwrap_or(recent_start);
        if needed < recent_start {
            recent_start = needed.max(pinned_end);
        } else {
            break;
        }
    }
    Ok(Zones { pinned_end, recent_start, len })
}

/// Tokens per zone against the threshold, for the UI's zone gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneGauge {
    /// Tokens in the pinned zone.
    pub pinned: usize,
    /// Tokens in the compressible zone.
    pub compressible: usize,
    /// Tokens in the recent zone.
    pub recent: usize,
    /// Tokens left before the generation reserve: `C − G − total` (0 if over).
    pub free: usize,
    /// The compaction threshold `ratio · (C − G)`.
    pub threshold: usize,
    /// Context size `C`.
    pub context: usize,
    /// Generation reserve `G`.
    pub reserve: usize,
}

impl ZoneGauge {
    /// Measures a history.
    pub fn measure(messages: &[Message], zones: &Zones, budget: &Budget, counter: &dyn TokenCounter) -> Self {
        let mut t = [0usize; 3];
        for (i, m) in messages.iter().enumerate() {
            let slot = match zones.zone_of(i) {
                Zone::Pinned => 0,
                Zone::Compressible => 1,
                Zone::Recent => 2,
            };
            t[slot] += counter.count_message(m);
        }
        let total = t[0] + t[1] + t[2];
        ZoneGauge {
            pinned: t[0],
            compressible: t[1],
            recent: t[2],
            free: budget.context.saturating_sub(budget.reserve).saturating_sub(total),
            threshold: budget.threshold(),
            context: budget.context,
            reserve: budget.reserve,
        }
    }

    /// Total tokens of the history.
    pub fn total(&self) -> usize {
        self.pinned + self.compressible + self.recent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "get".into(), arguments: json!({"k": id}) }
    }

    fn history() -> Vec<Message> {
        vec![
            Message::system("s", "sys"),
            Message::user("q", "question"),
            Message::assistant_calls("a1", "", vec![call("c1")]),
            Message::tool_result("t1", "c1", "get", "r1"),
            Message::assistant("i1", "interp"),
            Message::assistant_calls("a2", "", vec![call("c2"), call("c3")]),
            Message::tool_result("t2", "c2", "get", "r2"),
            Message::tool_result("t3", "c3", "get", "r3"),
        ]
    }

    #[test]
    fn pinned_runs_through_the_first_user_message() {
        let z = partition(&history(), 0).unwrap();
        assert_eq!(z.pinned_end, 2);
        assert_eq!(z.zone_of(1), Zone::Pinned);
        assert_eq!(z.zone_of(2), Zone::Compressible);
    }

    #[test]
    fn recent_edge_widens_to_keep_a_call_with_all_its_results() {
        // recent = 2 would start at t2, splitting a2 from its results.
        let z = partition(&history(), 2).unwrap();
        assert_eq!(z.recent_start, 5);
        // recent = 1 too.
        assert_eq!(partition(&history(), 1).unwrap().recent_start, 5);
        // recent = 4 starts at i1, the interpretation of t1: widen back to
        // a1 so the chain a1 → t1 → i1 stays in one zone.
        assert_eq!(partition(&history(), 4).unwrap().recent_start, 2);
        // recent = 5 starts at t1: widen back to a1.
        assert_eq!(partition(&history(), 5).unwrap().recent_start, 2);
    }

    #[test]
    fn recent_never_reaches_into_pinned() {
        let z = partition(&history(), 100).unwrap();
        assert_eq!(z.recent_start, 2);
        assert!(!z.has_compressible());
    }

    #[test]
    fn pinned_edge_moves_forward_over_a_unit_started_before_the_question() {
        let h = vec![
            Message::assistant_calls("a0", "", vec![call("c0")]),
            Message::user("q", "question"),
            Message::tool_result("t0", "c0", "get", "late result"),
            Message::assistant("x", "x"),
            Message::assistant("y", "y"),
        ];
        // a0 → t0 → x is one chain (x interprets t0): all of it is pinned.
        let z = partition(&h, 1).unwrap();
        assert_eq!(z.pinned_end, 4);
        assert_eq!(z.recent_start, 4);
    }

    #[test]
    fn empty_and_questionless_histories_are_errors() {
        assert_eq!(partition(&[], 2), Err(ForgettingError::EmptyHistory));
        assert_eq!(partition(&[Message::system("s", "x")], 2), Err(ForgettingError::NoUserMessage));
    }

    #[test]
    fn orphan_tool_results_are_their_own_unit() {
        let h = vec![Message::user("q", "q"), Message::assistant("a", "a"), Message::tool_result("t", "nope", "get", "r")];
        assert_eq!(partition(&h, 1).unwrap().recent_start, 2);
    }

    #[test]
    fn gauge_sums_zones() {
        let h = history();
        let b = Budget { context: 200, reserve: 50, ratio: 0.5, recent: 2 };
        let z = partition(&h, 2).unwrap();
        let g = ZoneGauge::measure(&h, &z, &b, &crate::tokens::ApproxTokenCounter);
        assert_eq!(g.total(), crate::tokens::ApproxTokenCounter.count(&h));
        assert_eq!(g.threshold, 75);
        assert_eq!(g.free, 150 - g.total());
    }
}
