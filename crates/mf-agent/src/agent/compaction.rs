//! The compaction step of the loop (plan + apply through mf-forgetting, on
//! the model adapter of [`crate::compact`]) and its undo.

use mf_forgetting::{Budget, CompactionReport, ForgettingError, Message, StrategyKind};
use mf_inference::SnapshotSlot;

use super::{Agent, BEFORE_COMPACTION, UndoPoint, Undone, n32};
use crate::compact::{CompactionJob, SummaryPrompt};
use crate::error::AgentError;
use crate::events::{AgentEvent, ByHand, EventSink, ExitReason, Gauge};

/// What one compaction is asked to do: the loop's own runs the settings'
/// strategy and recent zone; one by hand may name another strategy, and
/// *summarise up to here* its own recent zone.
pub(super) struct Ask {
    /// The strategy.
    pub strategy: StrategyKind,
    /// Messages at the end kept verbatim (widened to keep chains whole).
    pub recent: usize,
    /// Set when the user asked for it.
    pub by_hand: Option<ByHand>,
}

/// What one compaction step gave the loop.
pub(super) enum Compacted {
    /// The history after it, measured, and its target in prompt tokens
    /// (none when it was refused: the history is kept as it was).
    Done(Vec<Message>, Gauge, Option<u32>),
    /// The budget could not be restored: the loop ends with this reason.
    Exit(ExitReason),
}

/// The budget the plan sees. The loop triggers on the exact prompt, which
/// also holds tokens outside the messages' own counts (the tool schemas, the
/// template's glue: about 250 tokens with Gemma 3's template and three
/// tools); the plan sums the messages. Those tokens come off the context
/// (scaled by the ratio), so the plan's threshold is the loop's threshold
/// less them, and a history the loop finds over it the plan finds over it
/// too (it found 1,202 < 1,392 where the prompt was 1,500, and masked nothing).
fn plan_budget(b: Budget, g: &Gauge) -> Budget {
    b.less_outside(g.outside_messages())
}

/// The compaction's target in prompt tokens, as the loop counts them: the
/// threshold; or `C − G` when the plan had to relax it (the pinned and
/// recent zones leave no room under the threshold: the report is then not
/// within its budget, yet the compaction was applied).
fn target(report: &CompactionReport, threshold: u32, room: u32) -> u32 {
    if report.within_budget { threshold } else { room }
}

/// The note a finished compaction carries (and the trace shows): its target
/// and the prompt tokens after it, or that it was refused.
fn target_note(report: &CompactionReport, threshold: u32, room: u32, after: u32) -> String {
    if report.kept_original.is_some() || report.declined.is_some() {
        return format!("refused: the history is kept as it was ({after} tokens)");
    }
    let t = target(report, threshold, room);
    let which = if report.within_budget { "the threshold" } else { "C − G, relaxed from the threshold" };
    let over = if after > t { ", over it" } else { "" };
    format!("target {t} tokens ({which}; the plan's own count: {}), {after} after{over}", report.threshold)
}

impl Agent {
    /// The loop's own compaction: the settings' strategy and recent zone.
    pub(super) fn ask(&self) -> Ask {
        Ask { strategy: self.settings.strategy, recent: self.settings.recent, by_hand: None }
    }

    /// One compaction: plan + apply through mf-forgetting, events out.
    #[tracing::instrument(name = "compaction", skip_all, fields(round, strategy = ask.strategy.as_str(), prompt_tokens = g.prompt_tokens, messages = history.len()))]
    pub(super) async fn compact(&mut self, history: &[Message], g: Gauge, round: u32, ask: Ask, sink: &mut dyn EventSink) -> Result<Compacted, AgentError> {
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
        let budget = Budget { recent: ask.recent, ..plan_budget(self.budget(), &g) };
        let room = self.backend.context_size().saturating_sub(self.settings.reserve);
        // The plan can relax its target up to its own C − G (a window whose
        // pinned and recent zones leave no room under the threshold): that
        // must never be more than the loop's, or the next round would not fit.
        debug_assert!(
            budget.context.saturating_sub(budget.reserve) <= room as usize && budget.threshold() <= room as usize,
            "a plan budget over C − G = {room}: {budget:?}"
        );
        let job = CompactionJob {
            backend: self.backend.clone(),
            counter: self.counter.clone(),
            tools: self.specs.clone(),
            history: history.to_vec(),
            strategy: ask.strategy,
            budget,
            config: self.settings.plan.clone(),
            delta: self.settings.delta,
            summary_pass: self.settings.summary_pass,
            cancel: self.cancel.clone(),
            events: tx,
            round,
            tokens_before: g.prompt_tokens,
            by_hand: ask.by_hand,
            summariser: self.summariser.clone(),
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
            Ok(mut c) => {
                let g2 = self.gauge(&c.messages).await?;
                let ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
                let refused = c.report.kept_original.is_some() || c.report.declined.is_some();
                let goal = (!refused).then(|| target(&c.report, g.threshold, room));
                c.report.notes.push(target_note(&c.report, g.threshold, room, g2.prompt_tokens));
                sink.emit(&AgentEvent::compaction_finished(
                    round,
                    g.prompt_tokens,
                    g2.prompt_tokens,
                    &c.report,
                    run.summary_pass.map(SummaryPrompt::as_str),
                    run.summary_model.as_deref(),
                    ms,
                ));
                sink.emit(&AgentEvent::Gauge { gauge: g2, forecast: self.forecast(&g2) });
                Ok(Compacted::Done(c.messages, g2, goal))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn gauge(pinned: u32, compressible: u32, recent: u32, prompt_tokens: u32) -> Gauge {
        Gauge { pinned, compressible, recent, free: 0, threshold: 1392, prompt_tokens, context: 2048, reserve: 192, messages: 6 }
    }

    #[test]
    fn tokens_outside_the_messages_come_off_the_plans_threshold() {
        let b = Budget { context: 2048, reserve: 192, ratio: 0.75, recent: 2 };
        // Gemma 3's first trigger: the messages sum to 1,202, the prompt is 1,500.
        let p = plan_budget(b, &gauge(494, 357, 351, 1500));
        assert!(p.threshold() <= b.threshold() - 298 && p.threshold() >= b.threshold() - 300, "{}", p.threshold());
        assert!(1202 > p.threshold(), "the plan must find the history over its threshold");
        // Messages that count more than the prompt (a template that adds nothing): unchanged.
        assert_eq!(plan_budget(b, &gauge(799, 478, 468, 1620)), b);
    }
}
