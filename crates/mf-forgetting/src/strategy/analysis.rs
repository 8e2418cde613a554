//! Per-message analysis shared by v2 and v2.1: dimension scores, influence,
//! units, the median, the problem class and the hop links.

use std::collections::BTreeMap;

use crate::chains::hop_links;
use crate::dimensions::{self, Scores};
use crate::message::{Message, question_index};
use crate::plan::{CompactionPlan, PlanConfig};
use crate::taxonomy::{self, Classification};
use crate::zones::Zones;

/// What v2 and v2.1 know about the compressible zone before deciding.
pub(super) struct Analysis {
    /// `C_d` per compressible message.
    pub scores: BTreeMap<usize, Scores>,
    /// `I(m)` per compressible message.
    pub influence: BTreeMap<usize, f64>,
    /// Units of the compressible zone: key (chain head or the message) →
    /// members. A unit's key is its first message (a chain is keyed by its
    /// call), so key order is history order.
    pub units: BTreeMap<usize, Vec<usize>>,
    /// Median influence of the compressible zone.
    pub median: f64,
    /// The problem class.
    pub class: Classification,
    /// Hop links `(from_chain, to_chain)`.
    pub hops: Vec<(usize, usize)>,
}

impl Analysis {
    /// The highest influence among a unit's members.
    pub fn unit_max_influence(&self, u: usize) -> f64 {
        self.units[&u].iter().map(|i| self.influence[i]).fold(0.0, f64::max)
    }

    /// Writes `C_d`, `B` and `I` into the plan's compressible entries.
    pub fn record(&self, p: &mut CompactionPlan) {
        for (&i, s) in &self.scores {
            let mp = &mut p.messages[i];
            mp.dimensions = Some(*s);
            mp.breadth = Some(s.breadth());
            mp.influence = Some(self.influence[&i]);
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if !n.is_multiple_of(2) { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

/// Scores the compressible zone and classifies the question.
pub(super) fn analyse(messages: &[Message], zones: &Zones, chains: &[Option<usize>], config: &PlanConfig) -> Analysis {
    let q = question_index(messages).unwrap_or(0);
    let question = messages.get(q).map(|m| m.content.as_str()).unwrap_or("");
    let qwords = dimensions::content_words(question);
    // Susceptibility counts later carriers anywhere after the pinned zone.
    let tail: Vec<Scores> = messages[zones.pinned_end..].iter().map(|m| dimensions::score(&m.analysis_text(), &qwords)).collect();
    let weights = dimensions::susceptibilities(&tail, config.lambda);
    let mut scores = BTreeMap::new();
    let mut influence = BTreeMap::new();
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in zones.compressible() {
        let k = i - zones.pinned_end;
        scores.insert(i, tail[k]);
        influence.insert(i, dimensions::influence(&tail[k], &weights[k], config.gamma));
        units.entry(chains[i].unwrap_or(i)).or_default().push(i);
    }
    let mut values: Vec<f64> = influence.values().copied().collect();
    let median = median(&mut values);
    let hops = hop_links(messages, chains, question);
    let class = match config.class_override {
        Some(c) => Classification { class: c, scores: Vec::new(), reason: "given by the caller".to_owned(), overridden: true },
        None => taxonomy::classify(question, &taxonomy::shape(messages, hops.len())),
    };
    Analysis { scores, influence, units, median, class, hops }
}
