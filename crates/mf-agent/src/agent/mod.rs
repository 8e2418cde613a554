//! The agent: one investigation's loop over a backend, tools and an approver.
//!
//! Split by what happens to an investigation, one file each:
//! - this file: the settings, the agent and what it measures (gauge, forecast, generation);
//! - [`run`](self::run): the loop itself, round by round;
//! - [`dispatch`]: one reply's tool calls (validation, approval, execution, results);
//! - [`compaction`]: the compaction step and its undo;
//! - [`by_hand`]: what the user does to the history between rounds (a
//!   compaction asked for, a pin);
//! - [`exits`]: the closing answer after a dynamic exit;
//! - [`resume_point`]: the KV file saved for a resume, and loaded on one.

mod by_hand;
mod compaction;
mod dispatch;
mod exits;
mod resume_point;
mod run;

use std::sync::Arc;

use mf_forgetting::{Budget, ExitConfig, Message, PlanConfig, StrategyKind};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, KvSnapshot, Sampling, StreamEvent, ToolSpec};

pub use by_hand::{HandCompaction, keep_pins, pin};
pub use dispatch::repair_arguments;
pub use exits::{ClosingPrompt, closing_request, fit_closing};

use crate::compact::{DeltaSource, ModelCounter, SummaryPass, chat_history};
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ExitReason, Forecast, Gauge, KvMiss, Purpose};
use crate::tools::{Approver, ToolRunner};

/// Settings of one investigation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AgentSettings {
    /// The system prompt.
    pub system_prompt: String,
    /// Compaction strategy: none, baseline, masking, v1, v2, v2.1.
    pub strategy: StrategyKind,
    /// Generation reserve `G` (also the most tokens one reply may take).
    pub reserve: u32,
    /// Trigger ratio of `C − G`.
    pub ratio: f64,
    /// Recent messages kept verbatim.
    pub recent: usize,
    /// Dynamic exits (consecutive errors, exhaustion, compaction-loop guard).
    pub exit: ExitConfig,
    /// Optional cap on rounds (off by default: exits are dynamic).
    pub safety_cap: Option<u32>,
    /// Tool arguments longer than this (bytes of JSON) are refused.
    pub max_argument_bytes: usize,
    /// Tool results longer than this (characters) are cut, with a note.
    pub max_result_chars: usize,
    /// Sampling of the investigation replies (max_tokens is set from `reserve`).
    pub sampling: Sampling,
    /// Plan settings of mf-forgetting (γ, λ, character cuts, summary sampling).
    pub plan: PlanConfig,
    /// How v2.1 ranks in the loop.
    pub delta: DeltaSource,
    /// Where the summary pass runs when the live history plus the request
    /// does not fit: after the cached pinned prefix (default), or standalone
    /// (the old way, kept as the arm to measure against).
    #[serde(default)]
    pub summary_pass: SummaryPass,
}

/// The default system prompt (`prompts/system.md`).
pub const SYSTEM_PROMPT: &str = include_str!("prompts/system.md");

/// Rounds of prompt growth the compaction forecast averages over.
pub const FORECAST_WINDOW: usize = 3;

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            system_prompt: SYSTEM_PROMPT.trim_end().into(),
            strategy: StrategyKind::V2,
            reserve: 512,
            ratio: 0.75,
            recent: 2,
            exit: ExitConfig::default(),
            safety_cap: None,
            max_argument_bytes: 8192,
            max_result_chars: 4000,
            sampling: Sampling::greedy(512),
            plan: PlanConfig::default(),
            delta: DeltaSource::default(),
            summary_pass: SummaryPass::default(),
        }
    }
}

/// How an investigation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Why.
    pub reason: ExitReason,
    /// The final answer, if one was produced.
    pub answer: Option<String>,
    /// Rounds run.
    pub rounds: u32,
    /// Compactions run.
    pub compactions: u32,
    /// The final history.
    pub history: Vec<Message>,
    /// The history as it would be had nothing been compacted: every message
    /// it held, each as first seen (a masked or summarised message keeps its
    /// original text), in order, without compaction summaries. The ceiling a
    /// compacted context is measured against; equal to `history` when no
    /// compaction ran.
    pub transcript: Vec<Message>,
    /// The largest prompt sent to the model (exact tokens).
    pub max_prompt_tokens: u32,
    /// Why the session store could not keep all of the run (its first write
    /// failure, naming the file): set by [`crate::Launch::run`]; the run
    /// itself went on.
    pub not_saved: Option<String>,
}

