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
//! - its template (the GGUF's, SmolLM2's ChatML) renders only `content`: the
//!   `tools` list and the `tool_calls` of assistant turns never reach the
//!   model, which then answered the loopback world's question without a call.
//!   [`OpenAiBackend::with_tools_in_text`] puts tool turns into the text as
//!   the in-process backend does for such templates (tool instructions in the
//!   system prompt, calls as fenced JSON, results as user turns) and reads
//!   calls back from the text;
//! - a prompt over its context fails *after* the `200 OK`: the stream ends
//!   with no chunk, no `finish_reason` and no `[DONE]` — that is an error
//!   here, not an empty answer;
//! - the four-bytes-a-token estimate said 682 tokens for a scenario that
//!   SmolLM2's tokenizer makes 1145 (numbers, ids and timestamps tokenise
//!   densely), so a history "within budget" could overflow the server. Token
//!   counts therefore ask the server's tokenizer when it has one
//!   (llama-cpp-python's `/extras/tokenize/count`, llama-server's
//!   `/tokenize`) for the messages' text, plus [`OpenAiBackend::FRAMING_PER_MESSAGE`] and
//!   [`OpenAiBackend::FRAMING_REPLY`] for the template's role markers (the template itself
//!   stays on the server); without one, the estimate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::common::{StreamedReply, client, estimate_request_tokens, http_err, model_info, parse_json, post_lines, tools_json};
use crate::backend::{Backend, CancelToken, TokenSink};
use crate::error::{InferenceError, Result};
use crate::reply::assemble;
use crate::template::fallback_tool_instructions;
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
    /// The server root (no `/v1`), where tokenizer endpoints live.
    root: String,
    /// Which tokenizer endpoint the server has ([`TOKENIZER_UNKNOWN`] until asked).
    tokenizer: Arc<AtomicU8>,
    /// Tool turns written into the text (see [`OpenAiBackend::with_tools_in_text`]).
    tools_in_text: bool,
    /// The chat template scoring renders prompts with ([`OpenAiBackend::with_template`]).
    template: Option<Arc<crate::template::ChatTemplate>>,
    /// Whether the server returns prompt log-probabilities, once asked.
    scoring: Arc<std::sync::Mutex<score::Support>>,
}

mod score;

