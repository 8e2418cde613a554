//! The budget repair of a summary message: what gives way, and in which
//! order, until the message fits its target.
//!
//! Pure: [`repair`] sees the parts of the summary message and asks its
//! caller only for what it cannot know (an anchor's influence, the literal
//! list once an anchor's text is summarised, the tokens a set of parts
//! costs), so it is tested with a few characters and tiny targets, apart
//! from the summary pass and the token counter.

use crate::literals::Literal;

/// A model summary is cut only while it is longer than this many
/// characters; one at or below it is kept (the literal list gives way in
/// its place, and with no literal left the repair gives up).
///
/// Forty characters is about one bullet line, some ten tokens. A summary
/// that short holds one fact at most, and cutting it again would keep a
/// fragment of that fact to free a handful of tokens, less than the exact
/// values of the literal list are worth. Larger, literals would go while
/// the summary still held several facts; smaller, the summary would be
/// shredded into words before a single literal gave way.
pub(super) const SHORT_SUMMARY_CHARS: usize = 40;

/// A fallback summary (the summariser's input cut to its first
/// characters, see [`crate::summary::fallback`]) whose cut leaves fewer
/// characters than this is dropped whole.
///
/// Every line of that input opens with a label of some 20 to 30
/// characters (`[m4 tool-result http_get]`), so a shorter piece is a label
/// and a few characters with no value in it, while its tokens can keep
/// more of the literal list, which holds the values of every message.
/// Larger, a piece that still held a value would be dropped; smaller, a
/// bare label would be kept at the literals' expense.
pub(super) const MIN_FALLBACK_CHARS: usize = 40;

/// Each cut keeps 1/`CUT_DIVISOR` of the summary's characters or of the
/// literal list's entries.
///
/// Halving reaches any target in a number of steps logarithmic in the
/// length (each step builds and counts the summary message again) and
/// cuts at most half of the text more than the target needed. Closer to 1
/// (not possible in whole numbers), the message would be counted many more
/// times; larger, more would be thrown away than the target asks. It must
/// be at least 2: with 1 a cut keeps everything and the repair never ends.
pub(super) const CUT_DIVISOR: usize = 2;

const _: () = assert!(CUT_DIVISOR >= 2, "a cut must shrink what it cuts");

/// The parts of a summary message that can give way.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Parts {
    /// Indices of the messages copied verbatim (anchors), in history order.
    pub anchors: Vec<usize>,
    /// The model summary, or the fallback when the pass failed.
    pub summary: String,
    /// The literal list (values kept exactly).
    pub literals: Vec<Literal>,
}

/// Which part is cut first once no anchor is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FirstCut {
    /// The target is the threshold: the model summary's tail, down to
    /// [`SHORT_SUMMARY_CHARS`], then the literal list.
    Summary,
    /// The target was raised so that the model summary fits whole (no room
    /// under the threshold): the literal list, then the summary's tail.
    Literals,
    /// The target was raised so that the literal list fits whole, the
    /// summary being the fallback (the log's head, with the values of the
    /// first messages only): the fallback, dropped whole below
    /// [`MIN_FALLBACK_CHARS`], then the literal list.
    Fallback,
}

/// One thing the repair gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// The anchor at this message index is summarised now; its literals
    /// joined the list.
    AnchorRemoved(usize),
    /// The fallback was cut to this many characters (0: dropped).
    FallbackCut(usize),
    /// The literal list was cut to this many entries.
    LiteralsCut(usize),
    /// The model summary was cut to this many characters.
    SummaryCut(usize),
}

