//! A stored investigation replayed under every strategy and scored by its
//! own future (`mf replay ID`): which strategy would have lost what this
//! investigation went on to need?
//!
//! No probe or reference is written by anyone. The investigation's
//! transcript (every message its history held, as first written:
//! [`mf_agent::Store::transcript`]) is cut at its **compaction points**: the
//! first place where the history up to a reply of the model is over the
//! trigger (`ratio · (C − G)`), then later such places (at most
//! [`ReplayConfig::points`], the last reply among them). At each point the
//! history up to it is compacted as each strategy would have compacted it
//! (the app's own adapter and summary request, [`crate::condition::compact`],
//! the model as summariser), and what the investigation really did next —
//! its next [`ReplayConfig::targets`] replies (calls included, written as
//! the model wrote them) and its final answer — is scored by
//! log-probability after each compacted history, with the messages between
//! the point and each target given verbatim (tool results are context, not
//! targets). The ceiling (`full`) is the uncompacted history, scored on a
//! session whose window holds it; the floor (`baseline`) keeps only its
//! pinned and recent zones. Retention R per strategy, per point, and how
//! often each beat each other, with the suite's statistics
//! ([`crate::likelihood::summarise`]).
//!
//! Prompts are rendered without the tool schemas, as the suite renders its
//! scenarios: every context is scored the same way, so the comparison holds.
//! The counts that choose the points add what the live loop's prompt held
//! beyond the messages (the tool schemas, measured on the investigation's
//! first gauge), and the strategies plan with the budget the live loop's
//! plans saw: a history the live loop compacted is a point here too, and is
//! compacted to the same target.

use std::collections::BTreeMap;
use std::time::Instant;

use mf_agent::model::DeltaSource;
use mf_forgetting::{Budget, Message, PlanConfig, Role, StrategyKind};
use mf_inference::ChatMessage;
use serde::{Deserialize, Serialize};

use crate::agentic::scoring::floor_of;
use crate::condition::{Condition, compact};
use crate::error::{BenchError, Result};
use crate::likelihood::{Interval, LikelihoodSummary, ProbeFacts, summarise};
use crate::model::{Model, to_chat};

/// What a replay measures.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// The strategies replayed (each compacts the history at every point);
    /// `baseline` and `none` are the floor and the ceiling, always scored.
    pub strategies: Vec<StrategyKind>,
    /// The investigation's budget (its `C`, `G`, ratio and recent zone).
    pub budget: Budget,
    /// The plan settings (the investigation's).
    pub plan: PlanConfig,
    /// v2.1's Δ.
    pub delta: DeltaSource,
    /// v2.1: tokens of each withholding-test answer.
    pub probe_max_tokens: u32,
    /// Replies after each point that are scored (the final answer is always scored too).
    pub targets: usize,
    /// Compaction points at most: the first crossing, the last reply, and
    /// evenly between them.
    pub points: usize,
    /// Tokens the live loop's prompt held beyond the conversation as counted
    /// here (the tool schemas, the template's glue; [`outside_tokens`]):
    /// added to every count that chooses a point. 0 counts the messages alone.
    pub outside: usize,
    /// Tokens the live loop took off the budget its plans saw: its prompt
    /// less the messages' own counts (each message rendered alone, as the
    /// plan counts them), from its first gauge; the strategies here plan
    /// with the same budget ([`Budget::less_outside`]).
    pub plan_outside: usize,
}

impl ReplayConfig {
    /// The defaults for an investigation's budget: the four compacting
    /// strategies, three replies after each of at most three points.
    #[must_use]
    pub fn for_budget(budget: Budget, plan: PlanConfig) -> Self {
        ReplayConfig {
            strategies: vec![StrategyKind::Masking, StrategyKind::V1, StrategyKind::V2, StrategyKind::V21],
            budget,
            plan,
            delta: DeltaSource::Likelihood,
            probe_max_tokens: mf_agent::model::PROBE_MAX_TOKENS,
            targets: 3,
            points: 3,
            outside: 0,
            plan_outside: 0,
        }
    }
}

/// One strategy's compaction at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PointCompaction {
    /// The strategy.
    pub strategy: String,
    /// Prompt tokens after it, counted as the point's `tokens` are (the live prompt's tool schemas included).
    pub tokens_after: usize,
    /// Messages after it.
    pub messages_after: usize,
    /// Wall time, ms.
    pub compaction_ms: u64,
    /// Why it could not compact (its targets are then not scored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub error: Option<String>,
    /// Whether the compacted history was no smaller ("grew": not ranked at this point).
    pub grew: bool,
}

