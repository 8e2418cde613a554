//! The six-class problem taxonomy: which sufficient statistic to keep.
//!
//! The classifier scores each class by keyword hits in the original question
//! (2 points each) plus features of the history's shape (1 point each), and
//! takes the best; ties go to the more specific class (contradiction,
//! temporal, aggregation, multi-hop, exploratory, lookup), and a question with
//! no signal at all is a lookup.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::dimensions;
use crate::message::{Message, MessageKind};

/// The problem class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemClass {
    /// Find one answer.
    Lookup,
    /// Follow A → B → C.
    MultiHop,
    /// Try things until one works.
    Exploratory,
    /// Count and total.
    Aggregation,
    /// Sources disagree.
    Contradiction,
    /// Order of events.
    Temporal,
}

impl ProblemClass {
    /// All six, in tie-break order (most specific first).
    pub const TIE_ORDER: [ProblemClass; 6] = [
        ProblemClass::Contradiction,
        ProblemClass::Temporal,
        ProblemClass::Aggregation,
        ProblemClass::MultiHop,
        ProblemClass::Exploratory,
        ProblemClass::Lookup,
    ];

    /// The name used in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemClass::Lookup => "lookup",
            ProblemClass::MultiHop => "multi_hop",
            ProblemClass::Exploratory => "exploratory",
            ProblemClass::Aggregation => "aggregation",
            ProblemClass::Contradiction => "contradiction",
            ProblemClass::Temporal => "temporal",
        }
    }
}

impl std::fmt::Display for ProblemClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The classifier's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    /// The class chosen.
    pub class: ProblemClass,
    /// Score per class, in [`ProblemClass::TIE_ORDER`] order.
    pub scores: Vec<(ProblemClass, u32)>,
    /// Why, in words.
    pub reason: String,
    /// Whether the class was given by the caller instead of detected.
    pub overridden: bool,
}

#[allow(clippy::expect_used)]
fn re(pattern: &str) -> Regex {
    // Constant patterns, all compiled by this module's tests.
    Regex::new(pattern).expect("constant regex compiles")
}

static Q_PATTERNS: LazyLock<Vec<(ProblemClass, Regex)>> = LazyLock::new(|| {
    use ProblemClass::*;
    vec![
        (
            Contradiction,
            re(
                r"(?i)\b(?:conflict\w*|contradict\w*|disagree\w*|inconsisten\w*|discrepan\w*|mismatch\w*|differ\w*|reconcile|versus|vs\.?|which (?:one |source |figure |number )?is (?:right|correct|true)|both (?:say|report|claim))\b",
            ),
        ),
        (
            Temporal,
            re(
                r"(?i)\b(?:when|what time|timeline|sequence|in what order|order of events|chronolog\w*|before|after|first|last time|how long|since when|what happened (?:first|next|last))\b",
            ),
        ),
        (
            Aggregation,
            re(
                r"(?i)\b(?:how many|how much|total\w*|sum|count|average|mean|overall|in all|altogether|combined|across all|per (?:day|hour|region|service|team|user)|each of)\b",
            ),
        ),
        (
            MultiHop,
            re(
                r"(?i)\b(?:whose|who owns|owner of|owned by|trace|chain|upstream|downstream|depends on|via|through which|that (?:serves|owns|runs|calls)|of the (?:team|service|host|user) that)\b",
            ),
        ),
        (
            Exploratory,
            re(
                r"(?i)\b(?:investigate|explore|figure out|find out|look into|what'?s wrong|why (?:is|does|did|are)|debug|diagnose|any idea|what happened|root cause|broken|failing)\b",
            ),
        ),
        (Lookup, re(r"(?i)\b(?:what is|what's the|which|find the|where is|look up|value of|name of|what was)\b")),
    ]
});

static CONFLICT_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(?:however|but|contradicts?|conflicts?|disagrees?|whereas|inconsistent|mismatch|on the other hand|says? otherwise|differs?)\b")
});

static AGGREGATE_WORDS: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:total|sum|count|overall|in all|average|altogether|combined)\b"));

/// Whether a text states a total, count or sum (used by the aggregation rule).
pub fn has_aggregate_words(text: &str) -> bool {
    AGGREGATE_WORDS.is_match(text)
}

/// Whether a text marks a conflict between sources (used by the contradiction rule).
pub fn has_conflict_words(text: &str) -> bool {
    CONFLICT_WORDS.is_match(text)
}

/// History-shape features, 1 point each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Tool errors.
    pub errors: usize,
    /// Successful tool results.
    pub results: usize,
    /// Most results of any one tool.
    pub max_results_one_tool: usize,
    /// Messages carrying dates or times.
    pub temporal_messages: usize,
    /// Messages with conflict words.
    pub conflict_messages: usize,
    /// Hop links between chains.
    pub hops: usize,
}

