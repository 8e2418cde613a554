//! The one model adapter: token counting, the summary pass and v2.1's
//! withholding test over an [`mf_inference::Backend`], used by the loop's
//! live compaction ([`crate::compact::CompactionJob`]) and by the
//! benchmark's compaction conditions (mf-bench), so that a benchmark table
//! describes the very requests the app sends.
//!
//! mf-forgetting is pure and synchronous; its [`mf_forgetting::TokenCounter`],
//! [`mf_forgetting::Summarizer`] and [`mf_forgetting::ProbeEvaluator`] are implemented here over the async
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
//!
//! One module each: `chat` (messages between the two vocabularies),
//! `counter`, `summary`, `probe`, `modes` (the settings' enums); this one
//! holds the calls they share ([`ModelCalls`]) and [`compact`], which
//! plans and applies with them.

mod chat;
mod counter;
mod modes;
mod probe;
mod summary;

use std::time::{Duration, Instant};

use mf_forgetting::{Budget, Compaction, CompactionPlan, ForgettingError, Message, PlanConfig, Ranking, StrategyKind};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvStats, Sampling, ScoreRequest, Scored, StopReason, ToolSpec, Usage};
use tokio::runtime::Handle;

pub use chat::{chat_history, from_chat, to_chat};
pub use counter::ModelCounter;
pub use modes::{DeltaSource, SummaryPass, UnknownName};
pub use probe::{ModelProbe, PROBE_MAX_TOKENS, checkable_terms};
pub use summary::{ModelSummarizer, SummaryPrompt, summary_sampling};

use crate::events::Purpose;

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
    /// Answer v2.1's withholding trials in one branched call
    /// ([`Backend::generate_branches`]) instead of one after the other.
    pub branched: bool,
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

    /// Runs several generations as one branched call (no tools); each is
    /// reported to `on_call` with an even share of the call's time.
    fn generate_branches(&self, requests: Vec<(Vec<ChatMessage>, Sampling)>, purpose: Purpose) -> Result<Vec<Generation>, String> {
        if self.cancel.is_cancelled() {
            return Err("cancelled".into());
        }
        let t = Instant::now();
        let n = requests.len().max(1) as u32;
        let reqs = requests.into_iter().map(|(messages, sampling)| GenerateRequest { messages, tools: Vec::new(), sampling }).collect();
        let gs = self.handle.block_on(self.backend.generate_branches(reqs, self.cancel.clone())).map_err(|e| e.to_string())?;
        for g in &gs {
            (self.on_call)(purpose, g, t.elapsed() / n);
        }
        if gs.iter().any(|g| g.stop_reason == StopReason::Cancelled) {
            return Err("cancelled".into());
        }
        Ok(gs)
    }

    /// Scores `continuations` by log-probability after `messages`; each is
    /// reported to `on_call` as a call that generated nothing (its prompt
    /// and decoded tokens, an even share of the time).
    fn score(&self, messages: Vec<ChatMessage>, continuations: Vec<String>, purpose: Purpose) -> Result<Vec<Scored>, String> {
        if self.cancel.is_cancelled() {
            return Err("cancelled".into());
        }
        let t = Instant::now();
        let req = ScoreRequest { messages, tools: Vec::new(), continuations };
        let scored = self.handle.block_on(self.backend.score(req, self.cancel.clone())).map_err(|e| e.to_string())?;
        let n = scored.len().max(1) as u32;
        for s in &scored {
            let prompt_tokens = s.prompt_tokens + s.tokens.len() as u32;
            let kv = KvStats { prompt_tokens, decoded: s.decoded, reused: prompt_tokens.saturating_sub(s.decoded), ..KvStats::default() };
            let g = Generation {
                raw_text: String::new(),
                content: String::new(),
                thinking: None,
                tool_calls: Vec::new(),
                tool_parse_error: None,
                stop_reason: StopReason::EndOfTurn,
                usage: Usage { kv, completion_tokens: 0, thinking_tokens: 0 },
            };
            (self.on_call)(purpose, &g, t.elapsed() / n);
        }
        if self.cancel.is_cancelled() {
            return Err("cancelled".into());
        }
        Ok(scored)
    }

    fn count(&self, msgs: &[ChatMessage], tools: &[ToolSpec]) -> Result<u32, String> {
        self.handle.block_on(self.backend.count_tokens(msgs, tools)).map_err(|e| e.to_string())
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
    /// The model that wrote the summary (none without a pass).
    pub summary_model: Option<String>,
    /// Notes for the event stream (fallbacks of the ranking).
    pub notes: Vec<String>,
    /// Withholding-test calls made by the model.
    pub probe_calls: usize,
}

/// Plans and applies one compaction of `history` with the model: the one
/// code path of the loop and of the benchmark. The summary pass runs on
/// `summariser` when one is given (another engine or model), else on
/// `model`. `on_plan` sees the plan between the two steps (the loop emits
/// `compaction_started` there). Blocking: call it off the runtime's worker
/// threads.
pub fn compact(
    model: ModelCalls<'_>,
    summariser: Option<ModelCalls<'_>>,
    counter: &ModelCounter,
    history: &[Message],
    spec: &CompactionSpec,
    on_plan: &mut dyn FnMut(&CompactionPlan),
) -> CompactionRun {
    let counter = counter.blocking(model.handle);
    // No call of the loop leaves less than `G` for its reply (see ModelSummarizer::new).
    let reserve = u32::try_from(spec.budget.reserve).unwrap_or(u32::MAX);
    let mut notes = Vec::new();
    let mut probe_calls = 0;
    let question = mf_forgetting::message::question_index(history).and_then(|i| history.get(i)).map(|m| m.content.clone()).unwrap_or_default();
    let mut config = spec.config.clone();
    let by_model = matches!(spec.delta, DeltaSource::Model | DeltaSource::Likelihood);
    let planned = if spec.strategy == StrategyKind::V21 && by_model && config.ranking == Ranking::Withholding {
        let mut probe = ModelProbe::new(model, question.clone(), spec.probe_max_tokens).with_reserve(reserve);
        if spec.delta == DeltaSource::Likelihood {
            probe = probe.by_likelihood();
        }
        let mut first = mf_forgetting::plan(spec.strategy, history, &spec.budget, &counter, &config, Some(&mut probe));
        probe_calls = probe.calls;
        if probe.scoring_unsupported {
            // The engine cannot score: the same test, asked of the model's answers.
            notes.push("v2.1 Δ by likelihood: this engine cannot score; the withholding test compared the model's answers instead".to_owned());
            let mut by_answers = ModelProbe::new(model, question.clone(), spec.probe_max_tokens).with_reserve(reserve);
            first = mf_forgetting::plan(spec.strategy, history, &spec.budget, &counter, &config, Some(&mut by_answers));
            probe_calls += by_answers.calls;
        }
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
        Err(e) => return CompactionRun { plan: None, result: Err(e), summary_pass: None, summary_model: None, notes, probe_calls },
    };
    on_plan(&plan);
    let writer = summariser.unwrap_or(model);
    let mut summarizer = ModelSummarizer::new(writer, history, &spec.tools, spec.summary_pass, reserve);
    let result = mf_forgetting::apply(&plan, history, &mut summarizer, &counter);
    let summary_model = summarizer.used.map(|_| writer.backend.model_info().name);
    CompactionRun { plan: Some(plan), result, summary_pass: summarizer.used, summary_model, notes, probe_calls }
}
