//! Scoring: the log-probability of given continuations, teacher-forced
//! after a prompt.
//!
//! The prompt but its last token takes the cache like any generation (its
//! common prefix with what is cached is reused, the rest decoded). The
//! prompt's last token and the continuation but its last token are then
//! decoded as one batch with logits at every position: row `i` gives the
//! probability of continuation token `i`. The continuation's last token
//! predicts nothing we need, so it is never decoded. The next continuation
//! of the same prompt trims the cache back to the prompt but its last token:
//! one token of the prompt again, never the whole prompt.
//!
//! Why the last prompt token always goes with the continuation: llama.cpp's
//! CPU kernels compute a position's logits slightly differently depending on
//! how many tokens share its batch (about 1e-2 nats per token on the test
//! models between a one-token batch and a long one). Keeping the rows that
//! are scored in one batch of the same shape, whatever the cache held, makes
//! a warm cache score as a cold one does up to the keys and values of the
//! prefix, which were computed in batches of their own.
//!
//! A continuation is tokenised on its own (no BOS, special tokens parsed as
//! text) and appended to the prompt's tokens, the usual way log-likelihood
//! evaluation joins a context and a continuation: the tokens scored are the
//! continuation's own, whatever the tokenizer would merge across the seam.

use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use super::{SEQ, Worker};
use crate::backend::CancelToken;
use crate::error::{InferenceError, Result};
use crate::template::RenderedPrompt;
use crate::types::{KvStats, Scored, TokenLogprob};

/// `ln p(target)` and the best `ln p` of a logits row, by a log-sum-exp in f64.
pub(super) fn logprob_of(logits: &[f32], target: LlamaToken) -> (f64, f64) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max + logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln();
    let t = usize::try_from(target.0).ok().and_then(|i| logits.get(i)).copied().unwrap_or(f32::NEG_INFINITY) as f64;
    (t - lse, max - lse)
}

