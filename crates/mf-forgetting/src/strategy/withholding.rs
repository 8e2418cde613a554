//! The withholding test of v2.1: `Δ(block) = Perf(ctx) − Perf(ctx \ block)`,
//! exact (one unit at a time) or within an evaluation budget (adaptive group
//! testing).

use std::collections::{BTreeMap, BTreeSet};

use super::units::Units;
use crate::error::ForgettingError;
use crate::evaluator::ProbeEvaluator;
use crate::message::Message;

/// The withholding test's outcome per unit.
pub(super) struct Withheld {
    /// Unit → (Δ, size of the block it was withheld in; 1 = alone).
    pub delta: BTreeMap<usize, (f64, usize)>,
    /// Evaluations made, the full context's included.
    pub evaluations: usize,
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
pub(super) fn withholding(e: &mut dyn ProbeEvaluator, messages: &[Message], units: &Units, budget: usize, eps: f64) -> Result<Withheld, ForgettingError> {
    // A unit's key is its first message (a chain is keyed by its call), so
    // key order is history order.
    let order: Vec<usize> = units.keys().copied().collect();
    let full = e.perf(messages)?;
    let mut evaluations = 1;
    // The contexts of one round are evaluated together (`perf_many`): they
    // share the history up to their first withheld message.
    let without = |block: &[usize]| -> Vec<Message> {
        let out: BTreeSet<usize> = block.iter().flat_map(|u| units[u].iter().copied()).collect();
        messages.iter().enumerate().filter(|(i, _)| !out.contains(i)).map(|(_, m)| m.clone()).collect()
    };
    let mut eval = |blocks: &[Vec<usize>], evaluations: &mut usize| -> Result<Vec<f64>, ForgettingError> {
        let contexts: Vec<Vec<Message>> = blocks.iter().map(|b| without(b)).collect();
        *evaluations += blocks.len();
        Ok(e.perf_many(&contexts)?.into_iter().map(|p| full - p).collect())
    };
    let n = order.len();
    let mut delta = BTreeMap::new();
    if budget == 0 || budget > n {
        let blocks: Vec<Vec<usize>> = order.iter().map(|&u| vec![u]).collect();
        for (&u, d) in order.iter().zip(eval(&blocks, &mut evaluations)?) {
            delta.insert(u, (d, 1));
        }
        return Ok(Withheld { delta, evaluations });
    }
    let first = ((budget - 1) / 2).clamp(1, n);
    let mut frontier: Vec<(f64, Vec<usize>)> = Vec::new();
    let mut test = |blocks: Vec<Vec<usize>>, evaluations: &mut usize, delta: &mut BTreeMap<usize, (f64, usize)>, frontier: &mut Vec<(f64, Vec<usize>)>| {
        let ds = eval(&blocks, evaluations)?;
        for (block, d) in blocks.into_iter().zip(ds) {
            for &u in &block {
                delta.insert(u, (d, block.len()));
            }
            if block.len() > 1 && d > eps {
                frontier.push((d, block));
            }
        }
        Ok::<(), ForgettingError>(())
    };
    let blocks: Vec<Vec<usize>> = (0..first).map(|k| order[k * n / first..(k + 1) * n / first].to_vec()).collect();
    test(blocks, &mut evaluations, &mut delta, &mut frontier)?;
    while budget.saturating_sub(evaluations) >= 2 && !frontier.is_empty() {
        let best = frontier.iter().enumerate().max_by(|(_, x), (_, y)| x.0.total_cmp(&y.0).then(x.1.len().cmp(&y.1.len()))).map_or(0, |(i, _)| i);
        let (_, block) = frontier.swap_remove(best);
        let (left, right) = block.split_at(block.len() / 2);
        test(vec![left.to_vec(), right.to_vec()], &mut evaluations, &mut delta, &mut frontier)?;
    }
    Ok(Withheld { delta, evaluations })
}
