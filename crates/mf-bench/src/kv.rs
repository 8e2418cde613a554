//! `mf bench-kv`: how much of each prompt the KV cache saves over a scripted
//! tool investigation, and whether reuse changes greedy output. A measurement
//! of `mf_inference`'s llama.cpp session, so it lives with the benchmarks.
//!
//! Two scenarios are replayed on one model, each with reuse on (the session
//! keeps its cache) and off (the cache is cleared before every round):
//! - `investigation`: 5 rounds; each appends a fixed assistant tool call and
//!   its tool result, then the model writes a short greedy reply (discarded,
//!   so the fixed history stays identical in both modes).
//! - `compaction`: 10 rounds; after round 5 the middle of the conversation is
//!   replaced by a summary (system prompt and question pinned, the last two
//!   tool rounds kept). Round 6 runs on the compacted conversation itself, so
//!   its decoded tokens can be compared with summary + recent, and, where
//!   the model's memory can shift positions, with the summary alone: the
//!   recent rounds are already cached and are moved behind the summary. The
//!   same round is also run on a session with the shift switched off.
//!
//! Whether the shift changes what the model reads is measured by
//! likelihood, not by greedy text (which any tiny numerical difference sends
//! down another path after a few tokens): after round 6, three continuations
//! (the next round's reply, facts of the shifted recent rounds, a fact of
//! the summary) are scored by log-probability on the shifted cache and on a
//! fresh decode of the same tokens; the noise floor is two fresh decodes
//! with different batch sizes. Both are reported as ΔNLL per token with a
//! 95 % bootstrap interval over tokens.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::json;

use mf_inference::template::RenderOptions;
use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, KvMemory, KvPath, LlamaConfig, LlamaSession, Sampling, ScoreRequest, Scored, ToolCall, ToolSpec,
};

use crate::error::Result;

/// What to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchKvConfig {
    /// The GGUF model.
    pub model_path: PathBuf,
    /// Context window.
    pub n_ctx: u32,
    /// Tokens generated per round (greedy).
    pub reply_tokens: u32,
    /// CPU threads (default: all).
    pub n_threads: Option<i32>,
    /// Sliding-window models: keep the full cache for every layer (off:
    /// a window-sized cache, trimmed through context checkpoints).
    #[serde(default = "yes")]
    pub swa_full: bool,
}

fn yes() -> bool {
    true
}

impl BenchKvConfig {
    /// Defaults: 4096-token context, 16-token replies, `swa_full`.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self { model_path: model_path.into(), n_ctx: 4096, reply_tokens: 16, n_threads: None, swa_full: true }
    }
}

/// One round in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundReport {
    /// 1-based.
    pub round: u32,
    /// Tokens in the prompt.
    pub prompt_tokens: u32,
    /// Tokens of the previous round's prompt (what was re-sent); 0 in round 1
    /// and in the round right after a compaction.
    pub resent_tokens: u32,
    /// Prompt tokens taken from the cache.
    pub reused: u32,
    /// Prompt tokens decoded.
    pub decoded: u32,
    /// Cached tokens removed.
    pub trimmed: u32,
    /// Whether the cache was cleared entirely.
    pub full_clear: bool,
    /// Cached tokens moved to a new position instead of decoded (in `reused`).
    #[serde(default)]
    pub shifted: u32,
    /// How the cache met the prompt.
    #[serde(default)]
    pub path: KvPath,
    /// Wall time of the whole generation, ms.
    pub wall_ms: u64,
    /// Of which prompt decoding, ms.
    pub prefill_ms: u64,
    /// The greedy reply.
    pub reply: String,
}

/// One scenario, both modes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// `investigation` or `compaction`.
    pub name: String,
    /// Rounds with the cache kept.
    pub reuse: Vec<RoundReport>,
    /// Rounds with the cache cleared each time.
    pub no_reuse: Vec<RoundReport>,
    /// Σ reused / Σ re-sent over the rounds that re-send a previous prompt (reuse on).
    pub reuse_fraction: f64,
    /// Wall time without reuse / with reuse, per round.
    pub speedup: Vec<f64>,
    /// Total wall ms with and without reuse.
    pub total_wall_ms: (u64, u64),
    /// Total decoded tokens with and without reuse.
    pub total_decoded: (u32, u32),
    /// Every reply identical with and without reuse.
    pub greedy_identical: bool,
}

