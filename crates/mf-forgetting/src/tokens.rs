//! Token counting is injected: the agent counts with the model's tokenizer.

use crate::message::Message;

/// Counts the tokens a message costs in the prompt.
///
/// The agent implements this with the model's real tokenizer (and chat
/// template overhead). Everything in this crate only ever asks a counter, so
/// tests can use tiny, exact budgets.
pub trait TokenCounter {
    /// Tokens of one message, template overhead included.
    fn count_message(&self, message: &Message) -> usize;

    /// Tokens of a whole history (default: the sum of the messages).
    fn count(&self, messages: &[Message]) -> usize {
        messages.iter().map(|m| self.count_message(m)).sum()
    }
}

/// A deterministic **approximation** for tests and for offline `mf plan`
/// where no model is loaded: one token per 4 characters of each
/// whitespace-separated word (at least one per word), plus 4 tokens of role
/// overhead per message and the same rule over each tool call's name and
/// arguments.
///
/// It is not a tokenizer. Never use it for a budget decision when the model's
/// tokenizer is at hand: it can be off by tens of percent on code and JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxTokenCounter;

/// Tokens of role markers that [`ApproxTokenCounter`] adds per message.
pub const APPROX_MESSAGE_OVERHEAD: usize = 4;

fn approx_text(s: &str) -> usize {
    s.split_whitespace().map(|w| w.chars().count().div_ceil(4).max(1)).sum()
}

impl TokenCounter for ApproxTokenCounter {
    fn count_message(&self, m: &Message) -> usize {
        let calls: usize = m.tool_calls.iter().map(|c| approx_text(&c.name) + approx_text(&c.arguments.to_string())).sum();
        APPROX_MESSAGE_OVERHEAD + approx_text(&m.content) + calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_counter_is_monotone_and_counts_overhead() {
        let c = ApproxTokenCounter;
        assert_eq!(c.count_message(&Message::user("u", "")), APPROX_MESSAGE_OVERHEAD);
        assert_eq!(c.count_message(&Message::user("u", "a bb ccccc")), APPROX_MESSAGE_OVERHEAD + 1 + 1 + 2);
        let h = vec![Message::user("u", "one two"), Message::assistant("a", "three")];
        assert_eq!(c.count(&h), 2 * APPROX_MESSAGE_OVERHEAD + 4); // "three" is 5 chars: 2
    }
}
