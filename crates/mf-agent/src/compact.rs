//! Compaction in the loop: `mf_forgetting::{plan, apply}` over the live
//! history, with the model behind its traits.
//!
//! The loop keeps its history as [`mf_forgetting::Message`]s (ids, error and
//! summary flags) and maps them to [`ChatMessage`]s for the model
//! ([`to_chat`], [`from_chat`]). mf-forgetting is pure and synchronous; its
//! [`TokenCounter`], [`Summarizer`] and [`ProbeEvaluator`] are implemented
//! here over the async [`Backend`] and run on a blocking thread
//! ([`tokio::task::spawn_blocking`]) that waits on the runtime's handle, so
//! plan and apply stay exactly the library's code.
//!
//! - Tokens: each message rendered alone with the model's template (the
//!   system message with the tool descriptions), cached by content. This
//!   over-counts a little (a generation prompt per message), which errs on
//!   the safe side of the budget.
//! - Summary pass (v1, v2, v2.1): preferably an append to the live prompt
//!   (the whole history as it sits in the KV cache, then the summary request
//!   as a user turn) so only the request is decoded; when that plus the 256
//!   summary tokens would not fit the window, an append to the cached pinned
//!   zone (system prompt with tools, question) with the request's log cut
//!   until it fits ([`SummaryPass::PinnedPrefix`]): the pinned prefix is
//!   never decoded again, and the next round trims the cache back to it. A
//!   standalone pass (system + request, nothing reused) remains as the arm
//!   to measure against. Never over the window: the prompt is measured with
//!   the model's tokenizer first. A failed or garbage summary becomes
//!   mf-forgetting's 500-character fallback.
//! - v2.1's withholding test by the model ([`ModelProbe`]): the model answers
//!   the question from the full context; the numbers and identifiers in that
//!   answer are the reference. `Perf(ctx)` is the fraction of them the model's
//!   answer keeps from `ctx`. When that cannot run (no checkable terms, no
//!   room) the plan falls back to v2.1's Φ ranking and says so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mf_forgetting::{
    ApproxTokenCounter, Budget, Compaction, CompactionPlan, ForgettingError, Message, PlanConfig, ProbeEvaluator, Ranking,
    StrategyKind, Summarizer, SummaryRequest, TokenCounter,
};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Role, Sampling, ToolCall, ToolSpec};
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedSender;

use crate::events::{AgentEvent, Purpose};

/// A forgetting message as the model sees it.
#[must_use]
pub fn to_chat(m: &Message) -> ChatMessage {
    let role = match m.role {
        mf_forgetting::Role::System => Role::System,
        mf_forgetting::Role::User => Role::User,
        mf_forgetting::Role::Assistant => Role::Assistant,
        mf_forgetting::Role::Tool => Role::Tool,
    };
    ChatMessage {
        role,
        content: m.content.clone(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| ToolCall { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() })
            .collect(),
        tool_call_id: m.tool_call_id.clone(),
        name: m.name.clone(),
    }
}

/// A chat message as a forgetting message with id `id`. A tool message whose
/// content starts with `ERROR` is a tool error.
#[must_use]
pub fn from_chat(id: &str, c: &ChatMessage) -> Message {
    let mut m = match c.role {
        Role::System => Message::system(id, &c.content),
        Role::User => Message::user(id, &c.content),
        Role::Assistant => Message::assistant(id, &c.content),
        Role::Tool => Message::tool_result(id, c.tool_call_id.as_deref().unwrap_or(""), c.name.as_deref().unwrap_or(""), &c.content),
    };
    m.tool_calls = c
        .tool_calls
        .iter()
        .map(|t| mf_forgetting::ToolCall { id: t.id.clone(), name: t.name.clone(), arguments: t.arguments.clone() })
        .collect();
    m.tool_call_id.clone_from(&c.tool_call_id);
    m.name.clone_from(&c.name);
    m.is_error = c.role == Role::Tool && c.content.starts_with("ERROR");
    m
}

/// The whole history for the model.
#[must_use]
pub fn chat_history(h: &[Message]) -> Vec<ChatMessage> {
    h.iter().map(to_chat).collect()
}

