//! The user's hand on a stored session between rounds: pins (*keep
//! verbatim*) and compactions asked for (*compact now*, *summarise up to
//! here*), stored like everything the loop does — the events in the log,
//! the new history in place of the old — so a resume, in either face,
//! continues from them.

use std::sync::Arc;

use mf_forgetting::StrategyKind;

use super::{Sessions, tools_for};
use crate::agent::{Agent, HandCompaction, pin};
use crate::error::AgentError;
use crate::events::{AgentEvent, ByHand, EventSink};
use crate::store::{SessionStatus, Store, StoreSink};
use crate::tools::FixedApprover;

/// The round a change between rounds comes after: the last one stored (0
/// before the first).
fn last_round(store: &Store, id: i64) -> Result<u32, AgentError> {
    Ok(store
        .events(id)?
        .iter()
        .rev()
        .find_map(|e| match e {
            AgentEvent::Round { round } => Some(*round),
            _ => None,
        })
        .unwrap_or(0))
}

/// The store, once session `id` is known to exist and is not marked
/// running. (The faces mark the sessions of dead processes interrupted when
/// they open the store; this process's own running loop must stay running.)
fn stopped(sessions: &Sessions, id: i64) -> Result<Store, AgentError> {
    let store = sessions.store()?;
    if store.get(id)?.status == SessionStatus::Running {
        return Err(AgentError::Busy(id));
    }
    Ok(store)
}

impl Sessions {
    /// Pins (*keep verbatim*, `pinned` true) or unpins message `message` of
    /// stored session `id`, which no loop may be running: the history is
    /// stored with the change and a `pin` event records it (passed on to
    /// `sink` too). Returns the ids it holds for: the message and the other
    /// members of its chain (see [`pin`]).
    ///
    /// # Errors
    /// [`AgentError::NotFound`], [`AgentError::Busy`] while it runs,
    /// [`AgentError::NoSuchMessage`], store errors.
    pub fn pin(&self, id: i64, message: &str, pinned: bool, sink: &mut dyn EventSink) -> Result<Vec<String>, AgentError> {
        let store = stopped(self, id)?;
        let mut history = store.history(id)?;
        let members = pin(&mut history, message, pinned)?;
        let round = last_round(&store, id)?;
        let mut sink = StoreSink { store: &store, id, next: sink, error: None };
        sink.history(&history);
        sink.emit(&AgentEvent::Pin { message: message.to_owned(), pinned, members: members.clone(), round });
        match sink.error.take() {
            Some(e) => Err(e),
            None => Ok(members),
        }
    }

    /// Compacts stored session `id` by hand, which no loop may be running:
    /// `by` says what (*compact now*, *summarise up to here*), `strategy`
    /// overrides the session's own, and the threshold does not matter. The
    /// compaction is the loop's (its events stored and passed to `sink`,
    /// the new history stored, its pins kept), so it is undone like any:
    /// the agent it ran on is given back, its undo point this compaction.
    ///
    /// `agent` is the session's own when the caller still holds it from
    /// its last run (its backend's cache then serves the summary pass);
    /// without one, an agent is made from the stored spec (the model loaded
    /// or reused, the tools listed for their schemas; nothing runs).
    ///
    /// # Errors
    /// The outer error when nothing ran: not found, still running, no stored
    /// history, a model that does not load. The inner one is the
    /// compaction's own (see [`Agent::compact_by_hand`]), beside the agent.
    pub async fn compact(
        &self,
        id: i64,
        agent: Option<Agent>,
        by: ByHand,
        strategy: Option<StrategyKind>,
        api_key: Option<String>,
        sink: &mut dyn EventSink,
    ) -> Result<(Agent, Result<HandCompaction, AgentError>), AgentError> {
        let store = stopped(self, id)?;
        let history = store.history(id)?;
        if history.is_empty() {
            return Err(AgentError::NotResumable { id, reason: "it has no stored history".into() });
        }
        let mut agent = match agent {
            Some(a) => a,
            None => {
                let spec = self.spec(id)?;
                spec.check_model_file()?;
                let summariser = super::summariser(&spec, api_key.clone()).await?;
                let backend = self.backend(&spec.engine, spec.context, api_key).await?;
                let (tools, _) = tools_for(&spec, &backend, None).await?;
                Agent::new(backend, tools, Arc::new(FixedApprover(false)), spec.agent.clone())?.with_summariser(summariser)
            }
        };
        let round = last_round(&store, id)?;
        let mut sink = StoreSink { store: &store, id, next: sink, error: None };
        let done = agent.compact_by_hand(&history, by, strategy, round, &mut sink).await;
        if let Some(e) = sink.error.take() {
            tracing::warn!("session store: {e}");
        }
        Ok((agent, done))
    }
}
