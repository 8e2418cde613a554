//! The one model adapter: token counting, the summary pass and v2.1's
//! withholding test over an [`mf_inference::Backend`], used by the loop's
//! live compaction ([`crate::compact::CompactionJob`]) and by the
//! benchmark's compaction conditions (mf-bench), so that a benchmark table
//! describes the very requests the app sends.
//!
//! mf-forgetting is pure and synchronous; its [`TokenCounter`],
//! [`Summarizer`] and [`ProbeEvaluator`] are implemented here over the async
//! backend, each call waiting on a tokio [`Handle`]. Call [`compact`] off the
//! runtime's worker threads: the loop runs it on a blocking thread
//! ([`tokio::task::spawn_blocking`]), the benchmark on its own thread with a
//! runtime of its own.
//!
//! - Tokens ([`ModelCounter`]): each message rendered alone with the model's
//!   template (the system message with the tool descriptions), cached by
//!   content. This over-counts a little (a generation prompt per message),
//!   which errs on the safe side of the budget.
//! - Summary pass (v1, v2, v2.1): preferably an append to the live prompt
//!   (the whole history as it sits in the KV cache, then the summary request
//!   as a user turn) so only the request is decoded; when that plus the
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
//!   room) the plan falls back to v2.1's Φ ranking and says so in
//!   [`CompactionRun::notes`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mf_forgetting::{
    ApproxTokenCounter, Budget, Compaction, CompactionPlan, ForgettingError, Message, PlanConfig, ProbeEvaluator, Ranking,
    StrategyKind, Summarizer, SummaryRequest, TokenCounter,
};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, Role, Sampling, StopReason, ToolCall, ToolSpec};
use tokio::runtime::Handle;

use crate::events::Purpose;

/// Tokens of each answer of the withholding test.
pub const PROBE_MAX_TOKENS: u32 = 64;

/// The instruction before the question in each withholding-test call.
const PROBE_PROMPT: &str = include_str!("prompts/withholding_probe.txt");

/// What replaces the log in the live summary request: the log is the
/// history right above it.
const LIVE_LOG_POINTER: &str = include_str!("prompts/live_log_pointer.txt");

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
    approximated: AtomicBool,
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
        ModelCounter { backend, tools, cache: Mutex::new(HashMap::new()), approximated: AtomicBool::new(false) }
    }

    /// Whether any count so far fell back to the offline estimate (the
    /// template could not render a lone message, or the backend failed).
    pub fn approximated(&self) -> bool {
        self.approximated.load(Ordering::Relaxed)
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

    fn settle(&self, key: String, m: &Message, counted: Result<u32, mf_inference::InferenceError>) -> usize {
        let n = match counted {
            Ok(n) => n as usize,
            Err(e) => {
                tracing::debug!("token count of one message failed, estimating: {e}");
                self.approximated.store(true, Ordering::Relaxed);
                ApproxTokenCounter.count_message(m)
            }
        };
        self.store(key, n);
        n
    }

    /// Tokens of one message (async side). A template that cannot render a
    /// lone message falls back to the offline estimate.
    pub async fn count_async(&self, m: &Message) -> usize {
        let key = cache_key(m);
        if let Some(n) = self.cached(&key) {
            return n;
        }
        let counted = self.backend.count_tokens(&[to_chat(m)], self.tools_for(m)).await;
        self.settle(key, m, counted)
    }

    /// The sync side, for mf-forgetting: counts by waiting on `handle`.
    /// Only use it off the runtime's worker threads.
    pub fn blocking<'a>(&'a self, handle: &'a Handle) -> impl TokenCounter + 'a {
        BlockingCounter { inner: self, handle }
    }
}

struct BlockingCounter<'a> {
    inner: &'a ModelCounter,
    handle: &'a Handle,
}

impl TokenCounter for BlockingCounter<'_> {
    fn count_message(&self, m: &Message) -> usize {
        let key = cache_key(m);
        if let Some(n) = self.inner.cached(&key) {
            return n;
        }
        let counted = self.handle.block_on(self.inner.backend.count_tokens(&[to_chat(m)], self.inner.tools_for(m)));
        self.inner.settle(key, m, counted)
    }
}

