//! A stored investigation as a scenario of the suite (`mf replay ID
//! --export DIR`, the app's History): the messages it had when its history
//! first went over the trigger, and probes whose references are what it
//! really did after that point (its next replies and its final answer), so a
//! user's real work joins their benchmark runs.
//!
//! A probe's keywords are the facts of its reference that the compressible
//! middle of the exported history holds and that neither the pinned zone
//! (system prompt and question) nor the last two messages hold: what a
//! compaction can lose. A reference with no such fact says nothing about
//! forgetting and is left out (the export says so). Probes written by the
//! user come first; their keywords are found the same way.
//!
//! The file keeps the investigation's real size, so its `origin` names where
//! it came from and the size targets of written scenarios do not apply
//! (`scenarios/tools/validate.py`); every other rule of the format does.

use std::path::{Path, PathBuf};

use mf_forgetting::literals::extract_from_text;
use mf_forgetting::message::question_index;
use mf_forgetting::scenario::{Keyword, Length, Origin, Probe, ProbeDimension, Scenario};
use mf_forgetting::taxonomy::ProblemClass;
use mf_forgetting::{Message, Role};

use crate::error::{BenchError, Result};
use crate::replay::target_text;

/// Messages at the end of a history that every condition keeps verbatim
/// (the suite's recent zone), whose facts a probe must not rest on.
const RECENT: usize = 2;

/// Probes a scenario carries at most (the suite asks 2–3).
const MAX_PROBES: usize = 3;

/// Keywords a probe requires at most, and partial keywords at most.
const MAX_KEYWORDS: usize = 3;

/// The shortest keyword: shorter ones match by chance.
const MIN_KEYWORD_CHARS: usize = 3;

/// The question of a probe whose reference is one of the next replies.
pub const NEXT_STEP_QUESTION: &str = "What is the next step of this investigation?";

/// The question of the probe whose reference is the final answer.
pub const ANSWER_QUESTION: &str = "What is the answer to the question of this investigation, with the facts it rests on?";

/// A probe the user wrote: a question and the answer they expect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserProbe {
    /// The question asked after compaction.
    pub question: String,
    /// The answer expected.
    pub reference: String,
}

impl std::str::FromStr for UserProbe {
    type Err = String;

    /// `QUESTION => ANSWER`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (q, a) = s.split_once("=>").ok_or_else(|| format!("{s:?}: write a probe as \"QUESTION => ANSWER\""))?;
        let (question, reference) = (q.trim().to_owned(), a.trim().to_owned());
        if question.is_empty() || reference.is_empty() {
            return Err(format!("{s:?}: both the question and the answer are needed"));
        }
        Ok(UserProbe { question, reference })
    }
}

/// An exported scenario and what the export could not do as asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The scenario.
    pub scenario: Scenario,
    /// One line per probe left out, or a rule the file does not meet.
    pub notes: Vec<String>,
}

/// The lowercase text of messages, tool calls included.
fn text_of(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&m.content.to_lowercase());
        out.push('\n');
        for c in &m.tool_calls {
            out.push_str(&c.name.to_lowercase());
            out.push(' ');
            out.push_str(&c.arguments.to_string().to_lowercase());
            out.push('\n');
        }
    }
    out
}

/// Words a keyword is never made of.
const STOPWORDS: &[&str] = &[
    "about",
    "after",
    "again",
    "also",
    "because",
    "been",
    "before",
    "being",
    "between",
    "both",
    "could",
    "does",
    "each",
    "from",
    "have",
    "here",
    "into",
    "more",
    "most",
    "next",
    "only",
    "other",
    "over",
    "should",
    "some",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "under",
    "until",
    "very",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "with",
    "would",
    "your",
    "name",
    "arguments",
    "true",
    "false",
    "null",
];

/// The candidate keywords of a reference, in order: its literals (paths,
/// numbers, identifiers, …), then distinctive words (with a digit or a
/// capital, or of 6+ letters), each once (ignoring case).
fn candidates(reference: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim_matches(|c: char| !c.is_alphanumeric());
        let lower = s.to_lowercase();
        if s.chars().count() >= MIN_KEYWORD_CHARS && !STOPWORDS.contains(&lower.as_str()) && !out.iter().any(|o| o.to_lowercase() == lower) {
            out.push(s.to_owned());
        }
    };
    for (_, lit) in extract_from_text(reference) {
        push(&lit);
    }
    for w in reference.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':'))) {
        let distinctive = w.chars().any(|c| c.is_ascii_digit()) || w.chars().next().is_some_and(char::is_uppercase) || w.chars().count() >= 6;
        if distinctive {
            push(w);
        }
    }
    out
}

