//! Scoring on an OpenAI-compatible server: the completions API with `echo`
//! and `logprobs` returns the log-probability of every prompt token
//! (llama-cpp-python's server, vLLM). The prompt is rendered here with the
//! model's chat template (given with [`OpenAiBackend::with_template`], or
//! read from llama-server's `/props`), the continuation appended, and the
//! tokens after the rendered prompt's end are the continuation's.
//!
//! Whether the server can is found once, on the first call, and kept: a
//! server without prompt log-probabilities (or whose template is unknown)
//! answers every later call with [`InferenceError::ScoringUnsupported`]
//! without a request.
//!
//! Finding out includes an alignment check, because a server can return
//! prompt log-probabilities that are not the probabilities of the prompt's
//! tokens: llama-cpp-python 0.3.36 gives each prompt token the probability
//! the model assigns it at the position *after* it (its logits row, not the
//! row before), which reads like data and means nothing. The check echoes a
//! counting sequence, which any language model continues: on an aligned
//! server the most likely token reported at each position is mostly that
//! position's own token; on a server one position off it is mostly the next
//! one. Such a server is refused, with that reason.

use std::sync::Arc;

use serde_json::{Value, json};

use super::OpenAiBackend;
use crate::backend::CancelToken;
use crate::error::{InferenceError, Result};
use crate::http::common::{http_err, parse_json};
use crate::template::{ChatTemplate, RenderOptions};
use crate::types::{ScoreRequest, Scored, TokenLogprob};

/// What is known of a server's scoring.
#[derive(Debug, Clone, Default)]
pub(super) enum Support {
    /// Not asked yet.
    #[default]
    Unknown,
    /// It returned prompt log-probabilities.
    Yes,
    /// It cannot, and why.
    No(String),
}

/// The byte offset in `s` of the character at `chars` (servers written in
/// Python count offsets in characters).
fn byte_at(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map_or(s.len(), |(b, _)| b)
}

/// The continuation's tokens in a completions reply for `full` (prompt plus
/// continuation), the prompt being its first `prompt_chars` characters.
pub(super) fn continuation_tokens(url: &str, v: &Value, full: &str, prompt_bytes: usize) -> Result<Vec<TokenLogprob>> {
    let bad = |reason: &str| InferenceError::Protocol { url: url.to_owned(), reason: reason.to_owned() };
    let lp = &v["choices"][0]["logprobs"];
    let (Some(tokens), Some(logprobs), Some(offsets)) = (lp["tokens"].as_array(), lp["token_logprobs"].as_array(), lp["text_offset"].as_array()) else {
        return Err(bad("no prompt log-probabilities (logprobs.tokens, token_logprobs, text_offset) in the reply"));
    };
    let tops = lp["top_logprobs"].as_array();
    let mut out = Vec::new();
    for (i, ((t, l), o)) in tokens.iter().zip(logprobs).zip(offsets).enumerate() {
        let (Some(text), Some(offset)) = (t.as_str(), o.as_u64()) else { return Err(bad("a token without its text or offset")) };
        let at = byte_at(full, offset as usize);
        if at < prompt_bytes {
            continue;
        }
        // The generated token (the reply must generate one) is past the text.
        if at >= full.len() {
            break;
        }
        let Some(logprob) = l.as_f64() else { return Err(bad("a continuation token without a log-probability")) };
        let top = tops.and_then(|t| t.get(i)).and_then(Value::as_object).and_then(|m| m.values().filter_map(Value::as_f64).reduce(f64::max));
        out.push(TokenLogprob { text: text.to_owned(), start: at - prompt_bytes, logprob, top_logprob: top.map(|t| t.max(logprob)) });
    }
    Ok(out)
}

/// The text the alignment check echoes.
const COUNTING: &str = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24";