/// The summary pass's sampling: the request's own (METHOD.md §2), thinking off.
#[must_use]
pub fn summary_sampling(p: mf_forgetting::SamplingParams) -> Sampling {
    Sampling { temperature: p.temperature, top_p: p.top_p, max_tokens: p.max_tokens, ..Sampling::default() }
}

/// Called after every generation the adapter makes, with its purpose and
/// wall time: the loop turns it into a `kv` event, the benchmark into its
/// call figures.
pub type CallHook<'a> = &'a (dyn Fn(Purpose, &Generation, Duration) + 'a);

/// The model as the adapter's blocking calls see it.
#[derive(Clone, Copy)]
pub struct ModelCalls<'a> {
    /// The runtime the backend's futures are driven on.
    pub handle: &'a Handle,
    /// The model.
    pub backend: &'a dyn Backend,
    /// Cancels generations: once set, no call starts and a cut-off reply is an error.
    pub cancel: &'a CancelToken,
    /// Told of every generation.
    pub on_call: CallHook<'a>,
}

impl std::fmt::Debug for ModelCalls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCalls").finish_non_exhaustive()
    }
}

impl ModelCalls<'_> {
    /// Runs one generation (no tools parsed when `tools` is empty).
    fn generate(&self, messages: Vec<ChatMessage>, tools: Vec<ToolSpec>, sampling: Sampling, purpose: Purpose) -> Result<Generation, String> {
        if self.cancel.is_cancelled() {
            return Err("cancelled".into());
        }
        let t = Instant::now();
        let req = GenerateRequest { messages, tools, sampling };
        let g = self.handle.block_on(self.backend.generate(req, None, self.cancel.clone())).map_err(|e| e.to_string())?;
        (self.on_call)(purpose, &g, t.elapsed());
        if g.stop_reason == StopReason::Cancelled {
            return Err("cancelled".into());
        }
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

impl SummaryPass {
    /// Every mode, for a command line's choices.
    pub const ALL: [SummaryPass; 2] = [SummaryPass::PinnedPrefix, SummaryPass::Standalone];

    /// Its name on a command line, in settings and in events.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryPass::PinnedPrefix => "pinned_prefix",
            SummaryPass::Standalone => "standalone",
        }
    }
}

/// How v2.1 ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaSource {
    /// The withholding test asked of the model ([`ModelProbe`]).
    #[default]
    Model,
    /// Φ-weighted influence (the ablation arm; no extra generations).
    Phi,
}

impl DeltaSource {
    /// Every source, for a command line's choices.
    pub const ALL: [DeltaSource; 2] = [DeltaSource::Model, DeltaSource::Phi];

    /// Its name on a command line and in settings.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            DeltaSource::Model => "model",
            DeltaSource::Phi => "phi",
        }
    }
}

/// A name that is none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?} (one of: {choices})")]
pub struct UnknownName {
    /// What was being parsed.
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// The accepted names, comma-separated.
    pub choices: String,
}

macro_rules! named_enum {
    ($t:ty, $what:literal) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $t {
            type Err = UnknownName;

            /// Parses its name (`-` and `_` alike, case ignored): the one
            /// parser every face uses (clap's `value_parser!` picks it up).
            fn from_str(s: &str) -> Result<Self, UnknownName> {
                let norm = s.trim().to_ascii_lowercase().replace('-', "_");
                <$t>::ALL.into_iter().find(|v| v.as_str() == norm).ok_or_else(|| UnknownName {
                    what: $what,
                    given: s.to_owned(),
                    choices: <$t>::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", "),
                })
            }
        }
    };
}

named_enum!(SummaryPass, "summary pass");
named_enum!(DeltaSource, "delta source");

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

/// mf-forgetting's summariser over the model (see the module docs).
pub struct ModelSummarizer<'a> {
    model: ModelCalls<'a>,
    live: Vec<ChatMessage>,
    /// How many leading messages of `live` are the pinned zone.
    pinned: usize,
    tools: &'a [ToolSpec],
    pass: SummaryPass,
    /// Which prompt the last pass used.
    pub used: Option<SummaryPrompt>,
}

impl std::fmt::Debug for ModelSummarizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSummarizer").field("pass", &self.pass).field("used", &self.used).finish_non_exhaustive()
    }
}

