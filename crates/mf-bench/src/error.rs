//! The crate's one error type.

use std::path::PathBuf;

/// What can go wrong in a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A scenario directory could not be read.
    #[error("cannot read scenario directory {path}: {source}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A scenario file could not be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A scenario file is malformed; the message names the file and the field.
    #[error("{file}: {field}: {reason}")]
    InvalidScenario {
        /// The file.
        file: PathBuf,
        /// The field (a JSON path such as `probes[1].required`), or `json` for a syntax error.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The directory holds no scenario file (after filtering).
    #[error("no scenario selected in {0}")]
    NoScenarios(PathBuf),
    /// A command-line or config setting is wrong.
    #[error("invalid setting {name}: {reason}")]
    InvalidSetting {
        /// The setting.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// The model failed.
    #[error("model error: {0}")]
    Inference(#[from] mf_inference::InferenceError),
    /// The compaction core refused.
    #[error("compaction error: {0}")]
    Forgetting(#[from] mf_forgetting::ForgettingError),
    /// Results could not be (de)serialised.
    #[error("results JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The run was cancelled through the model's [`mf_inference::CancelToken`]
    /// (`Model::cancel_token`): there is no result, since the work done so
    /// far is not a run of the suite.
    #[error("benchmark cancelled")]
    Cancelled,
    /// A results file does not match the schema.
    #[error("results do not match the schema: {0}")]
    Schema(String),
}

/// Result alias.
pub type Result<T> = std::result::Result<T, BenchError>;
