//! The closing answer: after a dynamic exit the model is asked once,
//! without tools, for the answer from what it gathered. It always gets room:
//! when the history is too long for the request plus a reply, the oldest
//! exchanges after the pinned zone are left out (whole tool units), and the
//! request says how many.

use mf_forgetting::{Message, Role};
use mf_inference::{Backend, InferenceError};

use super::Agent;
use crate::compact::chat_history;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, Purpose};

/// The request for the closing answer (`prompts/closing_answer.md`).
pub const CLOSING_REQUEST: &str = include_str!("prompts/closing_answer.md");

/// The closing request: [`CLOSING_REQUEST`], how many earlier messages were
/// left out (if any), and the question restated. After many tool rounds the
/// question is thousands of tokens back; a small model asked to "answer the
/// original question" without it in view tends to call a tool again or
/// repeat a result.
pub fn closing_request(question: Option<&str>, dropped: usize) -> String {
    let mut text = CLOSING_REQUEST.trim_end().to_owned();
    if dropped > 0 {
        text.push_str(&format!(" ({dropped} earlier messages were left out to fit the context window.)"));
    }
    if let Some(q) = question.map(str::trim).filter(|q| !q.is_empty()) {
        text.push_str("\n\nThe question: ");
        text.push_str(q);
    }
    text
}

/// The history with the first `dropped` messages after `pinned_end` left
/// out, and the closing request (saying how many were left out, restating
/// the question) at the end.
fn closing_prompt(history: &[Message], pinned_end: usize, dropped: usize, request_id: &str) -> Vec<Message> {
    let question = mf_forgetting::message::question_index(history).map(|i| history[i].content.as_str());
    let mut h: Vec<Message> = history[..pinned_end].to_vec();
    h.extend_from_slice(&history[pinned_end + dropped..]);
    h.push(Message::user(request_id, &closing_request(question, dropped)));
    h
}

/// Where the next whole unit after `from` starts (a unit: a message and the tool results that follow it).
fn next_unit(history: &[Message], from: usize) -> usize {
    let mut i = from + 1;
    while i < history.len() && history[i].role == Role::Tool {
        i += 1;
    }
    i
}

/// A closing prompt that fits: the messages to send and how many earlier
/// messages were left out for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosingPrompt {
    /// The history kept, then the closing request.
    pub messages: Vec<Message>,
    /// Messages left out after the pinned zone (whole units, oldest first).
    pub dropped: usize,
    /// Its prompt tokens by the model's own count.
    pub tokens: u32,
}

/// The closing request over `history` (see [`closing_request`]) with as few
/// of the oldest exchanges after the pinned zone left out as it takes for
/// the prompt, counted by `backend` without tools, to be at most `room`
/// tokens; at least `at_least` messages are left out (a retry after the
/// model refused a prompt the count let through). `Ok(Err(tokens))` when
/// even the pinned zone alone and the request take more than `room`.
///
/// The loop's closing answer and the benchmark's route driver (which asks
/// for the answer at the end of its route) both build their request here.
///
/// # Errors
/// The backend cannot count the prompt.
pub async fn fit_closing(
    backend: &dyn Backend,
    history: &[Message],
    request_id: &str,
    room: u32,
    at_least: usize,
) -> Result<Result<ClosingPrompt, u32>, InferenceError> {
    let pinned_end = mf_forgetting::message::question_index(history).map_or(history.len(), |i| i + 1);
    let mut dropped = 0usize;
    while dropped < at_least && pinned_end + dropped < history.len() {
        dropped = next_unit(history, pinned_end + dropped) - pinned_end;
    }
    loop {
        let messages = closing_prompt(history, pinned_end, dropped, request_id);
        let tokens = backend.count_tokens(&chat_history(&messages), &[]).await?;
        if tokens <= room {
            return Ok(Ok(ClosingPrompt { messages, dropped, tokens }));
        }
        if pinned_end + dropped >= history.len() {
            return Ok(Err(tokens));
        }
        dropped = next_unit(history, pinned_end + dropped) - pinned_end;
    }
}

