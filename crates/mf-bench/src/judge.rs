//! The `judge` scorer: a model grades an answer against the reference (0–3),
//! and the control brackets that say whether it can be trusted.
//!
//! Every probe is also graded on four controls built from its reference:
//! the identical answer (should get 3), a faithful paraphrase (high), a
//! contradicting answer (low) and the empty answer (0). The brackets are
//! reported beside every run; a judge that gives a contradiction as much as
//! the reference cannot tell good answers from bad ones.

use mf_forgetting::scenario::{Keyword, Probe};
use mf_inference::{ChatMessage, Sampling};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{Model, Purpose};

/// The judge's system prompt. The rubric comes first so that the calls for
/// one probe share the longest possible prompt prefix in the KV cache.
pub const JUDGE_SYSTEM: &str = include_str!("prompts/judge_system.txt");

/// Worked examples shown before every grading (small models answer with
/// prose otherwise). They come before the graded answer, so they are part of
/// the prompt prefix every judge call shares in the KV cache.
pub const FEW_SHOT: &[(&str, &str)] = &[
    ("QUESTION: Which port does the cache listen on?\nREFERENCE: Port 6380.\nCANDIDATE: It listens on 6380.\nGrade (0, 1, 2 or 3):", "3"),
    ("QUESTION: Which port does the cache listen on?\nREFERENCE: Port 6380.\nCANDIDATE: It listens on port 5432.\nGrade (0, 1, 2 or 3):", "0"),
    ("QUESTION: Why did the job fail, and when?\nREFERENCE: The disk filled up at 03:10.\nCANDIDATE: The disk was full.\nGrade (0, 1, 2 or 3):", "2"),
];

/// One control answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// The reference itself: expected 3.
    Identical,
    /// The reference's facts restated in other words: expected high.
    Paraphrase,
    /// The reference with its facts changed: expected low.
    Contradiction,
    /// Nothing: expected 0.
    Empty,
}

impl Control {
    /// All four, in report order.
    pub const ALL: [Control; 4] = [Control::Identical, Control::Paraphrase, Control::Contradiction, Control::Empty];

    /// Name in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Identical => "identical",
            Control::Paraphrase => "paraphrase",
            Control::Contradiction => "contradiction",
            Control::Empty => "empty",
        }
    }

    /// The control answer for a probe. `other` is a required keyword of an
    /// unrelated probe, used as a wrong entity where the reference has no number.
    pub fn answer(self, probe: &Probe, other: &str) -> String {
        match self {
            Control::Identical => probe.reference.clone(),
            Control::Paraphrase => paraphrase(probe),
            Control::Contradiction => contradiction(probe, other),
            Control::Empty => String::new(),
        }
    }
}

fn last_variant(k: &Keyword) -> &str {
    k.variants().last().copied().unwrap_or("")
}

/// A faithful restatement: every required keyword (in its last accepted
/// variant, so separators and units differ from the reference where the
/// scenario lists such variants) in a sentence of other words.
pub fn paraphrase(probe: &Probe) -> String {
    let facts: Vec<&str> = probe.required.iter().map(last_variant).collect();
    let mut s = String::from("From what we found: ");
    s.push_str(&facts.join("; "));
    s.push('.');
    s
}

/// A contradicting answer: the reference with every number changed
/// (each digit d → (d + 3) mod 10, non-zero leading digit kept non-zero) and each
/// required non-numeric keyword replaced by `other`; if nothing changed,
/// the reference negated.
pub fn contradiction(probe: &Probe, other: &str) -> String {
    let mut out: String = probe
        .reference
        .chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from_digit((d + 3) % 10, 10).unwrap_or(c),
            None => c,
        })
        .collect();
    for k in &probe.required {
        for v in k.variants() {
            if !v.chars().any(|c| c.is_ascii_digit()) && !other.is_empty() {
                out = replace_ci(&out, v, other);
            }
        }
    }
    if crate::keyword::normalise(&out) == crate::keyword::normalise(&probe.reference) {
        out = format!("No. It is not the case that {}", probe.reference);
    }
    out
}

