//! The loop.

use std::collections::HashSet;
use std::sync::Arc;

use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Sampling, StreamEvent, ToolSpec};

use crate::compact::{self, SUMMARY_INSTRUCTION};
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ExitReason, Gauge};
use crate::tools::{ApprovalRequest, Approver, Policy, ToolRunner, arguments_hash, canonical_json};

/// The compaction strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Never compact (the loop exits "context exhausted" instead).
    None,
    /// Drop the compressible zone (hard truncation: pinned + recent).
    Baseline,
    /// Pinned + model summary of the compressible zone + recent (METHOD.md §2).
    V1,
}

impl std::str::FromStr for Strategy {
    type Err = AgentError;
    fn from_str(s: &str) -> Result<Self, AgentError> {
        match s {
            "none" => Ok(Strategy::None),
            "baseline" => Ok(Strategy::Baseline),
            "v1" => Ok(Strategy::V1),
            "masking" | "v2" | "v2.1" => Err(AgentError::InvalidSetting(format!(
                "strategy `{s}` lives in mf-forgetting, which does not export it yet; use none, baseline or v1"
            ))),
            other => Err(AgentError::InvalidSetting(format!("unknown strategy `{other}` (none, baseline, v1)"))),
        }
    }
}

impl Strategy {
    /// Its name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Baseline => "baseline",
            Strategy::V1 => "v1",
        }
    }
}

/// Settings of one investigation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AgentSettings {
    /// The system prompt.
    pub system_prompt: String,
    /// Compaction strategy.
    pub strategy: Strategy,
    /// Generation reserve `G` (also the most tokens one reply may take).
    pub reserve: u32,
    /// Trigger ratio of `C − G`.
    pub ratio: f64,
    /// Recent messages kept verbatim.
    pub recent: usize,
    /// Stop after this many consecutive failed tool calls.
    pub max_consecutive_failures: u32,
    /// Optional cap on rounds (off by default: exits are dynamic).
    pub safety_cap: Option<u32>,
    /// Tool arguments longer than this (bytes of JSON) are refused.
    pub max_argument_bytes: usize,
    /// Tool results longer than this (characters) are cut, with a note.
    pub max_result_chars: usize,
    /// Sampling of the investigation replies (max_tokens is set from `reserve`).
    pub sampling: Sampling,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            system_prompt: "You are an investigator. Use the tools to find facts, then answer the question concisely. Call one tool at a time.".into(),
            strategy: Strategy::V1,
            reserve: 512,
            ratio: 0.75,
            recent: 2,
            max_consecutive_failures: 3,
            safety_cap: None,
            max_argument_bytes: 8192,
            max_result_chars: 4000,
            sampling: Sampling::greedy(512),
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
    pub history: Vec<ChatMessage>,
    /// The largest prompt sent to the model (tokens).
    pub max_prompt_tokens: u32,
}

/// The loop, over a backend, tools and an approver.
pub struct Agent {
    backend: Arc<dyn Backend>,
    tools: Arc<dyn ToolRunner>,
    approver: Arc<dyn Approver>,
    settings: AgentSettings,
    cancel: CancelToken,
    /// The history before the last compaction, for [`Agent::undo_compaction`].
    before_compaction: Option<Vec<ChatMessage>>,
}

enum Step {
    Go,
    Exit(ExitReason),
}

impl Agent {
    /// A new agent.
    ///
    /// # Errors
    /// [`AgentError::InvalidSetting`] when the budget is impossible for the backend's context.
    pub fn new(backend: Arc<dyn Backend>, tools: Arc<dyn ToolRunner>, approver: Arc<dyn Approver>, settings: AgentSettings) -> Result<Self, AgentError> {
        let c = backend.context_size();
        if settings.reserve >= c {
            return Err(AgentError::InvalidSetting(format!("reserve {} must be below the context {c}", settings.reserve)));
        }
        if !(settings.ratio > 0.0 && settings.ratio <= 1.0) {
            return Err(AgentError::InvalidSetting(format!("ratio {} must be in (0, 1]", settings.ratio)));
        }
        Ok(Self { backend, tools, approver, settings, cancel: CancelToken::new(), before_compaction: None })
    }

    /// A token that cancels the current generation.
    #[must_use]
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// `⌊ratio · (C − G)⌋`.
    #[must_use]
    pub fn threshold(&self) -> u32 {
        let room = self.backend.context_size().saturating_sub(self.settings.reserve);
        (self.settings.ratio * f64::from(room)).floor() as u32
    }

    /// The history as it was before the last compaction (taking it clears it).
    pub fn undo_compaction(&mut self) -> Option<Vec<ChatMessage>> {
        self.before_compaction.take()
    }

    async fn count(&self, msgs: &[ChatMessage], tools: &[ToolSpec]) -> Result<u32, AgentError> {
        Ok(self.backend.count_tokens(msgs, tools).await?)
    }

