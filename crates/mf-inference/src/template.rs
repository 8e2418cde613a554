//! Chat templates: the model's own `tokenizer.chat_template`, rendered with
//! minijinja the way Hugging Face renders it (pycompat methods, trim/lstrip
//! blocks, an HF-compatible `tojson`, `raise_exception`, `strftime_now`), in one
//! environment compiled once per model.
//!
//! The renderer also decides how tools are spoken: templates that render
//! `tools` themselves get them natively and their [`ToolCallFormat`] is read
//! from the template; templates that know nothing of tools (SmolLM2, Gemma 3)
//! get the tool list and a fenced-JSON calling convention in the system
//! message, tool results as user turns, and [`ToolCallFormat::FencedJson`].

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::value::Kwargs;
use minijinja::{Environment, Error as JinjaError, ErrorKind, Value};
use serde_json::{Value as Json, json};

use crate::error::{InferenceError, Result};
use crate::tool_parse::ToolCallFormat;
use crate::types::{ChatMessage, Role, ToolSpec};

/// Instructions fuel: generous for long conversations, finite for a template
/// that loops forever.
const FUEL: u64 = 5_000_000;
const TEMPLATE_NAME: &str = "chat";

/// Gemma's published instruction template (used when a Gemma GGUF carries none,
/// as the base `gemma-3-270m` does).
pub const GEMMA3_TEMPLATE: &str = include_str!("../templates/gemma3.jinja");
/// Plain ChatML, the fallback for a GGUF without a template.
pub const CHATML_TEMPLATE: &str = include_str!("../templates/chatml.jinja");

/// Where a template came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// The GGUF's `tokenizer.chat_template`.
    Gguf,
    /// A template shipped with this crate, chosen by architecture because the GGUF had none.
    Builtin(&'static str),
    /// Given by the caller.
    Custom,
}

/// Options of one rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// End with the assistant's turn opening.
    pub add_generation_prompt: bool,
    /// Whether the model may think (passed as `enable_thinking` to templates that read it).
    pub thinking: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self { add_generation_prompt: true, thinking: false }
    }
}

/// A rendered prompt and what the generator needs to read the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    /// The prompt text, special tokens as text.
    pub text: String,
    /// Strings that end the assistant's turn.
    pub stop: Vec<String>,
    /// How tool calls in the reply are written.
    pub tool_format: ToolCallFormat,
    /// The prompt ends inside an open `<think>` block.
    pub thinking_open: bool,
}

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    origin: TemplateOrigin,
    tool_format: ToolCallFormat,
    native_tools: bool,
    native_tool_role: bool,
    alternating: bool,
    thinking_switch: bool,
    bos_token: String,
    eos_token: String,
    stop: Vec<String>,
}

