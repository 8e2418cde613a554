//! The likelihood scorer on the live worlds: are the facts a run fetched
//! before a compaction still usable after it, measured with a model that
//! can read but not write well.
//!
//! After every strategy of a world has run, each world probe's reference
//! (and its whole wrong answers) is scored by log-probability, after the
//! probe's question, on three contexts:
//!
//! - **the run's**: the context its answer was written from (the final
//!   history without the answer);
//! - **full**, the ceiling: the uncompacted transcript
//!   ([`mf_agent::Outcome::transcript`]) of the world's run that fetched the
//!   most of it (route-driven: the whole route), so every strategy of a
//!   world is measured against the same ceiling;
//! - **baseline**, the floor: that transcript's pinned and recent zones only,
//!   the middle forgotten.
//!
//! The three are scored on a separate session whose window holds the
//! ceiling (`bench-forgetting agentic --score-ctx`), so the ceiling never
//! has to fit the window the runs had. [`likelihood_summary`] turns the
//! scores into retention `R` per strategy and per world with the suite's
//! own statistics ([`crate::likelihood::summarise`]).

use mf_forgetting::Message;
use mf_inference::{Backend, CancelToken, ChatMessage, ScoreRequest, ToolSpec};
use serde::{Deserialize, Serialize};

use super::metrics::AgenticRun;
use super::world::{ProbeKind, World, WorldProbe};
use crate::config::PROBE_PROMPT;
use crate::error::{BenchError, Result};
use crate::likelihood::{LikelihoodScore, LikelihoodSummary, ProbeFacts, score_reference, summarise};

/// What a run leaves for scoring (kept in memory, not in the results).
#[derive(Debug, Clone, PartialEq)]
pub struct RunContexts {
    /// The context the answer was written from.
    pub context: Vec<Message>,
    /// The history had nothing been compacted, without the answer.
    pub transcript: Vec<Message>,
    /// The tools the run offered (part of every rendered prompt).
    pub tools: Vec<ToolSpec>,
    /// The loop's recent zone, in messages (the floor keeps it).
    pub recent: usize,
}

/// One world probe scored on one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorldProbeScore {
    /// Probe id.
    pub probe: String,
    /// What the probe tests.
    pub kind: ProbeKind,
    /// On the run's final context.
    pub context: LikelihoodScore,
    /// On the world's ceiling (the same for every run of the world).
    pub full: LikelihoodScore,
    /// On the world's floor (the same for every run of the world).
    pub floor: LikelihoodScore,
}

/// The likelihood scorer's figures for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLikelihood {
    /// The strategy of the world's run whose transcript is the ceiling.
    pub ceiling_from: String,
    /// Messages in the ceiling, the floor and this run's context.
    pub ceiling_messages: usize,
    /// See `ceiling_messages`.
    pub floor_messages: usize,
    /// See `ceiling_messages`.
    pub context_messages: usize,
    /// Per probe.
    pub probes: Vec<WorldProbeScore>,
    /// Probes that could not be scored, and why (e.g. a context over the scoring window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unscored: Vec<String>,
}

/// The question a world probe is scored after.
#[must_use]
pub fn probe_question(p: &WorldProbe) -> String {
    format!("{PROBE_PROMPT}{}?", p.fact.trim().trim_end_matches('?'))
}

/// The floor of a transcript: its pinned and recent zones (as the loop
/// draws them), the middle left out. The whole transcript when it cannot be
/// partitioned.
#[must_use]
pub fn floor_of(transcript: &[Message], recent: usize) -> Vec<Message> {
    match mf_forgetting::zones::partition(transcript, recent) {
        Ok(z) => transcript[..z.pinned_end].iter().chain(&transcript[z.recent_start..]).cloned().collect(),
        Err(_) => transcript.to_vec(),
    }
}

async fn score_one(scorer: &dyn Backend, messages: &[Message], tools: &[ToolSpec], p: &WorldProbe) -> Result<LikelihoodScore> {
    let mut chat = mf_agent::model::chat_history(messages);
    chat.push(ChatMessage::user(probe_question(p)));
    let mut continuations = vec![p.reference.clone()];
    continuations.extend(p.wrong_answers.iter().cloned());
    let mut scored =
        scorer.score(ScoreRequest { messages: chat, tools: tools.to_vec(), continuations }, CancelToken::new()).await.map_err(BenchError::Inference)?;
    if scored.is_empty() {
        return Err(BenchError::InvalidSetting { name: "scorer", reason: "the engine returned no scores".into() });
    }
    let reference = scored.remove(0);
    Ok(score_reference(&reference, &scored, &p.reference, &p.required))
}

/// Every probe of `world` on one context, each probe's result or why it failed.
async fn score_all(scorer: &dyn Backend, world: &World, messages: &[Message], tools: &[ToolSpec]) -> Vec<Result<LikelihoodScore>> {
    let mut out = Vec::with_capacity(world.probes.len());
    for p in &world.probes {
        out.push(score_one(scorer, messages, tools, p).await);
    }
    out
}

