//! Grammar-constrained tool calls for the embedded backend.
//!
//! A small model asked to call a tool often writes the call badly: it copies
//! the JSON schema into the arguments, forgets a brace, or invents a tool. The
//! llama.cpp sampler can hold the reply to a GBNF grammar, and *lazily*: the
//! reply is free text until the call's opener appears (```` ```json ```` for
//! [`ToolCallFormat::FencedJson`]), and from there only a well-formed call to
//! one of the offered tools, with the argument names and value types of its
//! schema, can be sampled, then the fence closes and the turn ends.
//!
//! What the grammar cannot fix: a model that never opens a call, or calls with
//! a wrong value of the right type. Only formats tested here with a real model
//! get a grammar: [`ToolCallFormat::FencedJson`] (SmolLM2, Gemma 3). The
//! native formats (Hermes `<tool_call>`, whose opener is a special token in
//! Qwen3; Llama 3; Mistral) are left unconstrained until they can be tested.

use std::fmt::Write as _;

use serde_json::Value;

use crate::tool_parse::ToolCallFormat;
use crate::types::ToolSpec;

/// A lazy grammar for the tool calls of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolGrammar {
    /// The GBNF text; its root rule is `root`.
    pub gbnf: String,
    /// Regular expressions over the reply so far that switch the grammar on
    /// (llama.cpp matches the whole text; the first group starts the call).
    pub trigger_patterns: Vec<String>,
}

/// Nesting depth up to which argument schemas are followed; deeper values are any JSON.
const MAX_DEPTH: usize = 4;
/// Entries a map argument (`additionalProperties`) may hold: a small model
/// otherwise fills one until its token budget runs out.
const MAX_MAP: usize = 8;

/// The grammar for calls to `tools` in `format`, or `None` when there are no
/// tools or the format is not one this module constrains.
#[must_use]
pub fn tool_call_grammar(tools: &[ToolSpec], format: ToolCallFormat) -> Option<ToolGrammar> {
    if tools.is_empty() {
        return None;
    }
    // The fence's language tag is optional (small models often omit it); a
    // bare fence counts as a call only when a JSON object follows it.
    let (open, close, trigger) = match format {
        ToolCallFormat::FencedJson => ("\"```\" \"json\"?", "\"```\"", r"[\s\S]*?(```(?:json|[ \t]*\n[ \t\n]*\{))[\s\S]*"),
        ToolCallFormat::Hermes | ToolCallFormat::Llama3Json | ToolCallFormat::Mistral => return None,
    };
    let mut g = Gbnf::default();
    let mut calls = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        // Arguments are an object whatever the schema says (or fails to say).
        let args = if t.parameters.get("properties").is_some() { g.object(&format!("args-{i}"), &t.parameters, 0) } else { "object".to_owned() };
        let name = format!("call-{i}");
        g.rule(&name, &format!("{} ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws {args}", literal(&json_string(&t.name))));
        calls.push(name);
    }
    g.rule("call", &format!("\"{{\" ws \"\\\"name\\\"\" ws \":\" ws ( {} ) ws \"}}\"", calls.join(" | ")));
    g.rule("root", &format!("{open} ws call ws {close}"));
    Some(ToolGrammar { gbnf: g.finish(), trigger_patterns: vec![trigger.to_owned()] })
}

#[derive(Default)]
struct Gbnf {
    rules: Vec<(String, String)>,
}

impl Gbnf {
    fn rule(&mut self, name: &str, body: &str) {
        self.rules.push((name.to_owned(), body.to_owned()));
    }

    /// A rule for values of `schema`; returns the rule's name.
    fn schema(&mut self, name: &str, schema: &Value, depth: usize) -> String {
        if depth >= MAX_DEPTH {
            return "value".to_owned();
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array) {
            let alts: Vec<String> = options.iter().map(|v| literal(&v.to_string())).collect();
            if !alts.is_empty() {
                self.rule(name, &alts.join(" | "));
                return name.to_owned();
            }
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => "string".to_owned(),
            Some("integer") => "integer".to_owned(),
            Some("number") => "number".to_owned(),
            Some("boolean") => "boolean".to_owned(),
            Some("array") => {
                let item = match schema.get("items") {
                    Some(items) => self.schema(&format!("{name}-item"), items, depth + 1),
                    None => "value".to_owned(),
                };
                self.rule(name, &format!("\"[\" ws ( {item} ( ws \",\" ws {item} )* )? ws \"]\""));
                name.to_owned()
            }
            Some("object") => self.object(name, schema, depth),
            _ => "value".to_owned(),
        }
    }