/// What happened at the compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionReport {
    /// The round that ran on the compacted conversation.
    pub round: u32,
    /// Tokens of the pinned head (system + question) rendered alone.
    pub pinned_tokens: u32,
    /// Tokens of summary + recent (the compacted prompt minus the pinned head).
    pub summary_plus_recent_tokens: u32,
    /// Tokens actually decoded in that round (reuse on).
    pub re_decoded: u32,
    /// Tokens reused in that round.
    pub reused: u32,
    /// Tokens trimmed from the cache.
    pub trimmed: u32,
    /// Whether the model's memory forced a full clear.
    pub full_clear: bool,
    /// How the cache met the compacted prompt (`shift` when the recent
    /// rounds were moved behind the summary).
    pub path: KvPath,
    /// Tokens not decoded again thanks to the shift (the recent rounds, moved).
    pub shifted: u32,
    /// Tokens of the summary message as the template renders it.
    pub summary_tokens: u32,
    /// What was decoded beyond the summary: the template's glue (the
    /// generation prompt after the kept tail) when the shift ran.
    pub glue_tokens: u32,
    /// `re_decoded / summary_tokens`.
    pub re_decoded_per_summary_token: f64,
    /// The same round on a session with the shift switched off.
    pub re_decoded_without_shift: u32,
    /// Prefill wall time of the round with and without the shift, ms.
    pub prefill_ms: (u64, u64),
    /// Greedy reply of the round with and without the shift identical.
    pub same_reply_without_shift: bool,
    /// NLL per token of the continuations scored on the shifted cache minus
    /// on a fresh decode of the same tokens (absent when the round did not
    /// shift, or in files written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_nll_delta: Option<NllDelta>,
    /// The same between two fresh decodes with different batch sizes: the
    /// noise floor the shift is judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_nll_delta: Option<NllDelta>,
}

/// A difference of NLL per token between two ways of computing the same
/// context (`a − b`, nats), over the scored tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NllDelta {
    /// Mean signed difference per token (positive: `a` finds the text less likely).
    pub mean: f64,
    /// 2.5th percentile of the bootstrap over tokens.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
    /// Mean absolute difference per token.
    pub mean_abs: f64,
    /// The largest absolute difference at one token.
    pub max_abs: f64,
    /// Tokens compared.
    pub tokens: usize,
}

impl NllDelta {
    /// `NLL(a) − NLL(b)` token by token over continuations scored both ways
    /// (the same tokens, in the same order).
    #[must_use]
    pub fn between(a: &[Scored], b: &[Scored]) -> Option<NllDelta> {
        let d: Vec<f64> = a.iter().zip(b).flat_map(|(x, y)| x.tokens.iter().zip(&y.tokens).map(|(s, t)| t.logprob - s.logprob)).collect();
        let i = crate::likelihood::bootstrap(&d, |s| (!s.is_empty()).then(|| s.iter().copied().sum::<f64>() / s.len() as f64))?;
        Some(NllDelta {
            mean: i.value,
            lo: i.lo,
            hi: i.hi,
            mean_abs: d.iter().map(|x| x.abs()).sum::<f64>() / d.len() as f64,
            max_abs: d.iter().map(|x| x.abs()).fold(0.0, f64::max),
            tokens: d.len(),
        })
    }

    /// Whether this difference is within `noise` (its mean absolute
    /// difference at most the noise's) or below 0.02 nats per token: the rule
    /// the KV shift's default follows.
    #[must_use]
    pub fn negligible_against(&self, noise: Option<&NllDelta>) -> bool {
        self.mean_abs < SHIFT_NLL_NEGLIGIBLE || noise.is_some_and(|n| self.mean_abs <= n.mean_abs)
    }
}

/// A mean absolute ΔNLL per token below this is negligible for the KV
/// shift's default: 0.02 nats is a 2 % change in a token's probability, far
/// below the 0.1-nat gaps that separate a fact kept from a fact lost in the
/// likelihood scorer.
pub const SHIFT_NLL_NEGLIGIBLE: f64 = 0.02;