    async fn gauge(&self, h: &[ChatMessage], tools: &[ToolSpec]) -> Result<Gauge, AgentError> {
        let z = compact::zones(h, self.settings.recent);
        let total = self.count(h, tools).await?;
        let upto_pinned = self.count(&h[..z.pinned_end], tools).await?;
        let upto_recent = if z.recent_start == z.pinned_end { upto_pinned } else { self.count(&h[..z.recent_start], tools).await? };
        let c = self.backend.context_size();
        Ok(Gauge {
            pinned: upto_pinned,
            compressible: upto_recent.saturating_sub(upto_pinned),
            recent: total.saturating_sub(upto_recent),
            free: c.saturating_sub(self.settings.reserve).saturating_sub(total),
            threshold: self.threshold(),
            context: c,
            reserve: self.settings.reserve,
        })
    }

    /// Runs an investigation of `question` to its end.
    ///
    /// # Errors
    /// Only failures the loop cannot turn into an event and an exit (the store
    /// is the caller's sink and does not fail the loop).
    pub async fn run(&mut self, question: &str, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        let history = vec![ChatMessage::system(self.settings.system_prompt.clone()), ChatMessage::user(question.to_string())];
        self.run_from(history, sink).await
    }

    /// Continues an investigation from a stored history.
    ///
    /// # Errors
    /// As [`Agent::run`].
    pub async fn run_from(&mut self, mut history: Vec<ChatMessage>, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        let tools = self.tools.specs();
        let info = self.backend.model_info();
        let question = history.iter().find(|m| m.role == mf_inference::Role::User).map(|m| m.content.clone()).unwrap_or_default();
        sink.emit(&AgentEvent::Started {
            question,
            strategy: self.settings.strategy.name().into(),
            model: info.name,
            context: self.backend.context_size(),
            reserve: self.settings.reserve,
            threshold: self.threshold(),
        });
        let mut seen: HashSet<String> = HashSet::new();
        let mut failures = 0u32;
        let mut rounds = 0u32;
        let mut compactions = 0u32;
        let mut last_compaction_round: Option<u32> = None;
        let mut max_prompt = 0u32;
        let threshold = self.threshold();
        let context = self.backend.context_size();
        let reason: ExitReason = loop {
            if let Some(cap) = self.settings.safety_cap
                && rounds >= cap
            {
                break ExitReason::SafetyCap { rounds };
            }
            rounds += 1;
            sink.emit(&AgentEvent::Round { round: rounds });
            let mut g = self.gauge(&history, &tools).await?;
            sink.emit(&AgentEvent::Gauge(g));
            if g.total() > threshold && history.len() > 4 && self.settings.strategy != Strategy::None {
                if last_compaction_round == Some(rounds - 1) && g.compressible == 0 {
                    break ExitReason::CompactionLoop;
                }
                let before = g.total();
                let (h2, g2) = self.compact(&history, &tools, g, rounds, sink).await?;
                compactions += 1;
                last_compaction_round = Some(rounds);
                if g2.total() >= before {
                    history = h2;
                    break ExitReason::CompactionLoop;
                }
                history = h2;
                g = g2;
            }
            if g.total() > threshold && (history.len() <= 4 || self.settings.strategy == Strategy::None) {
                break ExitReason::ContextExhausted { tokens: g.total(), threshold };
            }
            if g.total() + self.settings.reserve > context {
                break ExitReason::ContextExhausted { tokens: g.total(), threshold };
            }
            let mut sampling = self.settings.sampling.clone();
            sampling.max_tokens = self.settings.reserve;
            let reply_result = self.generate(history.clone(), tools.clone(), sampling, rounds, sink).await;
            let reply = match reply_result {
                Ok(g) => g,
                Err(e) => {
                    sink.emit(&AgentEvent::Error { message: e.to_string() });
                    return Err(e);
                }
            };
            max_prompt = max_prompt.max(reply.usage.kv.prompt_tokens);
            if let Some(err) = reply.tool_parse_error.clone() {
                history.push(ChatMessage::assistant(reply.raw_text.clone()));
                let msg = format!("ERROR malformed_tool_call: {err}. Call a tool with valid JSON arguments, or answer.");
                sink.emit(&AgentEvent::ToolResult { call_id: String::new(), name: String::new(), ok: false, content: msg.clone(), truncated: None });
                history.push(ChatMessage::user(msg));
                failures += 1;
                if failures >= self.settings.max_consecutive_failures {
                    break ExitReason::ConsecutiveFailures { count: failures };
                }
                continue;
            }
            if reply.tool_calls.is_empty() {
                let text = reply.content.trim().to_string();
                history.push(ChatMessage::assistant(text.clone()));
                sink.emit(&AgentEvent::FinalAnswer { text: text.clone() });
                sink.emit(&AgentEvent::Exit { reason: ExitReason::FinalAnswer, rounds });
                return Ok(Outcome { reason: ExitReason::FinalAnswer, answer: Some(text), rounds, compactions, history, max_prompt_tokens: max_prompt });
            }
            history.push(ChatMessage::assistant_tool_calls(reply.content.clone(), reply.tool_calls.clone()));
            let mut step = Step::Go;
            for call in &reply.tool_calls {
                sink.emit(&AgentEvent::ToolCall { call_id: call.id.clone(), name: call.name.clone(), arguments: call.arguments.clone() });
                let key = format!("{}\u{0}{}", call.name, canonical_json(&call.arguments));
                if !seen.insert(key) {
                    step = Step::Exit(ExitReason::RepeatedToolCall { name: call.name.clone() });
                    history.push(ChatMessage::tool_result(call.id.clone(), call.name.clone(), "ERROR repeated_call: this exact call was already made."));
                    continue;
                }
                let (ok, content, truncated) = self.run_call(call, &tools, sink).await;
                sink.emit(&AgentEvent::ToolResult { call_id: call.id.clone(), name: call.name.clone(), ok, content: content.clone(), truncated });
                history.push(ChatMessage::tool_result(call.id.clone(), call.name.clone(), content));
                if ok {
                    failures = 0;
                } else {
                    failures += 1;
                }
            }
            if let Step::Exit(r) = step {
                break r;
            }
            if failures >= self.settings.max_consecutive_failures {
                break ExitReason::ConsecutiveFailures { count: failures };
            }
        };
        // A dynamic exit: ask once for the answer from what was gathered, if it fits.
        let answer = self.closing_answer(&mut history, rounds, sink).await;
        sink.emit(&AgentEvent::Exit { reason: reason.clone(), rounds });
        Ok(Outcome { reason, answer, rounds, compactions, history, max_prompt_tokens: max_prompt })
    }

