//! Ollama's `/api/chat` (NDJSON streaming).

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::common::{StreamedReply, client, estimate_request_tokens, model_info, parse_json, post_lines, tools_json};
use crate::backend::{Backend, CancelToken, TokenSink};
use crate::error::{InferenceError, Result};
use crate::reply::assemble;
use crate::tool_parse::{ToolCallFormat, new_call_id};
use crate::types::{ChatMessage, GenerateRequest, Generation, KvStats, ModelInfo, Role, StopReason, Thinking, ToolCall, ToolSpec};

/// A model served by Ollama.
#[derive(Debug, Clone)]
pub struct OllamaBackend {
    client: reqwest::Client,
    base: url::Url,
    model: String,
    context_size: u32,
}

impl OllamaBackend {
    /// `base` like `http://127.0.0.1:11434`; `context_size` is sent as `num_ctx`.
    ///
    /// # Errors
    /// [`InferenceError::InvalidRequest`] for a URL that cannot be a base.
    pub fn new(base: &str, model: impl Into<String>, context_size: u32) -> Result<Self> {
        let base = url::Url::parse(base).map_err(|e| InferenceError::InvalidRequest(format!("bad Ollama URL {base:?}: {e}")))?;
        Ok(Self { client: client()?, base, model: model.into(), context_size })
    }

    fn endpoint(&self) -> Result<String> {
        self.base.join("api/chat").map(|u| u.to_string()).map_err(|e| InferenceError::InvalidRequest(e.to_string()))
    }

    /// The request body sent for `request` (public for tests and logs).
    #[must_use]
    pub fn request_body(&self, request: &GenerateRequest) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
        let s = &request.sampling;
        let mut options = json!({
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "num_predict": s.max_tokens,
            "num_ctx": self.context_size,
        });
        if s.top_k > 0 {
            options["top_k"] = json!(s.top_k);
        }
        if !s.stop.is_empty() {
            options["stop"] = json!(s.stop);
        }
        let mut body = json!({"model": self.model, "messages": messages, "stream": true, "options": options});
        if !request.tools.is_empty() {
            body["tools"] = tools_json(&request.tools);
        }
        // Only ask for thinking: `think: false` is refused by models without it.
        if s.thinking != Thinking::Off {
            body["think"] = json!(true);
        }
        body
    }
}

fn message_json(m: &ChatMessage) -> Value {
    let mut v = json!({"role": m.role.as_str(), "content": m.content});
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        v["tool_calls"] = Value::Array(m.tool_calls.iter().map(|c| json!({"function": {"name": c.name, "arguments": c.arguments}})).collect());
    }
    if let (Role::Tool, Some(name)) = (m.role, &m.name) {
        v["tool_name"] = json!(name);
    }
    v
}

impl Backend for OllamaBackend {
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(async move {
            let url = self.endpoint()?;
            let body = self.request_body(&request);
            let mut reply = StreamedReply::new(sink);
            let mut calls: Vec<ToolCall> = Vec::new();
            let finished = post_lines(&self.client, &url, None, &body, &cancel, |line| {
                let v = parse_json(&url, line)?;
                if let Some(err) = v.get("error").and_then(Value::as_str) {
                    return Err(InferenceError::Protocol { url: url.clone(), reason: err.to_string() });
                }
                let msg = &v["message"];
                reply.push_thinking(msg["thinking"].as_str().unwrap_or_default());
                reply.push_content(msg["content"].as_str().unwrap_or_default());
                if let Some(list) = msg["tool_calls"].as_array() {
                    for c in list {
                        let f = &c["function"];
                        let name = f["name"].as_str().unwrap_or_default().to_string();
                        let arguments = match &f["arguments"] {
                            Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
                            other => other.clone(),
                        };
                        let id = c["id"].as_str().map_or_else(new_call_id, str::to_string);
                        calls.push(ToolCall { id, name, arguments });
                    }
                }
                if v["done"].as_bool() == Some(true) {
                    reply.stop = match v["done_reason"].as_str() {
                        Some("length") => StopReason::MaxTokens,
                        _ => StopReason::EndOfTurn,
                    };
                    let n = |k: &str| v[k].as_u64().unwrap_or(0);
                    reply.usage.kv = KvStats {
                        prompt_tokens: n("prompt_eval_count") as u32,
                        decoded: n("prompt_eval_count") as u32,
                        prefill_ms: n("prompt_eval_duration") / 1_000_000,
                        decode_ms: n("eval_duration") / 1_000_000,
                        ..KvStats::default()
                    };
                    reply.usage.completion_tokens = n("eval_count") as u32;
                    return Ok(true);
                }
                Ok(false)
            })
            .await?;
            reply.finish(finished);
            let StreamedReply { raw, thinking, usage, stop, .. } = reply;
            Ok(assemble(raw, false, ToolCallFormat::Hermes, calls, Some(thinking), stop, usage))
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<u32>> {
        Box::pin(async move { Ok(estimate_request_tokens(messages, tools)) })
    }

    fn context_size(&self) -> u32 {
        self.context_size
    }

    fn model_info(&self) -> ModelInfo {
        model_info(&self.model, "ollama", self.context_size)
    }
}