/// The continuations the shift is judged on, after the compacted
/// conversation: the next round's reply, facts of the two recent rounds
/// (the shifted tail), and a fact of the summary.
fn shift_targets() -> Vec<String> {
    let recent = |k: u32| -> String {
        let [_, result] = tool_round(k);
        let v: serde_json::Value = serde_json::from_str(&result.content).unwrap_or_default();
        let orders: Vec<String> = v["orders"]
            .as_array()
            .map(|o| {
                o.iter().take(3).map(|o| format!("{} ({}, {})", o["id"].as_str().unwrap_or("?"), o["customer"].as_str().unwrap_or("?"), o["amount"])).collect()
            })
            .unwrap_or_default();
        format!("Page {k} lists {}.", orders.join(", "))
    };
    vec![
        tool_round(6)[0].content.clone(),
        recent(4),
        recent(5),
        "So far globex has 3 refunded orders (ord-01259, ord-01555, ord-01851), 412.57 in total.".to_owned(),
    ]
}

/// The whole benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchKvReport {
    /// Model file name.
    pub model: String,
    /// Architecture.
    pub architecture: Option<String>,
    /// Context window used.
    pub n_ctx: u32,
    /// Tokens generated per round.
    pub reply_tokens: u32,
    /// The 5-round investigation.
    pub investigation: ScenarioReport,
    /// The 10-round investigation with a compaction.
    pub compaction: ScenarioReport,
    /// The compaction's figures.
    pub compaction_step: CompactionReport,
    /// Speedup of round 5 of the investigation.
    pub round5_speedup: f64,
    /// Whether sliding-window layers kept a full cache.
    #[serde(default = "yes")]
    pub swa_full: bool,
    /// What the cache held after the compaction scenario's last round
    /// (its sequence state in bytes, and the context checkpoints).
    #[serde(default)]
    pub memory: KvMemory,
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "http_get".into(),
            description: "Fetch a JSON resource from the orders API".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSpec {
            name: "read_file".into(),
            description: "Read a text file from the workspace".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
    ]
}

fn head() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are an investigator. Use the tools to answer the question, citing order ids. Be brief."),
        ChatMessage::user("Which customer had the most refunded orders in March, and what was the total refunded amount?"),
    ]
}

const CUSTOMERS: [&str; 7] = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne"];
const STATUSES: [&str; 4] = ["paid", "refunded", "shipped", "refunded"];

/// A deterministic tool round: the assistant's call and the result.
fn tool_round(k: u32) -> [ChatMessage; 2] {
    let path = format!("/api/orders?month=2024-03&page={k}");
    let id = format!("call_r{k}");
    let call = ToolCall { id: id.clone(), name: "http_get".into(), arguments: json!({"path": path}) };
    let orders: Vec<_> = (0..8u32)
        .map(|i| {
            let n = k * 8 + i;
            json!({
                "id": format!("ord-{:05}", 1000 + n * 37 % 9000),
                "customer": CUSTOMERS[(n * 3 % 7) as usize],
                "amount": f64::from((n * 7919) % 50_000) / 100.0,
                "status": STATUSES[(n % 4) as usize],
                "created": format!("2024-03-{:02}T{:02}:{:02}:00Z", 1 + n % 28, n % 24, n * 13 % 60),
            })
        })
        .collect();
    let result = json!({"page": k, "per_page": 8, "orders": orders}).to_string();
    [ChatMessage::assistant_tool_calls(format!("Fetching page {k} of the March orders."), vec![call]), ChatMessage::tool_result(id, "http_get", result)]
}

fn summary() -> ChatMessage {
    ChatMessage::user(
        "Summary of the investigation so far: pages 1-3 of the March orders were read. Refunds so far: \
         globex 3 (ord-01259, ord-01555, ord-01851, total 412.57), umbrella 2 (ord-01111, ord-01407, total 233.10). \
         Continue with the remaining pages.",
    )
}

struct Mode {
    rounds: Vec<RoundReport>,
}

