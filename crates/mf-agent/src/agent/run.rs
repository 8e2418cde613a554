//! The loop, round by round: measure, compact when over the threshold, ask
//! the model, then either take its answer or run its tool calls; dynamic
//! exits end it, and after one the model is asked for a closing answer.

use mf_forgetting::{ExitEvent, ExitMonitor, Message, StrategyKind};
use mf_inference::InferenceError;

use super::compaction::Compacted;
use super::{Agent, FORECAST_WINDOW, MALFORMED_KEEP_CHARS, Outcome, n32, next_message_id};
use crate::compact::chat_history;
use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink, ExitReason, Purpose};
use crate::tools::{FailureKind, ToolFailure};

/// Compactions a round may run after the first when the prompt is still
/// over the compaction's target or does not leave the reply reserve (the
/// model counts the whole prompt, the plan its messages one by one: a
/// template can add more around a summary than the summary counts alone):
/// without them the round would go on over its target, or end the run on
/// the first overshoot of the window; each must shrink the prompt or the
/// next is not tried. Two give a nested summary its second chance; more
/// would only repeat passes that took nothing more.
const EXTRA_COMPACTIONS: u32 = 2;

/// What the loop carries from round to round.
struct Progress {
    history: Vec<Message>,
    monitor: ExitMonitor,
    rounds: u32,
    compactions: u32,
    /// The largest prompt sent.
    max_prompt: u32,
    /// Prompt tokens when the last round was sent (after any compaction).
    last_sent: Option<u32>,
    /// Every message the history has held, as first seen (see [`Outcome::transcript`]).
    transcript: Transcript,
}

/// The history as it would be had nothing been compacted: each message the
/// first time it is seen (a masked or summarised message keeps its original
/// text), in order, compaction summaries left out. Recorded from the history
/// before each compaction and at the end, so it costs nothing per round.
#[derive(Default)]
struct Transcript {
    messages: Vec<Message>,
    seen: std::collections::HashSet<String>,
}

impl Transcript {
    fn record(&mut self, history: &[Message]) {
        for m in history.iter().filter(|m| !m.summary) {
            if self.seen.insert(m.id.as_str().to_owned()) {
                self.messages.push(m.clone());
            }
        }
    }
}

/// The texts of `history` that the user wrote: the system prompt, the
/// question and each follow-up. Not a compaction's summary (a user message
/// that holds what tool results said), nor the loop's own notes to the model
/// (a malformed call's error, which quotes the model's reply): their
/// contents came from the tools or the model, and a URL built from them is
/// data.
fn user_texts(history: &[Message]) -> impl Iterator<Item = &str> {
    use mf_forgetting::Role;
    history.iter().filter(|m| matches!(m.role, Role::System | Role::User) && !m.summary && !m.is_error && m.tool_call_id.is_none()).map(|m| m.content.as_str())
}

/// How one round ended.
enum Round {
    /// Go on to the next round.
    Next,
    /// The model answered.
    Answered(String),
    /// A dynamic exit.
    Exit(ExitReason),
}

impl Agent {
    /// Runs an investigation of `question` to its end.
    ///
    /// # Errors
    /// A model failure the loop cannot turn into an exit (it is also emitted as an error event).
    pub async fn run(&mut self, question: &str, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        let system = self.id();
        let user = self.id();
        let history = vec![Message::system(&system, &self.settings.system_prompt), Message::user(&user, question)];
        self.run_from(history, false, sink).await
    }

    /// Continues an investigation from a stored history. A trailing tool call
    /// without a result (a crash mid-call) gets an `interrupted` error result:
    /// it is never re-run without the model asking, and approval, again.
    ///
    /// # Errors
    /// As [`Agent::run`].
    pub async fn resume(&mut self, mut history: Vec<Message>, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        self.next_id = next_message_id(&history);
        let answered: Vec<String> = history.iter().filter_map(|m| m.tool_call_id.clone()).collect();
        let open: Vec<(String, String)> =
            history.iter().flat_map(|m| m.tool_calls.iter()).filter(|c| !answered.contains(&c.id)).map(|c| (c.id.clone(), c.name.clone())).collect();
        for (call_id, name) in open {
            let id = self.id();
            let f = ToolFailure::new(FailureKind::Interrupted, "the program stopped during this call; it was not re-run.");
            history.push(Message::tool_error(&id, &call_id, &name, &f.to_model_text()));
        }
        self.run_from(history, true, sink).await
    }

