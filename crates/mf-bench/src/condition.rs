//! The conditions: each one is an `mf_forgetting` strategy compacted by
//! the app's own adapter (`mf_agent::model::compact`, through
//! [`Model::compact`]): the same token counts, the same summary request
//! (the live history plus the request, else the pinned prefix) and, for
//! v2.1, the same withholding test (the model answers the scenario's
//! question under each context; Φ when that cannot run).
//!
//! `full` is the `none` strategy: the uncompressed ceiling.

use mf_agent::model::{CompactionSpec, DeltaSource, SummaryPass};
use mf_forgetting::{Budget, CompactionReport, Message, PlanConfig, StrategyKind};
use mf_inference::ChatMessage;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::model::{Model, to_chat};

/// A benchmark condition: one of mf-forgetting's strategies, under the name
/// the results give it (`none` is `full`, the uncompressed ceiling). Built
/// from [`StrategyKind`], so a strategy added there is a condition here,
/// in the same table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub struct Condition(StrategyKind);

impl Condition {
    /// Uncompressed (the `none` strategy): the ceiling.
    #[allow(non_upper_case_globals)] // read where it is compared as the variant it was
    pub const Full: Condition = Condition(StrategyKind::None);

    /// v2.1, which the runner orders right after `full` (its withholding
    /// tests reuse the context `full`'s probes left in the cache).
    pub const V21: Condition = Condition(StrategyKind::V21);

    /// All, in table order: mf-forgetting's strategies in theirs.
    pub const ALL: [Condition; StrategyKind::ALL.len()] = {
        let mut all = [Condition::Full; StrategyKind::ALL.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = Condition(StrategyKind::ALL[i]);
            i += 1;
        }
        all
    };

    /// The condition that compacts with `strategy`.
    #[must_use]
    pub const fn of(strategy: StrategyKind) -> Condition {
        Condition(strategy)
    }

    /// The name on the command line and in results.
    pub fn as_str(self) -> &'static str {
        if self == Condition::Full { "full" } else { self.0.as_str() }
    }

    /// The strategy behind it.
    pub fn strategy(self) -> StrategyKind {
        self.0
    }

    /// Every name, comma-separated (for messages).
    #[must_use]
    pub fn names() -> String {
        Condition::ALL.map(Condition::as_str).join(", ")
    }

    /// Parses a comma-separated list (`all` for every condition).
    ///
    /// # Errors
    /// [`BenchError::UnknownCondition`]; [`BenchError::NothingChosen`] for an empty list.
    pub fn parse_list(s: &str) -> Result<Vec<Condition>> {
        if s.trim() == "all" {
            return Ok(Condition::ALL.to_vec());
        }
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let c = part.parse()?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        if out.is_empty() {
            return Err(BenchError::NothingChosen("condition"));
        }
        Ok(out)
    }
}

impl std::str::FromStr for Condition {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Condition> {
        Condition::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| BenchError::UnknownCondition { given: s.to_owned(), known: Condition::names() })
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

serde_by_name!(Condition);

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
    /// v2.1: withholding-test calls made.
    pub evaluator_calls: usize,
    /// What the adapter noted (v2.1 ranked by Φ because the test could not run).
    pub notes: Vec<String>,
    /// Which prompt the summary pass used (`live_with_log`, …), if one ran.
    pub summary_prompt: Option<&'static str>,
    /// Whether any per-message count was approximate.
    pub approximate_counts: bool,
    /// Wall time of the compaction, ms.
    pub compaction_ms: u64,
    /// v2.1: the withholding test's `Δ` per compressible message id (the
    /// plan's; units withheld as one block share it). Empty otherwise.
    pub deltas: std::collections::BTreeMap<String, f64>,
}

/// How the benchmark compacts: the app's defaults (the pinned-prefix pass),
/// v2.1's Δ from `delta`, no tools (scenarios offer none).
#[must_use]
pub fn spec(condition: Condition, budget: &Budget, config: &PlanConfig, probe_max_tokens: u32, delta: DeltaSource) -> CompactionSpec {
    CompactionSpec {
        strategy: condition.strategy(),
        budget: *budget,
        config: config.clone(),
        delta,
        summary_pass: SummaryPass::PinnedPrefix,
        tools: Vec::new(),
        probe_max_tokens,
    }
}

/// Compacts `messages` under `condition` at the scenario's end.
///
/// # Errors
/// The planner's or the model's errors (a failed summary is not an error:
/// `apply` falls back and reports it); [`BenchError::Cancelled`].
pub fn compact(
    model: &Model,
    condition: Condition,
    messages: &[Message],
    budget: &Budget,
    config: &PlanConfig,
    probe_max_tokens: u32,
    delta: DeltaSource,
) -> Result<Compacted> {
    let t = std::time::Instant::now();
    let chat: Vec<ChatMessage> = messages.iter().map(to_chat).collect();
    let tokens_before = model.count_conversation(&chat)?;
    if condition == Condition::Full {
        return Ok(Compacted {
            messages: messages.to_vec(),
            report: None,
            tokens_before,
            tokens_after: tokens_before,
            evaluator_calls: 0,
            notes: Vec::new(),
            summary_prompt: None,
            approximate_counts: false,
            compaction_ms: t.elapsed().as_millis() as u64,
            deltas: std::collections::BTreeMap::new(),
        });
    }
    let run = model.compact(messages, &spec(condition, budget, config, probe_max_tokens, delta))?;
    let deltas = run.plan.as_ref().map(|p| p.messages.iter().filter_map(|m| m.delta.map(|d| (m.id.as_str().to_owned(), d))).collect()).unwrap_or_default();
    let c = run.result?;
    let after: Vec<ChatMessage> = c.messages.iter().map(to_chat).collect();
    let tokens_after = model.count_conversation(&after)?;
    Ok(Compacted {
        messages: c.messages,
        report: Some(c.report),
        tokens_before,
        tokens_after,
        evaluator_calls: run.probe_calls,
        notes: run.notes,
        summary_prompt: run.summary_pass.map(mf_agent::model::SummaryPrompt::as_str),
        approximate_counts: model.counts_approximated(),
        compaction_ms: t.elapsed().as_millis() as u64,
        deltas,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn condition_lists_parse() {
        assert_eq!(Condition::parse_list("all").unwrap().len(), 6);
        assert_eq!(Condition::parse_list("v1, v2.1,v1").unwrap(), vec![Condition::of(StrategyKind::V1), Condition::V21]);
        let e = Condition::parse_list("v3").unwrap_err().to_string();
        assert!(e.contains("v3"), "{e}");
        assert!(Condition::parse_list(" , ").is_err());
        for c in Condition::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::Value::String(c.as_str().to_owned()));
            assert_eq!(serde_json::from_value::<Condition>(serde_json::to_value(c).unwrap()).unwrap(), c);
            assert_eq!(c.strategy().as_str(), if c == Condition::Full { "none" } else { c.as_str() });
        }
        // The names and the order the committed results use.
        assert_eq!(Condition::names(), "full, baseline, masking, v1, v2, v2.1");
        assert_eq!(Condition::ALL.map(Condition::strategy), StrategyKind::ALL);
    }
}
