//! Branches: several prompts that share a prefix, answered side by side.
//!
//! The shared part (the trunk) stays in sequence 0. Each branch gets a
//! sequence of its own that starts as a copy of the trunk's first tokens
//! (`seq_cp` in the unified cache only tags the same cells: nothing is
//! decoded again), decodes only its own suffix, and then every branch
//! generates in lockstep, one token each per batch, each with its own
//! sampler. One batch of n tokens costs far less than n batches of one on a
//! CPU (the weights are read once), which is where the time goes for short
//! answers over a long shared context.
//!
//! The trunk is what the cache holds when that shares more with the prompts
//! than the first prompt does (the withholding test: the full context was
//! just answered, every trial departs from it at its withheld unit), else the
//! first prompt but its last token (the probes of one context). Branches are
//! forked in groups that fit the cache's cells; a prompt that does not fit
//! beside the trunk, and every prompt on a cache that cannot hold several
//! sequences (a sliding-window cache without `swa_full`), runs the plain path.

use std::time::Instant;

use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::{SEQ, Worker};
use crate::backend::CancelToken;
use crate::error::{InferenceError, Result};
use crate::llama::reply_text::{Next, ReplyText};
use crate::reply::assemble;
use crate::template::RenderedPrompt;
use crate::types::{Generation, KvStats, Sampling, StopReason, StreamEvent, Usage};

/// One prompt of a branched call.
pub(crate) struct BranchRequest {
    pub prompt: RenderedPrompt,
    pub sampling: Sampling,
}

/// Cells kept free per branch beyond its `max_tokens` (a thinking block
/// closed by force adds a few tokens).
const SPARE: usize = 8;

/// A branch while it generates.
struct Live<'p> {
    /// Index of its request.
    index: usize,
    seq: i32,
    /// Next position of its sequence.
    pos: usize,
    sampler: LlamaSampler,
    reply: ReplyText<'p>,
    /// Batch index of its current logits.
    logits: i32,
    stop: Option<StopReason>,
}