/// Per-message token counts with the model's tokenizer, cached by content.
pub struct ModelCounter {
    backend: Arc<dyn Backend>,
    tools: Vec<ToolSpec>,
    cache: Mutex<HashMap<String, usize>>,
}

impl std::fmt::Debug for ModelCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCounter").finish_non_exhaustive()
    }
}

fn cache_key(m: &Message) -> String {
    let mut c = m.clone();
    c.id = mf_forgetting::MessageId::default();
    serde_json::to_string(&c).unwrap_or_default()
}

impl ModelCounter {
    /// A counter for `backend`, counting the system message with `tools`.
    pub fn new(backend: Arc<dyn Backend>, tools: Vec<ToolSpec>) -> Self {
        ModelCounter { backend, tools, cache: Mutex::new(HashMap::new()) }
    }

    fn cached(&self, key: &str) -> Option<usize> {
        self.cache.lock().ok().and_then(|c| c.get(key).copied())
    }

    fn store(&self, key: String, n: usize) {
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, n);
        }
    }

    fn tools_for(&self, m: &Message) -> &[ToolSpec] {
        if m.role == mf_forgetting::Role::System { &self.tools } else { &[] }
    }

    /// Tokens of one message (async side). A template that cannot render a
    /// lone message falls back to the offline estimate.
    pub async fn count_async(&self, m: &Message) -> usize {
        let key = cache_key(m);
        if let Some(n) = self.cached(&key) {
            return n;
        }
        let n = match self.backend.count_tokens(&[to_chat(m)], self.tools_for(m)).await {
            Ok(n) => n as usize,
            Err(_) => ApproxTokenCounter.count_message(m),
        };
        self.store(key, n);
        n
    }
}

/// The sync side, for mf-forgetting; only call it off the runtime's threads.
struct BlockingCounter<'a> {
    inner: &'a ModelCounter,
    handle: Handle,
}

impl TokenCounter for BlockingCounter<'_> {
    fn count_message(&self, m: &Message) -> usize {
        let key = cache_key(m);
        if let Some(n) = self.inner.cached(&key) {
            return n;
        }
        let n = match self.handle.block_on(self.inner.backend.count_tokens(&[to_chat(m)], self.inner.tools_for(m))) {
            Ok(n) => n as usize,
            Err(_) => ApproxTokenCounter.count_message(m),
        };
        self.inner.store(key, n);
        n
    }
}

fn sampling_of(p: mf_forgetting::SamplingParams) -> Sampling {
    Sampling { temperature: p.temperature, top_p: p.top_p, max_tokens: p.max_tokens, ..Sampling::default() }
}

/// The model as seen from the blocking thread.
#[derive(Clone)]
struct ModelCtx {
    handle: Handle,
    backend: Arc<dyn Backend>,
    cancel: CancelToken,
    events: UnboundedSender<AgentEvent>,
    round: u32,
}

impl ModelCtx {
    /// Runs one generation and reports its KV figures.
    fn generate(&self, messages: Vec<ChatMessage>, tools: Vec<ToolSpec>, sampling: Sampling, purpose: Purpose) -> Result<mf_inference::Generation, String> {
        let req = GenerateRequest { messages, tools, sampling };
        let g = self.handle.block_on(self.backend.generate(req, None, self.cancel.clone())).map_err(|e| e.to_string())?;
        let _ = self.events.send(AgentEvent::Kv { round: self.round, purpose, stats: g.usage.kv.into(), completion_tokens: g.usage.completion_tokens });
        Ok(g)
    }

    fn count(&self, msgs: &[ChatMessage], tools: &[ToolSpec]) -> Result<u32, String> {
        self.handle.block_on(self.backend.count_tokens(msgs, tools)).map_err(|e| e.to_string())
    }
}

/// Where the summary pass runs when the live history plus the request does
/// not fit the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryPass {
    /// After the pinned zone, which is cached and stays cached: only the
    /// request is decoded, and the next round (pinned, summary, recent)
    /// trims the cache back to the pinned prefix and decodes only what is new.
    #[default]
    PinnedPrefix,
    /// System + request on their own (nothing reused; the next round then
    /// decodes the pinned zone again). The arm the reuse is measured against.
    Standalone,
}

