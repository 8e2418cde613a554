//! `mf`: the headless face of Measured Forgetting.
//!
//! Each subcommand lives in its own module and only parses, adapts and
//! displays; the logic is in the library crates.
//!
//! Exit codes: 0 success, 1 a failure while running, 2 bad input or usage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_kv;
mod plan;

/// Measured Forgetting: local-LLM investigations that forget by measure.
#[derive(Debug, Parser)]
#[command(name = "mf", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the compaction plan a strategy makes for a conversation file.
    Plan(plan::PlanArgs),
    /// Benchmark KV-cache reuse over a scripted tool investigation.
    BenchKv(bench_kv::BenchKvArgs),
}

/// Bad input or usage: printed as one line, exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("MF_LOG"))
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Plan(args) => match plan::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(UsageError(msg)) => {
                eprintln!("error: {msg}");
                ExitCode::from(2)
            }
        },
        Command::BenchKv(args) => match bench_kv::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
