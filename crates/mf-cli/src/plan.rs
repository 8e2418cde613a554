//! `mf plan`: print the compaction plan a strategy makes for a conversation file.

use std::fmt::Write as _;
use std::path::PathBuf;

use mf_forgetting::scenario::Scenario;
use mf_forgetting::{ApproxTokenCounter, Budget, CompactionPlan, KeywordOracle, PlanConfig, Ranking, StrategyKind};

use crate::UsageError;

/// Plan a compaction of a conversation file (the scenario JSON format of
/// `scenarios/compaction/`) and print the plan: per message its zone,
/// dimensions breadth B, influence, tier, chain and reason.
///
/// Tokens are counted offline (≈ 4 characters a token, plus a per-message
/// overhead): the agent counts with the model's own tokenizer.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The conversation file (JSON).
    pub file: PathBuf,
    /// Strategy: none, baseline, masking, v1, v2, v2.1.
    #[arg(long, default_value = "v2", value_parser = parse_strategy)]
    pub strategy: StrategyKind,
    /// Context size C in tokens.
    #[arg(long, default_value_t = mf_forgetting::budget::DEFAULT_CONTEXT)]
    pub ctx: usize,
    /// Generation reserve G in tokens.
    #[arg(long, default_value_t = mf_forgetting::budget::DEFAULT_RESERVE)]
    pub reserve: usize,
    /// Trigger ratio: compaction fires above ratio · (C − G).
    #[arg(long, default_value_t = mf_forgetting::budget::DEFAULT_RATIO)]
    pub ratio: f64,
    /// Messages at the end kept verbatim (widened to keep a tool call with its results).
    #[arg(long, default_value_t = mf_forgetting::budget::DEFAULT_RECENT)]
    pub recent: usize,
    /// γ of Φ(B) = B^γ (v2, v2.1).
    #[arg(long, default_value_t = 1.5)]
    pub gamma: f64,
    /// v2.1 ranking: `withholding` (Δ; offline here the file's probes are
    /// checked by keyword presence — a proxy, not a model) or `phi` (ablation).
    #[arg(long, default_value = "withholding", value_parser = parse_ranking)]
    pub ranking: Ranking,
    /// v2.1: at most this many withholding-test evaluations, the full context's
    /// included (0: one per unit, exact; fewer withholds blocks of units and
    /// splits the blocks with the highest Δ).
    #[arg(long, default_value_t = 0)]
    pub withholding_budget: usize,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_strategy(s: &str) -> Result<StrategyKind, String> {
    s.parse::<StrategyKind>().map_err(|e| e.to_string())
}

fn parse_ranking(s: &str) -> Result<Ranking, String> {
    match s {
        "withholding" => Ok(Ranking::Withholding),
        "phi" => Ok(Ranking::Phi),
        _ => Err(format!("unknown ranking {s:?} (withholding, phi)")),
    }
}

/// Runs `mf plan`.
///
/// # Errors
/// A [`UsageError`] (exit 2) for an unreadable or invalid file or bad settings.
pub fn run(args: &PlanArgs) -> Result<(), UsageError> {
    let name = args.file.display().to_string();
    let err = |what: String| UsageError(format!("{name}: {what}"));
    let text = std::fs::read_to_string(&args.file).map_err(|e| err(format!("cannot read: {e}")))?;
    let scenario = Scenario::parse(&text).map_err(|e| err(e.to_string()))?;
    let budget = Budget { context: args.ctx, reserve: args.reserve, ratio: args.ratio, recent: args.recent };
    let config = PlanConfig { gamma: args.gamma, ranking: args.ranking, withholding_budget: args.withholding_budget, ..PlanConfig::default() };
    let counter = ApproxTokenCounter;
    let mut oracle = KeywordOracle::new(scenario.probes.clone());
    let evaluator: Option<&mut dyn mf_forgetting::ProbeEvaluator> =
        (args.strategy == StrategyKind::V21 && args.ranking == Ranking::Withholding).then_some(&mut oracle as _);
    let plan = mf_forgetting::plan(args.strategy, &scenario.messages, &budget, &counter, &config, evaluator).map_err(|e| err(e.to_string()))?;
    if args.json {
        let json = serde_json::to_string_pretty(&plan).map_err(|e| err(e.to_string()))?;
        println!("{json}");
    } else {
        // The plan quotes the conversation file (labels, notes): text for a terminal.
        print!("{}", crate::terminal::printable(&render(&name, &plan)));
    }
    Ok(())
}

fn opt_f(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"))
}

/// The human-readable plan.
fn render(name: &str, plan: &CompactionPlan) -> String {
    let mut s = String::new();
    let g = &plan.gauge;
    let _ = writeln!(s, "{name}: strategy {}", plan.strategy.as_str());
    if let Some(c) = &plan.class {
        let _ = writeln!(s, "class: {}", c.class);
    }
    let _ = writeln!(
        s,
        "gauge: pinned {} + compressible {} + recent {} = {} tokens; threshold {} (C {} − G {}); free {}; compaction {}",
        g.pinned,
        g.compressible,
        g.recent,
        g.total(),
        g.threshold,
        g.context,
        g.reserve,
        g.free,
        if plan.needed { "needed" } else { "not needed" }
    );
    let _ = writeln!(
        s,
        "{:>4}  {:<13} {:<12} {:>6} {:>2} {:>9} {:>7} {:<9} {:<6} reason",
        "#", "kind", "zone", "tokens", "B", "influence", "delta", "tier", "chain"
    );
    for m in &plan.messages {
        let _ = writeln!(
            s,
            "{:>4}  {:<13} {:<12} {:>6} {:>2} {:>9} {:>7} {:<9} {:<6} {}",
            m.index,
            format!("{:?}", m.kind),
            m.zone.label(),
            m.tokens,
            m.breadth.map_or_else(|| "-".to_owned(), |b| b.to_string()),
            opt_f(m.influence),
            opt_f(m.delta),
            m.tier.label(),
            m.chain.as_deref().unwrap_or("-"),
            m.reason
        );
    }
    for f in &plan.folds {
        let _ = writeln!(s, "fold: {} (messages {:?})", f.label, f.members);
    }
    for i in &plan.instructions {
        let _ = writeln!(s, "instruction: {i}");
    }
    for n in &plan.notes {
        let _ = writeln!(s, "note: {n}");
    }
    let _ = writeln!(s, "estimated tokens after: {}", plan.estimated_tokens_after);
    s
}
