//! Applying a plan: the only step that calls the summariser.
//!
//! [`apply()`] checks that the plan belongs to the history, lets the plan's
//! strategy carry it out, then holds every strategy to the same two rules:
//! the result meets its target, and it is smaller than the history (else
//! the history is kept). Each strategy's execution is a module of its own:
//!
//! - `none`: the control arm, the history as it is;
//! - `baseline`: the dropped messages removed;
//! - `masking`: masked tool outputs replaced by a placeholder;
//! - `summarising`: v1, v2 and v2.1 alike (they differ in their plans,
//!   not in how a plan is carried out): the summary pass, the summary
//!   message, and its budget repair, a pure function in `repair`.
//!
//! These sit here and not beside the planners in [`crate::strategy`](mod@crate::strategy): they
//! need this module's report types, and planning never needs executing, so
//! `strategy` and `apply` do not import each other.

mod baseline;
mod masking;
mod none;
mod repair;
mod summarising;

use serde::{Deserialize, Serialize};

use crate::error::ForgettingError;
pub use crate::estimate::{estimate_after, mask_placeholder, summarizer_log};
use crate::literals::Literal;
use crate::message::{Message, MessageId};
use crate::plan::{CompactionPlan, Decline, StrategyKind};
use crate::summary::Summarizer;
use crate::taxonomy::ProblemClass;
use crate::tokens::TokenCounter;
use crate::zones::Zone;

/// Tokens of a history per zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ZoneTokens {
    /// Pinned zone.
    pub pinned: usize,
    /// Compressible zone before; what replaced it (summary, masked messages) after.
    pub compressible: usize,
    /// Recent zone.
    pub recent: usize,
    /// All.
    pub total: usize,
}

/// What a compaction did, for the UI's ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// Strategy.
    pub strategy: StrategyKind,
    /// Problem class (v2, v2.1).
    pub class: Option<ProblemClass>,
    /// Tokens before.
    pub tokens_before: ZoneTokens,
    /// Tokens after.
    pub tokens_after: ZoneTokens,
    /// The threshold.
    pub threshold: usize,
    /// Whether the result is at or below the threshold.
    pub within_budget: bool,
    /// Messages before.
    pub messages_before: usize,
    /// Messages after.
    pub messages_after: usize,
    /// The summariser's cleaned text, or the fallback text.
    pub summary: Option<String>,
    /// Characters of the compressible zone's original text.
    pub compressible_chars: usize,
    /// Characters of the log sent to the summariser.
    pub summarizer_input_chars: usize,
    /// Literals preserved next to the summary.
    pub literals: Vec<Literal>,
    /// How many of them the model summary itself kept.
    pub literals_in_model_summary: usize,
    /// Ids copied verbatim into the summary message.
    pub verbatim: Vec<MessageId>,
    /// Ids whose text went to the summariser.
    pub summarised: Vec<MessageId>,
    /// Ids whose tool output was replaced by a placeholder.
    pub masked: Vec<MessageId>,
    /// Ids removed.
    pub dropped: Vec<MessageId>,
    /// Why the fallback was used, if it was.
    pub fallback: Option<String>,
    /// Budget repairs and other notes.
    pub notes: Vec<String>,
    /// Set when the compacted history would not have been smaller than the
    /// original (a summary that outgrew what it replaced, below the
    /// threshold): the original is kept unchanged and this says why. The
    /// plan's fates (verbatim / summarised / dropped) were then not carried out.
    #[serde(default)]
    pub kept_original: Option<String>,
    /// Set when the plan declined to compact (below the threshold the result
    /// could not be smaller than the history): the history is kept, no
    /// summary pass was spent. Absent in reports written before plans could
    /// decline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declined: Option<Decline>,
}

/// A compacted history and its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// The new history: `[pinned…, summary, recent…]` for summarising strategies.
    pub messages: Vec<Message>,
    /// What happened.
    pub report: CompactionReport,
}

/// Tokens of `messages` per zone, `zone(i)` saying which holds message `i`.
fn zone_tokens(messages: &[Message], counter: &dyn TokenCounter, zone: impl Fn(usize) -> Zone) -> ZoneTokens {
    let mut t = ZoneTokens::default();
    for (i, m) in messages.iter().enumerate() {
        let n = counter.count_message(m);
        match zone(i) {
            Zone::Pinned => t.pinned += n,
            Zone::Compressible => t.compressible += n,
            Zone::Recent => t.recent += n,
        }
        t.total += n;
    }
    t
}

/// What every strategy's execution reads.
#[derive(Clone, Copy)]
struct Input<'a> {
    plan: &'a CompactionPlan,
    messages: &'a [Message],
    counter: &'a dyn TokenCounter,
    /// Tokens per zone of `messages`.
    before: ZoneTokens,
    /// The plan's threshold, every strategy's target unless it says otherwise.
    threshold: usize,
    /// `C − G`, at least the threshold: the target when the pinned and recent
    /// zones leave the strategy no room under the threshold (the next reply
    /// still fits).
    hard: usize,
}

/// What a strategy's execution produced, before the checks [`apply`] holds
/// every strategy to.
struct Executed {
    /// The new history.
    messages: Vec<Message>,
    /// Its tokens per zone.
    tokens: ZoneTokens,
    /// The tokens it must not exceed: the threshold, `C − G`, or in between;
    /// `None` for the control arm, which is held to nothing.
    target: Option<usize>,
}

