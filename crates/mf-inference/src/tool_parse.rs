//! Tool-call parsing. The renderer picks the [`ToolCallFormat`] from the chat
//! template; its parser turns the model's answer into content and calls.
//!
//! Parsers are streaming-aware: [`ToolCallParser::could_be_tool_call`] tells a
//! streaming consumer whether the text so far may be (the start of) a call, so
//! it can hold the text back instead of showing markup.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{InferenceError, Result};
use crate::thinking::partial_suffix;
use crate::types::ToolCall;

/// The tool-call syntaxes this crate understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallFormat {
    /// Hermes / Qwen: `<tool_call>{"name": …, "arguments": …}</tool_call>`.
    Hermes,
    /// Llama 3.x: a bare JSON object `{"name": …, "parameters": …}`, optionally after `<|python_tag|>`.
    Llama3Json,
    /// Mistral: `[TOOL_CALLS][{"name": …, "arguments": …}]` (or `[TOOL_CALLS]name[ARGS]{…}`).
    Mistral,
    /// Fallback for templates without tool support: a fenced ```` ```json ```` block with
    /// `{"name": …, "arguments": …}` (the renderer tells the model so).
    FencedJson,
}

impl ToolCallFormat {
    /// A stable short name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ToolCallFormat::Hermes => "hermes",
            ToolCallFormat::Llama3Json => "llama3_json",
            ToolCallFormat::Mistral => "mistral",
            ToolCallFormat::FencedJson => "fenced_json",
        }
    }

    /// Chooses the format a chat template speaks, from its text.
    #[must_use]
    pub fn detect(template: &str) -> Self {
        if template.contains("<tool_call>") {
            ToolCallFormat::Hermes
        } else if template.contains("[TOOL_CALLS]") {
            ToolCallFormat::Mistral
        } else if template.contains("<|python_tag|>") || template.contains("ipython") {
            ToolCallFormat::Llama3Json
        } else {
            ToolCallFormat::FencedJson
        }
    }

    /// The parser for this format.
    #[must_use]
    pub fn parser(self) -> &'static dyn ToolCallParser {
        match self {
            ToolCallFormat::Hermes => &HermesParser,
            ToolCallFormat::Llama3Json => &Llama3JsonParser,
            ToolCallFormat::Mistral => &MistralParser,
            ToolCallFormat::FencedJson => &FencedJsonParser,
        }
    }

    /// How a call is written in this format (used to replay calls in the
    /// history of templates that cannot render them, and in instructions).
    #[must_use]
    pub fn format_call(self, call: &ToolCall) -> String {
        let body = serde_json::json!({"name": call.name, "arguments": call.arguments}).to_string();
        match self {
            ToolCallFormat::Hermes => format!("<tool_call>\n{body}\n</tool_call>"),
            ToolCallFormat::Llama3Json => serde_json::json!({"name": call.name, "parameters": call.arguments}).to_string(),
            ToolCallFormat::Mistral => format!("[TOOL_CALLS][{body}]"),
            ToolCallFormat::FencedJson => format!("```json\n{body}\n```"),
        }
    }
}

/// An answer with its tool calls taken out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedReply {
    /// The text outside the calls, trimmed.
    pub content: String,
    /// The calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

/// A tool-call syntax.
pub trait ToolCallParser: Send + Sync {
    /// The format this parser reads.
    fn format(&self) -> ToolCallFormat;
    /// Whether `partial` (the answer so far) contains or may be starting a call.
    fn could_be_tool_call(&self, partial: &str) -> bool;
    /// Parses a finished answer.
    ///
    /// # Errors
    /// [`InferenceError::ToolCallParse`] when a call was clearly attempted but
    /// its JSON is malformed or lacks a name.
    fn parse(&self, text: &str) -> Result<ParsedReply>;
}

static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh call id, unique in this process.
#[must_use]
pub fn new_call_id() -> String {
    format!("call_{}", NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed))
}

