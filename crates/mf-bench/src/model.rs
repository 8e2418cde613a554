//! The model under test behind one blocking façade: generation, token
//! counting, and the figures every call leaves (prefill, reuse, time).
//!
//! The benchmark is sequential by design (one model, one KV cache), so the
//! async [`Backend`] is driven from a private current-thread runtime.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use mf_forgetting::{Message, TokenCounter};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, ModelInfo, Role, Sampling};
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// What a call was for, so prefill can be reported per purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// A probe answered over a (compacted) context.
    Probe,
    /// A compaction's summary pass.
    Summary,
    /// v2.1's withholding test.
    Evaluator,
    /// The judge grading an answer.
    Judge,
}

/// Token and time figures of all calls of one purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallStats {
    /// Calls made.
    pub calls: u64,
    /// Prompt tokens summed over calls: what a naive resend would prefill.
    pub prompt_tokens: u64,
    /// Prompt tokens actually decoded (the rest came from the KV cache).
    pub decoded_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Of those, inside a thinking block.
    pub thinking_tokens: u64,
    /// Replies that stopped at `max_tokens`.
    pub hit_max_tokens: u64,
    /// Wall time, ms.
    pub wall_ms: u64,
}

impl CallStats {
    fn add(&mut self, g: &Generation, wall_ms: u64) {
        self.calls += 1;
        self.prompt_tokens += u64::from(g.usage.kv.prompt_tokens);
        self.decoded_tokens += u64::from(g.usage.kv.decoded);
        self.completion_tokens += u64::from(g.usage.completion_tokens);
        self.thinking_tokens += u64::from(g.usage.thinking_tokens);
        if g.stop_reason == mf_inference::StopReason::MaxTokens {
            self.hit_max_tokens += 1;
        }
        self.wall_ms += wall_ms;
    }

    /// Adds another set of figures.
    pub fn merge(&mut self, o: &CallStats) {
        self.calls += o.calls;
        self.prompt_tokens += o.prompt_tokens;
        self.decoded_tokens += o.decoded_tokens;
        self.completion_tokens += o.completion_tokens;
        self.thinking_tokens += o.thinking_tokens;
        self.hit_max_tokens += o.hit_max_tokens;
        self.wall_ms += o.wall_ms;
    }

    /// Decoded ÷ prompt tokens (1.0 = no reuse), `None` without calls.
    pub fn prefill_ratio(&self) -> Option<f64> {
        (self.prompt_tokens > 0).then(|| self.decoded_tokens as f64 / self.prompt_tokens as f64)
    }
}

/// The model, a runtime to drive it, a token-count cache and the call figures.
pub struct Model {
    backend: Arc<dyn Backend>,
    llama: Option<Arc<mf_inference::LlamaSession>>,
    rt: tokio::runtime::Runtime,
    info: ModelInfo,
    counts: RefCell<HashMap<String, usize>>,
    stats: RefCell<HashMap<Purpose, CallStats>>,
    /// Passed to every generation (the agent's stop mechanism): cancelling it
    /// stops the call in progress at its next token or prefill batch, and
    /// every later call fails with [`BenchError::Cancelled`].
    cancel: CancelToken,
    /// Whether the backend reports real KV figures (llama.cpp only).
    pub reports_kv: bool,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("info", &self.info).finish_non_exhaustive()
    }
}

impl Model {
    /// Wraps an embedded llama.cpp session (exact per-message token counts).
    ///
    /// # Errors
    /// When the runtime cannot be built.
    pub fn llama(session: Arc<mf_inference::LlamaSession>) -> Result<Self> {
        let mut m = Model::new(session.clone())?;
        m.llama = Some(session);
        Ok(m)
    }

