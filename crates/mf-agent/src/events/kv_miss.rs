//! Why a resume decoded the history again instead of loading its saved KV
//! cache: the payload of the `kv_restore` event, decided by the session's
//! KV files (`crate::session`), read by the loop and every face.

use serde::{Deserialize, Serialize};

/// Why a resume did not load the saved KV cache (it decodes the history again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum KvMiss {
    /// The engine keeps no cache that can be saved (an HTTP server).
    EngineKeepsNoCache,
    /// No cache was ever saved for this session (saving was off).
    NotSaved,
    /// A cache was saved but its file is gone (deleted, or pruned to keep the most recent).
    FileMissing,
    /// The model file differs from the one the cache was made with.
    ModelChanged,
    /// The context size differs from the one the cache was made with.
    ContextChanged,
    /// The cache holds other tokens than this history's (it diverges inside the pinned zone).
    Diverges,
    /// The user asked for the history to be decoded again.
    Skipped,
    /// The file is not the one that was saved: its length or checksum differs
    /// from the ones recorded beside it (cut, flipped bytes, another file), so
    /// the engine never read it.
    Damaged,
    /// The engine could not load the file.
    LoadFailed,
}

impl KvMiss {
    /// Words for the user.
    #[must_use]
    pub fn describe(&self) -> &'static str {
        match self {
            KvMiss::EngineKeepsNoCache => "this engine keeps no KV cache that can be saved",
            KvMiss::NotSaved => "no KV cache was saved for this investigation",
            KvMiss::FileMissing => "the saved KV cache file is gone",
            KvMiss::ModelChanged => "the model file changed since the cache was saved",
            KvMiss::ContextChanged => "the context size changed since the cache was saved",
            KvMiss::Diverges => "the saved cache holds another history",
            KvMiss::Skipped => "asked not to load it",
            KvMiss::Damaged => "the saved cache is damaged",
            KvMiss::LoadFailed => "the engine could not load the saved cache",
        }
    }
}
