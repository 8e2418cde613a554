//! `mf replay ID`: a stored investigation replayed under every strategy and
//! scored by what it really did next (`mf_bench::replay`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, bail};
use mf_agent::Sessions;
use mf_bench::export::{UserProbe, export_session};
use mf_bench::replay::{DEFAULT_SCORE_CONTEXT, ReplayRequest, markdown, replay_session};

use crate::terminal::printable;

/// `mf replay` flags.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The investigation's id (`mf sessions list`).
    pub id: i64,
    /// Strategies replayed, comma-separated: baseline, masking, v1, v2, v2.1.
    #[arg(long, value_delimiter = ',', default_value = "masking,v1,v2,v2.1")]
    pub strategies: Vec<String>,
    /// Replies scored after each compaction point (the final answer is scored too).
    #[arg(long, default_value_t = ReplayRequest::default().targets)]
    pub targets: usize,
    /// Compaction points at most: the first place the history went over the
    /// trigger, its last reply, and evenly between.
    #[arg(long, default_value_t = ReplayRequest::default().points)]
    pub points: usize,
    /// The scoring session's window in tokens: it must hold the investigation's uncompacted history.
    #[arg(long, default_value_t = DEFAULT_SCORE_CONTEXT)]
    pub score_ctx: u32,
    /// Use this model file (or, for a run on a server, this model name) instead of the stored one.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The session store (default as for `investigate`).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Print the result as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON result to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Instead of replaying, write the investigation into this folder as a
    /// scenario of the suite (`investigation-ID.json`): its messages up to
    /// its first compaction point, probes from `--probe` and then from what
    /// it did next. No model is loaded.
    #[arg(long, conflicts_with_all = ["json", "out", "model", "score_ctx", "points", "strategies"])]
    pub export: Option<PathBuf>,
    /// With `--export`: a probe of your own, `"QUESTION => ANSWER"` (repeat
    /// the flag for more; they come before the ones taken from the investigation).
    #[arg(long = "probe", requires = "export", value_name = "QUESTION => ANSWER")]
    pub probes: Vec<String>,
}

/// Replays investigation `a.id`, prints the tables (or JSON), writes `--out`.
///
/// # Errors
/// No such investigation, a stored spec this version cannot read, the model
/// cannot load or cannot score (Ollama), a history that never reached the trigger.
pub async fn run(a: ReplayArgs) -> anyhow::Result<()> {
    let db = a.db.clone().unwrap_or_else(crate::investigate::default_db);
    let sessions = Sessions::at_db(&db);
    if let Some(dir) = &a.export {
        return export(&sessions, &db, &a, dir);
    }
    let mut strategies = Vec::new();
    for s in &a.strategies {
        strategies.push(mf_agent::parse_strategy(s.trim()).map_err(|e| crate::UsageError(format!("--strategies: {e}")))?);
    }
    if strategies.is_empty() {
        bail!(crate::UsageError("--strategies: choose at least one".into()));
    }
    let req = ReplayRequest { strategies, targets: a.targets, points: a.points, score_ctx: a.score_ctx, model: a.model.clone() };
    eprintln!(
        "replaying investigation {} of {}: {} strategies, at most {} points, {} replies after each",
        a.id,
        db.display(),
        req.strategies.len(),
        req.points,
        req.targets
    );
    let t0 = Instant::now();
    let progress = move |done: usize, total: usize, what: &str| {
        let elapsed = t0.elapsed().as_secs_f64();
        let eta = elapsed / done.max(1) as f64 * total.saturating_sub(done) as f64;
        eprintln!("[{done}/{total}] {what} · {elapsed:.0} s, ETA {eta:.0} s");
    };
    let result = replay_session(&sessions, a.id, &req, None, progress).await.with_context(|| format!("store {}", db.display()))?;
    let json = serde_json::to_string_pretty(&result)?;
    if let Some(out) = &a.out {
        std::fs::write(out, &json).with_context(|| format!("cannot write {}", out.display()))?;
    }
    if a.json {
        println!("{json}");
    } else {
        // The question and the tool results are the investigation's: untrusted text.
        print!("{}", printable(&markdown(&result)));
    }
    Ok(())
}

/// `mf replay ID --export DIR`: the scenario file, and what the export left out.
fn export(sessions: &Sessions, db: &std::path::Path, a: &ReplayArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    let mut probes = Vec::new();
    for p in &a.probes {
        probes.push(p.parse::<UserProbe>().map_err(|e| crate::UsageError(format!("--probe {e}")))?);
    }
    let (path, exported) = export_session(sessions, a.id, dir, &probes, a.targets).with_context(|| format!("store {}", db.display()))?;
    let s = &exported.scenario;
    println!(
        "{}: {} messages (of {}), {} probe(s); `bench-forgetting --scenarios {}` runs it",
        path.display(),
        s.messages.len(),
        s.origin.as_ref().map_or(s.messages.len(), |o| o.transcript_messages),
        s.probes.len(),
        dir.display()
    );
    for note in &exported.notes {
        // Notes quote the investigation's replies: untrusted text.
        eprintln!("note: {}", printable(note));
    }
    Ok(())
}
