//! The conversation / scenario file format (`notes/scenario-format.md`).
//!
//! Parsing from a string and validation are pure; reading files is the
//! caller's. Unknown fields are rejected, so a typo names the field.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::ForgettingError;
use crate::message::{Message, Role, assign_default_ids, question_index};
use crate::taxonomy::ProblemClass;

/// Conversation length bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Length {
    /// Short.
    Short,
    /// Medium.
    Medium,
    /// Long.
    Long,
}

/// What a probe tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeDimension {
    /// A fact survives.
    FactRetention,
    /// The "why" survives.
    CausalFidelity,
    /// Both sides of a conflict survive.
    ContradictionAwareness,
    /// The order of events survives.
    TemporalOrdering,
    /// Names and identifiers survive.
    EntityRecall,
}

/// A keyword: one string, or a list of accepted variants of one keyword.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Keyword {
    /// One string.
    One(String),
    /// Variants; any one matches.
    Variants(Vec<String>),
}

impl Keyword {
    /// The accepted variants.
    pub fn variants(&self) -> Vec<&str> {
        match self {
            Keyword::One(s) => vec![s.as_str()],
            Keyword::Variants(v) => v.iter().map(String::as_str).collect(),
        }
    }

    /// Case-insensitive substring match of any variant.
    pub fn matches(&self, text_lower: &str) -> bool {
        self.variants().iter().any(|v| !v.is_empty() && text_lower.contains(&v.to_lowercase()))
    }
}

/// The format's keyword score (0–3, paper-compatible): all required groups
/// matched → 3; otherwise the matched groups among required + partial:
/// 0 → 0, 1 → 1, 2 or more → 2.
pub fn keyword_score(answer: &str, required: &[Keyword], partial: &[Keyword]) -> u8 {
    let lower = answer.to_lowercase();
    let req = required.iter().filter(|k| k.matches(&lower)).count();
    if !required.is_empty() && req == required.len() {
        return 3;
    }
    let part = partial.iter().filter(|k| k.matches(&lower)).count();
    match req + part {
        0 => 0,
        1 => 1,
        _ => 2,
    }
}

/// One probe question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Probe id, unique in its file.
    pub id: String,
    /// The question asked after compaction.
    pub question: String,
    /// What it tests.
    pub dimension: ProbeDimension,
    /// Keywords that must all match for a 3.
    pub required: Vec<Keyword>,
    /// Keywords for partial credit.
    #[serde(default)]
    pub partial: Vec<Keyword>,
    /// A reference answer for the judge.
    pub reference: String,
    /// Wrong answers a forgetful reader would give (the other invoice, the
    /// superseded figure, the earlier owner), written from values of the same
    /// conversation: the likelihood scorer's choice test asks that the
    /// reference out-score each of them. Optional; when given, each is
    /// non-empty, they are distinct and none is the reference (compared
    /// trimmed, ignoring case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong: Vec<String>,
}

/// One conversation file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Scenario id (the file name without `.json`).
    pub id: String,
    /// Problem class.
    pub class: ProblemClass,
    /// Length bucket.
    pub length: Length,
    /// One-line description.
    pub title: String,
    /// The history.
    pub messages: Vec<Message>,
    /// The probes.
    pub probes: Vec<Probe>,
    /// Where a scenario exported from an investigation came from
    /// (`mf replay ID --export DIR`); absent in written ones. Such a file
    /// keeps the investigation's real size, so the size targets that written
    /// scenarios are held to do not apply to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// The investigation an exported scenario was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// Its id in the session store it was exported from.
    pub investigation: i64,
    /// The model it ran on.
    pub model: String,
    /// The messages it had in all: the file holds those before its first
    /// compaction point; the replies after it are the probes' references.
    pub transcript_messages: usize,
}

impl Scenario {
    /// Parses and validates a file's text; gives messages without an id the id `m<index>`.
    ///
    /// # Errors
    /// [`ForgettingError::Parse`] for bad JSON or a field that does not fit
    /// the format (serde's message names it), or a validation error.
    pub fn parse(text: &str) -> Result<Scenario, ForgettingError> {
        let mut s: Scenario = serde_json::from_str(text).map_err(|e| ForgettingError::Parse {
            line: e.line(),
            column: e.column(),
            message: e.to_string().split(" at line ").next().unwrap_or("").to_owned(),
        })?;
        assign_default_ids(&mut s.messages);
        s.validate()?;
        Ok(s)
    }

