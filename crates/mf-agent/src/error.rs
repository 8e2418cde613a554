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
    /// A store error, with the store's file.
    #[error("session store {}: {}", path.display(), inner_message(source))]
    StoreFile {
        /// The store's file.
        path: std::path::PathBuf,
        /// What failed ([`AgentError::Store`] or [`AgentError::StoredJson`]).
        source: Box<AgentError>,
    },
    /// The store's file is damaged (SQLite reports corruption, or it is not
    /// a database): nothing more is written to it in this process.
    #[error(
        "the session store {} is damaged ({detail}); nothing more is written to it. Move it aside and start again (a new, empty store is made), or recover what it holds: `sqlite3 {} .recover | sqlite3 recovered.db`, then put recovered.db in its place",
        path.display(),
        path.display()
    )]
    StoreCorrupt {
        /// The store's file.
        path: std::path::PathBuf,
        /// What SQLite said.
        detail: String,
    },
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

/// The message of a wrapped store error without its own "session store:" prefix.
fn inner_message(e: &AgentError) -> String {
    match e {
        AgentError::Store(e) => e.to_string(),
        AgentError::StoredJson(e) => format!("bad stored JSON: {e}"),
        other => other.to_string(),
    }
}