/// The keywords of a probe over the exported history: required, the facts
/// only the compressible middle holds; partial, other words of the
/// reference the history holds. Neither appears in the probe's question.
fn keywords(reference: &str, question: &str, middle: &str, kept: &str, whole: &str) -> (Vec<Keyword>, Vec<Keyword>) {
    let q = question.to_lowercase();
    let (mut required, mut partial) = (Vec::new(), Vec::new());
    for c in candidates(reference) {
        let l = c.to_lowercase();
        if q.contains(&l) {
            continue;
        }
        if middle.contains(&l) && !kept.contains(&l) && required.len() < MAX_KEYWORDS {
            required.push(Keyword::One(c));
        } else if whole.contains(&l) && partial.len() < MAX_KEYWORDS {
            partial.push(Keyword::One(c));
        }
    }
    // A probe earns partial credit for some of its facts: with every fact
    // required, the last one is partial instead (one stays required).
    if partial.is_empty() && required.len() >= 2 {
        partial.extend(required.pop());
    }
    (required, partial)
}

/// The length bucket nearest a history of `chars` characters (about four
/// per token, as the suite's targets count them).
fn length_of(chars: usize) -> Length {
    match chars / 4 {
        t if t < 1250 => Length::Short,
        t if t < 3750 => Length::Medium,
        _ => Length::Long,
    }
}

/// The scenario of `transcript` cut at `cut` (its first compaction point):
/// the messages before it, probes from `user` and then from the replies at
/// and after `cut` (at most `targets` of them, the final answer included
/// beyond them). `question` is the investigation's.
///
/// # Errors
/// [`BenchError::InvalidSetting`] for a cut outside the transcript or
/// before its question; the format's own checks.
pub fn scenario_from_transcript(transcript: &[Message], cut: usize, question: &str, origin: Origin, user: &[UserProbe], targets: usize) -> Result<Exported> {
    let bad = |reason: String| BenchError::InvalidSetting { name: "export", reason };
    if cut == 0 || cut > transcript.len() {
        return Err(bad(format!("cut at message {cut} of a transcript of {} messages", transcript.len())));
    }
    // A call's results go with it: a history never ends inside a tool chain.
    let mut cut = cut;
    while cut < transcript.len() && transcript[cut].role == Role::Tool {
        cut += 1;
    }
    let messages: Vec<Message> = transcript[..cut].iter().cloned().map(|m| Message { summary: false, pinned: false, ..m }).collect();
    let q = question_index(&messages).ok_or_else(|| bad("the history before the cut holds no question".to_owned()))?;
    let recent_start = messages.len().saturating_sub(RECENT).max(q + 1);
    let pinned = text_of(&messages[..=q]);
    let middle = text_of(&messages[q + 1..recent_start]);
    let kept = format!("{pinned}\n{}", text_of(&messages[recent_start..]));
    let whole = text_of(&messages);

    let mut wanted: Vec<(String, String, &str)> = user.iter().map(|p| (p.question.clone(), p.reference.clone(), "your probe")).collect();
    let later: Vec<&Message> = transcript[cut..].iter().filter(|m| m.role == Role::Assistant && !target_text(m).trim().is_empty()).collect();
    let last_answer = later.iter().rposition(|m| m.tool_calls.is_empty() && !m.content.trim().is_empty());
    for (i, m) in later.iter().enumerate().take(targets) {
        if Some(i) != last_answer {
            wanted.push((NEXT_STEP_QUESTION.to_owned(), target_text(m), "a next reply"));
        }
    }
    if let Some(i) = last_answer {
        wanted.push((ANSWER_QUESTION.to_owned(), later[i].content.clone(), "the final answer"));
    }

    let mut probes = Vec::new();
    let mut notes = Vec::new();
    for (question, reference, what) in wanted {
        if probes.len() == MAX_PROBES {
            notes.push(format!("{what} left out: a scenario carries {MAX_PROBES} probes at most"));
            continue;
        }
        let (required, partial) = keywords(&reference, &question, &middle, &kept, &whole);
        if required.is_empty() {
            let short: String = reference.chars().take(60).collect();
            notes.push(format!("{what} left out ({short:?}…): none of its facts is held only by the middle of the history, so losing the middle cannot show"));
            continue;
        }
        if partial.is_empty() {
            notes.push(format!("probe p{}: no partial keyword (its one fact is required)", probes.len() + 1));
        }
        probes.push(Probe {
            id: format!("p{}", probes.len() + 1),
            question,
            dimension: ProbeDimension::FactRetention,
            required,
            partial,
            reference,
            wrong: Vec::new(),
        });
    }
    if probes.len() < 2 {
        notes.push(format!("{} probe(s); the suite asks 2–3: add your own (QUESTION => ANSWER)", probes.len()));
    }
    let chars: usize = messages.iter().map(|m| m.content.len() + m.tool_calls.iter().map(|c| c.arguments.to_string().len()).sum::<usize>()).sum();
    let title_q: String = question.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(100).collect();
    let scenario = Scenario {
        id: format!("investigation-{}", origin.investigation),
        class: ProblemClass::Exploratory,
        length: length_of(chars),
        title: format!("Investigation {}: {title_q}", origin.investigation),
        messages,
        probes,
        origin: Some(origin),
    };
    scenario.validate()?;
    Ok(Exported { scenario, notes })
}

