//! The withholding test's evaluator (v2.1): `Δ(m) = Perf(ctx) − Perf(ctx \ m)`.

use crate::error::ForgettingError;
use crate::message::Message;
use crate::scenario::{Probe, keyword_score};

/// Measures how well a context lets the probes be answered.
///
/// The real one asks the model each probe over the context and scores the
/// answers (an LLM judge, or keywords); it must be deterministic for a given
/// context (greedy decoding, fixed seed) or the plan is not.
pub trait ProbeEvaluator {
    /// Performance of a context, higher is better (any scale, used as differences).
    ///
    /// # Errors
    /// Any failure of the evaluation; the plan fails with it.
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError>;

    /// [`perf`](Self::perf) of several contexts, in order. An evaluator that
    /// can answer them side by side (a model decoding their shared prefix
    /// once) overrides it; the results must equal `perf` one by one.
    ///
    /// # Errors
    /// The first failure.
    fn perf_many(&mut self, contexts: &[Vec<Message>]) -> Result<Vec<f64>, ForgettingError> {
        contexts.iter().map(|c| self.perf(c)).collect()
    }

    /// What this evaluator is, for the plan's notes.
    fn describe(&self) -> String;
}

/// An **offline proxy**, not the method: an "oracle reader" that sees every
/// string of the context and scores each probe's keywords (0–3, the format's
/// rule) against the concatenated text; Perf is the mean score.
///
/// It measures whether the probe keywords are *present*, not whether a model
/// would use them: exactly the keyword collinearity METHOD.md §4 warns about.
/// `mf plan --strategy v2.1` uses it only because no model is loaded there,
/// and says so in the plan's notes. The benchmark must use a model-backed
/// evaluator.
#[derive(Debug, Clone)]
pub struct KeywordOracle {
    probes: Vec<Probe>,
}

impl KeywordOracle {
    /// An oracle over these probes.
    pub fn new(probes: Vec<Probe>) -> Self {
        KeywordOracle { probes }
    }
}

impl ProbeEvaluator for KeywordOracle {
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
        if self.probes.is_empty() {
            return Err(ForgettingError::Evaluator("the keyword oracle needs probes; Δ needs a model or probes".to_owned()));
        }
        let text: String = context.iter().map(|m| m.analysis_text()).collect::<Vec<_>>().join("\n");
        let total: u32 = self.probes.iter().map(|p| u32::from(keyword_score(&text, &p.required, &p.partial))).sum();
        Ok(f64::from(total) / self.probes.len() as f64)
    }

    fn describe(&self) -> String {
        format!("offline keyword-oracle proxy over {} probes (measures keyword presence, not a model's answer)", self.probes.len())
    }
}
