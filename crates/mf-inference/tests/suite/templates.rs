//! Rendered prompts per template, snapshot-tested.

use mf_inference::template::{ChatTemplate, RenderOptions, TemplateOrigin};
use mf_inference::tool_parse::ToolCallFormat;
use mf_inference::{ChatMessage, InferenceError};

use super::support::{GEMMA, SMOL, gguf_chat_template, model_path, tool_conversation, tools};

const QWEN3: &str = include_str!("../fixtures/qwen3.jinja");

fn render(t: &ChatTemplate, thinking: bool, with_tools: bool) -> String {
    let tools = if with_tools { tools() } else { Vec::new() };
    t.render(&tool_conversation(), &tools, RenderOptions { add_generation_prompt: true, thinking }).unwrap_or_else(|e| panic!("render: {e}")).text
}

#[test]
fn smollm2_template_from_gguf() {
    let Some(path) = model_path(SMOL) else { return };
    let source = gguf_chat_template(&path).expect("SmolLM2 carries a template");
    let t = ChatTemplate::for_model(Some(&source), Some("llama"), "<|im_start|>", "<|im_end|>").unwrap();
    assert_eq!(t.origin(), &TemplateOrigin::Gguf);
    // No tool support in the template: fenced JSON, tools in the system prompt.
    assert_eq!(t.tool_format(), ToolCallFormat::FencedJson);
    insta::assert_snapshot!("smollm2_tools", render(&t, false, true));
    insta::assert_snapshot!("smollm2_plain", t.render(&[ChatMessage::user("Hi")], &[], RenderOptions::default()).unwrap().text);
}

#[test]
fn gemma3_builtin_template() {
    let Some(path) = model_path(GEMMA) else { return };
    // The base gemma-3-270m GGUF carries no chat template: the published Gemma 3 one is used.
    assert_eq!(gguf_chat_template(&path), None);
    let t = ChatTemplate::for_model(None, Some("gemma3"), "<bos>", "<eos>").unwrap();
    assert_eq!(t.origin(), &TemplateOrigin::Builtin("gemma3"));
    let text = render(&t, false, true);
    // Roles alternate after tool turns became user turns.
    assert!(!text.contains("<start_of_turn>tool"));
    insta::assert_snapshot!("gemma3_tools", text);
}

#[test]
fn qwen3_fixture_native_tools_and_thinking() {
    let t = ChatTemplate::new(QWEN3, "", "<|im_end|>").unwrap();
    assert_eq!(t.tool_format(), ToolCallFormat::Hermes);
    assert!(t.native_tools());
    let off = render(&t, false, true);
    assert!(off.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "{off}");
    // HF tojson: spaces after separators, `<` not escaped. (Keys come sorted:
    // serde_json without `preserve_order`; HF would keep insertion order.)
    assert!(off.contains(r#"{"function": {"description": "Fetch a JSON resource", "name": "http_get""#), "{off}");
    assert!(off.contains("<tool_response>\n{\"count\": 3, \"ids\": [\"a<1>\""), "{off}");
    insta::assert_snapshot!("qwen3_tools_thinking_off", off);
    let on = render(&t, true, true);
    assert!(on.ends_with("<|im_start|>assistant\n"), "{on}");
    insta::assert_snapshot!("qwen3_no_tools_thinking_on", render(&t, true, false));
}

#[test]
fn qwen3_strips_old_thinking_and_keeps_last() {
    let t = ChatTemplate::new(QWEN3, "", "<|im_end|>").unwrap();
    let msgs = vec![ChatMessage::user("2+2?"), ChatMessage::assistant("<think>\nadd\n</think>\n\n4"), ChatMessage::user("3+3?")];
    let text = t.render(&msgs, &[], RenderOptions { add_generation_prompt: true, thinking: true }).unwrap().text;
    assert!(!text.contains("add"), "history thinking is dropped: {text}");
    assert!(text.contains("<|im_start|>assistant\n4<|im_end|>"), "{text}");
}

#[test]
fn template_errors_are_typed() {
    let t = ChatTemplate::for_model(None, Some("gemma3"), "<bos>", "<eos>").unwrap();
    let err = t.render(&[ChatMessage::assistant("x"), ChatMessage::assistant("y")], &[], RenderOptions::default());
    // Consecutive assistants are merged; a leading assistant still violates alternation.
    assert!(matches!(err, Err(InferenceError::Template(_))), "{err:?}");
}
