//! The baseline carried out: hard truncation.

use super::{CompactionReport, Executed, Input, zone_tokens};
use crate::message::Message;
use crate::plan::{MessagePlan, Tier};

/// The history without the messages the plan drops (all but the first, the
/// user's pins and the recent zone), held to the threshold.
pub(super) fn execute(input: &Input<'_>, report: &mut CompactionReport) -> Executed {
    let Input { plan, messages, counter, threshold, .. } = *input;
    report.dropped = plan.ids_with(Tier::Drop);
    let plans: Vec<&MessagePlan> = plan.messages.iter().filter(|mp| mp.tier != Tier::Drop).collect();
    let kept: Vec<Message> = plans.iter().map(|mp| messages[mp.index].clone()).collect();
    let tokens = zone_tokens(&kept, counter, |i| plans[i].zone);
    Executed { messages: kept, tokens, target: Some(threshold) }
}