/// The prompt a summary pass used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryPrompt {
    /// The live history + the request with its log.
    LiveWithLog,
    /// The live history + the instruction alone (the log is the history above it).
    LiveInstruction,
    /// The cached pinned zone + the request with its log (cut to fit).
    PinnedPrefix,
    /// System + request, nothing reused.
    Standalone,
}

impl SummaryPrompt {
    /// Its name in events.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryPrompt::LiveWithLog => "live_with_log",
            SummaryPrompt::LiveInstruction => "live_instruction",
            SummaryPrompt::PinnedPrefix => "pinned_prefix",
            SummaryPrompt::Standalone => "standalone",
        }
    }
}

/// mf-forgetting's summariser over the backend.
struct ModelSummarizer<'a> {
    model: ModelCtx,
    live: &'a [ChatMessage],
    /// How many leading messages of `live` are the pinned zone.
    pinned: usize,
    tools: &'a [ToolSpec],
    pass: SummaryPass,
    used: Option<SummaryPrompt>,
}

impl ModelSummarizer<'_> {
    fn fits(&self, msgs: &[ChatMessage], tools: &[ToolSpec], out: u32) -> Result<bool, ForgettingError> {
        let n = self.model.count(msgs, tools).map_err(ForgettingError::Summarizer)?;
        Ok(n + out <= self.model.backend.context_size())
    }

    /// `prefix` + the request as one user turn, its log halved until the
    /// whole fits with `out` tokens of summary.
    fn cut_to_fit(&self, prefix: &[ChatMessage], tools: &[ToolSpec], system: Option<&str>, request: &SummaryRequest, out: u32) -> Result<Vec<ChatMessage>, ForgettingError> {
        let mut user = request.user.clone();
        loop {
            let mut msgs = prefix.to_vec();
            match system {
                Some(sys) => {
                    msgs.push(ChatMessage::system(sys.to_owned()));
                    msgs.push(ChatMessage::user(user.clone()));
                }
                None => msgs.push(ChatMessage::user(format!("{}\n\n{user}", request.system))),
            }
            if self.fits(&msgs, tools, out)? {
                return Ok(msgs);
            }
            let n = user.chars().count();
            if n < 200 {
                return Err(ForgettingError::Summarizer("the summary request does not fit the context window".into()));
            }
            user = user.chars().take(n / 2).collect();
        }
    }
}

impl Summarizer for ModelSummarizer<'_> {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
        let out = request.params.max_tokens;
        // Preferred: an append to the live prompt, so the cached prefix is
        // reused: first with the error-aware log, then (when that does not
        // fit) with the instruction alone, the history being right above it.
        let with_log = format!("{}\n\n{}", request.system, request.user);
        let without_log = format!("{}\n\n{}", request.system, instruction_only(&request.user));
        let mut chosen = None;
        for (instruction, kind) in [(with_log, SummaryPrompt::LiveWithLog), (without_log, SummaryPrompt::LiveInstruction)] {
            let mut live = self.live.to_vec();
            live.push(ChatMessage::user(instruction));
            if self.fits(&live, self.tools, out)? {
                chosen = Some((live, self.tools.to_vec(), kind));
                break;
            }
        }
        let (msgs, tools, kind) = match (chosen, self.pass) {
            (Some(c), _) => c,
            // The pinned zone (system prompt with the tools, the question) is
            // at the head of the cache and is kept by the compaction: append
            // the request to it. The compressible and recent tail of the
            // cache is trimmed, which the next round would do anyway.
            (None, SummaryPass::PinnedPrefix) => {
                let pinned = &self.live[..self.pinned.min(self.live.len())];
                (self.cut_to_fit(pinned, self.tools, None, request, out)?, self.tools.to_vec(), SummaryPrompt::PinnedPrefix)
            }
            (None, SummaryPass::Standalone) => (self.cut_to_fit(&[], &[], Some(&request.system), request, out)?, Vec::new(), SummaryPrompt::Standalone),
        };
        self.used = Some(kind);
        let g = self.model.generate(msgs, tools, sampling_of(request.params), Purpose::Summary).map_err(ForgettingError::Summarizer)?;
        if !g.tool_calls.is_empty() {
            return Err(ForgettingError::Summarizer("the summary pass called a tool".into()));
        }
        Ok(g.content)
    }
}

