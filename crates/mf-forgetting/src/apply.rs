//! Applying a plan: the only step that calls the summariser.

use serde::{Deserialize, Serialize};

use crate::error::ForgettingError;
use crate::estimate::{Fit, plan_literals, summary_content, summary_message};
pub use crate::estimate::{estimate_after, mask_placeholder, summarizer_log};
use crate::literals::{self, Literal};
use crate::message::{Message, MessageId, question_index};
use crate::plan::{CompactionPlan, Decline, StrategyKind, Tier};
use crate::summary::{Summarizer, build_request, clean_summary, fallback, informative_values, keeps_any_value};

/// A model summary is refused when the compacted messages hold at least this
/// many informative values ([`informative_values`]) and it keeps none.
const MIN_VALUES_TO_KEEP: usize = 3;
use crate::taxonomy::ProblemClass;
use crate::tokens::TokenCounter;

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

fn zone_tokens(messages: &[Message], counter: &dyn TokenCounter, pinned: usize, recent_from: usize) -> ZoneTokens {
    let mut t = ZoneTokens::default();
    for (i, m) in messages.iter().enumerate() {
        let n = counter.count_message(m);
        if i < pinned {
            t.pinned += n;
        } else if i < recent_from {
            t.compressible += n;
        } else {
            t.recent += n;
        }
        t.total += n;
    }
    t
}