fn common(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn batch_err(e: impl std::fmt::Display) -> InferenceError {
    InferenceError::Decode(e.to_string())
}

fn no_emit(_: Vec<StreamEvent>) {}

impl Worker<'_> {
    /// Answers every request; the replies are in request order and equal,
    /// token for token, what [`generate`](Worker::generate) would sample for
    /// each prompt alone when batched decoding is exact (measured in the
    /// crate's `branches` tests).
    pub(super) fn generate_branches(&mut self, requests: &[BranchRequest], cancel: &CancelToken) -> Result<Vec<Generation>> {
        let n_ctx = self.ctx.n_ctx() as usize;
        let mut tokens = Vec::with_capacity(requests.len());
        for r in requests {
            let t = self.tokenize(&r.prompt.text);
            if t.is_empty() {
                return Err(InferenceError::InvalidRequest("the prompt is empty".into()));
            }
            let prompt_tokens = t.len() as u32;
            if t.len() + r.sampling.max_tokens as usize > n_ctx {
                return Err(InferenceError::PromptTooLong { prompt_tokens, reserve: r.sampling.max_tokens, context_size: n_ctx as u32 });
            }
            tokens.push(t);
        }
        if self.branches == 0 || requests.len() < 2 || tokens[0].len() < 2 {
            return requests.iter().map(|r| self.generate(&r.prompt, &r.sampling, None, None, cancel)).collect();
        }
        let mut out: Vec<Option<Generation>> = requests.iter().map(|_| None).collect();
        let t0 = Instant::now();

        // The trunk: the cache, or the first prompt but its last token.
        let fork = |t: &[LlamaToken], trunk: &[LlamaToken]| common(t, trunk).min(t.len() - 1);
        let shared = |trunk: &[LlamaToken]| tokens.iter().map(|t| fork(t, trunk)).sum::<usize>();
        let first = &tokens[0][..tokens[0].len() - 1];
        let mut first_stats = None;
        if self.cached.is_empty() || shared(&self.cached) < shared(first) {
            let mut stats = KvStats { prompt_tokens: tokens[0].len() as u32, ..KvStats::default() };
            let (keep, _) = self.prepare(first, &mut stats, cancel)?;
            if !self.decode(&first[keep..], Some(cancel))? {
                return Ok(requests.iter().map(|r| cancelled(&r.prompt, KvStats::default())).collect());
            }
            first_stats = Some(stats);
        }
        self.last_logits = None;
        let trunk_len = self.cached.len();
        let forks: Vec<usize> = tokens.iter().map(|t| fork(t, &self.cached)).collect();

        // Groups that fit the cells beside the trunk.
        let need = |i: usize| tokens[i].len() - forks[i] + requests[i].sampling.max_tokens as usize + SPARE;
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut alone = Vec::new();
        let mut used = trunk_len;
        for i in 0..requests.len() {
            if trunk_len + need(i) > n_ctx {
                alone.push(i);
                continue;
            }
            match groups.last_mut() {
                Some(g) if g.len() < self.branches && used + need(i) <= n_ctx => g.push(i),
                _ => {
                    groups.push(vec![i]);
                    used = trunk_len;
                }
            }
            used += need(i);
        }
        let prefill_before = t0.elapsed();
        for group in &groups {
            let stats = |i: usize| match (&first_stats, i) {
                (Some(s), 0) => KvStats { decoded: tokens[0].len() as u32 - s.reused, ..*s },
                _ => KvStats {
                    prompt_tokens: tokens[i].len() as u32,
                    reused: forks[i] as u32,
                    decoded: (tokens[i].len() - forks[i]) as u32,
                    ..KvStats::default()
                },
            };
            let done = self.run_group(group, requests, &tokens, &forks, cancel, prefill_before, &stats);
            // Whatever happened, only the trunk stays.
            for seq in 1..=group.len() as i32 {
                let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
            }
            self.last_logits = None;
            if !self.cache_holds(self.cached.len()) {
                self.reset();
            }
            for (i, g) in done? {
                out[i] = Some(g);
            }
        }
        for i in alone {
            out[i] = Some(self.generate(&requests[i].prompt, &requests[i].sampling, None, None, cancel)?);
        }
        Ok(out.into_iter().zip(requests).map(|(g, r)| g.unwrap_or_else(|| cancelled(&r.prompt, KvStats::default()))).collect())
    }

    /// Forks, prefills and generates one group; the caller removes its sequences.
    #[allow(clippy::too_many_arguments)]
    fn run_group(
        &mut self,
        group: &[usize],
        requests: &[BranchRequest],
        tokens: &[Vec<LlamaToken>],
        forks: &[usize],
        cancel: &CancelToken,
        trunk_time: std::time::Duration,
        stats: &dyn Fn(usize) -> KvStats,
    ) -> Result<Vec<(usize, Generation)>> {
        let t0 = Instant::now();
        let seq_of = |slot: usize| slot as i32 + 1;
        for (slot, &i) in group.iter().enumerate() {
            if forks[i] > 0 {
                self.ctx
                    .kv_cache_seq_cp(SEQ, seq_of(slot), None, Some(forks[i] as u32))
                    .map_err(|e| InferenceError::Decode(format!("cannot fork a branch: {e}")))?;
            }
        }
        // Every suffix but its last token, packed into batches without logits…
        let body: Vec<(LlamaToken, usize, i32)> =
            group.iter().enumerate().flat_map(|(slot, &i)| (forks[i]..tokens[i].len() - 1).map(move |p| (tokens[i][p], p, seq_of(slot)))).collect();
        for chunk in body.chunks(self.n_batch) {
            if cancel.is_cancelled() {
                return Ok(group.iter().map(|&i| (i, cancelled(&requests[i].prompt, stats(i)))).collect());
            }
            let mut batch = LlamaBatch::new(chunk.len(), 1);
            for &(t, p, seq) in chunk {
                batch.add(t, p as i32, &[seq], false).map_err(batch_err)?;
            }
            self.ctx.decode(&mut batch).map_err(batch_err)?;
        }
        // …then every last token in one batch, with logits.
        let mut batch = LlamaBatch::new(group.len(), 1);
        let mut live = Vec::with_capacity(group.len());
        for (slot, &i) in group.iter().enumerate() {
            let last = tokens[i].len() - 1;
            batch.add(tokens[i][last], last as i32, &[seq_of(slot)], true).map_err(batch_err)?;
            let r = &requests[i];
            live.push(Live {
                index: i,
                seq: seq_of(slot),
                pos: last + 1,
                sampler: self.sampler(&r.sampling, None),
                reply: ReplyText::new(&r.prompt, &r.sampling),
                logits: slot as i32,
                stop: None,
            });
        }
        self.ctx.decode(&mut batch).map_err(batch_err)?;
        let prefill_ms = (trunk_time + t0.elapsed()).as_millis() as u64;

        let t1 = Instant::now();
        let n_ctx = self.ctx.n_ctx() as usize;
        loop {
            let mut batch = LlamaBatch::new(live.len() * (SPARE + 1), 1);
            for b in live.iter_mut().filter(|b| b.stop.is_none()) {
                if cancel.is_cancelled() {
                    b.stop = Some(StopReason::Cancelled);
                    continue;
                }
                if b.reply.generated >= requests[b.index].sampling.max_tokens {
                    b.stop = Some(StopReason::MaxTokens);
                    continue;
                }
                if b.pos >= n_ctx {
                    b.stop = Some(StopReason::ContextFull);
                    continue;
                }
                let token = b.sampler.sample(&self.ctx, b.logits);
                if self.model.vocab().is_eog(token) {
                    b.stop = Some(StopReason::EndOfTurn);
                    continue;
                }
                match b.reply.push(self.model, token, &mut no_emit) {
                    Next::Stop(reason) => b.stop = Some(reason),
                    Next::Decode(next) => {
                        for (j, t) in next.iter().enumerate() {
                            batch.add(*t, b.pos as i32, &[b.seq], j + 1 == next.len()).map_err(batch_err)?;
                            b.pos += 1;
                        }
                        b.logits = batch.n_tokens() - 1;
                    }
                }
            }
            if batch.n_tokens() == 0 {
                break;
            }
            self.ctx.decode(&mut batch).map_err(batch_err)?;
        }
        let decode_ms = t1.elapsed().as_millis() as u64;
        Ok(live
            .into_iter()
            .map(|b| {
                let r = &requests[b.index];
                let kv = KvStats { prefill_ms, decode_ms, ..stats(b.index) };
                let usage = Usage { kv, completion_tokens: b.reply.generated, thinking_tokens: b.reply.thinking_tokens };
                let raw = b.reply.finish(&mut no_emit);
                let stop = b.stop.unwrap_or(StopReason::MaxTokens);
                (b.index, assemble(raw, r.prompt.thinking_open, r.prompt.tool_format, Vec::new(), None, stop, usage))
            })
            .collect())
    }
}

fn cancelled(prompt: &RenderedPrompt, kv: KvStats) -> Generation {
    assemble(String::new(), prompt.thinking_open, prompt.tool_format, Vec::new(), None, StopReason::Cancelled, Usage { kv, ..Usage::default() })
}
