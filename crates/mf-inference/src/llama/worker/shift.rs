//! KV shift on compaction: the cached tail that a new prompt repeats after
//! a replaced middle is moved to its new position instead of decoded again.

use std::collections::HashMap;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::{LlamaModel, RopeType};
use llama_cpp_2::token::LlamaToken;

use super::{SEQ, Worker};
use crate::backend::CancelToken;
use crate::error::{InferenceError, Result};

/// Where a shifted tail waits while the gap before it is decoded: llama.cpp
/// only appends to a sequence (a batch must start at its last position + 1),
/// so the tail leaves sequence 0 for that time.
pub(super) const SCRATCH: i32 = 1;
/// Cached tokens worth moving rather than decoding again.
pub(super) const MIN_SHIFT: usize = 16;
/// Tokens of the n-grams that anchor the search for a shiftable block.
pub(super) const GRAM: usize = 8;

/// Whether llama.cpp's memory for this model and context can shift positions
/// (`llama_memory_can_shift`). llama-cpp-2 0.1.160 wraps neither that call nor
/// hands out the context pointer it needs, so this asks the same questions of
/// the model: a recurrent or hybrid memory, a multi-position RoPE
/// (`n_pos_per_embd > 1`) or Step35's per-layer RoPE cannot shift, and a
/// sliding-window cache only when it is as large as the full one (`swa_full`).
/// Shifting where llama.cpp cannot aborts the process, so this errs towards no.
pub(super) fn memory_can_shift(model: &LlamaModel, sliding_window: u64, swa_full: bool) -> bool {
    let arch = model.meta_val_str("general.architecture").unwrap_or_default();
    !model.is_recurrent()
        && !model.is_hybrid()
        && !matches!(model.rope_type(), Some(RopeType::MRope | RopeType::IMRope | RopeType::Vision))
        && arch != "step35"
        && (sliding_window == 0 || swa_full)
}

/// The longest block of `cached[p..]` that `prompt` repeats at or after `p`,
/// as `(cached start, prompt start, length)`: after a compaction, the recent
/// tail that now follows a summary. Anchored on `GRAM`-token n-grams; an
/// n-gram seen more than 64 times in the cache (a run of one token) anchors
/// nothing, which bounds the search on repetitive text.
pub(super) fn find_block(cached: &[LlamaToken], prompt: &[LlamaToken], p: usize) -> Option<(usize, usize, usize)> {
    if cached.len() < p + GRAM || prompt.len() < p + GRAM {
        return None;
    }
    let mut index: HashMap<&[LlamaToken], Vec<usize>> = HashMap::new();
    for a in p..=cached.len() - GRAM {
        index.entry(&cached[a..a + GRAM]).or_default().push(a);
    }
    let mut best: Option<(usize, usize, usize)> = None;
    for c in p..=prompt.len() - GRAM {
        let Some(starts) = index.get(&prompt[c..c + GRAM]) else { continue };
        if starts.len() > 64 {
            continue;
        }
        for &a in starts {
            // Only maximal blocks: one that extends to the left was measured from its start.
            if a > p && c > p && cached[a - 1] == prompt[c - 1] {
                continue;
            }
            let k = cached[a..].iter().zip(&prompt[c..]).take_while(|(x, y)| x == y).count();
            if best.is_none_or(|(_, _, b)| k > b) {
                best = Some((a, c, k));
            }
        }
    }
    best
}

