//! Messages between the two vocabularies: mf-forgetting's (what a plan
//! reads) and mf-inference's (what the model is sent).

use mf_forgetting::Message;
use mf_inference::{ChatMessage, Role, ToolCall};

/// A forgetting message as the model sees it.
#[must_use]
pub fn to_chat(m: &Message) -> ChatMessage {
    let role = match m.role {
        mf_forgetting::Role::System => Role::System,
        mf_forgetting::Role::User => Role::User,
        mf_forgetting::Role::Assistant => Role::Assistant,
        mf_forgetting::Role::Tool => Role::Tool,
    };
    ChatMessage {
        role,
        content: m.content.clone(),
        tool_calls: m.tool_calls.iter().map(|c| ToolCall { id: c.id.clone(), name: c.name.clone(), arguments: c.arguments.clone() }).collect(),
        tool_call_id: m.tool_call_id.clone(),
        name: m.name.clone(),
    }
}

/// A chat message as a forgetting message with id `id`. A tool message whose
/// content starts with `ERROR` is a tool error.
#[must_use]
pub fn from_chat(id: &str, c: &ChatMessage) -> Message {
    let mut m = match c.role {
        Role::System => Message::system(id, &c.content),
        Role::User => Message::user(id, &c.content),
        Role::Assistant => Message::assistant(id, &c.content),
        Role::Tool => Message::tool_result(id, c.tool_call_id.as_deref().unwrap_or(""), c.name.as_deref().unwrap_or(""), &c.content),
    };
    m.tool_calls = c.tool_calls.iter().map(|t| mf_forgetting::ToolCall { id: t.id.clone(), name: t.name.clone(), arguments: t.arguments.clone() }).collect();
    m.tool_call_id.clone_from(&c.tool_call_id);
    m.name.clone_from(&c.name);
    m.is_error = c.role == Role::Tool && c.content.starts_with("ERROR");
    m
}

/// The whole history for the model.
#[must_use]
pub fn chat_history(h: &[Message]) -> Vec<ChatMessage> {
    h.iter().map(to_chat).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_mapping_round_trips_and_marks_errors() {
        let call = ToolCall { id: "c1".into(), name: "http".into(), arguments: json!({"url": "u"}) };
        let msgs = vec![
            ChatMessage::system("s"),
            ChatMessage::user("q"),
            ChatMessage::assistant_tool_calls("", vec![call]),
            ChatMessage::tool_result("c1", "http", "ERROR timeout: slow"),
            ChatMessage::tool_result("c1", "http", "200 ok"),
        ];
        let fm: Vec<Message> = msgs.iter().enumerate().map(|(i, c)| from_chat(&format!("m{i}"), c)).collect();
        assert!(fm[3].is_error);
        assert!(!fm[4].is_error);
        assert_eq!(fm[2].kind(), mf_forgetting::MessageKind::ToolCall);
        let back: Vec<ChatMessage> = fm.iter().map(to_chat).collect();
        assert_eq!(back, msgs);
    }
}
