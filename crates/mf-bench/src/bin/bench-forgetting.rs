//! `bench-forgetting`: the forgetting benchmark on a local or served model.
//!
//! Exit codes: 0 success, 1 a run or I/O error, 2 bad arguments (clap).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use mf_agent::{EngineChoice, KeySource};
use mf_bench::agentic::{self, AgenticConfig, AgenticJob, AgenticModel, AgenticStrategy};
use mf_bench::{BenchEvent, BenchJob, BenchRun, Condition, ModelResult, RunConfig, Scorers, load, orchestrate, report, schema};
use mf_forgetting::Budget;
use mf_inference::http::ServerKind;

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
    /// Render results files (from `--json`/`--out`) as Markdown tables, or
    /// with `--index` the whole results page (docs/results.md).
    Report {
        /// The results files.
        #[arg(required_unless_present = "index", conflicts_with = "index")]
        files: Vec<PathBuf>,
        /// Render the results page from this index
        /// (crates/mf-bench/results/index.json): every file it names, with
        /// its command, model, machine, build and date.
        #[arg(long)]
        index: Option<PathBuf>,
        /// Write the page here instead of printing it (with `--index`).
        #[arg(long, requires = "index")]
        out: Option<PathBuf>,
    },
    /// Merge results files of the same model over disjoint scenario sets (e.g.
    /// the short, medium and long runs) into one file, every aggregate recomputed.
    Merge {
        /// The results files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where to write the merged JSON.
        #[arg(long)]
        out: PathBuf,
    },
    /// Compare two runs of the same suite (e.g. without and with
    /// `--branched`): wall time and decoded tokens per kind of call, and how
    /// many answers and compacted contexts agree.
    Compare {
        /// The first run's results file.
        before: PathBuf,
        /// The second run's results file.
        after: PathBuf,
    },
    /// Check a results file against the documented JSON Schema.
    Validate {
        /// The results file.
        file: PathBuf,
    },
    /// Live agentic worlds: the real mf-agent loop, once per strategy, against
    /// a deterministic JSON API served on 127.0.0.1 by this harness. A run
    /// that fails is a `failed` row of the results and the next one runs;
    /// the exit code is then 3.
    Agentic(AgenticArgs),
}