impl Agent {
    /// Asks once, without tools, for the answer from what was gathered,
    /// leaving out the oldest exchanges if that is what it takes to fit
    /// `C − G`. A model that still finds the prompt too long (its count
    /// and the loop's disagree) is asked again with one more exchange left
    /// out, so a prompt size never ends the investigation without an exit.
    pub(super) async fn closing_answer(&mut self, history: &mut Vec<Message>, round: u32, sink: &mut dyn EventSink) -> Option<String> {
        let request_id = self.id();
        let room = self.backend.context_size().saturating_sub(self.settings.reserve);
        let pinned_end = mf_forgetting::message::question_index(history).map_or(history.len(), |i| i + 1);
        let mut at_least = 0usize;
        loop {
            let fit = match fit_closing(self.backend.as_ref(), history, &request_id, room, at_least).await {
                Ok(Ok(fit)) => fit,
                Ok(Err(n)) => {
                    sink.emit(&AgentEvent::Error { message: format!("no closing answer: even the pinned zone alone ({n} tokens) leaves no room for it") });
                    return None;
                }
                Err(e) => {
                    sink.emit(&AgentEvent::Error { message: format!("no closing answer: the prompt cannot be measured ({e})") });
                    return None;
                }
            };
            if fit.dropped > 0 {
                sink.emit(&AgentEvent::Error { message: format!("closing answer: {} earlier messages left out to fit the context window", fit.dropped) });
            }
            let mut sampling = self.settings.sampling.clone();
            sampling.max_tokens = self.settings.reserve;
            let h = fit.messages;
            match self.generate(chat_history(&h), Vec::new(), sampling, round, Purpose::Answer, sink).await {
                Ok(g) => {
                    let text = g.content.trim().to_string();
                    sink.emit(&AgentEvent::FinalAnswer { text: text.clone() });
                    let id = self.id();
                    history.push(h[h.len() - 1].clone());
                    history.push(Message::assistant(&id, &text));
                    return Some(text);
                }
                // The model refused what the count let through: leave out one more exchange, while there is one.
                Err(AgentError::Inference(InferenceError::PromptTooLong { prompt_tokens, .. })) if pinned_end + fit.dropped < history.len() => {
                    sink.emit(&AgentEvent::Error {
                        message: format!(
                            "closing answer: the model counts {prompt_tokens} prompt tokens where {} were counted; leaving out one more exchange",
                            fit.tokens
                        ),
                    });
                    at_least = fit.dropped + 1;
                }
                Err(e) => {
                    sink.emit(&AgentEvent::Error { message: format!("closing answer: {e}") });
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn left_out_messages_are_whole_units_and_counted_in_the_request() {
        let h = vec![
            Message::system("m0", "s"),
            Message::user("m1", "q"),
            Message::assistant_calls("m2", "", vec![mf_forgetting::ToolCall { id: "c1".into(), name: "t".into(), arguments: serde_json::json!({}) }]),
            Message::tool_result("m3", "c1", "t", "r1"),
            Message::assistant("m4", "thinking"),
        ];
        assert_eq!(next_unit(&h, 2), 4, "a call and its result go together");
        let p = closing_prompt(&h, 2, 2, "m9");
        assert_eq!(p.iter().map(|m| m.id.0.as_str()).collect::<Vec<_>>(), ["m0", "m1", "m4", "m9"]);
        assert!(p[3].content.contains("2 earlier messages were left out"), "{}", p[3].content);
        assert!(p[3].content.ends_with("\n\nThe question: q"), "the question is restated: {}", p[3].content);
        assert_eq!(closing_prompt(&h, 2, 0, "m9")[5].content, format!("{}\n\nThe question: q", CLOSING_REQUEST.trim_end()));
        assert_eq!(closing_request(None, 0), CLOSING_REQUEST.trim_end(), "no question, nothing restated");
    }
}
