//! Who picks the calls, and the world's liveness watched from the tool side.
//!
//! Two drivers run through the same `mf_agent::Agent` loop:
//! - **model-driven**: the backend as it is; the model picks its calls.
//! - **route-driven**: [`RouteDriven`] wraps the real backend. An
//!   investigation turn (a request that offers tools and ends with the
//!   question or a tool result) is answered with the world's next route call
//!   (after the real model has read the prompt, so the KV cache and its
//!   figures are those of a real run); every other request — summary passes,
//!   v2.1's probes, the closing answer — goes to the real model unchanged.
//!   When the route is done, the next turn asks the real model for the
//!   answer (tools withdrawn, the loop's own closing instruction). Tool
//!   execution, context accounting and compaction are the loop's.
//!
//! [`WatchedTools`] wraps the tool runner: after a call, if the world server
//! has stopped serving, it cancels the loop and records why.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use mf_agent::{ToolFailure, ToolReply, ToolRunner};
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvSnapshot, ModelInfo, Role, SnapshotSlot, StopReason, TokenSink, ToolCall, ToolSpec,
};
use mf_tools::Requirement;
use mf_tools::policy::Approval;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// The traits' boxed future (the same type as `futures`' `BoxFuture`).
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Who picks the tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// The model picks its calls.
    Model,
    /// The world's route is replayed as the assistant's calls; everything else is the real model.
    Route,
}

impl Driver {
    /// Name on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Model => "model",
            Driver::Route => "route",
        }
    }

    /// The label of tables.
    pub fn label(self) -> &'static str {
        match self {
            Driver::Model => "model-driven (the model picks its calls)",
            Driver::Route => "route-driven (the world's route replayed as the calls; summaries and the answer by the model)",
        }
    }

    /// Parses `model` or `route`.
    ///
    /// # Errors
    /// Anything else.
    pub fn parse(s: &str) -> Result<Driver> {
        match s.trim() {
            "model" => Ok(Driver::Model),
            "route" => Ok(Driver::Route),
            other => Err(BenchError::InvalidSetting { name: "driver", reason: format!("unknown driver {other:?} (model or route)") }),
        }
    }
}

/// A backend that answers investigation turns with the world's route.
pub struct RouteDriven {
    inner: Arc<dyn Backend>,
    urls: Vec<String>,
    next: AtomicUsize,
    /// Read each round's prompt with the real model (one token) so that the
    /// cache holds it as in a real run.
    prefill: bool,
}

impl std::fmt::Debug for RouteDriven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteDriven").field("urls", &self.urls).field("next", &self.next).finish_non_exhaustive()
    }
}

impl RouteDriven {
    /// Replays `urls` (absolute) as `http` calls over `inner`.
    pub fn new(inner: Arc<dyn Backend>, urls: Vec<String>, prefill: bool) -> Self {
        RouteDriven { inner, urls, next: AtomicUsize::new(0), prefill }
    }

    /// Calls replayed so far.
    pub fn replayed(&self) -> usize {
        self.next.load(Ordering::SeqCst).min(self.urls.len())
    }

    /// Calls on the route.
    pub fn len(&self) -> usize {
        self.urls.len()
    }

    /// Whether the route is empty.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }
}

/// The question: the first user message of a request.
fn question(messages: &[ChatMessage]) -> Option<&str> {
    messages.iter().find(|m| m.role == Role::User).map(|m| m.content.as_str())
}

/// Whether `req` is an investigation turn of the loop: it offers tools and
/// its last message is the question or a tool result (a summary pass that
/// offers tools ends with its own instruction; probes and the closing answer
/// offer none).
pub fn is_investigation_turn(req: &GenerateRequest) -> bool {
    if req.tools.is_empty() {
        return false;
    }
    match req.messages.last() {
        Some(m) if m.role == Role::Tool => true,
        Some(m) if m.role == Role::User => Some(m.content.as_str()) == question(&req.messages),
        _ => false,
    }
}

