//! Trace topology: tool call → result(s) → interpretation chains, and the
//! hop links between them (a later call whose arguments use a value that an
//! earlier result returned: the A → B → C of a multi-hop investigation).

use std::collections::{BTreeSet, HashMap};

use crate::message::{Message, MessageKind, Role};

/// For every message, the index of the first message of its tool unit (the
/// assistant message whose call it answers, or itself).
///
/// A tool message whose `tool_call_id` names no earlier call is its own unit.
pub fn unit_heads(messages: &[Message]) -> Vec<usize> {
    let mut call_owner: HashMap<&str, usize> = HashMap::new();
    let mut heads = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let mut head = i;
        if m.role == Role::Tool
            && let Some(id) = m.tool_call_id.as_deref()
            && let Some(&owner) = call_owner.get(id)
        {
            head = owner;
        }
        for c in &m.tool_calls {
            call_owner.insert(c.id.as_str(), i);
        }
        heads.push(head);
    }
    heads
}

/// For every message, the chain it belongs to (the index of the assistant
/// message that made the call), or `None` outside any tool chain.
///
/// A chain is a tool unit (an assistant tool-call message and every tool
/// message answering it) plus the assistant text message right after the
/// unit's last member, which interprets the results.
pub fn chain_of(messages: &[Message]) -> Vec<Option<usize>> {
    let heads = unit_heads(messages);
    let mut out: Vec<Option<usize>> = vec![None; messages.len()];
    for (i, m) in messages.iter().enumerate() {
        if m.kind() == MessageKind::ToolCall {
            out[i] = Some(i);
        } else if heads[i] != i {
            out[i] = Some(heads[i]);
        }
    }
    // Interpretation: an assistant text right after a chain member that is a
    // tool message, when the next message does not continue the unit.
    for i in 1..messages.len() {
        if messages[i].kind() == MessageKind::AssistantText
            && out[i].is_none()
            && messages[i - 1].role == Role::Tool
            && let Some(c) = out[i - 1]
        {
            out[i] = Some(c);
        }
    }
    out
}

fn argument_values(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::String(s) => {
            out.insert(s.clone());
            // Values inside paths and URLs: `/users/4411` uses `4411`.
            for part in s.split(['/', '?', '&', '=', ':', ',', ' ']) {
                out.insert(part.to_owned());
            }
        }
        serde_json::Value::Number(n) => {
            out.insert(n.to_string());
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| argument_values(i, out)),
        serde_json::Value::Object(map) => map.values().for_each(|i| argument_values(i, out)),
        _ => {}
    }
}

/// Hop links `(from_chain, to_chain)`: chain `to` made a call whose argument
/// values (3+ characters, not words of the question) appear in a result of
/// the earlier chain `from`.
pub fn hop_links(messages: &[Message], chains: &[Option<usize>], question: &str) -> Vec<(usize, usize)> {
    let q = question.to_lowercase();
    let mut links: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (j, m) in messages.iter().enumerate() {
        if m.kind() != MessageKind::ToolCall {
            continue;
        }
        let mut values = BTreeSet::new();
        for c in &m.tool_calls {
            argument_values(&c.arguments, &mut values);
        }
        let values: Vec<String> = values.into_iter().filter(|v| v.chars().count() >= 3 && !q.contains(&v.to_lowercase())).collect();
        if values.is_empty() {
            continue;
        }
        for (i, r) in messages.iter().enumerate().take(j) {
            if r.kind() != MessageKind::ToolResult {
                continue;
            }
            if let Some(from) = chains[i]
                && from != j
                && values.iter().any(|v| r.content.contains(v.as_str()))
            {
                links.insert((from, j));
            }
        }
    }
    links.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    fn call(id: &str, args: serde_json::Value) -> ToolCall {
        ToolCall { id: id.into(), name: "http_get".into(), arguments: args }
    }

    fn hops() -> Vec<Message> {
        vec![
            Message::user("q", "Who owns the service that serves /checkout?"),
            Message::assistant_calls("a1", "", vec![call("c1", json!({"url": "/routes/checkout"}))]),
            Message::tool_result("t1", "c1", "http_get", r#"{"service": "payments-api"}"#),
            Message::assistant("i1", "It is payments-api."),
            Message::assistant_calls("a2", "", vec![call("c2", json!({"url": "/services/payments-api"}))]),
            Message::tool_result("t2", "c2", "http_get", r#"{"owner_team": "team-ledger"}"#),
            Message::assistant_calls("a3", "", vec![call("c3", json!({"team": "team-ledger"}))]),
            Message::tool_error("t3", "c3", "http_get", "TimeoutError"),
            Message::user("u2", "thanks"),
        ]
    }

    #[test]
    fn chains_group_call_results_and_interpretation() {
        let c = chain_of(&hops());
        assert_eq!(c, vec![None, Some(1), Some(1), Some(1), Some(4), Some(4), Some(6), Some(6), None]);
    }

    #[test]
    fn hop_links_follow_values_from_results_into_later_calls() {
        let h = hops();
        let c = chain_of(&h);
        assert_eq!(hop_links(&h, &c, &h[0].content), vec![(1, 4), (4, 6)]);
    }

    #[test]
    fn orphan_tool_results_are_their_own_unit() {
        let h = vec![Message::user("q", "q"), Message::assistant("a", "a"), Message::tool_result("t", "nope", "get", "r")];
        assert_eq!(unit_heads(&h), vec![0, 1, 2]);
    }

    #[test]
    fn question_words_do_not_make_hops() {
        let h = vec![
            Message::user("q", "status of checkout"),
            Message::assistant_calls("a1", "", vec![call("c1", json!({"q": "checkout"}))]),
            Message::tool_result("t1", "c1", "http_get", "checkout ok"),
            Message::assistant_calls("a2", "", vec![call("c2", json!({"q": "checkout"}))]),
            Message::tool_result("t2", "c2", "http_get", "checkout ok"),
        ];
        let c = chain_of(&h);
        assert!(hop_links(&h, &c, &h[0].content).is_empty());
    }
}