fn err(format: ToolCallFormat, reason: impl Into<String>) -> InferenceError {
    InferenceError::ToolCallParse { format: format.name(), reason: reason.into() }
}

/// Reads `{"name": …, "arguments"|"parameters": …}` (arguments may be a JSON string).
fn call_from_value(format: ToolCallFormat, value: Value) -> Result<ToolCall> {
    let Value::Object(mut map) = value else {
        return Err(err(format, "a tool call must be a JSON object"));
    };
    let name = match map.remove("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(_) => return Err(err(format, "\"name\" must be a non-empty string")),
        None => return Err(err(format, "the call has no \"name\"")),
    };
    let arguments = map.remove("arguments").or_else(|| map.remove("parameters")).unwrap_or(Value::Object(Default::default()));
    let arguments = match arguments {
        Value::String(s) => serde_json::from_str(&s).map_err(|e| err(format, format!("arguments of {name} are a string that is not JSON: {e}")))?,
        other => other,
    };
    let id = match map.remove("id") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => new_call_id(),
    };
    Ok(ToolCall { id, name, arguments })
}

fn parse_json(format: ToolCallFormat, text: &str) -> Result<Value> {
    serde_json::from_str(text.trim()).map_err(|e| err(format, format!("invalid JSON ({e}) in {:?}", snippet(text))))
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

fn join_content(parts: &[&str]) -> String {
    parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect::<Vec<_>>().join("\n")
}

/// `<tool_call>{json}</tool_call>` (Hermes, Qwen 2.5/3).
#[derive(Debug, Clone, Copy)]
pub struct HermesParser;

impl ToolCallParser for HermesParser {
    fn format(&self) -> ToolCallFormat {
        ToolCallFormat::Hermes
    }
    fn could_be_tool_call(&self, partial: &str) -> bool {
        partial.contains("<tool_call>") || partial_suffix(partial, "<tool_call>") > 0
    }
    fn parse(&self, text: &str) -> Result<ParsedReply> {
        const OPEN: &str = "<tool_call>";
        const CLOSE: &str = "</tool_call>";
        let mut content = Vec::new();
        let mut calls = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find(OPEN) {
            content.push(&rest[..start]);
            let after = &rest[start + OPEN.len()..];
            // A reply cut off before the closing tag still carries its call.
            let (body, next) = match after.find(CLOSE) {
                Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
                None => (after, ""),
            };
            calls.push(call_from_value(self.format(), parse_json(self.format(), body)?)?);
            rest = next;
        }
        content.push(rest);
        Ok(ParsedReply { content: join_content(&content), tool_calls: calls })
    }
}

/// Llama 3.x JSON calls.
#[derive(Debug, Clone, Copy)]
pub struct Llama3JsonParser;

impl ToolCallParser for Llama3JsonParser {
    fn format(&self) -> ToolCallFormat {
        ToolCallFormat::Llama3Json
    }
    fn could_be_tool_call(&self, partial: &str) -> bool {
        let t = partial.trim_start();
        t.is_empty() || t.starts_with('{') || t.starts_with("<|python_tag|>") || "<|python_tag|>".starts_with(t)
    }
    fn parse(&self, text: &str) -> Result<ParsedReply> {
        let t = text.trim();
        let (tagged, body) = match t.strip_prefix("<|python_tag|>") {
            Some(b) => (true, b.trim()),
            None => (false, t),
        };
        let looks_like_call = tagged || (body.starts_with('{') && body.contains("\"name\""));
        if !looks_like_call {
            return Ok(ParsedReply { content: t.to_string(), tool_calls: Vec::new() });
        }
        let mut calls = Vec::new();
        // Several calls are separated by `;`.
        let mut rest = body;
        loop {
            rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ';');
            if rest.is_empty() {
                break;
            }
            let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            match stream.next() {
                Some(Ok(v)) => {
                    calls.push(call_from_value(self.format(), v)?);
                    rest = &rest[stream.byte_offset()..];
                }
                Some(Err(e)) => {
                    return Err(err(self.format(), format!("invalid JSON ({e}) in {:?}", snippet(body))));
                }
                None => break,
            }
        }
        Ok(ParsedReply { content: String::new(), tool_calls: calls })
    }
}

