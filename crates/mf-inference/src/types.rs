//! The chat vocabulary of this crate: messages, tools, sampling, replies.
//!
//! These types are deliberately this crate's own: the agent maps its messages
//! to them, so nothing here knows about zones, strategies or actions.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person (or the agent speaking for them).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

impl Role {
    /// The role's name as chat templates expect it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A tool call the model made (or that is replayed in the history).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// An id that ties the call to its result; generated when the model gave none.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON value (normally an object).
    pub arguments: serde_json::Value,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text (may be empty for an assistant turn that only calls tools).
    pub content: String,
    /// Tool calls made in this (assistant) message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool result: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None, name: None }
    }
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }
    /// An assistant message that calls tools.
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self { tool_calls: calls, ..Self::plain(Role::Assistant, content) }
    }
    /// The result of the tool call `call_id` of tool `name`.
    pub fn tool_result(call_id: impl Into<String>, name: impl Into<String>, content: impl Into<String>) -> Self {
        Self { tool_call_id: Some(call_id.into()), name: Some(name.into()), ..Self::plain(Role::Tool, content) }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON schema of its arguments.
    pub parameters: serde_json::Value,
}

/// Whether the model may think before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "tokens")]
pub enum Thinking {
    /// No thinking block (templates that support it are told so).
    #[default]
    Off,
    /// Thinking allowed, bounded by a share of `max_tokens` so an answer remains.
    On,
    /// Thinking allowed up to this many tokens, then the block is closed.
    Budget(u32),
}

/// How to pick tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0 means greedy.
    pub temperature: f32,
    /// Nucleus sampling; 1.0 disables it.
    pub top_p: f32,
    /// Top-k; 0 disables it.
    pub top_k: u32,
    /// Seed for the random sampler.
    pub seed: u32,
    /// The most tokens to generate (thinking included).
    pub max_tokens: u32,
    /// Strings that end the reply (not included in it).
    pub stop: Vec<String>,
    /// Thinking mode.
    pub thinking: Thinking,
}

impl Default for Sampling {
    fn default() -> Self {
        Self { temperature: 0.0, top_p: 1.0, top_k: 0, seed: 0, max_tokens: 512, stop: Vec::new(), thinking: Thinking::Off }
    }
}

impl Sampling {
    /// Greedy decoding of at most `max_tokens` tokens.
    #[must_use]
    pub fn greedy(max_tokens: u32) -> Self {
        Self { max_tokens, ..Self::default() }
    }
}

/// One generation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GenerateRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// How to sample.
    pub sampling: Sampling,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model ended its turn.
    EndOfTurn,
    /// A stop string appeared.
    StopString,
    /// `max_tokens` was reached.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// The caller cancelled.
    Cancelled,
    /// The model called a tool.
    ToolCall,
}

/// What the KV cache did for one generation (llama.cpp backend; zeros elsewhere
/// except `prompt_tokens` where a server reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvStats {
    /// Tokens in the rendered prompt.
    pub prompt_tokens: u32,
    /// Prompt tokens found already in the cache (not decoded again).
    pub reused: u32,
    /// Prompt tokens decoded for this request.
    pub decoded: u32,
    /// Cached tokens removed because the prompt differed after them.
    pub trimmed: u32,
    /// Whether the cache had to be cleared entirely (memory refused a partial trim,
    /// or reuse was switched off).
    pub full_clear: bool,
    /// Wall time spent decoding the prompt, ms.
    pub prefill_ms: u64,
    /// Wall time spent generating, ms.
    pub decode_ms: u64,
    /// Of the `reused` tokens, those that were cached at other positions and
    /// moved into place (llama.cpp `seq_rm` + `seq_add`, the keys re-rotated)
    /// instead of being decoded again: the tail that follows a replaced middle.
    #[serde(default)]
    pub shifted: u32,
    /// Which way the cache was brought to the prompt.
    #[serde(default)]
    pub path: KvPath,
    /// Prompt tokens decoded again after restoring a context checkpoint: the
    /// checkpoint lay this many tokens before the point where the prompt
    /// departed from the cache (part of `decoded`).
    #[serde(default)]
    pub checkpoint_redecoded: u32,
}

