//! The worker thread: owns model and context, serves commands one at a time.

mod branch;
pub(crate) use self::branch::BranchRequest;
mod checkpoint;
mod score;
mod shift;
mod snapshot;

use std::collections::HashMap;
use std::io::Read as _;
use std::num::NonZeroU32;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaModel, RopeType};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{LlamaStateSeqFlags, SeqState};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use self::checkpoint::{Checkpoint, CheckpointPolicy};
use self::shift::{MIN_SHIFT, find_block, memory_can_shift};
use super::reply_text::{Next, ReplyText};
use super::{Command, KvMemory, LlamaConfig, Ready};
use crate::backend::{CancelToken, SnapshotSlot, TokenSink};
use crate::error::{InferenceError, Result};
use crate::grammar::ToolGrammar;
use crate::reply::assemble;
use crate::template::RenderedPrompt;
use crate::types::{Generation, KvPath, KvStats, ModelInfo, Sampling, StopReason, StreamEvent, Usage};

const SEQ: i32 = 0;

/// Checks the file before llama.cpp sees it: exists, non-empty, GGUF magic.
pub(crate) fn check_gguf(path: &Path) -> Result<()> {
    let unreadable = |e: std::io::Error| InferenceError::ModelUnreadable { path: path.to_path_buf(), reason: e.to_string() };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.is_dir() {
        return Err(InferenceError::ModelUnreadable { path: path.to_path_buf(), reason: "it is a directory".into() });
    }
    if meta.len() == 0 {
        return Err(InferenceError::EmptyModelFile { path: path.to_path_buf() });
    }
    let mut magic = [0u8; 4];
    let mut f = std::fs::File::open(path).map_err(unreadable)?;
    let n = f.read(&mut magic).map_err(unreadable)?;
    if n < 4 || &magic != b"GGUF" {
        return Err(InferenceError::NotGguf { path: path.to_path_buf(), found: magic[..n].escape_ascii().to_string() });
    }
    Ok(())
}

/// Identifies model file + context parameters for snapshots.
fn session_key(path: &Path, n_ctx: u32, swa_full: bool) -> Result<String> {
    let unreadable = |e: std::io::Error| InferenceError::ModelUnreadable { path: path.to_path_buf(), reason: e.to_string() };
    let len = std::fs::metadata(path).map_err(unreadable)?.len();
    let mut head = Vec::with_capacity(1 << 20);
    std::fs::File::open(path).map_err(unreadable)?.take(1 << 20).read_to_end(&mut head).map_err(unreadable)?;
    let digest = hex::encode(&Sha256::digest(&head)[..8]);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(format!("{name} ({len} bytes, head sha256 {digest}), n_ctx {n_ctx}, swa_full {swa_full}, kv f16"))
}

pub(crate) fn run(backend: &'static LlamaBackend, config: LlamaConfig, ready: std::sync::mpsc::SyncSender<Result<Ready>>, rx: mpsc::Receiver<Command>) {
    // A panic inside llama-cpp-2 during load must still answer the handshake.
    let loaded = catch_unwind(AssertUnwindSafe(|| load(backend, &config)));
    let model = match loaded {
        Ok(Ok(model)) => model,
        Ok(Err(e)) => {
            let _ = ready.send(Err(e));
            return;
        }
        Err(_) => {
            let _ = ready.send(Err(InferenceError::CorruptModel { path: config.model_path.clone() }));
            return;
        }
    };
    serve(backend, &config, &model, ready, rx);
}

fn load(backend: &LlamaBackend, config: &LlamaConfig) -> Result<LlamaModel> {
    let params = LlamaModelParams::default().with_n_gpu_layers(config.n_gpu_layers);
    LlamaModel::load_from_file(backend, &config.model_path, &params).map_err(|_| InferenceError::CorruptModel { path: config.model_path.clone() })
}