    async fn closing_answer(&self, history: &mut Vec<ChatMessage>, round: u32, sink: &mut dyn EventSink) -> Option<String> {
        let mut h = history.clone();
        h.push(ChatMessage::user("Stop calling tools. Answer the original question now from what you gathered.".to_string()));
        let n = self.count(&h, &[]).await.ok()?;
        if n + self.settings.reserve > self.backend.context_size() {
            return None;
        }
        let mut sampling = self.settings.sampling.clone();
        sampling.max_tokens = self.settings.reserve;
        match self.generate(h.clone(), Vec::new(), sampling, round, sink).await {
            Ok(g) => {
                let text = g.content.trim().to_string();
                sink.emit(&AgentEvent::FinalAnswer { text: text.clone() });
                h.push(ChatMessage::assistant(text.clone()));
                *history = h;
                Some(text)
            }
            Err(e) => {
                sink.emit(&AgentEvent::Error { message: format!("closing answer: {e}") });
                None
            }
        }
    }

    async fn generate(&self, messages: Vec<ChatMessage>, tools: Vec<ToolSpec>, sampling: Sampling, round: u32, sink: &mut dyn EventSink) -> Result<mf_inference::Generation, AgentError> {
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
        sink.emit(&AgentEvent::Kv { round, stats: g.usage.kv, completion_tokens: g.usage.completion_tokens });
        Ok(g)
    }

    async fn run_call(&self, call: &mf_inference::ToolCall, tools: &[ToolSpec], sink: &mut dyn EventSink) -> (bool, String, Option<String>) {
        if !tools.iter().any(|t| t.name == call.name) {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            return (false, format!("ERROR unknown_tool: no tool named `{}`; available: {}", call.name, names.join(", ")), None);
        }
        let arg_len = call.arguments.to_string().len();
        if arg_len > self.settings.max_argument_bytes {
            return (false, format!("ERROR oversized_arguments: {arg_len} bytes of arguments, the limit is {}", self.settings.max_argument_bytes), None);
        }
        if !call.arguments.is_object() {
            return (false, "ERROR invalid_arguments: arguments must be a JSON object".into(), None);
        }
        let approved = match self.tools.policy(&call.name, &call.arguments) {
            Policy::Auto => {
                sink.emit(&AgentEvent::ApprovalDecided { call_id: call.id.clone(), approved: true, by: "policy".into() });
                true
            }
            Policy::Deny => {
                sink.emit(&AgentEvent::ApprovalDecided { call_id: call.id.clone(), approved: false, by: "policy".into() });
                false
            }
            Policy::Ask => {
                let hash = arguments_hash(&call.name, &call.arguments);
                sink.emit(&AgentEvent::ApprovalRequested { call_id: call.id.clone(), name: call.name.clone(), arguments_hash: hash.clone() });
                let req = ApprovalRequest { call_id: call.id.clone(), name: call.name.clone(), arguments: call.arguments.clone(), arguments_hash: hash.clone() };
                let (approved, by) = match self.approver.decide(&req).await {
                    None => (false, "no answer"),
                    Some(d) if d.call_id != call.id || d.arguments_hash != hash => (false, "mismatch"),
                    Some(d) => (d.approved, "approver"),
                };
                sink.emit(&AgentEvent::ApprovalDecided { call_id: call.id.clone(), approved, by: by.into() });
                approved
            }
        };
        if !approved {
            return (false, "ERROR denied: the user did not approve this call".into(), None);
        }
        match self.tools.run(&call.name, &call.arguments).await {
            Ok(text) => {
                let n = text.chars().count();
                if n > self.settings.max_result_chars {
                    let head: String = text.chars().take(self.settings.max_result_chars).collect();
                    let note = format!("result cut to {} of {n} characters", self.settings.max_result_chars);
                    (true, format!("{head}\n[{note}]"), Some(note))
                } else {
                    (true, text, None)
                }
            }
            Err(f) => (false, format!("ERROR {}: {}", f.kind, f.message), None),
        }
    }