/// The summary request without its log (`mf_forgetting::summary::build_request`
/// writes "Original question … Log to summarise: … Also: …"): for the live
/// append, where the log is the history right above.
fn instruction_only(user: &str) -> String {
    const LOG: &str = "\n\nLog to summarise:\n";
    let Some(start) = user.find(LOG) else { return user.to_owned() };
    let rest = &user[start + LOG.len()..];
    let tail = rest.find("\n\nAlso:\n").or_else(|| rest.rfind("\nWrite the bullet points now.")).map_or("", |i| &rest[i..]);
    format!("{}\n\nLog to summarise: the investigation above, after the original question.{tail}", &user[..start])
}

/// v2.1's withholding test asked of the model (see the module docs).
pub struct ModelProbe {
    model: ModelCtx,
    question: String,
    reference: Option<Vec<String>>,
    /// Tokens of each probe answer.
    pub max_tokens: u32,
}

/// The checkable terms of an answer: tokens with a digit, and capitalised or
/// identifier-like words (`_`, `-`, `.` inside), lower-cased, deduplicated.
#[must_use]
pub fn checkable_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '"' | '\'' | '`')) {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if w.chars().count() < 2 {
            continue;
        }
        let has_digit = w.chars().any(|c| c.is_ascii_digit());
        let ident = w.contains(['_', '-', '.']) && w.chars().count() >= 4;
        let capital = w.chars().next().is_some_and(char::is_uppercase) && w.chars().count() >= 3;
        const STOP: [&str; 14] = ["the", "this", "that", "there", "these", "based", "answer", "yes", "it", "an", "in", "on", "according", "from"];
        if (has_digit || ident || capital) && !STOP.contains(&w.to_lowercase().as_str()) {
            let l = w.to_lowercase();
            if !out.contains(&l) {
                out.push(l);
            }
        }
    }
    out
}

impl ProbeEvaluator for ModelProbe {
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
        let mut msgs = chat_history(context);
        msgs.push(ChatMessage::user(format!(
            "Based only on the conversation above, answer concisely (no tool calls): {}",
            self.question
        )));
        let n = self.model.count(&msgs, &[]).map_err(ForgettingError::Evaluator)?;
        if n + self.max_tokens > self.model.backend.context_size() {
            return Err(ForgettingError::Evaluator("the probe does not fit the context window".into()));
        }
        let g = self.model.generate(msgs, Vec::new(), Sampling::greedy(self.max_tokens), Purpose::Probe).map_err(ForgettingError::Evaluator)?;
        let answer = g.content.to_lowercase();
        let reference = match &self.reference {
            Some(r) => r.clone(),
            None => {
                let r = checkable_terms(&g.content);
                if r.is_empty() {
                    return Err(ForgettingError::Evaluator("the model's answer on the full context has no checkable terms".into()));
                }
                self.reference = Some(r.clone());
                r
            }
        };
        let kept = reference.iter().filter(|t| answer.contains(t.as_str())).count();
        Ok(kept as f64 / reference.len() as f64)
    }

    fn describe(&self) -> String {
        "the model itself: Perf = share of the numbers/identifiers of its full-context answer that its answer keeps".into()
    }
}

/// What one compaction produced.
#[derive(Debug)]
pub struct CompactionRun {
    /// The plan (absent when planning itself failed).
    pub plan: Option<CompactionPlan>,
    /// The new history and report, or why the budget could not be restored.
    pub result: Result<Compaction, ForgettingError>,
    /// Which prompt the summary pass used (none without a pass).
    pub summary_pass: Option<SummaryPrompt>,
    /// Notes for the event stream (fallbacks of the ranking).
    pub notes: Vec<String>,
}