/// The loop, over a backend, tools and an approver.
pub struct Agent {
    backend: Arc<dyn Backend>,
    tools: Arc<dyn ToolRunner>,
    approver: Arc<dyn Approver>,
    settings: AgentSettings,
    cancel: CancelToken,
    specs: Vec<ToolSpec>,
    counter: Arc<ModelCounter>,
    next_id: usize,
    /// The history (and KV snapshot) before the last compaction, for [`Agent::undo_compaction`].
    before_compaction: Option<UndoPoint>,
    /// Prompt growth of the last rounds (for the forecast).
    growth: std::collections::VecDeque<u32>,
    /// Where the cache is saved for a later resume (see [`Agent::set_kv_file`]).
    kv_file: Option<std::path::PathBuf>,
    /// On resume: the cache file to load, or why it is not loaded.
    kv_load: Option<(std::path::PathBuf, Result<(), KvMiss>)>,
    /// Another engine or model that writes the compaction summaries
    /// ([`Agent::with_summariser`]); none: this agent's own model.
    summariser: Option<Arc<dyn Backend>>,
    /// The question as shown to people ([`Agent::with_title`]).
    title: Option<String>,
}

/// What a compaction can be undone to.
#[derive(Debug, Clone)]
struct UndoPoint {
    history: Vec<Message>,
    kv: Option<KvSnapshot>,
}

/// The memory slot holding the cache as it was before the last compaction.
pub const BEFORE_COMPACTION: &str = "before_compaction";

