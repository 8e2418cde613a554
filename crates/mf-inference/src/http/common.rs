//! What both HTTP backends share: the client, line-wise streaming, the
//! reply being assembled from the stream, the tool list, model info and
//! token estimates. Each backend keeps only its wire format.

use futures::StreamExt;
use serde_json::{Value, json};

use crate::backend::{CancelToken, TokenSink};
use crate::error::{InferenceError, Result};
use crate::thinking::ThinkStream;
use crate::types::{ChatMessage, ModelInfo, StopReason, StreamEvent, ToolSpec, Usage};

pub(crate) fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| InferenceError::Http { url: String::new(), reason: e.to_string() })
}

pub(crate) fn http_err(url: &str, e: &reqwest::Error) -> InferenceError {
    InferenceError::Http { url: url.to_string(), reason: e.to_string() }
}

/// Posts `body` and calls `on_line` for every line of the streamed reply until
/// it returns `true` (done), the stream ends, or `cancel` is set (returns `false`).
pub(crate) async fn post_lines(
    client: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    body: &serde_json::Value,
    cancel: &CancelToken,
    mut on_line: impl FnMut(&str) -> Result<bool>,
) -> Result<bool> {
    let mut req = client.post(url).json(body);
    if let Some(key) = bearer {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.map_err(|e| http_err(url, &e))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let body: String = text.chars().take(500).collect();
        return Err(InferenceError::HttpStatus { url: url.to_string(), status: status.as_u16(), body });
    }
    let mut stream = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        if cancel.is_cancelled() {
            return Ok(false);
        }
        let chunk = chunk.map_err(|e| http_err(url, &e))?;
        buf.extend_from_slice(&chunk);
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            if !line.is_empty() && on_line(line)? {
                return Ok(true);
            }
        }
    }
    let rest = String::from_utf8_lossy(&buf);
    let rest = rest.trim();
    if !rest.is_empty() {
        return on_line(rest);
    }
    Ok(!cancel.is_cancelled())
}

/// A rough token estimate for servers without a tokenizer endpoint: about four
/// bytes a token plus a few tokens of framing per message. Documented as an
/// estimate; the server's own `prompt_tokens` in each reply is exact.
pub(crate) fn estimate_tokens(messages: &[ChatMessage], tools_json_len: usize) -> u32 {
    let bytes: usize =
        messages.iter().map(|m| m.content.len() + m.tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum::<usize>()).sum();
    ((bytes + tools_json_len).div_ceil(4) + 4 * messages.len()) as u32
}

/// `tools` in the OpenAI function format, which Ollama accepts too.
pub(crate) fn tools_json(tools: &[ToolSpec]) -> Value {
    Value::Array(
        tools.iter().map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})).collect(),
    )
}

/// [`estimate_tokens`] for a request with these tools.
pub(crate) fn estimate_request_tokens(messages: &[ChatMessage], tools: &[ToolSpec]) -> u32 {
    estimate_tokens(messages, tools_json(tools).to_string().len())
}

/// What an HTTP backend knows about its model: the name and the context it
/// was given (the server does not report architecture or size).
pub(crate) fn model_info(model: &str, backend: &str, context_size: u32) -> ModelInfo {
    ModelInfo {
        name: model.to_string(),
        backend: backend.into(),
        architecture: None,
        context_size,
        context_train: None,
        parameters: None,
        tool_format: Some("native".into()),
    }
}

/// One streamed line as JSON, or a protocol error naming the server.
pub(crate) fn parse_json(url: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| InferenceError::Protocol { url: url.to_string(), reason: format!("not JSON ({e}): {text:.200}") })
}

/// The reply as it streams in: visible text (with `<think>` blocks split out
/// by [`ThinkStream`]), separate reasoning text, usage and stop reason; every
/// piece is forwarded to the token sink as it arrives.
pub(crate) struct StreamedReply {
    pub(crate) raw: String,
    pub(crate) thinking: String,
    pub(crate) usage: Usage,
    pub(crate) stop: StopReason,
    think: ThinkStream,
    sink: Option<TokenSink>,
}

impl StreamedReply {
    pub(crate) fn new(sink: Option<TokenSink>) -> Self {
        Self { raw: String::new(), thinking: String::new(), usage: Usage::default(), stop: StopReason::EndOfTurn, think: ThinkStream::new(false), sink }
    }

    fn send(&self, e: StreamEvent) {
        if let Some(s) = &self.sink {
            let _ = s.send(e);
        }
    }

    /// Reasoning the server reports in its own field (empty pieces ignored).
    pub(crate) fn push_thinking(&mut self, t: &str) {
        if !t.is_empty() {
            self.thinking.push_str(t);
            self.send(StreamEvent::Thinking(t.to_string()));
        }
    }

    /// Message content (empty pieces ignored).
    pub(crate) fn push_content(&mut self, t: &str) {
        if !t.is_empty() {
            self.raw.push_str(t);
            for e in self.think.push(t) {
                self.send(e);
            }
        }
    }

    /// Flush the think splitter; a stream that did not finish was cancelled.
    pub(crate) fn finish(&mut self, finished: bool) {
        for e in self.think.finish() {
            self.send(e);
        }
        if !finished {
            self.stop = StopReason::Cancelled;
        }
    }
}
