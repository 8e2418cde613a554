//! Where events go.

use mf_forgetting::Message;

use super::AgentEvent;

/// Where events go: the CLI printer, the UI channel, the store.
pub trait EventSink {
    /// Receives one event.
    fn emit(&mut self, event: &AgentEvent);

    /// The history after a change (the store keeps it; others ignore it).
    fn history(&mut self, _messages: &[Message]) {}
}

impl<F: FnMut(&AgentEvent)> EventSink for F {
    fn emit(&mut self, event: &AgentEvent) {
        self(event)
    }
}

/// Collects events in memory (tests, the benchmark).
#[derive(Debug, Default, Clone)]
pub struct VecSink {
    /// The events, in order.
    pub events: Vec<AgentEvent>,
    /// The last history seen.
    pub last_history: Vec<Message>,
}

impl EventSink for VecSink {
    fn emit(&mut self, event: &AgentEvent) {
        self.events.push(event.clone());
    }
    fn history(&mut self, messages: &[Message]) {
        self.last_history = messages.to_vec();
    }
}