    #[tracing::instrument(name = "investigation", skip_all, fields(strategy = self.settings.strategy.as_str(), resumed, messages = history.len()))]
    async fn run_from(&mut self, history: Vec<Message>, resumed: bool, sink: &mut dyn EventSink) -> Result<Outcome, AgentError> {
        let question = mf_forgetting::message::question_index(&history).map(|i| history[i].content.clone()).unwrap_or_default();
        // What the user wrote is theirs to send: the URLs, paths and values it
        // names are not data for the tools' sending rule. Given again on every
        // run, a resume included (the registry is new there).
        self.tools.supplied_by_user(&self.settings.system_prompt);
        for text in user_texts(&history) {
            self.tools.supplied_by_user(text);
        }
        sink.emit(&AgentEvent::Started {
            question,
            title: self.title.clone(),
            strategy: self.settings.strategy.as_str().into(),
            model: self.backend.model_info().name,
            context: self.backend.context_size(),
            reserve: self.settings.reserve,
            threshold: self.threshold(),
            tools: self.specs.iter().map(|s| s.name.clone()).collect(),
            resumed,
        });
        sink.history(&history);
        if resumed {
            self.load_resume_point(&history, sink).await;
        }
        let mut monitor = ExitMonitor::new(self.settings.exit);
        for c in history.iter().flat_map(|m| m.tool_calls.iter()) {
            let _ = monitor.observe(&ExitEvent::ToolCall { name: c.name.clone(), arguments: c.arguments.clone() });
        }
        self.growth.clear();
        let mut p = Progress { history, monitor, rounds: 0, compactions: 0, max_prompt: 0, last_sent: None, transcript: Transcript::default() };
        let reason = loop {
            match self.round(&mut p, sink).await {
                Ok(Round::Next) => {}
                Ok(Round::Answered(text)) => {
                    self.save_resume_point(p.rounds, sink).await;
                    sink.emit(&AgentEvent::Exit { reason: ExitReason::FinalAnswer, rounds: p.rounds, compactions: p.compactions });
                    p.transcript.record(&p.history);
                    return Ok(Outcome {
                        reason: ExitReason::FinalAnswer,
                        answer: Some(text),
                        rounds: p.rounds,
                        compactions: p.compactions,
                        history: p.history,
                        transcript: p.transcript.messages,
                        max_prompt_tokens: p.max_prompt,
                        not_saved: None,
                    });
                }
                Ok(Round::Exit(r)) => break r,
                Err(e) => {
                    sink.emit(&AgentEvent::Error { message: e.to_string() });
                    return Err(e);
                }
            }
        };
        let answer = if matches!(reason, ExitReason::Cancelled) { None } else { self.closing_answer(&mut p.history, p.rounds, sink).await };
        self.save_resume_point(p.rounds, sink).await;
        sink.history(&p.history);
        sink.emit(&AgentEvent::Exit { reason: reason.clone(), rounds: p.rounds, compactions: p.compactions });
        p.transcript.record(&p.history);
        Ok(Outcome {
            reason,
            answer,
            rounds: p.rounds,
            compactions: p.compactions,
            history: p.history,
            transcript: p.transcript.messages,
            max_prompt_tokens: p.max_prompt,
            not_saved: None,
        })
    }

