//! `mf bench-kv`: the KV-cache reuse benchmark (logic in `mf_bench::kv`).

use std::path::PathBuf;

use anyhow::Context as _;
use mf_bench::kv::{BenchKvConfig, run as run_bench};

/// Replay a scripted tool investigation with KV reuse on and off and report
/// tokens reused, decoded, wall time, speedup and greedy equality.
#[derive(Debug, clap::Args)]
pub struct BenchKvArgs {
    /// The GGUF model to benchmark.
    #[arg(long, default_value = "models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    pub model: PathBuf,
    /// Context window in tokens.
    #[arg(long, default_value_t = 4096)]
    pub ctx: u32,
    /// Tokens generated (greedily) per round.
    #[arg(long, default_value_t = 16)]
    pub reply_tokens: u32,
    /// CPU threads (default: all).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Sliding-window models (Gemma 3): a window-sized cache for the window
    /// layers, trimmed through context checkpoints, instead of `swa_full`.
    #[arg(long)]
    pub no_swa_full: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark and prints its report.
pub fn run(args: BenchKvArgs) -> anyhow::Result<()> {
    let config = BenchKvConfig {
        model_path: args.model.clone(),
        n_ctx: args.ctx,
        reply_tokens: args.reply_tokens,
        n_threads: args.threads,
        swa_full: !args.no_swa_full,
    };
    let report = run_bench(&config).with_context(|| format!("bench-kv on {}", args.model.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::terminal::printable(&report.to_text()));
    }
    Ok(())
}