/// Mistral `[TOOL_CALLS]`.
#[derive(Debug, Clone, Copy)]
pub struct MistralParser;

impl ToolCallParser for MistralParser {
    fn format(&self) -> ToolCallFormat {
        ToolCallFormat::Mistral
    }
    fn could_be_tool_call(&self, partial: &str) -> bool {
        partial.contains("[TOOL_CALLS]") || partial_suffix(partial, "[TOOL_CALLS]") > 0
    }
    fn parse(&self, text: &str) -> Result<ParsedReply> {
        const TAG: &str = "[TOOL_CALLS]";
        let Some(start) = text.find(TAG) else {
            return Ok(ParsedReply { content: text.trim().to_string(), tool_calls: Vec::new() });
        };
        let content = text[..start].trim().to_string();
        let mut calls = Vec::new();
        for part in text[start..].split(TAG).map(str::trim).filter(|p| !p.is_empty()) {
            if let Some((name, args)) = part.split_once("[ARGS]") {
                // Newer syntax: name[ARGS]{json}
                let arguments = parse_json(self.format(), args)?;
                calls.push(call_from_value(self.format(), serde_json::json!({"name": name.trim(), "arguments": arguments}))?);
            } else {
                match parse_json(self.format(), part)? {
                    Value::Array(items) => {
                        for item in items {
                            calls.push(call_from_value(self.format(), item)?);
                        }
                    }
                    other => calls.push(call_from_value(self.format(), other)?),
                }
            }
        }
        Ok(ParsedReply { content, tool_calls: calls })
    }
}

/// Fenced JSON, the fallback for small models whose template knows no tools.
#[derive(Debug, Clone, Copy)]
pub struct FencedJsonParser;

impl FencedJsonParser {
    fn is_call_object(v: &Value) -> bool {
        v.get("name").is_some() && (v.get("arguments").is_some() || v.get("parameters").is_some())
    }
}

impl ToolCallParser for FencedJsonParser {
    fn format(&self) -> ToolCallFormat {
        ToolCallFormat::FencedJson
    }
    fn could_be_tool_call(&self, partial: &str) -> bool {
        let t = partial.trim_start();
        partial.contains("```") || partial_suffix(partial, "```") > 0 || t.starts_with('{') || t.is_empty()
    }
    fn parse(&self, text: &str) -> Result<ParsedReply> {
        let mut content = Vec::new();
        let mut calls = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("```") {
            let after = &rest[start + 3..];
            let (lang, body_start) = match after.find('\n') {
                Some(nl) => (after[..nl].trim(), &after[nl + 1..]),
                None => (after.trim(), ""),
            };
            let (body, next, closed) = match body_start.find("```") {
                Some(end) => (&body_start[..end], &body_start[end + 3..], true),
                None => (body_start, "", false),
            };
            let jsonish = matches!(lang, "json" | "tool_call" | "tool" | "");
            let trimmed = body.trim();
            if jsonish && trimmed.starts_with('{') {
                match serde_json::from_str::<Value>(trimmed) {
                    Ok(v) if Self::is_call_object(&v) => {
                        content.push(&rest[..start]);
                        calls.push(call_from_value(self.format(), v)?);
                        rest = next;
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) if trimmed.contains("\"name\"") && !lang.is_empty() => {
                        return Err(err(self.format(), format!("invalid JSON ({e}) in {:?}", snippet(trimmed))));
                    }
                    Err(e) if trimmed.contains("\"name\"") && !closed => {
                        return Err(err(self.format(), format!("unterminated call ({e}) in {:?}", snippet(trimmed))));
                    }
                    Err(_) => {}
                }
            }
            // Not a call: keep the whole fenced block as content.
            let block_end = text.len() - next.len();
            let block_start = text.len() - rest.len();
            content.push(&text[block_start..block_end]);
            rest = next;
        }
        content.push(rest);
        let content_text = join_content(&content);
        // A reply that is nothing but a bare call object.
        if calls.is_empty() {
            let t = content_text.trim();
            if t.starts_with('{')
                && t.ends_with('}')
                && let Ok(v) = serde_json::from_str::<Value>(t)
                && Self::is_call_object(&v)
            {
                return Ok(ParsedReply { content: String::new(), tool_calls: vec![call_from_value(self.format(), v)?] });
            }
        }
        Ok(ParsedReply { content: content_text, tool_calls: calls })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    /// (name, arguments) pairs, ids aside (they are generated).
    fn calls(reply: &ParsedReply) -> Vec<(String, Value)> {
        reply.tool_calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect()
    }

    enum Want {
        Ok(&'static str, Vec<(&'static str, Value)>),
        Err,
    }

