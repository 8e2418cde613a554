//! The recommended model's path, without its weights: a tiny qwen3 GGUF with
//! random weights but the real Qwen3 tokenizer and chat template, built by
//! setup (scripts/qwen3_fixture.py), with the reference token ids of each
//! render of tests/fixtures/qwen3-conversation.json made by Python's jinja2
//! and the `tokenizers` package. The engine must load it, render and tokenise
//! every prompt exactly as the reference does, keep the special tokens single,
//! stop on `<|im_end|>`, read the `<tool_call>` format, and reuse its cache
//! across rounds.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use mf_inference::template::TemplateOrigin;
use mf_inference::tool_parse::ToolCallFormat;
use mf_inference::{CancelToken, ChatMessage, GenerateRequest, Generation, LlamaSession, Sampling, StopReason, Thinking, ToolCall, ToolSpec, common_prefix};
use pretty_assertions::assert_eq;
use serde_json::Value;

const CONVERSATION: &str = include_str!("../fixtures/qwen3-conversation.json");

/// Where setup wrote the fixture (`MF_QWEN3_FIXTURE` overrides, as for setup).
fn fixture_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("MF_QWEN3_FIXTURE") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/measured-forgetting/qwen3-fixture"),
    };
    if dir.join("qwen3-tiny-random.gguf").is_file() && dir.join("reference.json").is_file() {
        return Some(dir);
    }
    super::support::absent(&format!("the Qwen3 fixture in {}", dir.display()), "run scripts/setup.sh")
}

struct Fixture {
    session: Mutex<LlamaSession>,
    reference: Value,
    conversation: Value,
}

fn fixture() -> Option<&'static Fixture> {
    static CELL: OnceLock<Option<Fixture>> = OnceLock::new();
    CELL.get_or_init(|| {
        let dir = fixture_dir()?;
        let reference: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
        let conversation: Value = serde_json::from_str(CONVERSATION).unwrap();
        let wanted = sha256_hex(CONVERSATION.as_bytes());
        assert_eq!(reference["inputs"]["conversation_sha256"], wanted.as_str(), "the reference was made from another conversation: run scripts/setup.sh");
        let session = LlamaSession::load(super::support::config(dir.join("qwen3-tiny-random.gguf")).with_n_ctx(2048)).expect("the qwen3 fixture loads");
        Some(Fixture { session: Mutex::new(session), reference, conversation })
    })
    .as_ref()
}