impl<'a> ModelSummarizer<'a> {
    /// A summariser for compacting `history` (the live prompt, offered `tools`).
    pub fn new(model: ModelCalls<'a>, history: &[Message], tools: &'a [ToolSpec], pass: SummaryPass) -> Self {
        let pinned = mf_forgetting::message::question_index(history).map_or(1, |i| i + 1);
        ModelSummarizer { model, live: chat_history(history), pinned, tools, pass, used: None }
    }

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

    /// The request the pass sends for `request` (and which prompt that is):
    /// what [`Summarizer::summarize`] generates from.
    ///
    /// # Errors
    /// When counting fails or nothing fits the window.
    pub fn request_for(&self, request: &SummaryRequest) -> Result<(GenerateRequest, SummaryPrompt), ForgettingError> {
        let out = request.params.max_tokens;
        // Preferred: an append to the live prompt, so the cached prefix is
        // reused: first with the error-aware log, then (when that does not
        // fit) with the instruction alone, the history being right above it.
        let with_log = format!("{}\n\n{}", request.system, request.user);
        let without_log = format!("{}\n\n{}", request.system, instruction_only(&request.user));
        let mut chosen = None;
        for (instruction, kind) in [(with_log, SummaryPrompt::LiveWithLog), (without_log, SummaryPrompt::LiveInstruction)] {
            let mut live = self.live.clone();
            live.push(ChatMessage::user(instruction));
            if self.fits(&live, self.tools, out)? {
                chosen = Some((live, self.tools.to_vec(), kind));
                break;
            }
        }
        let (messages, tools, kind) = match (chosen, self.pass) {
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
        Ok((GenerateRequest { messages, tools, sampling: summary_sampling(request.params) }, kind))
    }
}

impl Summarizer for ModelSummarizer<'_> {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
        let (req, kind) = self.request_for(request)?;
        self.used = Some(kind);
        let offered_tools = !req.tools.is_empty();
        let g = self.model.generate(req.messages, req.tools, req.sampling, Purpose::Summary).map_err(ForgettingError::Summarizer)?;
        let called_a_tool = !g.tool_calls.is_empty() || g.tool_parse_error.is_some();
        if !called_a_tool {
            return Ok(g.content);
        }
        if !offered_tools {
            return Err(ForgettingError::Summarizer("the summary pass called a tool".into()));
        }
        // A prompt that offers tools (the live history, the pinned zone) can
        // draw a small model into calling one instead of summarising: ask
        // once more with the request alone and no tools, before the
        // 500-character fallback.
        let out = request.params.max_tokens;
        let messages = self.cut_to_fit(&[], &[], Some(&request.system), request, out)?;
        self.used = Some(SummaryPrompt::Standalone);
        let g = self.model.generate(messages, Vec::new(), summary_sampling(request.params), Purpose::Summary).map_err(ForgettingError::Summarizer)?;
        if !g.tool_calls.is_empty() || g.tool_parse_error.is_some() {
            return Err(ForgettingError::Summarizer("the summary pass called a tool, also when asked without tools".into()));
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
    format!("{}\n\n{LIVE_LOG_POINTER}{tail}", &user[..start])
}

/// v2.1's withholding test asked of the model (see the module docs).
pub struct ModelProbe<'a> {
    model: ModelCalls<'a>,
    question: String,
    reference: Option<Vec<String>>,
    max_tokens: u32,
    /// Probe calls made.
    pub calls: usize,
}

impl std::fmt::Debug for ModelProbe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelProbe").field("question", &self.question).field("calls", &self.calls).finish_non_exhaustive()
    }
}

