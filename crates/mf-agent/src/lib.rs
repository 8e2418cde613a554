//! The investigation loop of Measured Forgetting.
//!
//! How the pieces fit: [`Agent::run`] drives one investigation. It asks a
//! [`mf_inference::Backend`] for replies, runs the tool calls it parses through
//! a [`ToolRunner`] after an [`Approver`] said yes, measures the prompt with the
//! backend's own tokenizer and, over the threshold `ratio · (C − G)`, compacts
//! the history ([`compact`]). Everything it does is an [`AgentEvent`], sent to
//! an [`EventSink`] (the CLI printer, the UI, the SQLite [`Store`]).
//! Exits are dynamic ([`ExitReason`]): a final answer, a repeated tool call,
//! N consecutive failures, an exhausted context, an optional safety cap.

pub mod agent;
pub mod compact;
pub mod error;
pub mod events;
pub mod store;
pub mod tools;

pub use agent::{Agent, AgentSettings, Outcome, Strategy};
pub use error::AgentError;
pub use events::{AgentEvent, EventSink, ExitReason, Gauge};
pub use store::{InvestigationRow, Store, StoreSink};
pub use tools::{ApprovalDecision, ApprovalRequest, Approver, FixedApprover, Policy, ToolFailure, ToolRunner, arguments_hash};
