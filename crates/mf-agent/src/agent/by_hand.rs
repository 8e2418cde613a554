//! What the user does to the history between rounds: a compaction asked for
//! (*compact now*, *summarise up to here*) and pins (*keep verbatim*).
//!
//! A compaction by hand is the loop's compaction step
//! with the strategy asked for and, for *up to*, a recent zone that starts
//! after the chosen message's chain: the same plan and apply, the same
//! events (the started one says it was asked for), the same undo point and
//! KV snapshot, whatever the threshold says. A pin is a flag on the message
//! ([`Message::pinned`]) that mf-forgetting's zones read, so every strategy,
//! fallback and budget repair leaves the message (and its chain) as it is,
//! and the flag travels with the history into the store, a resume and undo.

use mf_forgetting::{Message, MessageId, StrategyKind};

use super::Agent;
use super::compaction::{Ask, Compacted};
use crate::error::AgentError;
use crate::events::{ByHand, EventSink};

/// What a compaction by hand did.
#[derive(Debug, Clone, PartialEq)]
pub struct HandCompaction {
    /// The history after it; the one given when nothing changed.
    pub history: Vec<Message>,
    /// Exact prompt tokens before.
    pub tokens_before: u32,
    /// Exact prompt tokens after (equal to before when nothing changed).
    pub tokens_after: u32,
    /// Why the history is unchanged, when it is: the plan refused to
    /// compact (it would not shrink the history), or the budget could not
    /// be restored. The events say it too.
    pub unchanged: Option<String>,
}

/// The position of message `id` in `history`.
fn position(history: &[Message], id: &str) -> Result<usize, AgentError> {
    history.iter().position(|m| m.id.as_str() == id).ok_or_else(|| AgentError::NoSuchMessage(id.to_owned()))
}

/// Pins message `id` of `history` (`pinned` true) or unpins it, and returns
/// the ids the change holds for: the message and the other members of its
/// chain, in order. A pin is set on the chosen message; the zones extend it
/// to its chain. Unpinning any member clears the whole chain, so a chain is
/// never left half pinned.
///
/// # Errors
/// [`AgentError::NoSuchMessage`] when no message has that id.
pub fn pin(history: &mut [Message], id: &str, pinned: bool) -> Result<Vec<String>, AgentError> {
    let at = position(history, id)?;
    let chains = mf_forgetting::chains::chain_of(history);
    let head = chains[at].unwrap_or(at);
    let members: Vec<usize> = (0..history.len()).filter(|&i| chains[i].unwrap_or(i) == head).collect();
    if pinned {
        history[at].pinned = true;
    } else {
        for &i in &members {
            history[i].pinned = false;
        }
    }
    Ok(members.iter().map(|&i| history[i].id.0.clone()).collect())
}

/// Gives `restored` (a history from before a compaction, being restored by
/// an undo) the pins of `now`, the history as it is: a message still in
/// `now` takes its flag from there (pinned or unpinned since), one that
/// `now` no longer holds keeps its own. An undo gives back what the
/// compaction took, not the pins changed after it.
pub fn keep_pins(now: &[Message], restored: &mut [Message]) {
    for m in restored.iter_mut() {
        if let Some(n) = now.iter().find(|n| n.id == m.id) {
            m.pinned = n.pinned;
        }
    }
}

