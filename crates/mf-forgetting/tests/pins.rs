//! Property tests of the user's pins: over random tool-using histories with
//! random messages pinned, every strategy (none, baseline, masking, v1, v2,
//! v2.1 by Δ and by Φ), under budgets from roomy to too small to restore,
//! with a summariser that works, one that fails (the fallback) and one that
//! writes too much (the budget repair), a pinned message and the rest of its
//! chain come out of `apply` byte-identical and in their order, and they
//! survive a second compaction of the compacted history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mf_forgetting::message::assign_default_ids;
use mf_forgetting::summary::NoSummarizer;
use mf_forgetting::{
    ApproxTokenCounter, Budget, Compaction, ForgettingError, Message, PlanConfig, ProbeEvaluator, Ranking, StrategyKind, Summarizer, SummaryRequest, apply,
    plan,
};
use proptest::prelude::*;
use serde_json::json;

/// A summary line and the head of the request.
struct Short;
impl Summarizer for Short {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
        Ok(format!("- seen: {}", request.user.chars().take(80).collect::<String>()))
    }
}

/// A summary far over any room it is given, so the repair must cut it:
/// every line of the log six times over, each one distinct.
struct Long;
impl Summarizer for Long {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
        let log = request.user.split("Log to summarise:\n").nth(1).unwrap_or("").split("\n\n").next().unwrap_or("");
        Ok((0..6).flat_map(|k| log.lines().map(move |l| format!("- ({k}) {l}"))).collect::<Vec<_>>().join("\n"))
    }
}

/// Δ by the digits a context holds: deterministic, and different per unit.
struct Digits;
impl ProbeEvaluator for Digits {
    fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
        Ok(context.iter().map(|m| m.analysis_text().chars().filter(char::is_ascii_digit).count()).sum::<usize>() as f64)
    }
    fn describe(&self) -> String {
        "digits".into()
    }
}

#[derive(Debug, Clone, Copy)]
enum Arm {
    Kind(StrategyKind),
    DeltaV21,
}

const ARMS: [Arm; 7] = [
    Arm::Kind(StrategyKind::None),
    Arm::Kind(StrategyKind::Baseline),
    Arm::Kind(StrategyKind::Masking),
    Arm::Kind(StrategyKind::V1),
    Arm::Kind(StrategyKind::V2),
    Arm::Kind(StrategyKind::V21),
    Arm::DeltaV21,
];

fn compact(arm: Arm, h: &[Message], b: &Budget, summariser: usize) -> Result<Compaction, ForgettingError> {
    let counter = ApproxTokenCounter;
    let p = match arm {
        Arm::Kind(StrategyKind::V21) => plan(StrategyKind::V21, h, b, &counter, &PlanConfig { ranking: Ranking::Phi, ..PlanConfig::default() }, None)?,
        Arm::Kind(k) => plan(k, h, b, &counter, &PlanConfig::default(), None)?,
        Arm::DeltaV21 => plan(StrategyKind::V21, h, b, &counter, &PlanConfig::default(), Some(&mut Digits))?,
    };
    // Every pinned message's plan says so.
    for (i, m) in p.messages.iter().enumerate() {
        if p.zones.is_pin(i) {
            assert_eq!(m.tier, mf_forgetting::Tier::Keep, "{arm:?}: pin {} has tier {:?}", m.id, m.tier);
            assert!(m.reason.to_string().contains("pinned by the user"), "{arm:?}: {}", m.reason);
        }
    }
    match summariser {
        0 => apply(&p, h, &mut Short, &counter),
        1 => apply(&p, h, &mut NoSummarizer, &counter),
        _ => apply(&p, h, &mut Long, &counter),
    }
}

fn words() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![Just("error".to_owned()), Just("port 8080".to_owned()), Just("2024-03-01".to_owned()), "[a-z]{1,10}", "[0-9]{1,6}",],
        0..90,
    )
    .prop_map(|w| w.join(" "))
}

