//! The scripted backend: replies from a script, a simulated tokenizer and
//! a simulated KV cache that reuses, trims and decodes as the llama.cpp
//! worker does.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvSnapshot, KvStats, ModelInfo, SnapshotSlot, StopReason, TokenSink, ToolCall, ToolSpec,
    Usage, common_prefix,
};

#[derive(Clone, Debug)]
pub(crate) enum Reply {
    Text(&'static str),
    Call(&'static str, serde_json::Value),
    Malformed,
}

pub(crate) struct Scripted {
    ctx: u32,
    script: Mutex<VecDeque<Reply>>,
    pub(crate) requests: Mutex<Vec<GenerateRequest>>,
    pub(crate) summary: Mutex<Result<String, String>>,
    /// Simulate a KV cache (off: the backend keeps none, like an HTTP server).
    kv: bool,
    /// The token ids "in the cache", as the llama.cpp worker keeps them:
    /// the last prompt plus what was generated after it.
    pub(crate) cache: Mutex<Vec<i32>>,
    /// Snapshots by slot.
    slots: Mutex<HashMap<String, Vec<i32>>>,
    /// KV figures of every generation (prefills included), in order.
    pub(crate) kv_log: Mutex<Vec<(&'static str, KvStats)>>,
    /// The model's name in `model_info`.
    name: &'static str,
}

impl Scripted {
    pub(crate) fn new(ctx: u32, script: Vec<Reply>) -> Arc<Self> {
        Arc::new(Self::plain(ctx, script))
    }
    pub(crate) fn with_kv(ctx: u32, script: Vec<Reply>) -> Arc<Self> {
        Arc::new(Scripted { kv: true, ..Self::plain(ctx, script) })
    }
    /// A backend that only writes summaries, under the model name `name`.
    pub(crate) fn summariser(ctx: u32, name: &'static str, summary: &str) -> Arc<Self> {
        let s = Scripted { name, ..Self::plain(ctx, Vec::new()) };
        *s.summary.lock().unwrap() = Ok(summary.to_owned());
        Arc::new(s)
    }
    fn plain(ctx: u32, script: Vec<Reply>) -> Self {
        Scripted {
            ctx,
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            summary: Mutex::new(Ok("- key k1 is value 1001\n- key k2 is value 1002".into())),
            kv: false,
            cache: Mutex::new(Vec::new()),
            slots: Mutex::new(HashMap::new()),
            kv_log: Mutex::new(Vec::new()),
            name: "scripted",
        }
    }
    /// Runs a prompt through the simulated cache exactly as the worker does:
    /// reuse the longest common prefix (the last prompt token is decoded
    /// again when everything matches), trim the rest, decode the remainder.
    fn through_cache(&self, ids: &[i32], generated: &str, kind: &'static str) -> KvStats {
        let mut cache = self.cache.lock().unwrap();
        let mut lcp = common_prefix(&cache, ids);
        if lcp == ids.len() {
            lcp = lcp.saturating_sub(1);
        }
        let stats = KvStats {
            prompt_tokens: ids.len() as u32,
            reused: lcp as u32,
            decoded: (ids.len() - lcp) as u32,
            trimmed: (cache.len() - lcp.min(cache.len())) as u32,
            ..KvStats::default()
        };
        *cache = ids.to_vec();
        cache.extend(text_ids(generated));
        self.kv_log.lock().unwrap().push((kind, stats));
        stats
    }
    pub(crate) fn round_requests(&self) -> Vec<GenerateRequest> {
        self.requests.lock().unwrap().iter().filter(|r| kind_of(r) == "round").cloned().collect()
    }
}

fn hash_id(s: &str) -> i32 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish() as i32
}

/// One token per 4 characters, as `msg_tokens` counts them.
fn text_ids(text: &str) -> Vec<i32> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(4).map(|c| hash_id(&c.iter().collect::<String>())).collect()
}

/// The simulated tokenisation of a prompt: 20 tokens per tool, then per
/// message 4 header tokens and one per 4 characters (exactly `msg_tokens`).
pub(crate) fn prompt_ids(messages: &[ChatMessage], tools: &[ToolSpec]) -> Vec<i32> {
    let mut ids = Vec::new();
    for t in tools {
        ids.extend((0..20).map(|i| hash_id(&format!("{}#{i}", t.name))));
    }
    for m in messages {
        ids.extend([hash_id(&format!("{:?}", m.role)), hash_id(m.tool_call_id.as_deref().unwrap_or("")), hash_id(m.name.as_deref().unwrap_or("")), 0]);
        let calls: String = m.tool_calls.iter().map(|c| format!("{}{}", c.name, c.arguments)).collect();
        ids.extend(text_ids(&format!("{}{calls}", m.content)));
    }
    ids
}

fn msg_tokens(m: &ChatMessage) -> u32 {
    let calls: usize = m.tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum();
    4 + (m.content.chars().count() + calls).div_ceil(4) as u32
}

pub(crate) fn kind_of(r: &GenerateRequest) -> &'static str {
    let last = r.messages.last().map(|m| m.content.as_str()).unwrap_or("");
    if r.messages.iter().any(|m| m.content.contains("You compress the log")) {
        "summary"
    } else if last.starts_with("Based only on the conversation above") {
        "probe"
    } else if last.starts_with("Stop calling tools") {
        "closing"
    } else {
        "round"
    }
}

