//! Shared helpers: model paths, a GGUF metadata reader, the conversation used everywhere.

use std::io::Read;
use std::path::PathBuf;

use mf_inference::{ChatMessage, ToolCall, ToolSpec};
use serde_json::json;

pub fn model_path(file: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models").join(file);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("\n!!!!!!!! SKIPPED: model {} is absent (run scripts/fetch_models.py) !!!!!!!!\n", p.display());
        None
    }
}

pub const SMOL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

/// Reads one string value from a GGUF header (enough of the format for the
/// chat template, without loading the model).
pub fn gguf_string(path: &PathBuf, key: &str) -> Option<String> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let mut b4 = [0u8; 4];
    let mut b8 = [0u8; 8];
    f.read_exact(&mut b4).ok()?;
    assert_eq!(&b4, b"GGUF");
    f.read_exact(&mut b4).ok()?; // version
    f.read_exact(&mut b8).ok()?; // tensor count
    f.read_exact(&mut b8).ok()?;
    let n_kv = u64::from_le_bytes(b8);
    fn read_u64(f: &mut impl Read) -> u64 {
        let mut b = [0u8; 8];
        f.read_exact(&mut b).unwrap();
        u64::from_le_bytes(b)
    }
    fn read_u32(f: &mut impl Read) -> u32 {
        let mut b = [0u8; 4];
        f.read_exact(&mut b).unwrap();
        u32::from_le_bytes(b)
    }
    fn read_str(f: &mut impl Read) -> String {
        let n = read_u64(f) as usize;
        let mut v = vec![0u8; n];
        f.read_exact(&mut v).unwrap();
        String::from_utf8_lossy(&v).into_owned()
    }
    fn skip(f: &mut impl Read, t: u32) -> Option<String> {
        let size = match t {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => return Some(read_str(f)),
            9 => {
                let at = read_u32(f);
                let n = read_u64(f);
                for _ in 0..n {
                    skip(f, at);
                }
                return None;
            }
            _ => panic!("unknown GGUF type {t}"),
        };
        let mut v = vec![0u8; size];
        f.read_exact(&mut v).unwrap();
        None
    }
    for _ in 0..n_kv {
        let k = read_str(&mut f);
        let t = read_u32(&mut f);
        let v = skip(&mut f, t);
        if k == key {
            return v;
        }
    }
    None
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