/// Whether a reply's prompt log-probabilities belong to the positions they
/// are reported at (see the module docs): `Err` says why not.
pub(super) fn check_alignment(v: &Value) -> std::result::Result<(), String> {
    let lp = &v["choices"][0]["logprobs"];
    let (Some(tokens), Some(tops)) = (lp["tokens"].as_array(), lp["top_logprobs"].as_array()) else {
        return Err("no tokens and top log-probabilities to check them against".into());
    };
    let tokens: Vec<&str> = tokens.iter().map(|t| t.as_str().unwrap_or_default()).collect();
    let best: Vec<Option<&str>> = tops
        .iter()
        .map(|t| {
            t.as_object().and_then(|m| m.iter().filter_map(|(k, v)| v.as_f64().map(|x| (k.as_str(), x))).max_by(|a, b| a.1.total_cmp(&b.1)).map(|(k, _)| k))
        })
        .collect();
    let (mut aligned, mut shifted) = (0, 0);
    for (i, b) in best.iter().enumerate() {
        let Some(b) = b else { continue };
        aligned += usize::from(tokens.get(i) == Some(b));
        shifted += usize::from(tokens.get(i + 1) == Some(b));
    }
    if shifted > aligned {
        return Err(format!(
            "its prompt log-probabilities are one position off (on a counting sequence the top token at {shifted} positions is the next token, at {aligned} the token itself): each token is given the probability of the token after it"
        ));
    }
    if aligned * 3 < tokens.len() {
        return Err(format!(
            "its prompt log-probabilities could not be verified (the top token matched {aligned} of {} positions of a counting sequence)",
            tokens.len()
        ));
    }
    Ok(())
}

impl OpenAiBackend {
    /// The chat template prompts are rendered with for scoring (the one the
    /// server's model uses); without it, scoring asks llama-server's `/props`.
    #[must_use]
    pub fn with_template(mut self, template: ChatTemplate) -> Self {
        self.template = Some(Arc::new(template));
        self
    }

    fn unsupported(&self, reason: String) -> InferenceError {
        InferenceError::ScoringUnsupported { backend: "openai".into(), reason }
    }

    /// The template: the one given, else llama-server's `/props`.
    async fn scoring_template(&self) -> Result<Arc<ChatTemplate>> {
        if let Some(t) = &self.template {
            return Ok(t.clone());
        }
        let url = format!("{}/props", self.root);
        let mut req = self.client.get(&url);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let no_template = || self.unsupported(format!("the server does not say its chat template ({url} has none), and none was given"));
        let resp = req.send().await.map_err(|e| http_err(&url, &e))?;
        if resp.status().as_u16() != 200 {
            return Err(no_template());
        }
        let text = resp.text().await.map_err(|e| http_err(&url, &e))?;
        let v = parse_json(&url, &text)?;
        let Some(t) = v["chat_template"].as_str().filter(|t| !t.trim().is_empty()) else { return Err(no_template()) };
        let bos = v["bos_token"].as_str().unwrap_or_default();
        let eos = v["eos_token"].as_str().unwrap_or_default();
        Ok(Arc::new(ChatTemplate::for_model(Some(t), None, bos, eos)?))
    }

    /// One completions request with the prompt echoed and its log-probabilities.
    async fn echo_logprobs(&self, full: &str) -> Result<(String, std::result::Result<Value, (u16, String)>)> {
        let url = format!("{}/v1/completions", self.root);
        let body = json!({"model": self.model, "prompt": full, "max_tokens": 1, "temperature": 0.0, "top_k": 1, "echo": true, "logprobs": 1});
        let mut req = self.client.post(&url).json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| http_err(&url, &e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| http_err(&url, &e))?;
        if status != 200 {
            return Ok((url, Err((status, text.chars().take(300).collect()))));
        }
        let v = parse_json(&url, &text)?;
        Ok((url, Ok(v)))
    }

    /// The first call's check: prompt log-probabilities, aligned. Decides
    /// [`Support`] for good unless the server could not be reached.
    async fn check_server(&self) -> Result<()> {
        let decide = |reason: Option<String>| {
            if let Ok(mut s) = self.scoring.lock() {
                *s = reason.clone().map_or(Support::Yes, Support::No);
            }
            reason.map_or(Ok(()), |r| Err(self.unsupported(r)))
        };
        let (url, reply) = self.echo_logprobs(COUNTING).await?;
        match reply {
            Err((status, body)) if status == 429 || status >= 500 && body.is_empty() => Err(InferenceError::HttpStatus { url, status, body }),
            Err((status, body)) => decide(Some(format!("{url} answered {status} to a request for prompt log-probabilities: {body}"))),
            Ok(v) => decide(check_alignment(&v).err().map(|e| format!("{url}: {e}"))),
        }
    }

