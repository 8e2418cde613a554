//! Prefill throughput of the llama.cpp session: one long user message, decoded
//! from an empty cache, then generation of a few tokens.
//!
//! `cargo run --release -p mf-inference --example prefill_speed -- MODEL [n_ctx] [branches] [threads]`
use mf_inference::llama::{LlamaConfig, LlamaSession};
use mf_inference::{CancelToken, ChatMessage, GenerateRequest, Sampling};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let model = args.get(1).ok_or("usage: prefill_speed MODEL [n_ctx] [branches] [threads]")?;
    let n_ctx: u32 = args.get(2).map_or(Ok(8192), |s| s.parse())?;
    let branches: u32 = args.get(3).map_or(Ok(8), |s| s.parse())?;
    let threads: i32 = args.get(4).map_or(Ok(1), |s| s.parse())?;
    let mut config = LlamaConfig::new(model).with_n_ctx(n_ctx);
    config.branches = branches;
    config.n_threads = Some(threads);
    let session = LlamaSession::load(config)?;
    for words in [150usize, 300, 600, 1200] {
        session.clear_blocking()?;
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(words / 9 + 1);
        let request = GenerateRequest { messages: vec![ChatMessage::user(text)], tools: vec![], sampling: Sampling::greedy(16) };
        let t = std::time::Instant::now();
        let g = session.generate_blocking(request, None, CancelToken::default())?;
        let kv = g.usage.kv;
        println!(
            "n_ctx {n_ctx} branches {branches}: decoded {} in {} ms prefill ({:.0} tok/s), {} generated in {} ms, wall {} ms",
            kv.decoded,
            kv.prefill_ms,
            f64::from(kv.decoded) * 1000.0 / kv.prefill_ms.max(1) as f64,
            g.usage.completion_tokens,
            kv.decode_ms,
            t.elapsed().as_millis()
        );
    }
    Ok(())
}
