//! The loop.

use std::sync::Arc;

use mf_forgetting::{Budget, ExitConfig, ExitEvent, ExitMonitor, ForgettingError, Message, PlanConfig, StrategyKind};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, KvSnapshot, Sampling, SnapshotSlot, StreamEvent, ToolSpec};
use mf_tools::Requirement;

use crate::compact::{CompactionJob, DeltaSource, ModelCounter, SummaryPass, SummaryPrompt, chat_history};
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ExitReason, Forecast, Gauge, Purpose};
use crate::tools::{Approver, ToolFailure, ToolReply, ToolRunner};

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

/// Rounds of prompt growth the compaction forecast averages over.
pub const FORECAST_WINDOW: usize = 3;

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            system_prompt: "You are an investigator. Use the tools to find facts, then answer the question concisely. Call one tool at a time.".into(),
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
            delta: DeltaSource::Model,
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
    /// The largest prompt sent to the model (exact tokens).
    pub max_prompt_tokens: u32,
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
    /// Whether [`Agent::resume`] loads `kv_file` (else it decodes the history again).
    kv_load: bool,
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
        let budget = Budget {
            context: backend.context_size() as usize,
            reserve: settings.reserve as usize,
            ratio: settings.ratio,
            recent: settings.recent,
        };
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
        Ok(Self { backend, tools, approver, settings, cancel: CancelToken::new(), specs, counter, next_id: 0, before_compaction: None, growth: std::collections::VecDeque::new(), kv_file: None, kv_load: true })
    }

    /// Saves the KV cache to `path` at each resume point (after a reply that
    /// calls tools, before they run; and at the end), and lets
    /// [`Agent::resume`] load it instead of decoding the stored history again.
    /// Only for backends that keep a cache; a failed save is an event, never a stop.
    pub fn set_kv_file(&mut self, path: impl Into<std::path::PathBuf>) {
        self.kv_file = Some(path.into());
    }

    /// Makes [`Agent::resume`] decode the history again instead of loading
    /// the saved cache (the cache is still saved as the run goes on).
    pub fn skip_kv_load(&mut self) {
        self.kv_load = false;
    }

    async fn save_resume_point(&self, round: u32, sink: &mut dyn EventSink) {
        if let Some(path) = &self.kv_file
            && self.backend.keeps_kv()
        {
            self.save_cache(SnapshotSlot::File(path.clone()), "resume_point", round, sink).await;
        }
    }

    /// On resume: loads the saved cache when it covers this investigation's
    /// prompt at least through the pinned zone; otherwise leaves the cache
    /// empty so the history is decoded again, and says which in an event.
    async fn load_resume_point(&self, history: &[Message], sink: &mut dyn EventSink) {
        let Some(path) = &self.kv_file else { return };
        if !self.backend.keeps_kv() {
            return;
        }
        let slot = SnapshotSlot::File(path.clone());
        if !self.kv_load {
            sink.emit(&AgentEvent::KvRestore {
                slot: slot.to_string(),
                used: false,
                snapshot_tokens: 0,
                prompt_tokens: 0,
                matched_tokens: 0,
                note: Some("not loaded (asked not to): decoding the history again".into()),
            });
            return;
        }
        let chat = chat_history(history);
        let prompt = match self.backend.prompt_token_ids(&chat, &self.specs).await {
            Ok(p) => p,
            Err(e) => {
                sink.emit(&AgentEvent::Error { message: format!("resume: cannot tokenise the stored history ({e}); not loading the KV snapshot") });
                return;
            }
        };
        let restore = |used: bool, snapshot: usize, matched: usize, note: Option<String>| AgentEvent::KvRestore {
            slot: slot.to_string(),
            used,
            snapshot_tokens: n32(snapshot),
            prompt_tokens: n32(prompt.len()),
            matched_tokens: n32(matched),
            note,
        };
        if !path.is_file() {
            sink.emit(&restore(false, 0, 0, Some("no KV snapshot saved for this investigation: decoding the history again".into())));
            return;
        }
        // The pinned zone's tokens: the prefix the pinned-only prompt shares with the whole one.
        let pinned_end = mf_forgetting::message::question_index(history).map_or(history.len(), |i| i + 1);
        let pinned = match self.backend.prompt_token_ids(&chat[..pinned_end.min(chat.len())], &self.specs).await {
            Ok(p) => mf_inference::common_prefix(&p, &prompt),
            Err(_) => prompt.len(),
        };
        match self.backend.kv_restore(&slot).await {
            Ok(snap) => {
                let matched = mf_inference::common_prefix(&snap.tokens, &prompt);
                if matched >= pinned && matched > 0 {
                    let left = prompt.len() - matched;
                    sink.emit(&restore(true, snap.tokens.len(), matched, Some(format!("{left} tokens left to decode"))));
                } else {
                    // What was loaded diverges inside the pinned zone: it is
                    // not this investigation's cache. The next generation
                    // trims it at the divergence and decodes the rest.
                    sink.emit(&restore(
                        false,
                        snap.tokens.len(),
                        matched,
                        Some(format!("the snapshot diverges at token {matched}, inside the pinned zone ({pinned} tokens): decoding the history again")),
                    ));
                }
            }
            Err(e) => sink.emit(&restore(false, 0, 0, Some(format!("{e}: decoding the history again")))),
        }
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

    /// Saves the cache as it is to `slot`, with an event.
    async fn save_cache(&self, slot: SnapshotSlot, reason: &str, round: u32, sink: &mut dyn EventSink) -> Option<KvSnapshot> {
        let t0 = std::time::Instant::now();
        match self.backend.kv_snapshot(&slot).await {
            Ok(snap) => {
                sink.emit(&AgentEvent::KvSnapshot {
                    round,
                    reason: reason.into(),
                    slot: slot.to_string(),
                    tokens: n32(snap.tokens.len()),
                    bytes: snap.bytes,
                    ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
                Some(snap)
            }
            Err(e) => {
                sink.emit(&AgentEvent::Error { message: format!("KV snapshot ({reason}) to {slot} failed: {e}") });
                None
            }
        }
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
        let (pinned_end, recent_start) = match mf_forgetting::zones::partition(h, self.settings.recent) {
            Ok(z) => (z.pinned_end, z.recent_start),
            Err(_) => (h.len(), h.len()),
        };
        let mut zones = [0usize; 3];
        for (i, m) in h.iter().enumerate() {
            let n = self.counter.count_async(m).await;
            let z = if i < pinned_end {
                0
            } else if i < recent_start {
                1
            } else {
                2
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

    /// Runs an investigation of `question` to its end.
    ///
    /// # Errors
    /// A model failure the loop cannot turn into an exit (it is also emitted as an error event).
    pub async fn run(&mut self, question: &str, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        let system = self.id();
        let user = self.id();
        let history = vec![Message::system(&system, &self.settings.system_prompt), Message::user(&user, question)];
        self.run_from(history, false, sink).await
    }

    /// Continues an investigation from a stored history. A trailing tool call
    /// without a result (a crash mid-call) gets an `interrupted` error result:
    /// it is never re-run without the model asking, and approval, again.
    ///
    /// # Errors
    /// As [`Agent::run`].
    pub async fn resume(&mut self, mut history: Vec<Message>, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        self.next_id = history
            .iter()
            .filter_map(|m| m.id.0.strip_prefix('m').and_then(|n| n.parse::<usize>().ok()))
            .max()
            .map_or(history.len(), |n| n + 1);
        let answered: Vec<String> = history.iter().filter_map(|m| m.tool_call_id.clone()).collect();
        let open: Vec<(String, String)> = history
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter(|c| !answered.contains(&c.id))
            .map(|c| (c.id.clone(), c.name.clone()))
            .collect();
        for (call_id, name) in open {
            let id = self.id();
            history.push(Message::tool_error(&id, &call_id, &name, "ERROR interrupted: the program stopped during this call; it was not re-run."));
        }
        self.run_from(history, true, sink).await
    }

    async fn run_from(&mut self, mut history: Vec<Message>, resumed: bool, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        let question = mf_forgetting::message::question_index(&history).map(|i| history[i].content.clone()).unwrap_or_default();
        let info = self.backend.model_info();
        let threshold = self.threshold();
        let context = self.backend.context_size();
        sink.emit(&AgentEvent::Started {
            question,
            strategy: self.settings.strategy.as_str().into(),
            model: info.name,
            context,
            reserve: self.settings.reserve,
            threshold,
            tools: self.specs.iter().map(|s| s.name.clone()).collect(),
            resumed,
        });
        sink.history(&history);
        if resumed {
            self.load_resume_point(&history, sink).await;
        }
        let mut monitor = ExitMonitor::new(self.settings.exit);
        for c in history.iter().flat_map(|m| m.tool_calls.iter()) {
            let _ = monitor.observe(&ExitEvent::ToolCall { name: c.name.clone(), arguments: c.arguments.clone() });
        }
        let budget = self.budget();
        let mut rounds = 0u32;
        let mut compactions = 0u32;
        let mut max_prompt = 0u32;
        // Prompt tokens when the last round was sent (after any compaction).
        let mut last_sent: Option<u32> = None;
        self.growth.clear();
        let reason: ExitReason = 'outer: loop {
            if self.cancel.is_cancelled() {
                break ExitReason::Cancelled;
            }
            if let Some(cap) = self.settings.safety_cap
                && rounds >= cap
            {
                break ExitReason::SafetyCap { rounds };
            }
            rounds += 1;
            sink.emit(&AgentEvent::Round { round: rounds });
            let mut g = self.gauge(&history).await?;
            if let Some(prev) = last_sent
                && g.prompt_tokens >= prev
            {
                if self.growth.len() == FORECAST_WINDOW {
                    self.growth.pop_front();
                }
                self.growth.push_back(g.prompt_tokens - prev);
            }
            sink.emit(&AgentEvent::Gauge { gauge: g, forecast: self.forecast(&g) });
            if self.settings.strategy != StrategyKind::None && budget.should_compact(g.prompt_tokens as usize, history.len()) {
                compactions += 1;
                match self.compact(&history, g, rounds, sink).await? {
                    Ok((h2, g2)) => {
                        let ev = ExitEvent::Compaction {
                            tokens_before: g.prompt_tokens as usize,
                            tokens_after: g2.prompt_tokens as usize,
                            threshold: threshold as usize,
                            messages_after: h2.len(),
                        };
                        history = h2;
                        g = g2;
                        sink.history(&history);
                        if let Some(r) = monitor.observe(&ev) {
                            break ExitReason::from(r);
                        }
                    }
                    Err(reason) => break reason,
                }
            }
            if g.prompt_tokens + self.settings.reserve > context {
                break ExitReason::ContextExhausted { tokens: g.prompt_tokens, threshold, messages: n32(history.len()) };
            }
            max_prompt = max_prompt.max(g.prompt_tokens);
            last_sent = Some(g.prompt_tokens);
            let mut sampling = self.settings.sampling.clone();
            sampling.max_tokens = self.settings.reserve;
            let reply = match self.generate(chat_history(&history), self.specs.clone(), sampling, rounds, Purpose::Round, sink).await {
                Ok(r) => r,
                Err(e) => {
                    sink.emit(&AgentEvent::Error { message: e.to_string() });
                    return Err(e);
                }
            };
            if reply.stop_reason == mf_inference::StopReason::Cancelled {
                break ExitReason::Cancelled;
            }
            if let Some(err) = reply.tool_parse_error.clone() {
                let id = self.id();
                let kept = mf_forgetting::summary::cut_chars(&reply.raw_text, MALFORMED_KEEP_CHARS);
                history.push(Message::assistant(&id, &kept));
                let f = ToolFailure::new("malformed_tool_call", format!("{err}. Call a tool with one valid JSON object of arguments, or answer."));
                let id = self.id();
                let mut m = Message::user(&id, &f.to_model_text());
                m.is_error = true;
                history.push(m);
                sink.emit(&AgentEvent::ToolResult { call_id: String::new(), name: String::new(), ok: false, error: Some(f.kind.clone()), content: f.to_model_text(), truncated: None });
                sink.history(&history);
                if let Some(r) = monitor.observe(&ExitEvent::ToolResult { is_error: true }) {
                    break ExitReason::from(r);
                }
                continue;
            }
            if reply.tool_calls.is_empty() {
                let text = reply.content.trim().to_string();
                let id = self.id();
                history.push(Message::assistant(&id, &text));
                sink.history(&history);
                sink.emit(&AgentEvent::FinalAnswer { text: text.clone() });
                self.save_resume_point(rounds, sink).await;
                sink.emit(&AgentEvent::Exit { reason: ExitReason::FinalAnswer, rounds, compactions });
                return Ok(Outcome { reason: ExitReason::FinalAnswer, answer: Some(text), rounds, compactions, history, max_prompt_tokens: max_prompt });
            }
            // Ids: the parser's when unique and non-empty, else ours.
            let mut calls = reply.tool_calls.clone();
            for (i, c) in calls.iter_mut().enumerate() {
                if c.id.is_empty() || history.iter().any(|m| m.tool_calls.iter().any(|t| t.id == c.id)) {
                    c.id = format!("call_{rounds}_{i}");
                }
            }
            let id = self.id();
            let fcalls = calls
                .iter()
                .map(|c| mf_forgetting::ToolCall { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() })
                .collect();
            history.push(Message::assistant_calls(&id, &reply.content, fcalls));
            sink.history(&history);
            // A crash during the tools can resume from here without decoding again.
            self.save_resume_point(rounds, sink).await;
            let mut exit: Option<ExitReason> = None;
            for call in &calls {
                sink.emit(&AgentEvent::ToolCall { call_id: call.id.clone(), name: call.name.clone(), arguments: call.arguments.clone() });
                let result = if exit.is_some() {
                    Err(ToolFailure::new("not_run", "the investigation is stopping"))
                } else if let Some(r) = monitor.observe(&ExitEvent::ToolCall { name: call.name.clone(), arguments: call.arguments.clone() }) {
                    exit = Some(ExitReason::from(r));
                    Err(ToolFailure::new("repeated_call", "this exact call was already made; its result is above"))
                } else {
                    self.run_call(call, sink).await
                };
                let id = self.id();
                let (msg, ev) = match result {
                    Ok(reply) => {
                        let (content, truncated) = self.cut(reply);
                        (
                            Message::tool_result(&id, &call.id, &call.name, &content),
                            AgentEvent::ToolResult { call_id: call.id.clone(), name: call.name.clone(), ok: true, error: None, content, truncated },
                        )
                    }
                    Err(f) => (
                        Message::tool_error(&id, &call.id, &call.name, &f.to_model_text()),
                        AgentEvent::ToolResult { call_id: call.id.clone(), name: call.name.clone(), ok: false, error: Some(f.kind.clone()), content: f.to_model_text(), truncated: None },
                    ),
                };
                let is_error = msg.is_error;
                history.push(msg);
                sink.emit(&ev);
                sink.history(&history);
                if exit.is_none()
                    && let Some(r) = monitor.observe(&ExitEvent::ToolResult { is_error })
                {
                    exit = Some(ExitReason::from(r));
                }
            }
            if let Some(r) = exit {
                break 'outer r;
            }
        };
        let answer = if matches!(reason, ExitReason::Cancelled) { None } else { self.closing_answer(&mut history, rounds, sink).await };
        self.save_resume_point(rounds, sink).await;
        sink.history(&history);
        sink.emit(&AgentEvent::Exit { reason: reason.clone(), rounds, compactions });
        Ok(Outcome { reason, answer, rounds, compactions, history, max_prompt_tokens: max_prompt })
    }

    fn cut(&self, reply: ToolReply) -> (String, Option<String>) {
        let n = reply.content.chars().count();
        let max = self.settings.max_result_chars;
        if n > max {
            let head: String = reply.content.chars().take(max).collect();
            let mut note = format!("result cut to {max} of {n} characters");
            if let Some(t) = reply.truncated {
                note = format!("{t}; {note}");
            }
            (format!("{head}\n[{note}]"), Some(note))
        } else if let Some(t) = reply.truncated {
            (format!("{}\n[{t}]", reply.content), Some(t))
        } else {
            (reply.content, None)
        }
    }

    /// After a dynamic exit: ask once, without tools, for the answer from what
    /// was gathered, if it fits the window.
    async fn closing_answer(&mut self, history: &mut Vec<Message>, round: u32, sink: &mut dyn EventSink) -> Option<String> {
        let mut h = history.clone();
        let id = self.id();
        h.push(Message::user(&id, "Stop calling tools. Answer the original question now from what you gathered."));
        let n = self.backend.count_tokens(&chat_history(&h), &[]).await.ok()?;
        if n + self.settings.reserve > self.backend.context_size() {
            sink.emit(&AgentEvent::Error { message: format!("no closing answer: {n} prompt tokens leave no room for it") });
            return None;
        }
        let mut sampling = self.settings.sampling.clone();
        sampling.max_tokens = self.settings.reserve;
        match self.generate(chat_history(&h), Vec::new(), sampling, round, Purpose::Answer, sink).await {
            Ok(g) => {
                let text = g.content.trim().to_string();
                sink.emit(&AgentEvent::FinalAnswer { text: text.clone() });
                let id = self.id();
                h.push(Message::assistant(&id, &text));
                *history = h;
                Some(text)
            }
            Err(e) => {
                sink.emit(&AgentEvent::Error { message: format!("closing answer: {e}") });
                None
            }
        }
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

    /// Validates, approves and runs one call; every refusal is a structured error.
    async fn run_call(&self, call: &mf_inference::ToolCall, sink: &mut dyn EventSink) -> Result<ToolReply, ToolFailure> {
        if !self.specs.iter().any(|t| t.name == call.name) {
            let names: Vec<&str> = self.specs.iter().map(|t| t.name.as_str()).collect();
            return Err(ToolFailure::new("unknown_tool", format!("no tool named `{}`; available: {}", call.name, names.join(", "))));
        }
        let args_json = match &call.arguments {
            serde_json::Value::String(s) => s.clone(),
            v => {
                let spec = self.specs.iter().find(|t| t.name == call.name);
                spec.map_or_else(|| v.to_string(), |s| repair_arguments(&s.parameters, v).to_string())
            }
        };
        if args_json.len() > self.settings.max_argument_bytes {
            return Err(ToolFailure::new(
                "arguments_too_large",
                format!("{} bytes of arguments, the limit is {}", args_json.len(), self.settings.max_argument_bytes),
            ));
        }
        let decided = |approved: bool, by: &str| AgentEvent::ApprovalDecided { call_id: call.id.clone(), approved, by: by.into() };
        let approval = match self.tools.requirement(&call.id, &call.name, &args_json) {
            Err(f) => {
                if f.kind == "denied_by_policy" {
                    sink.emit(&decided(false, "policy"));
                }
                return Err(f);
            }
            Ok(Requirement::Auto) => {
                sink.emit(&decided(true, "policy"));
                None
            }
            Ok(Requirement::Ask(req)) => {
                sink.emit(&AgentEvent::ApprovalRequested {
                    call_id: req.call_id.clone(),
                    name: req.tool.clone(),
                    arguments: req.arguments.clone(),
                    args_sha256: req.args_sha256.clone(),
                });
                match self.approver.decide(&req).await {
                    None => {
                        sink.emit(&decided(false, "no answer"));
                        return Err(ToolFailure::new("approval_denied", "the user did not answer; the call was not run"));
                    }
                    Some(a) if a.call_id != req.call_id || a.args_sha256 != req.args_sha256 => {
                        sink.emit(&decided(false, "mismatch"));
                        return Err(ToolFailure::new("approval_mismatch", "the approval was for another call; not run"));
                    }
                    Some(a) if a.decision == mf_tools::policy::Decision::Denied => {
                        sink.emit(&decided(false, "user"));
                        return Err(ToolFailure::new("approval_denied", "the user denied this call"));
                    }
                    Some(a) => {
                        sink.emit(&decided(true, "user"));
                        Some(a)
                    }
                }
            }
        };
        self.tools.run(&call.id, &call.name, &args_json, approval.as_ref()).await
    }

    /// One compaction: plan + apply through mf-forgetting, events out.
    /// `Ok(Err(reason))` is an exit (the budget could not be restored).
    async fn compact(
        &mut self,
        history: &[Message],
        g: Gauge,
        round: u32,
        sink: &mut dyn EventSink,
    ) -> Result<Result<(Vec<Message>, Gauge), ExitReason>, AgentError> {
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
                return Ok(Err(exhausted(g.prompt_tokens)));
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
                Ok(Ok((c.messages, g2)))
            }
            Err(e) => {
                sink.emit(&AgentEvent::CompactionFailed { round, message: e.to_string() });
                Ok(Err(match e {
                    ForgettingError::BudgetNotRestored { tokens, threshold, messages } => {
                        ExitReason::ContextExhausted { tokens: n32(tokens), threshold: n32(threshold), messages: n32(messages) }
                    }
                    _ => exhausted(g.prompt_tokens),
                }))
            }
        }
    }
}

fn forward(ev: &StreamEvent, sink: &mut dyn EventSink) {
    match ev {
        StreamEvent::Text(t) => sink.emit(&AgentEvent::Token { text: t.clone() }),
        StreamEvent::Thinking(t) => sink.emit(&AgentEvent::ThinkingToken { text: t.clone() }),
    }
}

/// JSON Schema keywords that small models copy from a tool's description
/// into its arguments (`"additionalProperties": {...}`, `"type": "json"`).
const SCHEMA_KEYWORDS: [&str; 6] = ["additionalProperties", "type", "properties", "required", "description", "$schema"];

/// Drops top-level argument keys that are JSON Schema keywords and not
/// properties the tool declares; everything else is left for the tool to
/// validate (and refuse).
#[must_use]
pub fn repair_arguments(schema: &serde_json::Value, args: &serde_json::Value) -> serde_json::Value {
    let (Some(props), Some(obj)) = (schema.get("properties").and_then(|p| p.as_object()), args.as_object()) else {
        return args.clone();
    };
    let kept = obj.iter().filter(|(k, _)| props.contains_key(k.as_str()) || !SCHEMA_KEYWORDS.contains(&k.as_str()));
    serde_json::Value::Object(kept.map(|(k, v)| (k.clone(), v.clone())).collect())
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
    fn schema_keywords_copied_into_arguments_are_dropped() {
        let schema = serde_json::json!({"type": "object", "properties": {"url": {}, "method": {}, "body": {}}});
        let args = serde_json::json!({"url": "u", "additionalProperties": {"description": "x"}, "type": "json", "colour": 1});
        assert_eq!(repair_arguments(&schema, &args), serde_json::json!({"url": "u", "colour": 1}));
        let with_type = serde_json::json!({"type": "x"});
        let schema = serde_json::json!({"properties": {"type": {}}});
        assert_eq!(repair_arguments(&schema, &with_type), with_type, "a declared property stays");
    }

    #[test]
    fn every_strategy_name_parses() {
        for k in StrategyKind::ALL {
            assert_eq!(parse_strategy(k.as_str()).unwrap(), k);
        }
        assert!(parse_strategy("v3").is_err());
    }
}