fn run_rounds(session: &LlamaSession, convs: &[(Vec<ChatMessage>, bool)], reuse: bool, reply_tokens: u32) -> Result<Mode> {
    let tools = tools();
    let mut rounds = Vec::new();
    let mut prev_prompt = 0u32;
    session.clear_blocking()?;
    for (i, (messages, continues)) in convs.iter().enumerate() {
        if !reuse {
            session.clear_blocking()?;
        }
        let req = GenerateRequest { messages: messages.clone(), tools: tools.clone(), sampling: Sampling::greedy(reply_tokens) };
        let t = Instant::now();
        let g = session.generate_blocking(req, None, CancelToken::new())?;
        let wall_ms = t.elapsed().as_millis() as u64;
        let kv = g.usage.kv;
        rounds.push(RoundReport {
            round: i as u32 + 1,
            prompt_tokens: kv.prompt_tokens,
            resent_tokens: if *continues { prev_prompt } else { 0 },
            reused: kv.reused,
            decoded: kv.decoded,
            trimmed: kv.trimmed,
            full_clear: kv.full_clear,
            shifted: kv.shifted,
            path: kv.path,
            wall_ms,
            prefill_ms: kv.prefill_ms,
            reply: g.raw_text,
        });
        prev_prompt = kv.prompt_tokens;
    }
    Ok(Mode { rounds })
}

/// A session on `config`'s model with the shift on or off.
fn load(config: &BenchKvConfig, kv_shift: bool) -> Result<LlamaSession> {
    load_batched(config, kv_shift, LlamaConfig::new(&config.model_path).n_batch)
}

fn load_batched(config: &BenchKvConfig, kv_shift: bool, n_batch: u32) -> Result<LlamaSession> {
    let mut lc = LlamaConfig::new(&config.model_path).with_n_ctx(config.n_ctx);
    lc.n_threads = config.n_threads;
    lc.kv_shift = kv_shift;
    lc.swa_full = config.swa_full;
    lc.n_batch = n_batch;
    Ok(LlamaSession::load(lc)?)
}

/// The shift's ΔNLL and the noise floor's (see the module docs): rounds 1–6
/// on a shifting session, the targets scored on its cache and then fresh;
/// then fresh again on a session decoding in batches of 64.
fn shift_nll(config: &BenchKvConfig, convs: &[(Vec<ChatMessage>, bool)], compacted: &[ChatMessage]) -> Result<(Option<NllDelta>, Option<NllDelta>)> {
    let request = || ScoreRequest { messages: compacted.to_vec(), tools: tools(), continuations: shift_targets() };
    let session = load(config, true)?;
    let rounds = run_rounds(&session, &convs[..6], true, config.reply_tokens)?.rounds;
    let shifted = rounds.get(5).is_some_and(|r| r.path == KvPath::Shift);
    let on_shift = session.score_blocking(request(), CancelToken::new())?;
    session.clear_blocking()?;
    let fresh = session.score_blocking(request(), CancelToken::new())?;
    drop(session);
    let small = load_batched(config, false, 64)?;
    let fresh_small = small.score_blocking(request(), CancelToken::new())?;
    Ok((if shifted { NllDelta::between(&on_shift, &fresh) } else { None }, NllDelta::between(&fresh_small, &fresh)))
}

fn scenario(name: &str, session: &LlamaSession, convs: &[(Vec<ChatMessage>, bool)], reply_tokens: u32) -> Result<ScenarioReport> {
    let reuse = run_rounds(session, convs, true, reply_tokens)?.rounds;
    let no_reuse = run_rounds(session, convs, false, reply_tokens)?.rounds;
    let (mut reused, mut resent) = (0u64, 0u64);
    for r in reuse.iter().filter(|r| r.resent_tokens > 0) {
        reused += u64::from(r.reused.min(r.resent_tokens));
        resent += u64::from(r.resent_tokens);
    }
    let speedup = reuse.iter().zip(&no_reuse).map(|(a, b)| if a.wall_ms == 0 { 0.0 } else { b.wall_ms as f64 / a.wall_ms as f64 }).collect();
    Ok(ScenarioReport {
        name: name.into(),
        reuse_fraction: if resent == 0 { 0.0 } else { reused as f64 / resent as f64 },
        speedup,
        total_wall_ms: (reuse.iter().map(|r| r.wall_ms).sum(), no_reuse.iter().map(|r| r.wall_ms).sum()),
        total_decoded: (reuse.iter().map(|r| r.decoded).sum(), no_reuse.iter().map(|r| r.decoded).sum()),
        greedy_identical: reuse.iter().zip(&no_reuse).all(|(a, b)| a.reply == b.reply),
        reuse,
        no_reuse,
    })
}

