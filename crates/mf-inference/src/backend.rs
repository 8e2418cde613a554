//! The interface the agent drives, whatever runs the model.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;

use crate::error::Result;
use crate::types::{ChatMessage, GenerateRequest, Generation, ModelInfo, StreamEvent, ToolSpec};

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

/// A model that chats.
pub trait Backend: Send + Sync {
    /// Generates a reply to `request`, streaming text to `sink` and stopping
    /// early when `cancel` is set (the reply then has `StopReason::Cancelled`).
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> BoxFuture<'a, Result<Generation>>;

    /// Tokens the rendered prompt of this conversation takes (generation prompt included).
    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<u32>>;

    /// The context window in tokens.
    fn context_size(&self) -> u32;

    /// What the backend knows of its model.
    fn model_info(&self) -> ModelInfo;
}