impl Worker<'_> {
    /// Keeps `prompt[..p]`, drops the cached tokens `[p, a)` and those after
    /// `a + k`, moves the cached block `[a, a + k)` to positions `[c, c + k)`
    /// and decodes `prompt[p..c]` in the gap. Returns `false` when cancelled
    /// while decoding the gap (the cache then holds a prefix of the prompt,
    /// the tail dropped). On an error the caller clears the cache.
    pub(super) fn shift_tail(&mut self, prompt: &[LlamaToken], p: usize, a: usize, c: usize, k: usize, cancel: &CancelToken) -> Result<bool> {
        let pos = |x: usize| u32::try_from(x).map_err(|_| InferenceError::Decode("a position beyond u32".into()));
        let fail = |what: &str| InferenceError::Decode(format!("KV shift: {what}"));
        let rm = |ctx: &mut LlamaContext<'_>, seq: i32, p0: Option<u32>| ctx.clear_kv_cache_seq(Some(seq as u32), p0, None).unwrap_or(false);
        self.last_logits = None;
        if !rm(&mut self.ctx, SEQ, Some(pos(a + k)?)) {
            return Err(fail("the memory refused to drop the tokens after the block"));
        }
        self.ctx.kv_cache_seq_cp(SEQ, SCRATCH, Some(pos(a)?), Some(pos(a + k)?)).map_err(|e| fail(&e.to_string()))?;
        if !rm(&mut self.ctx, SEQ, Some(pos(p)?)) {
            return Err(fail("the memory refused to drop the replaced range"));
        }
        self.cached.truncate(p);
        if c != a {
            let delta = i32::try_from(c as i64 - a as i64).map_err(|_| fail("a shift beyond i32"))?;
            self.ctx.kv_cache_seq_add(SCRATCH, Some(pos(a)?), Some(pos(a + k)?), delta).map_err(|e| fail(&e.to_string()))?;
        }
        let parked = (self.ctx.kv_cache_seq_pos_min(SCRATCH), self.ctx.kv_cache_seq_pos_max(SCRATCH));
        if !self.cache_holds(p) || parked != (c as i32, (c + k) as i32 - 1) {
            return Err(fail(&format!("after the move the cache holds {parked:?} for the tail, expected [{c}, {})", c + k)));
        }
        let finished = self.decode(&prompt[p..c], Some(cancel))?;
        if !finished {
            rm(&mut self.ctx, SCRATCH, None);
            return Ok(false);
        }
        self.ctx.kv_cache_seq_cp(SCRATCH, SEQ, Some(pos(c)?), Some(pos(c + k)?)).map_err(|e| fail(&e.to_string()))?;
        rm(&mut self.ctx, SCRATCH, None);
        self.cached.extend_from_slice(&prompt[c..c + k]);
        self.last_logits = None;
        if !self.cache_holds(c + k) || self.ctx.kv_cache_seq_pos_max(SCRATCH) >= 0 {
            return Err(fail("the tail did not rejoin the sequence"));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(v: impl IntoIterator<Item = i32>) -> Vec<LlamaToken> {
        v.into_iter().map(LlamaToken).collect()
    }

    /// head 0..20, middle 100..300, tail 500..560, then a reply; the new
    /// prompt is head + summary 900..930 + tail + generation prompt.
    #[test]
    fn finds_the_tail_behind_a_summary() {
        let cached = toks((0..20).chain(100..300).chain(500..560).chain(700..705));
        let prompt = toks((0..20).chain(900..930).chain(500..560).chain([7, 8]));
        assert_eq!(find_block(&cached, &prompt, 20), Some((220, 50, 60)));
    }

    #[test]
    fn nothing_to_shift_without_a_shared_block() {
        let cached = toks((0..20).chain(100..300));
        let prompt = toks((0..20).chain(900..930));
        assert_eq!(find_block(&cached, &prompt, 20), None);
        // A shared run shorter than the anchor is no block either.
        let prompt = toks((0..20).chain(100..105).chain(900..930));
        assert_eq!(find_block(&cached, &prompt, 20), None);
    }

    /// Of two shared blocks the longer wins, and a block is measured from its
    /// own start (not from an anchor inside it).
    #[test]
    fn the_longest_block_wins() {
        let cached = toks((0..10).chain(100..130).chain(200..210).chain(300..380));
        let prompt = toks((0..10).chain(100..130).chain(50..60).chain(300..380));
        // The prefix covers 0..40 of both; after it, 300..380 is the longest.
        assert_eq!(find_block(&cached, &prompt, 40), Some((50, 50, 80)));
    }

    /// A run of one repeated token anchors nothing (bounded search).
    #[test]
    fn repetitive_text_is_bounded() {
        let cached = toks(std::iter::repeat_n(5, 2000));
        let prompt = toks(std::iter::repeat_n(5, 2000));
        assert_eq!(find_block(&cached, &prompt, 10), None);
    }
}