    /// Wraps any backend (per-message counts then approximate; whole prompts are exact).
    ///
    /// # Errors
    /// When the runtime cannot be built.
    pub fn new(backend: Arc<dyn Backend>) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BenchError::InvalidSetting { name: "runtime", reason: e.to_string() })?;
        let info = backend.model_info();
        let reports_kv = info.backend == "llama.cpp";
        Ok(Model {
            backend,
            llama: None,
            rt,
            info,
            counts: RefCell::new(HashMap::new()),
            stats: RefCell::new(HashMap::new()),
            cancel: CancelToken::new(),
            reports_kv,
        })
    }

    /// What the backend says of its model.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Uses `cancel` for every later call (one token shared by the workers of
    /// a parallel run, so one cancel stops them all).
    #[must_use]
    pub fn with_cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// The token that cancels this model's calls: the generation in progress
    /// stops at its next token (or prefill batch), later ones are refused,
    /// and the run ends with [`BenchError::Cancelled`].
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Generates (blocking), recording the figures under `purpose`.
    ///
    /// # Errors
    /// The backend's; [`BenchError::Cancelled`] when the token is cancelled
    /// before or during the call (a cut-off reply is never returned).
    pub fn generate(&self, purpose: Purpose, messages: Vec<ChatMessage>, sampling: Sampling) -> Result<Generation> {
        if self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        let t = Instant::now();
        let req = GenerateRequest { messages, tools: Vec::new(), sampling };
        let g = match self.rt.block_on(self.backend.generate(req.clone(), None, self.cancel.clone())) {
            Err(e) if needs_user_first(&e) => {
                let req = GenerateRequest { messages: user_first(req.messages), ..req };
                self.rt.block_on(self.backend.generate(req, None, self.cancel.clone()))?
            }
            Err(_) if self.is_cancelled() => return Err(BenchError::Cancelled),
            r => r?,
        };
        if g.stop_reason == mf_inference::StopReason::Cancelled || self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        let ms = t.elapsed().as_millis() as u64;
        self.stats.borrow_mut().entry(purpose).or_default().add(&g, ms);
        Ok(g)
    }

    /// Tokens of one message: with llama.cpp, the model's tokenizer over its
    /// text (tool calls as JSON) plus [`ROLE_OVERHEAD`] for the role markers;
    /// elsewhere `None` (a server tokenises only whole conversations).
    /// Cached by content.
    ///
    /// # Errors
    /// The backend's.
    pub fn count_message(&self, m: &Message) -> Result<Option<usize>> {
        let Some(llama) = &self.llama else { return Ok(None) };
        let text = m.analysis_text();
        if let Some(&n) = self.counts.borrow().get(&text) {
            return Ok(Some(n));
        }
        let n = llama.count_text_tokens_blocking(&text)? as usize + ROLE_OVERHEAD;
        self.counts.borrow_mut().insert(text, n);
        Ok(Some(n))
    }

    /// Tokens of a whole conversation's prompt.
    ///
    /// # Errors
    /// The backend's.
    pub fn count_conversation(&self, messages: &[ChatMessage]) -> Result<usize> {
        match self.rt.block_on(self.backend.count_tokens(messages, &[])) {
            Err(e) if needs_user_first(&e) => {
                let fixed = user_first(messages.to_vec());
                Ok(self.rt.block_on(self.backend.count_tokens(&fixed, &[]))? as usize)
            }
            r => Ok(r? as usize),
        }
    }

    /// The figures so far, per purpose.
    pub fn stats(&self) -> HashMap<Purpose, CallStats> {
        self.stats.borrow().clone()
    }

    /// Forgets the figures.
    pub fn reset_stats(&self) {
        self.stats.borrow_mut().clear();
    }
}

/// The user turn put before a history that starts with the model's turn
/// (baseline keeps the system prompt and the last two messages, dropping the
/// question), for templates that insist on user/assistant alternation.
pub const OMITTED_TURN: &str = "[earlier messages omitted]";

fn needs_user_first(e: &mf_inference::InferenceError) -> bool {
    matches!(e, mf_inference::InferenceError::Template(m) if m.contains("alternate"))
}

/// Inserts [`OMITTED_TURN`] as a user message before the first non-system
/// message when that message is not the user's.
pub fn user_first(mut messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let first = messages.iter().position(|m| m.role != Role::System);
    if let Some(i) = first
        && messages[i].role != Role::User
    {
        messages.insert(i, ChatMessage::user(OMITTED_TURN));
    }
    messages
}

/// Tokens of role markers added per message (`<|im_start|>role\n … <|im_end|>\n`).
pub const ROLE_OVERHEAD: usize = 4;

/// A scenario message as the inference crate's chat message: the agent's
/// mapping, so the benchmark measures exactly what the app sends.
pub use mf_agent::compact::to_chat;

/// Counts with the model's tokenizer ([`Model::count_message`]); whole
/// histories through the model's template. Where the backend cannot count
/// one message (HTTP) or a count fails, the approximate counter is used and
/// `approximated` is set, so the report can say so.
pub struct ModelTokenCounter<'a> {
    model: &'a Model,
    /// Set when a count failed and the approximation was used.
    pub approximated: std::cell::Cell<bool>,
}

impl<'a> ModelTokenCounter<'a> {
    /// A counter over `model`.
    pub fn new(model: &'a Model) -> Self {
        ModelTokenCounter { model, approximated: std::cell::Cell::new(false) }
    }
}

impl TokenCounter for ModelTokenCounter<'_> {
    fn count_message(&self, message: &Message) -> usize {
        match self.model.count_message(message) {
            Ok(Some(n)) => n,
            Ok(None) => {
                self.approximated.set(true);
                mf_forgetting::ApproxTokenCounter.count_message(message)
            }
            Err(e) => {
                tracing::warn!("token count failed, approximating: {e}");
                self.approximated.set(true);
                mf_forgetting::ApproxTokenCounter.count_message(message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_history_starting_with_the_model_gets_a_user_turn() {
        let h = vec![ChatMessage::system("s"), ChatMessage::assistant("a"), ChatMessage::user("u")];
        let f = user_first(h.clone());
        assert_eq!(f.len(), 4);
        assert_eq!((f[1].role, f[1].content.as_str()), (Role::User, OMITTED_TURN));
        let ok = vec![ChatMessage::system("s"), ChatMessage::user("u")];
        assert_eq!(user_first(ok.clone()), ok);
    }
}
