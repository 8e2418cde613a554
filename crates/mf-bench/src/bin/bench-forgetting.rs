//! `bench-forgetting`: the forgetting benchmark on a local or served model.
//!
//! Exit codes: 0 success, 1 a run or I/O error, 2 bad arguments (clap).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use mf_bench::{Condition, Model, ModelResult, RunConfig, Scorers, load, report, run_suite, schema};
use mf_forgetting::Budget;
use mf_inference::{LlamaConfig, LlamaSession, OllamaBackend, OpenAiBackend};

/// Measure what compaction strategies keep: compact each scenario under each
/// condition, ask its probes, score the answers (keywords and a model judge
/// with control brackets).
#[derive(Debug, Parser)]
#[command(name = "bench-forgetting", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Render results files (from `--json`/`--out`) as Markdown tables.
    Report {
        /// The results files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Check a results file against the documented JSON Schema.
    Validate {
        /// The results file.
        file: PathBuf,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// A GGUF file run in-process (llama.cpp), or the model name on a server (with --ollama/--openai).
    #[arg(long)]
    model: Option<String>,
    /// Use an Ollama server at this URL (e.g. http://127.0.0.1:11434).
    #[arg(long, conflicts_with = "openai")]
    ollama: Option<String>,
    /// Use an OpenAI-compatible server at this URL (e.g. http://127.0.0.1:8080/v1).
    #[arg(long)]
    openai: Option<String>,
    /// Run every model of this config file: JSON `[{"model": "...", "ollama"|"openai": "URL"?}]`.
    #[arg(long, conflicts_with_all = ["model", "ollama", "openai"])]
    all: Option<PathBuf>,
    /// Grade with this GGUF instead of the model under test.
    #[arg(long)]
    judge_model: Option<PathBuf>,
    /// Scenario directory.
    #[arg(long, default_value = "scenarios/compaction")]
    scenarios: PathBuf,
    /// Only scenarios whose id contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Run at most this many scenarios (after the filter, in file-name order).
    #[arg(long)]
    limit: Option<usize>,
    /// Conditions, comma-separated: full, baseline, masking, v1, v2, v2.1, or all.
    #[arg(long, default_value = "all")]
    conditions: String,
    /// Scorers: keyword, judge, or all.
    #[arg(long, default_value = "keyword,judge")]
    scorers: String,
    /// Repetitions (mean ± sd over them).
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Model context window (llama.cpp); long scenarios need ~5k tokens uncompressed.
    #[arg(long, default_value_t = 8192)]
    n_ctx: u32,
    /// CPU threads (llama.cpp; default all).
    #[arg(long)]
    threads: Option<i32>,
    /// Compaction budget: context C.
    #[arg(long, default_value_t = 4608)]
    budget_context: usize,
    /// Compaction budget: generation reserve G.
    #[arg(long, default_value_t = 512)]
    budget_reserve: usize,
    /// Probe answer limit in tokens.
    #[arg(long, default_value_t = 160)]
    answer_tokens: u32,
    /// Print the results as JSON (an array with one object per model) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the JSON results to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelSpec {
    model: String,
    #[serde(default)]
    ollama: Option<String>,
    #[serde(default)]
    openai: Option<String>,
}

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama_cpp_2=off"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("bench-forgetting: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Report { files }) => {
            for file in files {
                let results = read_results(&file)?;
                print!("{}", report::markdown(&results));
            }
            Ok(())
        }
        Some(Command::Validate { file }) => {
            read_results(&file)?;
            println!("{}: valid", file.display());
            Ok(())
        }
        None => bench(cli.run),
    }
}

fn read_results(file: &Path) -> Result<Vec<ModelResult>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    schema::validate_results(&v).with_context(|| format!("{}", file.display()))?;
    Ok(serde_json::from_value(v)?)
}

fn load_model(spec: &ModelSpec, a: &RunArgs) -> Result<Model> {
    match (&spec.ollama, &spec.openai) {
        (Some(url), _) => Ok(Model::new(Arc::new(OllamaBackend::new(url, &spec.model, a.n_ctx)?))?),
        (None, Some(url)) => Ok(Model::new(Arc::new(OpenAiBackend::new(url, &spec.model, std::env::var("OPENAI_API_KEY").ok(), a.n_ctx)?))?),
        (None, None) => load_gguf(Path::new(&spec.model), a),
    }
}

fn load_gguf(path: &Path, a: &RunArgs) -> Result<Model> {
    let mut cfg = LlamaConfig::new(path).with_n_ctx(a.n_ctx);
    cfg.n_threads = a.threads;
    let s = LlamaSession::load(cfg).with_context(|| format!("cannot load {}", path.display()))?;
    Ok(Model::llama(Arc::new(s))?)
}

fn bench(a: RunArgs) -> Result<()> {
    let specs: Vec<ModelSpec> = match (&a.all, &a.model) {
        (Some(f), _) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: expected [{{\"model\": …, \"ollama\"|\"openai\": URL?}}]", f.display()))?
        }
        (None, Some(m)) => vec![ModelSpec { model: m.clone(), ollama: a.ollama.clone(), openai: a.openai.clone() }],
        (None, None) => bail!("give --model PATH.gguf (or --ollama URL --model NAME, --openai URL --model NAME, --all CONFIG)"),
    };
    let mut scenarios = load::load_dir(&a.scenarios, &a.filter)?;
    if let Some(n) = a.limit {
        scenarios.truncate(n.max(1));
    }
    let cfg = RunConfig {
        conditions: Condition::parse_list(&a.conditions)?,
        scorers: Scorers::parse(&a.scorers)?,
        reps: a.reps,
        budget: Budget { context: a.budget_context, reserve: a.budget_reserve, ..Budget::default() },
        answer_max_tokens: a.answer_tokens,
        scenarios_dir: a.scenarios.display().to_string(),
        ..RunConfig::default()
    };
    let judge = match &a.judge_model {
        Some(p) if cfg.scorers.judge => Some(load_gguf(p, &a)?),
        _ => None,
    };
    let mut all = Vec::new();
    for spec in &specs {
        let model = load_model(spec, &a)?;
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_prefix(model.info().name.clone());
        let mut on_progress = |p: mf_bench::run::Progress| {
            bar.set_length(p.total);
            bar.set_position(p.done);
            bar.set_message(p.label);
        };
        let r = run_suite(&model, judge.as_ref(), &scenarios, &cfg, &mut on_progress)?;
        bar.finish_and_clear();
        if !a.json {
            print!("{}", report::markdown(std::slice::from_ref(&r)));
        }
        all.push(r);
    }
    let json = serde_json::to_string_pretty(&all)?;
    schema::validate_results(&serde_json::from_str(&json)?)?;
    if let Some(out) = &a.out {
        std::fs::write(out, &json).with_context(|| format!("cannot write {}", out.display()))?;
    }
    if a.json {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{json}")?;
    }
    Ok(())
}
