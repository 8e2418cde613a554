//! v1, v2 and v2.1 carried out: the compressible zone becomes one summary
//! message. The three strategies differ in their plans (which messages are
//! anchors, summarised or dropped, and how much of each the summariser
//! reads), not in how a plan is carried out.

use super::repair::{FirstCut, Parts, Step, repair};
use super::{CompactionReport, Executed, Input, ZoneTokens, zone_tokens};
use crate::estimate::{Fit, plan_literals, summarizer_log, summary_content, summary_message};
use crate::literals::{self, Literal};
use crate::message::{Message, question_index};
use crate::plan::{CompactionPlan, Tier};
use crate::summary::{Summarizer, build_request, clean_summary, fallback, informative_values, keeps_any_value};
use crate::zones::Zone;

/// A model summary is refused when the compacted messages hold at least this
/// many informative values ([`informative_values`]) and it keeps none.
/// Below three, keeping none can be a sound summary's choice (one or two
/// values may be incidental: a port, a count put in words), and refusing it
/// would trade it for the log's head; a summary that keeps none of three or
/// more kept none of the facts it was asked to keep.
const MIN_VALUES_TO_KEEP: usize = 3;

/// The summary message `[pinned…, summary, recent…]`, held to the threshold,
/// or to a raised target when the pinned and recent zones leave no room
/// under the threshold (see [`crate::apply()`]). Over its target, the parts
/// of the summary message give way in the order of [`repair`].
pub(super) fn execute(input: &Input<'_>, summarizer: &mut dyn Summarizer, report: &mut CompactionReport) -> Executed {
    let Input { plan, messages, counter, before, threshold, hard } = *input;
    let z = &plan.zones;
    if !z.has_compressible() {
        report.notes.push("nothing to compress: the compressible zone is empty".to_owned());
        return Executed { messages: messages.to_vec(), tokens: before, target: Some(threshold) };
    }
    // No room under the threshold for the summary (see `apply`).
    let relaxed = before.total > threshold && !Fit::measure(plan, messages, counter).feasible();
    report.verbatim = plan.ids_with(Tier::Verbatim);
    report.dropped = plan.ids_with(Tier::Drop);
    report.summarised = plan.messages.iter().filter(|m| m.tier.is_summarised()).map(|m| m.id.clone()).collect();
    let log = summarizer_log(plan, messages);
    report.summarizer_input_chars = log.chars().count();
    let mut summary = String::new();
    if !log.is_empty() {
        (summary, report.fallback) = summary_pass(plan, messages, &log, summarizer);
    }
    let anchors: Vec<usize> = plan.messages.iter().filter(|m| m.tier == Tier::Verbatim).map(|m| m.index).collect();
    let literals = plan_literals(plan, messages);
    report.literals_in_model_summary = literals.iter().filter(|l| summary.contains(&l.text)).count();
    // The pinned zone, then the user's pins in their order: the summary
    // follows them all, so the prompt up to the first compacted message is
    // unchanged (and stays in the KV cache).
    let pinned: Vec<Message> = z.kept_before_summary().map(|i| messages[i].clone()).collect();
    let recent = &messages[z.recent_start..];
    let build = |parts: &Parts| -> (Vec<Message>, ZoneTokens) {
        let shown: Vec<Literal> = parts.literals.iter().filter(|l| !parts.summary.contains(&l.text)).cloned().collect();
        let content = summary_content(plan, messages, &parts.anchors, &parts.summary, &shown);
        let mut out = pinned.clone();
        out.push(summary_message(plan, messages, content));
        out.extend_from_slice(recent);
        let n = pinned.len();
        let t = zone_tokens(&out, counter, |i| {
            if i < n {
                Zone::Pinned
            } else if i == n {
                Zone::Compressible
            } else {
                Zone::Recent
            }
        });
        (out, t)
    };
    // With no room under the threshold, one of the two is kept whole:
    // the model's summary, or (when the pass fell back to the log's
    // head, which holds the values of the first messages only) the
    // literal list, which holds the values of every message.
    let first = match (relaxed, report.fallback.is_some() && !literals.is_empty()) {
        (false, _) => FirstCut::Summary,
        (true, false) => FirstCut::Literals,
        (true, true) => FirstCut::Fallback,
    };
    let mut target = threshold;
    if relaxed {
        let (kept, whole) = if first == FirstCut::Fallback {
            ("the literal list", Parts { anchors: Vec::new(), summary: String::new(), literals: literals.clone() })
        } else {
            ("the summary", Parts { anchors: Vec::new(), summary: summary.clone(), literals: Vec::new() })
        };
        target = build(&whole).1.total.clamp(threshold, hard);
        report.notes.push(format!(
            "target {target} tokens (at most C − G = {hard}), not the threshold {threshold}: the pinned and recent zones leave no room under it for {kept}"
        ));
    }
    let (parts, steps) = repair(
        Parts { anchors, summary, literals },
        first,
        target,
        |i| plan.messages[i].influence.unwrap_or(0.0),
        |removed| literals_with(plan, messages, removed),
        |parts| build(parts).1.total,
    );
    let (out, tokens) = build(&parts);
    for step in &steps {
        report.notes.push(match *step {
            Step::AnchorRemoved(i) => format!("budget: anchor {} removed after summarising", messages[i].id),
            Step::FallbackCut(chars) => format!("budget: fallback summary cut to {chars} characters"),
            Step::LiteralsCut(n) => format!("budget: literal list cut to {n}"),
            Step::SummaryCut(chars) => format!("budget: model summary cut to {chars} characters"),
        });
    }
    report.verbatim = parts.anchors.iter().map(|&i| messages[i].id.clone()).collect();
    report.summarised.extend(steps.iter().filter_map(|s| match *s {
        Step::AnchorRemoved(i) => Some(messages[i].id.clone()),
        _ => None,
    }));
    report.literals = parts.literals;
    report.summary = (!parts.summary.is_empty()).then_some(parts.summary);
    Executed { messages: out, tokens, target: Some(target) }
}

