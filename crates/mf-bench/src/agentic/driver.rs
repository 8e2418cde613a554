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

use mf_agent::compact::{chat_history, from_chat};
use mf_agent::{ToolFailure, ToolReply, ToolRunner};
use mf_forgetting::Message;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, InferenceError, KvSnapshot, ModelInfo, Role, SnapshotSlot, StopReason, TokenSink, ToolCall,
    ToolSpec,
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
                // to the loop's own closing request (the question restated),
                // built as the loop builds it: the loop measured the prompt
                // with its tools, not with this request, so the oldest
                // exchanges are left out when that is what it takes to fit.
                let max_tokens = request.sampling.max_tokens;
                let room = self.inner.context_size().saturating_sub(max_tokens);
                let history: Vec<Message> = request.messages.iter().enumerate().map(|(i, m)| from_chat(&format!("m{i}"), m)).collect();
                let messages = match mf_agent::agent::fit_closing(self.inner.as_ref(), &history, "closing", room, 0).await? {
                    Ok(fit) => chat_history(&fit.messages),
                    Err(prompt_tokens) => {
                        return Err(InferenceError::PromptTooLong { prompt_tokens, reserve: max_tokens, context_size: self.inner.context_size() });
                    }
                };
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

    fn supplied_by_user(&self, text: &str) {
        self.inner.supplied_by_user(text);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Mutex;

    use mf_inference::{KvStats, Usage};

    use super::*;

    /// One token per 4 characters, 4 per message; records what it is sent.
    struct Counting {
        ctx: u32,
        sent: Mutex<Vec<GenerateRequest>>,
    }

    fn count(messages: &[ChatMessage]) -> u32 {
        messages.iter().map(|m| 4 + u32::try_from(m.content.chars().count().div_ceil(4)).unwrap()).sum()
    }

    impl Backend for Counting {
        fn generate<'a>(&'a self, request: GenerateRequest, _sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
            Box::pin(async move {
                let prompt = count(&request.messages);
                if prompt + request.sampling.max_tokens > self.ctx {
                    return Err(InferenceError::PromptTooLong { prompt_tokens: prompt, reserve: request.sampling.max_tokens, context_size: self.ctx });
                }
                self.sent.lock().unwrap().push(request);
                Ok(Generation {
                    raw_text: "answer".into(),
                    content: "answer".into(),
                    thinking: None,
                    tool_calls: Vec::new(),
                    tool_parse_error: None,
                    stop_reason: StopReason::EndOfTurn,
                    usage: Usage { kv: KvStats::default(), completion_tokens: 1, thinking_tokens: 0 },
                })
            })
        }

        fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], _tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
            Box::pin(async move { Ok(count(messages)) })
        }

        fn context_size(&self) -> u32 {
            self.ctx
        }

        fn model_info(&self) -> ModelInfo {
            ModelInfo {
                name: "counting".into(),
                backend: "test".into(),
                architecture: None,
                context_size: self.ctx,
                context_train: None,
                parameters: None,
                tool_format: None,
            }
        }
    }

    /// The loop measured this turn with its tools and let it through; at the
    /// end of the route the driver sends it without tools and with the
    /// closing request, which would not fit: the oldest exchanges go.
    #[tokio::test]
    async fn the_answer_request_at_the_end_of_the_route_is_built_to_fit() {
        let inner = Arc::new(Counting { ctx: 440, sent: Mutex::new(Vec::new()) });
        let driven = RouteDriven::new(inner.clone(), Vec::new(), false);
        let mut messages = vec![ChatMessage::system("You investigate."), ChatMessage::user("Who owns web-03?")];
        for i in 0..6 {
            let call = ToolCall { id: format!("c{i}"), name: "http".into(), arguments: serde_json::json!({"url": format!("/p{i}")}) };
            messages.push(ChatMessage::assistant_tool_calls("", vec![call]));
            messages.push(ChatMessage::tool_result(format!("c{i}"), "http", format!("page {i}: {}", "x".repeat(160))));
        }
        let spec = ToolSpec { name: "http".into(), description: "GET".into(), parameters: serde_json::json!({}) };
        let request = GenerateRequest { messages: messages.clone(), tools: vec![spec], sampling: mf_inference::Sampling::greedy(100) };
        assert!(is_investigation_turn(&request));
        assert!(count(&messages) + 100 <= 440, "the turn itself fits");
        let g = driven.generate(request, None, CancelToken::new()).await.unwrap();
        assert_eq!(g.content, "answer");
        let sent = inner.sent.lock().unwrap();
        let asked = &sent[0];
        assert!(asked.tools.is_empty());
        assert!(count(&asked.messages) + 100 <= 440, "{} tokens", count(&asked.messages));
        assert_eq!(&asked.messages[..2], &messages[..2], "the pinned zone is kept");
        let last = asked.messages.last().unwrap();
        assert!(last.content.starts_with("Stop calling tools") && last.content.contains("earlier messages were left out"), "{}", last.content);
        assert!(last.content.ends_with("The question: Who owns web-03?"), "{}", last.content);
        assert_eq!(asked.messages[asked.messages.len() - 2], messages[messages.len() - 1], "the last result is kept");
    }
}