impl Agent {
    /// One compaction the user asked for between rounds, with `strategy`
    /// (the settings' when `None`), whatever the threshold says. Its events
    /// are the loop's (`compaction_started` carries `by`), it can be undone
    /// like any ([`Agent::undo_compaction`]), and the sink keeps the new
    /// history. The pins of the history hold, as in every compaction.
    ///
    /// # Errors
    /// [`AgentError::NoSuchMessage`] for an *up to* message that is not in
    /// the history; [`AgentError::InvalidSetting`] for one in the pinned
    /// zone (nothing before it to summarise) or v2.1 ranked by a source the
    /// engine lacks; a model failure while measuring.
    pub async fn compact_by_hand(
        &mut self,
        history: &[Message],
        by: ByHand,
        strategy: Option<StrategyKind>,
        round: u32,
        sink: &mut dyn EventSink,
    ) -> Result<HandCompaction, AgentError> {
        let recent = match &by {
            ByHand::CompactNow => self.settings.recent,
            ByHand::UpTo { message } => {
                let at = position(history, message)?;
                let question = mf_forgetting::message::question_index(history).unwrap_or(0);
                if at <= question {
                    return Err(AgentError::InvalidSetting(format!(
                        "message {message} is in the pinned zone (the system prompt through the question): there is nothing up to it to summarise"
                    )));
                }
                mf_forgetting::zones::recent_after(history, &MessageId(message.clone())).map_err(|e| AgentError::InvalidSetting(e.to_string()))?
            }
        };
        // A run stopped by the user leaves its token cancelled: this
        // compaction is a new request, whose summary pass must not stop at
        // its first token.
        if self.cancel.is_cancelled() {
            self.cancel = mf_inference::CancelToken::new();
        }
        let g = self.gauge(history).await?;
        let ask = Ask { strategy: strategy.unwrap_or(self.settings.strategy), recent, by_hand: Some(by) };
        let unchanged =
            |why: String| HandCompaction { history: history.to_vec(), tokens_before: g.prompt_tokens, tokens_after: g.prompt_tokens, unchanged: Some(why) };
        Ok(match self.compact(history, g, round, ask, sink).await? {
            Compacted::Done(after, g2, goal) => {
                sink.history(&after);
                let why = if goal.is_none() {
                    Some("the plan kept the history as it was: compacting it would not have made it smaller".to_owned())
                } else if after == history {
                    Some("nothing changed: the strategy is the control arm, or nothing outside the pinned and recent zones could be compacted".to_owned())
                } else {
                    None
                };
                HandCompaction { history: after, tokens_before: g.prompt_tokens, tokens_after: g2.prompt_tokens, unchanged: why }
            }
            Compacted::Exit(reason) => unchanged(format!("the compaction could not restore the budget ({})", reason.describe())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mf_forgetting::ToolCall;

    fn history() -> Vec<Message> {
        let call = ToolCall { id: "c1".into(), name: "http".into(), arguments: serde_json::json!({}) };
        vec![
            Message::system("m0", "s"),
            Message::user("m1", "q"),
            Message::assistant_calls("m2", "", vec![call]),
            Message::tool_result("m3", "c1", "http", "r"),
            Message::assistant("m4", "so r"),
            Message::user("m5", "and?"),
        ]
    }

    #[test]
    fn an_undo_keeps_the_pins_changed_after_the_compaction() {
        let mut before = history();
        before[5].pinned = true;
        let mut now = vec![before[0].clone(), before[1].clone(), before[4].clone(), before[5].clone()];
        now[2].pinned = true;
        now[3].pinned = false;
        keep_pins(&now, &mut before);
        assert_eq!(before.iter().filter(|m| m.pinned).map(|m| m.id.as_str()).collect::<Vec<_>>(), vec!["m4"]);
    }

    #[test]
    fn a_pin_names_its_chain_and_an_unpin_clears_it_whole() {
        let mut h = history();
        assert_eq!(pin(&mut h, "m3", true).unwrap(), vec!["m2", "m3", "m4"]);
        assert_eq!(h.iter().filter(|m| m.pinned).map(|m| m.id.as_str()).collect::<Vec<_>>(), vec!["m3"]);
        pin(&mut h, "m4", true).unwrap();
        assert_eq!(pin(&mut h, "m2", false).unwrap(), vec!["m2", "m3", "m4"]);
        assert!(h.iter().all(|m| !m.pinned));
        assert_eq!(pin(&mut h, "m5", true).unwrap(), vec!["m5"]);
        assert!(matches!(pin(&mut h, "m9", true), Err(AgentError::NoSuchMessage(id)) if id == "m9"));
    }
}
