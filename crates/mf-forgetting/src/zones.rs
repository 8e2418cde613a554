//! The three zones: pinned, compressible, recent.
//!
//! *Pinned* is index 0 through the original question (the first user message),
//! *recent* is the last N messages, *compressible* is what lies between. A
//! zone edge never separates the members of a tool chain — the assistant
//! tool-call message, the tool messages that answer it (together a "tool
//! unit") and the assistant text that interprets them: the pinned edge moves
//! forward and the recent edge moves back until no chain straddles them.
//!
//! A message the user pinned ([`Message::pinned`]) joins the pinned zone
//! wherever it stands, with every other member of its chain (a pinned result
//! without its call, or a call without its results, would be a fragment the
//! model cannot read): the compressible zone is what lies between the edges
//! minus these [`Zones::pins`]. No strategy touches a pinned message: the
//! summarising ones put the pins, in their order, between the pinned zone
//! and the summary; the others leave them where they are.
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

/// The partition as two edges, `[0, pinned_end)`, `[pinned_end,
/// recent_start)`, `[recent_start, len)`, and the messages between them that
/// the user pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zones {
    /// One past the last message of the pinned zone's head (index 0 through
    /// the question, and the chain the question sits in).
    pub pinned_end: usize,
    /// First recent message (`== len` when there is none).
    pub recent_start: usize,
    /// Number of messages.
    pub len: usize,
    /// Indices before `recent_start` pinned by the user (each with its whole
    /// chain), ascending: in the pinned zone wherever they stand. (A pinned
    /// message in the recent zone is kept as recent; it joins these when a
    /// later compaction finds it before the recent edge.) Absent from plans
    /// written before messages could be pinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<usize>,
}

impl Zones {
    /// The zone of message `index`.
    pub fn zone_of(&self, index: usize) -> Zone {
        if index < self.pinned_end || self.is_pin(index) {
            Zone::Pinned
        } else if index < self.recent_start {
            Zone::Compressible
        } else {
            Zone::Recent
        }
    }

    /// Whether message `index` lies before the recent zone and is pinned by
    /// the user (itself or a member of its chain).
    pub fn is_pin(&self, index: usize) -> bool {
        self.pins.binary_search(&index).is_ok()
    }

    /// Indices of the compressible zone, ascending: between the edges, the
    /// pins left out.
    pub fn compressible(&self) -> Vec<usize> {
        (self.pinned_end..self.recent_start).filter(|&i| !self.is_pin(i)).collect()
    }

    /// Whether there is anything to compress.
    pub fn has_compressible(&self) -> bool {
        (self.pinned_end..self.recent_start).any(|i| !self.is_pin(i))
    }

    /// The messages a summarising strategy keeps before its summary: the
    /// pinned zone's head, then the pins, in order.
    pub fn kept_before_summary(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.pinned_end).chain(self.pins.iter().copied().filter(|&i| i >= self.pinned_end))
    }
}

/// The `recent` count that makes the compressible zone end with message
/// `id` and the rest of its chain: *summarise up to here*. Passed as the
/// budget's `recent` for one compaction, every message after that chain
/// stays verbatim (the recent edge still never splits a chain, see
/// [`partition`]).
///
/// # Errors
/// [`ForgettingError::UnknownMessage`] when no message has that id.
pub fn recent_after(messages: &[Message], id: &crate::message::MessageId) -> Result<usize, ForgettingError> {
    let at = messages.iter().position(|m| &m.id == id).ok_or_else(|| ForgettingError::UnknownMessage(id.0.clone()))?;
    let chains = chain_of(messages);
    let head = chains[at].unwrap_or(at);
    let end = (at..messages.len()).filter(|&i| chains[i].unwrap_or(i) == head).max().unwrap_or(at);
    Ok(messages.len() - end - 1)
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
    // Pins: every member of a group one of whose members the user pinned.
    // Groups never straddle an edge, so a group before the recent one is whole.
    let pinned_groups: std::collections::BTreeSet<usize> = messages.iter().enumerate().filter(|(_, m)| m.pinned).map(|(i, _)| heads[i]).collect();
    let pins = (0..recent_start).filter(|&i| pinned_groups.contains(&heads[i])).collect();
    Ok(Zones { pinned_end, recent_start, len, pins })
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
    fn a_pin_takes_its_whole_chain_out_of_the_compressible_zone() {
        let mut h = history();
        h.push(Message::user("u", "next"));
        h.push(Message::assistant("z", "ok"));
        // Pinning t1, the result, pins its call a1 and its interpretation i1.
        h[3].pinned = true;
        let z = partition(&h, 2).unwrap();
        assert_eq!(z.pins, vec![2, 3, 4]);
        assert_eq!(z.compressible(), vec![5, 6, 7]);
        assert!((2..=4).all(|i| z.zone_of(i) == Zone::Pinned));
        assert_eq!(z.zone_of(5), Zone::Compressible);
        assert_eq!(z.kept_before_summary().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        // Everything between the edges pinned: nothing to compress.
        h[6].pinned = true;
        let z = partition(&h, 2).unwrap();
        assert!(!z.has_compressible(), "{z:?}");
        // A pin in the recent zone is recent.
        let mut h = history();
        h[7].pinned = true;
        let z = partition(&h, 3).unwrap();
        assert!(z.pins.is_empty());
        assert_eq!(z.zone_of(7), Zone::Recent);
    }

    #[test]
    fn a_pinned_question_is_a_pin_of_the_pinned_zone() {
        let mut h = history();
        h[1].pinned = true;
        let z = partition(&h, 2).unwrap();
        assert_eq!(z.pins, vec![1]);
        assert_eq!(z.pinned_end, 2);
        assert_eq!(z.kept_before_summary().collect::<Vec<_>>(), vec![0, 1], "not twice");
    }

    #[test]
    fn up_to_a_message_ends_the_compressible_zone_with_its_chain() {
        let h = history();
        // Up to a1, a call: its result t1 and interpretation i1 go with it.
        let recent = recent_after(&h, &"a1".into()).unwrap();
        assert_eq!(recent, 3);
        let z = partition(&h, recent).unwrap();
        assert_eq!((z.pinned_end, z.recent_start), (2, 5));
        // Up to the last message: everything after the question.
        assert_eq!(recent_after(&h, &"t3".into()).unwrap(), 0);
        assert_eq!(recent_after(&h, &"nope".into()), Err(ForgettingError::UnknownMessage("nope".into())));
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
