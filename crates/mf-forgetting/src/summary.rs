//! The summariser is injected; this module builds its request (METHOD.md §2),
//! judges its answer, and provides the 500-character fallback.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::ForgettingError;
use crate::message::{Message, MessageKind};

/// Sampling settings of the summary pass.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingParams {
    /// Temperature (0.2).
    pub temperature: f32,
    /// Nucleus sampling (0.9).
    pub top_p: f32,
    /// Most output tokens (256).
    pub max_tokens: u32,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 0.2, top_p: 0.9, max_tokens: 256 }
    }
}

/// What the summariser is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// System prompt.
    pub system: String,
    /// User text: the question, the shrunk log, fold and class instructions.
    pub user: String,
    /// Sampling settings.
    pub params: SamplingParams,
}

/// Runs the summary pass (the agent: the same model, a dedicated generation).
pub trait Summarizer {
    /// Summarises; an `Err` makes the compaction use the fallback.
    ///
    /// # Errors
    /// Any failure of the pass (model error, timeout); never fatal here.
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError>;
}

/// A summariser that always fails: planning without a model, and the
/// fallback path's tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSummarizer;

impl Summarizer for NoSummarizer {
    fn summarize(&mut self, _request: &SummaryRequest) -> Result<String, ForgettingError> {
        Err(ForgettingError::Summarizer("no summariser configured".to_owned()))
    }
}

/// The system prompt of the summary pass (METHOD.md §2).
pub const SUMMARY_SYSTEM_PROMPT: &str = "You compress the log of an investigation so that it can continue in less space. \
Answer with bullet points only, each line starting with \"- \". No preamble, no closing remark, no tool calls, no thinking. \
Keep every number, datum and fact: names, identifiers, paths, commands, dates, times, amounts, versions and error types, written exactly as in the log. \
Drop failed tool calls: at most one line saying what failed and why. Never invent anything that is not in the log.";

/// Builds the request.
pub fn build_request(question: &str, log: &str, instructions: &[String], params: SamplingParams) -> SummaryRequest {
    let mut user = String::new();
    user.push_str("Original question: ");
    user.push_str(question.trim());
    user.push_str("\n\nLog to summarise:\n");
    user.push_str(log);
    if !instructions.is_empty() {
        user.push_str("\n\nAlso:\n");
        for i in instructions {
            user.push_str("- ");
            user.push_str(i);
            user.push('\n');
        }
    }
    user.push_str("\nWrite the bullet points now.");
    SummaryRequest { system: SUMMARY_SYSTEM_PROMPT.to_owned(), user, params }
}

#[allow(clippy::expect_used)]
fn re(pattern: &str) -> Regex {
    // Constant patterns, all compiled by this module's tests.
    Regex::new(pattern).expect("constant regex compiles")
}

static THINK_BLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"(?s)<think>.*?</think>"));
static ERROR_TYPE: LazyLock<Regex> = LazyLock::new(|| re(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Fault)\b|\bE[A-Z]{4,}\b"));
static HTTP_STATUS: LazyLock<Regex> = LazyLock::new(|| re(r"\b(?:HTTP|status)[ :=/]*(?:1\.[01] )?([45]\d\d)\b"));

/// Cleans a model summary; `Err(reason)` when it is garbage and the
/// fallback must be used.
///
/// Removes closed `<think>` blocks and anything after an unclosed one, then
/// refuses: empty text, tool-call markup, fewer than 8 letters or digits, a
/// repetition loop (6+ lines, fewer than a third distinct), or an echo of
/// the pass's own instructions (a sentence of [`SUMMARY_SYSTEM_PROMPT`]:
/// Gemma 3 270M answered 13 of 13 summary passes of a long world with the
/// prompt itself, which carries no fact and displaced the fallback's).
pub fn clean_summary(raw: &str) -> Result<String, String> {
    let mut text = THINK_BLOCK.replace_all(raw, "").into_owned();
    if let Some(p) = text.find("<think>") {
        text.truncate(p);
    }
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err("empty summary".to_owned());
    }
    if text.contains("<tool_call>") || text.contains("\"tool_calls\"") || text.contains("<|") {
        return Err("summary contains tool-call or template markup".to_owned());
    }
    if text.chars().filter(|c| c.is_alphanumeric()).count() < 8 {
        return Err("summary too short to carry anything".to_owned());
    }
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let distinct: std::collections::BTreeSet<&str> = lines.iter().copied().collect();
    if lines.len() >= 6 && distinct.len() * 3 < lines.len() {
        return Err("summary repeats itself".to_owned());
    }
    if SUMMARY_SYSTEM_PROMPT.split(". ").map(str::trim).filter(|s| s.chars().count() >= 30).any(|s| text.contains(s)) {
        return Err("summary repeats its instructions".to_owned());
    }
    Ok(text)
}