    fn check(format: ToolCallFormat, cases: Vec<(&str, Want)>) {
        let parser = format.parser();
        assert_eq!(parser.format(), format);
        for (text, want) in cases {
            let got = parser.parse(text);
            match want {
                Want::Ok(content, want_calls) => {
                    let got = got.unwrap_or_else(|e| panic!("{text:?}: {e}"));
                    assert_eq!(got.content, content, "content of {text:?}");
                    let want_calls: Vec<(String, Value)> = want_calls.into_iter().map(|(n, a)| (n.to_string(), a)).collect();
                    assert_eq!(calls(&got), want_calls, "calls of {text:?}");
                }
                Want::Err => {
                    let e = got.err().unwrap_or_else(|| panic!("{text:?} should not parse"));
                    assert!(matches!(e, InferenceError::ToolCallParse { .. }), "{e}");
                }
            }
        }
    }

    #[test]
    fn hermes_table() {
        check(
            ToolCallFormat::Hermes,
            vec![
                ("Just text.", Want::Ok("Just text.", vec![])),
                ("Compare `a < b` in code: if a<b {}", Want::Ok("Compare `a < b` in code: if a<b {}", vec![])),
                (
                    "Let me look.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"url\": \"/a\"}}\n</tool_call>",
                    Want::Ok("Let me look.", vec![("get", json!({"url": "/a"}))]),
                ),
                (
                    "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>",
                    Want::Ok("", vec![("a", json!({})), ("b", json!({"x": 1}))]),
                ),
                ("<tool_call>{\"name\":\"cut\",\"arguments\":{\"q\":1}}", Want::Ok("", vec![("cut", json!({"q": 1}))])),
                ("<tool_call>{\"name\": \"bad\", \"arguments\": {</tool_call>", Want::Err),
                ("<tool_call>{\"arguments\": {}}</tool_call>", Want::Err),
                ("<tool_call>[1,2]</tool_call>", Want::Err),
            ],
        );
    }

