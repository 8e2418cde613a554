//! The six information dimensions of v2 and their detectors.
//!
//! Each detector maps a message's text to `C_d ∈ [0, 1]`, deterministically,
//! by counting surface signals and saturating:
//!
//! | dimension | signal | saturates at |
//! | --- | --- | --- |
//! | data | distinct numeric tokens | 4 |
//! | causal | causal connectives (because, due to, caused, …) | 2 |
//! | task reference | question content words present | ⌈q/3⌉ of the q question words |
//! | entity | distinct proper nouns and identifiers | 3 |
//! | temporal | dates, times, ordinals, sequence words | 2 |
//! | structural | schema / relationship words, arrows | 2 |

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// One of the six dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Numbers, measurements, data points.
    Data,
    /// Why something happened.
    Causal,
    /// Overlap with the original question.
    TaskReference,
    /// Named things: proper nouns, identifiers.
    Entity,
    /// Dates, times, order.
    Temporal,
    /// Schemas and relationships between things.
    Structural,
}

impl Dimension {
    /// All six, in a fixed order.
    pub const ALL: [Dimension; 6] =
        [Dimension::Data, Dimension::Causal, Dimension::TaskReference, Dimension::Entity, Dimension::Temporal, Dimension::Structural];

    /// Position in [`Dimension::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// `C_d` for the six dimensions, in [`Dimension::ALL`] order.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Scores {
    /// Data.
    pub data: f64,
    /// Causal.
    pub causal: f64,
    /// Task reference.
    pub task_reference: f64,
    /// Entity.
    pub entity: f64,
    /// Temporal.
    pub temporal: f64,
    /// Structural.
    pub structural: f64,
}

impl Scores {
    /// The score of one dimension.
    pub fn get(&self, d: Dimension) -> f64 {
        match d {
            Dimension::Data => self.data,
            Dimension::Causal => self.causal,
            Dimension::TaskReference => self.task_reference,
            Dimension::Entity => self.entity,
            Dimension::Temporal => self.temporal,
            Dimension::Structural => self.structural,
        }
    }

    /// `B`: the number of dimensions with `C_d > 0`.
    pub fn breadth(&self) -> usize {
        Dimension::ALL.iter().filter(|d| self.get(**d) > 0.0).count()
    }

    /// Whether dimension `d` is carried.
    pub fn carries(&self, d: Dimension) -> bool {
        self.get(d) > 0.0
    }
}

#[allow(clippy::expect_used)]
fn re(pattern: &str) -> Regex {
    // Constant patterns, all compiled by this module's tests.
    Regex::new(pattern).expect("constant regex compiles")
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"\d+(?:[.,:]\d+)*"));
static CAUSAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:because|caused|causes|cause|due to|therefore|thus|hence|as a result|result(?:ed|s)? in|lead(?:s)? to|led to|so that|root cause|triggered|triggers|consequently|which means|explains|since the|owing to|broke|fixed by|the reason)\b",
    )
});
static WORD: LazyLock<Regex> = LazyLock::new(|| re(r"[A-Za-z][A-Za-z0-9_\-']*"));
static PROPER: LazyLock<Regex> = LazyLock::new(|| re(r"[^.!?\s]\s+([A-Z][a-z]+(?:\s[A-Z][a-z]+)*)"));
static IDENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\b(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z0-9]+)+|[A-Z]{2,}[0-9]*|[a-z][a-z0-9]*(?:-[a-z0-9]+)*-\d+[a-z0-9]*|[A-Z]{2,10}-\d+|#\d+|[0-9a-f]{7,40})\b",
    )
});
static TEMPORAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|yesterday|today|tomorrow|before|after|then|earlier|later|first|second|third|finally|afterwards|previously|subsequently|meanwhile|since|until|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|july|august|september|october|november|december|\d+(?:st|nd|rd|th)|timeline|sequence|chronolog\w*|o'clock|utc|ago|step \d+)\b",
    )
});
static STRUCTURAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:\b(?:schema|table|column|field|foreign key|primary key|depends on|dependency|dependencies|parent|child|children|references|belongs to|owned by|owns|owner|relationship|relation|join|joins|imports|inherits|extends|contains|member of|maps to|points to|upstream|downstream|linked to|calls)\b|->|→|=>)",
    )
});

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "are", "was", "were", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "does", "that", "this", "these",
    "those", "with", "from", "into", "onto", "our", "your", "their", "there", "here", "have", "has", "had", "been", "being", "can", "could", "should", "would",
    "will", "shall", "may", "might", "must", "not", "but", "any", "all", "each", "some", "about", "than", "then", "them", "they", "its", "it's", "you",
    "please", "find", "tell", "show", "give", "out", "get", "got", "one", "also", "just", "only", "very", "much", "many", "more", "most", "such", "over",
    "under", "after", "before", "between", "during", "yes", "now", "is", "be", "of", "to", "in", "on", "at", "by", "or", "an", "a", "we", "i", "me", "my",
    "us", "do",
];

