//! Shared helpers: model paths, the chat template of a model file, the conversation used everywhere.

use std::path::PathBuf;

use mf_inference::{ChatMessage, LlamaConfig, ToolCall, ToolSpec};
use serde_json::json;

pub fn model_path(file: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models").join(file);
    if p.is_file() { Some(p) } else { absent(&format!("model {}", p.display()), "run scripts/fetch_models.py") }
}

/// A model's configuration in these tests: one llama.cpp thread. The harness
/// runs as many tests at a time as there are cores, and llama.cpp's threads
/// spin while they wait, so sessions of all the cores each, side by side,
/// took several times the wall time of sessions of one thread each.
pub fn config(path: impl Into<PathBuf>) -> LlamaConfig {
    let mut c = LlamaConfig::new(path);
    c.n_threads = Some(1);
    c
}

/// A test input that is not there. The test command sets MF_REQUIRE_MODELS=1:
/// there the test fails by name; elsewhere it is skipped, loudly.
pub fn absent<T>(what: &str, fix: &str) -> Option<T> {
    assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{what} is absent ({fix})");
    eprintln!("\n!!!!!!!! SKIPPED: {what} is absent ({fix}) !!!!!!!!\n");
    None
}

pub const SMOL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

/// The chat template in a GGUF header, read without loading the model.
pub fn gguf_chat_template(path: &std::path::Path) -> Option<String> {
    mf_inference::models::gguf::read_info(path).expect("a readable GGUF header").chat_template
}

pub fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "http_get".into(),
        description: "Fetch a JSON resource".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. /api/orders"}}, "required": ["path"]}),
    }]
}

/// system, user, assistant call, tool result, assistant answer, user.
pub fn tool_conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a careful investigator."),
        ChatMessage::user("How many orders were refunded?"),
        ChatMessage::assistant_tool_calls(
            "Let me check.",
            vec![ToolCall { id: "call_1".into(), name: "http_get".into(), arguments: json!({"path": "/api/orders?status=refunded"}) }],
        ),
        ChatMessage::tool_result("call_1", "http_get", r#"{"count": 3, "ids": ["a<1>", "b", "c"]}"#),
        ChatMessage::assistant("Three orders were refunded: a<1>, b and c."),
        ChatMessage::user("Which one was largest?"),
    ]
}
