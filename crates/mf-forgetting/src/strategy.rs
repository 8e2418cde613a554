//! The strategies behind one trait, each a pure function from a history to a
//! [`CompactionPlan`].

use std::collections::BTreeMap;

use crate::apply::estimate_after;
use crate::budget::Budget;
use crate::chains::{chain_of, hop_links};
use crate::dimensions::{self, Dimension, Scores};
use crate::error::ForgettingError;
use crate::evaluator::ProbeEvaluator;
use crate::message::{Message, MessageKind, question_index};
use crate::plan::{CompactionPlan, FoldGroup, MessagePlan, PlanConfig, Ranking, StrategyKind, Tier};
use crate::summary::error_type;
use crate::taxonomy::{self, Classification, ProblemClass};
use crate::tokens::TokenCounter;
use crate::zones::{Zone, ZoneGauge, Zones, partition_with_chains};

/// A compaction strategy: history → plan. Pure given its inputs.
pub trait Strategy {
    /// Which strategy.
    fn kind(&self) -> StrategyKind;

    /// Plans a compaction of `messages` under `budget`.
    ///
    /// # Errors
    /// Invalid budget or settings, an empty or questionless history, or (v2.1)
    /// a failing evaluator.
    fn plan(
        &mut self,
        messages: &[Message],
        budget: &Budget,
        counter: &dyn TokenCounter,
    ) -> Result<CompactionPlan, ForgettingError>;
}

/// The strategies that need no evaluator, by kind (v2.1 with Φ ranking too).
///
/// # Errors
/// [`ForgettingError::InvalidSetting`] for v2.1 with the withholding ranking:
/// Δ needs a probe evaluator, use [`V21::new`].
pub fn strategy(kind: StrategyKind, config: PlanConfig) -> Result<Box<dyn Strategy>, ForgettingError> {
    Ok(match kind {
        StrategyKind::None => Box::new(NoneStrategy),
        StrategyKind::Baseline => Box::new(Baseline),
        StrategyKind::Masking => Box::new(Masking { config }),
        StrategyKind::V1 => Box::new(V1 { config }),
        StrategyKind::V2 => Box::new(V2 { config }),
        StrategyKind::V21 => {
            if config.ranking == Ranking::Withholding {
                return Err(ForgettingError::InvalidSetting {
                    name: "evaluator",
                    reason: "v2.1 ranks by Δ, which needs a probe evaluator (a model, or an offline proxy)".to_owned(),
                });
            }
            Box::new(V21 { config, evaluator: None })
        }
    })
}

/// Plans with any strategy; `evaluator` is used by v2.1 only.
///
/// # Errors
/// As [`Strategy::plan`], and v2.1 with Δ ranking and no evaluator.
pub fn plan(
    kind: StrategyKind,
    messages: &[Message],
    budget: &Budget,
    counter: &dyn TokenCounter,
    config: &PlanConfig,
    evaluator: Option<&mut dyn ProbeEvaluator>,
) -> Result<CompactionPlan, ForgettingError> {
    if kind == StrategyKind::V21
        && let Some(e) = evaluator
    {
        return V21::new(config.clone(), e).plan(messages, budget, counter);
    }
    strategy(kind, config.clone())?.plan(messages, budget, counter)
}

/// What every plan starts from.
struct Base {
    zones: Zones,
    gauge: ZoneGauge,
    plans: Vec<MessagePlan>,
    chains: Vec<Option<usize>>,
}

fn base(
    kind: StrategyKind,
    messages: &[Message],
    budget: &Budget,
    counter: &dyn TokenCounter,
    config: &PlanConfig,
) -> Result<Base, ForgettingError> {
    budget.validate()?;
    config.validate()?;
    let chains = chain_of(messages);
    let zones = partition_with_chains(messages, &chains, budget.recent)?;
    let gauge = ZoneGauge::measure(messages, &zones, budget, counter);
    let plans = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let zone = zones.zone_of(i);
            MessagePlan {
                id: m.id.clone(),
                index: i,
                kind: m.kind(),
                zone,
                tokens: counter.count_message(m),
                dimensions: None,
                breadth: None,
                influence: None,
                delta: None,
                tier: Tier::Keep,
                chain: chains[i].map(|c| format!("c{c}")),
                reason: match zone {
                    Zone::Pinned => "pinned: system prompt through the original question".to_owned(),
                    Zone::Recent => "recent: kept verbatim".to_owned(),
                    Zone::Compressible => String::new(),
                },
            }
        })
        .collect();
    let _ = kind;
    Ok(Base { zones, gauge, plans, chains })
}

fn finish(
    kind: StrategyKind,
    b: Base,
    messages: &[Message],
    budget: &Budget,
    counter: &dyn TokenCounter,
    config: &PlanConfig,
) -> CompactionPlan {
    let mut p = CompactionPlan {
        strategy: kind,
        budget: *budget,
        zones: b.zones,
        gauge: b.gauge,
        needed: budget.should_compact(b.gauge.total(), messages.len()),
        class: None,
        median_influence: None,
        messages: b.plans,
        folds: Vec::new(),
        instructions: Vec::new(),
        estimated_tokens_after: 0,
        notes: Vec::new(),
        config: config.clone(),
    };
    p.estimated_tokens_after = estimate_after(&p, messages, counter);
    p
}

/// Control arm: changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoneStrategy;

impl Strategy for NoneStrategy {
    fn kind(&self) -> StrategyKind {
        StrategyKind::None
    }
    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let config = PlanConfig::default();
        let mut b = base(StrategyKind::None, messages, budget, counter, &config)?;
        for p in b.plans.iter_mut().filter(|p| p.zone == Zone::Compressible) {
            p.reason = "none: control arm, nothing changes".to_owned();
        }
        Ok(finish(StrategyKind::None, b, messages, budget, counter, &config))
    }
}

/// The paper's baseline: keep the first message and the recent zone, drop the rest.
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline;

impl Strategy for Baseline {
    fn kind(&self) -> StrategyKind {
        StrategyKind::Baseline
    }
    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let config = PlanConfig::default();
        let mut b = base(StrategyKind::Baseline, messages, budget, counter, &config)?;
        for p in b.plans.iter_mut() {
            if p.index == 0 {
                p.reason = "baseline: the first message is kept".to_owned();
            } else if p.zone != Zone::Recent {
                p.tier = Tier::Drop;
                p.reason = "baseline: hard truncation drops everything but the first and the recent messages".to_owned();
            }
        }
        Ok(finish(StrategyKind::Baseline, b, messages, budget, counter, &config))
    }
}