/// Gives up parts of a summary message until `tokens(parts)` is at most
/// `target`, and returns what is left with the steps taken, in order.
///
/// Anchors go first, the lowest `influence` first (the later of equals):
/// an anchor costs about what its message cost in place, and its values
/// stay, since `relist` (given every anchor removed so far) rebuilds the
/// literal list with the removed anchors' text. Then the summary and the
/// literal list give way as `first` says, each cut keeping
/// 1/[`CUT_DIVISOR`] of it. When nothing is left to give, the parts come
/// back over the target: the caller reports that the budget could not be
/// restored.
pub(super) fn repair(
    mut parts: Parts,
    first: FirstCut,
    target: usize,
    influence: impl Fn(usize) -> f64,
    mut relist: impl FnMut(&[usize]) -> Vec<Literal>,
    mut tokens: impl FnMut(&Parts) -> usize,
) -> (Parts, Vec<Step>) {
    let mut steps = Vec::new();
    let mut removed = Vec::new();
    while tokens(&parts) > target {
        let chars = parts.summary.chars().count();
        if let Some(k) = weakest(&parts.anchors, &influence) {
            let i = parts.anchors.remove(k);
            removed.push(i);
            parts.literals = relist(&removed);
            steps.push(Step::AnchorRemoved(i));
        } else if first == FirstCut::Fallback && chars > 0 {
            let keep = chars / CUT_DIVISOR;
            parts.summary = if keep < MIN_FALLBACK_CHARS { String::new() } else { parts.summary.chars().take(keep).collect() };
            steps.push(Step::FallbackCut(parts.summary.chars().count()));
        } else if (first != FirstCut::Summary || chars <= SHORT_SUMMARY_CHARS) && !parts.literals.is_empty() {
            let n = parts.literals.len() / CUT_DIVISOR;
            parts.literals.truncate(n);
            steps.push(Step::LiteralsCut(n));
        } else if chars > SHORT_SUMMARY_CHARS {
            let keep = chars / CUT_DIVISOR;
            parts.summary = parts.summary.chars().take(keep).collect();
            steps.push(Step::SummaryCut(keep));
        } else {
            break;
        }
    }
    (parts, steps)
}

