//! Measured forgetting: the pure compaction core.
//!
//! How the pieces fit:
//!
//! - A history is a slice of [`Message`]s. [`chains`] finds the trace
//!   topology (tool call → results → interpretation, and the hop links
//!   between chains); [`zones::partition`] splits the history into pinned /
//!   compressible / recent under a [`Budget`] without ever splitting a chain
//!   (zones depend on chains, not the reverse).
//! - A [`Strategy`] (none, baseline, masking, v1, v2, v2.1 — one module each
//!   under [`strategy`]) turns the history into a [`CompactionPlan`]: pure,
//!   deterministic, serialisable, one [`MessagePlan`] per message with its
//!   zone, dimensions, influence, [`Tier`], chain and typed [`Reasons`].
//!   v2 grades units along [`Fidelity`] (heavy < light < verbatim) and v2.1
//!   ranks them by Δ; both share one budget step that demotes verbatim units
//!   until the plan's estimate fits.
//! - [`apply`] executes a plan with an injected [`Summarizer`] — the only
//!   step that calls it — producing the new history `[pinned…, summary,
//!   recent…]` and a [`CompactionReport`].
//! - Tokens are counted by an injected [`TokenCounter`]; v2.1's withholding
//!   test asks an injected [`ProbeEvaluator`]. [`exit::ExitMonitor`] decides
//!   when the agent's loop must stop, and [`scenario`] is the conversation
//!   file format.
//!
//! Nothing here does I/O, spawns threads or talks to a model.

pub mod apply;
pub mod budget;
pub mod chains;
pub mod dimensions;
pub mod error;
pub mod estimate;
pub mod evaluator;
pub mod exit;
pub mod literals;
pub mod message;
pub mod plan;
pub mod reason;
pub mod scenario;
pub mod strategy;
pub mod summary;
pub mod taxonomy;
pub mod tier;
pub mod tokens;
pub mod zones;

pub use apply::{Compaction, CompactionReport, ZoneTokens, apply};
pub use budget::Budget;
pub use error::ForgettingError;
pub use evaluator::{KeywordOracle, ProbeEvaluator};
pub use exit::{ExitConfig, ExitEvent, ExitMonitor, ExitReason};
pub use message::{Message, MessageId, MessageKind, Role, ToolCall};
pub use plan::{CompactionPlan, Decline, Fidelity, MessagePlan, PlanConfig, Ranking, StrategyKind, Tier};
pub use reason::{Reason, Reasons};
pub use scenario::Scenario;
pub use strategy::{Strategy, plan, strategy};
pub use summary::{SamplingParams, Summarizer, SummaryRequest};
pub use taxonomy::ProblemClass;
pub use tokens::{ApproxTokenCounter, TokenCounter};
pub use zones::{Zone, ZoneGauge, Zones};
