//! Small hand-built histories whose expected fate can be read off the method,
//! shared by the strategies' tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::budget::Budget;
use crate::message::{Message, ToolCall};
use crate::plan::{CompactionPlan, PlanConfig, StrategyKind, Tier};
use crate::taxonomy::ProblemClass;
use crate::tokens::ApproxTokenCounter;

/// One tool round: call arguments, result text, whether it failed, and an
/// optional interpretation by the assistant.
pub(crate) struct R<'a>(pub serde_json::Value, pub &'a str, pub bool, pub Option<&'a str>);

/// `[system, question, rounds…, user "anything else?", assistant "no"]`:
/// with `recent = 2` the last two are the recent zone and every round is
/// compressible.
pub(crate) fn history(question: &str, rounds: &[R<'_>]) -> Vec<Message> {
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

pub(crate) fn roomy() -> Budget {
    Budget { context: 100_000, reserve: 1_000, ratio: 0.75, recent: 2 }
}

pub(crate) fn v2(h: &[Message], class: ProblemClass) -> CompactionPlan {
    let cfg = PlanConfig { class_override: Some(class), ..PlanConfig::default() };
    super::plan(StrategyKind::V2, h, &roomy(), &ApproxTokenCounter, &cfg, None).unwrap()
}

pub(crate) fn tier(p: &CompactionPlan, id: &str) -> Tier {
    p.messages.iter().find(|m| m.id.0 == id).unwrap_or_else(|| panic!("no message {id}")).tier
}

pub(crate) const RICH: &str = "Invoice inv_30602 for customer Halvorsen Freight was created on 2026-03-01 at 02:14 by \
    retry-worker because the gateway timed out; it references payment pi_5Rk9xe, amount 18450.00 NOK, \
    owned by the Billing team.";
