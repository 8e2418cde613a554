//! Zones and the v1 compaction over the inference crate's messages.
//!
//! `mf-forgetting` holds the full strategy set (baseline, masking, v1, v2,
//! v2.1) but does not export it yet; until it does, the loop uses this
//! METHOD.md §2 v1 (pinned + model summary + recent, error-aware input, the
//! 500-character fallback) and the baseline (drop the compressible zone).

use mf_inference::{ChatMessage, Role};

/// Prefix of the message that replaces the compressible zone.
pub const SUMMARY_LABEL: &str = "Summary of the prior investigation (earlier tool rounds, compacted):";
/// Characters of a successful tool result given to the summariser.
pub const RESULT_CHARS: usize = 400;
/// Characters of the fallback summary.
pub const FALLBACK_CHARS: usize = 500;

/// The zone edges: `[0, pinned_end)`, `[pinned_end, recent_start)`, `[recent_start, len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zones {
    /// One past the last pinned message.
    pub pinned_end: usize,
    /// First recent message.
    pub recent_start: usize,
}

/// Pinned runs through the first user message; recent is the last `recent`
/// messages, moved back so a tool result is never separated from its call.
#[must_use]
pub fn zones(history: &[ChatMessage], recent: usize) -> Zones {
    let pinned_end = history.iter().position(|m| m.role == Role::User).map_or(history.len(), |q| q + 1);
    let mut recent_start = history.len().saturating_sub(recent).max(pinned_end);
    while recent_start > pinned_end && history.get(recent_start).is_some_and(|m| m.role == Role::Tool) {
        recent_start -= 1;
    }
    Zones { pinned_end, recent_start }
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let head: String = s.chars().take(n).collect();
        format!("{head}…")
    }
}

/// The error-aware text of the compressible zone: a tool error shrinks to one
/// line, a tool result to [`RESULT_CHARS`] characters.
#[must_use]
pub fn summariser_input(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        let line = match m.role {
            Role::Tool => {
                let name = m.name.as_deref().unwrap_or("tool");
                if m.content.starts_with("ERROR") {
                    format!("[{name} error] {}", m.content.lines().next().unwrap_or_default())
                } else {
                    format!("[{name} result] {}", cut(&m.content, RESULT_CHARS))
                }
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                let calls: Vec<String> = m.tool_calls.iter().map(|c| format!("{}({})", c.name, c.arguments)).collect();
                format!("[assistant called] {} {}", calls.join(", "), m.content)
            }
            r => format!("[{}] {}", r.as_str(), m.content),
        };
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The instruction of the summary pass.
pub const SUMMARY_INSTRUCTION: &str = "Summarise the investigation so far as short bullet points only: no preamble, no tool calls, no thinking. Keep every number, name, identifier, date and fact found; drop failed tool calls.";

/// The 500-character fallback.
#[must_use]
pub fn fallback_summary(input: &str) -> String {
    cut(input, FALLBACK_CHARS)
}

/// `[pinned…, summary, recent…]`.
#[must_use]
pub fn rebuild(history: &[ChatMessage], z: Zones, summary: Option<&str>) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = history[..z.pinned_end].to_vec();
    if let Some(s) = summary {
        out.push(ChatMessage::user(format!("{SUMMARY_LABEL}\n{s}")));
    }
    out.extend_from_slice(&history[z.recent_start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mf_inference::ToolCall;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "get".into(), arguments: json!({"k": id}) }
    }

    #[test]
    fn recent_edge_keeps_calls_with_results() {
        let h = vec![
            ChatMessage::system("s"),
            ChatMessage::user("q"),
            ChatMessage::assistant_tool_calls("", vec![call("1")]),
            ChatMessage::tool_result("1", "get", "r1"),
            ChatMessage::assistant_tool_calls("", vec![call("2"), call("3")]),
            ChatMessage::tool_result("2", "get", "r2"),
            ChatMessage::tool_result("3", "get", "r3"),
        ];
        assert_eq!(zones(&h, 2), Zones { pinned_end: 2, recent_start: 4 });
        assert_eq!(zones(&h, 100), Zones { pinned_end: 2, recent_start: 2 });
        let r = rebuild(&h, zones(&h, 2), Some("- x"));
        assert_eq!(r.len(), 6);
        assert_eq!(&r[..2], &h[..2]);
        assert!(r[2].content.starts_with(SUMMARY_LABEL));
    }

    #[test]
    fn error_aware_input_and_fallback_are_bounded() {
        let big = "x".repeat(2000);
        let h = vec![ChatMessage::tool_result("1", "get", big.clone()), ChatMessage::tool_result("2", "get", "ERROR timeout\nmore\nlines")];
        let s = summariser_input(&h);
        assert!(s.len() < 500, "{}", s.len());
        assert!(s.contains("[get error] ERROR timeout\n"));
        assert!(!s.contains("more"));
        assert_eq!(fallback_summary(&big).chars().count(), FALLBACK_CHARS + 1);
    }
}

/// The standalone summariser's input, cut so it fits a context of `context`
/// tokens with room for the summary (≈ 2 characters per token, a safe bound
/// for the cut only; the prompt is still measured by the model before use).
#[must_use]
pub fn fallback_summary_input(input: &str, context: u32) -> String {
    let room = (context as usize).saturating_sub(512) * 2;
    cut(input, room.max(FALLBACK_CHARS))
}
