//! The llama.cpp backend: a [`LlamaSession`] owns one model and one context on
//! a dedicated thread and keeps the KV cache between requests.
//!
//! The async side renders the prompt with the model's template and sends a
//! command over a bounded channel; the worker tokenises it, finds the longest
//! common prefix with the tokens already cached, removes the cache after it
//! (verifying with `pos_min`/`pos_max` that the memory really did, else
//! clearing it all and saying so), decodes only the rest and generates. Every
//! reply carries [`KvStats`](crate::KvStats).

mod reply_text;
mod worker;

use std::path::{Path, PathBuf};

fn info_of(s: KvSnapshot) -> SnapshotInfo {
    SnapshotInfo { tokens: u32::try_from(s.tokens.len()).unwrap_or(u32::MAX), bytes: s.bytes, key: s.key }
}
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use futures::future::BoxFuture;
use llama_cpp_2::llama_backend::LlamaBackend;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, CancelToken, KvSnapshot, SnapshotSlot, TokenSink};
use crate::error::{InferenceError, Result};
use crate::grammar::ToolGrammar;
use crate::template::{ChatTemplate, RenderOptions, RenderedPrompt};
use crate::types::{ChatMessage, GenerateRequest, Generation, ModelInfo, Sampling, ScoreRequest, Scored, Thinking, TokenLogprob, ToolSpec};

/// How to load a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Context window in tokens.
    pub n_ctx: u32,
    /// Clamp `n_ctx` to the model's training context (else a larger one is a load error).
    pub clamp_to_train: bool,
    /// CPU threads (default: all available).
    pub n_threads: Option<i32>,
    /// Prompt tokens decoded per batch.
    pub n_batch: u32,
    /// Keep the full cache for sliding-window layers so a partial trim stays
    /// exact (Gemma 3). Off, a trim on such a model falls back to a full clear.
    pub swa_full: bool,
    /// Layers offloaded to the GPU (ignored on CPU builds).
    pub n_gpu_layers: u32,
    /// Commands that may wait in the worker's queue.
    pub queue_depth: usize,
    /// A template to use instead of the GGUF's.
    pub template_override: Option<String>,
    /// Hold tool calls to the offered tools' schemas with a lazy grammar
    /// ([`crate::grammar`]; only formats tested with a real model are
    /// constrained). Off by default: it changes what a model samples once it
    /// opens a call, so it is opted into where it is wanted.
    #[serde(default)]
    pub tool_grammar: bool,
    /// When a prompt replaces a middle stretch of the cached conversation
    /// (a compaction), move the cached tail that follows it to its new
    /// position instead of decoding it again (only where llama.cpp's memory
    /// can shift positions: not M-RoPE, not recurrent, and for sliding-window
    /// models only with `swa_full`). The tail's keys and values were computed
    /// against the old middle, so greedy output can differ from a fresh
    /// decode: see the measured agreement in the crate's tests.
    #[serde(default = "default_kv_shift")]
    pub kv_shift: bool,
    /// Sliding-window models without `swa_full`: context checkpoints kept
    /// (the window's state saved at positions, llama.cpp's partial state), so
    /// a trim restores the nearest one at or before the cut and decodes from
    /// there instead of clearing the cache. 0 turns them off (a trim then clears).
    #[serde(default = "default_checkpoints")]
    pub checkpoints: u32,
    /// A checkpoint every this many tokens of a sequence (and one just before
    /// the last token of every prompt).
    #[serde(default = "default_checkpoint_every")]
    pub checkpoint_every: u32,
    /// Sequences a branched call ([`LlamaSession::generate_branches`]) forks
    /// at once beside the shared prefix; 0 runs every prompt of such a call
    /// the plain way, one after the other. (Sliding-window models without
    /// `swa_full` always do.)
    #[serde(default = "default_branches")]
    pub branches: u32,
    /// Keep the log-probability of every token of the last reply
    /// ([`LlamaSession::last_reply_logprobs`]), to check that scoring a text
    /// agrees with what generation saw. Off by default: it reads the whole
    /// logits row once more per generated token.
    #[serde(default)]
    pub record_logprobs: bool,
}

fn default_branches() -> u32 {
    8
}

fn default_checkpoints() -> u32 {
    4
}

/// Small enough that a compaction's cut (just after the pinned head, often
/// 100-300 tokens in) finds a checkpoint close before it; the early ones are
/// small (the window is not full yet).
fn default_checkpoint_every() -> u32 {
    64
}