    #[test]
    fn llama3_table() {
        check(
            ToolCallFormat::Llama3Json,
            vec![
                ("The answer is 4.", Want::Ok("The answer is 4.", vec![])),
                ("{\"name\": \"calc\", \"parameters\": {\"x\": 2}}", Want::Ok("", vec![("calc", json!({"x": 2}))])),
                ("<|python_tag|>{\"name\": \"s\", \"parameters\": {}}", Want::Ok("", vec![("s", json!({}))])),
                (
                    "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": true}}",
                    Want::Ok("", vec![("a", json!({})), ("b", json!({"k": true}))]),
                ),
                ("{\"name\": \"a\", \"parameters\": {", Want::Err),
                ("<|python_tag|>not json", Want::Err),
                ("{\"x\": 1} is a JSON object", Want::Ok("{\"x\": 1} is a JSON object", vec![])),
            ],
        );
    }

    #[test]
    fn mistral_table() {
        check(
            ToolCallFormat::Mistral,
            vec![
                ("Plain.", Want::Ok("Plain.", vec![])),
                ("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"abc123def\"}]", Want::Ok("", vec![("f", json!({"a": 1}))])),
                ("Sure. [TOOL_CALLS]f[ARGS]{\"a\": 2}", Want::Ok("Sure.", vec![("f", json!({"a": 2}))])),
                ("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": ", Want::Err),
            ],
        );
        let parsed = MistralParser.parse("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"abc123def\"}]");
        assert_eq!(parsed.ok().map(|p| p.tool_calls[0].id.clone()), Some("abc123def".to_string()));
    }

    #[test]
    fn fenced_table() {
        check(
            ToolCallFormat::FencedJson,
            vec![
                ("No call here.", Want::Ok("No call here.", vec![])),
                (
                    "I'll check.\n```json\n{\"name\": \"get\", \"arguments\": {\"path\": \"/x\"}}\n```",
                    Want::Ok("I'll check.", vec![("get", json!({"path": "/x"}))]),
                ),
                ("Code:\n```rust\nif a < b { x() }\n```\nDone.", Want::Ok("Code:\n```rust\nif a < b { x() }\n```\nDone.", vec![])),
                ("```json\n{\"a\": 1}\n```", Want::Ok("```json\n{\"a\": 1}\n```", vec![])),
                ("{\"name\": \"bare\", \"arguments\": {}}", Want::Ok("", vec![("bare", json!({}))])),
                ("```json\n{\"name\": \"x\", \"arguments\": {\n```", Want::Err),
                ("```json\n{\"name\": \"x\", \"arguments\": {\"unterminated\"", Want::Err),
            ],
        );
    }

    #[test]
    fn streaming_prefixes() {
        let hermes = ToolCallFormat::Hermes.parser();
        // (partial text, could be a call)
        let table: &[(&str, bool)] = &[
            ("Hello", false),
            ("Hello <", true),
            ("Hello <tool", true),
            ("Hello <tool_call>{\"na", true),
            ("if a < b", false),
            ("x <b>bold</b>", false),
            ("<tool_cal", true),
        ];
        for (partial, want) in table {
            assert_eq!(hermes.could_be_tool_call(partial), *want, "hermes {partial:?}");
        }
        let mistral = ToolCallFormat::Mistral.parser();
        assert!(mistral.could_be_tool_call("[TOOL_"));
        assert!(!mistral.could_be_tool_call("[1, 2]"));
        let llama = ToolCallFormat::Llama3Json.parser();
        assert!(llama.could_be_tool_call("{\"name"));
        assert!(llama.could_be_tool_call("<|python"));
        assert!(!llama.could_be_tool_call("The"));
        let fenced = ToolCallFormat::FencedJson.parser();
        assert!(fenced.could_be_tool_call("Let me check.\n``"));
        assert!(!fenced.could_be_tool_call("a < b and c > d"));
    }

    #[test]
    fn format_round_trips_through_its_parser() {
        let call = ToolCall { id: "c1".into(), name: "get".into(), arguments: json!({"path": "/a<b>"}) };
        for format in [ToolCallFormat::Hermes, ToolCallFormat::Llama3Json, ToolCallFormat::Mistral, ToolCallFormat::FencedJson] {
            let text = format.format_call(&call);
            let parsed = format.parser().parse(&text).unwrap_or_else(|e| panic!("{format:?}: {e}"));
            assert_eq!(calls(&parsed), vec![("get".to_string(), json!({"path": "/a<b>"}))], "{format:?}");
        }
    }

    #[test]
    fn detects_format_from_template() {
        assert_eq!(ToolCallFormat::detect("{{ '<tool_call>' }}"), ToolCallFormat::Hermes);
        assert_eq!(ToolCallFormat::detect("[TOOL_CALLS]"), ToolCallFormat::Mistral);
        assert_eq!(ToolCallFormat::detect("<|python_tag|>"), ToolCallFormat::Llama3Json);
        assert_eq!(ToolCallFormat::detect("<|im_start|>"), ToolCallFormat::FencedJson);
    }
}