    async fn compact(&mut self, history: &[ChatMessage], tools: &[ToolSpec], g: Gauge, round: u32, sink: &mut dyn EventSink) -> Result<(Vec<ChatMessage>, Gauge), AgentError> {
        let z = compact::zones(history, self.settings.recent);
        sink.emit(&AgentEvent::CompactionStarted {
            round,
            tokens_before: g.total(),
            messages_before: history.len() as u32,
            compressible: (z.recent_start - z.pinned_end) as u32,
        });
        self.before_compaction = Some(history.to_vec());
        let zone = &history[z.pinned_end..z.recent_start];
        let input = compact::summariser_input(zone);
        let (summary, by_model, fallback_reason, appended) = match self.settings.strategy {
            Strategy::Baseline | Strategy::None => (None, false, None, false),
            Strategy::V1 => {
                let (res, appended) = self.summarise(history, z, &input, tools, sink).await;
                match res {
                    Ok(s) => (Some(s), true, None, appended),
                    Err(why) => (Some(compact::fallback_summary(&input)), false, Some(why), appended),
                }
            }
        };
        let h2 = compact::rebuild(history, z, summary.as_deref());
        let g2 = self.gauge(&h2, tools).await?;
        sink.emit(&AgentEvent::CompactionFinished {
            round,
            tokens_before: g.total(),
            tokens_after: g2.total(),
            messages_before: history.len() as u32,
            messages_after: h2.len() as u32,
            summarised_by_model: by_model,
            fallback_reason,
            summary: summary.unwrap_or_default(),
            appended_to_live_cache: appended,
        });
        sink.emit(&AgentEvent::Gauge(g2));
        Ok((h2, g2))
    }

    /// The summary pass. Preferred: the live prompt up to the recent zone plus
    /// the instruction, so the KV prefix is reused; when that would not leave
    /// room for the summary itself, a standalone pass over the error-aware text.
    async fn summarise(&self, history: &[ChatMessage], z: compact::Zones, input: &str, tools: &[ToolSpec], sink: &mut dyn EventSink) -> (Result<String, String>, bool) {
        const SUMMARY_TOKENS: u32 = 256;
        let sampling = Sampling { temperature: 0.2, top_p: 0.9, max_tokens: SUMMARY_TOKENS, ..Sampling::default() };
        let mut live: Vec<ChatMessage> = history[..z.recent_start].to_vec();
        live.push(ChatMessage::user(SUMMARY_INSTRUCTION.to_string()));
        let context = self.backend.context_size();
        let fits_live = matches!(self.count(&live, tools).await, Ok(n) if n + SUMMARY_TOKENS <= context);
        let (msgs, tool_specs, appended) = if fits_live {
            (live, tools.to_vec(), true)
        } else {
            let standalone = vec![ChatMessage::system(SUMMARY_INSTRUCTION.to_string()), ChatMessage::user(compact::fallback_summary_input(input, context))];
            (standalone, Vec::new(), false)
        };
        let r = match self.generate(msgs, tool_specs, sampling, 0, sink).await {
            Ok(g) if !g.tool_calls.is_empty() => Err("the summary pass called a tool".to_string()),
            Ok(g) if g.content.trim().len() < 8 => Err("the summary pass returned (almost) nothing".to_string()),
            Ok(g) => Ok(g.content.trim().to_string()),
            Err(e) => Err(e.to_string()),
        };
        (r, appended)
    }
}

fn forward(ev: &StreamEvent, sink: &mut dyn EventSink) {
    match ev {
        StreamEvent::Text(t) => sink.emit(&AgentEvent::Token { text: t.clone() }),
        StreamEvent::Thinking(t) => sink.emit(&AgentEvent::ThinkingToken { text: t.clone() }),
    }
}
