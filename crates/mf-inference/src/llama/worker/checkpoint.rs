//! Context checkpoints for sliding-window models without `swa_full`: the
//! window's state saved at positions, so a trim resumes from the nearest one.

use llama_cpp_2::{LlamaStateSeqFlags, SeqState};

use super::{SEQ, Worker};

/// Where checkpoints are taken and how many are kept.
#[derive(Debug, Clone, Copy)]
pub(super) struct CheckpointPolicy {
    pub(super) every: usize,
    pub(super) keep: usize,
}

/// The sliding-window state of the sequence when it held exactly `pos` tokens.
pub(super) struct Checkpoint {
    pub(super) pos: usize,
    pub(super) state: SeqState,
}

impl Worker<'_> {
    /// Saves the sliding-window state now (the sequence holds `cached`).
    /// The lowest two checkpoints are kept longest: a compaction cuts just
    /// after the pinned head, near the start; the rest are the newest.
    pub(super) fn save_checkpoint(&mut self) {
        let Some(policy) = self.checkpoint else { return };
        let pos = self.cached.len();
        if pos == 0 || self.checkpoints.last().is_some_and(|c| c.pos >= pos) {
            return;
        }
        match self.ctx.state_seq_get(SEQ, LlamaStateSeqFlags::PARTIAL_ONLY) {
            Ok(state) => self.checkpoints.push(Checkpoint { pos, state }),
            Err(e) => tracing::warn!(pos, "context checkpoint not saved: {e}"),
        }
        while self.checkpoints.len() > policy.keep.max(1) {
            let drop = if self.checkpoints.len() > 2 { 2 } else { 0 };
            self.checkpoints.remove(drop.min(self.checkpoints.len() - 1));
        }
    }

    /// Cuts the sequence to the checkpoint nearest at or before `p`: the
    /// full-attention layers are trimmed, the window's state is put back as
    /// it was. Returns the position resumed from, `None` when no checkpoint
    /// fits or llama.cpp refused (the caller clears).
    pub(super) fn restore_checkpoint(&mut self, p: usize) -> Option<usize> {
        self.checkpoints.retain(|c| c.pos <= p);
        let cp = self.checkpoints.last()?;
        let (q, state) = (cp.pos, cp.state.clone());
        let removed = self.ctx.clear_kv_cache_seq(Some(SEQ as u32), Some(q as u32), None).unwrap_or(false);
        if !removed {
            tracing::warn!(q, "the memory refused to cut at a checkpoint");
            return None;
        }
        if let Err(e) = self.ctx.state_seq_set(&state, SEQ) {
            tracing::warn!(q, "context checkpoint not restored: {e}");
            return None;
        }
        let held = (self.ctx.kv_cache_seq_pos_min(SEQ), self.ctx.kv_cache_seq_pos_max(SEQ));
        if held.1 != q as i32 - 1 {
            tracing::warn!(q, ?held, "the restored checkpoint does not end where it was taken");
            return None;
        }
        self.cached.truncate(q);
        self.last_logits = None;
        Some(q)
    }
}
