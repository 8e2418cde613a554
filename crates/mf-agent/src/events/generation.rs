//! What one generation cost in the KV cache, and what it was for.

use mf_inference::KvStats;
use serde::{Deserialize, Serialize};

/// KV figures of one generation (mirror of `mf_inference::KvStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct KvFigures {
    /// Tokens of the prompt.
    pub prompt_tokens: u32,
    /// Prompt tokens found in the cache (not decoded again).
    pub reused: u32,
    /// Prompt tokens decoded.
    pub decoded: u32,
    /// Cached tokens removed because the prompt diverged.
    pub trimmed: u32,
    /// The whole cache had to be cleared.
    pub full_clear: bool,
    /// Prefill time, milliseconds.
    #[cfg_attr(test, ts(type = "number"))]
    pub prefill_ms: u64,
    /// Generation time, milliseconds.
    #[cfg_attr(test, ts(type = "number"))]
    pub decode_ms: u64,
}

impl From<KvStats> for KvFigures {
    fn from(k: KvStats) -> Self {
        KvFigures {
            prompt_tokens: k.prompt_tokens,
            reused: k.reused,
            decoded: k.decoded,
            trimmed: k.trimmed,
            full_clear: k.full_clear,
            prefill_ms: k.prefill_ms,
            decode_ms: k.decode_ms,
        }
    }
}

/// What a generation was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(ts_rs::TS))]
pub enum Purpose {
    /// A round of the investigation.
    Round,
    /// The summary pass of a compaction.
    Summary,
    /// A withholding-test probe of v2.1 (Δ by the model).
    Probe,
    /// The closing answer after a dynamic exit.
    Answer,
}