/// Content words of a text: lower-cased words of 3+ characters, not stopwords.
pub fn content_words(text: &str) -> BTreeSet<String> {
    WORD.find_iter(text).map(|m| m.as_str().to_lowercase()).filter(|w| w.len() >= 3 && !STOPWORDS.contains(&w.as_str())).collect()
}

fn saturate(hits: usize, at: usize) -> f64 {
    if at == 0 {
        return 0.0;
    }
    (hits as f64 / at as f64).min(1.0)
}

/// `C_data`: distinct numeric tokens, saturating at 4.
pub fn data(text: &str) -> f64 {
    let distinct: BTreeSet<&str> = NUMBER.find_iter(text).map(|m| m.as_str()).collect();
    saturate(distinct.len(), 4)
}

/// `C_causal`: causal connectives, saturating at 2.
pub fn causal(text: &str) -> f64 {
    saturate(CAUSAL.find_iter(text).count(), 2)
}

/// `C_task`: how many of the question's content words the text contains,
/// saturating at a third of them (at least one).
pub fn task_reference(text: &str, question_words: &BTreeSet<String>) -> f64 {
    if question_words.is_empty() {
        return 0.0;
    }
    let words = content_words(text);
    let overlap = question_words.intersection(&words).count();
    saturate(overlap, question_words.len().div_ceil(3).max(1))
}

/// `C_entity`: distinct proper nouns (capitalised words not starting a
/// sentence) and identifiers, saturating at 3.
pub fn entity(text: &str) -> f64 {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for c in PROPER.captures_iter(text) {
        if let Some(m) = c.get(1) {
            names.insert(m.as_str());
        }
    }
    for m in IDENT.find_iter(text) {
        names.insert(m.as_str());
    }
    saturate(names.len(), 3)
}

/// `C_temporal`: dates, times, ordinals and sequence words, saturating at 2.
pub fn temporal(text: &str) -> f64 {
    saturate(TEMPORAL.find_iter(text).count(), 2)
}

/// `C_structural`: schema and relationship words and arrows, saturating at 2.
pub fn structural(text: &str) -> f64 {
    saturate(STRUCTURAL.find_iter(text).count(), 2)
}

/// All six scores of one text.
pub fn score(text: &str, question_words: &BTreeSet<String>) -> Scores {
    Scores {
        data: data(text),
        causal: causal(text),
        task_reference: task_reference(text, question_words),
        entity: entity(text),
        temporal: temporal(text),
        structural: structural(text),
    }
}

/// Susceptibility weights `w_d(m) = λ^(later messages carrying d)` for a
/// sequence of scores (older first).
pub fn susceptibilities(scores: &[Scores], lambda: f64) -> Vec<[f64; 6]> {
    let mut later = [0i32; 6];
    let mut out = vec![[1.0; 6]; scores.len()];
    for (i, s) in scores.iter().enumerate().rev() {
        for d in Dimension::ALL {
            out[i][d.index()] = lambda.powi(later[d.index()]);
        }
        for d in Dimension::ALL {
            if s.carries(d) {
                later[d.index()] += 1;
            }
        }
    }
    out
}