/// The summary pass over `log`: the model's cleaned summary, or the
/// fallback (the log's head) and why the model's was not used. The pass is
/// asked for at most the plan's `summary_limit` tokens.
fn summary_pass(plan: &CompactionPlan, messages: &[Message], log: &str, summarizer: &mut dyn Summarizer) -> (String, Option<String>) {
    let question = question_index(messages).map(|q| messages[q].content.as_str()).unwrap_or("");
    let mut params = plan.config.sampling;
    if let Some(limit) = plan.summary_limit {
        params.max_tokens = params.max_tokens.min(limit);
    }
    let request = build_request(question, log, &plan.instructions, params);
    let summarised: Vec<&Message> = plan.messages.iter().filter(|m| m.tier.is_summarised()).map(|m| &messages[m.index]).collect();
    let values = informative_values(&summarised);
    let why = match summarizer.summarize(&request) {
        Ok(raw) => match clean_summary(&raw) {
            // The pass was told to keep every number, datum and fact:
            // one that keeps none of several is garbage too.
            Ok(s) if values.len() >= MIN_VALUES_TO_KEEP && !keeps_any_value(&s, &values) => {
                format!("summary keeps none of the {} values of the compacted messages", values.len())
            }
            Ok(s) => return (s, None),
            Err(why) => why,
        },
        Err(e) => e.to_string(),
    };
    (fallback(log, plan.config.fallback_chars), Some(why))
}

/// The literal list once the anchors `removed` are summarised too: the
/// literals of every summarised message and of those anchors, in history
/// order, bounded by the plan's limits (an anchor's values outlive it).
fn literals_with(plan: &CompactionPlan, messages: &[Message], removed: &[usize]) -> Vec<Literal> {
    let summarised = plan.messages.iter().filter(|mp| mp.tier.is_summarised()).map(|mp| mp.index);
    let mut texts: Vec<(usize, String)> = summarised.chain(removed.iter().copied()).map(|i| (i, messages[i].analysis_text())).collect();
    texts.sort_by_key(|(i, _)| *i);
    literals::extract(texts.iter().map(|(i, s)| (*i, s.as_str())), plan.config.literals)
}