#[derive(Debug, Args)]
struct AgenticArgs {
    /// A GGUF file run in-process (llama.cpp).
    #[arg(long)]
    model: PathBuf,
    /// World directory.
    #[arg(long, default_value = "scenarios/agentic")]
    worlds: PathBuf,
    /// Only worlds whose id contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Strategies, comma-separated: none, cap5 (no compaction, 5 rounds at most), masking, v1, v2, v2.1, or all.
    #[arg(long, default_value = "all")]
    strategies: String,
    /// Who picks the calls: `model` (the model), or `route` (the world's
    /// route replayed as the assistant's calls; summaries, the closing answer,
    /// tool execution and compaction are the real loop and model).
    #[arg(long, default_value = "model")]
    driver: String,
    /// Context window C (small, so that the context fills within a few rounds).
    #[arg(long, default_value_t = 2048)]
    n_ctx: u32,
    /// Generation reserve G (also the longest reply).
    #[arg(long, default_value_t = 192)]
    reserve: u32,
    /// Compaction trigger ratio of C − G.
    #[arg(long, default_value_t = 0.75)]
    ratio: f64,
    /// Tool results are cut to this many characters.
    #[arg(long, default_value_t = 1200)]
    max_result_chars: usize,
    /// Summary pass limit in tokens.
    #[arg(long, default_value_t = 160)]
    summary_tokens: u32,
    /// Bound on rounds for every strategy (cap5 uses 5), so a run always ends.
    #[arg(long, default_value_t = 24)]
    max_rounds: u32,
    /// Loopback port the worlds are served on (part of the prompt: keep it fixed to compare runs).
    #[arg(long, default_value_t = 18940)]
    port: u16,
    /// CPU threads (llama.cpp; default all).
    #[arg(long)]
    threads: Option<i32>,
    /// Do not hold the model's tool calls to the tools' schemas. By default a
    /// lazy grammar holds them (fenced-JSON models: SmolLM2, Gemma 3; other
    /// formats are not constrained).
    #[arg(long)]
    no_tool_grammar: bool,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the JSON results to this file (rewritten after every run,
    /// so a run that stops early keeps every run that finished).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write each run's loop events (JSON lines: every call, result, plan,
    /// summary and exit) into this folder, one file per world, strategy and driver.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Do not score the worlds' probes by likelihood. By default, once every
    /// strategy of a world has run, each probe's reference is scored by
    /// log-probability on each run's final context, on the world's
    /// uncompacted history (the ceiling) and on its pinned + recent zones
    /// (the floor): retention R per strategy and world.
    #[arg(long)]
    no_likelihood: bool,
    /// The scoring session's window in tokens: it must hold the uncompacted
    /// history of a world (a probe over it is listed as unscored).
    #[arg(long, default_value_t = 16384)]
    score_ctx: u32,
    /// Keep every run as a stored investigation in this file (a store like
    /// `sessions.db`, made if missing): `mf sessions show ID --db FILE` and
    /// `mf replay ID --db FILE` read them. Each run's id there is its
    /// `session` in the results.
    #[arg(long)]
    store: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// A GGUF file run in-process (llama.cpp), or the model name on a server
    /// (with --ollama/--openai). A name that is not a file (`qwen3:8b`) runs
    /// on the Ollama server at `OLLAMA_HOST` (default 127.0.0.1:11434).
    #[arg(long)]
    model: Option<String>,
    /// Use an Ollama server at this URL (e.g. http://127.0.0.1:11434).
    #[arg(long, conflicts_with = "openai")]
    ollama: Option<String>,
    /// Use an OpenAI-compatible server at this URL (e.g. http://127.0.0.1:8080/v1).
    #[arg(long)]
    openai: Option<String>,
    /// Run every model of this config file: JSON `[{"model": "...", "ollama"|"openai": "URL"?}]`;
    /// with no file, every GGUF file in `models/`.
    #[arg(long, conflicts_with_all = ["model", "ollama", "openai"], num_args = 0..=1, default_missing_value = "")]
    all: Option<PathBuf>,
    /// Grade with this model instead of the model under test: a GGUF file,
    /// or a model name on the server of --judge-openai / --judge-ollama (a
    /// name alone runs on the Ollama server at OLLAMA_HOST). Its control
    /// brackets say whether its grades are evidence.
    #[arg(long)]
    judge_model: Option<String>,
    /// The judge runs on this OpenAI-compatible server (e.g. http://127.0.0.1:8080/v1; key from OPENAI_API_KEY).
    #[arg(long, requires = "judge_model", conflicts_with = "judge_ollama")]
    judge_openai: Option<String>,
    /// The judge runs on this Ollama server (e.g. http://127.0.0.1:11434).
    #[arg(long, requires = "judge_model")]
    judge_ollama: Option<String>,
    /// Have this model write every compaction summary instead of the model
    /// under test (a GGUF file, or a model name on the server of
    /// --summariser-openai / --summariser-ollama): "own model" against "a
    /// stronger summariser". The results name it.
    #[arg(long)]
    summariser: Option<String>,
    /// The summariser runs on this OpenAI-compatible server (key from OPENAI_API_KEY).
    #[arg(long, requires = "summariser", conflicts_with = "summariser_ollama")]
    summariser_openai: Option<String>,
    /// The summariser runs on this Ollama server.
    #[arg(long, requires = "summariser")]
    summariser_ollama: Option<String>,
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
    /// Scorers, comma-separated: likelihood (the reference and wrong answers
    /// scored by log-probability after each context: no answer generated),
    /// keyword and judge (over generated answers), or all.
    #[arg(long, default_value = "likelihood")]
    scorers: String,
    /// Repetitions (mean ± sd over them).
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Model context window (llama.cpp); long scenarios need ~5k tokens uncompressed.
    #[arg(long, default_value_t = mf_bench::orchestrate::SUITE_CONTEXT)]
    n_ctx: u32,
    /// CPU threads in all (llama.cpp; default: all cores), shared out among the workers.
    #[arg(long)]
    threads: Option<i32>,
    /// Model sessions that run scenarios side by side, each with its own KV
    /// cache and `threads / workers` threads (default: 2 when there are 2+
    /// threads, else 1). A small model decodes faster as two one-thread
    /// sessions than as one two-thread session. Each worker loads its own
    /// copy of the model (and of the judge model).
    #[arg(long)]
    workers: Option<usize>,
    /// Compaction budget: context C.
    #[arg(long, default_value_t = 4608)]
    budget_context: usize,
    /// Compaction budget: generation reserve G.
    #[arg(long, default_value_t = 512)]
    budget_reserve: usize,
    /// Probe answer limit in tokens (answers are asked to be concise; an
    /// empty answer that spent it is asked again with twice the limit).
    #[arg(long, default_value_t = 96)]
    answer_tokens: u32,
    /// v2.1: tokens of each answer of the withholding test (the app's value by default).
    #[arg(long, default_value_t = mf_agent::model::PROBE_MAX_TOKENS)]
    evaluator_tokens: u32,
    /// v2.1: at most this many withholding-test evaluations per compaction, the
    /// full context's included (0: one per unit, the exact test). Fewer than one
    /// per unit withholds contiguous blocks of units and splits the blocks with
    /// the highest Δ while evaluations remain.
    #[arg(long, default_value_t = 0)]
    withholding_budget: usize,
    /// v2.1: how the withholding test measures Perf: model (an answer
    /// generated per trial, its checkable terms compared), likelihood (the
    /// full-context answer scored by log-probability under each trial), phi
    /// (no test: Φ-influence, the ablation arm).
    #[arg(long, default_value_t = mf_agent::model::DeltaSource::default())]
    delta: mf_agent::model::DeltaSource,
    /// Ask the probes of one compacted context in one branched call: the
    /// context decoded once, the answers generated side by side (llama.cpp).
    #[arg(long)]
    branched: bool,
    /// Summary pass limit in tokens (METHOD.md §2: 256).
    #[arg(long, default_value_t = 256)]
    summary_tokens: u32,
    /// Print the results as JSON (an array with one object per model) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the JSON results to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One model of an `--all` file (and of `--model` with `--ollama`/`--openai`):
/// the file's own format, turned into an [`EngineChoice`] by [`ModelEntry::choice`].
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelEntry {
    model: String,
    #[serde(default)]
    ollama: Option<String>,
    #[serde(default)]
    openai: Option<String>,
}

impl ModelEntry {
    /// The engine that runs this model: its server when one is named; a
    /// name that is not a GGUF file on the Ollama server at `OLLAMA_HOST`
    /// (checked now, so a missing server or model fails before the run);
    /// else the file, in-process, on `threads` threads.
    fn choice(&self, threads: Option<i32>) -> Result<EngineChoice> {
        let model = self.model.clone();
        Ok(match (&self.ollama, &self.openai) {
            (Some(url), _) => EngineChoice::Ollama { url: url.clone(), model },
            (None, Some(url)) => EngineChoice::OpenAi { url: url.clone(), model, tools_in_text: false, key: KeySource::default() },
            (None, None) if !Path::new(&model).exists() && !model.to_ascii_lowercase().ends_with(".gguf") => {
                let url = ollama_host();
                check_ollama(&url, &model)?;
                EngineChoice::Ollama { url, model }
            }
            (None, None) => EngineChoice::Embedded { model: PathBuf::from(model), threads, gpu: false, tool_grammar: false },
        })
    }
}

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama-cpp-2=off,mf_tools::registry=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("bench-forgetting: {e:#}");
            if e.downcast_ref::<RunsFailed>().is_some() { RunsFailed::EXIT_CODE } else { 1 }
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Report { files, index, out }) => {
            if let Some(index) = index {
                let page = report::results_page(&index)?;
                match out {
                    Some(out) => std::fs::write(&out, page).with_context(|| format!("cannot write {}", out.display()))?,
                    None => println!("{page}"),
                }
                return Ok(());
            }
            for file in files {
                print!("{}", report::read_results(&file)?.markdown());
            }
            Ok(())
        }
        Some(Command::Compare { before, after }) => {
            let (b, a) = (report::read_suite(&before)?, report::read_suite(&after)?);
            print!("{}", mf_bench::compare::markdown(&mf_bench::compare::compare_files(&b, &a)?));
            Ok(())
        }
        Some(Command::Validate { file }) => {
            report::read_results(&file)?;
            println!("{}: valid", file.display());
            Ok(())
        }
        Some(Command::Agentic(a)) => run_agentic(a),
        Some(Command::Merge { files, out }) => {
            let mut by_model: Vec<(String, Vec<ModelResult>)> = Vec::new();
            for file in &files {
                let report::ResultsFile::Suite(rs) = report::read_results(file)? else { bail!("{}: agentic results cannot be merged", file.display()) };
                for r in rs {
                    match by_model.iter_mut().find(|(m, _)| *m == r.model) {
                        Some((_, v)) => v.push(r),
                        None => by_model.push((r.model.clone(), vec![r])),
                    }
                }
            }
            let mut merged = Vec::new();
            for (_, parts) in by_model {
                merged.push(mf_bench::results::merge(parts).map_err(anyhow::Error::msg)?);
            }
            let json = serde_json::to_string_pretty(&merged)?;
            schema::validate_results(&serde_json::from_str(&json)?)?;
            std::fs::write(&out, json).with_context(|| format!("cannot write {}", out.display()))?;
            println!("{}: {} model(s) merged from {} file(s)", out.display(), merged.len(), files.len());
            Ok(())
        }
        None => bench(cli.run),
    }
}