    /// One round: measure (and compact), generate, then answer or dispatch.
    #[tracing::instrument(name = "round", skip_all, fields(round = p.rounds + 1, messages = p.history.len()))]
    async fn round(&mut self, p: &mut Progress, sink: &mut dyn EventSink) -> Result<Round, AgentError> {
        if self.cancel.is_cancelled() {
            return Ok(Round::Exit(ExitReason::Cancelled));
        }
        if let Some(cap) = self.settings.safety_cap
            && p.rounds >= cap
        {
            return Ok(Round::Exit(ExitReason::SafetyCap { rounds: p.rounds }));
        }
        p.rounds += 1;
        sink.emit(&AgentEvent::Round { round: p.rounds });
        let mut g = self.gauge(&p.history).await?;
        if let Some(prev) = p.last_sent
            && g.prompt_tokens >= prev
        {
            if self.growth.len() == FORECAST_WINDOW {
                self.growth.pop_front();
            }
            self.growth.push_back(g.prompt_tokens - prev);
        }
        sink.emit(&AgentEvent::Gauge { gauge: g, forecast: self.forecast(&g) });
        let threshold = self.threshold();
        let room = self.backend.context_size().saturating_sub(self.settings.reserve);
        // Compact when over the threshold; then again while the prompt is
        // over the last compaction's target (the model's count of the whole
        // prompt can exceed the plan's count of its messages) or does not
        // leave the reply reserve.
        let mut passes = 0u32;
        let mut over_target = false;
        while self.settings.strategy != StrategyKind::None && passes <= EXTRA_COMPACTIONS {
            let wanted = if passes == 0 {
                self.budget().should_compact(g.prompt_tokens as usize, p.history.len())
            } else {
                (over_target || g.prompt_tokens > room) && p.history.len() > mf_forgetting::budget::MIN_MESSAGES_TO_COMPACT
            };
            if !wanted {
                break;
            }
            passes += 1;
            p.compactions += 1;
            match self.compact(&p.history, g, p.rounds, self.ask(), sink).await? {
                Compacted::Done(h2, g2, goal) => {
                    let ev = ExitEvent::Compaction {
                        tokens_before: g.prompt_tokens as usize,
                        tokens_after: g2.prompt_tokens as usize,
                        threshold: threshold as usize,
                        messages_after: h2.len(),
                    };
                    let shrank = g2.prompt_tokens < g.prompt_tokens;
                    p.transcript.record(&p.history);
                    p.history = h2;
                    g = g2;
                    sink.history(&p.history);
                    // The guards (too little freed, compactions without a new
                    // tool result) judge the round's compaction; a pass that
                    // only brings it to its target is part of it, not a loop.
                    if passes == 1
                        && let Some(r) = p.monitor.observe(&ev)
                    {
                        return Ok(Round::Exit(ExitReason::from(r)));
                    }
                    over_target = goal.is_some_and(|t| g.prompt_tokens > t);
                    if !shrank {
                        // Refused, or nothing left to take: another pass would do the same.
                        break;
                    }
                }
                // A further pass that cannot restore the budget (the event
                // says so) leaves the history as the pass before left it,
                // which still goes on when it fits.
                Compacted::Exit(_) if passes > 1 && g.prompt_tokens <= room => break,
                Compacted::Exit(reason) => return Ok(Round::Exit(reason)),
            }
        }
        if g.prompt_tokens > room {
            return Ok(Round::Exit(ExitReason::ContextExhausted { tokens: g.prompt_tokens, threshold, messages: n32(p.history.len()) }));
        }
        p.max_prompt = p.max_prompt.max(g.prompt_tokens);
        p.last_sent = Some(g.prompt_tokens);
        let mut sampling = self.settings.sampling.clone();
        sampling.max_tokens = self.settings.reserve;
        let reply = match self.generate(chat_history(&p.history), self.specs.clone(), sampling, p.rounds, Purpose::Round, sink).await {
            Ok(reply) => reply,
            // The model's count of the prompt it was sent is over the window
            // where the loop's was not (a backend that adds to the prompt):
            // the history does not fit, which is an exit, not a failure.
            Err(AgentError::Inference(InferenceError::PromptTooLong { prompt_tokens, reserve, context_size })) => {
                sink.emit(&AgentEvent::Error {
                    message: format!(
                        "the model counts {prompt_tokens} prompt tokens (+{reserve} for the reply, over its {context_size}) where the loop counted {}",
                        g.prompt_tokens
                    ),
                });
                return Ok(Round::Exit(ExitReason::ContextExhausted { tokens: prompt_tokens, threshold, messages: n32(p.history.len()) }));
            }
            Err(e) => return Err(e),
        };
        if reply.stop_reason == mf_inference::StopReason::Cancelled {
            return Ok(Round::Exit(ExitReason::Cancelled));
        }
        if let Some(err) = reply.tool_parse_error.clone() {
            return Ok(self.malformed(p, &reply.raw_text, &err, sink));
        }
        if reply.tool_calls.is_empty() {
            let text = reply.content.trim().to_string();
            let id = self.id();
            p.history.push(Message::assistant(&id, &text));
            sink.history(&p.history);
            sink.emit(&AgentEvent::FinalAnswer { text: text.clone() });
            return Ok(Round::Answered(text));
        }
        let exit = self.dispatch(&reply.content, reply.tool_calls.clone(), &mut p.history, &mut p.monitor, p.rounds, sink).await;
        Ok(exit.map_or(Round::Next, Round::Exit))
    }

    /// A reply whose tool call could not be parsed: its head and an error
    /// note go into the history (the model sees its mistake), counted as an error.
    fn malformed(&mut self, p: &mut Progress, raw: &str, err: &str, sink: &mut dyn EventSink) -> Round {
        let id = self.id();
        let kept = mf_forgetting::summary::cut_chars(raw, MALFORMED_KEEP_CHARS);
        p.history.push(Message::assistant(&id, &kept));
        let f = ToolFailure::new(FailureKind::MalformedToolCall, format!("{err}. Call a tool with one valid JSON object of arguments, or answer."));
        let id = self.id();
        let mut m = Message::user(&id, &f.to_model_text());
        m.is_error = true;
        p.history.push(m);
        sink.emit(&AgentEvent::ToolResult {
            call_id: String::new(),
            name: String::new(),
            ok: false,
            error: Some(f.kind.as_str().to_owned()),
            content: f.to_model_text(),
            truncated: None,
        });
        sink.history(&p.history);
        p.monitor.observe(&ExitEvent::ToolResult { is_error: true }).map_or(Round::Next, |r| Round::Exit(ExitReason::from(r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_texts_leave_out_summaries_and_the_loops_notes() {
        let mut summary = Message::user("summary-m2", "the page said http://evil.example/x");
        summary.summary = true;
        let mut note = Message::user("m4", "error: could not parse {\"url\": \"http://evil.example/y\"}");
        note.is_error = true;
        let h = vec![
            Message::system("m0", "sys"),
            Message::user("m1", "Fetch http://127.0.0.1:9/a"),
            summary,
            Message::assistant_calls("m3", "", vec![]),
            note,
            Message::tool_result("m5", "c1", "http", "http://evil.example/z"),
            Message::assistant("m6", "see http://evil.example/w"),
            Message::user("m7", "And http://127.0.0.1:9/b?"),
        ];
        assert_eq!(user_texts(&h).collect::<Vec<_>>(), vec!["sys", "Fetch http://127.0.0.1:9/a", "And http://127.0.0.1:9/b?"]);
    }
}
