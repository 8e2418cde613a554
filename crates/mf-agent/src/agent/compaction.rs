//! The compaction step of the loop (plan + apply through mf-forgetting, on
//! the model adapter of [`crate::compact`]) and its undo.

use mf_forgetting::{ForgettingError, Message};
use mf_inference::SnapshotSlot;

use super::{Agent, BEFORE_COMPACTION, Undone, UndoPoint, n32};
use crate::compact::{CompactionJob, SummaryPrompt};
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ExitReason, Gauge};

/// What one compaction step gave the loop.
pub(super) enum Compacted {
    /// The history after it, measured.
    Done(Vec<Message>, Gauge),
    /// The budget could not be restored: the loop ends with this reason.
    Exit(ExitReason),
}

impl Agent {
    /// One compaction: plan + apply through mf-forgetting, events out.
    pub(super) async fn compact(&mut self, history: &[Message], g: Gauge, round: u32, sink: &mut dyn EventSink) -> Result<Compacted, AgentError> {
        let t0 = std::time::Instant::now();
        // The cache as it is (the last round's prompt and reply): decoding the
        // new tool results first would cost their tokens for nothing when the
        // summary pass does not append to the live history.
        let kv = if self.backend.keeps_kv() {
            self.save_cache(SnapshotSlot::Memory(BEFORE_COMPACTION.into()), "before_compaction", round, sink).await
        } else {
            None
        };
        self.before_compaction = Some(UndoPoint { history: history.to_vec(), kv });
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<AgentEvent>();
        let job = CompactionJob {
            backend: self.backend.clone(),
            counter: self.counter.clone(),
            tools: self.specs.clone(),
            history: history.to_vec(),
            strategy: self.settings.strategy,
            budget: self.budget(),
            config: self.settings.plan.clone(),
            delta: self.settings.delta,
            summary_pass: self.settings.summary_pass,
            cancel: self.cancel.clone(),
            events: tx,
            round,
            tokens_before: g.prompt_tokens,
        };
        let fut = job.run();
        tokio::pin!(fut);
        let run = loop {
            tokio::select! {
                r = &mut fut => break r,
                Some(ev) = rx.recv() => sink.emit(&ev),
            }
        };
        while let Ok(ev) = rx.try_recv() {
            sink.emit(&ev);
        }
        let exhausted = |tokens: u32| ExitReason::ContextExhausted { tokens, threshold: g.threshold, messages: n32(history.len()) };
        let run = match run {
            Ok(r) => r,
            Err(message) => {
                sink.emit(&AgentEvent::CompactionFailed { round, message });
                return Ok(Compacted::Exit(exhausted(g.prompt_tokens)));
            }
        };
        for n in &run.notes {
            sink.emit(&AgentEvent::Error { message: n.clone() });
        }
        match run.result {
            Ok(c) => {
                let g2 = self.gauge(&c.messages).await?;
                let ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
                sink.emit(&AgentEvent::compaction_finished(round, g.prompt_tokens, g2.prompt_tokens, &c.report, run.summary_pass.map(SummaryPrompt::as_str), ms));
                sink.emit(&AgentEvent::Gauge { gauge: g2, forecast: self.forecast(&g2) });
                Ok(Compacted::Done(c.messages, g2))
            }
            Err(e) => {
                sink.emit(&AgentEvent::CompactionFailed { round, message: e.to_string() });
                Ok(Compacted::Exit(match e {
                    ForgettingError::BudgetNotRestored { tokens, threshold, messages } => {
                        ExitReason::ContextExhausted { tokens: n32(tokens), threshold: n32(threshold), messages: n32(messages) }
                    }
                    _ => exhausted(g.prompt_tokens),
                }))
            }
        }
    }

    /// Undoes the last compaction: gives back the history as it was before
    /// it and restores the KV cache saved just before it (exactly the tokens
    /// cached then: the last round's prompt and reply), so continuing from
    /// it decodes only what came after (the tool results of that round).
    /// `None` when there is nothing to undo; taking it clears it.
    ///
    /// # Errors
    /// None today: a cache that cannot be restored is reported in
    /// [`Undone::kv_error`] (the history is still given back).
    pub async fn undo_compaction(&mut self) -> Result<Option<Undone>, AgentError> {
        let Some(point) = self.before_compaction.take() else { return Ok(None) };
        let (kv, kv_error) = match point.kv {
            None => (None, Some("no KV snapshot was made before this compaction".to_owned())),
            Some(saved) => match self.backend.kv_restore(&SnapshotSlot::Memory(BEFORE_COMPACTION.into())).await {
                Ok(restored) if restored.tokens == saved.tokens => (Some(restored), None),
                Ok(restored) => (None, Some(format!("restored {} tokens, but {} were saved", restored.tokens.len(), saved.tokens.len()))),
                Err(e) => (None, Some(e.to_string())),
            },
        };
        Ok(Some(Undone { history: point.history, kv, kv_error }))
    }
}