impl<'a> ModelProbe<'a> {
    /// A test that asks `question`, each answer at most `max_tokens` long.
    pub fn new(model: ModelCalls<'a>, question: String, max_tokens: u32) -> Self {
        ModelProbe { model, question, reference: None, max_tokens, calls: 0 }
    }
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

impl ProbeEvaluator for ModelProbe<'_> {
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
        let mut msgs = chat_history(context);
        msgs.push(ChatMessage::user(format!("{PROBE_PROMPT}{}", self.question)));
        let n = self.model.count(&msgs, &[]).map_err(ForgettingError::Evaluator)?;
        if n + self.max_tokens > self.model.backend.context_size() {
            return Err(ForgettingError::Evaluator("the probe does not fit the context window".into()));
        }
        self.calls += 1;
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

/// What one compaction is asked to do, beside the history.
#[derive(Debug, Clone)]
pub struct CompactionSpec {
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
    /// Tools offered (the live prompt of the summary pass carries them).
    pub tools: Vec<ToolSpec>,
    /// Tokens of each withholding-test answer ([`PROBE_MAX_TOKENS`]).
    pub probe_max_tokens: u32,
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
    /// Withholding-test calls made by the model.
    pub probe_calls: usize,
}

/// Plans and applies one compaction of `history` with the model: the one
/// code path of the loop and of the benchmark. `on_plan` sees the plan
/// between the two steps (the loop emits `compaction_started` there).
/// Blocking: call it off the runtime's worker threads.
pub fn compact(model: ModelCalls<'_>, counter: &ModelCounter, history: &[Message], spec: &CompactionSpec, on_plan: &mut dyn FnMut(&CompactionPlan)) -> CompactionRun {
    let counter = counter.blocking(model.handle);
    let mut notes = Vec::new();
    let mut probe_calls = 0;
    let question = mf_forgetting::message::question_index(history).and_then(|i| history.get(i)).map(|m| m.content.clone()).unwrap_or_default();
    let mut config = spec.config.clone();
    let planned = if spec.strategy == StrategyKind::V21 && spec.delta == DeltaSource::Model && config.ranking == Ranking::Withholding {
        let mut probe = ModelProbe::new(model, question, spec.probe_max_tokens);
        let first = mf_forgetting::plan(spec.strategy, history, &spec.budget, &counter, &config, Some(&mut probe));
        probe_calls = probe.calls;
        match first {
            Ok(p) => Ok(p),
            Err(e) => {
                notes.push(format!("v2.1 Δ by the model failed ({e}); ranked by Φ instead"));
                config.ranking = Ranking::Phi;
                mf_forgetting::plan(spec.strategy, history, &spec.budget, &counter, &config, None)
            }
        }
    } else {
        if spec.strategy == StrategyKind::V21 {
            config.ranking = Ranking::Phi;
        }
        mf_forgetting::plan(spec.strategy, history, &spec.budget, &counter, &config, None)
    };
    let plan = match planned {
        Ok(p) => p,
        Err(e) => return CompactionRun { plan: None, result: Err(e), summary_pass: None, notes, probe_calls },
    };
    on_plan(&plan);
    let mut summarizer = ModelSummarizer::new(model, history, &spec.tools, spec.summary_pass);
    let result = mf_forgetting::apply(&plan, history, &mut summarizer, &counter);
    CompactionRun { plan: Some(plan), result, summary_pass: summarizer.used, notes, probe_calls }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
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

    #[test]
    fn modes_parse_from_one_parser() {
        for p in SummaryPass::ALL {
            assert_eq!(p.as_str().parse::<SummaryPass>().unwrap(), p);
            assert_eq!(serde_json::to_value(p).unwrap(), json!(p.as_str()));
        }
        for d in DeltaSource::ALL {
            assert_eq!(d.to_string().parse::<DeltaSource>().unwrap(), d);
            assert_eq!(serde_json::to_value(d).unwrap(), json!(d.as_str()));
        }
        assert_eq!("pinned-prefix".parse::<SummaryPass>().unwrap(), SummaryPass::PinnedPrefix);
        assert_eq!(" PHI ".parse::<DeltaSource>().unwrap(), DeltaSource::Phi);
        let e = "live".parse::<SummaryPass>().unwrap_err().to_string();
        assert!(e.contains("\"live\"") && e.contains("pinned_prefix, standalone"), "{e}");
        assert!("tau".parse::<DeltaSource>().is_err());
    }

    #[test]
    fn prompts_are_the_files_without_a_trailing_newline() {
        assert!(PROBE_PROMPT.ends_with(": "), "{PROBE_PROMPT:?}");
        assert!(!LIVE_LOG_POINTER.ends_with('\n'), "{LIVE_LOG_POINTER:?}");
    }
}