/// The position in `anchors` of the one to remove first: the lowest
/// influence, and of equals the latest in the history.
fn weakest(anchors: &[usize], influence: &impl Fn(usize) -> f64) -> Option<usize> {
    anchors.iter().enumerate().min_by(|(_, a), (_, b)| influence(**a).total_cmp(&influence(**b)).then(b.cmp(a))).map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::literals::LiteralKind;

    /// `n` distinct literals found in message 0.
    fn literals(n: usize) -> Vec<Literal> {
        (0..n).map(|k| Literal { kind: LiteralKind::Number, text: format!("{k}"), message_index: 0 }).collect()
    }

    fn parts(anchors: &[usize], summary_chars: usize, literal_count: usize) -> Parts {
        Parts { anchors: anchors.to_vec(), summary: "s".repeat(summary_chars), literals: literals(literal_count) }
    }

    /// A token per character of the summary, 10 per anchor, 3 per literal.
    fn cost(p: &Parts) -> usize {
        p.summary.chars().count() + 10 * p.anchors.len() + 3 * p.literals.len()
    }

    /// Repairs with [`cost`], no influence, and a relist that keeps the list.
    fn run(p: Parts, first: FirstCut, target: usize) -> (Parts, Vec<Step>) {
        let kept = p.literals.clone();
        repair(p, first, target, |_| 0.0, |_| kept.clone(), cost)
    }

    /// The first step taken with the target one token under the parts' cost.
    fn first_step(p: Parts, first: FirstCut) -> Step {
        let target = cost(&p) - 1;
        run(p, first, target).1.remove(0)
    }

    #[test]
    fn parts_within_the_target_are_left_alone() {
        let p = parts(&[2, 3], 100, 4);
        let at = cost(&p);
        assert_eq!(run(p.clone(), FirstCut::Summary, at), (p.clone(), vec![]), "at the target is within it");
        let (_, steps) = run(p, FirstCut::Summary, at - 1);
        assert_eq!(steps.len(), 1, "one token over takes one step: {steps:?}");
    }

    #[test]
    fn anchors_go_first_lowest_influence_first_the_later_of_equals() {
        let p = parts(&[2, 5, 7, 9], 100, 4);
        let influence = |i: usize| match i {
            5 => 0.1,
            2 | 9 => 0.5,
            _ => 0.9,
        };
        let (left, steps) = repair(p, FirstCut::Summary, 100 + 3 * 4 + 10, influence, |_| literals(4), cost);
        assert_eq!(steps, vec![Step::AnchorRemoved(5), Step::AnchorRemoved(9), Step::AnchorRemoved(2)]);
        assert_eq!(left.anchors, vec![7]);
        assert_eq!(left.summary.chars().count(), 100, "the summary is untouched while an anchor is left");
    }

    #[test]
    fn a_removed_anchor_s_values_join_the_literal_list() {
        let p = parts(&[4, 6], 0, 1);
        let mut asked: Vec<Vec<usize>> = Vec::new();
        let (left, steps) = repair(
            p,
            FirstCut::Summary,
            3 * 3,
            |i| i as f64,
            |removed| {
                asked.push(removed.to_vec());
                literals(1 + removed.len())
            },
            cost,
        );
        assert_eq!(steps, vec![Step::AnchorRemoved(4), Step::AnchorRemoved(6)]);
        assert_eq!(asked, vec![vec![4], vec![4, 6]], "relist sees every anchor removed so far");
        assert_eq!(left.literals, literals(3));
    }

    // The boundary tests below write the constants' values out (40
    // characters, halving), so that a new value is a reviewed change of
    // the tests too, with the reason in its doc comment.

    /// [`SHORT_SUMMARY_CHARS`]: a summary of 41 characters is cut before
    /// the literals; one of 40 is not.
    #[test]
    fn under_the_threshold_the_summary_is_cut_before_the_literals_down_to_short() {
        assert_eq!(first_step(parts(&[], 41, 4), FirstCut::Summary), Step::SummaryCut(20));
        assert_eq!(first_step(parts(&[], 40, 4), FirstCut::Summary), Step::LiteralsCut(2));
    }

    /// With no literal left, a short summary is kept and the repair gives
    /// up over the target; one character longer and it is cut.
    #[test]
    fn a_short_summary_is_never_cut() {
        for first in [FirstCut::Summary, FirstCut::Literals] {
            let (left, steps) = run(parts(&[], 40, 0), first, 0);
            assert_eq!((left.summary.chars().count(), steps), (40, vec![]), "{first:?}");
            let (left, steps) = run(parts(&[], 41, 0), first, 0);
            assert_eq!(steps, vec![Step::SummaryCut(20)], "{first:?}");
            assert_eq!(left.summary.chars().count(), 20);
        }
    }

    #[test]
    fn with_a_raised_target_the_literals_go_before_a_long_summary() {
        let (left, steps) = run(parts(&[], 400, 5), FirstCut::Literals, 400);
        assert_eq!(steps, vec![Step::LiteralsCut(2), Step::LiteralsCut(1), Step::LiteralsCut(0)]);
        assert_eq!(left.summary.chars().count(), 400, "the summary the target was raised for stays whole");
    }

    /// [`MIN_FALLBACK_CHARS`]: a cut that leaves 40 characters keeps them;
    /// one that would leave 39 drops the fallback.
    #[test]
    fn a_fallback_cut_below_its_minimum_is_dropped_whole() {
        assert_eq!(first_step(parts(&[], 80, 4), FirstCut::Fallback), Step::FallbackCut(40));
        assert_eq!(first_step(parts(&[], 79, 4), FirstCut::Fallback), Step::FallbackCut(0));
    }

    #[test]
    fn a_fallback_gives_way_before_the_literal_list() {
        let (left, steps) = run(parts(&[], 160, 4), FirstCut::Fallback, 3 * 4);
        assert_eq!(steps, vec![Step::FallbackCut(80), Step::FallbackCut(40), Step::FallbackCut(0)]);
        assert_eq!(left.literals, literals(4), "the literal list the target was raised for stays whole");
        let (left, steps) = run(parts(&[], 160, 4), FirstCut::Fallback, 3);
        assert_eq!(steps[3..], [Step::LiteralsCut(2), Step::LiteralsCut(1)]);
        assert_eq!((left.summary.as_str(), left.literals.len()), ("", 1));
    }

    /// [`CUT_DIVISOR`]: each cut keeps half, rounded down.
    #[test]
    fn each_cut_keeps_half() {
        assert_eq!(first_step(parts(&[], 101, 0), FirstCut::Summary), Step::SummaryCut(50));
        assert_eq!(first_step(parts(&[], 0, 7), FirstCut::Summary), Step::LiteralsCut(3));
        assert_eq!(first_step(parts(&[], 0, 1), FirstCut::Summary), Step::LiteralsCut(0), "a last literal goes whole");
    }

    /// Cuts keep characters, not bytes: a summary in a script of
    /// multi-byte characters is cut on a character boundary.
    #[test]
    fn cuts_count_characters_not_bytes() {
        let p = Parts { anchors: vec![], summary: "é".repeat(42), literals: vec![] };
        let (left, steps) = run(p, FirstCut::Summary, 40);
        assert_eq!(steps, vec![Step::SummaryCut(21)]);
        assert_eq!(left.summary, "é".repeat(21));
    }

    #[test]
    fn with_nothing_left_to_give_the_parts_come_back_over_the_target() {
        let (left, steps) = run(parts(&[1], 0, 2), FirstCut::Summary, 0);
        assert_eq!(steps, vec![Step::AnchorRemoved(1), Step::LiteralsCut(1), Step::LiteralsCut(0)]);
        assert_eq!(left, parts(&[], 0, 0));
    }
}
