//! The investigation loop of Measured Forgetting.
//!
//! How the pieces fit: [`Agent::run`] drives one investigation. It asks a
//! [`mf_inference::Backend`] for replies, runs the tool calls it parses
//! through a [`ToolRunner`] (in production [`mf_tools::ToolRegistry`]) once
//! the approval policy or an [`Approver`] said yes, measures the prompt with
//! the backend's own tokenizer and, over the threshold `ratio · (C − G)`,
//! compacts the history with `mf_forgetting::{plan, apply}` ([`compact`]).
//! Everything it does is an [`AgentEvent`], sent to an [`EventSink`] (the
//! CLI printer, the UI, the SQLite [`Store`] through a [`StoreSink`]).
//! Exits are dynamic ([`ExitReason`], from `mf_forgetting::ExitMonitor`): a
//! final answer, a repeated tool call, N consecutive errors, an exhausted
//! context, the compaction-loop guard, an optional safety cap.
//!
//! A session is set up from flat [`RunSettings`] (the app's settings file,
//! the CLI's flags): [`RunSpec::resolve`] checks them, naming every bad
//! field ([`SettingErrors`]), and builds the [`RunSpec`] with its
//! [`EngineChoice`], which [`Sessions`] starts, stores and resumes.

pub mod agent;
pub mod compact;
pub mod engine;
pub mod error;
pub mod events;
pub mod model;
pub mod session;
pub mod settings;
pub mod store;
pub mod tools;

/// The generated TypeScript files' check, one for every generator in the crate.
#[cfg(test)]
pub(crate) fn assert_generated_ts(file: &str, want: &str) {
    #![allow(clippy::unwrap_used)]
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/generated").join(file);
    if std::env::var_os("MF_UPDATE_TS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(have == want, "{} is stale: run `MF_UPDATE_TS=1 cargo test -p mf-agent typescript` and commit it", path.display());
}

pub use agent::{Agent, AgentSettings, BEFORE_COMPACTION, HandCompaction, Outcome, SYSTEM_PROMPT, Undone, keep_pins, parse_strategy, pin};
pub use compact::{DeltaSource, SummaryPass};
pub use engine::{EngineChoice, EngineKind, KeySource};
pub use error::AgentError;
pub use events::{AgentEvent, ByHand, EventSink, ExitReason, Forecast, Gauge, McpOrigin, Purpose, SummaryBy, VecSink};
pub use model::UnknownName;
pub use session::{KvMiss, Launch, Resume, RunSpec, Sessions, ToolsSpec};
pub use settings::{ApprovalMode, RunSettings, SettingError, SettingErrors, ToolApprovals};
pub use store::{InvestigationRow, SessionStatus, Store, StoreSink};
pub use tools::{Approver, Decision, FailureKind, FixedApprover, NoAnswer, Scope, ToolFailure, ToolReply, ToolRunner};
