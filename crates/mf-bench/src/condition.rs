//! The conditions: each one is an `mf_forgetting` strategy run through
//! `plan` + `apply` — the code path the app uses — with the model as the
//! summariser and, for v2.1, the model as the withholding test's evaluator.
//!
//! `full` is the `none` strategy: the uncompressed ceiling.

use std::collections::BTreeSet;

use mf_forgetting::summary::SummaryRequest;
use mf_forgetting::{Budget, CompactionReport, ForgettingError, Message, PlanConfig, ProbeEvaluator, StrategyKind, Summarizer};
use mf_inference::{ChatMessage, Sampling, Thinking};
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::model::{ModelTokenCounter, Model, Purpose, to_chat};

/// A benchmark condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Condition {
    /// Uncompressed (the `none` strategy): the ceiling.
    #[serde(rename = "full")]
    Full,
    /// Keep the first message and the recent zone.
    #[serde(rename = "baseline")]
    Baseline,
    /// Old tool outputs replaced by a placeholder.
    #[serde(rename = "masking")]
    Masking,
    /// Measured forgetting v1.
    #[serde(rename = "v1")]
    V1,
    /// Dimension-aware v2.
    #[serde(rename = "v2")]
    V2,
    /// v2.1: withholding-test ranking with the model as evaluator.
    #[serde(rename = "v2.1")]
    V21,
}

impl Condition {
    /// All, in table order.
    pub const ALL: [Condition; 6] = [Condition::Full, Condition::Baseline, Condition::Masking, Condition::V1, Condition::V2, Condition::V21];

    /// The name on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Full => "full",
            Condition::Baseline => "baseline",
            Condition::Masking => "masking",
            Condition::V1 => "v1",
            Condition::V2 => "v2",
            Condition::V21 => "v2.1",
        }
    }

    /// The strategy behind it.
    pub fn strategy(self) -> StrategyKind {
        match self {
            Condition::Full => StrategyKind::None,
            Condition::Baseline => StrategyKind::Baseline,
            Condition::Masking => StrategyKind::Masking,
            Condition::V1 => StrategyKind::V1,
            Condition::V2 => StrategyKind::V2,
            Condition::V21 => StrategyKind::V21,
        }
    }

    /// Parses a comma-separated list (`all` for every condition).
    ///
    /// # Errors
    /// [`BenchError::InvalidSetting`] naming an unknown condition.
    pub fn parse_list(s: &str) -> Result<Vec<Condition>> {
        if s.trim() == "all" {
            return Ok(Condition::ALL.to_vec());
        }
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let c = Condition::ALL.into_iter().find(|c| c.as_str() == part).ok_or_else(|| BenchError::InvalidSetting {
                name: "conditions",
                reason: format!("unknown condition {part:?} (full, baseline, masking, v1, v2, v2.1, or all)"),
            })?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        if out.is_empty() {
            return Err(BenchError::InvalidSetting { name: "conditions", reason: "no condition given".to_owned() });
        }
        Ok(out)
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The model as the summary pass (METHOD.md §2: the request's own sampling,
/// thinking off). Failures go back to `apply`, which then uses the fallback.
pub struct ModelSummarizer<'a> {
    /// The model.
    pub model: &'a Model,
    /// Seed of the sampler.
    pub seed: u32,
}

impl Summarizer for ModelSummarizer<'_> {
    fn summarize(&mut self, request: &SummaryRequest) -> std::result::Result<String, ForgettingError> {
        let sampling = Sampling {
            temperature: request.params.temperature,
            top_p: request.params.top_p,
            top_k: 0,
            seed: self.seed,
            max_tokens: request.params.max_tokens,
            stop: Vec::new(),
            thinking: Thinking::Off,
        };
        let messages = vec![ChatMessage::system(request.system.clone()), ChatMessage::user(request.user.clone())];
        self.model
            .generate(Purpose::Summary, messages, sampling)
            .map(|g| g.content)
            .map_err(|e| ForgettingError::Summarizer(e.to_string()))
    }
}

/// The instruction the v2.1 evaluator asks under each context.
pub const EVALUATOR_PROMPT: &str = "Based on our conversation above, list the key findings so far (names, numbers, causes), concisely.";

/// v2.1's evaluator backed by the model, **without the benchmark's probes**
/// (ranking with the probes that will be scored would leak the test into the
/// compressor). Perf(ctx) is how much of the model's own recap under the full
/// context it reproduces under `ctx`: the recap is asked greedily
/// ([`EVALUATOR_PROMPT`]), and Perf is the fraction of the full-context
/// recap's content terms (numbers, identifiers, words of 4+ letters) present
/// in the recap under `ctx`. So Δ(m) = 1 − that fraction when m is withheld:
/// how much of what the model would report depends on m.
pub struct RecapEvaluator<'a> {
    model: &'a Model,
    max_tokens: u32,
    reference: Option<BTreeSet<String>>,
    /// Evaluations made.
    pub calls: usize,
}

impl<'a> RecapEvaluator<'a> {
    /// An evaluator whose recaps are at most `max_tokens` long.
    pub fn new(model: &'a Model, max_tokens: u32) -> Self {
        RecapEvaluator { model, max_tokens, reference: None, calls: 0 }
    }