/// Off, decided by likelihood (`mf bench-kv`, `compaction_step.shift_nll_delta`):
/// the next round's reply and the kept rounds' facts, scored after a shifted
/// cache and after a fresh decode of the same tokens, differ by 0.306 nats
/// per token on SmolLM2 (largest 3.14), against a noise floor of 0.036
/// between two fresh decodes with different batch sizes. The rule is to turn
/// it on only when that difference is within the noise floor or below 0.02
/// nats per token (docs/settings.md, "The KV shift").
fn default_kv_shift() -> bool {
    false
}

impl LlamaConfig {
    /// Defaults for `model_path`: 4096 tokens, clamped, `swa_full`.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            n_ctx: 4096,
            clamp_to_train: true,
            n_threads: None,
            n_batch: 512,
            swa_full: true,
            n_gpu_layers: if cfg!(any(feature = "cuda", target_os = "macos")) { 999 } else { 0 },
            queue_depth: 8,
            template_override: None,
            tool_grammar: false,
            kv_shift: default_kv_shift(),
            checkpoints: default_checkpoints(),
            checkpoint_every: default_checkpoint_every(),
            branches: default_branches(),
            record_logprobs: false,
        }
    }

    /// With a context of `n_ctx` tokens.
    #[must_use]
    pub fn with_n_ctx(mut self, n_ctx: u32) -> Self {
        self.n_ctx = n_ctx;
        self
    }
}

/// What a snapshot file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Tokens saved or restored.
    pub tokens: u32,
    /// Bytes of the state file.
    pub bytes: u64,
    /// The model + context key it was made for.
    pub key: String,
}

pub(crate) enum Command {
    Generate {
        prompt: RenderedPrompt,
        sampling: Sampling,
        grammar: Option<ToolGrammar>,
        sink: Option<TokenSink>,
        cancel: CancelToken,
        reply: oneshot::Sender<Result<Generation>>,
    },
    Branches {
        requests: Vec<worker::BranchRequest>,
        cancel: CancelToken,
        reply: oneshot::Sender<Result<Vec<Generation>>>,
    },
    Score {
        prompt: RenderedPrompt,
        continuations: Vec<String>,
        cancel: CancelToken,
        reply: oneshot::Sender<Result<Vec<Scored>>>,
    },
    LastReplyLogprobs {
        reply: oneshot::Sender<Vec<TokenLogprob>>,
    },
    CountTokens {
        text: String,
        reply: oneshot::Sender<Result<u32>>,
    },
    Snapshot {
        slot: SnapshotSlot,
        reply: oneshot::Sender<Result<KvSnapshot>>,
    },
    Restore {
        slot: SnapshotSlot,
        reply: oneshot::Sender<Result<KvSnapshot>>,
    },
    TokenIds {
        text: String,
        reply: oneshot::Sender<Vec<i32>>,
    },
    CachedIds {
        reply: oneshot::Sender<Vec<i32>>,
    },
    Clear {
        reply: oneshot::Sender<()>,
    },
    CachedTokens {
        reply: oneshot::Sender<u32>,
    },
    Memory {
        reply: oneshot::Sender<KvMemory>,
    },
    Stop,
}

/// What the cache holds now, in bytes as llama.cpp serialises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvMemory {
    /// Cached tokens of the sequence.
    pub tokens: u32,
    /// The sequence's KV state (every layer's keys and values for the cells
    /// the cache holds; a sliding-window layer without `swa_full` holds only
    /// its window).
    pub sequence_bytes: u64,
    /// Context checkpoints kept (sliding-window models without `swa_full`).
    pub checkpoints: u32,
    /// Their bytes.
    pub checkpoint_bytes: u64,
}

/// What the worker reports once the model is loaded.
pub(crate) struct Ready {
    pub info: ModelInfo,
    pub template: Option<String>,
    pub bos: String,
    pub eos: String,
    pub key: String,
}

/// `LlamaBackend::init()` may run once per process: every session shares this one.
fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| InferenceError::Decode(format!("llama.cpp backend init failed: {e}")))
}

/// A model loaded in-process, with its KV cache kept between requests.
pub struct LlamaSession {
    tx: mpsc::Sender<Command>,
    template: ChatTemplate,
    info: ModelInfo,
    key: String,
    tool_grammar: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for LlamaSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaSession").field("info", &self.info).field("key", &self.key).finish_non_exhaustive()
    }
}

