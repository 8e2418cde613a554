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
    /// A file the run writes (a trace) could not be written.
    #[error("cannot write {path}: {source}")]
    WriteFile {
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
    /// Two runs that `compare` cannot pair (other models, scenarios or conditions).
    #[error("cannot compare the runs: {0}")]
    Incomparable(String),
    /// A command-line or config setting is wrong.
    #[error("invalid setting {name}: {reason}")]
    InvalidSetting {
        /// The setting.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// A run was asked for with nothing of one kind chosen (`model`,
    /// `scenario`, `condition`, `scorer`, `repetition`).
    #[error("Choose at least one {0}.")]
    NothingChosen(&'static str),
    /// Repetitions outside 1 to `max`.
    #[error("Repetitions must be from 1 to {max} (got {given}).")]
    RepsOutOfRange {
        /// Asked for.
        given: u32,
        /// The most allowed.
        max: u32,
    },
    /// A condition name that is none of [`crate::Condition::ALL`]'s.
    #[error("unknown condition {given:?} ({known}, or all)")]
    UnknownCondition {
        /// The name given.
        given: String,
        /// The names there are, comma-separated ([`crate::Condition::names`]).
        known: String,
    },
    /// A scorer name that is neither `keyword` nor `judge`.
    #[error("unknown scorer {0:?} (keyword, judge, all)")]
    UnknownScorer(String),
    /// A parallel run was given no worker.
    #[error("at least one worker is needed")]
    NoWorkers,
    /// A worker thread of a parallel run panicked.
    #[error("a benchmark worker thread panicked")]
    WorkerPanicked,
    /// A chosen model file does not exist.
    #[error("No model file {}.", .0.display())]
    ModelFileMissing(PathBuf),
    /// Chosen scenario ids that the scenario folder does not hold.
    #[error("No such scenario: {}.", .0.join(", "))]
    UnknownScenarios(Vec<String>),
    /// The run's thread could not start.
    #[error("cannot start the benchmark thread: {0}")]
    Thread(std::io::Error),
    /// The runtime that drives the model could not be started.
    #[error("cannot start the model's runtime: {0}")]
    Runtime(std::io::Error),
    /// The investigation loop of a live run failed (a model or store error
    /// that it could not turn into an exit): the run has no result, the
    /// runs after it still run.
    #[error("the loop failed: {0}")]
    Loop(#[source] mf_agent::AgentError),
    /// A stored investigation could not be replayed: `what` names it (and
    /// the step), the source says why.
    #[error("{what}: {source}")]
    Replay {
        /// The investigation, and what was being read or loaded.
        what: String,
        /// The store's or engine's error.
        source: mf_agent::AgentError,
    },
    /// One model of a benchmark run could not load or run: the run ends
    /// there (the models before it have their results).
    #[error("{model}: {source}")]
    Model {
        /// The model's name (its file name, or its name on the server).
        model: String,
        /// Why.
        source: Box<BenchError>,
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
