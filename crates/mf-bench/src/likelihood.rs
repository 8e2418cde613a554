//! The `likelihood` scorer: what a context still holds, measured by the
//! model's own log-probabilities instead of its writing.
//!
//! A small model cannot write the answer to a probe, but it can recognise
//! it: the probability it gives the probe's reference answer, teacher-forced
//! after the context and the question, rises sharply when the fact is in the
//! context (copying works even at 135M parameters) and falls when a
//! compaction lost it. Per probe and condition this module records
//!
//! - the reference's negative log-likelihood per token (NLL), and the NLL of
//!   its *fact spans*: the tokens that overlap each required keyword's
//!   occurrence in the reference (the whole reference where none occurs);
//! - the *choice*: whether the reference out-scores each of the probe's
//!   `wrong` answers by mean log-probability per token (length-normalised).
//!
//! Across probes, [`summarise`] gives per condition the **retention**
//! `R = Σ(NLL_baseline − NLL_cond) / Σ(NLL_baseline − NLL_full)` over the
//! fact spans of the probes where full and baseline differ by at least
//! [`SIGNAL_MARGIN`] (1 = as good as the whole history, 0 = as bad as
//! having lost the middle), choice accuracy with its chance level, 95 %
//! bootstrap intervals over probes, and paired comparisons of conditions.
//! R is a ratio of sums rather than a mean of per-probe ratios: a probe
//! whose full–baseline gap is just over the margin would otherwise weigh as
//! much as one with a gap ten times larger, and its ratio swings wildly.

use std::collections::BTreeMap;

use mf_forgetting::Message;
use mf_forgetting::scenario::{Keyword, Probe};
use mf_inference::{ChatMessage, Scored};
use serde::{Deserialize, Serialize};

use crate::config::PROBE_PROMPT;
use crate::error::Result;
use crate::model::{Model, to_chat};

/// The smallest gap between baseline's and full's fact-span NLL (nats per
/// token) for a probe to carry signal for this model. Below it the model
/// finds the reference about as likely without the middle of the history
/// as with it (the fact is guessable, or the model cannot use the context),
/// and R's denominator would be noise. 0.1 nats is a 10 % change in the
/// per-token probability: smaller gaps are within what the choice of the
/// probe's wording moves.
pub const SIGNAL_MARGIN: f64 = 0.1;

/// Bootstrap resamples for the intervals.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// One probe scored under one condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LikelihoodScore {
    /// NLL per token of the whole reference answer (nats).
    pub nll_reference: f64,
    /// NLL per token over the reference's fact spans (nats).
    pub nll_facts: f64,
    /// Tokens of the reference.
    pub reference_tokens: usize,
    /// Tokens in its fact spans.
    pub fact_tokens: usize,
    /// Whether a required keyword was found in the reference (else the fact
    /// spans are the whole reference).
    pub facts_found: bool,
    /// Mean log-probability per token of each wrong answer, in the probe's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_logprob: Vec<f64>,
    /// Whether the reference out-scored every wrong answer (`None` without wrong answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<bool>,
}

/// The byte ranges in `reference` where each required keyword occurs (the
/// first occurrence of its longest variant found, case-insensitive).
#[must_use]
pub fn fact_spans(reference: &str, required: &[Keyword]) -> Vec<(usize, usize)> {
    let hay = reference.to_ascii_lowercase();
    let mut spans = Vec::new();
    for k in required {
        let mut variants: Vec<&str> = k.variants().into_iter().filter(|v| !v.trim().is_empty()).collect();
        variants.sort_by_key(|v| std::cmp::Reverse(v.len()));
        if let Some((at, len)) = variants.iter().find_map(|v| hay.find(&v.to_ascii_lowercase()).map(|at| (at, v.len()))) {
            spans.push((at, at + len));
        }
    }
    spans
}

/// The prompt a probe is scored after: the context, then the probe's
/// question as the app's probe prompt asks it.
#[must_use]
pub fn probe_context(context: &[Message], probe: &Probe) -> Vec<ChatMessage> {
    let mut msgs: Vec<ChatMessage> = context.iter().map(to_chat).collect();
    msgs.push(ChatMessage::user(format!("{PROBE_PROMPT}{}", probe.question.trim())));
    msgs
}

fn mean_logprob(s: &Scored) -> f64 {
    if s.tokens.is_empty() { f64::NEG_INFINITY } else { s.logprob() / s.tokens.len() as f64 }
}

/// Scores a probe's reference (and its wrong answers) from their
/// log-probabilities after the context.
#[must_use]
pub fn score_from(reference: &Scored, wrong: &[Scored], probe: &Probe) -> LikelihoodScore {
    score_reference(reference, wrong, &probe.reference, &probe.required)
}

