//! Observation masking carried out: masked tool outputs become a placeholder.

use super::{CompactionReport, Executed, Input, zone_tokens};
use crate::estimate::mask_placeholder;
use crate::message::Message;
use crate::plan::Tier;

/// The history with every masked message's content replaced in place by
/// [`mask_placeholder`]. Held to the threshold, or to `C − G` when even so
/// the history is over it: the plan masked every compressible output to get
/// there (it closes its window when over), so masking can take no more.
pub(super) fn execute(input: &Input<'_>, report: &mut CompactionReport) -> Executed {
    let Input { plan, messages, counter, threshold, hard, .. } = *input;
    let z = &plan.zones;
    report.masked = plan.ids_with(Tier::Mask);
    let out: Vec<Message> = plan
        .messages
        .iter()
        .map(|mp| {
            let mut m = messages[mp.index].clone();
            if mp.tier == Tier::Mask {
                m.content = mask_placeholder(m.content.chars().count());
            }
            m
        })
        .collect();
    let tokens = zone_tokens(&out, counter, |i| z.zone_of(i));
    let mut target = threshold;
    if tokens.total > threshold {
        target = hard;
        report.notes.push(format!(
            "target C − G = {hard} tokens, not the threshold {threshold}: every compressible tool output is masked and the pinned and recent zones hold the rest"
        ));
    }
    Executed { messages: out, tokens, target: Some(target) }
}
