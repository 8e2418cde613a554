//! Compaction in the loop: the one model adapter's [`crate::model::compact`]
//! (`mf_forgetting::{plan, apply}` with the model behind its traits) run on a
//! blocking thread, its generations reported as `kv` events and its plan as
//! `compaction_started`.
//!
//! The adapter itself (counting, the summary pass, the withholding test)
//! lives in [`crate::model`], where the benchmark uses it too; its names are
//! re-exported here for the loop's callers.

use std::sync::Arc;

use mf_forgetting::{Budget, Message, PlanConfig, StrategyKind};
use mf_inference::{Backend, CancelToken, ToolSpec};
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedSender;

use crate::events::AgentEvent;
pub use crate::model::{CompactionRun, DeltaSource, ModelCounter, SummaryPass, SummaryPrompt, chat_history, checkable_terms, from_chat, to_chat};
use crate::model::{CompactionSpec, ModelCalls, PROBE_MAX_TOKENS};

/// Everything one compaction needs.
pub struct CompactionJob {
    /// The model.
    pub backend: Arc<dyn Backend>,
    /// Token counts (shared with the loop's gauge).
    pub counter: Arc<ModelCounter>,
    /// Tools offered (the live prompt of the summary pass carries them).
    pub tools: Vec<ToolSpec>,
    /// The history.
    pub history: Vec<Message>,
    /// The strategy.
    pub strategy: StrategyKind,
    /// The budget.
    pub budget: Budget,
    /// Plan settings.
    pub config: PlanConfig,
    /// v2.1's ranking.
    pub delta: DeltaSource,
    /// Where the summary pass runs when the live history does not fit.
    pub summary_pass: SummaryPass,
    /// Cancels generations.
    pub cancel: CancelToken,
    /// Events of the summary pass and probes (KV figures, the plan).
    pub events: UnboundedSender<AgentEvent>,
    /// The round.
    pub round: u32,
    /// Exact prompt tokens before (for the started event).
    pub tokens_before: u32,
    /// Set when the user asked for this compaction (for the started event).
    pub by_hand: Option<crate::events::ByHand>,
    /// Another engine or model that writes the summaries (none: `backend`).
    pub summariser: Option<Arc<dyn Backend>>,
}

impl CompactionJob {
    /// Plans and applies, on a blocking thread. Emits `compaction_started`
    /// (with the plan) through `events` between the two steps.
    ///
    /// # Errors
    /// Only when the blocking task itself dies (a panic in a dependency).
    pub async fn run(self) -> Result<CompactionRun, String> {
        let handle = Handle::current();
        tokio::task::spawn_blocking(move || self.run_blocking(&handle)).await.map_err(|e| format!("compaction task failed: {e}"))
    }

    fn run_blocking(self, handle: &Handle) -> CompactionRun {
        let events = self.events.clone();
        let round = self.round;
        let on_call = move |purpose, g: &mf_inference::Generation, _wall: std::time::Duration| {
            let _ = events.send(AgentEvent::Kv { round, purpose, stats: g.usage.kv.into(), completion_tokens: g.usage.completion_tokens });
        };
        let model = ModelCalls { handle, backend: self.backend.as_ref(), cancel: &self.cancel, on_call: &on_call, branched: false };
        let summariser = self.summariser.as_deref().map(|backend| ModelCalls { backend, ..model });
        let spec = CompactionSpec {
            strategy: self.strategy,
            budget: self.budget,
            config: self.config,
            delta: self.delta,
            summary_pass: self.summary_pass,
            tools: self.tools,
            probe_max_tokens: PROBE_MAX_TOKENS,
        };
        let (tx, tokens_before, by_hand) = (self.events.clone(), self.tokens_before, self.by_hand);
        crate::model::compact(model, summariser, &self.counter, &self.history, &spec, &mut |plan| {
            let _ = tx.send(AgentEvent::compaction_started(round, tokens_before, plan, by_hand.clone()));
        })
    }
}
