//! The interface the agent drives, whatever runs the model.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::error::{InferenceError, Result};
use crate::types::{ChatMessage, GenerateRequest, Generation, ModelInfo, ScoreRequest, Scored, StreamEvent, ToolSpec};

/// Where streamed text goes. Unbounded so a slow reader never stalls the model
/// thread; a dropped receiver is ignored.
pub type TokenSink = tokio::sync::mpsc::UnboundedSender<StreamEvent>;

/// A cancellation flag shared between the caller and the generator, checked
/// before every token.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A fresh, uncancelled token.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Asks the generation to stop at the next token.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether cancellation was asked for.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Where a KV snapshot is kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum SnapshotSlot {
    /// In the backend's memory under a name; a later snapshot of the same
    /// name replaces it.
    Memory(String),
    /// In a file (with a `FILE.key` beside it: the model key and the token ids).
    File(PathBuf),
}

impl std::fmt::Display for SnapshotSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotSlot::Memory(n) => write!(f, "memory:{n}"),
            SnapshotSlot::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

/// A saved KV sequence: exactly the tokens it covers (positions `0..n`, in
/// the backend's own token ids), its size, and the model + context key it is
/// valid for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvSnapshot {
    /// The token ids in the cache, position by position.
    pub tokens: Vec<i32>,
    /// Bytes of the saved state.
    pub bytes: u64,
    /// The model + context key (a snapshot restores only into the same key).
    pub key: String,
}

/// The length of the common prefix of two token sequences.
#[must_use]
pub fn common_prefix(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn no_kv<'a, T: Send + 'a>(backend: &str, what: &'static str) -> BoxFuture<'a, Result<T>> {
    let backend = backend.to_owned();
    Box::pin(async move { Err(InferenceError::KvUnsupported { backend, what }) })
}

/// A model that chats.
///
/// The KV calls (`keeps_kv` … `kv_restore`) have defaults for backends
/// that keep no cache of their own (HTTP servers): they say so with
/// [`InferenceError::KvUnsupported`], and callers go on without a snapshot.
pub trait Backend: Send + Sync {
    /// Generates a reply to `request`, streaming text to `sink` and stopping
    /// early when `cancel` is set (the reply then has `StopReason::Cancelled`).
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> BoxFuture<'a, Result<Generation>>;

    /// Answers several requests, replies in request order. A backend that
    /// keeps a KV cache decodes the prefix the prompts share once and
    /// generates the answers side by side (llama.cpp); this default asks
    /// them one after the other.
    fn generate_branches<'a>(&'a self, requests: Vec<GenerateRequest>, cancel: CancelToken) -> BoxFuture<'a, Result<Vec<Generation>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(requests.len());
            for r in requests {
                out.push(self.generate(r, None, cancel.clone()).await?);
            }
            Ok(out)
        })
    }

    /// Scores each continuation of `request` by log-probabilities,
    /// teacher-forced after the conversation's rendered prompt (the assistant
    /// turn opened, thinking off); results in continuation order. An engine
    /// that keeps a KV cache decodes the prompt once for all of them.
    ///
    /// # Errors
    /// [`InferenceError::ScoringUnsupported`] where the engine cannot score
    /// (this default); prompt-too-long and engine errors otherwise.
    fn score<'a>(&'a self, _request: ScoreRequest, _cancel: CancelToken) -> BoxFuture<'a, Result<Vec<Scored>>> {
        let backend = self.model_info().backend;
        Box::pin(async move { Err(InferenceError::ScoringUnsupported { backend, reason: "it returns no log-probabilities of a given text".into() }) })
    }

    /// Tokens the rendered prompt of this conversation takes (generation prompt included).
    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<u32>>;

    /// The context window in tokens.
    fn context_size(&self) -> u32;

    /// What the backend knows of its model.
    fn model_info(&self) -> ModelInfo;

    /// Whether this backend keeps a KV cache it can snapshot and restore.
    fn keeps_kv(&self) -> bool {
        false
    }

    /// The token ids of the prompt `generate` would send for this
    /// conversation (generation prompt included), to match a snapshot against.
    fn prompt_token_ids<'a>(&'a self, _messages: &'a [ChatMessage], _tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<Vec<i32>>> {
        no_kv(&self.model_info().backend, "token ids")
    }

    /// The token ids in the KV cache now.
    fn cached_token_ids(&self) -> BoxFuture<'_, Result<Vec<i32>>> {
        no_kv(&self.model_info().backend, "a KV cache")
    }

    /// Saves the cached sequence (state and token ids) to `slot`.
    fn kv_snapshot<'a>(&'a self, _slot: &'a SnapshotSlot) -> BoxFuture<'a, Result<KvSnapshot>> {
        no_kv(&self.model_info().backend, "KV snapshots")
    }

    /// Replaces the cache with the snapshot in `slot`. On failure the cache
    /// is left as it was (a refused key, a file that fails its integrity
    /// check) or empty (a failed load), never half-restored.
    fn kv_restore<'a>(&'a self, _slot: &'a SnapshotSlot) -> BoxFuture<'a, Result<KvSnapshot>> {
        no_kv(&self.model_info().backend, "KV snapshots")
    }
}