/// A history of 1–10 rounds (a call, its results, an interpretation).
fn history() -> impl Strategy<Value = Vec<Message>> {
    (words(), prop::collection::vec((prop::collection::vec((words(), any::<bool>()), 1..3), words()), 1..10)).prop_map(|(question, rounds)| {
        let mut v = vec![
            json!({"role": "system", "content": "You are a careful agent."}),
            json!({"role": "user", "content": format!("Why does the service fail? {question}")}),
        ];
        for (n, (results, text)) in rounds.into_iter().enumerate() {
            let calls: Vec<_> =
                (0..results.len()).map(|i| json!({"id": format!("c{n}_{i}"), "name": "shell", "arguments": {"cmd": format!("cat f{n}")}})).collect();
            v.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
            for (i, (content, err)) in results.into_iter().enumerate() {
                v.push(json!({"role": "tool", "tool_call_id": format!("c{n}_{i}"), "name": "shell", "content": content, "is_error": err}));
            }
            v.push(json!({"role": "assistant", "content": text}));
        }
        let mut m: Vec<Message> = serde_json::from_value(serde_json::Value::Array(v)).unwrap();
        assign_default_ids(&mut m);
        m
    })
}

/// Roomy to too small for anything but the pinned messages.
fn budget() -> impl Strategy<Value = Budget> {
    (prop::sample::select(vec![256usize, 512, 1024, 2048, 8192]), 0usize..4).prop_map(|(context, recent)| Budget {
        context,
        reserve: context / 4,
        ratio: 0.75,
        recent,
    })
}

fn canon(m: &Message) -> String {
    serde_json::to_string(m).unwrap()
}

/// The ids the compaction must keep byte-identical: every message before the
/// recent zone of a chain with a pinned member (the zones' pins).
fn pinned_ids(h: &[Message], b: &Budget) -> Vec<String> {
    let z = mf_forgetting::zones::partition(h, b.recent).unwrap();
    z.pins.iter().map(|&i| h[i].id.0.clone()).collect()
}

/// Every id of `ids` is in `out`, unchanged, in the same order as in `h`.
fn survives(h: &[Message], out: &[Message], ids: &[String]) -> Result<(), String> {
    let mut at = Vec::new();
    for id in ids {
        let want = h.iter().find(|m| &m.id.0 == id).unwrap();
        let Some(k) = out.iter().position(|m| &m.id.0 == id) else { return Err(format!("{id} is gone")) };
        if canon(&out[k]) != canon(want) {
            return Err(format!("{id} changed: {} → {}", canon(want), canon(&out[k])));
        }
        at.push(k);
    }
    if at.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!("pins out of order: {ids:?} at {at:?}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_pinned_message_and_its_chain_survive_every_strategy(
        mut h in history(),
        b in budget(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..3),
        summariser in 0usize..3,
    ) {
        let n = h.len();
        for p in &picks {
            h[p.index(n)].pinned = true;
        }
        let ids = pinned_ids(&h, &b);
        for arm in ARMS {
            match compact(arm, &h, &b, summariser) {
                Ok(c) => {
                    prop_assert!(survives(&h, &c.messages, &ids).is_ok(), "{:?} (summariser {}): {:?}", arm, summariser, survives(&h, &c.messages, &ids));
                    for id in &ids {
                        prop_assert!(!c.report.dropped.iter().chain(&c.report.summarised).chain(&c.report.masked).chain(&c.report.verbatim).any(|d| &d.0 == id),
                            "{:?}: pinned {} has a fate in the report", arm, id);
                    }
                    // A second compaction of the result keeps them too: the
                    // flag travels with the message.
                    // (The baseline drops the question by definition: with no
                    // question left there is nothing to partition again.)
                    let z2 = match mf_forgetting::zones::partition(&c.messages, b.recent) {
                        Err(ForgettingError::NoUserMessage) if matches!(arm, Arm::Kind(StrategyKind::Baseline)) => continue,
                        z2 => z2.unwrap(),
                    };
                    let again = pinned_ids(&c.messages, &b);
                    for id in &ids {
                        let k = c.messages.iter().position(|m| &m.id.0 == id).unwrap();
                        prop_assert!(z2.is_pin(k) || k >= z2.recent_start, "{:?}: {} neither pinned nor recent after compaction ({:?})", arm, id, z2);
                    }
                    match compact(arm, &c.messages, &b, summariser) {
                        Ok(c2) => prop_assert!(survives(&c.messages, &c2.messages, &again).is_ok(), "{:?} twice: {:?}", arm, survives(&c.messages, &c2.messages, &again)),
                        Err(ForgettingError::BudgetNotRestored { .. }) => {}
                        Err(e) => prop_assert!(false, "{:?} twice: untyped failure {}", arm, e),
                    }
                }
                // Pinned messages the budget cannot hold are a typed error, never a cut.
                Err(ForgettingError::BudgetNotRestored { .. }) => {}
                Err(e) => prop_assert!(false, "{:?}: untyped failure {}", arm, e),
            }
        }
    }
}