const TOKENIZER_UNKNOWN: u8 = 0;
const TOKENIZER_NONE: u8 = 1;
/// llama-cpp-python: `POST /extras/tokenize/count {"input"}` → `{"count"}`.
const TOKENIZER_EXTRAS_COUNT: u8 = 2;
/// llama-server: `POST /tokenize {"content"}` → `{"tokens": [...]}`.
const TOKENIZER_TOKENIZE: u8 = 3;

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
    /// Tokens a chat template adds around one message (`<|im_start|>role\n … <|im_end|>\n`
    /// is 5 with SmolLM2's ChatML), added to the server's count of the
    /// messages' text. Measured on llama-cpp-python with SmolLM2 over
    /// `aggregation-short` (14 messages): 682 counted against the 676 prompt
    /// tokens the server reported, where the four-bytes estimate said 470.
    pub const FRAMING_PER_MESSAGE: u32 = 5;
    /// Tokens of the generation prompt (`<|im_start|>assistant\n`).
    pub const FRAMING_REPLY: u32 = 3;

    /// `base` like `http://127.0.0.1:8080` or `http://127.0.0.1:8080/v1`.
    ///
    /// # Errors
    /// [`InferenceError::InvalidRequest`] for a bad URL.
    pub fn new(base: &str, model: impl Into<String>, api_key: Option<String>, context_size: u32) -> Result<Self> {
        let mut u = url::Url::parse(base).map_err(|e| InferenceError::InvalidRequest(format!("bad server URL {base:?}: {e}")))?;
        let path = u.path().trim_end_matches('/').to_string();
        let root_path = path.strip_suffix("/v1").unwrap_or(&path).to_string();
        let path = format!("{root_path}/v1/chat/completions");
        let mut root = u.clone();
        root.set_path(&root_path);
        u.set_path(&path);
        Ok(Self {
            client: client()?,
            url: u.to_string(),
            model: model.into(),
            api_key,
            context_size,
            llama_sampler_fields: Arc::new(AtomicBool::new(true)),
            root: root.as_str().trim_end_matches('/').to_string(),
            tokenizer: Arc::new(AtomicU8::new(TOKENIZER_UNKNOWN)),
            tools_in_text: false,
            template: None,
            scoring: Arc::default(),
        })
    }

    /// For a server whose chat template cannot render tools (it shows the
    /// model only each message's `content`): send no `tools` field and no
    /// `tool_calls`; instead describe the tools in the system prompt, write
    /// past calls as fenced JSON in the assistant's text and tool results as
    /// user turns (`Tool result (NAME):`), and parse calls from the reply's
    /// text — the prompt the in-process backend renders for such a template.
    #[must_use]
    pub fn with_tools_in_text(mut self, on: bool) -> Self {
        self.tools_in_text = on;
        self
    }

    /// The messages as sent: as they are, or with tool turns in the text.
    fn wire_messages<'m>(&self, messages: &'m [ChatMessage], tools: &[ToolSpec]) -> std::borrow::Cow<'m, [ChatMessage]> {
        if !self.tools_in_text {
            return std::borrow::Cow::Borrowed(messages);
        }
        let mut out = Vec::with_capacity(messages.len() + 1);
        if !tools.is_empty() && messages.first().is_none_or(|m| m.role != Role::System) {
            out.push(ChatMessage::system(fallback_tool_instructions(tools)));
        }
        for (i, m) in messages.iter().enumerate() {
            out.push(match m.role {
                Role::System if i == 0 && !tools.is_empty() => {
                    ChatMessage::system(format!("{}\n\n{}", m.content.trim_end(), fallback_tool_instructions(tools)))
                }
                Role::Assistant if !m.tool_calls.is_empty() => {
                    let calls: Vec<String> = m.tool_calls.iter().map(|c| ToolCallFormat::FencedJson.format_call(c)).collect();
                    let text = if m.content.trim().is_empty() { calls.join("\n") } else { format!("{}\n{}", m.content.trim_end(), calls.join("\n")) };
                    ChatMessage::assistant(text)
                }
                Role::Tool => ChatMessage::user(format!("Tool result ({}):\n{}", m.name.as_deref().unwrap_or("tool"), m.content)),
                _ => m.clone(),
            });
        }
        std::borrow::Cow::Owned(out)
    }

    /// Whether token counts come from the server's tokenizer (`Some(true)`),
    /// from the estimate (`Some(false)`), or are not known yet (`None`: no
    /// count was asked for).
    #[must_use]
    pub fn counts_with_server_tokenizer(&self) -> Option<bool> {
        match self.tokenizer.load(Ordering::Relaxed) {
            TOKENIZER_UNKNOWN => None,
            TOKENIZER_NONE => Some(false),
            _ => Some(true),
        }
    }

    /// The tokens of `text` by the server's tokenizer with endpoint `kind`:
    /// `Ok(None)` when the server has no such endpoint (404/405/501).
    async fn tokenize_with(&self, kind: u8, text: &str) -> Result<Option<u32>> {
        let (url, body) = match kind {
            TOKENIZER_EXTRAS_COUNT => (format!("{}/extras/tokenize/count", self.root), json!({"input": text, "model": self.model})),
            _ => (format!("{}/tokenize", self.root), json!({"content": text, "add_special": false})),
        };
        let mut req = self.client.post(&url).json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| http_err(&url, &e))?;
        let status = resp.status().as_u16();
        if matches!(status, 404 | 405 | 501) {
            return Ok(None);
        }
        let text = resp.text().await.map_err(|e| http_err(&url, &e))?;
        if status != 200 {
            return Err(InferenceError::HttpStatus { url, status, body: text.chars().take(500).collect() });
        }
        let v = parse_json(&url, &text)?;
        let n = match kind {
            TOKENIZER_EXTRAS_COUNT => v["count"].as_u64(),
            _ => v["tokens"].as_array().map(|t| t.len() as u64),
        };
        n.map(|n| Some(u32::try_from(n).unwrap_or(u32::MAX)))
            .ok_or_else(|| InferenceError::Protocol { url, reason: format!("no token count in the tokenizer's reply: {text:.200}") })
    }

    /// The text of a request without the template's markers: every
    /// message's content and tool calls, one line each, and the tools.
    fn request_text(messages: &[ChatMessage], tools: &[ToolSpec]) -> String {
        let mut lines: Vec<String> = Vec::with_capacity(messages.len() + 1);
        for m in messages {
            let mut line = m.content.clone();
            for c in &m.tool_calls {
                line.push_str(&json!({"name": c.name, "arguments": c.arguments}).to_string());
            }
            lines.push(line);
        }
        if !tools.is_empty() {
            lines.push(tools_json(tools).to_string());
        }
        lines.join("\n")
    }

    /// Counts with the server's tokenizer, finding its endpoint on the first
    /// call; the estimate when it has none. A server that cannot be reached
    /// gives the estimate without deciding (it is asked again next time).
    async fn count_request(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> Result<u32> {
        let wire = self.wire_messages(messages, tools);
        let (messages, tools) = if self.tools_in_text { (wire.as_ref(), &[][..]) } else { (messages, tools) };
        let text = Self::request_text(messages, tools);
        let framing = Self::FRAMING_PER_MESSAGE * u32::try_from(messages.len()).unwrap_or(u32::MAX) + Self::FRAMING_REPLY;
        let known = self.tokenizer.load(Ordering::Relaxed);
        let kinds: &[u8] = match known {
            TOKENIZER_NONE => return Ok(estimate_request_tokens(messages, tools)),
            TOKENIZER_UNKNOWN => &[TOKENIZER_EXTRAS_COUNT, TOKENIZER_TOKENIZE],
            TOKENIZER_EXTRAS_COUNT => &[TOKENIZER_EXTRAS_COUNT],
            _ => &[TOKENIZER_TOKENIZE],
        };
        for &kind in kinds {
            match self.tokenize_with(kind, &text).await {
                Ok(Some(n)) => {
                    self.tokenizer.store(kind, Ordering::Relaxed);
                    return Ok(n.saturating_add(framing));
                }
                Ok(None) => {}
                Err(InferenceError::Http { .. }) => return Ok(estimate_request_tokens(messages, tools)),
                Err(e) if known == TOKENIZER_UNKNOWN => {
                    tracing::debug!("tokenizer endpoint probe failed: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        if known == TOKENIZER_UNKNOWN {
            tracing::warn!("{} has no tokenizer endpoint: token counts are estimated (about 4 bytes a token)", self.root);
            self.tokenizer.store(TOKENIZER_NONE, Ordering::Relaxed);
        }
        Ok(estimate_request_tokens(messages, tools))
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
        let messages: Vec<Value> = self.wire_messages(&request.messages, &request.tools).iter().map(message_json).collect();
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
        if !request.tools.is_empty() && !self.tools_in_text {
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
            m.tool_calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}})).collect(),
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

    fn score<'a>(&'a self, request: crate::types::ScoreRequest, cancel: CancelToken) -> BoxFuture<'a, Result<Vec<crate::types::Scored>>> {
        Box::pin(self.score_on_server(request, cancel))
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, Result<u32>> {
        Box::pin(self.count_request(messages, tools))
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
                let arguments = if p.arguments.trim().is_empty() { Ok(json!({})) } else { serde_json::from_str(&p.arguments) };
                match arguments {
                    Ok(arguments) => calls.push(ToolCall { id: if p.id.is_empty() { new_call_id() } else { p.id }, name: p.name, arguments }),
                    Err(e) => {
                        parse_error =
                            Some(InferenceError::ToolCallParse { format: "openai", reason: format!("arguments of {} are not JSON: {e}", p.name) }.to_string())
                    }
                }
            }
            let format = if self.tools_in_text { ToolCallFormat::FencedJson } else { ToolCallFormat::Hermes };
            let mut g = assemble(raw, false, format, calls, Some(thinking), stop, usage);
            if parse_error.is_some() {
                g.tool_parse_error = parse_error;
            }
            Ok(g)
        }
    }
}