/// `I(m) = B^γ · Σ_d w_d · C_d`.
pub fn influence(scores: &Scores, weights: &[f64; 6], gamma: f64) -> f64 {
    let b = scores.breadth() as f64;
    let sum: f64 = Dimension::ALL.iter().map(|d| weights[d.index()] * scores.get(*d)).sum();
    b.powf(gamma) * sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_detector_counts_distinct_numbers() {
        assert_eq!(data("no numbers here"), 0.0);
        assert_eq!(data("latency 840 ms"), 0.25);
        assert_eq!(data("840 840 840"), 0.25, "distinct only");
        assert_eq!(data("1 2 3 4 5 6"), 1.0);
        assert_eq!(data("at 14:02 and 3.5"), 0.5);
    }

    #[test]
    fn causal_detector_finds_connectives() {
        assert_eq!(causal("the pool is small"), 0.0);
        assert_eq!(causal("it failed because the pool was full"), 0.5);
        assert_eq!(causal("due to a bad deploy, which led to timeouts"), 1.0);
        assert_eq!(causal("BECAUSE"), 0.5, "case-insensitive");
    }

    #[test]
    fn task_reference_detector_measures_question_overlap() {
        let q = content_words("Which build introduced the checkout latency regression?");
        assert_eq!(q.len(), 5); // build introduced checkout latency regression
        assert_eq!(task_reference("nothing related", &q), 0.0);
        assert_eq!(task_reference("checkout is slow", &q), 0.5);
        assert_eq!(task_reference("the checkout latency jumped", &q), 1.0);
        assert_eq!(task_reference("anything", &BTreeSet::new()), 0.0);
    }

    #[test]
    fn entity_detector_finds_names_and_identifiers() {
        assert_eq!(entity("the service is down"), 0.0);
        assert_eq!(entity("it runs on web-03"), 1.0 / 3.0);
        assert!(entity("Alice asked Bob and Carol about max_pool_size") >= 1.0);
        assert_eq!(entity("Start of a sentence."), 0.0, "sentence-initial capital is no name");
    }

    #[test]
    fn temporal_detector_finds_dates_and_order() {
        assert_eq!(temporal("the cache is cold"), 0.0);
        assert_eq!(temporal("deployed 2026-03-14"), 0.5);
        assert_eq!(temporal("first the deploy, then the alert at 14:02"), 1.0);
    }

    #[test]
    fn structural_detector_finds_relationships() {
        assert_eq!(structural("plain words only"), 0.0);
        assert_eq!(structural("orders has a foreign key to users"), 0.5);
        assert_eq!(structural("api -> db, and db depends on disk"), 1.0);
    }

    #[test]
    fn breadth_counts_carried_dimensions() {
        let q = content_words("why is checkout slow");
        let s = score("Checkout got slow at 14:02 because Redis -> db pool was full", &q);
        assert_eq!(s.breadth(), 6, "{s:?}");
        assert_eq!(score("ok", &q).breadth(), 0);
    }

    #[test]
    fn susceptibility_decays_with_later_carriers() {
        let d = Scores { data: 1.0, ..Scores::default() };
        let none = Scores::default();
        let w = susceptibilities(&[d, d, none, d], 0.7);
        assert!((w[0][0] - 0.49).abs() < 1e-12);
        assert!((w[1][0] - 0.7).abs() < 1e-12);
        assert_eq!(w[3][0], 1.0);
        assert_eq!(w[0][1], 1.0, "causal: no later carrier");
    }

    #[test]
    fn influence_is_phi_of_breadth_times_weighted_sum() {
        let s = Scores { data: 1.0, entity: 0.5, ..Scores::default() };
        let w = [1.0; 6];
        let i = influence(&s, &w, 1.5);
        assert!((i - 2f64.powf(1.5) * 1.5).abs() < 1e-12);
        assert!((influence(&s, &w, 1.0) - 3.0).abs() < 1e-12);
        assert_eq!(influence(&Scores::default(), &w, 1.5), 0.0);
    }
}
