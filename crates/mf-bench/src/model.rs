//! The model under test behind one blocking façade: generation, token
//! counting, compaction, and the figures every call leaves (prefill, reuse,
//! time).
//!
//! Compaction, token counts, the summary pass and v2.1's withholding test
//! are the app's own: [`Model::compact`] runs `mf_agent::model::compact`,
//! the code the investigation loop runs, so the benchmark sends the summary
//! request the app sends for the same history.
//!
//! The benchmark is sequential by design (one model, one KV cache), so the
//! async [`Backend`] is driven from a private runtime with one worker thread
//! (the adapter's blocking calls wait on its handle from the caller's thread).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use mf_agent::model::{CompactionRun, CompactionSpec, ModelCalls, ModelCounter};
use mf_forgetting::Message;
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, ModelInfo, Role, Sampling, ScoreRequest, Scored};
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
    /// v2.1's withholding test (the app's: the model answers the question
    /// under each context).
    Evaluator,
    /// The judge grading an answer.
    Judge,
    /// The likelihood scorer: references and wrong answers scored by
    /// log-probability after a context (no generation).
    Likelihood,
}

/// Token and time figures of all calls of one purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
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
    rt: tokio::runtime::Runtime,
    info: ModelInfo,
    /// The app's per-message counter (no tools: scenarios offer none).
    counter: ModelCounter,
    stats: RefCell<HashMap<Purpose, CallStats>>,
    /// Passed to every generation (the agent's stop mechanism): cancelling it
    /// stops the call in progress at its next token or prefill batch, and
    /// every later call fails with [`BenchError::Cancelled`].
    cancel: CancelToken,
    /// Whether the backend reports real KV figures (llama.cpp only).
    pub reports_kv: bool,
    /// v2.1's withholding trials in one branched call (set from the run's
    /// [`crate::RunConfig::branched`]).
    branched: std::cell::Cell<bool>,
    /// Another model that writes the compaction summaries ([`Model::with_summariser`]).
    summariser: Option<Box<Model>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("info", &self.info).finish_non_exhaustive()
    }
}

impl Model {
    /// Wraps an embedded llama.cpp session.
    ///
    /// # Errors
    /// When the runtime cannot be built.
    pub fn llama(session: Arc<mf_inference::LlamaSession>) -> Result<Self> {
        Model::new(session)
    }

