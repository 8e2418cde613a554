//! Measured forgetting: the pure compaction core.
//!
//! How the pieces fit: a history is a slice of [`Message`]s. [`zones::partition`]
//! splits it into pinned / compressible / recent under a [`Budget`]; a
//! [`Strategy`] (none, baseline, masking, v1, v2, v2.1) turns it into a
//! [`CompactionPlan`] — pure, deterministic, serialisable, one entry per
//! message with its zone, dimensions, influence, tier, chain and reason —
//! and [`apply`] executes a plan with an injected [`Summarizer`], producing
//! the new history `[pinned…, summary, recent…]` and a [`CompactionReport`].
//! Tokens are counted by an injected [`TokenCounter`]; v2.1's withholding test
//! asks an injected [`ProbeEvaluator`]. [`exit::ExitMonitor`] decides when the
//! agent's loop must stop, and [`scenario`] is the conversation file format.
//!
//! Nothing here does I/O, spawns threads or talks to a model.

pub mod apply;
pub mod budget;
pub mod chains;
pub mod dimensions;
pub mod error;
pub mod evaluator;
pub mod exit;
pub mod literals;
pub mod message;
pub mod plan;
pub mod scenario;
pub mod strategy;
pub mod summary;
pub mod taxonomy;
pub mod tokens;
pub mod zones;

pub use apply::{Compaction, CompactionReport, ZoneTokens, apply};
pub use budget::Budget;
pub use error::ForgettingError;
pub use evaluator::{KeywordOracle, ProbeEvaluator};
pub use exit::{ExitConfig, ExitEvent, ExitMonitor, ExitReason};
pub use message::{Message, MessageId, MessageKind, Role, ToolCall};
pub use plan::{CompactionPlan, MessagePlan, PlanConfig, Ranking, StrategyKind, Tier};
pub use scenario::Scenario;
pub use strategy::{Strategy, plan, strategy};
pub use summary::{SamplingParams, Summarizer, SummaryRequest};
pub use taxonomy::ProblemClass;
pub use tokens::{ApproxTokenCounter, TokenCounter};
pub use zones::{Zone, ZoneGauge, Zones};
