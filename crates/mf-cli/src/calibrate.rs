//! `mf calibrate`: measures each compacting strategy at each trigger ratio
//! on one model (logic in `mf_bench::agentic::calibrate`) and stores the
//! recommendation, with the numbers behind it, in the data folder, where the
//! app's settings show it for that model.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, bail};
use mf_agent::engine::EngineArgs;
use mf_agent::{EngineChoice, RunSettings};
use mf_bench::agentic::calibrate::{
    CALIBRATION_CONTEXT, CALIBRATION_SCORE_CONTEXT, CALIBRATION_WORLD, Calibration, CalibrationConfig, CalibrationRow, calibrate, model_key, store,
};
use mf_forgetting::StrategyKind;

use crate::terminal::printable;

/// Measure each strategy and trigger ratio on this model over a short
/// route-driven world, and store the recommendation for the app.
#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// The engine and the model to calibrate (the same flags as `mf investigate`).
    #[command(flatten)]
    pub engine: EngineArgs,
    /// World folder.
    #[arg(long, default_value = "scenarios/agentic")]
    pub worlds: PathBuf,
    /// The world whose route is replayed.
    #[arg(long, default_value = CALIBRATION_WORLD)]
    pub world: String,
    /// Route calls replayed (the window fills within a few, so compaction fires several times).
    #[arg(long, default_value_t = CalibrationConfig::default().route_len)]
    pub route_len: usize,
    /// Strategies measured, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = CalibrationConfig::default().strategies)]
    pub strategies: Vec<StrategyKind>,
    /// Trigger ratios measured, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = CalibrationConfig::default().ratios)]
    pub ratios: Vec<f64>,
    /// Context window C of the runs (small, so that it fills).
    #[arg(long, default_value_t = CALIBRATION_CONTEXT)]
    pub ctx: u32,
    /// Where the result is written (default: the data folder's
    /// `calibration/MODEL-FILE.json`, or `calibration/ollama-NAME.json` /
    /// `openai-NAME.json` for a server's model, which the app reads).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the calibration, prints its table, writes its file.
pub async fn run(args: CalibrateArgs) -> anyhow::Result<()> {
    let engine = engine(&args.engine)?;
    let Some(world) = mf_bench::agentic::load_world(&args.worlds, &args.world)? else {
        bail!("no world {:?} in {}", args.world, args.worlds.display());
    };
    let backend = engine.load(args.ctx, None).await.with_context(|| format!("cannot load {}", engine.model_label()))?;
    let cfg = CalibrationConfig { route_len: args.route_len, strategies: args.strategies.clone(), ratios: args.ratios.clone(), ..CalibrationConfig::default() };
    let total = cfg.strategies.len() * cfg.ratios.len();
    eprintln!(
        "calibrating {} on {} ({} calls, C = {}): {} strategies × {} ratios = {total} runs",
        engine.model_label(),
        world.id,
        cfg.route_len.min(world.route.len()),
        args.ctx,
        cfg.strategies.len(),
        cfg.ratios.len()
    );
    let t0 = Instant::now();
    let mut progress = |done: usize, total: usize, r: &CalibrationRow| {
        let elapsed = t0.elapsed().as_secs_f64();
        let eta = elapsed / done as f64 * (total - done) as f64;
        let width = 20;
        let filled = done * width / total.max(1);
        let line = format!(
            "[{}{}] {done}/{total} {} @ {}: route {}/{}, {} compactions, kept {} of {} facts, {} in the answer, {}, {:.0} s · ETA {:.0} s",
            "#".repeat(filled),
            "-".repeat(width - filled),
            r.strategy,
            r.ratio,
            r.route_done,
            r.route_total,
            r.compactions,
            r.facts_kept,
            r.facts_fetched,
            r.facts_in_answer,
            r.exit,
            r.wall_s,
            eta
        );
        eprintln!("{}", printable(&line));
    };
    // The runs are scored on a second session of the same model whose
    // window holds the route's uncompacted history.
    let scorer =
        engine.load(CALIBRATION_SCORE_CONTEXT.max(args.ctx), None).await.with_context(|| format!("cannot load {} for scoring", engine.model_label()))?;
    let result = calibrate(backend, Some(scorer), &world, &cfg, &mut progress).await?;
    let file = model_key(&engine);
    let out = match &args.out {
        Some(out) => {
            std::fs::write(out, serde_json::to_string_pretty(&result)?).with_context(|| format!("cannot write {}", out.display()))?;
            out.clone()
        }
        None => store(&mf_agent::session::default_dir(), &file, &result)?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", printable(&table(&result)));
    }
    eprintln!("written to {} ({:.0} s in all)", out.display(), t0.elapsed().as_secs_f64());
    Ok(())
}

/// The engine the flags choose, checked as for `mf investigate` (tool calls
/// are held to the schemas by the grammar unless `--tool-grammar false`, as
/// in the agentic benchmark).
///
/// # Errors
/// Usage errors naming each flag that cannot be used.
fn engine(args: &EngineArgs) -> anyhow::Result<EngineChoice> {
    let mut s = RunSettings::default();
    for n in args.apply(&mut s) {
        eprintln!("note: {}", printable(&n));
    }
    if s.engine == mf_agent::EngineKind::Embedded && s.model_path.is_empty() {
        bail!(crate::UsageError("no --model given and no default model in ./models (run `make setup` or `mf models download`)".into()));
    }
    EngineChoice::resolve(&s).map_err(crate::investigate::setting_errors)
}

/// The rows as a Markdown table, then the recommendation.
fn table(c: &Calibration) -> String {
    let mut s = format!(
        "{} on {} (first {} calls, route replayed; C = {}, G = {})\n\n| strategy | ratio | R (probes) | rounds | route | compactions | facts kept | in answer | exit | wall s |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n",
        c.model, c.world, c.route_len, c.n_ctx, c.reserve
    );
    for r in &c.rows {
        let retention = r.retention.map_or("–".to_owned(), |x| format!("{x:.2} ({})", r.retention_probes));
        s.push_str(&format!(
            "| {} | {} | {retention} | {} | {}/{} | {} | {} / {} | {} | {} | {:.0} |\n",
            r.strategy, r.ratio, r.rounds, r.route_done, r.route_total, r.compactions, r.facts_kept, r.facts_fetched, r.facts_in_answer, r.exit, r.wall_s
        ));
    }
    s.push_str(
        "\nR: retention by likelihood (1 = what the uncompacted history gives the model, 0 = pinned + recent only), over the probes where the two differ.\n",
    );
    match &c.recommended {
        Some(rec) => s.push_str(&format!("\nRecommended: {} at ratio {} — {}.\n", rec.strategy, rec.ratio, c.reason)),
        None => s.push_str(&format!("\nNo recommendation: {}.\n", c.reason)),
    }
    s
}