/// Applies a plan.
///
/// Pinned messages are copied byte-identical, recent ones verbatim. For v1,
/// v2 and v2.1 the compressible zone becomes one summary message (marked
/// `summary`): verbatim anchors, the model summary of the rest (or the
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
    let z = plan.zones;
    let threshold = plan.budget.threshold();
    let before = zone_tokens(messages, counter, z.pinned_end, z.recent_start);
    let ids = |t: Tier| plan.ids_with(t);
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
        compressible_chars: messages[z.compressible()].iter().map(Message::text_chars).sum(),
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
    let pinned = &messages[..z.pinned_end];
    let recent = &messages[z.recent_start..];
    // See the doc above: no room under the threshold for the summary.
    let summarising = matches!(plan.strategy, StrategyKind::V1 | StrategyKind::V2 | StrategyKind::V21) && z.has_compressible();
    let relaxed = summarising && before.total > threshold && !Fit::measure(plan, messages, counter).feasible();
    let hard = plan.budget.context.saturating_sub(plan.budget.reserve).max(threshold);
    let mut target = threshold;
    let (out, after): (Vec<Message>, ZoneTokens) = match plan.strategy {
        StrategyKind::None => (messages.to_vec(), before),
        StrategyKind::Baseline => {
            report.dropped = ids(Tier::Drop);
            let kept: Vec<Message> = plan.messages.iter().filter(|mp| mp.tier != Tier::Drop).map(|mp| messages[mp.index].clone()).collect();
            let first_kept_pinned = plan.messages[..z.pinned_end].iter().filter(|m| m.tier != Tier::Drop).count();
            let recent_from = kept.len() - recent.len();
            let t = zone_tokens(&kept, counter, first_kept_pinned, recent_from);
            (kept, t)
        }
        StrategyKind::Masking => {
            report.masked = ids(Tier::Mask);
            let out: Vec<Message> = plan
                .messages
                .iter()
                .map(|mp| {
                    let mut m = messages[mp.index].clone();
                    if mp.tier == Tier::Mask {
                        m.content = mask_placeholder(m.content.chars().count());
                    }
                    m
                })
                .collect();
            let t = zone_tokens(&out, counter, z.pinned_end, z.recent_start);
            if t.total > threshold {
                // The plan masked every compressible output to get here: masking can take no more.
                target = hard;
                report.notes.push(format!(
                    "target C − G = {hard} tokens, not the threshold {threshold}: every compressible tool output is masked and the pinned and recent zones hold the rest"
                ));
            }
            (out, t)
        }
        StrategyKind::V1 | StrategyKind::V2 | StrategyKind::V21 => {
            if !z.has_compressible() {
                report.notes.push("nothing to compress: the compressible zone is empty".to_owned());
                (messages.to_vec(), before)
            } else {
                report.verbatim = ids(Tier::Verbatim);
                report.dropped = ids(Tier::Drop);
                report.summarised = plan.messages.iter().filter(|m| m.tier.is_summarised()).map(|m| m.id.clone()).collect();
                let log = summarizer_log(plan, messages);
                report.summarizer_input_chars = log.chars().count();
                let mut model_summary = String::new();
                if !log.is_empty() {
                    let question = question_index(messages).map(|q| messages[q].content.as_str()).unwrap_or("");
                    let mut params = plan.config.sampling;
                    if let Some(limit) = plan.summary_limit {
                        params.max_tokens = params.max_tokens.min(limit);
                    }
                    let request = build_request(question, &log, &plan.instructions, params);
                    let summarised: Vec<&Message> = plan.messages.iter().filter(|m| m.tier.is_summarised()).map(|m| &messages[m.index]).collect();
                    let values = informative_values(&summarised);
                    model_summary = match summarizer.summarize(&request) {
                        Ok(raw) => match clean_summary(&raw) {
                            // The pass was told to keep every number, datum and fact:
                            // one that keeps none of several is garbage too.
                            Ok(s) if values.len() >= MIN_VALUES_TO_KEEP && !keeps_any_value(&s, &values) => {
                                report.fallback = Some(format!("summary keeps none of the {} values of the compacted messages", values.len()));
                                fallback(&log, plan.config.fallback_chars)
                            }
                            Ok(s) => s,
                            Err(why) => {
                                report.fallback = Some(why);
                                fallback(&log, plan.config.fallback_chars)
                            }
                        },
                        Err(e) => {
                            report.fallback = Some(e.to_string());
                            fallback(&log, plan.config.fallback_chars)
                        }
                    };
                }
                let mut anchors: Vec<usize> = plan.messages.iter().filter(|m| m.tier == Tier::Verbatim).map(|m| m.index).collect();
                let mut lits = plan_literals(plan, messages);
                let mut extra_texts: Vec<(usize, String)> = Vec::new();
                report.literals_in_model_summary = lits.iter().filter(|l| model_summary.contains(&l.text)).count();
                let build = |anchors: &[usize], summary: &str, lits: &[Literal]| -> (Vec<Message>, ZoneTokens) {
                    let shown: Vec<Literal> = lits.iter().filter(|l| !summary.contains(&l.text)).cloned().collect();
                    let content = summary_content(plan, messages, anchors, summary, &shown);
                    let mut out = pinned.to_vec();
                    out.push(summary_message(plan, messages, content));
                    out.extend_from_slice(recent);
                    let t = zone_tokens(&out, counter, pinned.len(), pinned.len() + 1);
                    (out, t)
                };
                let (mut out, mut t) = build(&anchors, &model_summary, &lits);
                // With no room under the threshold, one of the two is kept whole:
                // the model's summary, or (when the pass fell back to the log's
                // head, which holds the values of the first messages only) the
                // literal list, which holds the values of every message.
                let literals_first = relaxed && report.fallback.is_some() && !lits.is_empty();
                if relaxed {
                    let (kept, whole) =
                        if literals_first { ("the literal list", build(&[], "", &lits)) } else { ("the summary", build(&[], &model_summary, &[])) };
                    target = whole.1.total.clamp(threshold, hard);
                    report.notes.push(format!(
                        "target {target} tokens (at most C − G = {hard}), not the threshold {threshold}: the pinned and recent zones leave no room under it for {kept}"
                    ));
                }
                // Repair the budget: anchors (lowest influence first, their
                // literals kept), then the summary's tail, then literals
                // (with a relaxed target the literals go before the summary,
                // which is all the zone keeps; a fallback goes before the literals).
                while t.total > target {
                    if !anchors.is_empty() {
                        let (k, _) = anchors
                            .iter()
                            .enumerate()
                            .min_by(|(_, a), (_, b)| {
                                let ia = plan.messages[**a].influence.unwrap_or(0.0);
                                let ib = plan.messages[**b].influence.unwrap_or(0.0);
                                ia.total_cmp(&ib).then(b.cmp(a))
                            })
                            .unwrap_or((0, &0));
                        let i = anchors.remove(k);
                        report.notes.push(format!("budget: anchor {} removed after summarising", messages[i].id));
                        extra_texts.push((i, messages[i].analysis_text()));
                        let mut texts: Vec<(usize, String)> =
                            plan.messages.iter().filter(|mp| mp.tier.is_summarised()).map(|mp| (mp.index, messages[mp.index].analysis_text())).collect();
                        texts.extend(extra_texts.iter().cloned());
                        texts.sort_by_key(|(i, _)| *i);
                        lits = literals::extract(texts.iter().map(|(i, s)| (*i, s.as_str())), plan.config.literals);
                    } else if literals_first && !model_summary.is_empty() {
                        let keep = model_summary.chars().count() / 2;
                        model_summary = if keep < 40 { String::new() } else { model_summary.chars().take(keep).collect() };
                        report.notes.push(format!("budget: fallback summary cut to {} characters", model_summary.chars().count()));
                    } else if (relaxed || model_summary.chars().count() <= 40) && !lits.is_empty() {
                        let n = lits.len() / 2;
                        lits.truncate(n);
                        report.notes.push(format!("budget: literal list cut to {n}"));
                    } else if model_summary.chars().count() > 40 {
                        let keep = model_summary.chars().count() / 2;
                        model_summary = model_summary.chars().take(keep).collect();
                        report.notes.push(format!("budget: model summary cut to {keep} characters"));
                    } else {
                        break;
                    }
                    (out, t) = build(&anchors, &model_summary, &lits);
                }
                report.verbatim = anchors.iter().map(|&i| messages[i].id.clone()).collect();
                for (i, _) in &extra_texts {
                    report.summarised.push(messages[*i].id.clone());
                }
                report.literals = lits;
                report.summary = (!model_summary.is_empty()).then_some(model_summary);
                (std::mem::take(&mut out), t)
            }
        }
    };
    if plan.strategy != StrategyKind::None && after.total > target {
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