fn serve(backend: &LlamaBackend, config: &LlamaConfig, model: &LlamaModel, ready: std::sync::mpsc::SyncSender<Result<Ready>>, mut rx: mpsc::Receiver<Command>) {
    let train = model.n_ctx_train();
    let mut n_ctx = config.n_ctx;
    if n_ctx == 0 {
        let _ = ready.send(Err(InferenceError::InvalidRequest("a context of 0 tokens".into())));
        return;
    }
    if train > 0 && n_ctx > train {
        if config.clamp_to_train {
            tracing::warn!(requested = n_ctx, train, "context clamped to the model's training context");
            n_ctx = train;
        } else {
            let _ = ready.send(Err(InferenceError::ContextTooLarge { requested: n_ctx, train }));
            return;
        }
    }
    let threads = config.n_threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(1));
    let n_batch = config.n_batch.clamp(1, n_ctx);
    let sliding_window = architecture_key(model, "attention.sliding_window").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let shift = config.kv_shift && memory_can_shift(model, sliding_window, config.swa_full);
    // A sliding-window cache without `swa_full` grows with every sequence it
    // may hold, and its checkpoints cover sequence 0 only: no branches there.
    let branches = if sliding_window > 0 && !config.swa_full { 0 } else { config.branches as usize };
    let params = LlamaContextParams::default()
        // A second sequence parks a shifted tail; the unified cache lets the
        // two share cells (a copy between them only tags cells).
        // Branches fork up to `branches` more (sequence 0 keeps the trunk).
        .with_n_seq_max(1 + branches.max(usize::from(shift)) as u32)
        .with_kv_unified(true)
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_threads(threads)
        .with_n_threads_batch(threads)
        .with_swa_full(config.swa_full);
    let ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(_) => {
            let _ = ready.send(Err(InferenceError::ContextCreate { n_ctx }));
            return;
        }
    };
    let key = match session_key(&config.model_path, n_ctx, config.swa_full) {
        Ok(k) => k,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let vocab = model.vocab();
    let piece = |t: LlamaToken| String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned();
    let architecture = model.meta_val_str("general.architecture").ok();
    let info = ModelInfo {
        name: config.model_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        backend: "llama.cpp".into(),
        architecture,
        context_size: ctx.n_ctx(),
        context_train: Some(train),
        parameters: Some(model.n_params()),
        tool_format: None,
    };
    let bos = piece(vocab.bos());
    let eos = piece(vocab.eos());
    let template = config.template_override.clone().or_else(|| model.meta_val_str("tokenizer.chat_template").ok());
    // A partial trim is exact only where every layer still holds positions
    // [0, p0). Not so for M-RoPE, nor for sliding-window layers without
    // `swa_full`: there `pos_min` (the max over the layer caches) can still read
    // 0 after a trim below the evicted range (the window cache is then simply
    // empty), so the check after the trim cannot see it. Such models clear fully.
    let partial_trim = partial_trim_rope(model) && (sliding_window == 0 || config.swa_full);
    if ready.send(Ok(Ready { info, template, bos: bos.clone(), eos, key: key.clone() })).is_err() {
        return;
    }
    // Without `swa_full` a sliding-window cache forgets what left the window:
    // a trim resumes from a checkpoint instead.
    let checkpoint = (sliding_window > 0 && !config.swa_full && partial_trim_rope(model) && config.checkpoints > 0 && config.checkpoint_every > 0)
        .then_some(CheckpointPolicy { every: config.checkpoint_every as usize, keep: config.checkpoints as usize });
    let mut w = Worker {
        model,
        ctx,
        cached: Vec::new(),
        last_logits: None,
        n_batch: n_batch as usize,
        bos,
        key,
        partial_trim,
        shift,
        branches,
        checkpoint,
        checkpoints: Vec::new(),
        memory: HashMap::new(),
        record_logprobs: config.record_logprobs,
        last_reply: Vec::new(),
    };
    while let Some(cmd) = rx.blocking_recv() {
        if matches!(cmd, Command::Stop) {
            break;
        }
        // A panic serving one command must not kill the session: the reply
        // sender is dropped (the caller sees an error) and the cache is reset.
        if catch_unwind(AssertUnwindSafe(|| w.handle(cmd))).is_err() {
            tracing::error!("model worker panicked; cache cleared");
            w.reset();
        }
    }
}

/// Whether the model's positions allow cutting a sequence at any position.
fn partial_trim_rope(model: &LlamaModel) -> bool {
    !matches!(model.rope_type(), Some(RopeType::MRope | RopeType::IMRope | RopeType::Vision)) && !model.is_recurrent() && !model.is_hybrid()
}

/// `{architecture}.{suffix}` from the GGUF metadata.
fn architecture_key(model: &LlamaModel, suffix: &str) -> Option<String> {
    let arch = model.meta_val_str("general.architecture").ok()?;
    model.meta_val_str(&format!("{arch}.{suffix}")).ok()
}

struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    /// Exactly the tokens in the KV cache, positions 0..len.
    cached: Vec<LlamaToken>,
    /// Batch index whose logits are current and belong to `cached.last()`.
    last_logits: Option<i32>,
    n_batch: usize,
    bos: String,
    key: String,
    partial_trim: bool,
    /// Whether a cached tail may be shifted to a new position (the setting
    /// and the memory's ability).
    shift: bool,
    /// Sequences a branched call may fork at once (0: it runs the plain path).
    branches: usize,
    /// Set for sliding-window models without `swa_full`.
    checkpoint: Option<CheckpointPolicy>,
    /// Ascending by position; every one a state of a prefix of `cached`.
    checkpoints: Vec<Checkpoint>,
    /// In-memory snapshots by name: the sequence state and its tokens.
    memory: HashMap<String, (SeqState, Vec<LlamaToken>)>,
    /// Whether [`generate`](Worker::generate) keeps the log-probability of
    /// every token it samples (in `last_reply`).
    record_logprobs: bool,
    /// The last reply's tokens and their log-probabilities, when recorded.
    last_reply: Vec<crate::types::TokenLogprob>,
}

fn ids(tokens: &[LlamaToken]) -> Vec<i32> {
    tokens.iter().map(|t| t.0).collect()
}