impl Worker<'_> {
    /// The tokens of a continuation and each one's byte offset in it.
    fn continuation_tokens(&self, text: &str) -> (Vec<LlamaToken>, Vec<(String, usize)>) {
        let vocab = self.model.vocab();
        let tokens = vocab.tokenize(text.as_bytes(), false, false);
        let texts: Vec<String> = tokens.iter().map(|&t| String::from_utf8_lossy(&vocab.token_to_piece(t, false, None)).into_owned()).collect();
        // A tokenizer that adds a leading space (SentencePiece's prefix)
        // makes the pieces one byte longer than the text: offsets are the text's.
        let joined: usize = texts.iter().map(String::len).sum();
        let lead = usize::from(joined > text.len() && texts.first().is_some_and(|p| p.starts_with(' ')) && !text.starts_with(' '));
        let mut at: usize = 0;
        let pieces = texts
            .into_iter()
            .map(|piece| {
                let start = at.saturating_sub(lead).min(text.len());
                at += piece.len();
                (piece, start)
            })
            .collect();
        (tokens, pieces)
    }

    /// Scores every continuation after `prompt`, in order.
    pub(super) fn score(&mut self, prompt: &RenderedPrompt, continuations: &[String], cancel: &CancelToken) -> Result<Vec<Scored>> {
        let ptoks = self.tokenize(&prompt.text);
        if ptoks.is_empty() {
            return Err(InferenceError::InvalidRequest("the prompt is empty".into()));
        }
        let n_ctx = self.ctx.n_ctx() as usize;
        let prompt_tokens = ptoks.len() as u32;
        let mut out = Vec::with_capacity(continuations.len());
        for text in continuations {
            let (ctoks, pieces) = self.continuation_tokens(text);
            if ptoks.len() + ctoks.len() > n_ctx {
                return Err(InferenceError::PromptTooLong { prompt_tokens, reserve: ctoks.len() as u32, context_size: n_ctx as u32 });
            }
            if ctoks.is_empty() {
                out.push(Scored { tokens: Vec::new(), prompt_tokens, decoded: 0 });
                continue;
            }
            let mut stats = KvStats { prompt_tokens, ..KvStats::default() };
            let (keep, gap) = self.prepare(&ptoks, &mut stats, cancel)?;
            let p = ptoks.len();
            let mut lps = Vec::with_capacity(ctoks.len());
            let decoded = if keep == p {
                // The cache holds exactly the prompt with its last logits.
                let Some(idx) = self.last_logits else {
                    return Err(InferenceError::Decode("no logits after the prompt".into()));
                };
                lps.push(logprob_of(self.ctx.get_logits_ith(idx), ctoks[0]));
                self.decode_scoring(&ctoks[..ctoks.len() - 1], &ctoks[1..], &mut lps, cancel)?;
                ctoks.len() - 1
            } else {
                // The prompt but its last token; then that token and the
                // continuation in one batch, logits at every position. A cold
                // and a warm cache thus compute the continuation's rows in
                // the same batch.
                let body = &ptoks[keep..p - 1];
                if !self.decode(body, Some(cancel))? {
                    return Err(InferenceError::InvalidRequest("scoring cancelled".into()));
                }
                if self.checkpoint.is_some() && !body.is_empty() {
                    // As for a generation: a checkpoint just before the
                    // prompt's last token, where the next continuation departs.
                    self.save_checkpoint();
                }
                let mut inputs = vec![ptoks[p - 1]];
                inputs.extend_from_slice(&ctoks[..ctoks.len() - 1]);
                self.decode_scoring(&inputs, &ctoks, &mut lps, cancel)?;
                body.len() + inputs.len()
            };
            let tokens =
                lps.into_iter().zip(pieces).map(|((logprob, top), (text, start))| TokenLogprob { text, start, logprob, top_logprob: Some(top) }).collect();
            out.push(Scored { tokens, prompt_tokens, decoded: (gap + decoded) as u32 });
        }
        Ok(out)
    }

    /// Decodes `inputs` at the end of the cache with logits at every
    /// position, pushing the log-probability of `targets[i]` from row `i`.
    fn decode_scoring(&mut self, inputs: &[LlamaToken], targets: &[LlamaToken], lps: &mut Vec<(f64, f64)>, cancel: &CancelToken) -> Result<()> {
        let mut done = 0;
        while done < inputs.len() {
            if cancel.is_cancelled() {
                return Err(InferenceError::InvalidRequest("scoring cancelled".into()));
            }
            let start = self.cached.len();
            let n = (inputs.len() - done).min(self.n_batch);
            let chunk = &inputs[done..done + n];
            let mut batch = LlamaBatch::new(n, 1);
            for (i, t) in chunk.iter().enumerate() {
                batch.add(*t, (start + i) as i32, &[SEQ], true).map_err(|e| InferenceError::Decode(e.to_string()))?;
            }
            if let Err(e) = self.ctx.decode(&mut batch) {
                self.reset();
                return Err(InferenceError::Decode(e.to_string()));
            }
            self.cached.extend_from_slice(chunk);
            self.last_logits = Some(n as i32 - 1);
            for i in 0..n {
                lps.push(logprob_of(self.ctx.get_logits_ith(i as i32), targets[done + i]));
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprob_is_a_log_softmax() {
        let (lp, top) = logprob_of(&[0.0, 0.0], LlamaToken(1));
        assert!((lp - 0.5f64.ln()).abs() < 1e-12 && (top - lp).abs() < 1e-12);
        let (lp, top) = logprob_of(&[1000.0, 0.0, 1000.0], LlamaToken(1));
        assert!((lp - (-1000.0 - 2f64.ln())).abs() < 1e-9, "{lp}");
        assert!((top + 2f64.ln()).abs() < 1e-12);
        // A token outside the row has no probability.
        assert_eq!(logprob_of(&[0.0], LlamaToken(7)).0, f64::NEG_INFINITY);
    }
}
