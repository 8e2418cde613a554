//! v2.1's withholding test asked of the model. Two ways to measure
//! Perf(ctx), both anchored on the model's own greedy answer to the question
//! over the full context (the first evaluation):
//! - *terms*: an answer is generated under each context and
//!   Perf is the share of the full-context answer's checkable terms
//!   (numbers, identifiers, names) it keeps — a step function of a short
//!   generation;
//! - *likelihood* (the default, [`super::DeltaSource`]): no answer is generated per trial; the full-context
//!   answer is scored by log-probability after each context and Perf is its
//!   per-token probability (the geometric mean), a continuous measure on
//!   the same 0–1 scale, at the cost of a prefill instead of a generation.

use mf_forgetting::{ForgettingError, Message, ProbeEvaluator};
use mf_inference::{ChatMessage, Generation, Sampling};

use super::{ModelCalls, chat_history};
use crate::events::Purpose;

/// How an engine's "cannot score" error reads (`InferenceError::ScoringUnsupported`).
const SCORING_UNSUPPORTED: &str = "scoring not supported by this engine";

/// Tokens of each answer of the withholding test.
pub const PROBE_MAX_TOKENS: u32 = 64;

/// The instruction before the question in each withholding-test call.
const PROBE_PROMPT: &str = include_str!("prompts/withholding_probe.txt");

/// v2.1's withholding test asked of the model (see the module docs).
pub struct ModelProbe<'a> {
    model: ModelCalls<'a>,
    question: String,
    reference: Option<Vec<String>>,
    /// The full-context answer, in likelihood mode once it is generated.
    answer: Option<String>,
    likelihood: bool,
    max_tokens: u32,
    /// The loop's reply reserve `G`: a test's prompt leaves at least this
    /// much room after it (no call of the loop goes over `C − G`).
    reserve: u32,
    /// Probe calls made.
    pub calls: usize,
    /// Set when a likelihood trial found that the engine cannot score.
    pub scoring_unsupported: bool,
}

impl std::fmt::Debug for ModelProbe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelProbe").field("question", &self.question).field("calls", &self.calls).finish_non_exhaustive()
    }
}

impl<'a> ModelProbe<'a> {
    /// A test that asks `question`, each answer at most `max_tokens` long.
    pub fn new(model: ModelCalls<'a>, question: String, max_tokens: u32) -> Self {
        ModelProbe { model, question, reference: None, answer: None, likelihood: false, max_tokens, reserve: 0, calls: 0, scoring_unsupported: false }
    }

    /// Leaves room for `reserve` tokens after every test's prompt, or for
    /// its answer if that is longer (`reserve`: the loop's `G`).
    #[must_use]
    pub fn with_reserve(mut self, reserve: u32) -> Self {
        self.reserve = reserve;
        self
    }

    /// Measures Perf by likelihood (see the module docs).
    #[must_use]
    pub fn by_likelihood(mut self) -> Self {
        self.likelihood = true;
        self
    }

    /// Perf by likelihood: the full-context answer's per-token probability after `msgs`.
    fn likelihood_perf(&mut self, msgs: Vec<ChatMessage>) -> Result<f64, ForgettingError> {
        let answer = match &self.answer {
            Some(a) => a.clone(),
            None => {
                let g = self.model.generate(msgs.clone(), Vec::new(), Sampling::greedy(self.max_tokens), Purpose::Probe).map_err(ForgettingError::Evaluator)?;
                let a = g.content.trim().to_owned();
                if a.is_empty() {
                    return Err(ForgettingError::Evaluator("the model's answer on the full context is empty".into()));
                }
                self.answer = Some(a.clone());
                a
            }
        };
        let scored = self.model.score(msgs, vec![answer], Purpose::Probe).map_err(|e| {
            self.scoring_unsupported |= e.starts_with(SCORING_UNSUPPORTED);
            ForgettingError::Evaluator(e)
        })?;
        let lp = scored.first().and_then(|s| s.nll_per_token()).ok_or_else(|| ForgettingError::Evaluator("the answer has no tokens to score".into()))?;
        Ok((-lp).exp())
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

impl ModelProbe<'_> {
    /// The messages of one test over `context`, checked to fit the window.
    fn messages(&self, context: &[Message]) -> Result<Vec<ChatMessage>, ForgettingError> {
        let mut msgs = chat_history(context);
        msgs.push(ChatMessage::user(format!("{PROBE_PROMPT}{}", self.question)));
        let n = self.model.count(&msgs, &[]).map_err(ForgettingError::Evaluator)?;
        if n.saturating_add(self.max_tokens.max(self.reserve)) > self.model.backend.context_size() {
            return Err(ForgettingError::Evaluator("the probe does not fit the context window".into()));
        }
        Ok(msgs)
    }

    /// Perf of one answer; the first answer (the full context's) sets the reference.
    fn score(&mut self, g: &Generation) -> Result<f64, ForgettingError> {
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
}

impl ProbeEvaluator for ModelProbe<'_> {
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
        let msgs = self.messages(context)?;
        self.calls += 1;
        if self.likelihood {
            return self.likelihood_perf(msgs);
        }
        let g = self.model.generate(msgs, Vec::new(), Sampling::greedy(self.max_tokens), Purpose::Probe).map_err(ForgettingError::Evaluator)?;
        self.score(&g)
    }

    fn perf_many(&mut self, contexts: &[Vec<Message>]) -> Result<Vec<f64>, ForgettingError> {
        if self.likelihood || !self.model.branched || contexts.len() < 2 || self.reference.is_none() {
            return contexts.iter().map(|c| self.perf(c)).collect();
        }
        let mut requests = Vec::with_capacity(contexts.len());
        for c in contexts {
            requests.push((self.messages(c)?, Sampling::greedy(self.max_tokens)));
        }
        self.calls += requests.len();
        let gs = self.model.generate_branches(requests, Purpose::Probe).map_err(ForgettingError::Evaluator)?;
        gs.iter().map(|g| self.score(g)).collect()
    }

    fn describe(&self) -> String {
        if self.likelihood {
            "the model itself by likelihood: Perf = per-token probability of its full-context answer after the context".into()
        } else {
            "the model itself: Perf = share of the numbers/identifiers of its full-context answer that its answer keeps".into()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn an_engine_that_cannot_score_is_recognised_by_its_error() {
        let e = mf_inference::InferenceError::ScoringUnsupported { backend: "ollama".into(), reason: "no prompt log-probabilities".into() };
        assert!(e.to_string().starts_with(SCORING_UNSUPPORTED), "{e}");
    }

    #[test]
    fn checkable_terms_keep_numbers_and_identifiers() {
        let t = checkable_terms("The owner is Alice; disk sda-3 at 97% on host web-01.prod, since 2024-03-01. it is full");
        assert_eq!(t, vec!["alice", "sda-3", "97", "web-01.prod", "2024-03-01"]);
        assert!(checkable_terms("nothing here at all").is_empty());
    }

    #[test]
    fn the_probe_prompt_is_the_file_without_a_trailing_newline() {
        assert!(PROBE_PROMPT.ends_with(": "), "{PROBE_PROMPT:?}");
    }
}