fn generation(text: &str, calls: Vec<ToolCall>, parse_error: Option<String>, prompt: u32) -> Generation {
    Generation {
        raw_text: text.into(),
        content: text.into(),
        thinking: None,
        tool_calls: calls,
        tool_parse_error: parse_error,
        stop_reason: StopReason::EndOfTurn,
        usage: Usage { kv: KvStats { prompt_tokens: prompt, ..KvStats::default() }, completion_tokens: 5, thinking_tokens: 0 },
    }
}

impl Backend for Scripted {
    fn generate<'a>(&'a self, request: GenerateRequest, sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let prompt = request.messages.iter().map(msg_tokens).sum::<u32>() + 20 * request.tools.len() as u32;
            assert!(prompt + request.sampling.max_tokens <= self.ctx, "prompt {prompt} + {} over the window {}", request.sampling.max_tokens, self.ctx);
            let kind = kind_of(&request);
            if self.kv && request.sampling.max_tokens == 0 {
                // A prefill: the prompt goes into the cache, nothing is generated.
                let stats = self.through_cache(&prompt_ids(&request.messages, &request.tools), "", "prefill");
                let mut g = generation("", vec![], None, prompt);
                g.usage.kv = stats;
                g.usage.completion_tokens = 0;
                g.stop_reason = StopReason::MaxTokens;
                return Ok(g);
            }
            let ids = prompt_ids(&request.messages, &request.tools);
            self.requests.lock().unwrap().push(request);
            let g = match kind {
                "summary" => match self.summary.lock().unwrap().clone() {
                    Ok(s) => generation(&s, vec![], None, prompt),
                    Err(e) => return Err(mf_inference::InferenceError::Decode(e)),
                },
                "probe" => generation("The value is 1001 (key k1).", vec![], None, prompt),
                "closing" => generation("closing: value 1001", vec![], None, prompt),
                _ => match self.script.lock().unwrap().pop_front().unwrap_or(Reply::Text("script ended")) {
                    Reply::Text(t) => {
                        if let Some(s) = &sink {
                            let _ = s.send(mf_inference::StreamEvent::Text(t.into()));
                        }
                        generation(t, vec![], None, prompt)
                    }
                    Reply::Call(name, args) => generation("", vec![ToolCall { id: String::new(), name: name.into(), arguments: args }], None, prompt),
                    Reply::Malformed => generation("<tool_call>{\"name\": lookup", vec![], Some("invalid JSON in tool call".into()), prompt),
                },
            };
            let mut g = g;
            if self.kv {
                g.usage.kv = self.through_cache(&ids, &g.raw_text, kind);
            }
            Ok(g)
        })
    }

    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(messages.iter().map(msg_tokens).sum::<u32>() + 20 * tools.len() as u32) })
    }

    fn context_size(&self) -> u32 {
        self.ctx
    }

    fn model_info(&self) -> ModelInfo {
        ModelInfo {
            name: self.name.into(),
            backend: "test".into(),
            architecture: None,
            context_size: self.ctx,
            context_train: None,
            parameters: None,
            tool_format: None,
        }
    }

    fn keeps_kv(&self) -> bool {
        self.kv
    }

    fn prompt_token_ids<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<Vec<i32>>> {
        Box::pin(async move { Ok(prompt_ids(messages, tools)) })
    }

    fn cached_token_ids(&self) -> BoxFuture<'_, mf_inference::Result<Vec<i32>>> {
        Box::pin(async move { Ok(self.cache.lock().unwrap().clone()) })
    }

    fn kv_snapshot<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, mf_inference::Result<KvSnapshot>> {
        Box::pin(async move {
            assert!(self.kv, "snapshot asked of a backend without a cache");
            let tokens = self.cache.lock().unwrap().clone();
            if let SnapshotSlot::File(p) = slot {
                std::fs::write(p, serde_json::to_vec(&tokens).unwrap()).unwrap();
            }
            self.slots.lock().unwrap().insert(slot.to_string(), tokens.clone());
            Ok(KvSnapshot { bytes: 4 * tokens.len() as u64, tokens, key: "scripted".into() })
        })
    }

    fn kv_restore<'a>(&'a self, slot: &'a SnapshotSlot) -> BoxFuture<'a, mf_inference::Result<KvSnapshot>> {
        Box::pin(async move {
            let tokens = match slot {
                SnapshotSlot::File(p) => match std::fs::read(p) {
                    Ok(b) => serde_json::from_slice::<Vec<i32>>(&b).unwrap(),
                    Err(e) => return Err(mf_inference::InferenceError::Snapshot { path: p.clone(), reason: e.to_string() }),
                },
                SnapshotSlot::Memory(_) => match self.slots.lock().unwrap().get(&slot.to_string()) {
                    Some(t) => t.clone(),
                    None => return Err(mf_inference::InferenceError::Snapshot { path: slot.to_string().into(), reason: "no such snapshot".into() }),
                },
            };
            *self.cache.lock().unwrap() = tokens.clone();
            Ok(KvSnapshot { bytes: 4 * tokens.len() as u64, tokens, key: "scripted".into() })
        })
    }
}
