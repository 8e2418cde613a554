//! The settings of a suite run ([`RunConfig`]): which conditions and
//! scorers, the budget, the probe prompt. A leaf of the crate: the run, the
//! scenario step and the scorers read it, it reads none of them.

use mf_forgetting::{Budget, PlanConfig};

use crate::condition::Condition;
use crate::error::{BenchError, Result};

/// The probe prompt (METHOD.md §6).
pub const PROBE_PROMPT: &str = include_str!("prompts/probe.txt");

/// Which scorers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scorers {
    /// Keyword scorer over generated answers.
    pub keyword: bool,
    /// Model judge over generated answers.
    pub judge: bool,
    /// Likelihood: references (and wrong answers) scored by the model's
    /// log-probabilities after each context, no answer generated
    /// ([`crate::likelihood`]).
    pub likelihood: bool,
}

impl Scorers {
    /// The default: likelihood alone (no probe answer is generated).
    pub const DEFAULT: Scorers = Scorers { keyword: false, judge: false, likelihood: true };

    /// Parses `keyword,judge,likelihood` (or `all`).
    ///
    /// # Errors
    /// An unknown scorer.
    pub fn parse(s: &str) -> Result<Scorers> {
        let mut out = Scorers { keyword: false, judge: false, likelihood: false };
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p {
                "keyword" => out.keyword = true,
                "judge" => out.judge = true,
                "likelihood" => out.likelihood = true,
                "all" => out = Scorers { keyword: true, judge: true, likelihood: true },
                other => return Err(BenchError::UnknownScorer(other.to_owned())),
            }
        }
        if !out.keyword && !out.judge && !out.likelihood {
            return Err(BenchError::NothingChosen("scorer"));
        }
        Ok(out)
    }

    /// Whether probe answers are generated (the keyword and judge scorers grade them).
    pub fn generates(self) -> bool {
        self.keyword || self.judge
    }

    /// Names, for the settings.
    pub fn names(self) -> Vec<String> {
        let mut v = Vec::new();
        if self.likelihood {
            v.push("likelihood".to_owned());
        }
        if self.keyword {
            v.push("keyword".to_owned());
        }
        if self.judge {
            v.push("judge".to_owned());
        }
        v
    }
}

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Conditions, in order.
    pub conditions: Vec<Condition>,
    /// Scorers.
    pub scorers: Scorers,
    /// Repetitions.
    pub reps: u32,
    /// The compaction budget.
    pub budget: Budget,
    /// Strategy settings.
    pub plan: PlanConfig,
    /// Probe temperature (0.1).
    pub temperature: f32,
    /// Probe answer limit in tokens.
    pub answer_max_tokens: u32,
    /// v2.1: tokens of each withholding-test answer (the app's
    /// [`mf_agent::model::PROBE_MAX_TOKENS`] by default).
    pub evaluator_max_tokens: u32,
    /// Scenario directory, for the record.
    pub scenarios_dir: String,
    /// How v2.1's withholding test measures Perf (the app's default: a
    /// generated answer per trial; or by likelihood).
    pub delta: mf_agent::model::DeltaSource,
    /// Ask the probes of one context in one branched call (the context
    /// decoded once, the answers generated side by side) instead of one
    /// after the other.
    pub branched: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            conditions: Condition::ALL.to_vec(),
            scorers: Scorers::DEFAULT,
            reps: 1,
            budget: Budget { context: 4608, reserve: 512, ratio: 0.75, recent: 2 },
            plan: PlanConfig::default(),
            temperature: 0.1,
            answer_max_tokens: 96,
            evaluator_max_tokens: mf_agent::model::PROBE_MAX_TOKENS,
            scenarios_dir: String::new(),
            branched: false,
            delta: mf_agent::model::DeltaSource::default(),
        }
    }
}

/// The serde name of a unit enum variant.
pub fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
