//! The crate's one error type.

/// What can go wrong in the loop or the store. Messages are written for a user.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The model backend failed in a way the loop cannot recover from.
    #[error("model: {0}")]
    Inference(#[from] mf_inference::InferenceError),
    /// The session store (SQLite) failed.
    #[error("session store: {0}")]
    Store(#[from] rusqlite::Error),
    /// A stored row could not be decoded.
    #[error("session store: bad stored JSON: {0}")]
    StoredJson(#[from] serde_json::Error),
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    InvalidSetting(String),
    /// No investigation with this id.
    #[error("no investigation with id {0}")]
    NotFound(i64),
    /// The investigation is running (in this or another live process).
    #[error("investigation {0} is still running")]
    Busy(i64),
    /// A message named by its id (to pin, to compact up to) is not in the history.
    #[error("there is no message {0} in this investigation's history")]
    NoSuchMessage(String),
    /// The investigation cannot be continued.
    #[error("investigation {id} cannot be resumed: {reason}")]
    NotResumable {
        /// Its id.
        id: i64,
        /// Why.
        reason: String,
    },
    /// The stored run settings could not be read (stored by another version).
    #[error("investigation {id} was stored with settings this version cannot read: {reason}")]
    StoredSpec {
        /// Its id.
        id: i64,
        /// The decoder's message.
        reason: String,
    },
    /// A file or folder of the data folder could not be used.
    #[error("{what}: {reason}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's message.
        reason: String,
    },
}
