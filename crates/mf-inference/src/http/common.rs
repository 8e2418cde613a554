//! What both HTTP backends share: the client, line-wise streaming, estimates.

use futures::StreamExt;

use crate::backend::CancelToken;
use crate::error::{InferenceError, Result};
use crate::types::ChatMessage;

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
    let bytes: usize = messages
        .iter()
        .map(|m| m.content.len() + m.tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum::<usize>())
        .sum();
    ((bytes + tools_json_len).div_ceil(4) + 4 * messages.len()) as u32
}
