//! Sampled tokens to reply text: UTF-8 reassembly, stop strings, the
//! thinking budget and streaming. One per generation (or per branch).

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

use crate::template::RenderedPrompt;
use crate::thinking::{ThinkStream, partial_suffix};
use crate::types::{Sampling, StopReason, StreamEvent, Thinking};

/// Closes a thinking block whose budget is spent, so the answer still comes.
const THINK_CLOSE: &str = "\n</think>\n\n";

/// What follows a sampled token.
pub(crate) enum Next {
    /// Decode these tokens (the sampled one, maybe a closing thinking tag).
    Decode(Vec<LlamaToken>),
    /// The reply is over.
    Stop(StopReason),
}

pub(crate) struct ReplyText<'p> {
    stops: Vec<&'p str>,
    think: ThinkStream,
    think_cap: u32,
    raw: String,
    pending: Vec<u8>,
    emitted: usize,
    /// Tokens generated (thinking included).
    pub generated: u32,
    /// Of those, inside a thinking block.
    pub thinking_tokens: u32,
}

impl<'p> ReplyText<'p> {
    pub fn new(prompt: &'p RenderedPrompt, sampling: &'p Sampling) -> Self {
        let max = sampling.max_tokens;
        // The answer always keeps a quarter of max_tokens: thinking never eats it all.
        let think_cap = {
            let ceiling = max - (max / 4).max(1).min(max);
            match sampling.thinking {
                Thinking::Budget(n) => n.min(ceiling),
                Thinking::On | Thinking::Off => ceiling,
            }
        };
        let mut stops: Vec<&str> = prompt.stop.iter().map(String::as_str).collect();
        stops.extend(sampling.stop.iter().map(String::as_str));
        stops.retain(|s| !s.is_empty());
        Self {
            stops,
            think: ThinkStream::new(prompt.thinking_open),
            think_cap,
            raw: String::new(),
            pending: Vec::new(),
            emitted: 0,
            generated: 0,
            thinking_tokens: 0,
        }
    }

    /// Takes a sampled token (not end-of-generation); `emit` receives the
    /// text that is safe to stream.
    pub fn push(&mut self, model: &LlamaModel, token: LlamaToken, emit: &mut dyn FnMut(Vec<StreamEvent>)) -> Next {
        let vocab = model.vocab();
        self.generated += 1;
        if self.think.in_thinking() {
            self.thinking_tokens += 1;
        }
        self.pending.extend(vocab.token_to_piece(token, true, None));
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        self.raw.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
        self.pending.drain(..valid);

        // Stop strings end the reply and are not part of it.
        let from = self.emitted;
        let raw = &self.raw;
        if let Some(at) = self.stops.iter().filter_map(|s| raw[from..].find(s).map(|i| from + i)).min() {
            self.raw.truncate(at);
            return Next::Stop(StopReason::StopString);
        }
        let mut next = vec![token];
        if self.think.in_thinking() && self.thinking_tokens >= self.think_cap {
            // Budget spent: close the block and let the answer come.
            self.raw.push_str(THINK_CLOSE);
            next.extend(vocab.tokenize(THINK_CLOSE.as_bytes(), false, true));
        }
        let hold = self.stops.iter().map(|s| partial_suffix(&self.raw, s)).max().unwrap_or(0);
        let safe = self.raw.len() - hold;
        if safe > self.emitted && self.raw.is_char_boundary(safe) {
            emit(self.think.push(&self.raw[self.emitted..safe]));
            self.emitted = safe;
        }
        Next::Decode(next)
    }

    /// Streams what was held back and returns the whole raw reply.
    pub fn finish(mut self, emit: &mut dyn FnMut(Vec<StreamEvent>)) -> String {
        if self.emitted < self.raw.len() {
            emit(self.think.push(&self.raw[self.emitted..]));
        }
        emit(self.think.finish());
        self.raw
    }
}