/// Measures the shape of a history (`hops` is supplied by the caller).
pub fn shape(messages: &[Message], hops: usize) -> Shape {
    let mut s = Shape { hops, ..Shape::default() };
    let mut per_tool: std::collections::BTreeMap<&str, usize> = Default::default();
    for m in messages {
        match m.kind() {
            MessageKind::ToolError => s.errors += 1,
            MessageKind::ToolResult => {
                s.results += 1;
                *per_tool.entry(m.name.as_deref().unwrap_or("")).or_default() += 1;
            }
            _ => {}
        }
        if m.kind() != MessageKind::User && m.kind() != MessageKind::System {
            if dimensions::temporal(&m.content) >= 0.5 {
                s.temporal_messages += 1;
            }
            if has_conflict_words(&m.content) {
                s.conflict_messages += 1;
            }
        }
    }
    s.max_results_one_tool = per_tool.values().copied().max().unwrap_or(0);
    s
}

/// Classifies a question given the history's shape.
pub fn classify(question: &str, shape: &Shape) -> Classification {
    let mut reasons: Vec<String> = Vec::new();
    let mut scores: Vec<(ProblemClass, u32)> = Vec::new();
    for class in ProblemClass::TIE_ORDER {
        let mut score = 0u32;
        for (c, regex) in Q_PATTERNS.iter() {
            if *c == class {
                let hits: Vec<&str> = regex.find_iter(question).map(|m| m.as_str()).collect();
                if !hits.is_empty() {
                    score += 2 * hits.len() as u32;
                    reasons.push(format!("{class}: question says {:?}", hits.join(", ")));
                }
            }
        }
        let (feature, why) = match class {
            ProblemClass::Contradiction => (shape.conflict_messages >= 2, "2+ messages mark a conflict"),
            ProblemClass::Temporal => (shape.temporal_messages >= 4, "4+ messages carry dates/times"),
            ProblemClass::Aggregation => (shape.max_results_one_tool >= 4, "4+ results from one tool"),
            ProblemClass::MultiHop => (shape.hops >= 2, "2+ hops from a result into a later call"),
            ProblemClass::Exploratory => (shape.errors >= 2 && shape.results >= 1, "2+ failures and a success"),
            ProblemClass::Lookup => (shape.results + shape.errors <= 3, "3 or fewer tool results"),
        };
        if feature {
            score += 1;
            reasons.push(format!("{class}: {why}"));
        }
        scores.push((class, score));
    }
    let best = scores.iter().map(|(_, s)| *s).max().unwrap_or(0);
    let class = if best == 0 { ProblemClass::Lookup } else { scores.iter().find(|(_, s)| *s == best).map(|(c, _)| *c).unwrap_or(ProblemClass::Lookup) };
    let reason = if reasons.is_empty() { "no signal: default lookup".to_owned() } else { reasons.join("; ") };
    Classification { class, scores, reason, overridden: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(question: &str) -> ProblemClass {
        classify(question, &Shape { results: 5, ..Shape::default() }).class
    }

    #[test]
    fn lookup_questions() {
        assert_eq!(q("What is the current pool size of the orders database?"), ProblemClass::Lookup);
        assert_eq!(q("hello"), ProblemClass::Lookup, "no signal defaults to lookup");
    }

    #[test]
    fn multi_hop_questions() {
        assert_eq!(q("Who owns the service that serves the /checkout route?"), ProblemClass::MultiHop);
    }

    #[test]
    fn exploratory_questions() {
        assert_eq!(q("Investigate why the nightly export is failing"), ProblemClass::Exploratory);
    }

    #[test]
    fn aggregation_questions() {
        assert_eq!(q("How many orders failed in total across all regions?"), ProblemClass::Aggregation);
    }

    #[test]
    fn contradiction_questions() {
        assert_eq!(q("The dashboard and the logs disagree: which figure is correct?"), ProblemClass::Contradiction);
    }

    #[test]
    fn temporal_questions() {
        assert_eq!(q("In what order did the alerts fire, and when did the outage start?"), ProblemClass::Temporal);
    }

    #[test]
    fn history_shape_breaks_ties() {
        // "look into" (exploratory, 2) vs "which" (lookup, 2): shape decides.
        let question = "Look into which node is slow";
        let flaky = Shape { errors: 3, results: 2, ..Shape::default() };
        assert_eq!(classify(question, &flaky).class, ProblemClass::Exploratory);
        let hoppy = Shape { hops: 2, results: 4, ..Shape::default() };
        let c = classify("Which team is it?", &hoppy);
        assert_eq!(c.class, ProblemClass::Lookup, "{c:?}");
        let c = classify("Check it", &hoppy);
        assert_eq!(c.class, ProblemClass::MultiHop, "{c:?}");
    }
}