fn run_agentic(a: AgenticArgs) -> Result<()> {
    let worlds = agentic::load_worlds(&a.worlds, &a.filter)?;
    let model = AgenticModel {
        path: a.model.clone(),
        n_ctx: a.n_ctx,
        threads: a.threads,
        tool_grammar: !a.no_tool_grammar,
        score_ctx: (!a.no_likelihood).then_some(a.score_ctx),
    };
    let cfg = AgenticConfig {
        strategies: AgenticStrategy::parse_list(&a.strategies)?,
        reserve: a.reserve,
        ratio: a.ratio,
        max_result_chars: a.max_result_chars,
        summary_max_tokens: a.summary_tokens,
        max_rounds: a.max_rounds,
        port: a.port,
        driver: agentic::Driver::parse(&a.driver)?,
        server_dies_after: None,
        trace: a.trace.clone(),
        store: a.store.clone().map(|db| agentic::StoreTarget {
            db,
            engine: mf_agent::EngineChoice::Embedded { model: a.model.clone(), threads: a.threads, gpu: false, tool_grammar: model.tool_grammar },
        }),
    };
    let job = AgenticJob::new(model, worlds, &a.worlds, cfg)?;
    let t0 = std::time::Instant::now();
    let result = job.execute(a.out.as_deref(), &mut |runs| {
        if let Some(line) = agentic::progress_line(runs, t0.elapsed().as_secs_f64()) {
            eprintln!("{line}");
        }
    })?;
    if a.json {
        println!("{}", agentic::write_agentic(&result, None)?);
    } else {
        print!("{}", agentic::markdown(std::slice::from_ref(&result)));
    }
    let failed = result.runs.iter().filter(|r| r.failure.is_some()).count();
    if failed > 0 {
        return Err(RunsFailed { failed, total: result.runs.len() }.into());
    }
    Ok(())
}