/// [`score_from`] for any reference text and its required keywords (a
/// scenario's probe, a world's).
#[must_use]
pub fn score_reference(reference: &Scored, wrong: &[Scored], text: &str, required: &[Keyword]) -> LikelihoodScore {
    let spans = fact_spans(text, required);
    let mut fact: Vec<f64> = Vec::new();
    let mut seen = vec![false; reference.tokens.len()];
    for &(a, b) in &spans {
        for (i, t) in reference.tokens.iter().enumerate() {
            let end = reference.tokens.get(i + 1).map_or(usize::MAX, |n| n.start);
            if t.start < b && end > a && !seen[i] {
                seen[i] = true;
                fact.push(-t.logprob);
            }
        }
    }
    let facts_found = !fact.is_empty();
    if !facts_found {
        fact = reference.tokens.iter().map(|t| -t.logprob).collect();
    }
    let nll_reference = reference.nll_per_token().unwrap_or(0.0);
    let nll_facts = if fact.is_empty() { 0.0 } else { fact.iter().sum::<f64>() / fact.len() as f64 };
    let wrong_logprob: Vec<f64> = wrong.iter().map(mean_logprob).collect();
    let own = mean_logprob(reference);
    let choice = (!wrong_logprob.is_empty()).then(|| wrong_logprob.iter().all(|w| own > *w));
    LikelihoodScore { nll_reference, nll_facts, reference_tokens: reference.tokens.len(), fact_tokens: fact.len(), facts_found, wrong_logprob, choice }
}

/// Scores one probe over one context on the model: the reference, then each
/// wrong answer, in one call (the context is decoded once).
///
/// # Errors
/// The model's (scoring not supported by the engine, prompt too long).
pub fn score_probe(model: &Model, context: &[Message], probe: &Probe) -> Result<LikelihoodScore> {
    let mut continuations = vec![probe.reference.clone()];
    continuations.extend(probe.wrong.iter().cloned());
    let mut scored = model.score(probe_context(context, probe), continuations)?;
    let reference = scored.remove(0);
    Ok(score_from(&reference, &scored, probe))
}

/// A mean with its 95 % bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Interval {
    /// The estimate on all probes.
    pub value: f64,
    /// 2.5th percentile of the bootstrap.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
    /// Probes it rests on.
    pub n: usize,
}

/// One probe's figures under every condition, the unit the bootstrap resamples.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFacts {
    /// `scenario/probe` (and repetition).
    pub key: String,
    /// Problem class.
    pub class: String,
    /// Probe dimension.
    pub dimension: String,
    /// Fact-span NLL per condition.
    pub nll: BTreeMap<String, f64>,
    /// Choice per condition (probes with wrong answers).
    pub choice: BTreeMap<String, bool>,
    /// Conditions whose compaction grew the history on this scenario (not ranked here).
    pub grew: Vec<String>,
    /// Chance of the choice test (1 / (1 + wrong answers)).
    pub chance: Option<f64>,
}

/// Per condition: retention and choice accuracy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LikelihoodCondition {
    /// The condition.
    pub condition: String,
    /// Retention over the probes with signal (`None` when no probe has any).
    pub retention: Option<Interval>,
    /// Mean fact-span NLL per token over every probe scored, with its
    /// interval: where full's and baseline's do not overlap, the model
    /// reads the middle of the history at all.
    pub nll_facts: Option<Interval>,
    /// Choice accuracy over probes with wrong answers.
    pub choice: Option<Interval>,
    /// Probes scored.
    pub probes: usize,
    /// Probes left out of R here because this condition's compaction grew
    /// the history (it is not ranked as that strategy on that scenario).
    pub grew: usize,
}

/// How often one condition beats another on the same probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Paired {
    /// First condition.
    pub a: String,
    /// Second condition.
    pub b: String,
    /// Probes (with signal) where `a`'s fact-span NLL is lower.
    pub a_better: usize,
    /// Where `b`'s is lower.
    pub b_better: usize,
    /// Within 0.01 nats of each other.
    pub ties: usize,
}

/// The likelihood scorer's summary of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LikelihoodSummary {
    /// The margin used ([`SIGNAL_MARGIN`]).
    pub margin: f64,
    /// Probes (× repetitions) scored under both full and baseline.
    pub probes: usize,
    /// Of those, probes whose full–baseline gap is under the margin: no signal for this model, left out of R.
    pub no_signal: usize,
    /// The choice test's chance accuracy (mean over probes with wrong answers).
    pub chance: Option<f64>,
    /// Per condition, in run order.
    pub conditions: Vec<LikelihoodCondition>,
    /// R per class, then condition.
    pub by_class: BTreeMap<String, BTreeMap<String, Option<Interval>>>,
    /// R per probe dimension, then condition.
    pub by_dimension: BTreeMap<String, BTreeMap<String, Option<Interval>>>,
    /// Pairwise comparisons over the probes with signal.
    pub paired: Vec<Paired>,
}

