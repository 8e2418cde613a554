//! The crate's one error type.

/// Everything that can go wrong in planning, applying or validating.
///
/// Messages are written for the person who runs `mf plan` or the agent's log:
/// they name the setting, the field or the message that is at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForgettingError {
    /// A budget setting is out of range (e.g. the reserve is not below the context).
    #[error("invalid budget: {0}")]
    InvalidBudget(String),
    /// A strategy setting is out of range (e.g. a negative γ).
    #[error("invalid setting `{name}`: {reason}")]
    InvalidSetting {
        /// The setting's name as the user types it.
        name: &'static str,
        /// Why the value is refused.
        reason: String,
    },
    /// The history has no messages at all.
    #[error("the history is empty")]
    EmptyHistory,
    /// The history has no user message, so there is no original question to pin.
    #[error("the history has no user message (the original question)")]
    NoUserMessage,
    /// A conversation or scenario is structurally wrong; `field` is a JSON path.
    #[error("{field}: {reason}")]
    InvalidConversation {
        /// Where the problem is, e.g. `messages[4].tool_call_id`.
        field: String,
        /// What is wrong there.
        reason: String,
    },
    /// The conversation file is not valid JSON or does not match the format.
    #[error("line {line}, column {column}: {message}")]
    Parse {
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// serde's description (names an unknown or missing field).
        message: String,
    },
    /// A message named by its id (to compact up to, to pin) is not in the history.
    #[error("no message {0} in the history")]
    UnknownMessage(String),
    /// A plan was applied to a history it was not made for.
    #[error("the plan does not match this history: {0}")]
    PlanMismatch(String),
    /// After compaction the history is still over its target.
    #[error("budget not restored: {tokens} tokens after compaction, target {threshold} ({messages} messages left)")]
    BudgetNotRestored {
        /// Tokens of the compacted history.
        tokens: usize,
        /// The target it had to reach: the threshold `ratio · (C − G)`, or
        /// `C − G` when the pinned and recent zones leave no room for a
        /// summary under the threshold (see [`crate::apply`]).
        threshold: usize,
        /// Messages left in the compacted history.
        messages: usize,
    },
    /// The summariser failed (the caller sees this only through the report's fallback).
    #[error("summariser failed: {0}")]
    Summarizer(String),
    /// The probe evaluator of the withholding test (v2.1) failed.
    #[error("probe evaluator failed: {0}")]
    Evaluator(String),
}

impl ForgettingError {
    /// Whether the error is about the input (a file, a setting) rather than a
    /// failure of an injected component; used by the CLI to pick its exit code.
    pub fn is_input_error(&self) -> bool {
        match self {
            ForgettingError::InvalidBudget(_)
            | ForgettingError::InvalidSetting { .. }
            | ForgettingError::EmptyHistory
            | ForgettingError::NoUserMessage
            | ForgettingError::InvalidConversation { .. }
            | ForgettingError::Parse { .. }
            | ForgettingError::UnknownMessage(_)
            | ForgettingError::PlanMismatch(_) => true,
            ForgettingError::BudgetNotRestored { .. } | ForgettingError::Summarizer(_) | ForgettingError::Evaluator(_) => false,
        }
    }
}
