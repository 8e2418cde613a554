//! The baseline carried out: hard truncation.

use super::{CompactionReport, Executed, Input, zone_tokens};
use crate::message::Message;
use crate::plan::Tier;

/// The history without the messages the plan drops (all but the first and
/// the recent zone), held to the threshold.
pub(super) fn execute(input: &Input<'_>, report: &mut CompactionReport) -> Executed {
    let Input { plan, messages, counter, threshold, .. } = *input;
    let z = plan.zones;
    report.dropped = plan.ids_with(Tier::Drop);
    let kept: Vec<Message> = plan.messages.iter().filter(|mp| mp.tier != Tier::Drop).map(|mp| messages[mp.index].clone()).collect();
    let first_kept_pinned = plan.messages[..z.pinned_end].iter().filter(|m| m.tier != Tier::Drop).count();
    let recent_from = kept.len() - messages[z.recent_start..].len();
    let tokens = zone_tokens(&kept, counter, first_kept_pinned, recent_from);
    Executed { messages: kept, tokens, target: Some(threshold) }
}
