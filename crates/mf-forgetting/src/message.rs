//! The message model: roles, tool calls, stable ids and the derived kind.
//!
//! A [`Message`] serialises to (and parses from) the message objects of the
//! scenario format (`notes/scenario-format.md`): `role`, `content`, optional
//! `id`, `tool_calls`, `tool_call_id`, `name`, `is_error`. Two fields are
//! ours: `summary` (default false) marks the message that a compaction
//! produced, so a later compaction knows it is looking at an earlier summary;
//! `pinned` (default false) marks a message the user asked to keep verbatim,
//! which no strategy summarises, masks or drops (see [`crate::zones`]).

use serde::{Deserialize, Serialize};

/// A stable message id (`m<index>` when the file gives none).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(pub String);

impl MessageId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for MessageId {
    fn from(s: &str) -> Self {
        MessageId(s.to_owned())
    }
}

/// Who speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// System prompt or persona.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result (or error).
    Tool,
}

/// One tool call requested by an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Call id; tool results name it in `tool_call_id`.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments, any JSON object.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// The derived kind of a message, which is what the strategies reason about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// A system message.
    System,
    /// A user message.
    User,
    /// An assistant message without tool calls.
    AssistantText,
    /// An assistant message with at least one tool call.
    ToolCall,
    /// A successful tool result.
    ToolResult,
    /// A failed tool result (`is_error`).
    ToolError,
    /// A summary produced by an earlier compaction.
    Summary,
}

impl MessageKind {
    /// A short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            MessageKind::System => "system",
            MessageKind::User => "user",
            MessageKind::AssistantText => "assistant",
            MessageKind::ToolCall => "tool-call",
            MessageKind::ToolResult => "tool-result",
            MessageKind::ToolError => "tool-error",
            MessageKind::Summary => "summary",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn id_is_empty(id: &MessageId) -> bool {
    id.0.is_empty()
}

/// One message of a history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Stable id; empty until [`assign_default_ids`] gives `m<index>`.
    #[serde(default, skip_serializing_if = "id_is_empty")]
    pub id: MessageId,
    /// Who speaks.
    pub role: Role,
    /// Text content (may be empty for a pure tool-call message).
    #[serde(default)]
    pub content: String,
    /// Tool calls (assistant only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this tool message answers (tool only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool's name (tool only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the tool failed (tool only).
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_error: bool,
    /// Whether this message is a compaction summary (our extension of the format).
    #[serde(default, skip_serializing_if = "is_false")]
    pub summary: bool,
    /// Whether the user pinned it (our extension of the format): it joins
    /// the pinned zone, with the rest of its tool chain, and stays verbatim
    /// through every compaction until it is unpinned.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,
}

impl Message {
    fn base(id: &str, role: Role, content: &str) -> Self {
        Message {
            id: MessageId(id.to_owned()),
            role,
            content: content.to_owned(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            is_error: false,
            summary: false,
            pinned: false,
        }
    }

    /// A system message.
    pub fn system(id: &str, content: &str) -> Self {
        Self::base(id, Role::System, content)
    }

    /// A user message.
    pub fn user(id: &str, content: &str) -> Self {
        Self::base(id, Role::User, content)
    }

    /// An assistant message without tool calls.
    pub fn assistant(id: &str, content: &str) -> Self {
        Self::base(id, Role::Assistant, content)
    }

    /// An assistant message with tool calls.
    pub fn assistant_calls(id: &str, content: &str, calls: Vec<ToolCall>) -> Self {
        let mut m = Self::base(id, Role::Assistant, content);
        m.tool_calls = calls;
        m
    }

    /// A successful tool result answering `call_id`.
    pub fn tool_result(id: &str, call_id: &str, name: &str, content: &str) -> Self {
        let mut m = Self::base(id, Role::Tool, content);
        m.tool_call_id = Some(call_id.to_owned());
        m.name = Some(name.to_owned());
        m
    }

    /// A failed tool result answering `call_id`.
    pub fn tool_error(id: &str, call_id: &str, name: &str, content: &str) -> Self {
        let mut m = Self::tool_result(id, call_id, name, content);
        m.is_error = true;
        m
    }

    /// The derived kind.
    pub fn kind(&self) -> MessageKind {
        if self.summary {
            return MessageKind::Summary;
        }
        match self.role {
            Role::System => MessageKind::System,
            Role::User => MessageKind::User,
            Role::Assistant if self.tool_calls.is_empty() => MessageKind::AssistantText,
            Role::Assistant => MessageKind::ToolCall,
            Role::Tool if self.is_error => MessageKind::ToolError,
            Role::Tool => MessageKind::ToolResult,
        }
    }

    /// The text the detectors read: the content plus, for tool calls, each
    /// call's name and arguments.
    pub fn analysis_text(&self) -> String {
        if self.tool_calls.is_empty() {
            return self.content.clone();
        }
        let mut s = self.content.clone();
        for c in &self.tool_calls {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(&c.name);
            s.push(' ');
            s.push_str(&c.arguments.to_string());
        }
        s
    }

    /// Number of characters of [`Message::analysis_text`], cheaply.
    pub fn text_chars(&self) -> usize {
        self.content.chars().count() + self.tool_calls.iter().map(|c| c.name.chars().count() + c.arguments.to_string().chars().count() + 1).sum::<usize>()
    }
}

/// Gives every message with an empty id the id `m<index>`.
pub fn assign_default_ids(messages: &mut [Message]) {
    for (i, m) in messages.iter_mut().enumerate() {
        if m.id.0.is_empty() {
            m.id = MessageId(format!("m{i}"));
        }
    }
}

/// Index of the original question: the first (non-summary) user message.
pub fn question_index(messages: &[Message]) -> Option<usize> {
    messages.iter().position(|m| m.role == Role::User && !m.summary)
}

/// A JSON value rendered with object keys sorted at every level, so that two
/// calls with the same arguments in a different key order compare equal.
pub fn canonical_json(v: &serde_json::Value) -> String {
    fn write(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String((*k).clone()).to_string());
                    out.push(':');
                    if let Some(inner) = map.get(*k) {
                        write(inner, out);
                    }
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_are_derived_from_role_and_flags() {
        let call = ToolCall { id: "c1".into(), name: "get".into(), arguments: json!({}) };
        assert_eq!(Message::system("a", "s").kind(), MessageKind::System);
        assert_eq!(Message::user("a", "q").kind(), MessageKind::User);
        assert_eq!(Message::assistant("a", "t").kind(), MessageKind::AssistantText);
        assert_eq!(Message::assistant_calls("a", "", vec![call]).kind(), MessageKind::ToolCall);
        assert_eq!(Message::tool_result("a", "c1", "get", "ok").kind(), MessageKind::ToolResult);
        assert_eq!(Message::tool_error("a", "c1", "get", "E").kind(), MessageKind::ToolError);
        let mut s = Message::user("a", "sum");
        s.summary = true;
        assert_eq!(s.kind(), MessageKind::Summary);
    }

    #[test]
    fn parses_format_message_objects_and_rejects_unknown_fields() {
        let m: Message = serde_json::from_str(r#"{"role":"tool","tool_call_id":"call_2","name":"http_get","content":"x","is_error":true}"#).unwrap();
        assert_eq!(m.kind(), MessageKind::ToolError);
        let err = serde_json::from_str::<Message>(r#"{"role":"user","content":"x","colour":1}"#).unwrap_err().to_string();
        assert!(err.contains("unknown field `colour`"), "{err}");
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, 2]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_ne!(canonical_json(&a), canonical_json(&json!({"b": 2, "a": {}})));
    }
}