/// How v2.1 ranks in the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaSource {
    /// The withholding test asked of the model ([`ModelProbe`]).
    Model,
    /// Φ-weighted influence (the ablation arm; no extra generations).
    Phi,
}

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
        let counter = BlockingCounter { inner: &self.counter, handle: handle.clone() };
        let mut notes = Vec::new();
        let model = ModelCtx {
            handle: handle.clone(),
            backend: self.backend.clone(),
            cancel: self.cancel.clone(),
            events: self.events.clone(),
            round: self.round,
        };
        let question = mf_forgetting::message::question_index(&self.history)
            .and_then(|i| self.history.get(i))
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let mut config = self.config.clone();
        let planned = if self.strategy == StrategyKind::V21 && self.delta == DeltaSource::Model && config.ranking == Ranking::Withholding {
            let mut probe = ModelProbe { model: model.clone(), question, reference: None, max_tokens: 64 };
            match mf_forgetting::plan(self.strategy, &self.history, &self.budget, &counter, &config, Some(&mut probe)) {
                Ok(p) => Ok(p),
                Err(e) => {
                    notes.push(format!("v2.1 Δ by the model failed ({e}); ranked by Φ instead"));
                    config.ranking = Ranking::Phi;
                    mf_forgetting::plan(self.strategy, &self.history, &self.budget, &counter, &config, None)
                }
            }
        } else {
            if self.strategy == StrategyKind::V21 {
                config.ranking = Ranking::Phi;
            }
            mf_forgetting::plan(self.strategy, &self.history, &self.budget, &counter, &config, None)
        };
        let plan = match planned {
            Ok(p) => p,
            Err(e) => return CompactionRun { plan: None, result: Err(e), summary_pass: None, notes },
        };
        let _ = self.events.send(AgentEvent::compaction_started(self.round, self.tokens_before, &plan));
        let live = chat_history(&self.history);
        let pinned = mf_forgetting::message::question_index(&self.history).map_or(1, |i| i + 1);
        let mut summarizer = ModelSummarizer { model, live: &live, pinned, tools: &self.tools, pass: self.summary_pass, used: None };
        let result = mf_forgetting::apply(&plan, &self.history, &mut summarizer, &counter);
        let summary_pass = summarizer.used;
        CompactionRun { plan: Some(plan), result, summary_pass, notes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_mapping_round_trips_and_marks_errors() {
        let call = ToolCall { id: "c1".into(), name: "http".into(), arguments: json!({"url": "u"}) };
        let msgs = vec![
            ChatMessage::system("s"),
            ChatMessage::user("q"),
            ChatMessage::assistant_tool_calls("", vec![call]),
            ChatMessage::tool_result("c1", "http", "ERROR timeout: slow"),
            ChatMessage::tool_result("c1", "http", "200 ok"),
        ];
        let fm: Vec<Message> = msgs.iter().enumerate().map(|(i, c)| from_chat(&format!("m{i}"), c)).collect();
        assert!(fm[3].is_error);
        assert!(!fm[4].is_error);
        assert_eq!(fm[2].kind(), mf_forgetting::MessageKind::ToolCall);
        let back: Vec<ChatMessage> = fm.iter().map(to_chat).collect();
        assert_eq!(back, msgs);
    }

    #[test]
    fn the_live_instruction_drops_only_the_log() {
        let r = mf_forgetting::summary::build_request("Why?", "[m2 tool-result] x\n[m3 tool-error] y", &["fold m3".to_owned()], Default::default());
        let i = instruction_only(&r.user);
        assert!(i.starts_with("Original question: Why?"));
        assert!(!i.contains("[m2 tool-result]"));
        assert!(i.contains("- fold m3"));
        assert!(i.ends_with("Write the bullet points now."));
        let r = mf_forgetting::summary::build_request("Why?", "[m2 tool-result] x", &[], Default::default());
        assert!(instruction_only(&r.user).ends_with("after the original question.\nWrite the bullet points now."));
    }

    #[test]
    fn checkable_terms_keep_numbers_and_identifiers() {
        let t = checkable_terms("The owner is Alice; disk sda-3 at 97% on host web-01.prod, since 2024-03-01. it is full");
        assert_eq!(t, vec!["alice", "sda-3", "97", "web-01.prod", "2024-03-01"]);
        assert!(checkable_terms("nothing here at all").is_empty());
    }
}
