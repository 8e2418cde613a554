//! Tests of [`super::apply`].

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
    let mut s = Fixed(Ok("- the export reads batch_size from a config; its log is unreadable".into()), vec![]);
    let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
    assert!(c.report.fallback.is_none());
    let text = &c.messages[2].content;
    for lit in ["/etc/export/config.yaml", "exports-7f3a", "5000"] {
        assert!(text.contains(lit), "{lit} missing from {text}");
    }
    assert_eq!(c.report.literals_in_model_summary, 1);
}

/// What SmolLM2 wrote for a long world: labels without content, or the
/// log's own format with none of its values. Such a summary keeps nothing
/// the pass was asked to keep: the fallback (the log's head, with its
/// values) takes its place.
#[test]
fn a_summary_that_keeps_none_of_the_values_falls_back() {
    let h = history();
    let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    for reply in ["[bullet-1]\n[bullet-2]\n[bullet-3]\n[bullet-4]", "[a1 tool-call] read_file /etc/export/config.yaml\n[t1 tool-result] read the file"] {
        let mut s = Fixed(Ok(reply.to_owned()), vec![]);
        let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
        let why = c.report.fallback.as_deref().unwrap_or_default();
        assert!(why.starts_with("summary keeps none of the") && why.ends_with("values of the compacted messages"), "{reply}: {why}");
        let used = c.report.summary.unwrap();
        assert!(used.contains("5000") && used.chars().count() <= 500, "{used}");
    }
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
        // Under the threshold, or (no room for a summary under it) under C − G and saying so.
        Ok(c) => assert!(
            c.report.within_budget
                || (c.report.tokens_after.total <= tiny.context - tiny.reserve && c.report.notes.iter().any(|n| n.contains("not the threshold"))),
            "{:?}",
            c.report
        ),
        Err(e) => panic!("untyped: {e}"),
    }
}

/// Distinct bullet lines of three approximate tokens each, `tokens` in all
/// (rounded down); the first keeps a value of [`tight_window`]'s results
/// (a summary that keeps none is refused).
fn bullets(tokens: u32) -> String {
    std::iter::once("- host1-7".to_owned()).chain((1..tokens / 3).map(|k| format!("- fact {k}"))).collect::<Vec<_>>().join("\n")
}

/// A small window whose pinned zone and one recent tool round nearly
/// fill the threshold (a long question, results of a few hundred tokens).
fn tight_window() -> (Vec<Message>, Budget) {
    let call = |id: &str, url: &str| ToolCall { id: id.into(), name: "http".into(), arguments: json!({ "url": url }) };
    let result = |k: u32| (0..40).map(|i| format!("host{k}-{i}: disk {i}%")).collect::<Vec<_>>().join(", ");
    let h = vec![
        Message::system("sys", &"You investigate by calling tools. ".repeat(30)),
        Message::user("q", &format!("Fetch every page in order, then answer. {}", "Which host is fullest? ".repeat(20))),
        Message::assistant_calls("a1", "", vec![call("c1", "http://127.0.0.1:9/page1.json")]),
        Message::tool_result("t1", "c1", "http", &result(1)),
        Message::assistant_calls("a2", "", vec![call("c2", "http://127.0.0.1:9/page2.json")]),
        Message::tool_result("t2", "c2", "http", &result(2)),
    ];
    (h, Budget { context: 1200, reserve: 150, ratio: 0.6, recent: 2 })
}

