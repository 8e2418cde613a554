//! Applying a plan: the only step that calls the summariser.

use serde::{Deserialize, Serialize};

use crate::error::ForgettingError;
use crate::literals::{self, Literal};
use crate::message::{Message, MessageId, Role, question_index};
use crate::plan::{CompactionPlan, StrategyKind, Tier};
use crate::summary::{Shrink, Summarizer, build_request, clean_summary, fallback, label, shrink};
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
}

/// A compacted history and its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// The new history: `[pinned…, summary, recent…]` for summarising strategies.
    pub messages: Vec<Message>,
    /// What happened.
    pub report: CompactionReport,
}

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
    plan.messages
        .iter()
        .filter_map(|mp| shrink_for(mp.tier, plan).map(|s| shrink(&messages[mp.index], s)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn plan_literals(plan: &CompactionPlan, messages: &[Message]) -> Vec<Literal> {
    let texts: Vec<(usize, String)> = plan
        .messages
        .iter()
        .filter(|mp| mp.tier.is_summarised())
        .map(|mp| (mp.index, messages[mp.index].analysis_text()))
        .collect();
    literals::extract(texts.iter().map(|(i, t)| (*i, t.as_str())), plan.config.literals)
}

fn anchor_text(m: &Message) -> String {
    let mut s = label(m);
    s.push('\n');
    s.push_str(&m.analysis_text());
    s
}

/// The content of the summary message.
fn summary_content(
    plan: &CompactionPlan,
    messages: &[Message],
    anchors: &[usize],
    model_summary: &str,
    literals: &[Literal],
) -> String {
    let range = plan.zones.compressible();
    let first = messages.get(range.start).map(|m| m.id.0.as_str()).unwrap_or("");
    let last = messages.get(range.end.saturating_sub(1)).map(|m| m.id.0.as_str()).unwrap_or("");
    let mut s = format!(
        "[Summary of the prior investigation: messages {first}–{last} ({} messages) were compacted by measured forgetting, strategy {}.]",
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
        s.push_str("\nSummary:\n");
        s.push_str(model_summary.trim());
    }
    if !literals.is_empty() {
        s.push('\n');
        s.push_str(&literals::render(literals));
    }
    s
}

fn summary_message(plan: &CompactionPlan, messages: &[Message], content: String) -> Message {
    let range = plan.zones.compressible();
    let first = messages.get(range.start).map(|m| m.id.0.as_str()).unwrap_or("");
    let mut m = Message::user(&format!("summary-{first}"), &content);
    m.role = Role::User;
    m.summary = true;
    m
}

/// The plan's estimate of the tokens after compaction, the model summary
/// counted as `max_tokens` short words.
pub fn estimate_after(plan: &CompactionPlan, messages: &[Message], counter: &dyn TokenCounter) -> usize {
    let kept: usize = plan
        .messages
        .iter()
        .filter(|mp| mp.zone != Zone::Compressible && mp.tier == Tier::Keep)
        .map(|mp| mp.tokens)
        .sum();
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
            let anchors: Vec<usize> = plan.messages.iter().filter(|m| m.tier == Tier::Verbatim).map(|m| m.index).collect();
            let any_summarised = plan.messages.iter().any(|m| m.tier.is_summarised());
            let placeholder = if any_summarised { "- w\n".repeat(plan.config.sampling.max_tokens as usize / 2) } else { String::new() };
            let lits = plan_literals(plan, messages);
            let content = summary_content(plan, messages, &anchors, &placeholder, &lits);
            kept + counter.count_message(&summary_message(plan, messages, content))
        }
    }
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
/// the preserved literals.
///
/// # Errors
/// [`ForgettingError::PlanMismatch`] when the plan was made for another
/// history; [`ForgettingError::BudgetNotRestored`] when a compacting
/// strategy cannot get the history under the threshold, even after dropping
/// anchors, shortening the summary and the literal list. A failing
/// summariser is not an error (see the report's `fallback`).
pub fn apply(
    plan: &CompactionPlan,
    messages: &[Message],
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<Compaction, ForgettingError> {
    if plan.messages.len() != messages.len() {
        return Err(ForgettingError::PlanMismatch(format!(
            "plan has {} messages, history {}",
            plan.messages.len(),
            messages.len()
        )));
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
    };
    let pinned = &messages[..z.pinned_end];
    let recent = &messages[z.recent_start..];
    let (out, after): (Vec<Message>, ZoneTokens) = match plan.strategy {
        StrategyKind::None => (messages.to_vec(), before),
        StrategyKind::Baseline => {
            report.dropped = ids(Tier::Drop);
            let kept: Vec<Message> = plan
                .messages
                .iter()
                .filter(|mp| mp.tier != Tier::Drop)
                .map(|mp| messages[mp.index].clone())
                .collect();
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
                    let request = build_request(question, &log, &plan.instructions, plan.config.sampling);
                    model_summary = match summarizer.summarize(&request) {
                        Ok(raw) => match clean_summary(&raw) {
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
                // Repair the budget: anchors (lowest influence first, their
                // literals kept), then the summary's tail, then literals.
                while t.total > threshold {
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
                        let mut texts: Vec<(usize, String)> = plan
                            .messages
                            .iter()
                            .filter(|mp| mp.tier.is_summarised())
                            .map(|mp| (mp.index, messages[mp.index].analysis_text()))
                            .collect();
                        texts.extend(extra_texts.iter().cloned());
                        texts.sort_by_key(|(i, _)| *i);
                        lits = literals::extract(texts.iter().map(|(i, s)| (*i, s.as_str())), plan.config.literals);
                    } else if model_summary.chars().count() > 40 {
                        let keep = model_summary.chars().count() / 2;
                        model_summary = model_summary.chars().take(keep).collect();
                        report.notes.push(format!("budget: model summary cut to {keep} characters"));
                    } else if !lits.is_empty() {
                        let n = lits.len() / 2;
                        lits.truncate(n);
                        report.notes.push(format!("budget: literal list cut to {n}"));
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
    if plan.strategy != StrategyKind::None && after.total > threshold {
        return Err(ForgettingError::BudgetNotRestored { tokens: after.total, threshold, messages: out.len() });
    }
    // Never apply a compaction that does not shrink the history: below the
    // threshold a summary plus its anchors and literals can outgrow what it
    // replaces, and forgetting for nothing loses information for no tokens.
    let (out, after) = if out != messages && after.total >= before.total {
        let why = format!(
            "the compacted history would be {} tokens, not fewer than the {} before: the history is kept as it was",
            after.total, before.total
        );
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
mod tests {
    use super::*;
    use crate::budget::Budget;
    use crate::message::ToolCall;
    use crate::plan::PlanConfig;
    use crate::strategy::plan;
    use crate::summary::SummaryRequest;
    use crate::tokens::ApproxTokenCounter;
    use serde_json::json;

    /// Returns a fixed reply and records what it was asked.
    struct Fixed(Result<String, ()>, Vec<SummaryRequest>);
    impl Summarizer for Fixed {
        fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
            self.1.push(request.clone());
            self.0.clone().map_err(|()| ForgettingError::Summarizer("model crashed".to_owned()))
        }
    }

    fn history() -> Vec<Message> {
        let call = |id: &str, path: &str| ToolCall { id: id.into(), name: "read_file".into(), arguments: json!({ "path": path }) };
        vec![
            Message::system("sys", "You are an investigator."),
            Message::user("q", "Why does the nightly export fail?"),
            Message::assistant_calls("a1", "", vec![call("c1", "/etc/export/config.yaml")]),
            Message::tool_result("t1", "c1", "read_file", &format!("batch_size: 5000\ntarget: s3://exports-7f3a/nightly\n{}", "pad ".repeat(200))),
            Message::assistant_calls("a2", "", vec![call("c2", "/var/log/export.log")]),
            Message::tool_error("t2", "c2", "read_file", "PermissionError: [Errno 13] Permission denied: '/var/log/export.log'"),
            Message::user("more", "Keep going."),
            Message::assistant("last", "Checking the IAM role next."),
        ]
    }

    fn budget() -> Budget {
        Budget { context: 100_000, reserve: 1_000, ratio: 0.75, recent: 2 }
    }

    #[test]
    fn v1_replaces_the_middle_with_one_labelled_summary() {
        let h = history();
        let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let mut s = Fixed(Ok("- export config read; batch 5000\n- log unreadable: permission denied".into()), vec![]);
        let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
        assert_eq!(c.messages.len(), 2 + 1 + 2);
        assert_eq!(c.messages[..2], h[..2]);
        assert_eq!(c.messages[3..], h[6..]);
        let summary = &c.messages[2];
        assert!(summary.summary);
        assert!(summary.content.starts_with("[Summary of the prior investigation"), "{}", summary.content);
        assert!(summary.content.contains("batch 5000"));
        // Error-aware input: the error is one line of its type; results are cut.
        let log = &s.1[0].user;
        assert!(log.contains("error: PermissionError"), "{log}");
        assert!(!log.contains("Errno 13"), "{log}");
        assert!(log.chars().count() < h[3].content.chars().count() + 400);
        assert_eq!(c.report.summarised.len(), 4);
        assert!(c.report.fallback.is_none());
    }

    #[test]
    fn literals_survive_next_to_the_summary_even_when_the_model_drops_them() {
        let h = history();
        let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let mut s = Fixed(Ok("- the export reads a config and a log".into()), vec![]);
        let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
        let text = &c.messages[2].content;
        for lit in ["/etc/export/config.yaml", "exports-7f3a", "5000"] {
            assert!(text.contains(lit), "{lit} missing from {text}");
        }
        assert_eq!(c.report.literals_in_model_summary, 0);
    }

    #[test]
    fn a_failing_or_garbage_summariser_falls_back_to_500_characters() {
        let h = history();
        let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        for reply in [Err(()), Ok("<tool_call>{\"name\": \"x\"}</tool_call>".to_owned()), Ok("<think>hmm".to_owned())] {
            let mut s = Fixed(reply, vec![]);
            let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
            assert!(c.report.fallback.is_some());
            let used = c.report.summary.unwrap();
            assert!(used.chars().count() <= 500);
            assert!(used.contains("read_file"), "{used}");
        }
    }

    #[test]
    fn a_plan_for_another_history_is_refused() {
        let h = history();
        let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let mut other = h.clone();
        other[3].id = MessageId("zz".into());
        let err = apply(&p, &other, &mut Fixed(Ok("x".into()), vec![]), &ApproxTokenCounter).unwrap_err();
        assert!(matches!(err, ForgettingError::PlanMismatch(_)));
        let err = apply(&p, &h[..5], &mut Fixed(Ok("x".into()), vec![]), &ApproxTokenCounter).unwrap_err();
        assert!(matches!(err, ForgettingError::PlanMismatch(_)));
    }

    #[test]
    fn an_impossible_budget_is_a_typed_error_not_a_silent_overflow() {
        let h = history();
        let tiny = Budget { context: 256, reserve: 64, ratio: 0.75, recent: 2 };
        let p = plan(StrategyKind::V1, &h, &tiny, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        match apply(&p, &h, &mut Fixed(Ok("- ok then".into()), vec![]), &ApproxTokenCounter) {
            Err(ForgettingError::BudgetNotRestored { tokens, threshold, .. }) => assert!(tokens > threshold),
            Ok(c) => assert!(c.report.within_budget),
            Err(e) => panic!("untyped: {e}"),
        }
    }

    #[test]
    fn a_compaction_that_would_grow_the_history_is_not_applied() {
        // A short middle zone and a verbose summariser: the summary message
        // (header, model text, literals) outgrows the two messages it replaces.
        let h = vec![
            Message::system("sys", "You are an investigator."),
            Message::user("q", "Why does the nightly export fail?"),
            Message::assistant("a1", "Reading the config."),
            Message::assistant("a2", "Batch size is 5000."),
            Message::user("more", "Keep going."),
            Message::assistant("last", "Checking the IAM role next."),
        ];
        let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let verbose = "- the export job was examined in detail and its configuration file was read carefully\n".repeat(6);
        let c = apply(&p, &h, &mut Fixed(Ok(verbose), vec![]), &ApproxTokenCounter).unwrap();
        assert_eq!(c.messages, h, "the original history must be kept unchanged");
        let why = c.report.kept_original.as_deref().unwrap();
        assert!(why.contains("not fewer than"), "{why}");
        assert_eq!(c.report.tokens_after, c.report.tokens_before);
        assert_eq!(c.report.messages_after, h.len());
        assert!(c.report.summarised.is_empty() && c.report.dropped.is_empty() && c.report.verbatim.is_empty());
        assert!(c.report.notes.iter().any(|n| n.starts_with("not applied")), "{:?}", c.report.notes);
        // The same plan with a terse summariser shrinks the history and is applied.
        let h2 = history();
        let p2 = plan(StrategyKind::V1, &h2, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let c2 = apply(&p2, &h2, &mut Fixed(Ok("- batch 5000".into()), vec![]), &ApproxTokenCounter).unwrap();
        assert!(c2.report.kept_original.is_none());
        assert!(c2.report.tokens_after.total < c2.report.tokens_before.total);
    }

    #[test]
    fn masking_placeholder_states_the_size() {
        assert_eq!(mask_placeholder(1234567), "[tool output elided: 1,234,567 chars]");
        assert_eq!(mask_placeholder(12), "[tool output elided: 12 chars]");
    }
}
