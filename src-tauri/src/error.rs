//! The one error every command returns, serialised for the UI as
//! `{code, message, details}` (generated as ui/src/lib/generated/app.ts `CommandError`).

use serde::Serialize;

/// A command failure: a stable `code` the UI may branch on, a message written
/// for a user, and optional structured details (`{fields: {name: message}}`
/// for settings that failed validation).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CommandError {
    /// Stable machine-readable code (`invalid_settings`, `not_found`, …).
    pub code: &'static str,
    /// What went wrong, for a user.
    pub message: String,
    /// Structured details, or `null`.
    #[cfg_attr(test, ts(type = "unknown"))]
    pub details: serde_json::Value,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CommandError {}

impl CommandError {
    /// An error without details.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), details: serde_json::Value::Null }
    }

    /// An error with details.
    #[must_use]
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// Bad input from the UI (an unknown id, a malformed request).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid_argument", message)
    }

    /// Something the app should not have let happen (a poisoned lock, a dead thread).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new("internal", message)
    }
}

/// Command results.
pub type CmdResult<T> = Result<T, CommandError>;

impl From<mf_agent::AgentError> for CommandError {
    fn from(e: mf_agent::AgentError) -> Self {
        use mf_agent::AgentError as E;
        let code = match &e {
            E::Inference(i) if i.is_load_error() => "model_load",
            E::Inference(_) => "model",
            E::Store(_) | E::StoredJson(_) | E::StoreFile { .. } | E::StoreCorrupt { .. } => "store",
            E::InvalidSetting(_) => "invalid_settings",
            E::NotFound(_) | E::NoSuchMessage(_) => "not_found",
            E::Busy(_) => "busy",
            E::NotResumable { .. } | E::StoredSpec { .. } => "not_resumable",
            E::Io { .. } => "data_folder",
        };
        Self::new(code, e.to_string())
    }
}

impl From<mf_inference::InferenceError> for CommandError {
    fn from(e: mf_inference::InferenceError) -> Self {
        let code = if e.is_load_error() { "model_load" } else { "model" };
        Self::new(code, e.to_string())
    }
}

impl From<mf_bench::BenchError> for CommandError {
    fn from(e: mf_bench::BenchError) -> Self {
        Self::new("bench", e.to_string())
    }
}

impl From<mf_tools::ToolError> for CommandError {
    fn from(e: mf_tools::ToolError) -> Self {
        Self::new("tools", e.to_string())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn serialises_as_the_ui_expects() {
        let e = CommandError::new("invalid_settings", "Context too small.").with_details(serde_json::json!({"fields": {"context": "too small"}}));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v, serde_json::json!({"code": "invalid_settings", "message": "Context too small.", "details": {"fields": {"context": "too small"}}}));
        let e = CommandError::from(mf_agent::AgentError::NotFound(7));
        assert_eq!(e.code, "not_found");
        assert_eq!(e.message, "no investigation with id 7");
    }
}