impl Backend for RouteDriven {
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            if !is_investigation_turn(&request) {
                return self.inner.generate(request, sink, cancel).await;
            }
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(url) = self.urls.get(i) else {
                // The route is done: the real model answers, without tools,
                // to the loop's own closing request (the question restated).
                let closing = mf_agent::agent::closing_request(question(&request.messages), 0);
                let mut messages = request.messages;
                messages.push(ChatMessage::user(closing));
                return self.inner.generate(GenerateRequest { messages, tools: Vec::new(), sampling: request.sampling }, sink, cancel).await;
            };
            let call = ToolCall { id: format!("route_{}", i + 1), name: "http".into(), arguments: serde_json::json!({ "url": url }) };
            let text = format!("```json\n{}\n```", serde_json::json!({"name": call.name, "arguments": call.arguments}));
            let usage = if self.prefill {
                let mut sampling = request.sampling.clone();
                sampling.max_tokens = 1;
                let g = self.inner.generate(GenerateRequest { messages: request.messages, tools: request.tools, sampling }, None, cancel).await?;
                if g.stop_reason == StopReason::Cancelled {
                    return Ok(g);
                }
                let mut u = g.usage;
                u.completion_tokens = 0;
                u.thinking_tokens = 0;
                u
            } else {
                mf_inference::Usage::default()
            };
            if let Some(s) = sink {
                let _ = s.send(mf_inference::StreamEvent::Text(text.clone()));
            }
            Ok(Generation {
                raw_text: text,
                content: String::new(),
                thinking: None,
                tool_calls: vec![call],
                tool_parse_error: None,
                stop_reason: StopReason::ToolCall,
                usage,
            })
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        self.inner.count_tokens(messages, tools)
    }

    fn context_size(&self) -> u32 {
        self.inner.context_size()
    }

    fn model_info(&self) -> ModelInfo {
        self.inner.model_info()
    }

    fn keeps_kv(&self) -> bool {
        self.inner.keeps_kv()
    }

    fn prompt_token_ids<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<Vec<i32>>> {
        self.inner.prompt_token_ids(messages, tools)
    }

    fn cached_token_ids(&self) -> BoxFuture<'_, mf_inference::Result<Vec<i32>>> {
        self.inner.cached_token_ids()
    }

    fn kv_snapshot<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, mf_inference::Result<KvSnapshot>> {
        self.inner.kv_snapshot(slot)
    }

    fn kv_restore<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, mf_inference::Result<KvSnapshot>> {
        self.inner.kv_restore(slot)
    }
}

/// A tool runner that stops the loop when the world server has died.
pub struct WatchedTools {
    inner: Arc<dyn ToolRunner>,
    alive: Arc<AtomicBool>,
    cancel: OnceLock<CancelToken>,
    died: AtomicBool,
}

impl std::fmt::Debug for WatchedTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchedTools").field("died", &self.died).finish_non_exhaustive()
    }
}

impl WatchedTools {
    /// Watches `alive` (the server's flag) around `inner`.
    pub fn new(inner: Arc<dyn ToolRunner>, alive: Arc<AtomicBool>) -> Self {
        WatchedTools { inner, alive, cancel: OnceLock::new(), died: AtomicBool::new(false) }
    }

    /// The loop's cancel token (set once the agent exists).
    pub fn watch(&self, cancel: CancelToken) {
        let _ = self.cancel.set(cancel);
    }

    /// Whether a call found the world dead (the loop was then cancelled).
    pub fn world_died(&self) -> bool {
        self.died.load(Ordering::SeqCst)
    }
}

impl ToolRunner for WatchedTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> std::result::Result<Requirement, ToolFailure> {
        self.inner.requirement(call_id, name, args_json)
    }

    fn run<'a>(
        &'a self,
        call_id: &'a str,
        name: &'a str,
        args_json: &'a str,
        approval: Option<&'a Approval>,
    ) -> BoxFuture<'a, std::result::Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            let r = self.inner.run(call_id, name, args_json, approval).await;
            if !self.alive.load(Ordering::SeqCst) {
                self.died.store(true, Ordering::SeqCst);
                if let Some(c) = self.cancel.get() {
                    c.cancel();
                }
            }
            r
        })
    }
}
