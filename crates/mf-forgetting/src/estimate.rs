//! What a plan's result will cost, known before any summary pass: the
//! summary message's parts, the room its model summary may take, and the
//! estimate of the tokens after.
//!
//! # A compaction must pay for itself
//!
//! The summary message of v1, v2 and v2.1 is `[header, verbatim anchors,
//! "Summary:" + the model summary, the literal list]`. Everything in it but
//! the model summary is known at plan time (the *fixed* part), and so is the
//! summariser's input (the shrunk log) and the fallback that takes the
//! summary's place when the pass fails (the log's first `fallback_chars`
//! characters). The plan gives the model summary a token limit:
//!
//! 1. at most the summary pass's setting (`sampling.max_tokens`, 256);
//! 2. at most the tokens of its own input: a summary gets no more room than
//!    what it summarises;
//! 3. at most what the compaction can afford: the *target* minus the fixed
//!    part, where the target is the threshold, and — below the threshold,
//!    where nothing forces a compaction — one token fewer than the history
//!    has now (a compaction that does not shrink the history forgets for
//!    nothing).
//!
//! The plan is feasible when the fixed part plus room for the fallback fits
//! the target. When it does not, v2 and v2.1 demote verbatim units to light,
//! lowest score first (an anchor costs about what its message cost in place,
//! so anchors never pay; only summarised text does). If no anchor is left
//! and the plan is still not feasible: over the threshold `apply` repairs
//! the budget as before; below it the plan *declines* ([`Decline`]) and
//! `apply` keeps the history without spending a summary pass.
//!
//! With the limit passed to the summary pass, the estimate is an upper
//! bound (up to a counter's rounding at message boundaries), so `apply`'s
//! no-growth guard is a safety net that should rarely fire.

use crate::literals::{self, Literal};
use crate::message::{Message, Role};
use crate::plan::{CompactionPlan, Decline, StrategyKind, Tier};
use crate::summary::{Shrink, fallback, label, shrink};
use crate::tokens::TokenCounter;
use crate::zones::Zone;

/// The placeholder of a masked tool output.
pub fn mask_placeholder(chars: usize) -> String {
    let digits = chars.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("[tool output elided: {grouped} chars]")
}

fn shrink_for(tier: Tier, plan: &CompactionPlan) -> Option<Shrink> {
    match tier {
        Tier::Summarise => Some(Shrink::Chars(plan.config.result_chars)),
        Tier::Light => Some(Shrink::Chars(plan.config.light_chars)),
        Tier::Heavy => Some(Shrink::Heavy),
        _ => None,
    }
}

/// The log the summariser reads: one shrunk entry per summarised message.
pub fn summarizer_log(plan: &CompactionPlan, messages: &[Message]) -> String {
    plan.messages.iter().filter_map(|mp| shrink_for(mp.tier, plan).map(|s| shrink(&messages[mp.index], s))).collect::<Vec<_>>().join("\n")
}

/// The literals of every summarised message, bounded by the plan's limits.
pub(crate) fn plan_literals(plan: &CompactionPlan, messages: &[Message]) -> Vec<Literal> {
    let texts: Vec<(usize, String)> =
        plan.messages.iter().filter(|mp| mp.tier.is_summarised()).map(|mp| (mp.index, messages[mp.index].analysis_text())).collect();
    literals::extract(texts.iter().map(|(i, t)| (*i, t.as_str())), plan.config.literals)
}

fn anchor_text(m: &Message) -> String {
    let mut s = label(m);
    s.push('\n');
    s.push_str(&m.analysis_text());
    s
}

/// The line between the anchors and the model summary.
const SUMMARY_MARKER: &str = "\nSummary:\n";

/// The id of message `i`, or "" for none.
fn id_at(messages: &[Message], i: Option<usize>) -> &str {
    i.and_then(|i| messages.get(i)).map_or("", |m| m.id.0.as_str())
}

/// The content of the summary message.
pub(crate) fn summary_content(plan: &CompactionPlan, messages: &[Message], anchors: &[usize], model_summary: &str, literals: &[Literal]) -> String {
    let range = plan.zones.compressible();
    let (first, last) = (id_at(messages, range.first().copied()), id_at(messages, range.last().copied()));
    // Pins between the compacted messages stand above this message now.
    let (lo, hi) = (range.first().copied().unwrap_or(0), range.last().copied().unwrap_or(0));
    let inside: Vec<&str> = plan.zones.pins.iter().filter(|&&i| lo < i && i < hi).map(|&i| id_at(messages, Some(i))).collect();
    let except = if inside.is_empty() { String::new() } else { format!(", except {}, pinned and kept above", inside.join(", ")) };
    let mut s = format!(
        "[Summary of the prior investigation: messages {first}–{last} ({} messages{except}) were compacted by measured forgetting, strategy {}.]",
        range.len(),
        plan.strategy
    );
    if !anchors.is_empty() {
        s.push_str("\nKept verbatim:");
        for &i in anchors {
            s.push('\n');
            s.push_str(&anchor_text(&messages[i]));
        }
    }
    if !model_summary.trim().is_empty() {
        s.push_str(SUMMARY_MARKER);
        s.push_str(model_summary.trim());
    }
    if !literals.is_empty() {
        s.push('\n');
        s.push_str(&literals::render(literals));
    }
    s
}

/// The summary message that replaces the compressible zone.
pub(crate) fn summary_message(plan: &CompactionPlan, messages: &[Message], content: String) -> Message {
    let first = id_at(messages, plan.zones.compressible().first().copied());
    // A summary that replaces an earlier one (which it compacts) takes its id,
    // instead of nesting it ("summary-summary-m2").
    let id = if first.starts_with("summary-") { first.to_owned() } else { format!("summary-{first}") };
    let mut m = Message::user(&id, &content);
    m.role = Role::User;
    m.summary = true;
    m
}