impl ChatTemplate {
    /// Compiles `source` with the model's BOS and EOS token texts.
    ///
    /// # Errors
    /// [`InferenceError::Template`] when the template does not compile.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        Self::with_origin(source, bos_token, eos_token, TemplateOrigin::Custom)
    }

    /// The template of a model: its GGUF template, or a built-in one chosen by
    /// `architecture` when the GGUF carries none.
    ///
    /// # Errors
    /// [`InferenceError::Template`] when the template does not compile.
    pub fn for_model(gguf_template: Option<&str>, architecture: Option<&str>, bos_token: &str, eos_token: &str) -> Result<Self> {
        match gguf_template.filter(|t| !t.trim().is_empty()) {
            Some(t) => Self::with_origin(t, bos_token, eos_token, TemplateOrigin::Gguf),
            None if architecture.is_some_and(|a| a.starts_with("gemma")) => {
                Self::with_origin(GEMMA3_TEMPLATE, bos_token, eos_token, TemplateOrigin::Builtin("gemma3"))
            }
            None => Self::with_origin(CHATML_TEMPLATE, bos_token, eos_token, TemplateOrigin::Builtin("chatml")),
        }
    }

    fn with_origin(source: &str, bos_token: &str, eos_token: &str, origin: TemplateOrigin) -> Result<Self> {
        let mut env = Environment::new();
        let syntax =
            minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build().map_err(|e| InferenceError::Template(format!("{e:#}")))?;
        env.set_syntax(syntax);
        env.set_fuel(Some(FUEL));
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", hf_tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(TEMPLATE_NAME, source.to_string()).map_err(|e| InferenceError::Template(format!("{e:#}")))?;

        let native_tools = source.contains("tools");
        let native_tool_role = source.contains("\"tool\"") || source.contains("'tool'") || source.contains("ipython");
        let mut stop = Vec::new();
        for marker in ["<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>"] {
            if source.contains(marker) {
                stop.push(marker.to_string());
            }
        }
        // Base models run on an instruction template keep writing the next turn.
        if source.contains("<start_of_turn>") {
            stop.push("<start_of_turn>".to_string());
        }
        if source.contains("<|im_start|>") {
            stop.push("<|im_start|>".to_string());
        }
        if !eos_token.is_empty() && !stop.iter().any(|s| s == eos_token) {
            stop.push(eos_token.to_string());
        }
        Ok(Self {
            env,
            origin,
            tool_format: if native_tools { ToolCallFormat::detect(source) } else { ToolCallFormat::FencedJson },
            native_tools,
            native_tool_role,
            alternating: source.contains("alternate"),
            thinking_switch: source.contains("enable_thinking"),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            stop,
        })
    }

    /// Where the template came from.
    #[must_use]
    pub fn origin(&self) -> &TemplateOrigin {
        &self.origin
    }

    /// The tool-call format replies are parsed with.
    #[must_use]
    pub fn tool_format(&self) -> ToolCallFormat {
        self.tool_format
    }

    /// Whether the template renders tools itself.
    #[must_use]
    pub fn native_tools(&self) -> bool {
        self.native_tools
    }

    /// Renders a conversation.
    ///
    /// # Errors
    /// [`InferenceError::Template`] when rendering fails (the template raised,
    /// e.g. roles that do not alternate, or it ran out of fuel).
    pub fn render(&self, messages: &[ChatMessage], tools: &[ToolSpec], options: RenderOptions) -> Result<RenderedPrompt> {
        let (messages, tools_json) = self.prepare(messages, tools);
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| InferenceError::Template(format!("{e:#}")))?;
        let mut ctx = serde_json::Map::new();
        ctx.insert("messages".into(), Json::Array(messages));
        if let Some(tools) = tools_json {
            ctx.insert("tools".into(), tools);
        }
        ctx.insert("bos_token".into(), Json::String(self.bos_token.clone()));
        ctx.insert("eos_token".into(), Json::String(self.eos_token.clone()));
        ctx.insert("add_generation_prompt".into(), Json::Bool(options.add_generation_prompt));
        if self.thinking_switch {
            ctx.insert("enable_thinking".into(), Json::Bool(options.thinking));
        }
        let text = template.render(Value::from(minijinja::value::Serde(Json::Object(ctx)))).map_err(|e| InferenceError::Template(format!("{e:#}")))?;
        let thinking_open = {
            let t = text.trim_end();
            t.ends_with("<think>")
        };
        Ok(RenderedPrompt { text, stop: self.stop.clone(), tool_format: self.tool_format, thinking_open })
    }

    /// Maps our messages to the JSON the template reads, adapting tool turns
    /// for templates that cannot render them.
    fn prepare(&self, messages: &[ChatMessage], tools: &[ToolSpec]) -> (Vec<Json>, Option<Json>) {
        let tools_json = (!tools.is_empty()).then(|| {
            Json::Array(
                tools
                    .iter()
                    .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                    .collect(),
            )
        });
        let mut out: Vec<(Role, Json)> = Vec::new();
        if !self.native_tools && !tools.is_empty() {
            let instructions = fallback_tool_instructions(tools);
            match messages.first() {
                Some(first) if first.role == Role::System => {}
                _ => out.push((Role::System, json!({"role": "system", "content": instructions}))),
            }
        }
        for (i, m) in messages.iter().enumerate() {
            let mut content = m.content.clone();
            if i == 0 && m.role == Role::System && !self.native_tools && !tools.is_empty() {
                content = format!("{}\n\n{}", content.trim_end(), fallback_tool_instructions(tools));
            }
            let value = match m.role {
                Role::Assistant if !m.tool_calls.is_empty() && !self.native_tools => {
                    let calls: Vec<String> = m.tool_calls.iter().map(|c| self.tool_format.format_call(c)).collect();
                    let text = if content.trim().is_empty() { calls.join("\n") } else { format!("{}\n{}", content.trim_end(), calls.join("\n")) };
                    (Role::Assistant, json!({"role": "assistant", "content": text}))
                }
                Role::Assistant if !m.tool_calls.is_empty() => {
                    let calls: Vec<Json> =
                        m.tool_calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})).collect();
                    (Role::Assistant, json!({"role": "assistant", "content": content, "tool_calls": calls}))
                }
                Role::Tool if !self.native_tool_role => {
                    let name = m.name.as_deref().unwrap_or("tool");
                    (Role::User, json!({"role": "user", "content": format!("Tool result ({name}):\n{content}")}))
                }
                Role::Tool => {
                    let mut v = json!({"role": "tool", "content": content});
                    if let Some(id) = &m.tool_call_id {
                        v["tool_call_id"] = Json::String(id.clone());
                    }
                    if let Some(name) = &m.name {
                        v["name"] = Json::String(name.clone());
                    }
                    (Role::Tool, v)
                }
                role => (role, json!({"role": role.as_str(), "content": content})),
            };
            out.push(value);
        }
        if self.alternating {
            // Templates that insist on user/assistant alternation: merge runs.
            let mut merged: Vec<(Role, Json)> = Vec::new();
            for (role, v) in out {
                match merged.last_mut() {
                    Some((last_role, last)) if *last_role == role && role != Role::System => {
                        let joined = format!("{}\n\n{}", last["content"].as_str().unwrap_or_default(), v["content"].as_str().unwrap_or_default());
                        last["content"] = Json::String(joined);
                    }
                    _ => merged.push((role, v)),
                }
            }
            out = merged;
        }
        (out.into_iter().map(|(_, v)| v).collect(), if self.native_tools { tools_json } else { None })
    }
}