#[test]
fn a_window_too_tight_for_a_summary_under_the_threshold_keeps_the_summary_under_c_minus_g() {
    let (h, b) = tight_window();
    let p = plan(StrategyKind::V1, &h, &b, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    assert!(p.gauge.total() > b.threshold(), "{} <= {}", p.gauge.total(), b.threshold());
    let fixed = p.gauge.pinned + p.gauge.recent;
    assert!(fixed + 125 > b.threshold(), "the test needs pinned + recent ({fixed}) to leave no room for a summary");
    let summary = bullets(60);
    let c = apply(&p, &h, &mut Fixed(Ok(summary.clone()), vec![]), &ApproxTokenCounter).unwrap();
    assert!(c.messages[2].content.contains(&summary), "the summary was cut: {:?}", c.report);
    assert!(!c.report.notes.iter().any(|n| n.contains("summary cut")), "{:?}", c.report.notes);
    assert!(c.report.tokens_after.total < c.report.tokens_before.total);
    assert!(c.report.tokens_after.total > b.threshold() && !c.report.within_budget);
    assert!(c.report.tokens_after.total <= b.context - b.reserve);
    assert!(c.report.notes.iter().any(|n| n.contains("not the threshold")), "{:?}", c.report.notes);
    // A summary too long even for C − G is still cut to fit it.
    let long = bullets(900);
    let c = apply(&p, &h, &mut Fixed(Ok(long), vec![]), &ApproxTokenCounter).unwrap();
    assert!(c.report.tokens_after.total <= b.context - b.reserve, "{}", c.report.tokens_after.total);
    assert!(c.report.notes.iter().any(|n| n.contains("summary cut")), "{:?}", c.report.notes);
}

#[test]
fn masking_with_every_output_masked_and_still_over_the_threshold_targets_c_minus_g() {
    let (h, b) = tight_window();
    let p = plan(StrategyKind::Masking, &h, &b, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    let c = apply(&p, &h, &mut Fixed(Ok(String::new()), vec![]), &ApproxTokenCounter).unwrap();
    assert_eq!(c.report.masked, vec![MessageId("t1".into())], "the one compressible output is masked");
    assert!(c.report.tokens_after.total > b.threshold() && c.report.tokens_after.total <= b.context - b.reserve, "{:?}", c.report.tokens_after);
    assert!(c.report.tokens_after.total < c.report.tokens_before.total);
    assert!(!c.report.within_budget && c.report.notes.iter().any(|n| n.contains("not the threshold")), "{:?}", c.report.notes);
}

#[test]
fn a_compaction_that_would_grow_the_history_is_not_applied() {
    // A summariser that ignores the plan's summary limit (a real pass
    // cannot) and writes far more than the middle zone held: the summary
    // message outgrows what it replaces, and the guard keeps the original.
    let h = history();
    let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    assert!(p.declined.is_none());
    let verbose = (0..40)
        .map(|k| format!("- the export job (batch 5000) was examined in detail, step {k}, and its configuration file was read carefully"))
        .collect::<Vec<_>>()
        .join("\n");
    let c = apply(&p, &h, &mut Fixed(Ok(verbose), vec![]), &ApproxTokenCounter).unwrap();
    assert_eq!(c.messages, h, "the original history must be kept unchanged");
    let why = c.report.kept_original.as_deref().unwrap();
    assert!(why.contains("not fewer than"), "{why}");
    assert_eq!(c.report.tokens_after, c.report.tokens_before);
    assert_eq!(c.report.messages_after, h.len());
    assert!(c.report.summarised.is_empty() && c.report.dropped.is_empty() && c.report.verbatim.is_empty());
    assert!(c.report.notes.iter().any(|n| n.starts_with("not applied")), "{:?}", c.report.notes);
    // The same plan with a terse summariser shrinks the history and is applied.
    let c2 = apply(&p, &h, &mut Fixed(Ok("- batch 5000".into()), vec![]), &ApproxTokenCounter).unwrap();
    assert!(c2.report.kept_original.is_none());
    assert!(c2.report.tokens_after.total < c2.report.tokens_before.total);
}

#[test]
fn a_plan_that_cannot_shrink_the_history_declines_before_any_summary_pass() {
    // Two short messages in the middle: the summary message's header
    // alone is longer than they are, so no summary can make the history
    // smaller. The plan says so and apply spends no summary pass.
    let h = vec![
        Message::system("sys", "You are an investigator."),
        Message::user("q", "Why does the nightly export fail?"),
        Message::assistant("a1", "Reading the config."),
        Message::assistant("a2", "Batch size is 5000."),
        Message::user("more", "Keep going."),
        Message::assistant("last", "Checking the IAM role next."),
    ];
    let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    let Some(d @ Decline::WouldNotShrink { tokens_before, least_after }) = p.declined else { panic!("not declined: {p:?}") };
    assert_eq!(tokens_before, p.gauge.total());
    assert!(least_after >= tokens_before, "{least_after} < {tokens_before}");
    let mut s = Fixed(Ok("- batch 5000".into()), vec![]);
    let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
    assert!(s.1.is_empty(), "a summary pass was spent on a declined plan");
    assert_eq!(c.messages, h);
    assert_eq!(c.report.declined, Some(d));
    assert!(c.report.kept_original.is_none(), "declined at plan time, not refused by the guard");
    assert_eq!(c.report.tokens_after, c.report.tokens_before);
    assert!(c.report.notes.iter().any(|n| n.starts_with("not compacted")), "{:?}", c.report.notes);
}

#[test]
fn the_summary_pass_is_asked_for_no_more_than_the_compaction_affords() {
    let h = history();
    let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    let limit = p.summary_limit.unwrap();
    assert!(limit <= 256);
    assert!(limit as usize <= crate::tokens::ApproxTokenCounter.count_message(&Message::user("", &summarizer_log(&p, &h))));
    // A summary of exactly the limit: asked for it, and the history still shrinks.
    let mut s = Fixed(Ok(bullets(limit)), vec![]);
    let c = apply(&p, &h, &mut s, &ApproxTokenCounter).unwrap();
    assert_eq!(s.1[0].params.max_tokens, limit);
    assert!(c.report.kept_original.is_none(), "{:?}", c.report.kept_original);
    assert!(c.report.tokens_after.total < c.report.tokens_before.total);
    assert!(c.report.tokens_after.total <= p.estimated_tokens_after, "the estimate is an upper bound");
}

#[test]
fn masking_placeholder_states_the_size() {
    assert_eq!(mask_placeholder(1234567), "[tool output elided: 1,234,567 chars]");
    assert_eq!(mask_placeholder(12), "[tool output elided: 12 chars]");
}

/// With no room under the threshold and a pass that fell back to the log's
/// head (the first messages' values only), the literal list (every
/// message's values) is what the zone keeps whole; the fallback text goes first.
#[test]
fn a_fallback_in_a_tight_window_gives_way_to_the_literal_list() {
    let (h, b) = tight_window();
    let p = plan(StrategyKind::V1, &h, &b, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    let c = apply(&p, &h, &mut Fixed(Err(()), vec![]), &ApproxTokenCounter).unwrap();
    assert!(c.report.fallback.is_some());
    assert!(c.report.notes.iter().any(|n| n.contains("no room under it for the literal list")), "{:?}", c.report.notes);
    assert!(!c.report.notes.iter().any(|n| n.starts_with("budget: literal list cut")), "{:?}", c.report.notes);
    let all = crate::estimate::plan_literals(&p, &h);
    assert!(!all.is_empty());
    assert_eq!(c.report.literals, all, "the literal list is kept whole");
    let text = &c.messages[2].content;
    assert!(text.contains("Exact values from the compacted messages") && text.contains("host1-6"), "{text}");
    assert!(c.report.tokens_after.total <= b.context - b.reserve && c.report.tokens_after.total < c.report.tokens_before.total);
}

/// A compaction over an earlier summary: the summariser reads what the
/// summary kept (not its header, and not cut like a tool result), and the
/// new summary takes the earlier one's id instead of nesting it.
#[test]
fn a_summary_compacted_again_is_read_without_its_header_and_keeps_its_id() {
    let h = history();
    let p = plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    let first_summary = format!("- batch_size 5000, target exports-7f3a\n- {}", "the export log is unreadable; ".repeat(20));
    let c = apply(&p, &h, &mut Fixed(Ok(first_summary.clone()), vec![]), &ApproxTokenCounter).unwrap();
    assert_eq!(c.messages[2].id.0, "summary-a1");
    let call = ToolCall { id: "c3".into(), name: "read_file".into(), arguments: json!({ "path": "/etc/iam/role.json" }) };
    let mut h2 = c.messages.clone();
    h2.push(Message::assistant_calls("a3", "", vec![call]));
    h2.push(Message::tool_result("t3", "c3", "read_file", "role: export-writer, missing s3:PutObject"));
    h2.push(Message::user("more2", "Go on."));
    h2.push(Message::assistant("last2", "Checking the bucket policy."));
    let p2 = plan(StrategyKind::V1, &h2, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
    let mut s = Fixed(Ok("- batch_size 5000; role export-writer lacks s3:PutObject".into()), vec![]);
    let c2 = apply(&p2, &h2, &mut s, &ApproxTokenCounter).unwrap();
    let log = &s.1[0].user;
    assert!(!log.contains("[Summary of the prior investigation"), "{log}");
    assert!(log.contains(first_summary.trim()), "the earlier summary is read whole: {log}");
    let ids: Vec<&str> = c2.messages.iter().map(|m| m.id.0.as_str()).collect();
    assert!(ids.contains(&"summary-a1") && !ids.iter().any(|i| i.contains("summary-summary")), "{ids:?}");
}