impl Worker<'_> {
    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Generate { prompt, sampling, grammar, sink, cancel, reply } => {
                let _ = reply.send(self.generate(&prompt, &sampling, grammar.as_ref(), sink.as_ref(), &cancel));
            }
            Command::Score { prompt, continuations, cancel, reply } => {
                let _ = reply.send(self.score(&prompt, &continuations, &cancel));
            }
            Command::LastReplyLogprobs { reply } => {
                let _ = reply.send(self.last_reply.clone());
            }
            Command::Branches { requests, cancel, reply } => {
                let _ = reply.send(self.generate_branches(&requests, &cancel));
            }
            Command::CountTokens { text, reply } => {
                let _ = reply.send(Ok(self.tokenize(&text).len() as u32));
            }
            Command::Snapshot { slot, reply } => {
                let _ = reply.send(match slot {
                    SnapshotSlot::File(path) => self.snapshot(&path),
                    SnapshotSlot::Memory(name) => self.snapshot_memory(name),
                });
            }
            Command::Restore { slot, reply } => {
                let _ = reply.send(match slot {
                    SnapshotSlot::File(path) => self.restore(&path),
                    SnapshotSlot::Memory(name) => self.restore_memory(&name),
                });
            }
            Command::TokenIds { text, reply } => {
                let _ = reply.send(ids(&self.tokenize(&text)));
            }
            Command::CachedIds { reply } => {
                let _ = reply.send(ids(&self.cached));
            }
            Command::Clear { reply } => {
                self.reset();
                let _ = reply.send(());
            }
            Command::CachedTokens { reply } => {
                let _ = reply.send(self.cached.len() as u32);
            }
            Command::Memory { reply } => {
                let _ = reply.send(KvMemory {
                    tokens: self.cached.len() as u32,
                    sequence_bytes: self.ctx.state_seq_get_size_ext(SEQ, LlamaStateSeqFlags::empty()) as u64,
                    checkpoints: self.checkpoints.len() as u32,
                    checkpoint_bytes: self.checkpoints.iter().map(|c| c.state.byte_len() as u64).sum(),
                });
            }
            Command::Stop => {}
        }
    }

    fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
        self.checkpoints.clear();
        self.last_logits = None;
    }

    fn tokenize(&self, text: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        // Templates that write the BOS themselves must not get a second one.
        let add_bos = vocab.should_add_bos() && !(self.bos.is_empty() || text.starts_with(&self.bos));
        vocab.tokenize(text.as_bytes(), add_bos, true)
    }

    /// Whether the cache holds exactly positions `[0, len)`.
    fn cache_holds(&self, len: usize) -> bool {
        let min = self.ctx.kv_cache_seq_pos_min(SEQ);
        let max = self.ctx.kv_cache_seq_pos_max(SEQ);
        // A sliding-window cache without `swa_full` reports the window's
        // lowest position, which leaves 0 once the sequence outgrows it.
        let min_ok = min == 0 || (self.checkpoint.is_some() && min >= 0);
        if len == 0 { max < 0 } else { min_ok && max == len as i32 - 1 }
    }

    /// Brings the cache to a prefix of `prompt` and returns its length
    /// (`cached == prompt[..keep]`) and the prompt tokens decoded on the way
    /// (the gap before a shifted tail). Sets `reused`, `trimmed`, `shifted`,
    /// `full_clear` and `path` in `stats`.
    fn prepare(&mut self, prompt: &[LlamaToken], stats: &mut KvStats, cancel: &CancelToken) -> Result<(usize, usize)> {
        let mut lcp = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let exact = lcp == prompt.len() && self.cached.len() == prompt.len() && self.last_logits.is_some();
        if exact {
            stats.reused = lcp as u32;
            return Ok((lcp, 0));
        }
        if lcp == prompt.len() {
            // The last prompt token must be decoded again to get its logits.
            lcp -= 1;
        }
        if lcp < self.cached.len()
            && self.shift
            && let Some((a, c, k)) = find_block(&self.cached, prompt, lcp)
        {
            {
                // The last prompt token is decoded, never shifted: its logits are needed.
                let k = k.min(prompt.len() - 1 - c);
                if k >= MIN_SHIFT {
                    let n = self.cached.len();
                    match self.shift_tail(prompt, lcp, a, c, k, cancel) {
                        Ok(done) => {
                            stats.trimmed = (n - lcp - k) as u32;
                            stats.path = KvPath::Shift;
                            if done {
                                stats.shifted = k as u32;
                                stats.reused = (lcp + k) as u32;
                                return Ok((self.cached.len(), c - lcp));
                            }
                            // Cancelled while decoding the gap: the tail is gone.
                            stats.reused = lcp as u32;
                            return Ok((self.cached.len(), self.cached.len() - lcp));
                        }
                        Err(e) => {
                            tracing::warn!("KV shift failed ({e}); clearing the cache");
                            self.reset();
                            stats.trimmed = n as u32;
                            stats.full_clear = true;
                            stats.path = KvPath::Cleared;
                            return Ok((0, 0));
                        }
                    }
                }
            }
        }
        if lcp < self.cached.len() && self.checkpoint.is_some() {
            stats.trimmed = (self.cached.len() - lcp) as u32;
            self.last_logits = None;
            if let Some(q) = self.restore_checkpoint(lcp) {
                stats.path = KvPath::Checkpoint;
                stats.checkpoint_redecoded = (lcp - q) as u32;
                stats.reused = q as u32;
                return Ok((q, 0));
            }
            self.reset();
            stats.full_clear = true;
            stats.path = KvPath::Cleared;
            return Ok((0, 0));
        }
        if lcp < self.cached.len() {
            stats.trimmed = (self.cached.len() - lcp) as u32;
            let removed = self.partial_trim && self.ctx.clear_kv_cache_seq(Some(SEQ as u32), Some(lcp as u32), None).unwrap_or(false);
            if removed && self.cache_holds(lcp) {
                self.cached.truncate(lcp);
            } else {
                tracing::debug!(lcp, "partial KV trim refused by the model's memory; clearing");
                self.reset();
                stats.full_clear = true;
                lcp = 0;
            }
        } else if !self.cache_holds(self.cached.len()) {
            self.reset();
            stats.full_clear = true;
            lcp = 0;
        }
        if stats.full_clear {
            stats.path = KvPath::Cleared;
        }
        self.last_logits = None;
        stats.reused = lcp as u32;
        Ok((lcp, 0))
    }

    /// Decodes `tokens` at the end of the cache; logits only for the last one.
    fn decode(&mut self, tokens: &[LlamaToken], cancel: Option<&CancelToken>) -> Result<bool> {
        let mut rest = tokens;
        while !rest.is_empty() {
            if cancel.is_some_and(CancelToken::is_cancelled) {
                return Ok(false);
            }
            let start = self.cached.len();
            let mut n = rest.len().min(self.n_batch);
            if let Some(policy) = self.checkpoint {
                // Chunks end on checkpoint positions.
                n = n.min((start / policy.every + 1) * policy.every - start);
            }
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            let mut batch = LlamaBatch::new(chunk.len(), 1);
            for (i, t) in chunk.iter().enumerate() {
                batch.add(*t, (start + i) as i32, &[SEQ], i + 1 == chunk.len()).map_err(|e| InferenceError::Decode(e.to_string()))?;
            }
            if let Err(e) = self.ctx.decode(&mut batch) {
                // The failed batch may be half in the cache: drop it all.
                self.reset();
                return Err(InferenceError::Decode(e.to_string()));
            }
            self.cached.extend_from_slice(chunk);
            self.last_logits = Some(chunk.len() as i32 - 1);
            if self.checkpoint.is_some_and(|p| self.cached.len().is_multiple_of(p.every)) {
                self.save_checkpoint();
            }
        }
        Ok(true)
    }

    /// The sampler chain; a tool-call grammar, when given, filters first.
    fn sampler(&self, sampling: &Sampling, grammar: Option<&ToolGrammar>) -> LlamaSampler {
        let mut chain = Vec::new();
        if let Some(g) = grammar {
            match LlamaSampler::grammar_lazy_patterns(self.model, &g.gbnf, "root", &g.trigger_patterns, &[]) {
                Ok(s) => chain.push(s),
                // Our grammar is at fault, not the request: answer unconstrained.
                Err(e) => tracing::warn!("tool-call grammar refused by llama.cpp ({e}); sampling without it"),
            }
        }
        if sampling.temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
            return LlamaSampler::chain_simple(chain);
        }
        if sampling.top_k > 0 {
            chain.push(LlamaSampler::top_k(sampling.top_k as i32));
        }
        if sampling.top_p < 1.0 {
            chain.push(LlamaSampler::top_p(sampling.top_p, 1));
        }
        chain.push(LlamaSampler::temp(sampling.temperature));
        chain.push(LlamaSampler::dist(sampling.seed));
        LlamaSampler::chain_simple(chain)
    }

    fn generate(
        &mut self,
        prompt: &RenderedPrompt,
        sampling: &Sampling,
        grammar: Option<&ToolGrammar>,
        sink: Option<&TokenSink>,
        cancel: &CancelToken,
    ) -> Result<Generation> {
        let tokens = self.tokenize(&prompt.text);
        let n_ctx = self.ctx.n_ctx();
        if tokens.is_empty() {
            return Err(InferenceError::InvalidRequest("the prompt is empty".into()));
        }
        let prompt_tokens = tokens.len() as u32;
        if prompt_tokens.saturating_add(sampling.max_tokens) > n_ctx {
            return Err(InferenceError::PromptTooLong { prompt_tokens, reserve: sampling.max_tokens, context_size: n_ctx });
        }
        let mut stats = KvStats { prompt_tokens, ..KvStats::default() };
        let t0 = Instant::now();
        let (keep, gap) = self.prepare(&tokens, &mut stats, cancel)?;
        stats.decoded = prompt_tokens - stats.reused;
        let finished = if self.checkpoint.is_some() && tokens.len() - 1 > keep {
            // A checkpoint just before the last prompt token: the next prompt
            // departs from this one at the earliest there (its reply differs).
            let body = self.decode(&tokens[keep..tokens.len() - 1], Some(cancel))?;
            if body {
                self.save_checkpoint();
            }
            body && self.decode(&tokens[tokens.len() - 1..], Some(cancel))?
        } else {
            self.decode(&tokens[keep..], Some(cancel))?
        };
        stats.prefill_ms = t0.elapsed().as_millis() as u64;
        let mut usage = Usage { kv: stats, ..Usage::default() };
        if !finished {
            usage.kv.decoded = (gap + self.cached.len().saturating_sub(keep)) as u32;
            return Ok(assemble(String::new(), prompt.thinking_open, prompt.tool_format, Vec::new(), None, StopReason::Cancelled, usage));
        }

        let t1 = Instant::now();
        let max = sampling.max_tokens;
        let mut sampler = self.sampler(sampling, grammar);
        let mut reply = ReplyText::new(prompt, sampling);
        self.last_reply.clear();
        let mut emit = |events: Vec<StreamEvent>| {
            if let Some(sink) = sink {
                for e in events {
                    let _ = sink.send(e);
                }
            }
        };
        let stop_reason = loop {
            if cancel.is_cancelled() {
                break StopReason::Cancelled;
            }
            if reply.generated >= max {
                break StopReason::MaxTokens;
            }
            if self.cached.len() as u32 >= n_ctx {
                break StopReason::ContextFull;
            }
            let Some(idx) = self.last_logits else {
                return Err(InferenceError::Decode("no logits to sample from".into()));
            };
            let token = sampler.sample(&self.ctx, idx);
            if self.model.vocab().is_eog(token) {
                break StopReason::EndOfTurn;
            }
            if self.record_logprobs {
                let (logprob, top) = score::logprob_of(self.ctx.get_logits_ith(idx), token);
                let text = String::from_utf8_lossy(&self.model.vocab().token_to_piece(token, false, None)).into_owned();
                let start = self.last_reply.last().map_or(0, |t| t.start + t.text.len());
                self.last_reply.push(crate::types::TokenLogprob { text, start, logprob, top_logprob: Some(top) });
            }
            match reply.push(self.model, token, &mut emit) {
                Next::Stop(reason) => break reason,
                Next::Decode(next) => {
                    if !self.decode(&next, None)? {
                        break StopReason::Cancelled;
                    }
                }
            }
        };
        usage.completion_tokens = reply.generated;
        usage.thinking_tokens = reply.thinking_tokens;
        let raw = reply.finish(&mut emit);
        usage.kv.decode_ms = t1.elapsed().as_millis() as u64;
        Ok(assemble(raw, prompt.thinking_open, prompt.tool_format, Vec::new(), None, stop_reason, usage))
    }
}
