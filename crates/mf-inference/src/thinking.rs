//! `<think>…</think>` handling: separating thinking from the answer, in a
//! finished reply and while it streams.

use crate::types::StreamEvent;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// A reply split into its thinking and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThinkSplit {
    /// The thinking, trimmed; `None` when there was no thinking block.
    pub thinking: Option<String>,
    /// The answer after the block, leading whitespace removed.
    pub answer: String,
    /// Whether the thinking block was closed (false: the reply ended inside it).
    pub closed: bool,
}

/// Splits `text` into thinking and answer.
///
/// `started_open` says the prompt already opened a thinking block (some
/// templates end the generation prompt with `<think>`), so the reply begins
/// inside it. A reply that closes a block it never opened (`…</think>answer`)
/// is treated the same way. An unclosed block yields an empty answer and
/// `closed: false`; callers that must not return an empty answer close the block
/// themselves (see the llama.cpp session's thinking budget).
#[must_use]
pub fn split_thinking(text: &str, started_open: bool) -> ThinkSplit {
    let trimmed = text.trim_start();
    let body = if started_open {
        Some(text)
    } else if let Some(rest) = trimmed.strip_prefix(OPEN) {
        Some(rest)
    } else if let Some(close) = text.find(CLOSE) {
        // Closed without an opening tag: everything before it was thinking.
        if text[..close].contains(OPEN) { None } else { Some(text) }
    } else {
        None
    };
    let Some(body) = body else {
        return ThinkSplit { thinking: None, answer: text.to_string(), closed: true };
    };
    match body.find(CLOSE) {
        Some(end) => ThinkSplit { thinking: Some(body[..end].trim().to_string()), answer: body[end + CLOSE.len()..].trim_start().to_string(), closed: true },
        None => ThinkSplit { thinking: Some(body.trim().to_string()), answer: String::new(), closed: false },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace seen: may still become a thinking block.
    Start,
    Thinking,
    Answer,
}

/// Routes streamed text to thinking or answer events, holding back only what
/// could be the start of a tag.
#[derive(Debug, Clone)]
pub struct ThinkStream {
    state: State,
    pending: String,
}

impl ThinkStream {
    /// A stream that begins outside (`started_open = false`) or inside a block.
    #[must_use]
    pub fn new(started_open: bool) -> Self {
        Self { state: if started_open { State::Thinking } else { State::Start }, pending: String::new() }
    }

    /// Whether the stream is inside a thinking block now.
    #[must_use]
    pub fn in_thinking(&self) -> bool {
        self.state == State::Thinking
    }

    /// Feeds a chunk; returns the events it completes.
    pub fn push(&mut self, chunk: &str) -> Vec<StreamEvent> {
        self.pending.push_str(chunk);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::Start => {
                    let t = self.pending.trim_start();
                    if t.is_empty() {
                        return out;
                    }
                    if let Some(rest) = t.strip_prefix(OPEN) {
                        self.pending = rest.to_string();
                        self.state = State::Thinking;
                    } else if OPEN.starts_with(t) {
                        return out;
                    } else {
                        self.state = State::Answer;
                    }
                }
                State::Thinking => {
                    if let Some(end) = self.pending.find(CLOSE) {
                        let thought = self.pending[..end].to_string();
                        if !thought.is_empty() {
                            out.push(StreamEvent::Thinking(thought));
                        }
                        self.pending = self.pending[end + CLOSE.len()..].trim_start().to_string();
                        self.state = State::Answer;
                    } else {
                        let keep = partial_suffix(&self.pending, CLOSE);
                        let emit_to = self.pending.len() - keep;
                        if emit_to > 0 {
                            out.push(StreamEvent::Thinking(self.pending[..emit_to].to_string()));
                            self.pending.drain(..emit_to);
                        }
                        return out;
                    }
                }
                State::Answer => {
                    if !self.pending.is_empty() {
                        out.push(StreamEvent::Text(std::mem::take(&mut self.pending)));
                    }
                    return out;
                }
            }
        }
    }

    /// Flushes what was held back at the end of the stream.
    pub fn finish(&mut self) -> Vec<StreamEvent> {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() {
            return Vec::new();
        }
        match self.state {
            State::Thinking => vec![StreamEvent::Thinking(rest)],
            State::Start | State::Answer => vec![StreamEvent::Text(rest)],
        }
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `tag`.
#[must_use]
pub(crate) fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1)).rev().find(|&n| text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..])).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn split(thinking: Option<&str>, answer: &str, closed: bool) -> ThinkSplit {
        ThinkSplit { thinking: thinking.map(str::to_string), answer: answer.to_string(), closed }
    }

    #[test]
    fn splits_table() {
        let cases: &[(&str, bool, ThinkSplit)] = &[
            ("plain answer", false, split(None, "plain answer", true)),
            ("<think>\nhm\n</think>\n\nYes.", false, split(Some("hm"), "Yes.", true)),
            ("  <think>a</think>b", false, split(Some("a"), "b", true)),
            ("<think>still going", false, split(Some("still going"), "", false)),
            ("reasoning</think>answer", true, split(Some("reasoning"), "answer", true)),
            ("reasoning</think>answer", false, split(Some("reasoning"), "answer", true)),
            ("open in prompt", true, split(Some("open in prompt"), "", false)),
            ("<think></think>x", false, split(Some(""), "x", true)),
            ("say <think> inline", false, split(None, "say <think> inline", true)),
        ];
        for (text, open, want) in cases {
            assert_eq!(&split_thinking(text, *open), want, "input {text:?}");
        }
    }

    fn run_stream(chunks: &[&str], open: bool) -> (String, String) {
        let mut s = ThinkStream::new(open);
        let mut events = Vec::new();
        for c in chunks {
            events.extend(s.push(c));
        }
        events.extend(s.finish());
        let mut think = String::new();
        let mut text = String::new();
        for e in events {
            match e {
                StreamEvent::Thinking(t) => think.push_str(&t),
                StreamEvent::Text(t) => text.push_str(&t),
            }
        }
        (think, text)
    }

    #[test]
    fn stream_splits_tags_across_chunks() {
        assert_eq!(run_stream(&["<th", "ink>ab", "c</", "thi", "nk>\n", "ans", "wer"], false), ("abc".into(), "answer".into()));
        assert_eq!(run_stream(&["Hello", " <think> x"], false), (String::new(), "Hello <think> x".into()));
        assert_eq!(run_stream(&["a < b", "</think>ok"], true), ("a < b".into(), "ok".into()));
        assert_eq!(run_stream(&["<think>never closed"], false), ("never closed".into(), String::new()));
        assert_eq!(run_stream(&["  ", "<", "x"], false), (String::new(), "  <x".into()));
    }

    #[test]
    fn partial_suffix_finds_tag_starts() {
        assert_eq!(partial_suffix("abc</th", CLOSE), 4);
        assert_eq!(partial_suffix("abc", CLOSE), 0);
        assert_eq!(partial_suffix("a<", CLOSE), 1);
        assert_eq!(partial_suffix("é", CLOSE), 0);
    }
}