/// Applies a plan.
///
/// Pinned messages are copied byte-identical, recent ones verbatim; so are
/// the messages the user pinned ([`Zones::pins`](crate::zones::Zones::pins)),
/// which no strategy masks, summarises or drops. For v1, v2 and v2.1 the
/// compressible zone becomes one summary message (marked `summary`), after
/// the pinned zone and the user's pins in their order: verbatim anchors, the model summary of the rest (or the
/// 500-character fallback when the summariser fails or returns garbage), and
/// the preserved literals. The summary pass is asked for at most the plan's
/// `summary_limit` tokens. A plan that declined (see [`crate::estimate`])
/// is not carried out: the history comes back unchanged with the report's
/// `declined` set, and the summariser is not called.
///
/// The result must get under the threshold, with one exception: when the
/// pinned and recent zones leave too little room under it for the summary
/// at the plan's limit (the plan is not feasible, see [`crate::estimate`];
/// a small window whose every round brings a large tool result), cutting
/// the summary to a stub would buy the threshold with every fact the zone
/// held. The target is then the hard room `C − G` (the next reply still
/// fits), the report says so (`within_budget` false, a note), and the loop
/// compacts again at its next round, the summary folded into the next one.
/// Masking likewise: with every compressible output masked and the history
/// still over the threshold, its target is `C − G`.
///
/// # Errors
/// [`ForgettingError::PlanMismatch`] when the plan was made for another
/// history; [`ForgettingError::BudgetNotRestored`] when a compacting
/// strategy cannot get the history under its target, even after dropping
/// anchors, shortening the summary and the literal list. A failing
/// summariser is not an error (see the report's `fallback`).
pub fn apply(plan: &CompactionPlan, messages: &[Message], summarizer: &mut dyn Summarizer, counter: &dyn TokenCounter) -> Result<Compaction, ForgettingError> {
    if plan.messages.len() != messages.len() {
        return Err(ForgettingError::PlanMismatch(format!("plan has {} messages, history {}", plan.messages.len(), messages.len())));
    }
    if let Some(mp) = plan.messages.iter().find(|mp| mp.id != messages[mp.index].id) {
        return Err(ForgettingError::PlanMismatch(format!("message {} is {:?} in the plan", mp.index, mp.id.0)));
    }
    let z = &plan.zones;
    let threshold = plan.budget.threshold();
    let before = zone_tokens(messages, counter, |i| z.zone_of(i));
    let mut report = CompactionReport {
        strategy: plan.strategy,
        class: plan.class.as_ref().map(|c| c.class),
        tokens_before: before,
        tokens_after: before,
        threshold,
        within_budget: before.total <= threshold,
        messages_before: messages.len(),
        messages_after: messages.len(),
        summary: None,
        compressible_chars: z.compressible().into_iter().map(|i| messages[i].text_chars()).sum(),
        summarizer_input_chars: 0,
        literals: Vec::new(),
        literals_in_model_summary: 0,
        verbatim: Vec::new(),
        summarised: Vec::new(),
        masked: Vec::new(),
        dropped: Vec::new(),
        fallback: None,
        notes: Vec::new(),
        kept_original: None,
        declined: None,
    };
    if let Some(d) = plan.declined {
        report.notes.push(format!("not compacted: {d}"));
        report.notes.extend(plan.notes.iter().cloned());
        report.declined = Some(d);
        return Ok(Compaction { messages: messages.to_vec(), report });
    }
    let hard = plan.budget.context.saturating_sub(plan.budget.reserve).max(threshold);
    let input = Input { plan, messages, counter, before, threshold, hard };
    let Executed { messages: out, tokens: after, target } = match plan.strategy {
        StrategyKind::None => none::execute(&input),
        StrategyKind::Baseline => baseline::execute(&input, &mut report),
        StrategyKind::Masking => masking::execute(&input, &mut report),
        StrategyKind::V1 | StrategyKind::V2 | StrategyKind::V21 => summarising::execute(&input, summarizer, &mut report),
    };
    if let Some(target) = target
        && after.total > target
    {
        return Err(ForgettingError::BudgetNotRestored { tokens: after.total, threshold: target, messages: out.len() });
    }
    // Never apply a compaction that does not shrink the history: below the
    // threshold a summary plus its anchors and literals can outgrow what it
    // replaces, and forgetting for nothing loses information for no tokens.
    let (out, after) = if out != messages && after.total >= before.total {
        let why = format!("the compacted history would be {} tokens, not fewer than the {} before: the history is kept as it was", after.total, before.total);
        report.notes.push(format!("not applied: {why}"));
        report.kept_original = Some(why);
        report.verbatim.clear();
        report.summarised.clear();
        report.masked.clear();
        report.dropped.clear();
        (messages.to_vec(), before)
    } else {
        (out, after)
    };
    report.tokens_after = after;
    report.messages_after = out.len();
    report.within_budget = after.total <= threshold;
    report.notes.extend(plan.notes.iter().cloned());
    Ok(Compaction { messages: out, report })
}

#[cfg(test)]
mod tests;