/// How the KV cache was brought to a prompt ([`KvStats::path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvPath {
    /// The longest common prefix was kept, everything after it decoded
    /// (also the path of backends that report no cache figures).
    #[default]
    Prefix,
    /// The common prefix was kept, and a block of cached tokens that the
    /// prompt repeats later was shifted to its new position; only the gap
    /// before it and what follows it were decoded.
    Shift,
    /// The sliding-window state was restored from a context checkpoint at or
    /// before the common prefix's end, and decoding resumed from there.
    Checkpoint,
    /// The cache was cleared and the whole prompt decoded.
    Cleared,
}

/// Token usage and cache figures of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens and cache statistics.
    pub kv: KvStats,
    /// Tokens generated (thinking included).
    pub completion_tokens: u32,
    /// Of those, tokens spent inside a thinking block.
    pub thinking_tokens: u32,
}

/// The finished reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// Everything the model produced, verbatim (thinking and tool-call markup included).
    pub raw_text: String,
    /// The answer: thinking and tool-call markup removed.
    pub content: String,
    /// The thinking, if any.
    pub thinking: Option<String>,
    /// Parsed tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// A tool call that was attempted but could not be parsed; the agent may
    /// feed this back to the model.
    pub tool_parse_error: Option<String>,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// Token figures.
    pub usage: Usage,
}

/// A piece of streamed output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "text")]
pub enum StreamEvent {
    /// Text inside a thinking block.
    Thinking(String),
    /// Answer text (may contain tool-call markup; the final `Generation` has it parsed).
    Text(String),
}

/// What a backend tells about its model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// A display name (file stem, or the server's model name).
    pub name: String,
    /// Which backend serves it (`llama.cpp`, `ollama`, `openai`).
    pub backend: String,
    /// The architecture (`llama`, `gemma3`, ...) where known.
    pub architecture: Option<String>,
    /// Context window in use.
    pub context_size: u32,
    /// Context the model was trained on, where known.
    pub context_train: Option<u32>,
    /// Parameter count, where known.
    pub parameters: Option<u64>,
    /// The tool-call format chosen from the template.
    pub tool_format: Option<String>,
}

/// What to score: continuations teacher-forced after one conversation's
/// rendered prompt (the assistant turn opened by the template, thinking off).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreRequest {
    /// The conversation; its rendered prompt is the context every continuation follows.
    pub messages: Vec<ChatMessage>,
    /// Tools offered (they are part of the rendered prompt).
    pub tools: Vec<ToolSpec>,
    /// The texts to score, each on its own after the same prompt.
    pub continuations: Vec<String>,
}

/// One token of a scored continuation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text (a piece of the continuation).
    pub text: String,
    /// Byte offset of the token's text in the continuation (tokens that
    /// straddle a boundary the tokenizer drew start where their bytes do).
    pub start: usize,
    /// Natural-log probability the model gave this token at its position.
    pub logprob: f64,
    /// The highest log-probability of any token at that position (equal to
    /// `logprob` where this token is the greedy choice), where the engine
    /// reports it.
    pub top_logprob: Option<f64>,
}

/// A continuation's log-probabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// Its tokens in order; their log-probabilities sum to the continuation's.
    pub tokens: Vec<TokenLogprob>,
    /// Tokens of the prompt it followed.
    pub prompt_tokens: u32,
    /// Prompt and continuation tokens decoded for it (the rest came from the
    /// KV cache); equal to `prompt_tokens` plus the continuation's where the
    /// engine keeps no cache.
    pub decoded: u32,
}

impl Scored {
    /// The continuation's log-probability (the sum over its tokens).
    #[must_use]
    pub fn logprob(&self) -> f64 {
        self.tokens.iter().map(|t| t.logprob).sum()
    }

    /// Negative log-likelihood per token (nats), `None` for an empty continuation.
    #[must_use]
    pub fn nll_per_token(&self) -> Option<f64> {
        (!self.tokens.is_empty()).then(|| -self.logprob() / self.tokens.len() as f64)
    }

    /// The tokens that overlap the byte range `start..end` of the continuation.
    pub fn overlapping(&self, start: usize, end: usize) -> impl Iterator<Item = &TokenLogprob> {
        let ends: Vec<usize> = self.tokens.iter().skip(1).map(|t| t.start).chain(std::iter::once(usize::MAX)).collect();
        self.tokens.iter().zip(ends).filter(move |(t, e)| t.start < end && *e > start).map(|(t, _)| t)
    }
}
