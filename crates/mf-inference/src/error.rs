//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong in this crate. Messages are written for a user.
#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    /// The model file does not exist or cannot be read.
    #[error("cannot read model file {path}: {reason}")]
    ModelUnreadable {
        /// The path given.
        path: PathBuf,
        /// What the OS said.
        reason: String,
    },
    /// The model file is empty.
    #[error("model file {path} is empty (an interrupted download?)")]
    EmptyModelFile {
        /// The path given.
        path: PathBuf,
    },
    /// The file is not a GGUF file.
    #[error("{path} is not a GGUF model file (it starts with {found:?}, a GGUF file starts with \"GGUF\")")]
    NotGguf {
        /// The path given.
        path: PathBuf,
        /// The first bytes, escaped.
        found: String,
    },
    /// llama.cpp refused the file although it looks like GGUF.
    #[error("llama.cpp could not load {path}: the GGUF file is corrupt, truncated or of an unsupported architecture")]
    CorruptModel {
        /// The path given.
        path: PathBuf,
    },
    /// The requested context exceeds what the model was trained on and clamping was off.
    #[error("context of {requested} tokens exceeds the model's training context of {train} tokens")]
    ContextTooLarge {
        /// Tokens asked for.
        requested: u32,
        /// The model's `n_ctx_train`.
        train: u32,
    },
    /// llama.cpp could not create a context (usually: not enough memory).
    #[error("llama.cpp could not create a context of {n_ctx} tokens (not enough memory?)")]
    ContextCreate {
        /// Tokens asked for.
        n_ctx: u32,
    },
    /// The prompt does not fit the context window; compact before retrying.
    #[error("prompt of {prompt_tokens} tokens plus {reserve} for the reply does not fit the context of {context_size} tokens")]
    PromptTooLong {
        /// Tokens in the rendered prompt.
        prompt_tokens: u32,
        /// Tokens reserved for the reply.
        reserve: u32,
        /// The context window.
        context_size: u32,
    },
    /// The chat template could not be compiled or rendered.
    #[error("chat template: {0}")]
    Template(String),
    /// The model's output looked like a tool call but could not be parsed.
    #[error("malformed {format} tool call: {reason}")]
    ToolCallParse {
        /// The format expected (`hermes`, `llama3_json`, ...).
        format: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// llama.cpp failed to decode a batch.
    #[error("llama.cpp decode failed: {0}")]
    Decode(String),
    /// A snapshot was made with a different model or context settings.
    #[error("snapshot {path} was made for {found}, but this session is {expected}")]
    SnapshotMismatch {
        /// The snapshot file.
        path: PathBuf,
        /// This session's key.
        expected: String,
        /// The snapshot's key.
        found: String,
    },
    /// A saved snapshot failed its integrity check (cut, damaged, empty, or
    /// not the file its key file describes); it was not loaded.
    #[error("snapshot {path} failed its integrity check: {reason}")]
    SnapshotDamaged {
        /// The snapshot file.
        path: PathBuf,
        /// What did not match.
        reason: String,
    },
    /// Saving or loading a snapshot failed.
    #[error("snapshot {path}: {reason}")]
    Snapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The backend keeps no KV cache of its own (an HTTP server), so it has
    /// nothing to snapshot or restore.
    #[error("the {backend} backend has no {what} (it keeps no KV cache of its own)")]
    KvUnsupported {
        /// The backend's name.
        backend: String,
        /// What was asked for.
        what: &'static str,
    },
    /// The session worker thread has stopped (after `stop`, or it died).
    #[error("the model session has stopped")]
    SessionStopped,
    /// A request that cannot be served as asked.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The HTTP request failed (connection, timeout, TLS).
    #[error("cannot reach {url}: {reason}")]
    Http {
        /// The endpoint.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{url} answered {status}: {body}")]
    HttpStatus {
        /// The endpoint.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The engine cannot score a continuation by log-probabilities (Ollama,
    /// or an OpenAI-compatible server without prompt log-probabilities).
    #[error("scoring not supported by this engine ({backend}): {reason}")]
    ScoringUnsupported {
        /// The backend's name.
        backend: String,
        /// Why (what was asked of it and what it answered).
        reason: String,
    },
    /// The server's stream did not follow the protocol.
    #[error("unexpected reply from {url}: {reason}")]
    Protocol {
        /// The endpoint.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

impl InferenceError {
    /// Whether retrying the same call later may succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            InferenceError::Http { .. } => true,
            InferenceError::HttpStatus { status, .. } => *status == 429 || *status >= 500,
            InferenceError::ModelUnreadable { .. }
            | InferenceError::EmptyModelFile { .. }
            | InferenceError::NotGguf { .. }
            | InferenceError::CorruptModel { .. }
            | InferenceError::ContextTooLarge { .. }
            | InferenceError::ContextCreate { .. }
            | InferenceError::PromptTooLong { .. }
            | InferenceError::Template(_)
            | InferenceError::ToolCallParse { .. }
            | InferenceError::Decode(_)
            | InferenceError::SnapshotMismatch { .. }
            | InferenceError::SnapshotDamaged { .. }
            | InferenceError::Snapshot { .. }
            | InferenceError::KvUnsupported { .. }
            | InferenceError::ScoringUnsupported { .. }
            | InferenceError::SessionStopped
            | InferenceError::InvalidRequest(_)
            | InferenceError::Protocol { .. } => false,
        }
    }

    /// Whether this is a failure to load the model (bad file, bad context).
    #[must_use]
    pub fn is_load_error(&self) -> bool {
        match self {
            InferenceError::ModelUnreadable { .. }
            | InferenceError::EmptyModelFile { .. }
            | InferenceError::NotGguf { .. }
            | InferenceError::CorruptModel { .. }
            | InferenceError::ContextTooLarge { .. }
            | InferenceError::ContextCreate { .. } => true,
            InferenceError::PromptTooLong { .. }
            | InferenceError::Template(_)
            | InferenceError::ToolCallParse { .. }
            | InferenceError::Decode(_)
            | InferenceError::SnapshotMismatch { .. }
            | InferenceError::SnapshotDamaged { .. }
            | InferenceError::Snapshot { .. }
            | InferenceError::KvUnsupported { .. }
            | InferenceError::ScoringUnsupported { .. }
            | InferenceError::SessionStopped
            | InferenceError::InvalidRequest(_)
            | InferenceError::Http { .. }
            | InferenceError::HttpStatus { .. }
            | InferenceError::Protocol { .. } => false,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = InferenceError> = std::result::Result<T, E>;