/// Runs both scenarios.
///
/// # Errors
/// Load errors, and any generation error.
pub fn run(config: &BenchKvConfig) -> Result<BenchKvReport> {
    let session = load(config, true)?;
    let info = session.model_info();

    // Warm-up so page faults of the first load do not count against either mode.
    let mut warm = head();
    warm.extend(tool_round(0));
    session.generate_blocking(GenerateRequest { messages: warm, tools: tools(), sampling: Sampling::greedy(4) }, None, CancelToken::new())?;

    // 5-round investigation.
    let mut convs = Vec::new();
    let mut messages = head();
    for k in 1..=5 {
        messages.extend(tool_round(k));
        convs.push((messages.clone(), k > 1));
    }
    let investigation = scenario("investigation", &session, &convs, config.reply_tokens)?;

    // 10 rounds, compaction after round 5: pinned head + summary + last two tool rounds.
    let mut convs = Vec::new();
    let mut messages = head();
    for k in 1..=5 {
        messages.extend(tool_round(k));
        convs.push((messages.clone(), k > 1));
    }
    let mut compacted = head();
    compacted.push(summary());
    compacted.extend(tool_round(4));
    compacted.extend(tool_round(5));
    convs.push((compacted.clone(), false));
    let mut messages = compacted.clone();
    for k in 6..=9 {
        messages.extend(tool_round(k));
        convs.push((messages.clone(), true));
    }
    let compaction = scenario("compaction", &session, &convs, config.reply_tokens)?;
    let memory = session.kv_memory_blocking()?;

    let pinned_text = session.template().render(&head(), &tools(), RenderOptions { add_generation_prompt: false, thinking: false })?.text;
    let pinned_tokens = session.count_text_tokens_blocking(&pinned_text)?;
    let mut with_summary = head();
    with_summary.push(summary());
    let summary_text = session.template().render(&with_summary, &tools(), RenderOptions { add_generation_prompt: false, thinking: false })?.text;
    let summary_tokens = session.count_text_tokens_blocking(&summary_text)?.saturating_sub(pinned_tokens);
    drop(session);
    // Rounds 1-6 again on a session that never shifts.
    let plain = load(config, false)?;
    let without = run_rounds(&plain, &convs[..6], true, config.reply_tokens)?.rounds;
    drop(plain);
    let (shift_nll_delta, noise_nll_delta) = shift_nll(config, &convs, &compacted)?;
    let r6 = &compaction.reuse[5];
    let w6 = &without[5];
    let compaction_step = CompactionReport {
        round: 6,
        pinned_tokens,
        summary_plus_recent_tokens: r6.prompt_tokens.saturating_sub(pinned_tokens),
        re_decoded: r6.decoded,
        reused: r6.reused,
        trimmed: r6.trimmed,
        full_clear: r6.full_clear,
        path: r6.path,
        shifted: r6.shifted,
        summary_tokens,
        glue_tokens: r6.decoded.saturating_sub(summary_tokens),
        re_decoded_per_summary_token: if summary_tokens == 0 { 0.0 } else { f64::from(r6.decoded) / f64::from(summary_tokens) },
        re_decoded_without_shift: w6.decoded,
        prefill_ms: (r6.prefill_ms, w6.prefill_ms),
        same_reply_without_shift: r6.reply == w6.reply,
        shift_nll_delta,
        noise_nll_delta,
    };
    let round5_speedup = investigation.speedup.get(4).copied().unwrap_or(0.0);
    Ok(BenchKvReport {
        model: config.model_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        architecture: info.architecture,
        n_ctx: info.context_size,
        reply_tokens: config.reply_tokens,
        investigation,
        compaction,
        compaction_step,
        round5_speedup,
        swa_full: config.swa_full,
        memory,
    })
}

/// The results page's table of KV runs: per run, the compaction with the
/// shift (or the checkpoint path) beside the same round without it.
#[must_use]
pub fn markdown(reports: &[BenchKvReport]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| model | swa_full | path | not re-decoded thanks to the shift | re-decoded (before: no shift) | re-decoded (after) | summary + glue | after ÷ summary | prefill ms before → after | same greedy reply | ΔNLL shift − fresh (nats/token) | ΔNLL noise floor | KV sequence bytes | checkpoints (bytes) | round-5 speed-up |"
    );
    let _ = writeln!(s, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in reports {
        let c = &r.compaction_step;
        let path = serde_json::to_value(c.path).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let _ = writeln!(
            s,
            "| {} | {} | {path} | {} | {} | {} | {} + {} | {:.3} | {} → {} | {} | {} | {} | {} | {} ({}) | {:.2}× |",
            r.model,
            if r.swa_full { "on" } else { "off" },
            c.shifted,
            c.re_decoded_without_shift,
            c.re_decoded,
            c.summary_tokens,
            c.glue_tokens,
            c.re_decoded_per_summary_token,
            c.prefill_ms.1,
            c.prefill_ms.0,
            if c.same_reply_without_shift { "yes" } else { "no" },
            fmt_delta(c.shift_nll_delta.as_ref()),
            fmt_delta(c.noise_nll_delta.as_ref()),
            r.memory.sequence_bytes,
            r.memory.checkpoints,
            r.memory.checkpoint_bytes,
            r.round5_speedup
        );
    }
    s
}