/// The property above, once by hand, where every arm must compact: a pin in
/// the middle of the compressible zone.
#[test]
fn a_pin_in_the_middle_stays_and_the_summary_says_it_was_kept() {
    let filler = "the log says nothing else of note; ".repeat(20);
    let mut h = vec![Message::system("m0", "You investigate."), Message::user("m1", "Which host runs the billing job?")];
    for n in 0..6 {
        let call = mf_forgetting::ToolCall { id: format!("c{n}"), name: "http".into(), arguments: json!({"url": format!("/hosts/{n}")}) };
        h.push(Message::assistant_calls(&format!("m{}", 2 + 3 * n), "", vec![call]));
        h.push(Message::tool_result(&format!("m{}", 3 + 3 * n), &format!("c{n}"), "http", &format!("host h{n} runs job {n}. {filler}")));
        h.push(Message::assistant(&format!("m{}", 4 + 3 * n), &format!("So h{n} runs job {n}.")));
    }
    // The result of round 2: its call m8 and interpretation m10 come with it.
    h[9].pinned = true;
    let b = Budget { context: 1400, reserve: 200, ratio: 0.75, recent: 2 };
    for (arm, summariser) in ARMS.into_iter().flat_map(|a| (0..3).map(move |s| (a, s))) {
        let c = compact(arm, &h, &b, summariser).unwrap_or_else(|e| panic!("{arm:?}: {e}"));
        survives(&h, &c.messages, &["m8".into(), "m9".into(), "m10".into()]).unwrap_or_else(|e| panic!("{arm:?}: {e}"));
        if let Arm::Kind(StrategyKind::None) = arm {
            continue;
        }
        // The summary pass failed into the fallback, or wrote more than
        // the budget holds and the repair cut it: the pins held either way.
        if c.messages.iter().any(|m| m.summary) {
            match summariser {
                1 => assert!(c.report.fallback.is_some(), "{arm:?}: no fallback"),
                2 => assert!(c.report.notes.iter().any(|n| n.starts_with("budget: model summary cut")), "{arm:?}: no repair: {:?}", c.report.notes),
                _ => assert!(c.report.fallback.is_none(), "{arm:?}: {:?}", c.report.fallback),
            }
        }
        assert!(c.messages.len() < h.len() || arm_masks(arm), "{arm:?} compacted nothing");
        if let Some(s) = c.messages.iter().find(|m| m.summary) {
            assert!(s.content.contains("except m8, m9, m10, pinned and kept above"), "{arm:?}: {}", s.content);
            let at = |id: &str| c.messages.iter().position(|m| m.id.0 == id).unwrap();
            assert!(at("m10") < at(&s.id.0), "{arm:?}: the pins stand before the summary");
        }
    }
}

fn arm_masks(arm: Arm) -> bool {
    matches!(arm, Arm::Kind(StrategyKind::Masking))
}