    /// Checks what serde cannot.
    ///
    /// # Errors
    /// The first problem found, naming its field.
    pub fn validate(&self) -> Result<(), ForgettingError> {
        let bad = |field: String, reason: &str| Err(ForgettingError::InvalidConversation { field, reason: reason.to_owned() });
        if self.id.trim().is_empty() {
            return bad("id".into(), "must not be empty");
        }
        validate_messages(&self.messages)?;
        let mut probe_ids = HashSet::new();
        for (i, p) in self.probes.iter().enumerate() {
            if !probe_ids.insert(p.id.as_str()) {
                return bad(format!("probes[{i}].id"), "duplicate probe id");
            }
            if p.question.trim().is_empty() {
                return bad(format!("probes[{i}].question"), "must not be empty");
            }
            if p.required.is_empty() {
                return bad(format!("probes[{i}].required"), "needs at least one keyword");
            }
            for (field, list) in [("required", &p.required), ("partial", &p.partial)] {
                for (j, k) in list.iter().enumerate() {
                    let v = k.variants();
                    if v.is_empty() || v.iter().any(|s| s.trim().is_empty()) {
                        return bad(format!("probes[{i}].{field}[{j}]"), "a keyword must be a non-empty string or list of non-empty strings");
                    }
                }
            }
            validate_wrong_answers(i, p)?;
        }
        Ok(())
    }
}

/// A probe's wrong answers are non-empty, distinct and none is the
/// reference; the comparison trims and ignores case, because a choice between
/// two answers that differ only there measures nothing.
fn validate_wrong_answers(i: usize, p: &Probe) -> Result<(), ForgettingError> {
    let reference = p.reference.trim().to_lowercase();
    let mut seen = HashSet::new();
    for (j, answer) in p.wrong.iter().enumerate() {
        let key = answer.trim().to_lowercase();
        let reason = if key.is_empty() {
            "must not be empty"
        } else if key == reference {
            "is the reference answer; a wrong answer must differ from it"
        } else if !seen.insert(key) {
            "repeats an earlier wrong answer"
        } else {
            continue;
        };
        return Err(ForgettingError::InvalidConversation { field: format!("probes[{i}].wrong[{j}]"), reason: format!("probe {:?}: {reason}", p.id) });
    }
    Ok(())
}