/// The system-prompt section that teaches a template-less model to call tools.
pub(crate) fn fallback_tool_instructions(tools: &[ToolSpec]) -> String {
    let mut s = String::from("You can call these tools:\n");
    for t in tools {
        let spec = json!({"name": t.name, "description": t.description, "parameters": t.parameters});
        let _ = writeln!(s, "{spec}");
    }
    s.push_str(
        "\nTo call a tool, reply with only a fenced JSON block:\n```json\n{\"name\": \"<tool name>\", \"arguments\": {<arguments>}}\n```\nThe result comes back in a message that starts with \"Tool result\".",
    );
    s
}

fn raise_exception(message: String) -> std::result::Result<Value, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, message))
}

/// `tojson` as Hugging Face defines it: `json.dumps(x, ensure_ascii=False)`, so
/// `", "` and `": "` separators and no HTML escaping (minijinja's own escapes `<`).
fn hf_tojson(value: Value, kwargs: Kwargs) -> std::result::Result<Value, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let json: Json = serde_json::to_value(&value).map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut out = String::new();
    write_py_json(&json, indent, 0, &mut out);
    Ok(Value::from_safe_string(out))
}

/// Writes JSON the way Python's `json.dumps` does.
pub(crate) fn write_py_json(v: &Json, indent: Option<usize>, level: usize, out: &mut String) {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v {
        Json::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                write_py_json(item, indent, level + 1, out);
            }
            newline(out, level);
            out.push(']');
        }
        Json::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                out.push_str(&Json::String(k.clone()).to_string());
                out.push_str(": ");
                write_py_json(item, indent, level + 1, out);
            }
            newline(out, level);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `strftime_now(format)`, UTC, for the directives chat templates use.
fn strftime_now(format: String) -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    strftime(&format, secs)
}

pub(crate) fn strftime(format: &str, unix_secs: u64) -> String {
    const MONTHS: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    const DAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
    let days = unix_secs / 86_400;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    let weekday = DAYS[(days % 7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('B') => out.push_str(month),
            Some('b') => out.push_str(&month[..3]),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem % 3600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn tojson_matches_python() {
        let v = json!({"a": [1, 2.5, "x<y>"], "b": {}, "c": [], "d": null, "é": true});
        let mut s = String::new();
        write_py_json(&v, None, 0, &mut s);
        assert_eq!(s, r#"{"a": [1, 2.5, "x<y>"], "b": {}, "c": [], "d": null, "é": true}"#);
        let mut s = String::new();
        write_py_json(&json!({"a": [1, 2]}), Some(2), 0, &mut s);
        assert_eq!(s, "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
    }

    #[test]
    fn strftime_formats_known_dates() {
        // 2024-02-29 13:05:09 UTC, a Thursday.
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S %A %d %b %Y %B %%", 1_709_211_909), "2024-02-29 13:05:09 Thursday 29 Feb 2024 February %");
        assert_eq!(strftime("%d %b %Y", 0), "01 Jan 1970");
    }

    #[test]
    fn raise_exception_becomes_template_error() {
        let t = ChatTemplate::for_model(None, Some("gemma3"), "<bos>", "<eos>").unwrap();
        let err = t.render(&[ChatMessage::assistant("first")], &[], RenderOptions::default()).unwrap_err();
        assert!(err.to_string().contains("Conversation roles must alternate"), "{err}");
    }

    #[test]
    fn fuel_stops_runaway_templates() {
        let t = ChatTemplate::new("{% for i in range(100000000) %}{{ i }}{% endfor %}", "", "").unwrap();
        let err = t.render(&[ChatMessage::user("x")], &[], RenderOptions::default()).unwrap_err();
        assert!(matches!(err, InferenceError::Template(_)), "{err}");
    }

    #[test]
    fn broken_template_is_an_error_not_a_panic() {
        let err = ChatTemplate::new("{% for %}", "", "").unwrap_err();
        assert!(matches!(err, InferenceError::Template(_)));
    }

    #[test]
    fn pycompat_methods_work() {
        let t = ChatTemplate::new("{{ messages[0].content.strip().split(',')[1].upper() }}{{ messages[0].content.startswith(' a') }}", "", "").unwrap();
        let out = t.render(&[ChatMessage::user(" a,b ")], &[], RenderOptions::default()).unwrap();
        // minijinja prints booleans as Python does.
        assert_eq!(out.text, "BTrue");
    }
}
