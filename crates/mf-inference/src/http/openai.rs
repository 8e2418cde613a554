//! OpenAI-compatible `/v1/chat/completions` (SSE streaming): llama-server,
//! llama-cpp-python, vLLM, LM Studio.
//!
//! What a real server (llama-cpp-python 0.3.36's `llama_cpp.server`) did that
//! the documented format does not say, and what follows here:
//! - it samples with its own defaults for every field not sent (top-k 40,
//!   min-p 0.05, repeat penalty 1.1), so [`Sampling`](crate::Sampling) would
//!   not mean what it means in-process: the llama.cpp sampler fields are sent
//!   explicitly as no-ops, and dropped (for good, on this backend) when a
//!   server refuses them with 400/422;
//! - it ignores `stream_options.include_usage` and streams no usage: the
//!   completion tokens are then counted one per streamed text chunk (one
//!   token per chunk there, except where it holds text back at a stop-string
//!   prefix or a split UTF-8 character), the prompt tokens stay 0 (unknown);
//! - a prompt over its context fails *after* the `200 OK`: the stream ends
//!   with no chunk, no `finish_reason` and no `[DONE]` — that is an error
//!   here, not an empty answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::common::{StreamedReply, client, estimate_request_tokens, model_info, parse_json, post_lines, tools_json};
use crate::backend::{Backend, CancelToken, TokenSink};
use crate::error::{InferenceError, Result};
use crate::reply::assemble;
use crate::tool_parse::{ToolCallFormat, new_call_id};
use crate::types::{ChatMessage, GenerateRequest, Generation, KvStats, ModelInfo, Role, StopReason, ToolCall, ToolSpec};

/// A model behind an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiBackend {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    context_size: u32,
    /// Cleared once the server refused the llama.cpp sampler fields.
    llama_sampler_fields: Arc<AtomicBool>,
}

/// The llama.cpp sampler fields sent as no-ops (besides `top_k`), so a
/// llama.cpp server's defaults (min-p 0.05, repeat penalty 1.1) do not apply.
const LLAMA_NO_OPS: [(&str, f32); 2] = [("min_p", 0.0), ("repeat_penalty", 1.0)];

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl OpenAiBackend {
    /// `base` like `http://127.0.0.1:8080` or `http://127.0.0.1:8080/v1`.
    ///
    /// # Errors
    /// [`InferenceError::InvalidRequest`] for a bad URL.
    pub fn new(base: &str, model: impl Into<String>, api_key: Option<String>, context_size: u32) -> Result<Self> {
        let mut u = url::Url::parse(base).map_err(|e| InferenceError::InvalidRequest(format!("bad server URL {base:?}: {e}")))?;
        let path = u.path().trim_end_matches('/').to_string();
        let path = if path.ends_with("/v1") { format!("{path}/chat/completions") } else { format!("{path}/v1/chat/completions") };
        u.set_path(&path);
        Ok(Self {
            client: client()?,
            url: u.to_string(),
            model: model.into(),
            api_key,
            context_size,
            llama_sampler_fields: Arc::new(AtomicBool::new(true)),
        })
    }

    /// Whether requests still carry the llama.cpp sampler fields (`top_k`
    /// always, `min_p`, `repeat_penalty`); false after a server refused them.
    #[must_use]
    pub fn sends_llama_sampler_fields(&self) -> bool {
        self.llama_sampler_fields.load(Ordering::Relaxed)
    }

    /// The request body sent for `request`.
    #[must_use]
    pub fn request_body(&self, request: &GenerateRequest) -> Value {
        let s = &request.sampling;
        let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
        });
        if self.sends_llama_sampler_fields() {
            // 0 disables top-k in llama.cpp, as in-process.
            body["top_k"] = json!(s.top_k);
            for (k, v) in LLAMA_NO_OPS {
                body[k] = json!(v);
            }
        } else if s.top_k > 0 {
            body["top_k"] = json!(s.top_k);
        }
        if !s.stop.is_empty() {
            body["stop"] = json!(s.stop);
        }
        if !request.tools.is_empty() {
            body["tools"] = tools_json(&request.tools);
        }
        body
    }
}

/// Whether a refused request names one of the llama.cpp sampler fields
/// (OpenAI: 400 "Unrecognized request argument supplied: top_k"; pydantic
/// servers: 422 naming the field).
fn refuses_llama_fields(e: &InferenceError) -> bool {
    matches!(e, InferenceError::HttpStatus { status: 400 | 422, body, .. }
        if ["top_k", "min_p", "repeat_penalty"].iter().any(|f| body.contains(f)))
}

fn message_json(m: &ChatMessage) -> Value {
    let mut v = json!({"role": m.role.as_str(), "content": m.content});
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        v["tool_calls"] = Value::Array(
            m.tool_calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
                .collect(),
        );
    }
    if let (Role::Tool, Some(id)) = (m.role, &m.tool_call_id) {
        v["tool_call_id"] = json!(id);
    }
    v
}