/// The values a summary of `messages` should keep: the literals of their
/// content (numbers, dates, identifiers, errors…) that tell something: not
/// in a tool call (the call's URL or path is known without the result) and
/// not repeated in most of the messages (a status line, the API's host).
pub fn informative_values(messages: &[&Message]) -> Vec<String> {
    let mut called = std::collections::HashSet::new();
    let mut seen_in: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut order = Vec::new();
    let mut with_content = 0usize;
    for m in messages {
        let text = m.analysis_text();
        if m.kind() == MessageKind::ToolCall {
            called.extend(crate::literals::extract_from_text(&text).into_iter().map(|(_, t)| t));
            continue;
        }
        with_content += 1;
        let mut here = std::collections::HashSet::new();
        for (_, t) in crate::literals::extract_from_text(&text) {
            if here.insert(t.clone()) {
                let n = seen_in.entry(t.clone()).or_insert(0);
                if *n == 0 {
                    order.push(t);
                }
                *n += 1;
            }
        }
    }
    // The origins the calls went to (`http://127.0.0.1:18940`): a URL there
    // is another endpoint of the API being navigated, not a finding.
    let origin = |url: &str| url.split_once("://").map(|(scheme, rest)| format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest)));
    let origins: Vec<String> = called.iter().filter_map(|c| origin(c)).collect();
    order
        .into_iter()
        .filter(|t| {
            let in_a_call = called.contains(t) || called.iter().any(|c: &String| c.contains(t.as_str()));
            let in_most_messages = with_content >= 2 && seen_in[t] * 2 > with_content;
            let at_a_called_origin = origins.iter().any(|o| t.contains(o.as_str()));
            !(in_a_call || in_most_messages || at_a_called_origin)
        })
        .collect()
}

/// Whether `summary` keeps at least one of `values` (numbers compared
/// without thousands separators: `4812` keeps `4,812`).
pub fn keeps_any_value(summary: &str, values: &[String]) -> bool {
    let plain = |s: &str| s.replace(',', "");
    let summary = plain(summary);
    values.iter().any(|v| summary.contains(&plain(v)))
}

/// The first `n` characters (not bytes) of a text, with `…` when cut.
pub fn cut_chars(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(n).collect();
    s.push('…');
    s
}

/// The fallback: the log hard-truncated to `n` characters (500).
pub fn fallback(log: &str, n: usize) -> String {
    log.trim().chars().take(n).collect()
}

/// The type of a tool error in a few words: an `…Error` name, an errno, an
/// HTTP status, "timeout", "not found", "permission denied", else its
/// first line cut to 60 characters.
pub fn error_type(content: &str) -> String {
    if let Some(m) = ERROR_TYPE.find(content) {
        return m.as_str().to_owned();
    }
    if let Some(c) = HTTP_STATUS.captures(content)
        && let Some(code) = c.get(1)
    {
        return format!("HTTP {}", code.as_str());
    }
    let lower = content.to_lowercase();
    for (needle, label) in [
        ("timed out", "timeout"),
        ("timeout", "timeout"),
        ("not found", "not found"),
        ("permission denied", "permission denied"),
        ("forbidden", "forbidden"),
        ("refused", "connection refused"),
    ] {
        if lower.contains(needle) {
            return label.to_owned();
        }
    }
    cut_chars(content.lines().next().unwrap_or("").trim(), 60)
}

/// A summary message's content without its header line
/// (`[Summary of the prior investigation: …]`) and the `Summary:` marker.
fn summary_body(content: &str) -> String {
    content.trim().lines().filter(|l| !(l.starts_with("[Summary of the prior investigation") || l.trim() == "Summary:")).collect::<Vec<_>>().join("\n")
}

/// A log line's label: `[m4 tool-result http_get]`.
pub fn label(m: &Message) -> String {
    let mut s = format!("[{} {}", m.id, m.kind().label());
    if let Some(n) = &m.name {
        s.push(' ');
        s.push_str(n);
    }
    s.push(']');
    s
}

/// How a message is shrunk before it goes to the summariser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shrink {
    /// Cut to this many characters (errors to one line regardless).
    Chars(usize),
    /// Type + one line.
    Heavy,
}

