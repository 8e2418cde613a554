//! `mf`: the headless face of Measured Forgetting.
//!
//! Each subcommand lives in its own module and only parses, adapts and
//! displays; the logic is in the library crates.
//!
//! Exit codes: 0 success, 1 a failure while running, 2 bad input or usage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_kv;
mod calibrate;
mod investigate;
mod models;
mod plan;
mod replay;
mod terminal;

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
    /// Measure each strategy and trigger ratio on a model and store the recommendation.
    Calibrate(calibrate::CalibrateArgs),
    /// Run an investigation with a local model, tools and measured forgetting.
    Investigate(investigate::InvestigateArgs),
    /// Run one tool with the same containment as in an investigation.
    Tool(investigate::ToolCmdArgs),
    /// List, show or resume stored investigations.
    Sessions(investigate::SessionsArgs),
    /// Replay a stored investigation under every strategy and score each by what the investigation did next.
    Replay(replay::ReplayArgs),
    /// List, download (with resume and sha256 check) or verify model files.
    Models(models::ModelsArgs),
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Runs an async command on a fresh runtime; usage errors exit 2, others 1.
fn run_async<F: std::future::Future<Output = anyhow::Result<bool>>>(f: impl FnOnce() -> F) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(f()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {}", terminal::printable(&format!("{e:#}")));
            ExitCode::from(2)
        }
        // An error may quote a server's reply or a file's content.
        Err(e) => {
            eprintln!("error: {}", terminal::printable(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Bad input or usage: printed as one line, exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Warnings by default (as docs/settings.md says); `MF_LOG=mf=info` adds a
    // line with its time for each investigation, round, compaction and model
    // load. Colours only on a terminal: piped or saved output holds the text alone.
    let filter = tracing_subscriber::EnvFilter::try_from_env("MF_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama-cpp-2=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Plan(args) => match plan::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(UsageError(msg)) => {
                eprintln!("error: {}", terminal::printable(&msg));
                ExitCode::from(2)
            }
        },
        Command::BenchKv(args) => match bench_kv::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {}", terminal::printable(&format!("{e:#}")));
                ExitCode::FAILURE
            }
        },
        Command::Calibrate(args) => run_async(|| async { calibrate::run(args).await.map(|()| true) }),
        Command::Investigate(args) => run_async(|| async { investigate::investigate(args).await.map(|()| true) }),
        Command::Tool(args) => run_async(|| investigate::tool(args)),
        Command::Sessions(args) => run_async(|| async { investigate::sessions(args).await.map(|()| true) }),
        Command::Replay(args) => run_async(|| async { replay::run(args).await.map(|()| true) }),
        Command::Models(args) => run_async(|| models::run(args)),
    }
}