/// Tokens of a text inside a message: the message with it minus the empty message.
fn text_tokens(counter: &dyn TokenCounter, text: &str) -> usize {
    counter.count_message(&Message::user("", text)).saturating_sub(counter.count_message(&Message::user("", "")))
}

/// Tokens of the messages a plan keeps outside the compressible zone.
fn kept_tokens(plan: &CompactionPlan) -> usize {
    plan.messages.iter().filter(|mp| mp.zone != Zone::Compressible && mp.tier == Tier::Keep).map(|mp| mp.tokens).sum()
}

/// What a summarising plan's result costs, apart from the model summary,
/// and what it must reach (see the module's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fit {
    /// Tokens of the history now.
    pub before: usize,
    /// Whether the history is over the threshold now.
    pub over_threshold: bool,
    /// What the result must not exceed: the threshold, and below it one
    /// token fewer than `before`.
    pub target: usize,
    /// Tokens after with no model summary: the kept messages and the summary
    /// message's header, anchors and literals.
    pub fixed: usize,
    /// Whether anything goes to the summariser.
    pub summarises: bool,
    /// Tokens of the `Summary:` line.
    pub marker: usize,
    /// Tokens of the summariser's input log.
    pub log: usize,
    /// Tokens of the fallback text.
    pub fallback: usize,
}

impl Fit {
    /// Measures a v1, v2 or v2.1 plan with a compressible zone.
    pub fn measure(plan: &CompactionPlan, messages: &[Message], counter: &dyn TokenCounter) -> Fit {
        let before = plan.gauge.total();
        let threshold = plan.budget.threshold();
        let over_threshold = before > threshold;
        let anchors: Vec<usize> = plan.messages.iter().filter(|m| m.tier == Tier::Verbatim).map(|m| m.index).collect();
        let lits = plan_literals(plan, messages);
        let content = summary_content(plan, messages, &anchors, "", &lits);
        let fixed = kept_tokens(plan) + counter.count_message(&summary_message(plan, messages, content));
        let summarises = plan.messages.iter().any(|m| m.tier.is_summarised());
        let (log, fallback_tokens) = if summarises {
            let log = summarizer_log(plan, messages);
            (text_tokens(counter, &log), text_tokens(counter, &fallback(&log, plan.config.fallback_chars)))
        } else {
            (0, 0)
        };
        Fit {
            before,
            over_threshold,
            target: if over_threshold { threshold } else { before.saturating_sub(1) },
            fixed,
            summarises,
            marker: if summarises { text_tokens(counter, SUMMARY_MARKER) } else { 0 },
            log,
            fallback: fallback_tokens,
        }
    }

    /// The least the result can take: the fixed part and, when something is
    /// summarised, room for the fallback, which takes the summary's place
    /// when the pass fails.
    pub fn least(&self) -> usize {
        self.fixed + if self.summarises { self.marker + self.fallback } else { 0 }
    }

    /// Whether the least result fits the target.
    pub fn feasible(&self) -> bool {
        self.least() <= self.target
    }

    /// The summary pass's token limit: at most `max_tokens`, at most the
    /// log's tokens, and (when feasible) at most what the target affords.
    /// `None` when nothing is summarised.
    pub fn limit(&self, max_tokens: u32) -> Option<u32> {
        if !self.summarises {
            return None;
        }
        let mut limit = (max_tokens as usize).min(self.log);
        if self.feasible() {
            limit = limit.min(self.target - self.fixed - self.marker);
        }
        Some(u32::try_from(limit).unwrap_or(max_tokens))
    }

    /// The tokens after, the summary slot counted at `limit` (or the
    /// fallback, when that is longer).
    pub fn estimate(&self, limit: Option<u32>) -> usize {
        match limit {
            Some(l) if self.summarises => self.fixed + self.marker + (l as usize).max(self.fallback),
            _ => self.fixed,
        }
    }

    /// Writes the summary limit, the estimate and — below the threshold,
    /// when even the least result would not shrink the history — the
    /// decline into the plan.
    pub fn settle(&self, plan: &mut CompactionPlan) {
        plan.summary_limit = self.limit(plan.config.sampling.max_tokens);
        plan.estimated_tokens_after = self.estimate(plan.summary_limit);
        plan.declined = (!self.feasible() && !self.over_threshold).then_some(Decline::WouldNotShrink { tokens_before: self.before, least_after: self.least() });
    }
}

/// The plan's estimate of the tokens after compaction; a summarising
/// plan's model summary is counted at the plan's summary limit (see the
/// module's rule), or its fallback when that is longer.
pub fn estimate_after(plan: &CompactionPlan, messages: &[Message], counter: &dyn TokenCounter) -> usize {
    let kept = kept_tokens(plan);
    match plan.strategy {
        StrategyKind::None => plan.gauge.total(),
        StrategyKind::Baseline => kept,
        StrategyKind::Masking => {
            let mid: usize = plan
                .messages
                .iter()
                .filter(|mp| mp.zone == Zone::Compressible)
                .map(|mp| {
                    if mp.tier == Tier::Mask {
                        let mut m = messages[mp.index].clone();
                        m.content = mask_placeholder(m.content.chars().count());
                        counter.count_message(&m)
                    } else {
                        mp.tokens
                    }
                })
                .sum();
            kept + mid
        }
        StrategyKind::V1 | StrategyKind::V2 | StrategyKind::V21 => {
            if !plan.zones.has_compressible() {
                return kept;
            }
            let fit = Fit::measure(plan, messages, counter);
            fit.estimate(plan.summary_limit.or_else(|| fit.limit(plan.config.sampling.max_tokens)))
        }
    }
}