impl Backend for OpenAiBackend {
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, cancel: CancelToken) -> BoxFuture<'a, Result<Generation>> {
        Box::pin(async move {
            match self.stream(&request, sink.clone(), &cancel).await {
                Err(e) if self.sends_llama_sampler_fields() && refuses_llama_fields(&e) => {
                    tracing::warn!("{} refused the llama.cpp sampler fields; sending standard OpenAI fields only from now on: {e}", self.url);
                    self.llama_sampler_fields.store(false, Ordering::Relaxed);
                    self.stream(&request, sink, &cancel).await
                }
                r => r,
            }
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<u32>> {
        Box::pin(async move { Ok(estimate_request_tokens(messages, tools)) })
    }

    fn context_size(&self) -> u32 {
        self.context_size
    }

    fn model_info(&self) -> ModelInfo {
        model_info(&self.model, "openai", self.context_size)
    }
}

impl OpenAiBackend {
    /// One streamed request.
    async fn stream(&self, request: &GenerateRequest, sink: Option<TokenSink>, cancel: &CancelToken) -> Result<Generation> {
        {
            let url = self.url.clone();
            let body = self.request_body(request);
            let mut reply = StreamedReply::new(sink);
            let mut ended = false;
            let mut chunks = 0u32;
            let mut usage_seen = false;
            let mut partial: Vec<PartialCall> = Vec::new();
            let mut timings: Option<KvStats> = None;
            let finished = post_lines(&self.client, &url, self.api_key.as_deref(), &body, cancel, |line| {
                let Some(data) = line.strip_prefix("data:") else {
                    return Ok(false); // comments, `event:` lines
                };
                let data = data.trim();
                if data == "[DONE]" {
                    ended = true;
                    return Ok(true);
                }
                let v = parse_json(&url, data)?;
                if let Some(err) = v.get("error") {
                    return Err(InferenceError::Protocol { url: url.clone(), reason: err.to_string() });
                }
                if let Some(choice) = v["choices"].get(0) {
                    let delta = &choice["delta"];
                    for key in ["reasoning_content", "reasoning"] {
                        reply.push_thinking(delta[key].as_str().unwrap_or_default());
                    }
                    let text = delta["content"].as_str().unwrap_or_default();
                    if !text.is_empty() || ["reasoning_content", "reasoning"].iter().any(|k| delta[k].as_str().is_some_and(|t| !t.is_empty())) {
                        chunks += 1;
                    }
                    reply.push_content(text);
                    if let Some(list) = delta["tool_calls"].as_array() {
                        for c in list {
                            let i = c["index"].as_u64().unwrap_or(partial.len() as u64) as usize;
                            while partial.len() <= i {
                                partial.push(PartialCall::default());
                            }
                            let p = &mut partial[i];
                            if let Some(id) = c["id"].as_str() {
                                p.id = id.to_string();
                            }
                            if let Some(n) = c["function"]["name"].as_str() {
                                p.name.push_str(n);
                            }
                            if let Some(a) = c["function"]["arguments"].as_str() {
                                p.arguments.push_str(a);
                            }
                        }
                    }
                    match choice["finish_reason"].as_str() {
                        Some("length") => reply.stop = StopReason::MaxTokens,
                        Some("tool_calls") => reply.stop = StopReason::ToolCall,
                        _ => {}
                    }
                    if choice["finish_reason"].is_string() {
                        ended = true;
                    }
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    let n = |x: &Value| x.as_u64().unwrap_or(0) as u32;
                    let prompt = n(&u["prompt_tokens"]);
                    let cached = n(&u["prompt_tokens_details"]["cached_tokens"]);
                    reply.usage.kv.prompt_tokens = prompt;
                    reply.usage.kv.reused = cached;
                    reply.usage.kv.decoded = prompt.saturating_sub(cached);
                    reply.usage.completion_tokens = n(&u["completion_tokens"]);
                    usage_seen = true;
                }
                // llama-server's own figures, when present, are more precise.
                if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
                    let n = |x: &Value| x.as_f64().unwrap_or(0.0);
                    let reused = n(&t["cache_n"]) as u32;
                    let decoded = n(&t["prompt_n"]) as u32;
                    timings = Some(KvStats {
                        prompt_tokens: reused + decoded,
                        reused,
                        decoded,
                        prefill_ms: n(&t["prompt_ms"]) as u64,
                        decode_ms: n(&t["predicted_ms"]) as u64,
                        ..KvStats::default()
                    });
                }
                Ok(false)
            })
            .await?;
            if finished && !ended {
                return Err(InferenceError::Protocol {
                    url,
                    reason: "the stream ended without a finish_reason or [DONE]: the server failed after answering 200 \
                             (a prompt over its context does this in llama-cpp-python; see the server's log)"
                        .into(),
                });
            }
            if !usage_seen {
                reply.usage.completion_tokens = chunks;
            }
            reply.finish(finished);
            if let Some(t) = timings {
                reply.usage.kv = t;
            }
            let StreamedReply { raw, thinking, usage, stop, .. } = reply;
            let mut calls = Vec::new();
            let mut parse_error = None;
            for p in partial {
                let arguments = if p.arguments.trim().is_empty() {
                    Ok(json!({}))
                } else {
                    serde_json::from_str(&p.arguments)
                };
                match arguments {
                    Ok(arguments) => calls.push(ToolCall { id: if p.id.is_empty() { new_call_id() } else { p.id }, name: p.name, arguments }),
                    Err(e) => {
                        parse_error = Some(
                            InferenceError::ToolCallParse { format: "openai", reason: format!("arguments of {} are not JSON: {e}", p.name) }.to_string(),
                        )
                    }
                }
            }
            let mut g = assemble(raw, false, ToolCallFormat::Hermes, calls, Some(thinking), stop, usage);
            if parse_error.is_some() {
                g.tool_parse_error = parse_error;
            }
            Ok(g)
        }
    }
}