    /// The model an [`mf_agent::EngineChoice`] names, loaded at `n_ctx`: the
    /// one way every face of the benchmark (the suite, its judge, the app's
    /// panel) turns an engine choice into a model. A server's key comes from
    /// the choice's [`mf_agent::KeySource`]; no connection is made until the
    /// model is used.
    ///
    /// # Errors
    /// The engine's: a model file that does not load, a URL the client refuses.
    pub fn load(choice: &mf_agent::EngineChoice, n_ctx: u32) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(BenchError::Runtime)?;
        let backend = rt.block_on(choice.load(n_ctx, None)).map_err(|e| match e {
            mf_agent::AgentError::Inference(e) => BenchError::Inference(e),
            e => BenchError::InvalidSetting { name: "model", reason: format!("{}: {e}", choice.model_label()) },
        })?;
        Model::new(backend)
    }

    /// Wraps any backend. Token counts are the app's: each message through
    /// the model's template with the backend's tokenizer.
    ///
    /// # Errors
    /// When the runtime cannot be built.
    pub fn new(backend: Arc<dyn Backend>) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("bench-model").enable_all().build().map_err(BenchError::Runtime)?;
        let info = backend.model_info();
        let reports_kv = info.backend == "llama.cpp";
        Ok(Model {
            counter: ModelCounter::new(backend.clone(), Vec::new()),
            backend,
            rt,
            info,
            stats: RefCell::new(HashMap::new()),
            cancel: CancelToken::new(),
            reports_kv,
            branched: std::cell::Cell::new(false),
            summariser: None,
        })
    }

    /// Has `summariser` write every compaction summary (on its own runtime;
    /// its calls are counted as this model's summary calls and stop with
    /// this model's cancel token), as the app's summariser setting does.
    #[must_use]
    pub fn with_summariser(mut self, summariser: Model) -> Self {
        self.summariser = Some(Box::new(summariser));
        self
    }

    /// The name of the model that writes the summaries, when it is not this one.
    pub fn summariser_name(&self) -> Option<&str> {
        self.summariser.as_deref().map(|s| s.info.name.as_str())
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

    /// Branched calls for v2.1's withholding trials from now on (the probes
    /// follow [`crate::RunConfig::branched`] directly).
    pub fn set_branched(&self, on: bool) {
        self.branched.set(on);
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

    /// Generates one reply per request (blocking), the prefix their prompts
    /// share decoded once and the replies generated side by side where the
    /// backend can ([`Backend::generate_branches`]). The figures are recorded
    /// per reply under `purpose`, the call's wall time split evenly.
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    pub fn generate_branches(&self, purpose: Purpose, requests: Vec<(Vec<ChatMessage>, Sampling)>) -> Result<Vec<Generation>> {
        if self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        if requests.len() < 2 {
            return requests.into_iter().map(|(m, s)| self.generate(purpose, m, s)).collect();
        }
        let t = Instant::now();
        let reqs: Vec<GenerateRequest> =
            requests.iter().map(|(m, s)| GenerateRequest { messages: m.clone(), tools: Vec::new(), sampling: s.clone() }).collect();
        let gs = match self.rt.block_on(self.backend.generate_branches(reqs, self.cancel.clone())) {
            // The template wants a user turn first: each request on its own, fixed.
            Err(e) if needs_user_first(&e) => return requests.into_iter().map(|(m, s)| self.generate(purpose, m, s)).collect(),
            Err(_) if self.is_cancelled() => return Err(BenchError::Cancelled),
            r => r?,
        };
        if gs.iter().any(|g| g.stop_reason == mf_inference::StopReason::Cancelled) || self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        let ms = t.elapsed().as_millis() as u64 / gs.len().max(1) as u64;
        let mut stats = self.stats.borrow_mut();
        for g in &gs {
            stats.entry(purpose).or_default().add(g, ms);
        }
        Ok(gs)
    }

    /// Scores `continuations` by log-probability after `messages` (the
    /// assistant turn opened), recording the prompt figures under
    /// [`Purpose::Likelihood`].
    ///
    /// # Errors
    /// The backend's ([`mf_inference::InferenceError::ScoringUnsupported`]
    /// where it cannot score); [`BenchError::Cancelled`].
    pub fn score(&self, messages: Vec<ChatMessage>, continuations: Vec<String>) -> Result<Vec<Scored>> {
        if self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        let t = Instant::now();
        let req = ScoreRequest { messages, tools: Vec::new(), continuations };
        let scored = match self.rt.block_on(self.backend.score(req.clone(), self.cancel.clone())) {
            Err(e) if needs_user_first(&e) => {
                let req = ScoreRequest { messages: user_first(req.messages), ..req };
                self.rt.block_on(self.backend.score(req, self.cancel.clone()))?
            }
            Err(_) if self.is_cancelled() => return Err(BenchError::Cancelled),
            r => r?,
        };
        let ms = t.elapsed().as_millis() as u64;
        let mut stats = self.stats.borrow_mut();
        let st = stats.entry(Purpose::Likelihood).or_default();
        st.calls += 1;
        for s in &scored {
            st.prompt_tokens += u64::from(s.prompt_tokens) + s.tokens.len() as u64;
            st.decoded_tokens += u64::from(s.decoded);
        }
        st.wall_ms += ms;
        Ok(scored)
    }

    /// Compacts `history` as the app's loop does (`mf_agent::model::compact`):
    /// the same counter, summary request and withholding test, with the
    /// generations recorded under [`Purpose::Summary`] and
    /// [`Purpose::Evaluator`].
    ///
    /// # Errors
    /// [`BenchError::Cancelled`] when the token was cancelled before or
    /// during the compaction (a summary cut short would otherwise have been
    /// replaced by the fallback, silently).
    pub fn compact(&self, history: &[Message], spec: &CompactionSpec) -> Result<CompactionRun> {
        if self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        let on_call = |purpose: mf_agent::Purpose, g: &Generation, wall: std::time::Duration| {
            let p = match purpose {
                mf_agent::Purpose::Probe => Purpose::Evaluator,
                _ => Purpose::Summary,
            };
            self.stats.borrow_mut().entry(p).or_default().add(g, wall.as_millis() as u64);
        };
        let calls =
            ModelCalls { handle: self.rt.handle(), backend: self.backend.as_ref(), cancel: &self.cancel, on_call: &on_call, branched: self.branched.get() };
        let summariser = self.summariser.as_deref().map(|s| ModelCalls { handle: s.rt.handle(), backend: s.backend.as_ref(), ..calls });
        let run = mf_agent::model::compact(calls, summariser, &self.counter, history, spec, &mut |_| {});
        if self.is_cancelled() {
            return Err(BenchError::Cancelled);
        }
        Ok(run)
    }

    /// Whether any per-message count so far was an estimate (the template
    /// could not render one message alone, or the backend failed).
    pub fn counts_approximated(&self) -> bool {
        self.counter.approximated()
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

/// A scenario message as the inference crate's chat message: the agent's
/// mapping, so the benchmark measures exactly what the app sends.
pub use mf_agent::model::to_chat;

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