/// `R 0.62 [0.41, 0.80]`-style text of an interval (`–` without one).
#[must_use]
pub fn fmt_interval(i: Option<&Interval>) -> String {
    i.map_or("–".to_owned(), |i| format!("{:.2} [{:.2}, {:.2}]", i.value, i.lo, i.hi))
}

/// The summary as Markdown: R and choice per condition, then R per class
/// and per dimension, then the paired comparisons.
pub fn markdown(out: &mut String, s: &LikelihoodSummary) {
    use std::fmt::Write as _;
    let chance = s.chance.map_or("no wrong answers in these probes".to_owned(), |c| format!("chance {c:.2}"));
    let _ = writeln!(
        out,
        "Likelihood: {} probes scored under full and baseline, {} of them without signal for this model (full and baseline within {:.2} nats per token of each other; left out of R). R = 1 keeps what the whole history gives, 0 what pinned + recent give; 95 % bootstrap intervals over probes. Choice: the reference out-scores every wrong answer ({chance}).\n",
        s.probes, s.no_signal, s.margin
    );
    let _ = writeln!(out, "| condition | retention R | choice accuracy | fact-span NLL (nats/token) | probes | grew (not ranked) |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: |");
    for c in &s.conditions {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            c.condition,
            fmt_interval(c.retention.as_ref()),
            fmt_interval(c.choice.as_ref()),
            fmt_interval(c.nll_facts.as_ref()),
            c.probes,
            c.grew
        );
    }
    let conds: Vec<&str> = s.conditions.iter().map(|c| c.condition.as_str()).collect();
    for (title, m) in [("R by class", &s.by_class), ("R by dimension", &s.by_dimension)] {
        let _ = writeln!(out, "\n{title}:\n");
        let _ = writeln!(out, "| | {} |", conds.join(" | "));
        let _ = writeln!(out, "| --- |{}", " ---: |".repeat(conds.len()));
        for (k, row) in m {
            let cells: Vec<String> = conds.iter().map(|c| fmt_interval(row.get(*c).and_then(Option::as_ref))).collect();
            let _ = writeln!(out, "| {k} | {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(out, "\nPaired, over probes with signal (lower fact-span NLL wins; within 0.01 nats a tie):\n");
    let _ = writeln!(out, "| a | b | a better | b better | ties |");
    let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: |");
    for p in &s.paired {
        let _ = writeln!(out, "| {} | {} | {} | {} | {} |", p.a, p.b, p.a_better, p.b_better, p.ties);
    }
    out.push('\n');
}

/// A small deterministic generator (SplitMix64) so intervals are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `stat` on `items` with its 95 % percentile bootstrap interval; `None`
/// when `stat` is undefined on all of them.
pub fn bootstrap<T>(items: &[T], stat: impl Fn(&[&T]) -> Option<f64>) -> Option<Interval> {
    let all: Vec<&T> = items.iter().collect();
    let value = stat(&all)?;
    let mut rng = Rng(0x005E_ED0F_B007);
    let mut draws: Vec<f64> = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut sample: Vec<&T> = Vec::with_capacity(items.len());
    for _ in 0..BOOTSTRAP_RESAMPLES {
        sample.clear();
        sample.extend((0..items.len()).map(|_| &items[rng.below(items.len())]));
        if let Some(v) = stat(&sample) {
            draws.push(v);
        }
    }
    draws.sort_by(f64::total_cmp);
    let pick = |q: f64| draws.get(((draws.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(value);
    Some(Interval { value, lo: pick(0.025), hi: pick(0.975), n: items.len() })
}

/// Pooled retention of `cond` over `probes` (those with signal, where `cond` was scored and did not grow).
fn retention(probes: &[&ProbeFacts], cond: &str, full: &str, baseline: &str) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for p in probes {
        let (Some(f), Some(b), Some(c)) = (p.nll.get(full), p.nll.get(baseline), p.nll.get(cond)) else { continue };
        num += b - c;
        den += b - f;
    }
    (den > 0.0).then(|| num / den)
}

fn has_signal(p: &ProbeFacts, full: &str, baseline: &str) -> bool {
    matches!((p.nll.get(full), p.nll.get(baseline)), (Some(f), Some(b)) if b - f >= SIGNAL_MARGIN)
}

fn retention_interval(probes: &[ProbeFacts], cond: &str, full: &str, baseline: &str) -> Option<Interval> {
    let usable: Vec<ProbeFacts> =
        probes.iter().filter(|p| has_signal(p, full, baseline) && p.nll.contains_key(cond) && !p.grew.iter().any(|g| g == cond)).cloned().collect();
    if usable.is_empty() {
        return None;
    }
    bootstrap(&usable, |s| retention(s, cond, full, baseline))
}

/// Summarises per-probe figures: R and choice per condition (in `order`),
/// per class and dimension, and pairwise.
#[must_use]
pub fn summarise(probes: &[ProbeFacts], order: &[&str]) -> LikelihoodSummary {
    let (full, baseline) = ("full", "baseline");
    let both: Vec<&ProbeFacts> = probes.iter().filter(|p| p.nll.contains_key(full) && p.nll.contains_key(baseline)).collect();
    let no_signal = both.iter().filter(|p| !has_signal(p, full, baseline)).count();
    let chances: Vec<f64> = probes.iter().filter_map(|p| p.chance).collect();
    let chance = (!chances.is_empty()).then(|| chances.iter().sum::<f64>() / chances.len() as f64);
    let conditions = order
        .iter()
        .map(|&c| {
            let nlls: Vec<f64> = probes.iter().filter_map(|p| p.nll.get(c).copied()).collect();
            let nll_facts = bootstrap(&nlls, |s| (!s.is_empty()).then(|| s.iter().copied().sum::<f64>() / s.len() as f64));
            let choices: Vec<bool> = probes.iter().filter_map(|p| p.choice.get(c).copied()).collect();
            let choice = bootstrap(&choices, |s| (!s.is_empty()).then(|| s.iter().filter(|b| ***b).count() as f64 / s.len() as f64));
            LikelihoodCondition {
                condition: c.to_owned(),
                retention: retention_interval(probes, c, full, baseline),
                nll_facts,
                choice,
                probes: nlls.len(),
                grew: probes.iter().filter(|p| p.grew.iter().any(|g| g == c)).count(),
            }
        })
        .collect();
    let group = |key: &dyn Fn(&ProbeFacts) -> &str| {
        let mut out: BTreeMap<String, BTreeMap<String, Option<Interval>>> = BTreeMap::new();
        let mut names: Vec<&str> = probes.iter().map(key).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let members: Vec<ProbeFacts> = probes.iter().filter(|p| key(p) == name).cloned().collect();
            let row = order.iter().map(|&c| (c.to_owned(), retention_interval(&members, c, full, baseline))).collect();
            out.insert(name.to_owned(), row);
        }
        out
    };
    let by_class = group(&|p: &ProbeFacts| p.class.as_str());
    let by_dimension = group(&|p: &ProbeFacts| p.dimension.as_str());
    let mut paired = Vec::new();
    for (i, &a) in order.iter().enumerate() {
        for &b in &order[i + 1..] {
            let mut pr = Paired { a: a.to_owned(), b: b.to_owned(), a_better: 0, b_better: 0, ties: 0 };
            for p in probes.iter().filter(|p| has_signal(p, full, baseline)) {
                let (Some(x), Some(y)) = (p.nll.get(a), p.nll.get(b)) else { continue };
                if (x - y).abs() < 0.01 {
                    pr.ties += 1;
                } else if x < y {
                    pr.a_better += 1;
                } else {
                    pr.b_better += 1;
                }
            }
            paired.push(pr);
        }
    }
    LikelihoodSummary { margin: SIGNAL_MARGIN, probes: both.len(), no_signal, chance, conditions, by_class, by_dimension, paired }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use mf_forgetting::scenario::ProbeDimension;
    use mf_inference::TokenLogprob;

    use super::*;

    fn scored(pieces: &[(&str, f64)]) -> Scored {
        let mut at = 0;
        let tokens = pieces
            .iter()
            .map(|(t, lp)| {
                let tok = TokenLogprob { text: (*t).to_owned(), start: at, logprob: *lp, top_logprob: None };
                at += t.len();
                tok
            })
            .collect();
        Scored { tokens, prompt_tokens: 10, decoded: 10 }
    }

    fn probe() -> Probe {
        Probe {
            id: "p1".into(),
            question: "Which invoice?".into(),
            dimension: ProbeDimension::FactRetention,
            required: vec![Keyword::Variants(vec!["30602".into(), "inv_30602".into()])],
            partial: vec![],
            reference: "It is inv_30602 today.".into(),
            wrong: vec!["It is inv_30601 today.".into()],
        }
    }

    #[test]
    fn fact_spans_take_the_longest_variant_found() {
        assert_eq!(fact_spans("It is INV_30602 today.", &probe().required), vec![(6, 15)]);
        assert!(fact_spans("nothing here", &probe().required).is_empty());
    }

    #[test]
    fn fact_nll_is_over_the_tokens_overlapping_the_keyword() {
        // "It is" | " inv" | "_306" | "02" | " today."
        let r = scored(&[("It is", -0.1), (" inv", -1.0), ("_306", -2.0), ("02", -3.0), (" today.", -0.5)]);
        let w = scored(&[("It is", -0.1), (" inv", -1.0), ("_306", -2.0), ("01", -9.0), (" today.", -0.5)]);
        let s = score_from(&r, &[w], &probe());
        assert!(s.facts_found);
        // " inv" starts at 5, before the span's 6, and ends inside it: it overlaps.
        assert_eq!(s.fact_tokens, 3);
        assert!((s.nll_facts - 2.0).abs() < 1e-12);
        assert!((s.nll_reference - 6.6 / 5.0).abs() < 1e-12);
        assert_eq!(s.choice, Some(true));
    }

    #[test]
    fn a_wrong_answer_as_likely_per_token_loses_the_choice() {
        let r = scored(&[("It is inv_30602 today.", -2.0)]);
        let w = scored(&[("It is", -1.0), (" inv_30601 today.", -1.0)]);
        // Per token: reference −2.0, wrong −1.0: the wrong one wins.
        assert_eq!(score_from(&r, &[w], &probe()).choice, Some(false));
        let none = Probe { wrong: vec![], ..probe() };
        assert_eq!(score_from(&r, &[], &none).choice, None);
    }

    fn facts(key: &str, class: &str, nll: &[(&str, f64)]) -> ProbeFacts {
        ProbeFacts {
            key: key.into(),
            class: class.into(),
            dimension: "fact_retention".into(),
            nll: nll.iter().map(|(c, v)| ((*c).to_owned(), *v)).collect(),
            choice: BTreeMap::new(),
            grew: vec![],
            chance: None,
        }
    }

    #[test]
    fn retention_is_pooled_over_probes_with_signal() {
        let probes = vec![
            facts("a", "lookup", &[("full", 1.0), ("baseline", 3.0), ("v1", 2.0)]),
            facts("b", "lookup", &[("full", 1.0), ("baseline", 2.0), ("v1", 1.0)]),
            // No signal: full and baseline within the margin.
            facts("c", "lookup", &[("full", 1.0), ("baseline", 1.05), ("v1", 5.0)]),
        ];
        let s = summarise(&probes, &["full", "baseline", "v1"]);
        assert_eq!((s.probes, s.no_signal), (3, 1));
        let r = |c: &str| s.conditions.iter().find(|x| x.condition == c).unwrap().retention.unwrap();
        assert!((r("full").value - 1.0).abs() < 1e-12 && r("baseline").value.abs() < 1e-12);
        // (3−2 + 2−1) / (3−1 + 2−1) = 2/3.
        assert!((r("v1").value - 2.0 / 3.0).abs() < 1e-12);
        assert!(r("v1").lo <= r("v1").value && r("v1").value <= r("v1").hi);
        let p = s.paired.iter().find(|p| p.a == "full" && p.b == "v1").unwrap();
        assert_eq!((p.a_better, p.b_better, p.ties), (1, 0, 1));
    }

    #[test]
    fn a_condition_that_grew_is_not_ranked_on_that_probe() {
        let mut grew = facts("a", "lookup", &[("full", 1.0), ("baseline", 3.0), ("v2", 3.0)]);
        grew.grew = vec!["v2".into()];
        let ok = facts("b", "lookup", &[("full", 1.0), ("baseline", 3.0), ("v2", 1.0)]);
        let s = summarise(&[grew, ok], &["full", "baseline", "v2"]);
        let v2 = s.conditions.iter().find(|x| x.condition == "v2").unwrap();
        assert_eq!(v2.grew, 1);
        assert!((v2.retention.unwrap().value - 1.0).abs() < 1e-12, "only the probe where v2 shrank the history counts");
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_mean() {
        let xs: Vec<f64> = (0..40).map(|i| f64::from(i % 7)).collect();
        let mean = |s: &[&f64]| Some(s.iter().copied().sum::<f64>() / s.len() as f64);
        let a = bootstrap(&xs, mean).unwrap();
        assert_eq!(a, bootstrap(&xs, mean).unwrap());
        assert!(a.lo < a.value && a.value < a.hi && a.n == 40);
    }
}