    fn recap(&mut self, context: &[Message]) -> std::result::Result<String, ForgettingError> {
        self.calls += 1;
        let mut msgs: Vec<ChatMessage> = context.iter().map(to_chat).collect();
        msgs.push(ChatMessage::user(EVALUATOR_PROMPT));
        let g = self
            .model
            .generate(Purpose::Evaluator, msgs, Sampling::greedy(self.max_tokens))
            .map_err(|e| ForgettingError::Evaluator(e.to_string()))?;
        Ok(g.content)
    }
}

/// The content terms of a text: lower-cased tokens with a digit, or of 4+ letters.
pub fn content_terms(text: &str) -> BTreeSet<String> {
    let norm = crate::keyword::normalise(text);
    norm.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '-' || c == '_' || c == '%'))
        .map(|w| w.trim_matches(|c: char| c == '.' || c == '-' || c == '_'))
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()) || w.chars().filter(|c| c.is_alphabetic()).count() >= 4)
        .map(str::to_owned)
        .collect()
}

impl ProbeEvaluator for RecapEvaluator<'_> {
    fn perf(&mut self, context: &[Message]) -> std::result::Result<f64, ForgettingError> {
        let recap = self.recap(context)?;
        let terms = content_terms(&recap);
        match &self.reference {
            // The first call is on the full context (the strategy asks Perf(ctx) first).
            None => {
                let n = terms.len();
                self.reference = Some(terms);
                Ok(if n == 0 { 0.0 } else { 1.0 })
            }
            Some(r) if r.is_empty() => Ok(0.0),
            Some(r) => Ok(r.intersection(&terms).count() as f64 / r.len() as f64),
        }
    }

    fn describe(&self) -> String {
        format!("the model's own recap (greedy, ≤ {} tokens) under the full context vs without the unit; no benchmark probes", self.max_tokens)
    }
}

/// A compacted context and what it cost.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The history the probes are asked over.
    pub messages: Vec<Message>,
    /// `apply`'s report (`None` for `full`).
    pub report: Option<CompactionReport>,
    /// Prompt tokens of the history before, through the template.
    pub tokens_before: usize,
    /// Prompt tokens after.
    pub tokens_after: usize,
    /// v2.1: evaluator calls made.
    pub evaluator_calls: usize,
    /// Whether any per-message count was approximate.
    pub approximate_counts: bool,
    /// Wall time of the compaction, ms.
    pub compaction_ms: u64,
}

/// Compacts `messages` under `condition` at the scenario's end.
///
/// # Errors
/// The planner's or the model's errors (a failed summary is not an error:
/// `apply` falls back and reports it).
pub fn compact(model: &Model, condition: Condition, messages: &[Message], budget: &Budget, config: &PlanConfig, seed: u32, evaluator_tokens: u32) -> Result<Compacted> {
    let t = std::time::Instant::now();
    let counter = ModelTokenCounter::new(model);
    let chat: Vec<ChatMessage> = messages.iter().map(to_chat).collect();
    let tokens_before = model.count_conversation(&chat)?;
    if condition == Condition::Full {
        return Ok(Compacted {
            messages: messages.to_vec(),
            report: None,
            tokens_before,
            tokens_after: tokens_before,
            evaluator_calls: 0,
            approximate_counts: false,
            compaction_ms: t.elapsed().as_millis() as u64,
        });
    }
    let mut evaluator = RecapEvaluator::new(model, evaluator_tokens);
    let plan = if condition == Condition::V21 {
        mf_forgetting::plan(condition.strategy(), messages, budget, &counter, config, Some(&mut evaluator))?
    } else {
        mf_forgetting::plan(condition.strategy(), messages, budget, &counter, config, None)?
    };
    let mut summarizer = ModelSummarizer { model, seed };
    let c = mf_forgetting::apply(&plan, messages, &mut summarizer, &counter)?;
    let after: Vec<ChatMessage> = c.messages.iter().map(to_chat).collect();
    let tokens_after = model.count_conversation(&after)?;
    Ok(Compacted {
        messages: c.messages,
        report: Some(c.report),
        tokens_before,
        tokens_after,
        evaluator_calls: evaluator.calls,
        approximate_counts: counter.approximated.get(),
        compaction_ms: t.elapsed().as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn condition_lists_parse() {
        assert_eq!(Condition::parse_list("all").unwrap().len(), 6);
        assert_eq!(Condition::parse_list("v1, v2.1,v1").unwrap(), vec![Condition::V1, Condition::V21]);
        let e = Condition::parse_list("v3").unwrap_err().to_string();
        assert!(e.contains("v3"), "{e}");
        assert!(Condition::parse_list(" , ").is_err());
        for c in Condition::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::Value::String(c.as_str().to_owned()));
            assert_eq!(c.strategy().as_str(), if c == Condition::Full { "none" } else { c.as_str() });
        }
    }

    #[test]
    fn content_terms_keep_numbers_and_long_words() {
        let t = content_terms("Build 4,817 broke the checkout; p99 850 ms on us-east-1.");
        for w in ["build", "4817", "broke", "checkout", "p99", "850ms", "us-east-1"] {
            assert!(t.contains(w), "{w} missing from {t:?}");
        }
        assert!(!t.contains("the") && !t.contains("on"), "{t:?}");
    }
}