/// Scores `world`'s probes on each of `runs` (the world's runs, each with
/// its contexts) against the world's ceiling and floor, and sets each run's
/// [`AgenticRun::likelihood`]. Runs without contexts (failed ones) are left
/// as they are; a world none of whose runs has contexts is not scored.
///
/// # Errors
/// None of its own: a probe that cannot be scored is listed in the run's
/// `unscored` with the engine's reason.
pub async fn score_world(scorer: &dyn Backend, world: &World, runs: &mut [AgenticRun]) {
    // The ceiling: the transcript of the run that fetched most of the world
    // (then the longest); the first such run on ties.
    let Some(ceiling_run) = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.contexts.as_ref().map(|c| (i, r.endpoints_fetched, c.transcript.len())))
        .max_by(|a, b| (a.1, a.2).cmp(&(b.1, b.2)).then(b.0.cmp(&a.0)))
        .map(|(i, ..)| i)
    else {
        return;
    };
    let Some(c) = runs[ceiling_run].contexts.clone() else { return };
    let ceiling_from = runs[ceiling_run].strategy.clone();
    let floor = floor_of(&c.transcript, c.recent);
    let full = score_all(scorer, world, &c.transcript, &c.tools).await;
    let low = score_all(scorer, world, &floor, &c.tools).await;
    for run in runs.iter_mut() {
        let Some(rc) = run.contexts.as_ref() else { continue };
        let own = score_all(scorer, world, &rc.context, &rc.tools).await;
        let mut probes = Vec::new();
        let mut unscored = Vec::new();
        for (((p, f), b), o) in world.probes.iter().zip(&full).zip(&low).zip(own) {
            match (f, b, o) {
                (Ok(f), Ok(b), Ok(o)) => probes.push(WorldProbeScore { probe: p.id.clone(), kind: p.kind, context: o, full: f.clone(), floor: b.clone() }),
                (Err(e), ..) => unscored.push(format!("{}: on the ceiling: {e}", p.id)),
                (_, Err(e), _) => unscored.push(format!("{}: on the floor: {e}", p.id)),
                (.., Err(e)) => unscored.push(format!("{}: on this run's context: {e}", p.id)),
            }
        }
        run.likelihood = Some(RunLikelihood {
            ceiling_from: ceiling_from.clone(),
            ceiling_messages: c.transcript.len(),
            floor_messages: floor.len(),
            context_messages: rc.context.len(),
            probes,
            unscored,
        });
    }
}

/// The name of a probe kind in the tables (`fact`, `contradiction`, `order`).
fn kind_name(k: ProbeKind) -> String {
    serde_json::to_value(k).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Retention and choice per strategy over the scored runs, in `strategies`
/// order, with `full` (the ceiling) and `baseline` (the floor) first; "class"
/// is the world and "dimension" the probe's kind. `None` when no run was scored.
#[must_use]
pub fn likelihood_summary(runs: &[AgenticRun], strategies: &[&str]) -> Option<LikelihoodSummary> {
    let mut facts: Vec<ProbeFacts> = Vec::new();
    for r in runs.iter().filter(|r| r.failure.is_none()) {
        let Some(l) = &r.likelihood else { continue };
        for p in &l.probes {
            let key = format!("{}/{}", r.world, p.probe);
            let i = match facts.iter().position(|f| f.key == key) {
                Some(i) => i,
                None => {
                    let mut f = ProbeFacts {
                        key,
                        class: r.world.clone(),
                        dimension: kind_name(p.kind),
                        nll: std::collections::BTreeMap::new(),
                        choice: std::collections::BTreeMap::new(),
                        grew: Vec::new(),
                        chance: None,
                    };
                    f.nll.insert("full".into(), p.full.nll_facts);
                    f.nll.insert("baseline".into(), p.floor.nll_facts);
                    for (name, s) in [("full", &p.full), ("baseline", &p.floor)] {
                        if let Some(c) = s.choice {
                            f.choice.insert(name.into(), c);
                            f.chance = Some(1.0 / (1.0 + s.wrong_logprob.len() as f64));
                        }
                    }
                    facts.push(f);
                    facts.len() - 1
                }
            };
            facts[i].nll.insert(r.strategy.clone(), p.context.nll_facts);
            if let Some(c) = p.context.choice {
                facts[i].choice.insert(r.strategy.clone(), c);
            }
        }
    }
    if facts.is_empty() {
        return None;
    }
    let mut order = vec!["full", "baseline"];
    order.extend(strategies.iter().copied().filter(|s| runs.iter().any(|r| r.strategy == *s && r.likelihood.is_some())));
    Some(summarise(&facts, &order))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use mf_forgetting::Role;

    use super::*;

    #[test]
    fn the_floor_keeps_the_pinned_and_recent_zones() {
        let mut t = vec![Message::system("s", "sys"), Message::user("q", "question")];
        for i in 0..4 {
            let call = mf_forgetting::ToolCall { id: format!("c{i}"), name: "http".into(), arguments: serde_json::json!({"url": i}) };
            t.push(Message::assistant_calls(&format!("a{i}"), "", vec![call]));
            t.push(Message::tool_result(&format!("t{i}"), &format!("c{i}"), "http", &format!("result {i}")));
        }
        let f = floor_of(&t, 2);
        let ids: Vec<&str> = f.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["s", "q", "a3", "t3"]);
        assert_eq!(f.last().unwrap().role, Role::Tool);
    }

    #[test]
    fn a_probe_is_asked_as_the_suite_asks() {
        let p: WorldProbe = serde_json::from_value(serde_json::json!({
            "id": "owner", "fact": "the owner?", "source": "/x", "required": ["Priya"], "reference": "Priya owns it."
        }))
        .unwrap();
        assert_eq!(probe_question(&p), format!("{PROBE_PROMPT}the owner?"));
    }
}
