//! The worker thread: owns model and context, serves commands one at a time.

use std::io::Read as _;
use std::num::NonZeroU32;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaModel, RopeType};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use std::collections::HashMap;

use llama_cpp_2::{LlamaStateSeqFlags, SeqState};

use super::{Command, LlamaConfig, Ready};
use crate::backend::{CancelToken, KvSnapshot, SnapshotSlot, TokenSink};
use crate::error::{InferenceError, Result};
use crate::grammar::ToolGrammar;
use crate::reply::assemble;
use crate::template::RenderedPrompt;
use crate::thinking::{ThinkStream, partial_suffix};
use crate::types::{Generation, KvStats, ModelInfo, Sampling, StopReason, StreamEvent, Thinking, Usage};

const SEQ: i32 = 0;
/// Closes a thinking block whose budget is spent, so the answer still comes.
const THINK_CLOSE: &str = "\n</think>\n\n";

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
    LlamaModel::load_from_file(backend, &config.model_path, &params)
        .map_err(|_| InferenceError::CorruptModel { path: config.model_path.clone() })
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
    let threads = config
        .n_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(1));
    let n_batch = config.n_batch.clamp(1, n_ctx);
    let params = LlamaContextParams::default()
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
    let sliding_window = architecture_key(model, "attention.sliding_window").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let partial_trim = !matches!(model.rope_type(), Some(RopeType::MRope | RopeType::IMRope | RopeType::Vision))
        && (sliding_window == 0 || config.swa_full);
    if ready.send(Ok(Ready { info, template, bos: bos.clone(), eos, key: key.clone() })).is_err() {
        return;
    }
    let mut w = Worker { model, ctx, cached: Vec::new(), last_logits: None, n_batch: n_batch as usize, bos, key, partial_trim, memory: HashMap::new() };
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
    /// In-memory snapshots by name: the sequence state and its tokens.
    memory: HashMap<String, (SeqState, Vec<LlamaToken>)>,
}