/// Observation masking: tool outputs older than the last `mask_keep_last`
/// become a placeholder; calls and the model's own text stay.
#[derive(Debug, Clone, Default)]
pub struct Masking {
    /// Settings.
    pub config: PlanConfig,
}

impl Strategy for Masking {
    fn kind(&self) -> StrategyKind {
        StrategyKind::Masking
    }
    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let b = base(StrategyKind::Masking, messages, budget, counter, &self.config)?;
        let outputs: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m.kind(), MessageKind::ToolResult | MessageKind::ToolError))
            .map(|(i, _)| i)
            .collect();
        let window_start = outputs
            .len()
            .checked_sub(self.config.mask_keep_last)
            .and_then(|k| outputs.get(k).copied())
            .unwrap_or(0);
        let mut p = finish(StrategyKind::Masking, b, messages, budget, counter, &self.config);
        let compressible = p.zones.compressible();
        for &i in &outputs {
            if compressible.contains(&i) {
                if i < window_start {
                    p.messages[i].tier = Tier::Mask;
                    p.messages[i].reason = format!(
                        "masking: older than the last {} tool outputs → placeholder",
                        self.config.mask_keep_last
                    );
                } else {
                    p.messages[i].reason = "masking: inside the window of recent tool outputs".to_owned();
                }
            }
        }
        for m in p.messages.iter_mut().filter(|m| m.zone == Zone::Compressible && m.reason.is_empty()) {
            m.reason = "masking: not a tool output, kept".to_owned();
        }
        p.estimated_tokens_after = estimate_after(&p, messages, counter);
        if p.estimated_tokens_after > budget.threshold() {
            let mut widened = false;
            for &i in &outputs {
                if compressible.contains(&i) && p.messages[i].tier != Tier::Mask {
                    p.messages[i].tier = Tier::Mask;
                    p.messages[i].reason = "masking: window closed to restore the budget → placeholder".to_owned();
                    widened = true;
                }
            }
            if widened {
                p.notes.push("still over the threshold with the window: masked every compressible tool output".to_owned());
                p.estimated_tokens_after = estimate_after(&p, messages, counter);
            }
        }
        Ok(p)
    }
}

/// Measured forgetting v1: error-aware input, one self-summary.
#[derive(Debug, Clone, Default)]
pub struct V1 {
    /// Settings.
    pub config: PlanConfig,
}

impl Strategy for V1 {
    fn kind(&self) -> StrategyKind {
        StrategyKind::V1
    }
    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let mut b = base(StrategyKind::V1, messages, budget, counter, &self.config)?;
        for p in b.plans.iter_mut().filter(|p| p.zone == Zone::Compressible) {
            p.tier = Tier::Summarise;
            p.reason = match p.kind {
                MessageKind::ToolError => format!("v1: error → one line ({})", error_type(&messages[p.index].content)),
                MessageKind::ToolResult => format!("v1: result → {} chars, summarised", self.config.result_chars),
                MessageKind::ToolCall => "v1: call → one line, summarised".to_owned(),
                _ => format!("v1: text → {} chars, summarised", self.config.result_chars),
            };
        }
        Ok(finish(StrategyKind::V1, b, messages, budget, counter, &self.config))
    }
}