/// Exports investigation `id` of `sessions` into `dir` as
/// `investigation-ID.json` (made if missing; an earlier export is replaced).
/// The cut is where its history first went over its trigger, as the live
/// loop measured it (its first gauge over the threshold): no model is
/// loaded. Returns the file and the export's notes.
///
/// # Errors
/// [`BenchError::Replay`] for a missing investigation or an unreadable
/// store; [`BenchError::InvalidSetting`] for a history that never reached
/// its trigger; [`BenchError::WriteFile`].
pub fn export_session(sessions: &mf_agent::Sessions, id: i64, dir: &Path, user: &[UserProbe], targets: usize) -> Result<(PathBuf, Exported)> {
    let failed = |what: String| move |source: mf_agent::AgentError| BenchError::Replay { what, source };
    let spec = sessions.spec(id).map_err(failed(format!("investigation {id}")))?;
    let store = sessions.store().map_err(failed("the session store".to_owned()))?;
    let row = store.get(id).map_err(failed(format!("investigation {id}")))?;
    let transcript = store.transcript(id).map_err(failed(format!("investigation {id}'s transcript")))?;
    let events = store.events(id).map_err(failed(format!("investigation {id}'s events")))?;
    let cut = events
        .iter()
        .find_map(|e| match e {
            mf_agent::AgentEvent::Gauge { gauge, .. } if gauge.prompt_tokens > gauge.threshold => Some(gauge.messages as usize),
            _ => None,
        })
        .filter(|&n| n > mf_forgetting::budget::MIN_MESSAGES_TO_COMPACT && n <= transcript.len())
        .ok_or_else(|| BenchError::InvalidSetting {
            name: "export",
            reason: format!("investigation {id} never went over its compaction trigger: there is no point to cut it at"),
        })?;
    let origin = Origin { investigation: id, model: spec.engine.model_label(), transcript_messages: transcript.len() };
    let exported = scenario_from_transcript(&transcript, cut, &row.question, origin, user, targets)?;
    let path = dir.join(format!("{}.json", exported.scenario.id));
    let io = |source: std::io::Error| BenchError::WriteFile { path: path.clone(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut json = serde_json::to_string_pretty(&exported.scenario)?;
    json.push('\n');
    // Written beside, then renamed: a crash never leaves half a scenario.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok((path, exported))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use mf_forgetting::ToolCall;

    fn call(id: &str, url: &str) -> Message {
        Message::assistant_calls(
            &format!("a-{id}"),
            "",
            vec![ToolCall { id: id.into(), name: "http_get".into(), arguments: serde_json::json!({ "url": url }) }],
        )
    }

    fn result(id: &str, body: &str) -> Message {
        Message::tool_result(&format!("r-{id}"), id, "http_get", body)
    }

    /// An investigation: the owner and the error rate come early, the last
    /// two messages before the cut hold neither.
    fn transcript() -> Vec<Message> {
        let mut t = vec![Message::system("s", "You investigate with tools."), Message::user("q", "Why did the checkout fail last night?")];
        t.push(call("c1", "http://127.0.0.1:9/deploys"));
        t.push(result("c1", r#"{"deploy": "checkout-api v4.17.2", "owner": "Marisol Okafor", "at": "02:14"}"#));
        t.push(call("c2", "http://127.0.0.1:9/errors"));
        t.push(result("c2", r#"{"error_rate": "38%", "code": "E-PAYMENT-TIMEOUT"}"#));
        t.push(call("c3", "http://127.0.0.1:9/weather"));
        t.push(result("c3", r#"{"sky": "clear"}"#));
        // The cut is here (8 messages).
        t.push(call("c4", "http://127.0.0.1:9/rollbacks"));
        t.push(result("c4", r#"{"rollback": "none"}"#));
        t.push(Message::assistant(
            "answer",
            "The deploy checkout-api v4.17.2 by Marisol Okafor at 02:14 raised E-PAYMENT-TIMEOUT to 38% and was never rolled back.",
        ));
        t
    }

    fn origin() -> Origin {
        Origin { investigation: 7, model: "m.gguf".into(), transcript_messages: 11 }
    }

    #[test]
    fn the_cut_history_and_probes_on_what_only_the_middle_holds() {
        let t = transcript();
        let e = scenario_from_transcript(&t, 8, "Why did the checkout fail last night?", origin(), &[], 2).unwrap();
        let s = &e.scenario;
        assert_eq!(s.messages.len(), 8);
        assert_eq!(s.id, "investigation-7");
        assert_eq!(s.origin.as_ref().unwrap().transcript_messages, 11);
        // The next call's URL is nowhere in the history: no fact of the middle, left out.
        assert!(e.notes.iter().any(|n| n.starts_with("a next reply left out")), "{:?}", e.notes);
        let answer = s.probes.iter().find(|p| p.question == ANSWER_QUESTION).expect("the final answer is a probe");
        let req: Vec<String> = answer.required.iter().flat_map(|k| k.variants()).map(str::to_owned).collect();
        assert!(req.iter().any(|k| k.contains("4.17.2")) && req.len() == MAX_KEYWORDS, "{req:?}");
        assert!(!answer.partial.is_empty(), "facts beyond the required ones are partial credit");
        // Nothing required is held by the pinned zone or the last two messages.
        let kept = text_of(&[&s.messages[..2], &s.messages[6..]].concat());
        assert!(req.iter().all(|k| !kept.contains(&k.to_lowercase())), "{req:?}");
        // One probe: the file says the suite wants two.
        assert!(e.notes.iter().any(|n| n.contains("the suite asks 2–3")), "{:?}", e.notes);
        // It parses as a scenario again (the format's own checks).
        let back = Scenario::parse(&serde_json::to_string(s).unwrap()).unwrap();
        assert_eq!(&back, s);
    }

    #[test]
    fn user_probes_come_first_and_need_a_fact_of_the_middle() {
        let t = transcript();
        let user: Vec<UserProbe> = ["What error code did the errors endpoint return? => E-PAYMENT-TIMEOUT at 38%", "Was the sky clear? => clear"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let e = scenario_from_transcript(&t, 8, "Why did the checkout fail last night?", origin(), &user, 2).unwrap();
        let p = &e.scenario.probes;
        assert_eq!(p[0].question, user[0].question);
        assert_eq!(p.len(), 2, "the user's first probe and the final answer; {:?}", e.notes);
        // "clear" is in the last two messages before the cut: no forgetting to measure.
        assert!(e.notes.iter().any(|n| n.starts_with("your probe left out")), "{:?}", e.notes);
        assert!(!e.notes.iter().any(|n| n.contains("2–3")));
    }

    #[test]
    fn a_probe_is_written_as_question_and_answer() {
        assert!("no arrow".parse::<UserProbe>().unwrap_err().contains("QUESTION => ANSWER"));
        assert!(" => answer".parse::<UserProbe>().is_err());
        assert_eq!("Q? => A".parse::<UserProbe>().unwrap(), UserProbe { question: "Q?".into(), reference: "A".into() });
    }

    #[test]
    fn a_cut_inside_a_tool_chain_takes_its_results() {
        let t = transcript();
        // Message 8 is the call to /rollbacks, 9 its result.
        let e = scenario_from_transcript(&t, 9, "Why did the checkout fail last night?", origin(), &[], 2).unwrap();
        assert_eq!(e.scenario.messages.len(), 10);
        assert_eq!(e.scenario.messages.last().unwrap().role, Role::Tool);
    }

    #[test]
    fn a_cut_outside_the_transcript_is_refused() {
        let t = transcript();
        for cut in [0, 12] {
            assert!(matches!(scenario_from_transcript(&t, cut, "q", origin(), &[], 2).unwrap_err(), BenchError::InvalidSetting { name: "export", .. }));
        }
    }
}