fn replace_ci(text: &str, needle: &str, with: &str) -> String {
    if needle.is_empty() {
        return text.to_owned();
    }
    let lower = text.to_lowercase();
    let n = needle.to_lowercase();
    if lower.len() != text.len() {
        return text.replace(needle, with);
    }
    let mut out = String::new();
    let mut i = 0;
    while let Some(p) = lower[i..].find(&n) {
        out.push_str(&text[i..i + p]);
        out.push_str(with);
        i += p + n.len();
    }
    out.push_str(&text[i..]);
    out
}

/// The judge's verdict on one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// 0–3, or `None` when the reply held no grade.
    pub score: Option<u8>,
    /// The judge's raw reply.
    pub raw: String,
}

/// The first digit 0–3 of a reply that stands alone (not part of a larger number).
pub fn parse_grade(reply: &str) -> Option<u8> {
    let chars: Vec<char> = reply.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if let Some(d) = c.to_digit(10) {
            let prev_digit = i > 0 && chars[i - 1].is_ascii_digit();
            let next_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if !prev_digit && !next_digit && d <= 3 {
                return Some(d as u8);
            }
        }
    }
    None
}

/// Grades `answer` to `probe` with `judge`. An empty answer is graded too
/// (it is a control); an empty answer from a model under test never reaches
/// here without being reported.
///
/// # Errors
/// The judge model's.
pub fn grade(judge: &Model, probe: &Probe, answer: &str) -> Result<Verdict> {
    let user = format!(
        "QUESTION: {}\nREFERENCE: {}\nCANDIDATE: {}\nGrade (0, 1, 2 or 3):",
        probe.question.trim(),
        probe.reference.trim(),
        if answer.trim().is_empty() { "(no answer)" } else { answer.trim() }
    );
    let mut msgs = vec![ChatMessage::system(JUDGE_SYSTEM)];
    for (u, a) in FEW_SHOT {
        msgs.push(ChatMessage::user(*u));
        msgs.push(ChatMessage::assistant(*a));
    }
    msgs.push(ChatMessage::user(user));
    let g = judge.generate(Purpose::Judge, msgs, Sampling::greedy(4))?;
    let raw = g.content.clone();
    Ok(Verdict { score: parse_grade(&raw), raw })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use mf_forgetting::scenario::ProbeDimension;

    use super::*;

    fn probe() -> Probe {
        Probe {
            id: "p1".into(),
            question: "Which build broke checkout, and how many orders failed?".into(),
            dimension: ProbeDimension::FactRetention,
            required: vec![Keyword::Variants(vec!["4817".into(), "#4817".into()]), Keyword::Variants(vec!["6,404".into(), "6404".into()])],
            partial: vec![Keyword::One("checkout".into())],
            reference: "Build 4817 broke checkout; 6,404 orders failed.".into(),
            wrong: vec![],
        }
    }

    #[test]
    fn grades_are_parsed_strictly() {
        assert_eq!(parse_grade("3"), Some(3));
        assert_eq!(parse_grade(" Grade: 2."), Some(2));
        assert_eq!(parse_grade("10 then 1"), Some(1));
        assert_eq!(parse_grade("7"), None);
        assert_eq!(parse_grade("none"), None);
        assert_eq!(parse_grade(""), None);
    }

    #[test]
    fn controls_bracket_the_keyword_scorer() {
        let p = probe();
        let kw = |a: &str| crate::keyword::score(a, &p.required, &p.partial);
        assert_eq!(kw(&Control::Identical.answer(&p, "eu-west-2")), 3);
        let para = Control::Paraphrase.answer(&p, "eu-west-2");
        assert_ne!(para, p.reference);
        assert_eq!(kw(&para), 3, "{para}");
        let contra = Control::Contradiction.answer(&p, "eu-west-2");
        assert_eq!(contra, "Build 7140 broke checkout; 9,737 orders failed.");
        assert!(kw(&contra) <= 1, "{contra}");
        assert_eq!(kw(&Control::Empty.answer(&p, "x")), 0);
    }

    #[test]
    fn contradiction_replaces_entities_or_negates() {
        let mut p = probe();
        p.required = vec![Keyword::One("redis".into())];
        p.reference = "Redis ran out of memory.".into();
        assert_eq!(contradiction(&p, "postgres"), "postgres ran out of memory.");
        assert_eq!(contradiction(&p, ""), "No. It is not the case that Redis ran out of memory.");
    }
}