/// Some runs of `agentic` failed: each is a `failed` row of the results, the
/// others ran. Exit code [`RunsFailed::EXIT_CODE`], not the 1 of a run that
/// could not go on.
#[derive(Debug)]
struct RunsFailed {
    failed: usize,
    total: usize,
}

impl RunsFailed {
    /// The exit code when some runs failed and the rest ran.
    const EXIT_CODE: i32 = 3;
}

impl std::fmt::Display for RunsFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} runs failed; each is a `failed` row of the results, the other runs ran", self.failed, self.total)
    }
}

impl std::error::Error for RunsFailed {}

/// The Ollama server a bare model name runs on: `OLLAMA_HOST` (with or
/// without a scheme), else Ollama's default address.
fn ollama_host() -> String {
    let host = std::env::var("OLLAMA_HOST").ok().filter(|h| !h.trim().is_empty()).unwrap_or_else(|| "127.0.0.1:11434".into());
    let host = host.trim().trim_end_matches('/');
    if host.starts_with("http://") || host.starts_with("https://") { host.to_owned() } else { format!("http://{host}") }
}

/// Fails with one line naming the address when no Ollama server answers
/// there, or when it does not have `model`.
fn check_ollama(url: &str, model: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let names = rt
        .block_on(mf_inference::http::list_server_models(ServerKind::Ollama, url, None))
        .map_err(|e| anyhow::anyhow!("{model:?} is not a file, and no Ollama server answered at {url} (set OLLAMA_HOST, or give a .gguf file): {e}"))?;
    let tagged = |n: &str| n == model || n.strip_suffix(":latest") == Some(model);
    if !names.iter().any(|n| tagged(n)) {
        bail!("the Ollama server at {url} has no model {model:?} (it has: {}); `ollama pull {model}` fetches it", names.join(", "));
    }
    Ok(())
}