/// What [`Agent::undo_compaction`] gave back.
#[derive(Debug, Clone, PartialEq)]
pub struct Undone {
    /// The history as it was before the compaction.
    pub history: Vec<Message>,
    /// The KV snapshot restored into the cache (none when the backend keeps
    /// no cache, or the snapshot could not be made or loaded; `kv_error` says why).
    pub kv: Option<KvSnapshot>,
    /// Why the cache was not restored, when it was not.
    pub kv_error: Option<String>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// The stop string added for `fenced_json` models (see [`Agent::new`]).
pub const FENCE_END: &str = "```\n\n";

/// Characters of a malformed reply kept in the history: enough for the model
/// to see its mistake, not the degenerate tail of a broken generation.
pub const MALFORMED_KEEP_CHARS: usize = 400;

fn n32(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

impl Agent {
    /// A new agent.
    ///
    /// # Errors
    /// [`AgentError::InvalidSetting`] when the budget is impossible for the backend's context.
    pub fn new(backend: Arc<dyn Backend>, tools: Arc<dyn ToolRunner>, approver: Arc<dyn Approver>, settings: AgentSettings) -> Result<Self, AgentError> {
        let budget = Budget { context: backend.context_size() as usize, reserve: settings.reserve as usize, ratio: settings.ratio, recent: settings.recent };
        budget.validate().map_err(|e| AgentError::InvalidSetting(e.to_string()))?;
        settings.plan.validate().map_err(|e| AgentError::InvalidSetting(e.to_string()))?;
        let specs = tools.specs();
        let mut settings = settings;
        // Models without native tool calls write a fenced JSON block; small
        // ones keep writing after it (more blocks, "The result is: …"),
        // which breaks the parse. The loop runs one call per reply, so the
        // reply ends at the first closed fence followed by a blank line.
        if backend.model_info().tool_format.as_deref() == Some("fenced_json") && !settings.sampling.stop.iter().any(|s| s == FENCE_END) {
            settings.sampling.stop.push(FENCE_END.into());
        }
        let counter = Arc::new(ModelCounter::new(backend.clone(), specs.clone()));
        Ok(Self {
            backend,
            tools,
            approver,
            settings,
            cancel: CancelToken::new(),
            specs,
            counter,
            next_id: 0,
            before_compaction: None,
            growth: std::collections::VecDeque::new(),
            kv_file: None,
            kv_load: None,
            summariser: None,
            title: None,
        })
    }

    /// Has `summariser` (another engine or model) write the compaction
    /// summaries instead of this agent's model; the ledger names it. Its
    /// cache does not hold the investigation, so each summary request is
    /// decoded there in full (within its own window, as for the model itself).
    #[must_use]
    pub fn with_summariser(mut self, summariser: Option<Arc<dyn Backend>>) -> Self {
        self.summariser = summariser;
        self
    }

    /// Shows `title` to people in place of the question the model is asked
    /// (a demo world's plain question, its step-by-step route left to the
    /// model): carried by [`AgentEvent::Started`], so the store and every face
    /// show it, the full question beside it.
    #[must_use]
    pub fn with_title(mut self, title: Option<String>) -> Self {
        self.title = title.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        self
    }

    /// Saves the KV cache to `path` at each resume point (after a reply that
    /// calls tools, before they run; and at the end), and lets
    /// [`Agent::resume`] load it instead of decoding the stored history again.
    /// Only for backends that keep a cache; a failed save is an event, never a stop.
    pub fn set_kv_file(&mut self, path: impl Into<std::path::PathBuf>) {
        self.kv_file = Some(path.into());
    }

    /// What [`Agent::resume`] does with the saved cache: `Ok(())` loads
    /// `file` (when it covers the history through the pinned zone), `Err(why)`
    /// decodes the history again and says why in the `kv_restore` event.
    pub fn plan_kv_load(&mut self, file: std::path::PathBuf, plan: Result<(), KvMiss>) {
        self.kv_load = Some((file, plan));
    }

    /// Makes [`Agent::resume`] decode the history again instead of loading
    /// the saved cache (the cache is still saved as the run goes on).
    pub fn skip_kv_load(&mut self) {
        let file = self.kv_file.clone().unwrap_or_default();
        self.kv_load = Some((file, Err(KvMiss::Skipped)));
    }

    /// Whether the backend keeps a KV cache that can be saved and loaded.
    #[must_use]
    pub fn keeps_kv(&self) -> bool {
        self.backend.keeps_kv()
    }

    /// The settings it runs with.
    #[must_use]
    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// A token that cancels the investigation (the current generation stops at its next token).
    #[must_use]
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// The budget `{C, G, ratio, recent}`.
    #[must_use]
    pub fn budget(&self) -> Budget {
        Budget {
            context: self.backend.context_size() as usize,
            reserve: self.settings.reserve as usize,
            ratio: self.settings.ratio,
            recent: self.settings.recent,
        }
    }

    /// `⌊ratio · (C − G)⌋`.
    #[must_use]
    pub fn threshold(&self) -> u32 {
        n32(self.budget().threshold())
    }

    fn id(&mut self) -> String {
        let id = format!("m{}", self.next_id);
        self.next_id += 1;
        id
    }

    /// The forecast of the next compaction from the recent growth.
    fn forecast(&self, g: &Gauge) -> Option<Forecast> {
        let growth: Vec<u32> = self.growth.iter().copied().collect();
        Forecast::from_growth(g, &growth)
    }

    /// Measures the history: exact prompt tokens and per-zone counts.
    async fn gauge(&self, h: &[Message]) -> Result<Gauge, AgentError> {
        let exact = self.backend.count_tokens(&chat_history(h), &self.specs).await?;
        let partition = mf_forgetting::zones::partition(h, self.settings.recent).ok();
        let mut zones = [0usize; 3];
        for (i, m) in h.iter().enumerate() {
            let n = self.counter.count_async(m).await;
            let z = match partition.as_ref().map_or(mf_forgetting::Zone::Pinned, |z| z.zone_of(i)) {
                mf_forgetting::Zone::Pinned => 0,
                mf_forgetting::Zone::Compressible => 1,
                mf_forgetting::Zone::Recent => 2,
            };
            zones[z] += n;
        }
        let c = self.backend.context_size();
        Ok(Gauge {
            pinned: n32(zones[0]),
            compressible: n32(zones[1]),
            recent: n32(zones[2]),
            free: c.saturating_sub(self.settings.reserve).saturating_sub(exact),
            threshold: self.threshold(),
            prompt_tokens: exact,
            context: c,
            reserve: self.settings.reserve,
            messages: n32(h.len()),
        })
    }

    async fn generate(
        &self,
        messages: Vec<ChatMessage>,
        tools: Vec<ToolSpec>,
        sampling: Sampling,
        round: u32,
        purpose: Purpose,
        sink: &mut dyn EventSink,
    ) -> Result<mf_inference::Generation, AgentError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StreamEvent>();
        let req = GenerateRequest { messages, tools, sampling };
        let fut = self.backend.generate(req, Some(tx), self.cancel.clone());
        tokio::pin!(fut);
        let result = loop {
            tokio::select! {
                r = &mut fut => break r,
                Some(ev) = rx.recv() => forward(&ev, sink),
            }
        };
        while let Ok(ev) = rx.try_recv() {
            forward(&ev, sink);
        }
        let g = result?;
        sink.emit(&AgentEvent::Kv { round, purpose, stats: g.usage.kv.into(), completion_tokens: g.usage.completion_tokens });
        Ok(g)
    }
}

fn forward(ev: &StreamEvent, sink: &mut dyn EventSink) {
    match ev {
        StreamEvent::Text(t) => sink.emit(&AgentEvent::Token { text: t.clone() }),
        StreamEvent::Thinking(t) => sink.emit(&AgentEvent::ThinkingToken { text: t.clone() }),
    }
}

/// The id the next message of `history` gets (`m<N>`, one past the largest).
#[must_use]
pub fn next_message_id(history: &[Message]) -> usize {
    history.iter().filter_map(|m| m.id.0.strip_prefix('m').and_then(|n| n.parse::<usize>().ok())).max().map_or(history.len(), |n| n + 1)
}

/// Parses a strategy name (none, baseline, masking, v1, v2, v2.1).
///
/// # Errors
/// [`AgentError::InvalidSetting`] for anything else.
pub fn parse_strategy(s: &str) -> Result<StrategyKind, AgentError> {
    s.parse::<StrategyKind>().map_err(|e| AgentError::InvalidSetting(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_name_parses() {
        for k in StrategyKind::ALL {
            assert_eq!(parse_strategy(k.as_str()).unwrap(), k);
        }
        assert!(parse_strategy("v3").is_err());
    }
}
