//! Token counts with the model's own tokenizer, per message and cached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mf_forgetting::{ApproxTokenCounter, Message, TokenCounter};
use mf_inference::{Backend, ToolSpec};
use tokio::runtime::Handle;

use super::to_chat;

/// Per-message token counts with the model's tokenizer, cached by content.
pub struct ModelCounter {
    backend: Arc<dyn Backend>,
    tools: Vec<ToolSpec>,
    cache: Mutex<HashMap<String, usize>>,
    approximated: AtomicBool,
}

impl std::fmt::Debug for ModelCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCounter").finish_non_exhaustive()
    }
}

fn cache_key(m: &Message) -> String {
    let mut c = m.clone();
    c.id = mf_forgetting::MessageId::default();
    serde_json::to_string(&c).unwrap_or_default()
}

impl ModelCounter {
    /// A counter for `backend`, counting the system message with `tools`.
    pub fn new(backend: Arc<dyn Backend>, tools: Vec<ToolSpec>) -> Self {
        ModelCounter { backend, tools, cache: Mutex::new(HashMap::new()), approximated: AtomicBool::new(false) }
    }

    /// Whether any count so far fell back to the offline estimate (the
    /// template could not render a lone message, or the backend failed).
    pub fn approximated(&self) -> bool {
        self.approximated.load(Ordering::Relaxed)
    }

    fn cached(&self, key: &str) -> Option<usize> {
        self.cache.lock().ok().and_then(|c| c.get(key).copied())
    }

    fn store(&self, key: String, n: usize) {
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, n);
        }
    }

    fn tools_for(&self, m: &Message) -> &[ToolSpec] {
        if m.role == mf_forgetting::Role::System { &self.tools } else { &[] }
    }

    fn settle(&self, key: String, m: &Message, counted: Result<u32, mf_inference::InferenceError>) -> usize {
        let n = match counted {
            Ok(n) => n as usize,
            Err(e) => {
                tracing::debug!("token count of one message failed, estimating: {e}");
                self.approximated.store(true, Ordering::Relaxed);
                ApproxTokenCounter.count_message(m)
            }
        };
        self.store(key, n);
        n
    }

    /// Tokens of one message (async side). A template that cannot render a
    /// lone message falls back to the offline estimate.
    pub async fn count_async(&self, m: &Message) -> usize {
        let key = cache_key(m);
        if let Some(n) = self.cached(&key) {
            return n;
        }
        let counted = self.backend.count_tokens(&[to_chat(m)], self.tools_for(m)).await;
        self.settle(key, m, counted)
    }

    /// The sync side, for mf-forgetting: counts by waiting on `handle`.
    /// Only use it off the runtime's worker threads.
    pub fn blocking<'a>(&'a self, handle: &'a Handle) -> impl TokenCounter + 'a {
        BlockingCounter { inner: self, handle }
    }
}

struct BlockingCounter<'a> {
    inner: &'a ModelCounter,
    handle: &'a Handle,
}

impl TokenCounter for BlockingCounter<'_> {
    fn count_message(&self, m: &Message) -> usize {
        let key = cache_key(m);
        if let Some(n) = self.inner.cached(&key) {
            return n;
        }
        let counted = self.handle.block_on(self.inner.backend.count_tokens(&[to_chat(m)], self.inner.tools_for(m)));
        self.inner.settle(key, m, counted)
    }
}