/// `+0.0012 [−0.0003, +0.0027], |Δ| 0.004 over 92 tokens`, or `–`.
fn fmt_delta(d: Option<&NllDelta>) -> String {
    d.map_or("–".to_owned(), |d| format!("{:+.4} [{:+.4}, {:+.4}], mean \\|Δ\\| {:.4} over {} tokens", d.mean, d.lo, d.hi, d.mean_abs, d.tokens))
}

impl BenchKvReport {
    /// The human-readable table `mf bench-kv` prints.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "model {} ({}), n_ctx {}, {} reply tokens per round",
            self.model,
            self.architecture.as_deref().unwrap_or("?"),
            self.n_ctx,
            self.reply_tokens
        );
        for sc in [&self.investigation, &self.compaction] {
            let _ = writeln!(s, "\n{}:", sc.name);
            let _ = writeln!(s, "round | prompt | reused | shifted | decoded | wall ms (reuse) | decoded | wall ms (no reuse) | speedup | same reply");
            for ((a, b), sp) in sc.reuse.iter().zip(&sc.no_reuse).zip(&sc.speedup) {
                let _ = writeln!(
                    s,
                    "{:>5} | {:>6} | {:>6} | {:>7} | {:>7} | {:>15} | {:>7} | {:>18} | {:>6.2}x | {}",
                    a.round,
                    a.prompt_tokens,
                    a.reused,
                    a.shifted,
                    a.decoded,
                    a.wall_ms,
                    b.decoded,
                    b.wall_ms,
                    sp,
                    a.reply == b.reply
                );
            }
            let _ = writeln!(
                s,
                "total: decoded {} vs {}, wall {} ms vs {} ms; reuse fraction of re-sent tokens {:.3}; greedy identical: {}",
                sc.total_decoded.0, sc.total_decoded.1, sc.total_wall_ms.0, sc.total_wall_ms.1, sc.reuse_fraction, sc.greedy_identical
            );
        }
        let c = &self.compaction_step;
        let _ = writeln!(
            s,
            "\ncompaction (round {}): re-decoded {} tokens, summary + recent = {} tokens, pinned {} tokens, reused {}, trimmed {}, full clear {}",
            c.round, c.re_decoded, c.summary_plus_recent_tokens, c.pinned_tokens, c.reused, c.trimmed, c.full_clear
        );
        let _ = writeln!(
            s,
            "  path {:?}: {} tokens not re-decoded thanks to the shift; summary {} tokens + glue {} = {} re-decoded ({:.3} x summary)",
            c.path, c.shifted, c.summary_tokens, c.glue_tokens, c.re_decoded, c.re_decoded_per_summary_token
        );
        let _ = writeln!(
            s,
            "  without the shift: re-decoded {} tokens; prefill {} ms vs {} ms; same greedy reply: {}",
            c.re_decoded_without_shift, c.prefill_ms.0, c.prefill_ms.1, c.same_reply_without_shift
        );
        let _ = writeln!(
            s,
            "  likelihood: ΔNLL shift − fresh {}; noise floor (batch 64 vs 512) {}",
            fmt_delta(c.shift_nll_delta.as_ref()).replace("\\|", "|"),
            fmt_delta(c.noise_nll_delta.as_ref()).replace("\\|", "|")
        );
        let m = &self.memory;
        let _ = writeln!(
            s,
            "KV memory after the last round (swa_full {}): {} tokens, sequence state {} bytes, {} checkpoints of {} bytes",
            self.swa_full, m.tokens, m.sequence_bytes, m.checkpoints, m.checkpoint_bytes
        );
        let _ = writeln!(s, "round-5 speedup: {:.2}x", self.round5_speedup);
        s
    }
}