/// Per-message analysis shared by v2 and v2.1.
struct Analysis {
    scores: BTreeMap<usize, Scores>,
    influence: BTreeMap<usize, f64>,
    /// Units of the compressible zone: key (chain head or the message) → members.
    units: BTreeMap<usize, Vec<usize>>,
    median: f64,
    class: Classification,
    hops: Vec<(usize, usize)>,
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if !n.is_multiple_of(2) { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

fn analyse(messages: &[Message], zones: &Zones, chains: &[Option<usize>], config: &PlanConfig) -> Analysis {
    let q = question_index(messages).unwrap_or(0);
    let question = messages.get(q).map(|m| m.content.as_str()).unwrap_or("");
    let qwords = dimensions::content_words(question);
    // Susceptibility counts later carriers anywhere after the pinned zone.
    let tail: Vec<Scores> = messages[zones.pinned_end..]
        .iter()
        .map(|m| dimensions::score(&m.analysis_text(), &qwords))
        .collect();
    let weights = dimensions::susceptibilities(&tail, config.lambda);
    let mut scores = BTreeMap::new();
    let mut influence = BTreeMap::new();
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in zones.compressible() {
        let k = i - zones.pinned_end;
        scores.insert(i, tail[k]);
        influence.insert(i, dimensions::influence(&tail[k], &weights[k], config.gamma));
        units.entry(chains[i].unwrap_or(i)).or_default().push(i);
    }
    let mut values: Vec<f64> = influence.values().copied().collect();
    let median = median(&mut values);
    let hops = hop_links(messages, chains, question);
    let class = match config.class_override {
        Some(c) => Classification {
            class: c,
            scores: Vec::new(),
            reason: "given by the caller".to_owned(),
            overridden: true,
        },
        None => taxonomy::classify(question, &taxonomy::shape(messages, hops.len())),
    };
    Analysis { scores, influence, units, median, class, hops }
}

fn tier_from_rank(r: u8) -> Tier {
    match r {
        3 => Tier::Verbatim,
        2 => Tier::Light,
        _ => Tier::Heavy,
    }
}

/// Dimension-aware compression (METHOD.md §3).
#[derive(Debug, Clone, Default)]
pub struct V2 {
    /// Settings.
    pub config: PlanConfig,
}

impl Strategy for V2 {
    fn kind(&self) -> StrategyKind {
        StrategyKind::V2
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let cfg = &self.config;
        let b = base(StrategyKind::V2, messages, budget, counter, cfg)?;
        let a = analyse(messages, &b.zones, &b.chains, cfg);
        let chains = b.chains.clone();
        let mut p = finish(StrategyKind::V2, b, messages, budget, counter, cfg);
        let class = a.class.class;

        // 1. Base tier per message.
        let mut rank: BTreeMap<usize, u8> = BTreeMap::new();
        for (&i, s) in &a.scores {
            let inf = a.influence[&i];
            let bb = s.breadth();
            let mp = &mut p.messages[i];
            mp.dimensions = Some(*s);
            mp.breadth = Some(bb);
            mp.influence = Some(inf);
            let (r, why) = if mp.kind == MessageKind::ToolError {
                (1, "error → type + one line".to_owned())
            } else if inf > a.median && bb >= 3 {
                (3, format!("I={inf:.2} > median {:.2} and B={bb} ≥ 3", a.median))
            } else if chains[i].is_some() || (inf > 0.0 && inf >= a.median / 2.0) {
                let what = if chains[i].is_some() { "chain member" } else { "moderate influence" };
                (2, format!("{what}, I={inf:.2}, B={bb}"))
            } else {
                (1, format!("low influence I={inf:.2}, B={bb}"))
            };
            rank.insert(i, r);
            mp.reason = why;
        }

        // 2. One tier per unit (chains never split): the highest member's,
        //    but a chain whose results all failed is heavy.
        let mut unit_rank: BTreeMap<usize, u8> = BTreeMap::new();
        let mut unit_why: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (&u, members) in &a.units {
            let tools: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&i| matches!(p.messages[i].kind, MessageKind::ToolResult | MessageKind::ToolError))
                .collect();
            let all_failed = !tools.is_empty() && tools.iter().all(|&i| p.messages[i].kind == MessageKind::ToolError);
            let r = if all_failed { 1 } else { members.iter().map(|i| rank[i]).max().unwrap_or(1) };
            unit_rank.insert(u, r);
            if members.len() > 1 {
                unit_why.entry(u).or_default().push(if all_failed {
                    "chain of failed calls → heavy".to_owned()
                } else {
                    format!("chain c{u} → {}", tier_from_rank(r).label())
                });
            }
        }
        let unit_max_inf = |u: usize| -> f64 {
            a.units[&u].iter().map(|i| a.influence[i]).fold(0.0, f64::max)
        };
        let unit_text = |u: usize| -> String {
            a.units[&u].iter().map(|&i| messages[i].analysis_text()).collect::<Vec<_>>().join("\n")
        };
        let has_kind = |u: usize, k: MessageKind| a.units[&u].iter().any(|&i| p.messages[i].kind == k);
        let raise = |ur: &mut BTreeMap<usize, u8>, why: &mut BTreeMap<usize, Vec<String>>, u: usize, r: u8, text: String| {
            if let Some(cur) = ur.get_mut(&u)
                && *cur < r
            {
                *cur = r;
                why.entry(u).or_default().push(text);
            }
        };

        // 3. Class rules.
        match class {
            ProblemClass::Lookup => {
                let best = a
                    .units
                    .keys()
                    .copied()
                    .filter(|&u| has_kind(u, MessageKind::ToolResult))
                    .max_by(|x, y| unit_max_inf(*x).total_cmp(&unit_max_inf(*y)).then(x.cmp(y)));
                for (&u, r) in unit_rank.iter_mut() {
                    if Some(u) == best {
                        if *r < 3 {
                            unit_why.entry(u).or_default().push("lookup: best tool result → verbatim".to_owned());
                        }
                        *r = 3;
                    } else if *r == 2 {
                        *r = 1;
                        unit_why.entry(u).or_default().push("lookup: the rest compressed hard".to_owned());
                    }
                }
            }
            ProblemClass::MultiHop => {
                let sources: std::collections::BTreeSet<usize> = a.hops.iter().map(|h| h.0).collect();
                for &(from, to) in &a.hops {
                    for u in [from, to] {
                        raise(&mut unit_rank, &mut unit_why, u, 2, "multi-hop: link of the chain".to_owned());
                    }
                    if !sources.contains(&to) {
                        raise(&mut unit_rank, &mut unit_why, to, 3, "multi-hop: last hop → verbatim".to_owned());
                    }
                }
            }
            ProblemClass::Exploratory => {
                for (&u, r) in unit_rank.iter_mut() {
                    if has_kind(u, MessageKind::ToolResult) {
                        if *r < 3 {
                            unit_why.entry(u).or_default().push("exploratory: success in full".to_owned());
                        }
                        *r = 3;
                    } else if has_kind(u, MessageKind::ToolError) {
                        *r = 1;
                        unit_why.entry(u).or_default().push("exploratory: failure, one line".to_owned());
                    }
                }
            }
            ProblemClass::Aggregation => {
                let keys: Vec<usize> = a.units.keys().copied().collect();
                for u in keys {
                    let text = unit_text(u);
                    let data = a.units[&u].iter().any(|i| a.scores[i].carries(Dimension::Data));
                    if data && taxonomy::has_aggregate_words(&text) {
                        raise(&mut unit_rank, &mut unit_why, u, 3, "aggregation: states a total → verbatim".to_owned());
                    } else if data {
                        raise(&mut unit_rank, &mut unit_why, u, 2, "aggregation: data point, folded into totals".to_owned());
                    }
                }
                p.instructions.push("Fold individual data points into counts and totals; keep every total, count and sum exactly.".to_owned());
            }
            ProblemClass::Contradiction => {
                let keys: Vec<usize> = a.units.keys().copied().collect();
                for u in keys {
                    if has_kind(u, MessageKind::ToolResult) || taxonomy::has_conflict_words(&unit_text(u)) {
                        raise(&mut unit_rank, &mut unit_why, u, 2, "contradiction: a side of a conflict is never compressed hard".to_owned());
                    }
                }
                p.instructions.push("Where sources disagree, keep both versions and say which source said what.".to_owned());
            }
            ProblemClass::Temporal => {
                let keys: Vec<usize> = a.units.keys().copied().collect();
                for u in keys {
                    if a.units[&u].iter().any(|i| a.scores[i].carries(Dimension::Temporal)) {
                        raise(&mut unit_rank, &mut unit_why, u, 2, "temporal: carries a date, time or order".to_owned());
                    }
                }
                p.instructions.push("Keep the chronological order of events and every date and time exactly.".to_owned());
            }
        }

        // 4. Saturation: 3+ messages with the same kind of information fold.
        let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        for &i in a.scores.keys() {
            let m = &messages[i];
            let key = match m.kind() {
                MessageKind::ToolError => ("error".to_owned(), format!("{} {}", m.name.as_deref().unwrap_or("tool"), error_type(&m.content))),
                MessageKind::ToolResult => ("result".to_owned(), format!("{} {}", m.name.as_deref().unwrap_or("tool"), shape_key(&m.content))),
                _ => continue,
            };
            groups.entry(key).or_default().push(i);
        }
        for ((what, key), members) in groups {
            if members.len() < cfg.saturation {
                continue;
            }
            let label = if what == "error" {
                let (tool, ty) = key.split_once(' ').unwrap_or((key.as_str(), ""));
                format!("{} errors of {tool}, type: {ty}", members.len())
            } else {
                format!("{} near-identical results of {}", members.len(), key.split(' ').next().unwrap_or("tool"))
            };
            let ids: Vec<String> = members.iter().map(|&i| messages[i].id.0.clone()).collect();
            p.instructions.push(format!("Fold {} ({label}) into one line.", ids.join(", ")));
            if class != ProblemClass::Contradiction {
                // The newest member keeps its tier: newer information supersedes.
                for &i in &members[..members.len() - 1] {
                    let u = chains[i].unwrap_or(i);
                    if let Some(r) = unit_rank.get_mut(&u) {
                        *r = 1;
                        unit_why.entry(u).or_default().push(format!("saturated: {label}"));
                    }
                }
            }
            p.folds.push(FoldGroup { label, members });
        }

        // 5. Write tiers, then restore the budget by demoting verbatim units.
        let apply_units = |p: &mut CompactionPlan, unit_rank: &BTreeMap<usize, u8>, unit_why: &BTreeMap<usize, Vec<String>>| {
            for (&u, members) in &a.units {
                for &i in members {
                    p.messages[i].tier = tier_from_rank(unit_rank[&u]);
                    if let Some(w) = unit_why.get(&u) {
                        let base = p.messages[i].reason.split(" | ").next().unwrap_or("").to_owned();
                        p.messages[i].reason = format!("{base} | {}", w.join("; "));
                    }
                }
            }
        };
        apply_units(&mut p, &unit_rank, &unit_why);
        p.estimated_tokens_after = estimate_after(&p, messages, counter);
        while p.estimated_tokens_after > budget.threshold() {
            let victim = unit_rank
                .iter()
                .filter(|(_, r)| **r == 3)
                .map(|(u, _)| *u)
                .min_by(|x, y| unit_max_inf(*x).total_cmp(&unit_max_inf(*y)).then(y.cmp(x)));
            let Some(u) = victim else { break };
            unit_rank.insert(u, 2);
            unit_why.entry(u).or_default().push("budget: demoted to light".to_owned());
            p.notes.push(format!("budget: verbatim unit c{u} demoted to light to fit the threshold"));
            apply_units(&mut p, &unit_rank, &unit_why);
            p.estimated_tokens_after = estimate_after(&p, messages, counter);
        }
        p.median_influence = Some(a.median);
        p.class = Some(a.class);
        Ok(p)
    }
}

/// A coarse shape of a tool result for saturation: the first 60 characters,
/// lower-cased, digits replaced by `#`.
fn shape_key(content: &str) -> String {
    content
        .chars()
        .take(60)
        .map(|c| if c.is_ascii_digit() { '#' } else { c.to_ascii_lowercase() })
        .collect()
}

/// The withholding test's outcome per unit.
struct Withheld {
    /// Unit → (Δ, size of the block it was withheld in; 1 = alone).
    delta: BTreeMap<usize, (f64, usize)>,
    /// Evaluations made, the full context's included.
    evaluations: usize,
}

/// Δ per unit: `Perf(ctx) − Perf(ctx \ block)`.
///
/// With `budget` 0, or enough evaluations for every unit, each unit is
/// withheld alone (the exact test, one evaluation per unit after the full
/// context's). Otherwise, adaptive group testing within the budget: half of
/// it withholds contiguous blocks of units (in history order); then, while two
/// evaluations remain, the block with the highest Δ is split in two halves and
/// each half is withheld again. A unit takes the Δ of the smallest block it
/// was withheld in. A block whose Δ is ≈ 0 is not split (its units are
/// dropped together): that assumes no unit matters only when another of the
/// block is present — the price of the budget, stated in the plan's notes.
fn withholding(
    e: &mut dyn ProbeEvaluator,
    messages: &[Message],
    units: &BTreeMap<usize, Vec<usize>>,
    budget: usize,
    eps: f64,
) -> Result<Withheld, ForgettingError> {
    // A unit's key is its first message (a chain is keyed by its call), so
    // key order is history order.
    let order: Vec<usize> = units.keys().copied().collect();
    let full = e.perf(messages)?;
    let mut evaluations = 1;
    let mut eval = |block: &[usize], evaluations: &mut usize| -> Result<f64, ForgettingError> {
        let out: std::collections::BTreeSet<usize> = block.iter().flat_map(|u| units[u].iter().copied()).collect();
        let without: Vec<Message> =
            messages.iter().enumerate().filter(|(i, _)| !out.contains(i)).map(|(_, m)| m.clone()).collect();
        *evaluations += 1;
        Ok(full - e.perf(&without)?)
    };
    let n = order.len();
    let mut delta = BTreeMap::new();
    if budget == 0 || budget > n {
        for &u in &order {
            let d = eval(&[u], &mut evaluations)?;
            delta.insert(u, (d, 1));
        }
        return Ok(Withheld { delta, evaluations });
    }
    let first = ((budget - 1) / 2).clamp(1, n);
    let mut frontier: Vec<(f64, Vec<usize>)> = Vec::new();
    let mut test = |block: Vec<usize>, evaluations: &mut usize, delta: &mut BTreeMap<usize, (f64, usize)>, frontier: &mut Vec<(f64, Vec<usize>)>| {
        let d = eval(&block, evaluations)?;
        for &u in &block {
            delta.insert(u, (d, block.len()));
        }
        if block.len() > 1 && d > eps {
            frontier.push((d, block));
        }
        Ok::<(), ForgettingError>(())
    };
    for k in 0..first {
        let block = order[k * n / first..(k + 1) * n / first].to_vec();
        test(block, &mut evaluations, &mut delta, &mut frontier)?;
    }
    while budget.saturating_sub(evaluations) >= 2 && !frontier.is_empty() {
        let best = frontier
            .iter()
            .enumerate()
            .max_by(|(_, x), (_, y)| x.0.total_cmp(&y.0).then(x.1.len().cmp(&y.1.len())))
            .map_or(0, |(i, _)| i);
        let (_, block) = frontier.swap_remove(best);
        let (left, right) = block.split_at(block.len() / 2);
        test(left.to_vec(), &mut evaluations, &mut delta, &mut frontier)?;
        test(right.to_vec(), &mut evaluations, &mut delta, &mut frontier)?;
    }
    Ok(Withheld { delta, evaluations })
}

/// v2.1: the withholding test `Δ(m) = Perf(ctx) − Perf(ctx \ m)` per unit:
/// high Δ verbatim, low Δ summarised, Δ ≈ 0 dropped. With
/// [`Ranking::Phi`] the v2 influence takes Δ's place (the ablation arm).
pub struct V21<'a> {
    /// Settings.
    pub config: PlanConfig,
    evaluator: Option<&'a mut dyn ProbeEvaluator>,
}

