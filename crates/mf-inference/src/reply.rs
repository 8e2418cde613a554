//! Turning raw model output into a [`Generation`]: thinking split off, tool
//! calls parsed, stop reason adjusted.

use crate::thinking::split_thinking;
use crate::tool_parse::ToolCallFormat;
use crate::types::{Generation, StopReason, ToolCall, Usage};

/// Builds the final reply from the raw text.
///
/// `native_calls` are calls a server already parsed (HTTP backends); when
/// present the text is not searched for more.
#[must_use]
pub fn assemble(
    raw_text: String,
    thinking_open: bool,
    format: ToolCallFormat,
    native_calls: Vec<ToolCall>,
    extra_thinking: Option<String>,
    stop_reason: StopReason,
    usage: Usage,
) -> Generation {
    let split = split_thinking(&raw_text, thinking_open);
    let thinking = match (extra_thinking.filter(|t| !t.is_empty()), split.thinking) {
        (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
        (a, b) => a.or(b),
    };
    let (content, tool_calls, tool_parse_error) = if !native_calls.is_empty() {
        (split.answer.trim().to_string(), native_calls, None)
    } else {
        match format.parser().parse(&split.answer) {
            Ok(parsed) => (parsed.content, parsed.tool_calls, None),
            Err(e) => (split.answer.trim().to_string(), Vec::new(), Some(e.to_string())),
        }
    };
    let stop_reason =
        if !tool_calls.is_empty() && matches!(stop_reason, StopReason::EndOfTurn | StopReason::StopString) { StopReason::ToolCall } else { stop_reason };
    Generation { raw_text, content, thinking, tool_calls, tool_parse_error, stop_reason, usage }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_then_call() {
        let g = assemble(
            "<think>need data</think>\n<tool_call>{\"name\":\"get\",\"arguments\":{}}</tool_call>".into(),
            false,
            ToolCallFormat::Hermes,
            vec![],
            None,
            StopReason::EndOfTurn,
            Usage::default(),
        );
        assert_eq!(g.thinking.as_deref(), Some("need data"));
        assert_eq!(g.tool_calls.len(), 1);
        assert_eq!(g.stop_reason, StopReason::ToolCall);
        assert_eq!(g.content, "");
    }

    #[test]
    fn malformed_call_is_reported_not_dropped() {
        let g = assemble("<tool_call>{oops</tool_call>".into(), false, ToolCallFormat::Hermes, vec![], None, StopReason::EndOfTurn, Usage::default());
        assert!(g.tool_calls.is_empty());
        assert!(g.tool_parse_error.as_deref().is_some_and(|e| e.contains("malformed hermes")), "{:?}", g.tool_parse_error);
        assert_eq!(g.stop_reason, StopReason::EndOfTurn);
    }
}
