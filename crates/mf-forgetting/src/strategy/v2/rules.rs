//! v2's class rules (METHOD.md §3's table) and saturation folds, applied to
//! graded units.

use std::collections::{BTreeMap, BTreeSet};

use super::super::analysis::Analysis;
use super::super::units::UnitTiers;
use crate::dimensions::Dimension;
use crate::message::{Message, MessageKind};
use crate::plan::{CompactionPlan, Fidelity, FoldGroup};
use crate::reason::Reason;
use crate::summary::error_type;
use crate::taxonomy::{self, ProblemClass};

/// Whether any member of unit `u` is of kind `k`.
fn has_kind(p: &CompactionPlan, a: &Analysis, u: usize, k: MessageKind) -> bool {
    a.units[&u].iter().any(|&i| p.messages[i].kind == k)
}

/// The analysis text of a unit's members, one per line.
fn unit_text(a: &Analysis, messages: &[Message], u: usize) -> String {
    a.units[&u].iter().map(|&i| messages[i].analysis_text()).collect::<Vec<_>>().join("\n")
}

/// Whether any member of unit `u` carries dimension `d`.
fn carries(a: &Analysis, u: usize, d: Dimension) -> bool {
    a.units[&u].iter().any(|i| a.scores[i].carries(d))
}

/// Step 3: the class's sufficient statistic.
///
/// | class | rule |
/// | --- | --- |
/// | lookup | the unit with the most influential tool result verbatim, light units heavy |
/// | multi-hop | every hop link at least light, the last hop verbatim |
/// | exploratory | successes verbatim, failures heavy |
/// | aggregation | totals verbatim, data points at least light |
/// | contradiction | tool results and conflict statements at least light |
/// | temporal | dated units at least light |
pub(super) fn class_rules(p: &mut CompactionPlan, a: &Analysis, messages: &[Message], units: &mut UnitTiers) {
    let keys: Vec<usize> = a.units.keys().copied().collect();
    match a.class.class {
        ProblemClass::Lookup => {
            let best = keys
                .iter()
                .copied()
                .filter(|&u| has_kind(p, a, u, MessageKind::ToolResult))
                .max_by(|x, y| a.unit_max_influence(*x).total_cmp(&a.unit_max_influence(*y)).then(x.cmp(y)));
            for u in keys {
                if Some(u) == best {
                    units.raise(u, Fidelity::Verbatim, Reason::LookupBest);
                } else if units.fidelity(u) == Some(Fidelity::Light) {
                    units.set(u, Fidelity::Heavy, Reason::LookupRest);
                }
            }
        }
        ProblemClass::MultiHop => {
            let sources: BTreeSet<usize> = a.hops.iter().map(|h| h.0).collect();
            for &(from, to) in &a.hops {
                for u in [from, to] {
                    units.raise(u, Fidelity::Light, Reason::MultiHopLink);
                }
                if !sources.contains(&to) {
                    units.raise(to, Fidelity::Verbatim, Reason::MultiHopLast);
                }
            }
        }
        ProblemClass::Exploratory => {
            for u in keys {
                if has_kind(p, a, u, MessageKind::ToolResult) {
                    units.raise(u, Fidelity::Verbatim, Reason::ExploratorySuccess);
                } else if has_kind(p, a, u, MessageKind::ToolError) {
                    units.set(u, Fidelity::Heavy, Reason::ExploratoryFailure);
                }
            }
        }
        ProblemClass::Aggregation => {
            for u in keys {
                if !carries(a, u, Dimension::Data) {
                    continue;
                }
                if taxonomy::has_aggregate_words(&unit_text(a, messages, u)) {
                    units.raise(u, Fidelity::Verbatim, Reason::AggregationTotal);
                } else {
                    units.raise(u, Fidelity::Light, Reason::AggregationDataPoint);
                }
            }
            p.instructions.push("Fold individual data points into counts and totals; keep every total, count and sum exactly.".to_owned());
        }
        ProblemClass::Contradiction => {
            for u in keys {
                if has_kind(p, a, u, MessageKind::ToolResult) || taxonomy::has_conflict_words(&unit_text(a, messages, u)) {
                    units.raise(u, Fidelity::Light, Reason::ContradictionSide);
                }
            }
            p.instructions.push("Where sources disagree, keep both versions and say which source said what.".to_owned());
        }
        ProblemClass::Temporal => {
            for u in keys {
                if carries(a, u, Dimension::Temporal) {
                    units.raise(u, Fidelity::Light, Reason::TemporalDated);
                }
            }
            p.instructions.push("Keep the chronological order of events and every date and time exactly.".to_owned());
        }
    }
}

/// What a saturation group shares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Shared {
    /// Errors of one tool with one error type.
    Errors { tool: String, error_type: String },
    /// Results of one tool with one shape ([`shape_key`]).
    Results { tool: String, shape: String },
}

impl Shared {
    fn of(m: &Message) -> Option<Shared> {
        let tool = m.name.as_deref().unwrap_or("tool").to_owned();
        match m.kind() {
            MessageKind::ToolError => Some(Shared::Errors { tool, error_type: error_type(&m.content) }),
            MessageKind::ToolResult => Some(Shared::Results { tool, shape: shape_key(&m.content) }),
            _ => None,
        }
    }

    fn label(&self, n: usize) -> String {
        match self {
            Shared::Errors { tool, error_type } => format!("{n} errors of {tool}, type: {error_type}"),
            Shared::Results { tool, .. } => format!("{n} near-identical results of {tool}"),
        }
    }
}

/// A coarse shape of a tool result for saturation: the first 60 characters,
/// lower-cased, digits replaced by `#`.
fn shape_key(content: &str) -> String {
    content.chars().take(60).map(|c| if c.is_ascii_digit() { '#' } else { c.to_ascii_lowercase() }).collect()
}

/// Step 4: saturation. 3+ messages (the `saturation` setting) carrying the
/// same kind of information — errors of one tool and type, or results of one
/// tool with one shape — are folded into one labelled line: the summariser
/// is told so, and every member but the newest (newer information
/// supersedes) becomes heavy. In a contradiction nothing is lowered: each
/// member may be a side of the conflict.
pub(super) fn fold_saturated(p: &mut CompactionPlan, a: &Analysis, messages: &[Message], chains: &[Option<usize>], units: &mut UnitTiers) {
    let mut groups: BTreeMap<Shared, Vec<usize>> = BTreeMap::new();
    for &i in a.scores.keys() {
        if let Some(key) = Shared::of(&messages[i]) {
            groups.entry(key).or_default().push(i);
        }
    }
    for (shared, members) in groups {
        if members.len() < p.config.saturation {
            continue;
        }
        let label = shared.label(members.len());
        let ids: Vec<&str> = members.iter().map(|&i| messages[i].id.as_str()).collect();
        p.instructions.push(format!("Fold {} ({label}) into one line.", ids.join(", ")));
        if a.class.class != ProblemClass::Contradiction {
            for &i in &members[..members.len() - 1] {
                units.set(chains[i].unwrap_or(i), Fidelity::Heavy, Reason::Saturated { label: label.clone() });
            }
        }
        p.folds.push(FoldGroup { label, members });
    }
}