impl<'a> V21<'a> {
    /// v2.1 ranking by Δ through `evaluator`.
    pub fn new(config: PlanConfig, evaluator: &'a mut dyn ProbeEvaluator) -> Self {
        V21 { config, evaluator: Some(evaluator) }
    }

    /// v2.1 with the Φ ranking (no evaluator).
    pub fn phi(mut config: PlanConfig) -> Self {
        config.ranking = Ranking::Phi;
        V21 { config, evaluator: None }
    }
}

impl Strategy for V21<'_> {
    fn kind(&self) -> StrategyKind {
        StrategyKind::V21
    }

    fn plan(&mut self, messages: &[Message], budget: &Budget, counter: &dyn TokenCounter) -> Result<CompactionPlan, ForgettingError> {
        let cfg = self.config.clone();
        let b = base(StrategyKind::V21, messages, budget, counter, &cfg)?;
        let a = analyse(messages, &b.zones, &b.chains, &cfg);
        let mut p = finish(StrategyKind::V21, b, messages, budget, counter, &cfg);
        for (&i, s) in &a.scores {
            p.messages[i].dimensions = Some(*s);
            p.messages[i].breadth = Some(s.breadth());
            p.messages[i].influence = Some(a.influence[&i]);
        }
        let mut score: BTreeMap<usize, f64> = BTreeMap::new();
        // Units whose Δ is that of a block of this many units withheld together.
        let mut block_of: BTreeMap<usize, usize> = BTreeMap::new();
        let ranking_name;
        match (cfg.ranking, self.evaluator.as_deref_mut()) {
            (Ranking::Withholding, Some(e)) => {
                ranking_name = "Δ";
                p.notes.push(format!("Δ by {}", e.describe()));
                if !a.units.is_empty() {
                    let w = withholding(e, messages, &a.units, cfg.withholding_budget, cfg.drop_epsilon)?;
                    if w.evaluations <= a.units.len() {
                        p.notes.push(format!(
                            "budgeted withholding test: {} evaluations for {} units (the exact test takes {}); units share the Δ of the block they were withheld in",
                            w.evaluations,
                            a.units.len(),
                            a.units.len() + 1
                        ));
                    }
                    for (&u, &(d, size)) in &w.delta {
                        score.insert(u, d);
                        if size > 1 {
                            block_of.insert(u, size);
                        }
                        for &i in &a.units[&u] {
                            p.messages[i].delta = Some(d);
                        }
                    }
                }
            }
            (Ranking::Withholding, None) => {
                return Err(ForgettingError::InvalidSetting {
                    name: "evaluator",
                    reason: "v2.1 ranks by Δ, which needs a probe evaluator (a model, or an offline proxy)".to_owned(),
                });
            }
            (Ranking::Phi, _) => {
                ranking_name = "Φ-influence";
                p.notes.push("ranking by Φ-weighted influence (ablation arm of v2.1)".to_owned());
                for (&u, members) in &a.units {
                    score.insert(u, members.iter().map(|i| a.influence[i]).fold(0.0, f64::max));
                }
            }
        }
        let max = score.values().copied().fold(0.0, f64::max);
        let mut unit_tier: BTreeMap<usize, Tier> = BTreeMap::new();
        for (&u, &s) in &score {
            let t = if s <= cfg.drop_epsilon {
                Tier::Drop
            } else if s >= cfg.verbatim_fraction * max {
                Tier::Verbatim
            } else {
                Tier::Light
            };
            unit_tier.insert(u, t);
        }
        if max <= cfg.drop_epsilon && !score.is_empty() {
            p.notes.push(format!("every {ranking_name} is ≈ 0: the whole compressible zone is dropped"));
        }
        let write = |p: &mut CompactionPlan, unit_tier: &BTreeMap<usize, Tier>, extra: &BTreeMap<usize, String>| {
            for (&u, members) in &a.units {
                let t = unit_tier[&u];
                for &i in members {
                    p.messages[i].tier = t;
                    let s = score[&u];
                    let mut r = match t {
                        Tier::Drop => format!("{ranking_name}={s:.3} ≈ 0 → drop"),
                        Tier::Verbatim => format!("{ranking_name}={s:.3} ≥ {:.2}·max {max:.3} → verbatim", cfg.verbatim_fraction),
                        _ => format!("{ranking_name}={s:.3} low → summarised"),
                    };
                    if members.len() > 1 {
                        r.push_str(&format!(" (chain c{u} as one unit)"));
                    }
                    if let Some(k) = block_of.get(&u) {
                        r.push_str(&format!(" (Δ of a block of {k} units withheld together)"));
                    }
                    if let Some(x) = extra.get(&u) {
                        r.push_str(" | ");
                        r.push_str(x);
                    }
                    p.messages[i].reason = r;
                }
            }
        };
        let mut extra: BTreeMap<usize, String> = BTreeMap::new();
        write(&mut p, &unit_tier, &extra);
        p.estimated_tokens_after = estimate_after(&p, messages, counter);
        while p.estimated_tokens_after > budget.threshold() {
            let victim = unit_tier
                .iter()
                .filter(|(_, t)| **t == Tier::Verbatim)
                .map(|(u, _)| *u)
                .min_by(|x, y| score[x].total_cmp(&score[y]).then(y.cmp(x)));
            let Some(u) = victim else { break };
            unit_tier.insert(u, Tier::Light);
            extra.insert(u, "budget: demoted to light".to_owned());
            p.notes.push(format!("budget: verbatim unit c{u} demoted to light to fit the threshold"));
            write(&mut p, &unit_tier, &extra);
            p.estimated_tokens_after = estimate_after(&p, messages, counter);
        }
        p.median_influence = Some(a.median);
        p.class = Some(a.class);
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    //! Tier rules per strategy and per problem class, on small hand-built
    //! histories whose expected fate can be read off the method.
    use super::*;
    use crate::evaluator::KeywordOracle;
    use crate::message::ToolCall;
    use crate::scenario::{Keyword, Probe, ProbeDimension};
    use crate::tokens::ApproxTokenCounter;
    use serde_json::json;

    /// One tool round: call arguments, result text, whether it failed, and an
    /// optional interpretation by the assistant.
    struct R<'a>(serde_json::Value, &'a str, bool, Option<&'a str>);

    /// `[system, question, rounds…, user "anything else?", assistant "no"]`:
    /// with `recent = 2` the last two are the recent zone and every round is
    /// compressible.
    fn history(question: &str, rounds: &[R<'_>]) -> Vec<Message> {
        let mut h = vec![Message::system("sys", "You are an investigator."), Message::user("q", question)];
        for (n, R(args, result, failed, interp)) in rounds.iter().enumerate() {
            let call = ToolCall { id: format!("c{n}"), name: "http_get".into(), arguments: args.clone() };
            h.push(Message::assistant_calls(&format!("a{n}"), "", vec![call]));
            let id = format!("t{n}");
            h.push(if *failed {
                Message::tool_error(&id, &format!("c{n}"), "http_get", result)
            } else {
                Message::tool_result(&id, &format!("c{n}"), "http_get", result)
            });
            if let Some(text) = interp {
                h.push(Message::assistant(&format!("i{n}"), text));
            }
        }
        h.push(Message::user("more", "Anything else?"));
        h.push(Message::assistant("done", "No."));
        h
    }

    fn roomy() -> Budget {
        Budget { context: 100_000, reserve: 1_000, ratio: 0.75, recent: 2 }
    }

    fn v2(h: &[Message], class: ProblemClass) -> CompactionPlan {
        let cfg = PlanConfig { class_override: Some(class), ..PlanConfig::default() };
        plan(StrategyKind::V2, h, &roomy(), &ApproxTokenCounter, &cfg, None).unwrap()
    }

    fn tier(p: &CompactionPlan, id: &str) -> Tier {
        p.messages.iter().find(|m| m.id.0 == id).unwrap_or_else(|| panic!("no message {id}")).tier
    }

    const RICH: &str = "Invoice inv_30602 for customer Halvorsen Freight was created on 2026-03-01 at 02:14 by \
        retry-worker because the gateway timed out; it references payment pi_5Rk9xe, amount 18450.00 NOK, \
        owned by the Billing team.";

    #[test]
    fn none_keeps_everything() {
        let h = history("What is the duplicate invoice?", &[R(json!({"u": "/a"}), "ok", false, None)]);
        let p = plan(StrategyKind::None, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        assert!(p.messages.iter().all(|m| m.tier == Tier::Keep));
        assert_eq!(p.estimated_tokens_after, p.gauge.total());
    }

    #[test]
    fn baseline_keeps_the_first_message_and_the_recent_zone() {
        let h = history("What is it?", &[R(json!({"u": "/a"}), "x", false, Some("seen"))]);
        let p = plan(StrategyKind::Baseline, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        let kept: Vec<&str> = p.messages.iter().filter(|m| m.tier != Tier::Drop).map(|m| m.id.0.as_str()).collect();
        assert_eq!(kept, vec!["sys", "more", "done"]);
    }

    #[test]
    fn masking_elides_tool_outputs_older_than_the_window() {
        let rounds: Vec<R<'_>> = (0..4).map(|i| R(json!({"u": format!("/p/{i}")}), "payload", false, None)).collect();
        let h = history("What is it?", &rounds);
        let p = plan(StrategyKind::Masking, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        assert_eq!(tier(&p, "t0"), Tier::Mask);
        assert_eq!(tier(&p, "t1"), Tier::Mask);
        assert_eq!(tier(&p, "t2"), Tier::Keep, "inside the window of the last 2 outputs");
        assert_eq!(tier(&p, "t3"), Tier::Keep);
        assert_eq!(tier(&p, "a0"), Tier::Keep, "calls are never masked");
    }

    #[test]
    fn masking_closes_the_window_when_the_budget_demands() {
        let big = "z".repeat(4_000);
        let rounds: Vec<R<'_>> = (0..4).map(|i| R(json!({"u": format!("/p/{i}")}), big.as_str(), false, None)).collect();
        let h = history("What is it?", &rounds);
        let b = Budget { context: 2_048, reserve: 512, ratio: 0.75, recent: 2 };
        let p = plan(StrategyKind::Masking, &h, &b, &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        assert!(["t0", "t1", "t2", "t3"].iter().all(|id| tier(&p, id) == Tier::Mask));
        assert!(p.notes.iter().any(|n| n.contains("masked every")), "{:?}", p.notes);
    }

    #[test]
    fn v1_summarises_the_whole_compressible_zone() {
        let h = history("What is it?", &[R(json!({"u": "/a"}), "ConnectionError: refused", true, None), R(json!({"u": "/b"}), RICH, false, Some("Found it."))]);
        let p = plan(StrategyKind::V1, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap();
        for m in p.messages.iter().filter(|m| m.zone == Zone::Compressible) {
            assert_eq!(m.tier, Tier::Summarise, "{}", m.id);
        }
        assert!(tier(&p, "t0") == Tier::Summarise && p.messages[3].reason.contains("ConnectionError"));
    }

    #[test]
    fn lookup_keeps_the_best_result_verbatim_and_compresses_the_rest_hard() {
        let h = history(
            "Which invoice is the duplicate?",
            &[R(json!({"u": "/health"}), "ok", false, None), R(json!({"u": "/invoices"}), RICH, false, None), R(json!({"u": "/x"}), "fine", false, None)],
        );
        let p = v2(&h, ProblemClass::Lookup);
        assert_eq!(tier(&p, "a1"), Tier::Verbatim);
        assert_eq!(tier(&p, "t1"), Tier::Verbatim);
        for id in ["a0", "t0", "a2", "t2"] {
            assert_eq!(tier(&p, id), Tier::Heavy, "{id}");
        }
    }

    #[test]
    fn multi_hop_keeps_every_link_and_the_last_hop_verbatim() {
        let h = history(
            "Who is on call for the route /checkout?",
            &[
                R(json!({"u": "/routes/checkout"}), r#"{"service": "payments-api"}"#, false, None),
                R(json!({"u": "/services/payments-api"}), r#"{"owner_team": "team-ledger"}"#, false, None),
                R(json!({"team": "team-ledger"}), "ok x", false, None),
            ],
        );
        let p = v2(&h, ProblemClass::MultiHop);
        assert!(tier(&p, "t0").rank() >= Tier::Light.rank());
        assert!(tier(&p, "t1").rank() >= Tier::Light.rank());
        assert_eq!(tier(&p, "t2"), Tier::Verbatim, "the last hop, though poor in dimensions, ends the chain");
        assert!(p.messages[6].reason.contains("multi-hop"), "{}", p.messages[6].reason);
    }

    #[test]
    fn exploratory_keeps_successes_in_full_and_failures_as_one_line() {
        let h = history(
            "Investigate why the nightly export is failing",
            &[
                R(json!({"u": "/run?x=1"}), "ConnectionError: connection refused", true, None),
                R(json!({"u": "/run?x=2"}), "PermissionError: denied", true, None),
                R(json!({"u": "/run?x=3"}), "export ok with --no-compress", false, None),
            ],
        );
        let p = v2(&h, ProblemClass::Exploratory);
        for id in ["a0", "t0", "a1", "t1"] {
            assert_eq!(tier(&p, id), Tier::Heavy, "{id}");
        }
        assert_eq!(tier(&p, "t2"), Tier::Verbatim);
        assert_eq!(tier(&p, "a2"), Tier::Verbatim, "the call goes with its result");
    }

    #[test]
    fn aggregation_keeps_totals_verbatim_and_folds_data_points() {
        let h = history(
            "How many checkouts failed?",
            &[
                R(json!({"r": "eu"}), "eu-west: 41 failed", false, None),
                R(json!({"r": "us"}), "us-east: 56 failed", false, None),
                R(json!({"r": "all"}), "total across regions: 97 failed", false, None),
            ],
        );
        let p = v2(&h, ProblemClass::Aggregation);
        assert_eq!(tier(&p, "t2"), Tier::Verbatim);
        assert!(tier(&p, "t0").rank() >= Tier::Light.rank());
        assert!(p.instructions.iter().any(|i| i.contains("totals")), "{:?}", p.instructions);
    }

    #[test]
    fn contradiction_never_folds_or_compresses_a_side_hard() {
        // Three near-identical results would be a saturation group in any
        // other class; in a contradiction each of them may be a side.
        let rounds: Vec<R<'_>> = ["status: 12 errors", "status: 31 errors", "status: 12 errors"]
            .iter()
            .enumerate()
            .map(|(i, r)| R(json!({"src": i}), r, false, None))
            .collect();
        let h = history("The dashboard and the logs disagree: which is right?", &rounds);
        let p = v2(&h, ProblemClass::Contradiction);
        assert_eq!(p.folds.len(), 1, "the group is still reported");
        for id in ["t0", "t1", "t2"] {
            assert!(tier(&p, id).rank() >= Tier::Light.rank(), "{id} is {:?}", tier(&p, id));
        }
        assert!(p.instructions.iter().any(|i| i.contains("both versions")));
        // The same history as a lookup demotes the older members.
        let q = v2(&h, ProblemClass::Lookup);
        assert!(["t0", "t1", "t2"].iter().any(|id| tier(&q, id) == Tier::Heavy));
    }

    #[test]
    fn temporal_raises_dated_messages_and_asks_for_chronology() {
        let mut h = history("When did the outage start?", &[R(json!({"u": "/a"}), "x", true, None)]);
        // A plain assistant remark with a date, outside any chain.
        h.insert(4, Message::assistant("note", "the deploy went out 2026-03-01 at 02:00, then alarms"));
        let p = v2(&h, ProblemClass::Temporal);
        assert!(tier(&p, "note").rank() >= Tier::Light.rank());
        assert!(p.instructions.iter().any(|i| i.contains("chronological")));
    }

    #[test]
    fn saturation_folds_repeated_errors_into_one_labelled_line() {
        let rounds: Vec<R<'_>> =
            (0..3).map(|i| R(json!({"u": format!("/try/{i}")}), "TimeoutError: upstream timed out", true, None)).collect();
        let h = history("What is the value of x?", &rounds);
        let p = v2(&h, ProblemClass::Lookup);
        assert_eq!(p.folds.len(), 1);
        assert_eq!(p.folds[0].label, "3 errors of http_get, type: TimeoutError");
        assert!(p.instructions.iter().any(|i| i.starts_with("Fold t0, t1, t2")), "{:?}", p.instructions);
    }

    #[test]
    fn a_chain_shares_one_tier() {
        let h = history(
            "Which invoice is the duplicate?",
            &[R(json!({"u": "/health"}), "ok", false, Some("Healthy.")), R(json!({"u": "/inv"}), RICH, false, Some("inv_30602 is the duplicate."))],
        );
        for class in ProblemClass::TIE_ORDER {
            let p = v2(&h, class);
            assert_eq!(tier(&p, "a1"), tier(&p, "t1"), "{class}");
            assert_eq!(tier(&p, "t1"), tier(&p, "i1"), "{class}");
            assert_eq!(tier(&p, "a0"), tier(&p, "i0"), "{class}");
        }
    }

    #[test]
    fn budget_pressure_demotes_verbatim_units_lowest_influence_first() {
        let rounds: Vec<R<'_>> = (0..6).map(|i| R(json!({"u": format!("/inv/{i}")}), RICH, false, None)).collect();
        let h = history("Investigate the duplicate invoice", &rounds);
        let before = v2(&h, ProblemClass::Exploratory).messages.iter().filter(|m| m.tier == Tier::Verbatim).count();
        assert!(before > 0);
        let cfg = PlanConfig { class_override: Some(ProblemClass::Exploratory), ..PlanConfig::default() };
        // Shrink the budget until the planner has to demote.
        let mut demoted = false;
        for context in [4_000usize, 3_000, 2_400, 2_000, 1_600, 1_400, 1_200, 1_000, 800, 600] {
            let tight = Budget { context, reserve: 100, ratio: 0.75, recent: 2 };
            let p = plan(StrategyKind::V2, &h, &tight, &ApproxTokenCounter, &cfg, None).unwrap();
            if p.notes.iter().any(|n| n.contains("demoted to light")) {
                let after = p.messages.iter().filter(|m| m.tier == Tier::Verbatim).count();
                assert!(after < before, "{after} verbatim after demotion vs {before}");
                demoted = true;
                break;
            }
        }
        assert!(demoted, "no budget forced a demotion");
    }

    #[test]
    fn gamma_changes_the_influence_of_broad_messages_only() {
        let h = history("Which invoice?", &[R(json!({"u": "/inv"}), RICH, false, None)]);
        let at = |gamma: f64| {
            let cfg = PlanConfig { gamma, class_override: Some(ProblemClass::Lookup), ..PlanConfig::default() };
            let p = plan(StrategyKind::V2, &h, &roomy(), &ApproxTokenCounter, &cfg, None).unwrap();
            p.messages[3].influence.unwrap()
        };
        assert!(at(2.0) > at(1.5) && at(1.5) > at(1.0), "B ≥ 2 grows with γ");
    }

    fn probe(keyword: &str) -> Probe {
        Probe {
            id: "p".into(),
            question: "who?".into(),
            dimension: ProbeDimension::EntityRecall,
            required: vec![Keyword::One(keyword.into())],
            partial: vec![],
            reference: keyword.into(),
        }
    }

    #[test]
    fn v21_keeps_high_delta_verbatim_and_drops_zero_delta() {
        let h = history(
            "Who owns the service?",
            &[R(json!({"u": "/noise"}), "nothing here", false, None), R(json!({"u": "/owner"}), "owner: team-ledger", false, None)],
        );
        let mut oracle = KeywordOracle::new(vec![probe("team-ledger")]);
        let e: &mut dyn ProbeEvaluator = &mut oracle;
        let p = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), Some(e)).unwrap();
        assert_eq!(tier(&p, "t1"), Tier::Verbatim);
        assert_eq!(tier(&p, "a1"), Tier::Verbatim);
        assert_eq!(tier(&p, "t0"), Tier::Drop);
        assert!(p.messages[5].delta.unwrap() > 0.0 && p.messages[3].delta == Some(0.0));
    }

    /// Counts evaluations, delegating to the keyword oracle.
    struct Counting(KeywordOracle, usize);
    impl ProbeEvaluator for Counting {
        fn perf(&mut self, context: &[Message]) -> Result<f64, ForgettingError> {
            self.1 += 1;
            self.0.perf(context)
        }
        fn describe(&self) -> String {
            "counting oracle".to_owned()
        }
    }

    /// Twelve rounds, two of which hold what the probes ask.
    fn twelve_rounds() -> Vec<Message> {
        let rounds: Vec<R<'_>> = (0..12)
            .map(|k| match k {
                3 => R(json!({"u": "/owner"}), "owner: team-ledger", false, None),
                9 => R(json!({"u": "/budget"}), "budget code BX-4471", false, None),
                _ => R(json!({"u": format!("/noise/{k}")}), "nothing relevant here", false, None),
            })
            .collect();
        history("Who owns the service and what is its budget?", &rounds)
    }

    #[test]
    fn v21_budgeted_withholding_finds_the_same_tiers_with_fewer_evaluations() {
        let h = twelve_rounds();
        let probes = || vec![probe("team-ledger"), probe("BX-4471")];
        let mut exact = Counting(KeywordOracle::new(probes()), 0);
        let pe = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), Some(&mut exact)).unwrap();
        assert_eq!(exact.1, 13, "the exact test: the full context + one per unit");
        let cfg = PlanConfig { withholding_budget: 9, ..PlanConfig::default() };
        let mut budgeted = Counting(KeywordOracle::new(probes()), 0);
        let pb = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, Some(&mut budgeted)).unwrap();
        assert!(budgeted.1 <= 9, "{} evaluations over the budget", budgeted.1);
        for (a, b) in pe.messages.iter().zip(&pb.messages) {
            assert_eq!(a.tier, b.tier, "{}: exact {:?}, budgeted {:?} ({})", a.id.0, a.tier, b.tier, b.reason);
        }
        assert_eq!(tier(&pb, "t3"), Tier::Verbatim);
        assert_eq!(tier(&pb, "t9"), Tier::Verbatim);
        assert_eq!(tier(&pb, "t0"), Tier::Drop);
        assert!(pb.notes.iter().any(|n| n.contains("budgeted withholding test")), "{:?}", pb.notes);
        assert!(pb.messages.iter().any(|m| m.reason.contains("withheld together")));
        // A budget as large as the exact test's is the exact test.
        let cfg = PlanConfig { withholding_budget: 13, ..PlanConfig::default() };
        let mut same = Counting(KeywordOracle::new(probes()), 0);
        let ps = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, Some(&mut same)).unwrap();
        assert_eq!(same.1, 13);
        assert_eq!(ps.messages, pe.messages);
    }

    #[test]
    fn v21_a_tight_budget_keeps_whole_blocks_rather_than_losing_a_fact() {
        // Two evaluations: the full context and all units withheld together;
        // the block's Δ is the highest, so every unit is kept verbatim, none dropped.
        let h = twelve_rounds();
        let cfg = PlanConfig { withholding_budget: 2, ..PlanConfig::default() };
        let mut e = Counting(KeywordOracle::new(vec![probe("team-ledger")]), 0);
        let p = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, Some(&mut e)).unwrap();
        assert_eq!(e.1, 2);
        assert_eq!(tier(&p, "t3"), Tier::Verbatim);
        assert_eq!(tier(&p, "t0"), Tier::Verbatim);
        let bad = PlanConfig { withholding_budget: 1, ..PlanConfig::default() };
        assert!(matches!(bad.validate(), Err(ForgettingError::InvalidSetting { name: "withholding_budget", .. })));
    }

    #[test]
    fn v21_needs_an_evaluator_unless_ranking_by_phi() {
        let h = history("Who?", &[R(json!({"u": "/a"}), RICH, false, None)]);
        let err = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap_err();
        assert!(matches!(err, ForgettingError::InvalidSetting { name: "evaluator", .. }));
        let cfg = PlanConfig { ranking: Ranking::Phi, ..PlanConfig::default() };
        let p = plan(StrategyKind::V21, &h, &roomy(), &ApproxTokenCounter, &cfg, None).unwrap();
        assert_eq!(tier(&p, "t0"), Tier::Verbatim, "the only unit has the highest Φ score");
        assert!(p.notes.iter().any(|n| n.contains("ablation")));
    }
}