/// One compaction point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReplayPoint {
    /// The transcript's messages before the point (the reply at this index is the first target).
    pub at: usize,
    /// Prompt tokens of the uncompacted history there.
    pub tokens: usize,
    /// Messages of the floor (pinned + recent).
    pub floor_messages: usize,
    /// The transcript indices of the targets scored.
    pub targets: Vec<usize>,
    /// Per strategy.
    pub compactions: Vec<PointCompaction>,
    /// R at this point per condition (`full`, `baseline`, then the
    /// strategies) over its targets with signal, with its interval (`None`:
    /// no target here separates full from baseline, or the strategy grew).
    #[serde(default)]
    pub retention: BTreeMap<String, Option<Interval>>,
}

/// One target scored under every context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TargetScore {
    /// The point (index into `points`).
    pub point: usize,
    /// The target's transcript index.
    pub at: usize,
    /// `reply` (a call or text the model wrote next) or `answer` (the final answer).
    pub kind: String,
    /// Tokens of the target.
    pub tokens: usize,
    /// NLL per token (nats) after each context: `full`, `baseline`, then the strategies.
    pub nll: BTreeMap<String, f64>,
}

/// A replay's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReplayResult {
    /// The model that summarised and scored.
    pub model: String,
    /// The investigation's id in its store.
    pub session: i64,
    /// Its question.
    pub question: String,
    /// The strategy it ran live.
    pub live_strategy: String,
    /// Messages in its transcript.
    pub transcript_messages: usize,
    /// Its budget: `C`, `G`, ratio, recent.
    pub context: usize,
    /// See `context`.
    pub reserve: usize,
    /// See `context`.
    pub ratio: f64,
    /// See `context`.
    pub recent: usize,
    /// The trigger in prompt tokens.
    pub threshold: usize,
    /// Tokens added to every count that chose a point (the live prompt's
    /// tool schemas and template glue, [`ReplayConfig::outside`]).
    #[serde(default)]
    pub outside: usize,
    /// The scoring session's window.
    pub score_ctx: u32,
    /// The compaction points.
    pub points: Vec<ReplayPoint>,
    /// Every target's scores.
    pub scores: Vec<TargetScore>,
    /// Targets that could not be scored, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(test, ts(type = "string[] | undefined", optional))]
    pub unscored: Vec<String>,
    /// R per strategy (`class`: the point, `dimension`: the target's kind).
    pub likelihood: Option<LikelihoodSummary>,
    /// Wall time, seconds.
    pub wall_s: f64,
}