impl LlamaSession {
    /// Loads the model on a new worker thread and waits until it is ready.
    /// Blocking (seconds for a large model): call it from `spawn_blocking` in async code.
    ///
    /// # Errors
    /// A load error ([`InferenceError::is_load_error`]) when the file is missing,
    /// empty, not GGUF or corrupt, or the context is too large; never a panic.
    #[tracing::instrument(name = "model_load", skip_all, fields(model = %config.model_path.display(), n_ctx = config.n_ctx))]
    pub fn load(config: LlamaConfig) -> Result<Self> {
        worker::check_gguf(&config.model_path)?;
        let backend = backend()?;
        let tool_grammar = config.tool_grammar;
        let (tx, rx) = mpsc::channel(config.queue_depth.max(1));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("mf-llama".into())
            .spawn(move || worker::run(backend, config, ready_tx, rx))
            .map_err(|e| InferenceError::Decode(format!("cannot start the model thread: {e}")))?;
        let ready = match ready_rx.recv() {
            Ok(Ok(ready)) => ready,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(InferenceError::SessionStopped);
            }
        };
        let template = ChatTemplate::for_model(ready.template.as_deref(), ready.info.architecture.as_deref(), &ready.bos, &ready.eos)?;
        let mut info = ready.info;
        info.tool_format = Some(template.tool_format().name().to_string());
        Ok(Self { tx, template, info, key: ready.key, tool_grammar, thread: Mutex::new(Some(thread)) })
    }

    /// The compiled chat template.
    #[must_use]
    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// The key snapshots are checked against (model file + context parameters).
    #[must_use]
    pub fn snapshot_key(&self) -> &str {
        &self.key
    }

    /// Renders `request` for this model.
    ///
    /// # Errors
    /// Template errors.
    pub fn render(&self, messages: &[ChatMessage], tools: &[ToolSpec], sampling: &Sampling) -> Result<RenderedPrompt> {
        self.template.render(messages, tools, RenderOptions { add_generation_prompt: true, thinking: sampling.thinking != Thinking::Off })
    }

    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| InferenceError::SessionStopped)?;
        rx.await.map_err(|_| InferenceError::SessionStopped)
    }

    fn call_blocking<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.blocking_send(make(reply)).map_err(|_| InferenceError::SessionStopped)?;
        rx.blocking_recv().map_err(|_| InferenceError::SessionStopped)
    }

    fn generate_command(
        &self,
        request: GenerateRequest,
        sink: Option<TokenSink>,
        cancel: CancelToken,
    ) -> Result<impl FnOnce(oneshot::Sender<Result<Generation>>) -> Command> {
        let prompt = self.render(&request.messages, &request.tools, &request.sampling)?;
        let grammar = if self.tool_grammar { crate::grammar::tool_call_grammar(&request.tools, prompt.tool_format) } else { None };
        let sampling = request.sampling;
        Ok(move |reply| Command::Generate { prompt, sampling, grammar, sink, cancel, reply })
    }

    /// Generates a reply (async).
    ///
    /// # Errors
    /// Template, prompt-too-long, decode errors; [`InferenceError::SessionStopped`].
    pub async fn generate(&self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> Result<Generation> {
        let make = self.generate_command(request, sink, cancel)?;
        self.call(make).await?
    }

    /// Generates a reply, blocking the calling thread.
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    ///
    /// # Panics
    /// When called from inside an async runtime (use [`generate`](Self::generate) there).
    pub fn generate_blocking(&self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> Result<Generation> {
        let make = self.generate_command(request, sink, cancel)?;
        self.call_blocking(make)?
    }

    fn branch_requests(&self, requests: &[GenerateRequest]) -> Result<Vec<worker::BranchRequest>> {
        requests.iter().map(|r| Ok(worker::BranchRequest { prompt: self.render(&r.messages, &r.tools, &r.sampling)?, sampling: r.sampling.clone() })).collect()
    }

    /// Whether a branched call must take the plain path: branches sample
    /// without the tool-call grammar.
    fn branches_need_grammar(&self, requests: &[GenerateRequest]) -> bool {
        self.tool_grammar && requests.iter().any(|r| !r.tools.is_empty())
    }

    /// Answers several requests whose prompts share a prefix: the prefix is
    /// decoded once and each request continues on a copy of it, all of them
    /// generating side by side (see the worker's `branch` module). Replies in
    /// request order, without streaming.
    ///
    /// # Errors
    /// As [`generate`](Self::generate), for the first request that fails.
    pub async fn generate_branches(&self, requests: Vec<GenerateRequest>, cancel: CancelToken) -> Result<Vec<Generation>> {
        if self.branches_need_grammar(&requests) {
            let mut out = Vec::with_capacity(requests.len());
            for r in requests {
                out.push(self.generate(r, None, cancel.clone()).await?);
            }
            return Ok(out);
        }
        let requests = self.branch_requests(&requests)?;
        self.call(|reply| Command::Branches { requests, cancel, reply }).await?
    }

    /// Blocking [`generate_branches`](Self::generate_branches).
    ///
    /// # Errors
    /// As [`generate_branches`](Self::generate_branches).
    ///
    /// # Panics
    /// When called from inside an async runtime.
    pub fn generate_branches_blocking(&self, requests: Vec<GenerateRequest>, cancel: CancelToken) -> Result<Vec<Generation>> {
        if self.branches_need_grammar(&requests) {
            return requests.into_iter().map(|r| self.generate_blocking(r, None, cancel.clone())).collect();
        }
        let requests = self.branch_requests(&requests)?;
        self.call_blocking(|reply| Command::Branches { requests, cancel, reply })?
    }

    fn score_command(&self, request: ScoreRequest, cancel: CancelToken) -> Result<impl FnOnce(oneshot::Sender<Result<Vec<Scored>>>) -> Command> {
        // The assistant turn opened, thinking off: the prompt a reply follows.
        let prompt = self.template.render(&request.messages, &request.tools, RenderOptions { add_generation_prompt: true, thinking: false })?;
        let continuations = request.continuations;
        Ok(move |reply| Command::Score { prompt, continuations, cancel, reply })
    }

    /// Scores continuations by log-probability after the conversation's
    /// rendered prompt (see [`Backend::score`]): the prompt's cached prefix is
    /// reused, and each further continuation decodes one prompt token again,
    /// not the prompt.
    ///
    /// # Errors
    /// Template, prompt-too-long (prompt plus a continuation over the
    /// context), decode errors; [`InferenceError::SessionStopped`].
    pub async fn score(&self, request: ScoreRequest, cancel: CancelToken) -> Result<Vec<Scored>> {
        let make = self.score_command(request, cancel)?;
        self.call(make).await?
    }

    /// Blocking [`score`](Self::score).
    ///
    /// # Errors
    /// As [`score`](Self::score).
    ///
    /// # Panics
    /// When called from inside an async runtime.
    pub fn score_blocking(&self, request: ScoreRequest, cancel: CancelToken) -> Result<Vec<Scored>> {
        let make = self.score_command(request, cancel)?;
        self.call_blocking(make)?
    }

    /// The last reply's tokens with the log-probability each had when it was
    /// sampled; empty unless the session was loaded with
    /// [`LlamaConfig::record_logprobs`].
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub fn last_reply_logprobs_blocking(&self) -> Result<Vec<TokenLogprob>> {
        self.call_blocking(|reply| Command::LastReplyLogprobs { reply })
    }

    /// Tokens of `text` as this model tokenises a prompt (BOS included where the model adds one).
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub fn count_text_tokens_blocking(&self, text: &str) -> Result<u32> {
        let text = text.to_string();
        self.call_blocking(|reply| Command::CountTokens { text, reply })?
    }

    /// Async [`count_text_tokens_blocking`](Self::count_text_tokens_blocking).
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub async fn count_text_tokens(&self, text: &str) -> Result<u32> {
        let text = text.to_string();
        self.call(|reply| Command::CountTokens { text, reply }).await?
    }

    /// Saves the cached sequence to `path` (plus a `path.key` file with the
    /// key, the file's length and SHA-256, and the token ids).
    ///
    /// # Errors
    /// [`InferenceError::Snapshot`] when writing fails.
    pub async fn snapshot(&self, path: &Path) -> Result<SnapshotInfo> {
        let slot = SnapshotSlot::File(path.to_path_buf());
        self.call(|reply| Command::Snapshot { slot, reply }).await?.map(info_of)
    }

    /// Blocking [`snapshot`](Self::snapshot).
    ///
    /// # Errors
    /// As [`snapshot`](Self::snapshot).
    pub fn snapshot_blocking(&self, path: &Path) -> Result<SnapshotInfo> {
        let slot = SnapshotSlot::File(path.to_path_buf());
        self.call_blocking(|reply| Command::Snapshot { slot, reply })?.map(info_of)
    }

    /// Replaces the cache with the snapshot at `path`.
    ///
    /// # Errors
    /// [`InferenceError::SnapshotMismatch`] for a snapshot of another model or
    /// context; [`InferenceError::SnapshotDamaged`] for a file whose length or
    /// checksum differs from its key file's (not loaded; the cache is left as
    /// it was); [`InferenceError::Snapshot`] when reading fails (the cache is then empty).
    pub async fn restore(&self, path: &Path) -> Result<SnapshotInfo> {
        let slot = SnapshotSlot::File(path.to_path_buf());
        self.call(|reply| Command::Restore { slot, reply }).await?.map(info_of)
    }

    /// Blocking [`restore`](Self::restore).
    ///
    /// # Errors
    /// As [`restore`](Self::restore).
    pub fn restore_blocking(&self, path: &Path) -> Result<SnapshotInfo> {
        let slot = SnapshotSlot::File(path.to_path_buf());
        self.call_blocking(|reply| Command::Restore { slot, reply })?.map(info_of)
    }

    /// Saves the cached sequence to `slot` (memory or file), blocking.
    ///
    /// # Errors
    /// [`InferenceError::Snapshot`] when saving fails.
    pub fn kv_snapshot_blocking(&self, slot: &SnapshotSlot) -> Result<KvSnapshot> {
        let slot = slot.clone();
        self.call_blocking(|reply| Command::Snapshot { slot, reply })?
    }

    /// Replaces the cache with the snapshot in `slot`, blocking.
    ///
    /// # Errors
    /// As [`Backend::kv_restore`].
    pub fn kv_restore_blocking(&self, slot: &SnapshotSlot) -> Result<KvSnapshot> {
        let slot = slot.clone();
        self.call_blocking(|reply| Command::Restore { slot, reply })?
    }

    /// The token ids in the KV cache now, blocking.
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub fn cached_token_ids_blocking(&self) -> Result<Vec<i32>> {
        self.call_blocking(|reply| Command::CachedIds { reply })
    }

    /// Empties the KV cache.
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub async fn clear(&self) -> Result<()> {
        self.call(|reply| Command::Clear { reply }).await
    }

    /// Blocking [`clear`](Self::clear).
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub fn clear_blocking(&self) -> Result<()> {
        self.call_blocking(|reply| Command::Clear { reply })
    }

    /// Tokens in the KV cache now.
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub fn cached_tokens_blocking(&self) -> Result<u32> {
        self.call_blocking(|reply| Command::CachedTokens { reply })
    }

    /// What the KV cache and its checkpoints hold now, blocking.
    ///
    /// # Errors
    /// [`InferenceError::SessionStopped`].
    pub fn kv_memory_blocking(&self) -> Result<KvMemory> {
        self.call_blocking(|reply| Command::Memory { reply })
    }

    /// Stops the worker and waits for it; later calls fail with `SessionStopped`.
    pub fn stop(&self) {
        // With a full queue the Stop cannot be queued; the worker then ends
        // once this session (the only sender) is dropped.
        if self.tx.try_send(Command::Stop).is_err() {
            return;
        }
        let handle = self.thread.lock().ok().and_then(|mut h| h.take());
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Drop for LlamaSession {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Backend for LlamaSession {
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(LlamaSession::generate(self, request, sink, cancel))
    }

    fn generate_branches<'a>(&'a self, requests: Vec<GenerateRequest>, cancel: CancelToken) -> BoxFuture<'a, Result<Vec<Generation>>> {
        Box::pin(LlamaSession::generate_branches(self, requests, cancel))
    }

    fn score<'a>(&'a self, request: ScoreRequest, cancel: CancelToken) -> BoxFuture<'a, Result<Vec<Scored>>> {
        Box::pin(LlamaSession::score(self, request, cancel))
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<u32>> {
        Box::pin(async move {
            let prompt = self.template.render(messages, tools, RenderOptions::default())?;
            self.count_text_tokens(&prompt.text).await
        })
    }

    fn context_size(&self) -> u32 {
        self.info.context_size
    }

    fn model_info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn keeps_kv(&self) -> bool {
        true
    }

    fn prompt_token_ids<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<Vec<i32>>> {
        Box::pin(async move {
            let text = self.template.render(messages, tools, RenderOptions { add_generation_prompt: true, thinking: false })?.text;
            self.call(|reply| Command::TokenIds { text, reply }).await
        })
    }

    fn cached_token_ids(&self) -> BoxFuture<'_, Result<Vec<i32>>> {
        Box::pin(self.call(|reply| Command::CachedIds { reply }))
    }

    fn kv_snapshot<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, Result<KvSnapshot>> {
        Box::pin(async move {
            let slot = slot.clone();
            self.call(|reply| Command::Snapshot { slot, reply }).await?
        })
    }

    fn kv_restore<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, Result<KvSnapshot>> {
        Box::pin(async move {
            let slot = slot.clone();
            self.call(|reply| Command::Restore { slot, reply }).await?
        })
    }
}