/// One line (or short block) of the summariser's log for a message.
pub fn shrink(m: &Message, how: Shrink) -> String {
    let body = match (m.kind(), how) {
        (MessageKind::ToolError, _) => format!("error: {}", error_type(&m.content)),
        (MessageKind::ToolCall, _) => {
            let calls: Vec<String> = m.tool_calls.iter().map(|c| format!("{} {}", c.name, crate::message::canonical_json(&c.arguments))).collect();
            let text = if m.content.trim().is_empty() { calls.join("; ") } else { format!("{} → {}", m.content.trim(), calls.join("; ")) };
            match how {
                Shrink::Chars(n) => cut_chars(&text, n),
                Shrink::Heavy => cut_chars(&text, 160),
            }
        }
        // An earlier summary without its header and marker: what it kept is
        // the memory of every round before it, so it is not cut like a result.
        (MessageKind::Summary, Shrink::Chars(_)) => summary_body(&m.content),
        (MessageKind::Summary, Shrink::Heavy) => cut_chars(summary_body(&m.content).lines().next().unwrap_or(""), 120),
        (_, Shrink::Chars(n)) => cut_chars(m.content.trim(), n),
        (_, Shrink::Heavy) => cut_chars(m.content.trim().lines().next().unwrap_or(""), 120),
    };
    format!("{} {}", label(m), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_follows_the_method() {
        let r = build_request("Why?", "[m2 tool-result] x", &["fold m3".to_owned()], SamplingParams::default());
        assert_eq!(r.params, SamplingParams { temperature: 0.2, top_p: 0.9, max_tokens: 256 });
        assert!(r.system.contains("bullet points only"));
        assert!(r.system.contains("Keep every number, datum and fact"));
        assert!(r.system.contains("Drop failed tool calls"));
        assert!(r.user.contains("Original question: Why?"));
        assert!(r.user.contains("- fold m3"));
    }

    #[test]
    fn garbage_summaries_are_refused() {
        assert!(clean_summary("").is_err());
        assert!(clean_summary("   \n ").is_err());
        assert!(clean_summary("<think>long reasoning that never closed").is_err());
        assert!(clean_summary("<tool_call>{\"name\":\"x\"}</tool_call>").is_err());
        assert!(clean_summary("- ok").is_err());
        assert!(clean_summary(&"- same line\n".repeat(10)).is_err());
        // The instructions echoed back (what Gemma 3 270M wrote), whole or in part.
        assert_eq!(clean_summary(SUMMARY_SYSTEM_PROMPT), Err("summary repeats its instructions".to_owned()));
        let part = format!("- edge-gateway owned by team-edge\n{}", &SUMMARY_SYSTEM_PROMPT[..120]);
        assert_eq!(clean_summary(&part), Err("summary repeats its instructions".to_owned()));
        assert!(clean_summary("- kept every number: 4,812 failed requests in eu-west").is_ok(), "a few shared words are not an echo");
        assert_eq!(clean_summary("<think>hm</think>\n- build 4817 broke checkout\n").as_deref(), Ok("- build 4817 broke checkout"));
    }

    #[test]
    fn informative_values_leave_out_what_the_calls_say_and_what_every_result_repeats() {
        use crate::message::ToolCall;
        let call = |id: &str, url: &str| ToolCall { id: id.into(), name: "http".into(), arguments: serde_json::json!({ "url": url }) };
        let msgs = [
            Message::assistant_calls("a1", "", vec![call("c1", "http://127.0.0.1:18940/outage/OUT-318.json")]),
            Message::tool_result(
                "t1",
                "c1",
                "http",
                "HTTP 200 http://127.0.0.1:18940/outage/OUT-318.json\n{\"commander\": \"Ines Duarte\", \"started\": \"2026-03-14 02:10 UTC\", \"endpoints\": 4812}",
            ),
            Message::assistant_calls("a2", "", vec![call("c2", "http://127.0.0.1:18940/certs/7F3A91.json")]),
            Message::tool_result(
                "t2",
                "c2",
                "http",
                "HTTP 200 http://127.0.0.1:18940/certs/7F3A91.json\n{\"host\": \"idp-edge-03\", \"error\": \"CERT_HAS_EXPIRED\"}",
            ),
        ];
        let refs: Vec<&Message> = msgs.iter().collect();
        let v = informative_values(&refs);
        for want in ["2026-03-14 02:10", "4812", "idp-edge-03", "CERT_HAS_EXPIRED"] {
            assert!(v.iter().any(|x| x == want), "{want} missing from {v:?}");
        }
        // Another endpoint of the same API, echoed from an earlier summary, is navigation too.
        let echoed = Message::user("summary-a0", "[m9 tool-call] http {\"url\":\"http://127.0.0.1:18940/billing/egress.json\"}");
        let refs: Vec<&Message> = msgs.iter().chain(std::iter::once(&echoed)).collect();
        let v = informative_values(&refs);
        for not in ["HTTP 200", "127.0.0.1:18940", "OUT-318", "7F3A91", "billing/egress.json"] {
            assert!(!v.iter().any(|x| x.contains(not)), "{not} is in a call or in every result: {v:?}");
        }
        assert!(keeps_any_value("- 4,812 endpoints", &v), "separators do not matter");
        assert!(keeps_any_value("- idp-edge-03 failed", &v));
        assert!(!keeps_any_value("[bullet-1]\n[bullet-2]\n- HTTP 200 from OUT-318", &v));
    }

    #[test]
    fn error_types_are_one_short_line() {
        assert_eq!(error_type("Traceback...\nConnectionError: timed out after 30 s"), "ConnectionError");
        assert_eq!(error_type("connect: ECONNREFUSED 10.0.0.1"), "ECONNREFUSED");
        assert_eq!(error_type("upstream returned HTTP 503"), "HTTP 503");
        assert_eq!(error_type("the request timed out"), "timeout");
        assert_eq!(error_type("weird failure\nmore"), "weird failure");
    }

    #[test]
    fn cutting_respects_characters() {
        assert_eq!(cut_chars("héllo", 2), "hé…");
        assert_eq!(cut_chars("abc", 3), "abc");
        assert_eq!(fallback(&"x".repeat(600), 500).chars().count(), 500);
    }
}