/// What the model wrote in a message, as a scoring target: its text, or for
/// a call without text the call as JSON (`{"name": …, "arguments": …}`).
#[must_use]
pub fn target_text(m: &Message) -> String {
    if !m.content.trim().is_empty() {
        return m.content.clone();
    }
    m.tool_calls
        .iter()
        .map(|c| format!(r#"{{"name": {}, "arguments": {}}}"#, serde_json::Value::String(c.name.clone()), c.arguments))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The class a point's targets are summarised under (and its row in "R by
/// class"): `point N (message AT)`.
fn point_label(index: usize, at: usize) -> String {
    format!("point {} (message {at})", index + 1)
}

/// Whether `m` is something the model wrote that can be scored: a reply of
/// the model with text or a call (an empty reply holds no token to score).
fn is_target(m: &Message) -> bool {
    m.role == Role::Assistant && !target_text(m).trim().is_empty()
}

/// The compaction points of `transcript` (indices of replies of the model
/// whose preceding history is over `threshold` and longer than
/// [`mf_forgetting::budget::MIN_MESSAGES_TO_COMPACT`] messages, where the
/// live loop compacts): the first, the last, and evenly between, at most
/// `max`. `tokens(i)` counts the history before `i`.
///
/// # Errors
/// What `tokens` returns.
pub fn points(transcript: &[Message], threshold: usize, max: usize, tokens: &mut dyn FnMut(usize) -> Result<usize>) -> Result<Vec<(usize, usize)>> {
    let replies: Vec<usize> = (1..transcript.len()).filter(|&i| is_target(&transcript[i])).collect();
    let mut over = Vec::new();
    // As the live loop: over the threshold, and more than a handful of messages.
    for &i in replies.iter().filter(|&&i| i > mf_forgetting::budget::MIN_MESSAGES_TO_COMPACT) {
        let t = tokens(i)?;
        if t > threshold {
            over.push((i, t));
        }
    }
    if over.len() <= max.max(1) {
        return Ok(over);
    }
    if max < 2 {
        over.truncate(1);
        return Ok(over);
    }
    let last = over.len() - 1;
    let mut picked: Vec<usize> = (0..max).map(|k| (k * last + (max - 1) / 2) / (max - 1)).collect();
    picked.dedup();
    Ok(picked.into_iter().map(|k| over[k]).collect())
}

/// Replays `transcript` (an investigation's) under `cfg`: compactions on
/// `model`, scores on `scorer` (whose window must hold the uncompacted
/// history). `progress(done, total, what)` after each step.
///
/// # Errors
/// The models' errors other than a target that cannot be scored (listed in
/// `unscored`); [`BenchError::Cancelled`]; [`BenchError::InvalidSetting`]
/// for a transcript without a compaction point.
#[allow(clippy::too_many_lines)]
pub fn replay(model: &Model, scorer: &Model, transcript: &[Message], cfg: &ReplayConfig, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<ReplayResult> {
    let t0 = Instant::now();
    cfg.budget.validate()?;
    // An engine that cannot score is refused before anything is compacted.
    scorer.score(vec![ChatMessage::user("Reply with yes.")], vec!["yes".to_owned()])?;
    let threshold = cfg.budget.threshold();
    let chat = |ms: &[Message]| -> Vec<ChatMessage> { ms.iter().map(to_chat).collect() };
    let pts = points(transcript, threshold, cfg.points, &mut |i| Ok(model.count_conversation(&chat(&transcript[..i]))? + cfg.outside))?;
    let plan_budget = cfg.budget.less_outside(cfg.plan_outside);
    if pts.is_empty() {
        let whole = model.count_conversation(&chat(transcript))? + cfg.outside;
        let reason = if whole > threshold {
            format!(
                "the history went over the trigger ({threshold} tokens) only after the model's last reply: there is nothing it did after a compaction point to score"
            )
        } else {
            format!("the history never went over the trigger ({threshold} tokens; it reached {whole}): nothing would have been compacted")
        };
        return Err(BenchError::InvalidSetting { name: "replay", reason });
    }
    // The floor is `baseline`: the strategy of that name is not replayed beside it.
    let strategies: Vec<StrategyKind> = cfg.strategies.iter().copied().filter(|s| *s != StrategyKind::Baseline && *s != StrategyKind::None).collect();
    let answer_at = transcript.len().checked_sub(1).filter(|&i| is_target(&transcript[i]) && transcript[i].tool_calls.is_empty());
    let total = pts.len() * (strategies.len() + 1);
    let mut done = 0;
    let mut points_out = Vec::new();
    let mut scores = Vec::new();
    let mut unscored = Vec::new();
    for (pi, &(at, tokens)) in pts.iter().enumerate() {
        let history = &transcript[..at];
        let mut targets: Vec<usize> = (at..transcript.len()).filter(|&j| is_target(&transcript[j])).take(cfg.targets).collect();
        if let Some(a) = answer_at
            && !targets.contains(&a)
        {
            targets.push(a);
        }
        let floor = floor_of(history, cfg.budget.recent);
        let mut contexts: Vec<(String, Vec<Message>)> = vec![("full".into(), history.to_vec()), ("baseline".into(), floor.clone())];
        let mut compactions = Vec::new();
        for &s in &strategies {
            let name = Condition::of(s).as_str().to_owned();
            let t = Instant::now();
            match compact(model, Condition::of(s), history, &plan_budget, &cfg.plan, cfg.probe_max_tokens, cfg.delta) {
                Ok(c) => {
                    let grew = c.tokens_after >= c.tokens_before || c.report.as_ref().is_some_and(|r| r.kept_original.is_some() || r.declined.is_some());
                    compactions.push(PointCompaction {
                        strategy: name.clone(),
                        tokens_after: c.tokens_after + cfg.outside,
                        messages_after: c.messages.len(),
                        compaction_ms: c.compaction_ms,
                        error: None,
                        grew,
                    });
                    contexts.push((name.clone(), c.messages));
                }
                Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
                Err(e) => compactions.push(PointCompaction {
                    strategy: name.clone(),
                    tokens_after: 0,
                    messages_after: 0,
                    compaction_ms: t.elapsed().as_millis() as u64,
                    error: Some(e.to_string()),
                    grew: false,
                }),
            }
            done += 1;
            progress(done, total, &format!("point {} of {}: {name} compacted", pi + 1, pts.len()));
        }
        // Context by context, the targets in transcript order: each target's
        // prompt extends the one before it, so the scorer's cache decodes only
        // what is new. (Target by target, every call switched contexts and
        // decoded the whole history again.)
        let mut scored: Vec<(BTreeMap<String, f64>, usize)> = vec![(BTreeMap::new(), 0); targets.len()];
        for (name, ctx) in &contexts {
            for (&j, (nll, n_tokens)) in targets.iter().zip(scored.iter_mut()) {
                let mut msgs = chat(ctx);
                msgs.extend(chat(&transcript[at..j]));
                match scorer.score(msgs, vec![target_text(&transcript[j])]) {
                    Ok(s) => {
                        if let Some(x) = s.first().and_then(mf_inference::Scored::nll_per_token) {
                            *n_tokens = s[0].tokens.len();
                            nll.insert(name.clone(), x);
                        }
                    }
                    Err(BenchError::Cancelled) => return Err(BenchError::Cancelled),
                    Err(e) => unscored.push(format!("point {} target {j} after {name}: {e}", pi + 1)),
                }
            }
        }
        for (&j, (nll, n_tokens)) in targets.iter().zip(scored) {
            let kind = if Some(j) == answer_at { "answer" } else { "reply" };
            scores.push(TargetScore { point: pi, at: j, kind: kind.into(), tokens: n_tokens, nll });
        }
        done += 1;
        progress(done, total, &format!("point {} of {}: {} targets scored", pi + 1, pts.len(), targets.len()));
        points_out.push(ReplayPoint { at, tokens, floor_messages: floor.len(), targets, compactions, retention: BTreeMap::new() });
    }
    let facts: Vec<ProbeFacts> = scores
        .iter()
        .map(|s| ProbeFacts {
            key: format!("{}/{}", s.point, s.at),
            class: point_label(s.point, points_out[s.point].at),
            dimension: s.kind.clone(),
            nll: s.nll.clone(),
            choice: BTreeMap::new(),
            grew: points_out[s.point].compactions.iter().filter(|c| c.grew).map(|c| c.strategy.clone()).collect(),
            chance: None,
        })
        .collect();
    let names: Vec<String> = strategies.iter().map(|s| Condition::of(*s).as_str().to_owned()).collect();
    let mut order = vec!["full", "baseline"];
    order.extend(names.iter().map(String::as_str));
    let likelihood = (!facts.is_empty()).then(|| summarise(&facts, &order));
    if let Some(l) = &likelihood {
        for (i, p) in points_out.iter_mut().enumerate() {
            p.retention = l.by_class.get(&point_label(i, p.at)).cloned().unwrap_or_default();
        }
    }
    Ok(ReplayResult {
        model: model.info().name.clone(),
        session: 0,
        question: mf_forgetting::message::question_index(transcript).map(|i| transcript[i].content.clone()).unwrap_or_default(),
        live_strategy: String::new(),
        transcript_messages: transcript.len(),
        context: cfg.budget.context,
        reserve: cfg.budget.reserve,
        ratio: cfg.budget.ratio,
        recent: cfg.budget.recent,
        threshold,
        outside: cfg.outside,
        score_ctx: scorer.info().context_size,
        points: points_out,
        scores,
        unscored,
        likelihood,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// What a face asks a replay of a stored investigation for (`mf replay`,
/// the app's History): the strategies, how many points and targets, the
/// scoring window, and optionally another model than the stored one.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    /// Strategies replayed (`baseline` and `none` are the floor and ceiling, always scored).
    pub strategies: Vec<StrategyKind>,
    /// Replies scored after each point (the final answer is scored too).
    pub targets: usize,
    /// Compaction points at most.
    pub points: usize,
    /// The scoring session's window: it must hold the uncompacted history.
    pub score_ctx: u32,
    /// Another model file (embedded) or model name (server) than the stored one.
    pub model: Option<std::path::PathBuf>,
}

impl Default for ReplayRequest {
    fn default() -> Self {
        let d = ReplayConfig::for_budget(Budget::default(), PlanConfig::default());
        ReplayRequest { strategies: d.strategies, targets: d.targets, points: d.points, score_ctx: DEFAULT_SCORE_CONTEXT, model: None }
    }
}

/// The default scoring window of a replay (clamped to the model's training context).
pub const DEFAULT_SCORE_CONTEXT: u32 = 16384;

/// Replays investigation `id` of `sessions` under `req`: its stored engine,
/// model and budget (the model may be swapped), its transcript, loaded once
/// for summaries at its own window and once for scoring at `req.score_ctx`.
/// The one path `mf replay` and the app take. `api_key`: a key the face
/// holds for an OpenAI-compatible server. Blocking work runs off the runtime.
///
/// # Errors
/// [`BenchError::Replay`] for a missing investigation, a stored spec this
/// version cannot read, a model that cannot load; [`BenchError::Inference`]
/// when the engine cannot score (Ollama); [`BenchError::InvalidSetting`]
/// for no strategy, or a history that never reached its trigger.
pub async fn replay_session(
    sessions: &mf_agent::Sessions,
    id: i64,
    req: &ReplayRequest,
    api_key: Option<String>,
    mut progress: impl FnMut(usize, usize, &str) + Send + 'static,
) -> Result<ReplayResult> {
    let failed = |what: String| move |source: mf_agent::AgentError| BenchError::Replay { what, source };
    if req.strategies.is_empty() {
        return Err(BenchError::NothingChosen("strategy"));
    }
    let mut spec = sessions.spec(id).map_err(failed(format!("investigation {id}")))?;
    if let Some(m) = &req.model {
        spec.engine.set_model(m.clone());
    }
    spec.check_model_file().map_err(failed(format!("investigation {id}'s model")))?;
    let store = sessions.store().map_err(failed("the session store".to_owned()))?;
    let row = store.get(id).map_err(failed(format!("investigation {id}")))?;
    let transcript = store.transcript(id).map_err(failed(format!("investigation {id}'s transcript")))?;
    let first_gauge = store.events(id).map_err(failed(format!("investigation {id}'s events")))?.into_iter().find_map(|e| match e {
        mf_agent::AgentEvent::Gauge { gauge, .. } => Some(gauge),
        _ => None,
    });
    let label = spec.engine.model_label();
    let backend = spec.engine.load(spec.context, api_key.clone()).await.map_err(failed(format!("loading {label}")))?;
    let scorer = spec.engine.load(req.score_ctx.max(spec.context), api_key).await.map_err(failed(format!("loading {label} for scoring")))?;
    let budget = Budget { context: spec.context as usize, reserve: spec.agent.reserve as usize, ratio: spec.agent.ratio, recent: spec.agent.recent };
    let cfg = ReplayConfig {
        strategies: req.strategies.clone(),
        delta: spec.agent.delta,
        targets: req.targets,
        points: req.points,
        ..ReplayConfig::for_budget(budget, spec.agent.plan.clone())
    };
    // The benchmark's model wrapper runs its own runtime: off this one.
    let result = tokio::task::spawn_blocking(move || -> Result<ReplayResult> {
        let model = Model::new(backend)?;
        let scorer = Model::new(scorer)?;
        let (outside, plan_outside) = match first_gauge {
            Some(g) => (outside_tokens(&model, &transcript, &g)?, g.outside_messages()),
            None => (0, 0),
        };
        let cfg = ReplayConfig { outside, plan_outside, ..cfg };
        replay(&model, &scorer, &transcript, &cfg, &mut progress)
    })
    .await
    .map_err(|_| BenchError::WorkerPanicked)??;
    Ok(ReplayResult { session: id, live_strategy: spec.agent.strategy.as_str().to_owned(), question: row.question, ..result })
}

/// The tokens the live loop's prompt held beyond the messages as `model`
/// counts them here: its measured prompt at `gauge` (tool schemas included)
/// less the count of the same messages (the transcript's first
/// `gauge.messages`, nothing compacted yet at the first gauge).
///
/// # Errors
/// The model's count.
pub fn outside_tokens(model: &Model, transcript: &[Message], gauge: &mf_agent::events::Gauge) -> Result<usize> {
    let n = (gauge.messages as usize).min(transcript.len());
    let chat: Vec<ChatMessage> = transcript[..n].iter().map(to_chat).collect();
    Ok((gauge.prompt_tokens as usize).saturating_sub(model.count_conversation(&chat)?))
}

/// The replay as Markdown: the points and their compactions, then R.
#[must_use]
pub fn markdown(r: &ReplayResult) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "### Investigation {} replayed — {}\n", r.session, r.model);
    let _ = writeln!(
        out,
        "\"{}\" ({} messages, live strategy {}); C = {}, G = {}, ratio {}, recent {}: trigger {} tokens (counted as the live loop counted them: {} tokens of tool schemas and template added); scored on a {}-token window; {:.0} s.\n",
        r.question.replace('|', "\\|"),
        r.transcript_messages,
        if r.live_strategy.is_empty() { "–" } else { &r.live_strategy },
        r.context,
        r.reserve,
        r.ratio,
        r.recent,
        r.threshold,
        r.outside,
        r.score_ctx,
        r.wall_s
    );
    let names: Vec<String> = r.points.first().map(|p| p.compactions.iter().map(|c| c.strategy.clone()).collect()).unwrap_or_default();
    let _ = writeln!(out, "| point | at message | tokens | targets | {} |", names.iter().map(|n| format!("{n}: tokens after")).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: |{}", " ---: |".repeat(names.len()));
    for (i, p) in r.points.iter().enumerate() {
        let cells: Vec<String> = p
            .compactions
            .iter()
            .map(|c| match (&c.error, c.grew) {
                (Some(_), _) => "failed".to_owned(),
                (None, true) => format!("{} (grew)", c.tokens_after),
                (None, false) => c.tokens_after.to_string(),
            })
            .collect();
        let _ = writeln!(out, "| {} | {} | {} | {} | {} |", i + 1, p.at, p.tokens, p.targets.len(), cells.join(" | "));
    }
    out.push('\n');
    if let Some(l) = &r.likelihood {
        let _ = writeln!(
            out,
            "Each target is a reply the investigation really made after the point (or its final answer), scored after each compacted history; **full** is the uncompacted history, **baseline** its pinned and recent zones only; \"class\" is the point and \"dimension\" the target's kind.\n"
        );
        crate::likelihood::markdown(&mut out, l);
    }
    for u in &r.unscored {
        let _ = writeln!(out, "- not scored: {u}");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn transcript(replies: usize) -> Vec<Message> {
        let mut t = vec![Message::system("s", "sys"), Message::user("q", "question")];
        for i in 0..replies {
            let call = mf_forgetting::ToolCall { id: format!("c{i}"), name: "http".into(), arguments: serde_json::json!({"url": format!("/p{i}")}) };
            t.push(Message::assistant_calls(&format!("a{i}"), "", vec![call]));
            t.push(Message::tool_result(&format!("t{i}"), &format!("c{i}"), "http", &"x".repeat(100)));
        }
        t.push(Message::assistant("ans", "The answer."));
        t
    }

    #[test]
    fn points_start_at_the_first_crossing_and_end_at_the_last_reply() {
        let t = transcript(8);
        // Tokens: 10 per message before the index.
        let mut count = |i: usize| -> Result<usize> { Ok(i * 10) };
        let p = points(&t, 45, 3, &mut count).unwrap();
        let at: Vec<usize> = p.iter().map(|x| x.0).collect();
        // Replies at 2, 4, …, 16 and the answer at 18; over 45 from index 6 on.
        assert_eq!(at, [6, 12, 18]);
        assert_eq!(points(&t, 45, 1, &mut count).unwrap().len(), 1);
        assert!(points(&t, 1000, 3, &mut count).unwrap().is_empty());
        let all = points(&t, 45, 10, &mut count).unwrap();
        assert_eq!(all.iter().map(|x| x.0).collect::<Vec<_>>(), [6, 8, 10, 12, 14, 16, 18]);
    }

    #[test]
    fn a_call_without_text_is_scored_as_its_json() {
        let t = transcript(1);
        assert_eq!(target_text(&t[2]), r#"{"name": "http", "arguments": {"url":"/p0"}}"#);
        assert_eq!(target_text(&t[4]), "The answer.");
    }

    #[test]
    fn an_empty_reply_is_neither_a_point_nor_a_target() {
        let mut t = transcript(8);
        // The model's last reply said nothing: there is no token of it to score.
        t.last_mut().unwrap().content = "  ".into();
        assert!(!is_target(t.last().unwrap()));
        let mut count = |i: usize| -> Result<usize> { Ok(i * 10) };
        let at: Vec<usize> = points(&t, 45, 10, &mut count).unwrap().iter().map(|x| x.0).collect();
        assert_eq!(at, [6, 8, 10, 12, 14, 16], "the empty reply at 18 is no point");
    }
}