/// Validates a history on its own (the agent's, a session dump's).
///
/// # Errors
/// [`ForgettingError::EmptyHistory`], [`ForgettingError::NoUserMessage`], or
/// [`ForgettingError::InvalidConversation`] naming the message field: tool
/// fields on a non-tool message, `tool_calls` on a non-assistant message, a
/// `tool_call_id` that names no call of an earlier assistant message, a
/// duplicate message or call id.
pub fn validate_messages(messages: &[Message]) -> Result<(), ForgettingError> {
    if messages.is_empty() {
        return Err(ForgettingError::EmptyHistory);
    }
    if question_index(messages).is_none() {
        return Err(ForgettingError::NoUserMessage);
    }
    let bad = |field: String, reason: String| Err(ForgettingError::InvalidConversation { field, reason });
    let mut ids = HashSet::new();
    let mut calls: BTreeSet<&str> = BTreeSet::new();
    for (i, m) in messages.iter().enumerate() {
        if !m.id.0.is_empty() && !ids.insert(m.id.0.as_str()) {
            return bad(format!("messages[{i}].id"), format!("duplicate message id {:?}", m.id.0));
        }
        if m.role != Role::Assistant && !m.tool_calls.is_empty() {
            return bad(format!("messages[{i}].tool_calls"), "only assistant messages make tool calls".into());
        }
        if m.role != Role::Tool {
            if m.tool_call_id.is_some() {
                return bad(format!("messages[{i}].tool_call_id"), "only tool messages answer a call".into());
            }
            if m.is_error {
                return bad(format!("messages[{i}].is_error"), "only tool messages can be errors".into());
            }
        }
        for (j, c) in m.tool_calls.iter().enumerate() {
            if c.id.is_empty() {
                return bad(format!("messages[{i}].tool_calls[{j}].id"), "must not be empty".into());
            }
            if !calls.insert(c.id.as_str()) {
                return bad(format!("messages[{i}].tool_calls[{j}].id"), format!("duplicate call id {:?}", c.id));
            }
            if !c.arguments.is_object() && !c.arguments.is_null() {
                return bad(format!("messages[{i}].tool_calls[{j}].arguments"), "must be a JSON object".into());
            }
        }
        if let Some(id) = &m.tool_call_id
            && !calls.contains(id.as_str())
        {
            return bad(format!("messages[{i}].tool_call_id"), format!("{id:?} does not name a call of an earlier assistant message"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r##"{
      "id": "lookup-short", "class": "lookup", "length": "short", "title": "t",
      "messages": [
        {"role": "system", "content": "You are an investigation assistant."},
        {"role": "user", "content": "Which build broke checkout?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "call_1", "name": "http_get", "arguments": {"url": "http://api.local/builds"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "http_get", "content": "{\"build\": 4817}"},
        {"role": "tool", "tool_call_id": "call_1", "name": "http_get", "content": "ConnectionError: timed out", "is_error": true},
        {"role": "assistant", "content": "Build 4817."}
      ],
      "probes": [{"id": "p1", "question": "Which build?", "dimension": "fact_retention",
                  "required": [["4817", "#4817"]], "partial": ["build"], "reference": "Build 4817."}]
    }"##;

    #[test]
    fn parses_the_format_and_assigns_default_ids() {
        let s = Scenario::parse(GOOD).unwrap();
        assert_eq!(s.class, ProblemClass::Lookup);
        assert_eq!(s.messages[3].id.as_str(), "m3");
        assert_eq!(s.probes[0].required[0], Keyword::Variants(vec!["4817".into(), "#4817".into()]));
        assert_eq!(s.probes[0].partial[0], Keyword::One("build".into()));
    }

    #[test]
    fn unknown_fields_are_named() {
        let text = GOOD.replace("\"title\": \"t\"", "\"title\": \"t\", \"titel\": 1");
        let e = Scenario::parse(&text).unwrap_err().to_string();
        assert!(e.contains("unknown field `titel`"), "{e}");
        assert!(e.starts_with("line "), "{e}");
    }

    fn with_messages(messages: &str) -> String {
        let start = GOOD.find("\"messages\"").unwrap();
        let end = GOOD.find("\"probes\"").unwrap();
        format!("{}\"messages\": {messages},\n{}", &GOOD[..start], &GOOD[end..])
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            ("[]", "the history is empty"),
            (r#"[{"role":"system","content":"s"}]"#, "no user message"),
            (
                r#"[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"call_9","content":"x"}]"#,
                "messages[1].tool_call_id: \"call_9\" does not name a call",
            ),
            (r#"[{"role":"user","content":"q","is_error":true}]"#, "messages[0].is_error"),
            (r#"[{"role":"user","content":"q","tool_calls":[{"id":"a","name":"n","arguments":{}}]}]"#, "messages[0].tool_calls"),
            (r#"[{"id":"x","role":"user","content":"q"},{"id":"x","role":"assistant","content":"a"}]"#, "messages[1].id: duplicate"),
        ];
        for (msgs, want) in cases {
            let e = Scenario::parse(&with_messages(msgs)).unwrap_err().to_string();
            assert!(e.contains(want), "{msgs}: {e}");
        }
        let e = Scenario::parse(&GOOD.replace("\"required\": [[\"4817\", \"#4817\"]]", "\"required\": []")).unwrap_err().to_string();
        assert!(e.contains("probes[0].required"), "{e}");
    }

    fn with_wrong(wrong: &str) -> String {
        let text = GOOD.replace("\"reference\": \"Build 4817.\"", &format!("\"reference\": \"Build 4817.\", \"wrong\": {wrong}"));
        assert_ne!(text, GOOD, "the fixture's reference moved");
        text
    }

    #[test]
    fn wrong_answers_are_optional_and_parsed() {
        assert!(Scenario::parse(GOOD).unwrap().probes[0].wrong.is_empty());
        let s = Scenario::parse(&with_wrong(r#"["Build 4816.", "Build 3311."]"#)).unwrap();
        assert_eq!(s.probes[0].wrong, vec!["Build 4816.".to_owned(), "Build 3311.".to_owned()]);
    }

    #[test]
    fn an_empty_wrong_answer_is_refused_naming_the_probe() {
        for wrong in [r#"["Build 4816.", ""]"#, r#"["Build 4816.", "  "]"#] {
            let e = Scenario::parse(&with_wrong(wrong)).unwrap_err().to_string();
            assert!(e.contains("probes[0].wrong[1]") && e.contains("probe \"p1\"") && e.contains("empty"), "{wrong}: {e}");
        }
    }

    #[test]
    fn a_repeated_wrong_answer_is_refused_naming_the_probe() {
        // Repeats are found after trimming and ignoring case, as a scorer would see them.
        for wrong in [r#"["Build 4816.", "Build 4816."]"#, r#"["Build 4816.", " build 4816. "]"#] {
            let e = Scenario::parse(&with_wrong(wrong)).unwrap_err().to_string();
            assert!(e.contains("probes[0].wrong[1]") && e.contains("probe \"p1\"") && e.contains("repeats"), "{wrong}: {e}");
        }
    }

    #[test]
    fn the_reference_is_refused_as_a_wrong_answer_naming_the_probe() {
        for wrong in [r#"["Build 4816.", "Build 4817."]"#, r#"["Build 4816.", "BUILD 4817. "]"#] {
            let e = Scenario::parse(&with_wrong(wrong)).unwrap_err().to_string();
            assert!(e.contains("probes[0].wrong[1]") && e.contains("probe \"p1\"") && e.contains("reference"), "{wrong}: {e}");
        }
    }

    #[test]
    fn keyword_scoring_follows_the_format() {
        let req = vec![Keyword::Variants(vec!["4817".into(), "4,817".into()]), Keyword::One("Timeout".into())];
        let part = vec![Keyword::One("build".into()), Keyword::One("rollback".into())];
        assert_eq!(keyword_score("build 4,817 hit a TIMEOUT", &req, &part), 3);
        assert_eq!(keyword_score("build 4817", &req, &part), 2);
        assert_eq!(keyword_score("the build", &req, &part), 1);
        assert_eq!(keyword_score("nothing", &req, &part), 0);
        assert_eq!(keyword_score("anything", &[], &[]), 0);
    }
}