impl Fixture {
    fn session(&self) -> MutexGuard<'_, LlamaSession> {
        self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn render(&self, name: &str) -> &Value {
        self.reference["renders"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no render {name}"))
    }

    fn ids(&self, name: &str) -> Vec<i32> {
        self.render(name)["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap() as i32).collect()
    }

    fn special(&self, token: &str) -> i32 {
        self.reference["special"][token].as_i64().unwrap_or_else(|| panic!("no id for {token}")) as i32
    }

    /// The first `n` messages of the conversation and its tools, as the app holds them.
    fn request(&self, n: usize, thinking: bool) -> GenerateRequest {
        let messages = self.conversation["messages"].as_array().unwrap()[..n].iter().map(message).collect();
        let tools = self.conversation["tools"].as_array().unwrap().iter().map(tool).collect();
        let sampling = Sampling { thinking: if thinking { Thinking::On } else { Thinking::Off }, ..Sampling::greedy(4) };
        GenerateRequest { messages, tools, sampling }
    }
}

fn message(m: &Value) -> ChatMessage {
    let content = m["content"].as_str().unwrap_or_default();
    match m["role"].as_str().unwrap() {
        "system" => ChatMessage::system(content),
        "user" => ChatMessage::user(content),
        "assistant" => match m["tool_calls"].as_array() {
            Some(calls) => ChatMessage::assistant_tool_calls(
                content,
                calls
                    .iter()
                    .map(|c| ToolCall {
                        id: c["id"].as_str().unwrap().into(),
                        name: c["function"]["name"].as_str().unwrap().into(),
                        arguments: c["function"]["arguments"].clone(),
                    })
                    .collect(),
            ),
            None => ChatMessage::assistant(content),
        },
        "tool" => ChatMessage::tool_result(m["tool_call_id"].as_str().unwrap(), m["name"].as_str().unwrap(), content),
        other => panic!("role {other}"),
    }
}

fn tool(t: &Value) -> ToolSpec {
    let f = &t["function"];
    ToolSpec { name: f["name"].as_str().unwrap().into(), description: f["description"].as_str().unwrap().into(), parameters: f["parameters"].clone() }
}

/// Generates from a clear cache; returns the generation and the prompt's token ids as the engine decoded them.
fn prompt_ids(s: &LlamaSession, request: GenerateRequest) -> (Generation, Vec<i32>) {
    s.clear_blocking().unwrap();
    let g = s.generate_blocking(request, None, CancelToken::new()).unwrap_or_else(|e| panic!("generate: {e}"));
    let mut ids = s.cached_token_ids_blocking().unwrap();
    let n = g.usage.kv.prompt_tokens as usize;
    assert!(ids.len() >= n, "{} cached, prompt {n}", ids.len());
    ids.truncate(n);
    (g, ids)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The model loads on the embedded engine with its own template, which speaks
/// the `<tool_call>` format; every render is, text and token ids, what the
/// reference made.
#[test]
fn qwen3_renders_and_tokenises_as_the_reference() {
    let Some(f) = fixture() else { return };
    let s = f.session();
    assert_eq!(s.template().origin(), &TemplateOrigin::Gguf);
    assert!(s.template().native_tools());
    assert_eq!(s.template().tool_format(), ToolCallFormat::Hermes);
    for r in f.reference["renders"].as_array().unwrap() {
        let name = r["name"].as_str().unwrap();
        let request = f.request(r["messages"].as_u64().unwrap() as usize, r["enable_thinking"].as_bool().unwrap());
        let rendered = s.render(&request.messages, &request.tools, &request.sampling).unwrap();
        assert_eq!(rendered.text, r["text"].as_str().unwrap(), "{name}: the rendered text");
        let (_, ids) = prompt_ids(&s, request);
        assert_eq!(ids, f.ids(name), "{name}: the token ids");
    }
}

/// The thinking switch: off renders the template's empty `<think>` block
/// after the assistant's opening, on leaves the block to the model.
#[test]
fn qwen3_thinking_switch_renders_the_empty_block() {
    let Some(f) = fixture() else { return };
    let s = f.session();
    let off = f.request(2, false);
    let off = s.render(&off.messages, &off.tools, &off.sampling).unwrap();
    assert!(off.text.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "{:?}", &off.text[off.text.len() - 60..]);
    assert!(!off.thinking_open);
    let on = f.request(2, true);
    let on = s.render(&on.messages, &on.tools, &on.sampling).unwrap();
    assert!(on.text.ends_with("<|im_start|>assistant\n"), "{:?}", &on.text[on.text.len() - 60..]);
    let (think, end_think) = (f.special("<think>"), f.special("</think>"));
    let tail: Vec<i32> = f.ids("question_thinking_off")[f.ids("question_thinking_on").len()..].to_vec();
    assert_eq!(tail.first(), Some(&think), "thinking off adds <think>… after the opening: {tail:?}");
    assert!(tail.contains(&end_think), "{tail:?}");
}

/// `<|im_start|>`, `<|im_end|>`, `<tool_call>`, `<think>` and their kin are one
/// token each, the reference's ids, in the text of a prompt as on their own.
#[test]
fn qwen3_special_tokens_are_single() {
    let Some(f) = fixture() else { return };
    let s = f.session();
    let specials = f.reference["special"].as_object().unwrap();
    assert!(specials.len() >= 9);
    for (text, id) in specials {
        assert_eq!(s.count_text_tokens_blocking(text).unwrap(), 1, "{text} is one token");
        let id = id.as_i64().unwrap() as i32;
        if text != "<|endoftext|>" {
            assert!(f.ids("whole_thinking_off").contains(&id) || f.ids("first_call_thinking_off").contains(&id), "{text} ({id}) appears in a prompt as itself");
        }
    }
    let whole = f.ids("whole_thinking_off");
    assert_eq!(whole[0], f.special("<|im_start|>"));
    assert_eq!(whole.iter().filter(|&&t| t == f.special("<|im_start|>")).count(), 9, "8 messages and the generation prompt");
}

/// Generation ends on `<|im_end|>` (the fixture's output layer favours it):
/// the turn ends, and the marker is not part of the reply.
#[test]
fn qwen3_im_end_ends_generation() {
    let Some(f) = fixture() else { return };
    let s = f.session();
    let (g, _) = prompt_ids(&s, f.request(2, false));
    assert!(matches!(g.stop_reason, StopReason::EndOfTurn | StopReason::StopString), "{:?}", g.stop_reason);
    assert!(!g.raw_text.contains("<|im_end|>"), "{:?}", g.raw_text);
    assert!(g.usage.completion_tokens <= 1, "{:?}", g.usage);
}

/// A reply in Qwen3's format is read as its tool call, text kept beside it.
#[test]
fn qwen3_canned_tool_call_is_parsed() {
    let Some(f) = fixture() else { return };
    let canned = f.conversation["canned_reply"].as_str().unwrap();
    let ids: Vec<i64> = f.reference["canned_reply_ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert!(
        ids.contains(&i64::from(f.special("<tool_call>"))) && ids.contains(&i64::from(f.special("</tool_call>"))),
        "the markers are single tokens in a reply"
    );
    let format = f.session().template().tool_format();
    assert!(format.parser().could_be_tool_call(canned));
    let parsed = format.parser().parse(canned).unwrap();
    assert_eq!(parsed.content, "I will fetch the second page.");
    assert_eq!(parsed.tool_calls.len(), 1);
    assert_eq!(parsed.tool_calls[0].name, "http_get");
    assert_eq!(parsed.tool_calls[0].arguments, serde_json::json!({"path": "/api/orders?status=refunded", "page": 2}));
}

/// Round 2 (the call and its result added) decodes only the tokens after its
/// common prefix with round 1. With thinking on that is every token of round
/// 1; with thinking off the template drops the empty `<think>` block from an
/// assistant turn once it is history, so the last four tokens of round 1's
/// prompt (`<think>`, `\n\n`, `</think>`, `\n\n`) are decoded again.
#[test]
fn qwen3_kv_reuse_across_rounds() {
    let Some(f) = fixture() else { return };
    let s = f.session();
    for (thinking, first, second, lost) in
        [(true, "question_thinking_on", "first_call_thinking_on", 0), (false, "question_thinking_off", "first_call_thinking_off", 4)]
    {
        let (r1, ids1) = prompt_ids(&s, f.request(2, thinking));
        assert_eq!(ids1, f.ids(first));
        let g = s.generate_blocking(f.request(4, thinking), None, CancelToken::new()).unwrap();
        let kv = g.usage.kv;
        let ids2 = f.ids(second);
        let shared = common_prefix(&ids1, &ids2);
        eprintln!("thinking {thinking}: round 1 {} tokens, round 2 {kv:?}, common prefix {shared}", ids1.len());
        assert_eq!(shared, ids1.len() - lost, "thinking {thinking}");
        assert!(!kv.full_clear);
        assert_eq!(kv.prompt_tokens as usize, ids2.len());
        assert_eq!(kv.reused as usize, shared, "thinking {thinking}: the whole common prefix is reused");
        assert_eq!(kv.decoded as usize, ids2.len() - shared, "thinking {thinking}: only the rest is decoded");
        assert_eq!(r1.usage.kv.decoded as usize, ids1.len(), "round 1 from a clear cache");
    }
}