/// What `FILE.key` holds beside a snapshot file.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeyFile {
    /// Tokens saved.
    tokens: u32,
    /// Bytes of the state file.
    bytes: u64,
    /// The model + context key.
    key: String,
    /// The token ids, position by position.
    #[serde(default)]
    ids: Vec<i32>,
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
            Command::Stop => {}
        }
    }

    fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
        self.last_logits = None;
    }

    fn tokenize(&self, text: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        // Templates that write the BOS themselves must not get a second one.
        let add_bos = vocab.should_add_bos() && !(self.bos.is_empty() || text.starts_with(&self.bos)) ;
        vocab.tokenize(text.as_bytes(), add_bos, true)
    }

    /// Whether the cache holds exactly positions `[0, len)`.
    fn cache_holds(&self, len: usize) -> bool {
        let min = self.ctx.kv_cache_seq_pos_min(SEQ);
        let max = self.ctx.kv_cache_seq_pos_max(SEQ);
        if len == 0 { max < 0 } else { min == 0 && max == len as i32 - 1 }
    }

    /// Makes the cache hold `prompt[..keep]` where possible; returns what was done.
    fn reuse_prefix(&mut self, prompt: &[LlamaToken], stats: &mut KvStats) -> usize {
        let mut lcp = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let exact = lcp == prompt.len() && self.cached.len() == prompt.len() && self.last_logits.is_some();
        if exact {
            return lcp;
        }
        if lcp == prompt.len() {
            // The last prompt token must be decoded again to get its logits.
            lcp -= 1;
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
        self.last_logits = None;
        lcp
    }

    /// Decodes `tokens` at the end of the cache; logits only for the last one.
    fn decode(&mut self, tokens: &[LlamaToken], cancel: Option<&CancelToken>) -> Result<bool> {
        for chunk in tokens.chunks(self.n_batch) {
            if cancel.is_some_and(CancelToken::is_cancelled) {
                return Ok(false);
            }
            let mut batch = LlamaBatch::new(chunk.len(), 1);
            let start = self.cached.len();
            for (i, t) in chunk.iter().enumerate() {
                batch
                    .add(*t, (start + i) as i32, &[SEQ], i + 1 == chunk.len())
                    .map_err(|e| InferenceError::Decode(e.to_string()))?;
            }
            if let Err(e) = self.ctx.decode(&mut batch) {
                // The failed batch may be half in the cache: drop it all.
                self.reset();
                return Err(InferenceError::Decode(e.to_string()));
            }
            self.cached.extend_from_slice(chunk);
            self.last_logits = Some(chunk.len() as i32 - 1);
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
        let keep = self.reuse_prefix(&tokens, &mut stats);
        stats.reused = keep as u32;
        stats.decoded = (tokens.len() - keep) as u32;
        let finished = self.decode(&tokens[keep..], Some(cancel))?;
        stats.prefill_ms = t0.elapsed().as_millis() as u64;
        let mut usage = Usage { kv: stats, ..Usage::default() };
        if !finished {
            usage.kv.decoded = (self.cached.len().saturating_sub(keep)) as u32;
            return Ok(assemble(String::new(), prompt.thinking_open, prompt.tool_format, Vec::new(), None, StopReason::Cancelled, usage));
        }

        let t1 = Instant::now();
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
        let mut sampler = self.sampler(sampling, grammar);
        let vocab = self.model.vocab();
        let mut think = ThinkStream::new(prompt.thinking_open);
        let mut raw = String::new();
        let mut pending_bytes: Vec<u8> = Vec::new();
        let mut emitted = 0usize;
        let mut generated = 0u32;
        let mut thinking_tokens = 0u32;
        let emit = |events: Vec<StreamEvent>| {
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
            if generated >= max {
                break StopReason::MaxTokens;
            }
            if self.cached.len() as u32 >= n_ctx {
                break StopReason::ContextFull;
            }
            let Some(idx) = self.last_logits else {
                return Err(InferenceError::Decode("no logits to sample from".into()));
            };
            let token = sampler.sample(&self.ctx, idx);
            if vocab.is_eog(token) {
                break StopReason::EndOfTurn;
            }
            generated += 1;
            if think.in_thinking() {
                thinking_tokens += 1;
            }
            pending_bytes.extend(vocab.token_to_piece(token, true, None));
            let valid = match std::str::from_utf8(&pending_bytes) {
                Ok(s) => s.len(),
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => pending_bytes.len(),
            };
            raw.push_str(&String::from_utf8_lossy(&pending_bytes[..valid]));
            pending_bytes.drain(..valid);

            // Stop strings end the reply and are not part of it.
            let search_from = emitted;
            if let Some((at, _)) = stops.iter().filter_map(|s| raw[search_from..].find(s).map(|i| (search_from + i, *s))).min() {
                raw.truncate(at);
                break StopReason::StopString;
            }
            let mut next = vec![token];
            if think.in_thinking() && thinking_tokens >= think_cap {
                // Budget spent: close the block and let the answer come.
                raw.push_str(THINK_CLOSE);
                next.extend(vocab.tokenize(THINK_CLOSE.as_bytes(), false, true));
            }
            let hold = stops.iter().map(|s| partial_suffix(&raw, s)).max().unwrap_or(0);
            let safe = raw.len() - hold;
            if safe > emitted && raw.is_char_boundary(safe) {
                emit(think.push(&raw[emitted..safe]));
                emitted = safe;
            }
            if !self.decode(&next, None)? {
                break StopReason::Cancelled;
            }
        };
        if emitted < raw.len() {
            emit(think.push(&raw[emitted..]));
        }
        emit(think.finish());
        usage.kv.decode_ms = t1.elapsed().as_millis() as u64;
        usage.completion_tokens = generated;
        usage.thinking_tokens = thinking_tokens;
        Ok(assemble(raw, prompt.thinking_open, prompt.tool_format, Vec::new(), None, stop_reason, usage))
    }

    fn key_path(path: &Path) -> PathBuf {
        let mut p = path.as_os_str().to_owned();
        p.push(".key");
        PathBuf::from(p)
    }

    fn snapshot(&mut self, path: &Path) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: path.to_path_buf(), reason };
        // Written beside the target and renamed, so a crash mid-write never
        // leaves a half file under the real name; the key file, written
        // last, carries the token ids that `restore` checks the state against.
        let tmp = {
            let mut p = path.as_os_str().to_owned();
            p.push(".tmp");
            PathBuf::from(p)
        };
        let bytes = self
            .ctx
            .state_seq_save_file(&tmp, SEQ, &self.cached)
            .map_err(|e| fail(format!("llama.cpp could not save the state: {e}")))?;
        std::fs::rename(&tmp, path).map_err(|e| fail(format!("cannot move the state file in place: {e}")))?;
        let snap = KvSnapshot { tokens: ids(&self.cached), bytes: bytes as u64, key: self.key.clone() };
        let key = KeyFile { tokens: snap.tokens.len() as u32, bytes: snap.bytes, key: snap.key.clone(), ids: snap.tokens.clone() };
        let json = serde_json::to_vec_pretty(&key).map_err(|e| fail(e.to_string()))?;
        let key_path = Self::key_path(path);
        let key_tmp = Self::key_path(&tmp);
        std::fs::write(&key_tmp, json).map_err(|e| fail(format!("cannot write the key file: {e}")))?;
        std::fs::rename(&key_tmp, &key_path).map_err(|e| fail(format!("cannot move the key file in place: {e}")))?;
        Ok(snap)
    }

    fn restore(&mut self, path: &Path) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: path.to_path_buf(), reason };
        let key_json = std::fs::read(Self::key_path(path)).map_err(|e| fail(format!("cannot read its key file: {e}")))?;
        let saved: KeyFile = serde_json::from_slice(&key_json).map_err(|e| fail(format!("bad key file: {e}")))?;
        if saved.key != self.key {
            return Err(InferenceError::SnapshotMismatch { path: path.to_path_buf(), expected: self.key.clone(), found: saved.key });
        }
        self.reset();
        let max = self.ctx.n_ctx() as usize;
        let (tokens, bytes) = match self.ctx.state_seq_load_file(path, SEQ, max) {
            Ok(r) => r,
            Err(e) => {
                self.reset();
                return Err(fail(format!("llama.cpp could not load the state: {e}")));
            }
        };
        if !self.cache_holds(tokens.len()) {
            self.reset();
            return Err(fail("the restored cache does not hold the saved positions".into()));
        }
        // A key file from another save (a crash between the two renames)
        // names other tokens: refuse rather than trust either.
        if !saved.ids.is_empty() && saved.ids != ids(&tokens) {
            self.reset();
            return Err(fail("the key file's tokens differ from the state file's (an interrupted save?)".into()));
        }
        self.cached = tokens;
        self.last_logits = None;
        Ok(KvSnapshot { tokens: ids(&self.cached), bytes: bytes as u64, key: self.key.clone() })
    }

    fn snapshot_memory(&mut self, name: String) -> Result<KvSnapshot> {
        let state = self
            .ctx
            .state_seq_get(SEQ, LlamaStateSeqFlags::empty())
            .map_err(|e| InferenceError::Snapshot { path: PathBuf::from(format!("memory:{name}")), reason: e.to_string() })?;
        let snap = KvSnapshot { tokens: ids(&self.cached), bytes: state.byte_len() as u64, key: self.key.clone() };
        self.memory.insert(name, (state, self.cached.clone()));
        Ok(snap)
    }

    fn restore_memory(&mut self, name: &str) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: PathBuf::from(format!("memory:{name}")), reason };
        let Some((state, tokens)) = self.memory.get(name) else {
            return Err(fail("no snapshot of that name".into()));
        };
        let (state, tokens) = (state.clone(), tokens.clone());
        self.reset();
        if let Err(e) = self.ctx.state_seq_set(&state, SEQ) {
            self.reset();
            return Err(fail(format!("llama.cpp could not restore the state: {e}")));
        }
        if !self.cache_holds(tokens.len()) {
            self.reset();
            return Err(fail("the restored cache does not hold the saved positions".into()));
        }
        self.cached = tokens;
        self.last_logits = None;
        Ok(KvSnapshot { tokens: ids(&self.cached), bytes: state.byte_len() as u64, key: self.key.clone() })
    }
}