/// Workers and threads per worker from `--workers` / `--threads`.
fn split_threads(a: &RunArgs) -> Result<(usize, i32)> {
    let total = match a.threads {
        Some(t) if t < 1 => bail!("--threads must be at least 1"),
        Some(t) => t,
        None => std::thread::available_parallelism().map_or(1, |n| i32::try_from(n.get()).unwrap_or(1)),
    };
    let workers = match a.workers {
        Some(0) => bail!("--workers must be at least 1"),
        Some(w) => w,
        None => {
            if total >= 2 {
                2
            } else {
                1
            }
        }
    };
    let per = (total / i32::try_from(workers).unwrap_or(i32::MAX)).max(1);
    Ok((workers, per))
}

fn bench(a: RunArgs) -> Result<()> {
    let specs: Vec<ModelEntry> = match (&a.all, &a.model) {
        (Some(f), _) if f.as_os_str().is_empty() => {
            // `--all` alone: every model file in models/.
            let mut files: Vec<PathBuf> = std::fs::read_dir("models")
                .context("--all with no file runs the GGUF files in models/, but there is no models/ folder here")?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")))
                .collect();
            files.sort();
            if files.is_empty() {
                bail!("--all with no file runs the GGUF files in models/, and there are none (run scripts/setup.sh)");
            }
            files.into_iter().map(|p| ModelEntry { model: p.display().to_string(), ollama: None, openai: None }).collect()
        }
        (Some(f), _) => {
            let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: expected [{{\"model\": …, \"ollama\"|\"openai\": URL?}}]", f.display()))?
        }
        (None, Some(m)) => vec![ModelEntry { model: m.clone(), ollama: a.ollama.clone(), openai: a.openai.clone() }],
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
        evaluator_max_tokens: a.evaluator_tokens,
        plan: {
            let mut p = mf_forgetting::PlanConfig::default();
            p.sampling.max_tokens = a.summary_tokens;
            p.withholding_budget = a.withholding_budget;
            p.validate()?;
            p
        },
        scenarios_dir: a.scenarios.display().to_string(),
        branched: a.branched,
        delta: a.delta,
        ..RunConfig::default()
    };
    let (n_workers, per_worker) = split_threads(&a)?;
    let models = specs.iter().map(|s| s.choice(Some(per_worker))).collect::<Result<Vec<_>>>()?;
    let judge = match &a.judge_model {
        Some(m) => Some(
            ModelEntry { model: m.clone(), ollama: a.judge_ollama.clone(), openai: a.judge_openai.clone() }.choice(Some(per_worker)).context("the judge")?,
        ),
        None => None,
    };
    let summariser = match &a.summariser {
        Some(m) => Some(
            ModelEntry { model: m.clone(), ollama: a.summariser_ollama.clone(), openai: a.summariser_openai.clone() }
                .choice(Some(per_worker))
                .context("the summariser")?,
        ),
        None => None,
    };
    let job = BenchJob::new(models, scenarios, cfg, a.n_ctx, n_workers, judge)?.with_summariser(summariser);
    // The bar counts work (steps weighted by their scenario's size), so its
    // ETA does not lurch between a long scenario's steps and a short one's.
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{elapsed_precise}] {wide_bar} {percent:>3}% ETA {eta} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let labels = job.model_labels();
    bar.set_prefix(labels.first().cloned().unwrap_or_default());
    let finished = std::cell::Cell::new(0usize);
    let started = std::time::Instant::now();
    let show = |e: BenchEvent| match e {
        BenchEvent::Progress { done, total, label, work_done, work_total } => {
            // Without a terminal (a log file) the bar is hidden: one line per step instead.
            if bar.is_hidden() {
                let elapsed = started.elapsed().as_secs_f64();
                let eta = (work_done > 0).then(|| elapsed * (work_total - work_done.min(work_total)) as f64 / work_done as f64);
                let eta = eta.map_or_else(|| "?".to_owned(), |s| format!("{s:.0} s"));
                eprintln!("[{elapsed:>6.0} s, ETA {eta}] {done}/{total} {label}");
            }
            bar.set_length(work_total);
            bar.set_position(work_done);
            bar.set_message(format!("{done}/{total} {label}"));
        }
        BenchEvent::ModelResult { result } => {
            finished.set(finished.get() + 1);
            bar.set_prefix(labels.get(finished.get()).cloned().unwrap_or_default());
            if !a.json {
                bar.suspend(|| print!("{}", report::markdown(std::slice::from_ref(&result))));
            }
        }
        _ => {}
    };
    let results = job.execute("bench-forgetting", &BenchRun::default(), &show);
    bar.finish_and_clear();
    let json = orchestrate::write_results(&results?, a.out.as_deref())?;
    if a.json {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{json}")?;
    }
    Ok(())
}