    /// Required properties in key order (the schema as parsed), then optional ones in any order.
    fn object(&mut self, name: &str, schema: &Value, depth: usize) -> String {
        let Some(props) = schema.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) else {
            // A map: any keys, values of the `additionalProperties` schema.
            if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                let v = self.schema(&format!("{name}-value"), values, depth + 1);
                self.rule(name, &format!("\"{{\" ws ( string ws \":\" ws {v} ( ws \",\" ws string ws \":\" ws {v} ){{0,{}}} )? ws \"}}\"", MAX_MAP - 1));
                return name.to_owned();
            }
            return "object".to_owned();
        };
        let required: Vec<&str> = schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let mut req = Vec::new();
        let mut opt = Vec::new();
        for (k, (key, sub)) in props.iter().enumerate() {
            let value = self.schema(&format!("{name}-{k}"), sub, depth + 1);
            let kv = format!("{} ws \":\" ws {value}", literal(&json_string(key)));
            if required.contains(&key.as_str()) {
                req.push(kv);
            } else {
                opt.push(kv);
            }
        }
        let optional = (!opt.is_empty()).then(|| {
            let n = format!("{name}-opt");
            self.rule(&n, &opt.iter().map(|kv| format!("( {kv} )")).collect::<Vec<_>>().join(" | "));
            n
        });
        let n = opt.len();
        let body = match (req.is_empty(), optional) {
            (false, Some(o)) => format!("\"{{\" ws {} ( ws \",\" ws {o} ){{0,{n}}} ws \"}}\"", req.join(" ws \",\" ws ")),
            (false, None) => format!("\"{{\" ws {} ws \"}}\"", req.join(" ws \",\" ws ")),
            (true, Some(o)) => format!("\"{{\" ws ( {o} ( ws \",\" ws {o} ){{0,{}}} )? ws \"}}\"", n - 1),
            (true, None) => "\"{\" ws \"}\"".to_owned(),
        };
        self.rule(name, &body);
        name.to_owned()
    }

    fn finish(self) -> String {
        let mut out = String::new();
        for (name, body) in &self.rules {
            let _ = writeln!(out, "{name} ::= {body}");
        }
        out.push_str(
            r#"value ::= object | array | string | number | boolean | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
integer ::= "-"? ( [0-9] | [1-9] [0-9]{1,15} )
number ::= integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
boolean ::= "true" | "false"
ws ::= [ \t\n]{0,20}
"#,
        );
        out
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// `s` as a GBNF literal.
fn literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn http_get() -> ToolSpec {
        ToolSpec {
            name: "http_get".into(),
            description: "GET a URL".into(),
            parameters: json!({"type": "object", "properties": {
                "url": {"type": "string"},
                "max_bytes": {"type": "integer"},
                "format": {"enum": ["json", "text"]}
            }, "required": ["url"]}),
        }
    }

    #[test]
    fn fenced_json_calls_get_a_lazy_grammar_naming_each_tool_and_argument() {
        let g = tool_call_grammar(&[http_get()], ToolCallFormat::FencedJson).unwrap();
        assert!(g.gbnf.contains("root ::= \"```\" \"json\"? ws call ws \"```\""), "{}", g.gbnf);
        assert!(g.gbnf.contains(r#""\"http_get\"""#), "{}", g.gbnf);
        assert!(g.gbnf.contains(r#""\"url\"" ws ":" ws string"#), "{}", g.gbnf);
        assert!(g.gbnf.contains(r#""\"max_bytes\"" ws ":" ws integer"#), "{}", g.gbnf);
        assert!(g.gbnf.contains(r#""\"json\"" | "\"text\"""#), "{}", g.gbnf);
        // The trigger: a json fence, or a bare fence followed by an object; not a python fence.
        let re = regex::Regex::new(&format!("^{}$", g.trigger_patterns[0])).unwrap();
        for (text, fires) in
            [("Let me look.\n```json", true), ("```\n{", true), ("```\n  \n{", true), ("```\npython", false), ("```", false), ("plain text", false)]
        {
            assert_eq!(re.is_match(text), fires, "{text:?}");
        }
        // Every rule used is defined.
        let defined: Vec<&str> = g.gbnf.lines().filter_map(|l| l.split(" ::= ").next()).collect();
        for l in g.gbnf.lines() {
            let body = l.split(" ::= ").nth(1).unwrap();
            let stripped: String = strip_literals(body);
            for w in stripped.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                if !w.is_empty() && w.chars().next().unwrap().is_ascii_lowercase() {
                    assert!(defined.contains(&w), "rule {w} used but not defined in\n{}", g.gbnf);
                }
            }
        }
    }

    /// Removes quoted literals and character classes, leaving rule references.
    fn strip_literals(body: &str) -> String {
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            let close = match c {
                '"' => '"',
                '[' => ']',
                c => {
                    out.push(c);
                    continue;
                }
            };
            while let Some(d) = chars.next() {
                if d == '\\' {
                    chars.next();
                } else if d == close {
                    break;
                }
            }
            out.push(' ');
        }
        out
    }

    #[test]
    fn maps_hold_their_values_to_the_additional_properties_schema() {
        let t = ToolSpec {
            name: "http".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {
                "url": {"type": "string"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}}
            }, "required": ["url"]}),
        };
        let g = tool_call_grammar(&[t], ToolCallFormat::FencedJson).unwrap();
        assert!(g.gbnf.contains(r#"args-0-0 ::= "{" ws ( string ws ":" ws string ( ws "," ws string ws ":" ws string ){0,7} )? ws "}""#), "{}", g.gbnf);
        // Optional properties: at most as many as there are.
        assert!(g.gbnf.contains(r#"args-0 ::= "{" ws "\"url\"" ws ":" ws string ( ws "," ws args-0-opt ){0,1} ws "}""#), "{}", g.gbnf);
    }

    #[test]
    fn native_formats_and_empty_tool_lists_are_left_unconstrained() {
        assert!(tool_call_grammar(&[], ToolCallFormat::FencedJson).is_none());
        for f in [ToolCallFormat::Hermes, ToolCallFormat::Llama3Json, ToolCallFormat::Mistral] {
            assert!(tool_call_grammar(&[http_get()], f).is_none());
        }
    }

    #[test]
    fn odd_names_are_escaped_and_schemaless_tools_take_any_object() {
        let t = ToolSpec { name: "say \"hi\"\\now".into(), description: String::new(), parameters: json!({}) };
        let g = tool_call_grammar(&[t], ToolCallFormat::FencedJson).unwrap();
        assert!(g.gbnf.contains(r#""\"say \\\"hi\\\"\\\\now\"""#), "{}", g.gbnf);
        assert!(g.gbnf.contains(r#""\"arguments\"" ws ":" ws object"#), "{}", g.gbnf);
    }
}