    /// [`Backend::score`](crate::Backend::score) on this server.
    pub(super) async fn score_on_server(&self, request: ScoreRequest, cancel: CancelToken) -> Result<Vec<Scored>> {
        let known = self.scoring.lock().map(|s| s.clone()).unwrap_or_default();
        if let Support::No(reason) = known {
            return Err(self.unsupported(reason));
        }
        let template = match self.scoring_template().await {
            Ok(t) => t,
            Err(e @ InferenceError::ScoringUnsupported { .. }) => {
                if let (InferenceError::ScoringUnsupported { reason, .. }, Ok(mut s)) = (&e, self.scoring.lock()) {
                    *s = Support::No(reason.clone());
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if matches!(known, Support::Unknown) {
            self.check_server().await?;
        }
        let prompt = template.render(&request.messages, &request.tools, RenderOptions { add_generation_prompt: true, thinking: false })?.text;
        let mut out = Vec::with_capacity(request.continuations.len());
        for c in &request.continuations {
            if cancel.is_cancelled() {
                return Err(InferenceError::InvalidRequest("scoring cancelled".into()));
            }
            let full = format!("{prompt}{c}");
            let (url, reply) = self.echo_logprobs(&full).await?;
            // Support was decided by `check_server`: a failure here is this
            // request's (a prompt over the server's window), not the server's.
            let v = reply.map_err(|(status, body)| InferenceError::HttpStatus { url: url.clone(), status, body })?;
            let tokens = continuation_tokens(&url, &v, &full, prompt.len())?;
            let prompt_tokens = v["usage"]["prompt_tokens"].as_u64().map_or(0, |n| n as u32).saturating_sub(tokens.len() as u32);
            out.push(Scored { decoded: prompt_tokens + tokens.len() as u32, tokens, prompt_tokens });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn continuation_tokens_start_at_the_prompt_end() {
        let full = "<p>é hello world";
        let prompt_bytes = "<p>é ".len();
        // Offsets in characters, as Python servers count them: "é" is one.
        let v = json!({"choices": [{"logprobs": {
            "tokens": ["<p>", "é", " ", "hello", " world", "!"],
            "token_logprobs": [null, -1.0, -0.5, -2.0, -0.25, -3.0],
            "text_offset": [0, 3, 4, 5, 10, 16],
            "top_logprobs": [null, {"é": -1.0}, {" ": -0.5}, {"hi": -1.5, "hello": -2.0}, {" world": -0.25}, {"!": -3.0}]
        }}]});
        let t = continuation_tokens("u", &v, full, prompt_bytes).unwrap();
        assert_eq!(t.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(), ["hello", " world"]);
        assert_eq!((t[0].start, t[1].start), (0, 5));
        assert_eq!((t[0].logprob, t[0].top_logprob), (-2.0, Some(-1.5)));
        assert!(continuation_tokens("u", &json!({"choices": [{"text": "x"}]}), full, prompt_bytes).is_err());
    }

    fn echo(tokens: &[&str], tops: &[&str]) -> Value {
        let top: Vec<Value> = tops.iter().map(|t| json!({(*t): -0.1})).collect();
        json!({"choices": [{"logprobs": {"tokens": tokens, "top_logprobs": top}}]})
    }

    #[test]
    fn alignment_is_checked_on_the_top_tokens() {
        let tokens = ["1", ",", " 2", ",", " 3", ",", " 4"];
        // Aligned: the top token at each position is (mostly) the token there.
        assert!(check_alignment(&echo(&tokens, &["1", ",", " 2", ",", " 3", ",", " 5"])).is_ok());
        // One position off: the top token is the next one.
        let e = check_alignment(&echo(&tokens, &[",", " 2", ",", " 3", ",", " 4", ","])).unwrap_err();
        assert!(e.contains("one position off"), "{e}");
        // Nothing matches: not verified.
        assert!(check_alignment(&echo(&tokens, &["x"; 7])).unwrap_err().contains("could not be verified"));
    }
}
