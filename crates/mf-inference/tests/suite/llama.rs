//! Real-model tests (SmolLM2, Gemma 3): reuse is exact, trims keep the prefix,
//! snapshots round-trip, bad files fail cleanly.

use std::sync::{Mutex, MutexGuard, OnceLock};

use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, Generation, InferenceError, KvPath, LlamaSession, Sampling, StopReason, StreamEvent, Thinking,
};
use pretty_assertions::assert_eq;

use super::support::{GEMMA, SMOL, config, model_path};

const N_CTX: u32 = 2048;

fn shared(file: &'static str, cell: &'static OnceLock<Option<Mutex<LlamaSession>>>) -> Option<MutexGuard<'static, LlamaSession>> {
    cell.get_or_init(|| {
        let path = model_path(file)?;
        Some(Mutex::new(LlamaSession::load(config(path).with_n_ctx(N_CTX)).unwrap_or_else(|e| panic!("load {file}: {e}"))))
    })
    .as_ref()
    .map(|m| m.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// SmolLM2, loaded once per test binary; tests take turns (the cache is shared state).
fn smol() -> Option<MutexGuard<'static, LlamaSession>> {
    static CELL: OnceLock<Option<Mutex<LlamaSession>>> = OnceLock::new();
    shared(SMOL, &CELL)
}

/// Gemma 3 270M with `swa_full`, loaded once.
fn gemma() -> Option<MutexGuard<'static, LlamaSession>> {
    static CELL: OnceLock<Option<Mutex<LlamaSession>>> = OnceLock::new();
    shared(GEMMA, &CELL)
}

fn generate(s: &LlamaSession, messages: &[ChatMessage], max: u32) -> Generation {
    let req = GenerateRequest { messages: messages.to_vec(), tools: vec![], sampling: Sampling::greedy(max) };
    s.generate_blocking(req, None, CancelToken::new()).unwrap_or_else(|e| panic!("generate: {e}"))
}

fn question() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a concise assistant. Answer in one sentence."),
        ChatMessage::user("The orders API returned three refunds: ord-1 (12.50), ord-2 (40.00) and ord-3 (7.25). Which refund is the largest?"),
    ]
}

/// Round 2 re-sends round 1 plus the model's own reply: the reply with reuse must
/// equal the reply from a cleared cache, and the re-sent prompt must be reused.
fn greedy_reuse_identical(s: &LlamaSession) {
    s.clear_blocking().unwrap();
    let mut conv = question();
    let r1 = generate(s, &conv, 12);
    assert_eq!(r1.usage.kv.reused, 0);
    assert_eq!(r1.usage.kv.decoded, r1.usage.kv.prompt_tokens);
    conv.push(ChatMessage::assistant(r1.raw_text.clone()));
    conv.push(ChatMessage::user("And the smallest?"));
    let with_reuse = generate(s, &conv, 12);
    let kv = with_reuse.usage.kv;
    eprintln!("round 2: {kv:?} (round 1 prompt {}, reply {} tokens)", r1.usage.kv.prompt_tokens, r1.usage.completion_tokens);
    assert!(!kv.full_clear);
    assert!(kv.reused >= r1.usage.kv.prompt_tokens, "the whole round-1 prompt is reused: {kv:?}");
    assert_eq!(kv.reused + kv.decoded, kv.prompt_tokens);
    s.clear_blocking().unwrap();
    let fresh = generate(s, &conv, 12);
    assert_eq!(fresh.usage.kv.reused, 0);
    assert_eq!(with_reuse.raw_text, fresh.raw_text, "greedy output with reuse equals output without");

    // The identical prompt again: everything but the last token comes from the cache.
    let again = generate(s, &conv, 12);
    assert_eq!(again.raw_text, fresh.raw_text);
    assert!(again.usage.kv.decoded <= 1, "{:?}", again.usage.kv);
}

#[test]
fn smollm2_greedy_with_reuse_equals_without() {
    let Some(s) = smol() else { return };
    greedy_reuse_identical(&s);
}

#[test]
fn gemma3_greedy_with_reuse_equals_without() {
    let Some(s) = gemma() else { return };
    greedy_reuse_identical(&s);
}

/// A compaction replaces the middle: the pinned head stays cached, only what
/// follows it is decoded, and the reply equals a fresh decode.
fn partial_trim_keeps_prefix(s: &LlamaSession) {
    s.clear_blocking().unwrap();
    let head = question();
    let mut long = head.clone();
    long.push(ChatMessage::assistant("ord-2 is the largest refund at 40.00."));
    long.push(ChatMessage::user("Now list every refund with its amount, one per line, and check the total against 59.75."));
    generate(s, &long, 8);
    let mut compacted = head.clone();
    compacted.push(ChatMessage::assistant("Summary: three refunds, largest ord-2."));
    compacted.push(ChatMessage::user("What is the total?"));
    let trimmed = generate(s, &compacted, 12);
    let kv = trimmed.usage.kv;
    let head_text = s.template().render(&head, &[], mf_inference::template::RenderOptions { add_generation_prompt: false, thinking: false }).unwrap().text;
    let head_tokens = s.count_text_tokens_blocking(&head_text).unwrap();
    eprintln!("after compaction: {kv:?}, pinned head {head_tokens} tokens");
    assert!(!kv.full_clear, "{kv:?}");
    assert!(kv.trimmed > 0, "{kv:?}");
    assert!(kv.reused + 2 >= head_tokens, "pinned prefix kept: {kv:?} vs {head_tokens}");
    assert!(kv.reused < kv.prompt_tokens);
    assert_eq!(
        s.cached_tokens_blocking().unwrap(),
        kv.prompt_tokens + trimmed.usage.completion_tokens - u32::from(trimmed.stop_reason == StopReason::StopString)
    );
    s.clear_blocking().unwrap();
    let fresh = generate(s, &compacted, 12);
    assert_eq!(trimmed.raw_text, fresh.raw_text);
}

#[test]
fn smollm2_partial_trim_keeps_prefix() {
    let Some(s) = smol() else { return };
    partial_trim_keeps_prefix(&s);
}

#[test]
fn gemma3_partial_trim_keeps_prefix() {
    let Some(s) = gemma() else { return };
    partial_trim_keeps_prefix(&s);
}

/// Without `swa_full`, Gemma 3's sliding-window cache has evicted early
/// positions once past the window (512): a trim resumes from the nearest
/// context checkpoint at or before the cut, or, with checkpoints off, falls
/// back to a full clear. Either way the reply is the fresh decode's.
#[test]
fn gemma3_without_swa_full_trims_through_a_checkpoint_or_clears() {
    let Some(path) = model_path(GEMMA) else { return };
    for checkpoints in [mf_inference::LlamaConfig::new(&path).checkpoints, 0] {
        let mut cfg = config(&path).with_n_ctx(N_CTX);
        cfg.swa_full = false;
        cfg.checkpoints = checkpoints;
        let s = LlamaSession::load(cfg).unwrap();
        let filler: String = (0..90).map(|i| format!("Order {i} was refunded. ")).collect();
        let mut long = question();
        long.push(ChatMessage::assistant(filler));
        long.push(ChatMessage::user("Sum them."));
        let r1 = generate(&s, &long, 2);
        assert!(r1.usage.kv.prompt_tokens > 600, "{:?}", r1.usage.kv);
        let mut short = question();
        short.push(ChatMessage::assistant("ord-2."));
        short.push(ChatMessage::user("Sum them."));
        let r2 = generate(&s, &short, 8);
        let kv = r2.usage.kv;
        assert_eq!(kv.reused + kv.decoded, kv.prompt_tokens, "{kv:?}");
        if checkpoints == 0 {
            assert!(kv.full_clear && kv.reused == 0, "no checkpoint to resume from: {kv:?}");
        } else {
            assert_eq!(kv.path, mf_inference::KvPath::Checkpoint, "{kv:?}");
            assert!(!kv.full_clear && kv.reused > 0, "{kv:?}");
        }
        let fresh = {
            s.clear_blocking().unwrap();
            generate(&s, &short, 8)
        };
        assert_eq!(r2.raw_text, fresh.raw_text, "checkpoints {checkpoints}");
    }
}

#[test]
fn snapshot_restore_round_trip() {
    let Some(s) = smol() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seq.bin");
    s.clear_blocking().unwrap();
    let conv = question();
    let first = generate(&s, &conv, 10);
    let cached = s.cached_tokens_blocking().unwrap();
    let saved = s.snapshot_blocking(&file).unwrap();
    assert_eq!(saved.tokens, cached);
    assert!(saved.bytes > 0);
    s.clear_blocking().unwrap();
    assert_eq!(s.cached_tokens_blocking().unwrap(), 0);
    let restored = s.restore_blocking(&file).unwrap();
    assert_eq!(restored.tokens, cached);
    assert_eq!(s.cached_tokens_blocking().unwrap(), cached);
    let again = generate(&s, &conv, 10);
    assert_eq!(again.usage.kv.decoded, 1, "only the last prompt token is decoded after a restore: {:?}", again.usage.kv);
    assert_eq!(again.raw_text, first.raw_text);

    // A snapshot whose key names other context parameters is refused.
    let key_file = dir.path().join("seq.bin.key");
    let key = std::fs::read_to_string(&key_file).unwrap().replace("n_ctx 2048", "n_ctx 4096");
    std::fs::write(&key_file, key).unwrap();
    let err = s.restore_blocking(&file).unwrap_err();
    assert!(matches!(err, InferenceError::SnapshotMismatch { .. }), "{err}");
    assert_eq!(s.cached_tokens_blocking().unwrap(), cached, "a refused snapshot leaves the cache alone");
    // A missing snapshot is an error, not a panic.
    let err = s.restore_blocking(&dir.path().join("nope.bin")).unwrap_err();
    assert!(matches!(err, InferenceError::Snapshot { .. }), "{err}");
}

/// The `Backend` snapshot calls, in memory and to a file: the tokens saved
/// are the cached ones (as ids), a restore brings them back exactly, and
/// greedy continuation after it equals the reply from a fresh decode.
#[test]
fn memory_snapshot_round_trip() {
    use mf_inference::{KvSnapshot, SnapshotSlot};
    let Some(s) = smol() else { return };
    let dir = tempfile::tempdir().unwrap();
    s.clear_blocking().unwrap();
    let conv = question();
    let first = generate(&s, &conv, 12);
    let ids = s.cached_token_ids_blocking().unwrap();
    assert_eq!(ids.len() as u32, s.cached_tokens_blocking().unwrap());
    for slot in [SnapshotSlot::Memory("m".into()), SnapshotSlot::File(dir.path().join("seq.bin"))] {
        let saved: KvSnapshot = s.kv_snapshot_blocking(&slot).unwrap();
        assert_eq!(saved.tokens, ids, "{slot}");
        assert!(saved.bytes > 0);
        // Disturb the cache, then restore.
        s.clear_blocking().unwrap();
        generate(&s, &[ChatMessage::user("Say hello.")], 4);
        let restored = s.kv_restore_blocking(&slot).unwrap();
        assert_eq!(restored.tokens, ids, "{slot}");
        assert_eq!(s.cached_token_ids_blocking().unwrap(), ids);
        let again = generate(&s, &conv, 12);
        assert_eq!(again.usage.kv.decoded, 1, "{slot}: {:?}", again.usage.kv);
        assert_eq!(again.raw_text, first.raw_text, "{slot}");
        // The cache now also holds the reply: put the snapshot back for the next slot.
        s.kv_restore_blocking(&slot).unwrap();
    }
    // An unknown memory slot is an error and leaves the cache alone.
    let err = s.kv_restore_blocking(&SnapshotSlot::Memory("nope".into())).unwrap_err();
    assert!(matches!(err, InferenceError::Snapshot { .. }), "{err}");
    assert_eq!(s.cached_token_ids_blocking().unwrap(), ids);
    // A key file whose token ids disagree with the state file (a save cut
    // between its two renames) is refused, and the cache is left empty.
    let key = dir.path().join("seq.bin.key");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&key).unwrap()).unwrap();
    v["ids"][3] = serde_json::json!(v["ids"][3].as_i64().unwrap() + 1);
    std::fs::write(&key, v.to_string()).unwrap();
    let err = s.kv_restore_blocking(&SnapshotSlot::File(dir.path().join("seq.bin"))).unwrap_err();
    assert!(err.to_string().contains("differ"), "{err}");
    assert!(s.cached_token_ids_blocking().unwrap().is_empty());
    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

/// A state file that is not the one saved (a flipped byte, a cut, zero
/// bytes, its key file gone) is refused before llama.cpp reads it, and the
/// cache is left as it was; a save that fails leaves no temporary file.
#[test]
fn damaged_snapshots_are_refused_and_failed_saves_leave_no_temporary_files() {
    let Some(s) = smol() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seq.bin");
    s.clear_blocking().unwrap();
    let conv = question();
    generate(&s, &conv, 6);
    let cached = s.cached_token_ids_blocking().unwrap();
    s.snapshot_blocking(&file).unwrap();
    let good = std::fs::read(&file).unwrap();
    let key: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("seq.bin.key")).unwrap()).unwrap();
    assert_eq!(key["bytes"], good.len() as u64, "{key}");
    assert_eq!(key["sha256"].as_str().map(str::len), Some(64), "{key}");

    let len = good.len();
    let mut flipped_header = good.clone();
    flipped_header[0] ^= 0x01;
    let mut flipped_tensor = good.clone();
    flipped_tensor[len * 3 / 4] ^= 0x40;
    let damaged: [(&str, Vec<u8>); 5] = [
        ("a flipped header byte", flipped_header),
        ("a flipped tensor byte", flipped_tensor),
        ("cut in the middle", good[..len / 2].to_vec()),
        ("cut by one byte", good[..len - 1].to_vec()),
        ("zero bytes", Vec::new()),
    ];
    for (what, bytes) in damaged {
        std::fs::write(&file, &bytes).unwrap();
        let err = s.restore_blocking(&file).unwrap_err();
        assert!(matches!(err, InferenceError::SnapshotDamaged { .. }), "{what}: {err}");
        assert_eq!(s.cached_token_ids_blocking().unwrap(), cached, "{what}: the cache is left alone");
    }
    std::fs::write(&file, &good).unwrap();
    assert_eq!(s.restore_blocking(&file).unwrap().tokens, cached.len() as u32, "the intact file loads");
    let key_file = dir.path().join("seq.bin.key");
    std::fs::rename(&key_file, dir.path().join("aside")).unwrap();
    let err = s.restore_blocking(&file).unwrap_err();
    assert!(matches!(err, InferenceError::SnapshotDamaged { .. }) && err.to_string().contains("missing"), "{err}");

    // The state file cannot be moved in place (a folder has its name): the
    // save fails, and its temporary files go with it.
    let blocked = dir.path().join("blocked.bin");
    std::fs::create_dir(&blocked).unwrap();
    std::fs::write(blocked.join("keep"), b"x").unwrap();
    let err = s.snapshot_blocking(&blocked).unwrap_err();
    assert!(matches!(err, InferenceError::Snapshot { .. }), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["aside", "blocked.bin", "seq.bin"], "a failed save left files behind");
}

#[test]
fn snapshot_of_another_model_is_refused() {
    let Some(s) = smol() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("smol.bin");
    s.snapshot_blocking(&file).unwrap();
    drop(s);
    let Some(g) = gemma() else { return };
    let err = g.restore_blocking(&file).unwrap_err();
    assert!(matches!(err, InferenceError::SnapshotMismatch { .. }), "{err}");
}

#[test]
fn bad_files_are_load_errors() {
    let dir = tempfile::tempdir().unwrap();
    let load = |p: &std::path::Path| LlamaSession::load(config(p).with_n_ctx(256)).unwrap_err();

    let err = load(&dir.path().join("missing.gguf"));
    assert!(matches!(err, InferenceError::ModelUnreadable { .. }) && err.is_load_error(), "{err}");

    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    let err = load(&empty);
    assert!(matches!(err, InferenceError::EmptyModelFile { .. }), "{err}");
    assert!(err.to_string().contains("empty"));

    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, b"<html>not a model</html>").unwrap();
    let err = load(&text);
    assert!(matches!(err, InferenceError::NotGguf { .. }), "{err}");
    assert!(err.to_string().contains("not a GGUF"), "{err}");

    let garbage = dir.path().join("garbage.gguf");
    let mut bytes = b"GGUF".to_vec();
    bytes.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    std::fs::write(&garbage, bytes).unwrap();
    let err = load(&garbage);
    assert!(matches!(err, InferenceError::CorruptModel { .. }), "{err}");

    if let Some(real) = model_path(SMOL) {
        // A download cut short: the real header, no tensor data.
        let head: Vec<u8> = std::fs::read(&real).unwrap().into_iter().take(2 << 20).collect();
        let truncated = dir.path().join("truncated.gguf");
        std::fs::write(&truncated, head).unwrap();
        let err = load(&truncated);
        assert!(matches!(err, InferenceError::CorruptModel { .. }), "{err}");
    }
    assert!(load(dir.path()).is_load_error());
}

#[test]
fn context_is_clamped_or_refused() {
    let Some(path) = model_path(SMOL) else { return };
    let mut cfg = config(&path).with_n_ctx(100_000);
    cfg.clamp_to_train = false;
    let err = LlamaSession::load(cfg).unwrap_err();
    assert!(matches!(err, InferenceError::ContextTooLarge { requested: 100_000, train: 8192 }), "{err}");
    let clamped = LlamaSession::load(config(&path).with_n_ctx(100_000)).unwrap();
    assert_eq!(clamped.context_size(), 8192);
    assert_eq!(clamped.model_info().context_train, Some(8192));
}

#[test]
fn prompt_that_cannot_fit_is_a_typed_error() {
    let Some(s) = smol() else { return };
    let huge = "refund ".repeat(3000);
    let req = GenerateRequest { messages: vec![ChatMessage::user(huge)], tools: vec![], sampling: Sampling::greedy(16) };
    let err = s.generate_blocking(req, None, CancelToken::new()).unwrap_err();
    assert!(matches!(err, InferenceError::PromptTooLong { context_size: N_CTX, .. }), "{err}");
    // The session still works afterwards.
    generate(&s, &question(), 2);
}

#[test]
fn streams_tokens_and_cancels() {
    let Some(s) = smol() else { return };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let req = GenerateRequest { messages: question(), tools: vec![], sampling: Sampling::greedy(12) };
    let g = s.generate_blocking(req.clone(), Some(tx), CancelToken::new()).unwrap();
    let mut streamed = String::new();
    while let Ok(e) = rx.try_recv() {
        match e {
            StreamEvent::Text(t) | StreamEvent::Thinking(t) => streamed.push_str(&t),
        }
    }
    assert_eq!(streamed, g.raw_text);
    assert!(g.usage.completion_tokens > 0);

    let cancel = CancelToken::new();
    cancel.cancel();
    let g = s.generate_blocking(req, None, cancel).unwrap();
    assert_eq!(g.stop_reason, StopReason::Cancelled);
    assert_eq!(g.usage.completion_tokens, 0);
}

#[test]
fn thinking_budget_closes_the_block_and_leaves_room_for_the_answer() {
    let Some(path) = model_path(SMOL) else { return };
    // A ChatML template that opens a thinking block in the generation prompt.
    let mut cfg = config(path).with_n_ctx(512);
    cfg.template_override = Some(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
            .into(),
    );
    let s = LlamaSession::load(cfg).unwrap();
    let mut sampling = Sampling::greedy(40);
    sampling.thinking = Thinking::Budget(8);
    let req = GenerateRequest { messages: question(), tools: vec![], sampling };
    let g = s.generate_blocking(req, None, CancelToken::new()).unwrap();
    eprintln!("{g:#?}");
    assert!(g.usage.thinking_tokens <= 8, "{:?}", g.usage);
    assert!(g.raw_text.contains("</think>"), "{}", g.raw_text);
    assert!(g.thinking.as_deref().is_some_and(|t| !t.is_empty()));
    assert!(g.stop_reason == StopReason::EndOfTurn || !g.content.is_empty(), "the answer got tokens: {g:?}");
    assert!(g.usage.completion_tokens > g.usage.thinking_tokens);
}

#[tokio::test(flavor = "multi_thread")]
async fn backend_trait_async_path() {
    let Some(path) = model_path(SMOL) else { return };
    let s = tokio::task::spawn_blocking(move || LlamaSession::load(config(path).with_n_ctx(512))).await.unwrap().unwrap();
    let backend: &dyn Backend = &s;
    let n = backend.count_tokens(&question(), &[]).await.unwrap();
    let g = backend.generate(GenerateRequest { messages: question(), tools: vec![], sampling: Sampling::greedy(4) }, None, CancelToken::new()).await.unwrap();
    assert_eq!(g.usage.kv.prompt_tokens, n);
    assert_eq!(backend.model_info().tool_format.as_deref(), Some("fenced_json"));
    assert_eq!(backend.context_size(), 512);
    s.stop();
    let err = s.generate(GenerateRequest { messages: question(), ..Default::default() }, None, CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, InferenceError::SessionStopped), "{err}");
}

/// Asked to fetch a URL with the agent's `http` tool offered (its real
/// schema), SmolLM2 (fenced-JSON calls) samples replies at temperature 0.7
/// over four seeds. With the tool-call grammar (the default) every reply that
/// opens a call is a well-formed call to `http` whose arguments hold a `url`
/// string and only the schema's names (in the live worlds, without it, SmolLM2
/// called a tool "http" with `additionalProperties` copied from the schema
/// into the arguments).
#[test]
fn smollm2_tool_calls_are_held_to_the_schema_by_the_grammar() {
    use mf_inference::ToolSpec;
    let Some(path) = model_path(SMOL) else { return };
    let tools = vec![ToolSpec {
        name: "http".into(),
        description: "Make an HTTP GET or POST request to an API and return status and body.".into(),
        parameters: serde_json::json!({"type": "object", "properties": {
            "method": {"type": "string", "enum": ["GET", "POST"], "default": "GET"},
            "url": {"type": "string", "description": "absolute http(s) URL"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"description": "request body: a string, or JSON"}
        }, "required": ["url"], "additionalProperties": false}),
    }];
    let messages = vec![
        ChatMessage::system("You are an investigator. Use the tools to find facts, then answer the question concisely. Call one tool at a time."),
        ChatMessage::user("First call the http tool with url http://127.0.0.1:18931/disks/page1.json, then say how full the fullest disk is."),
    ];
    let with = {
        let mut cfg = config(path).with_n_ctx(1024);
        cfg.tool_grammar = true;
        let s = LlamaSession::load(cfg).unwrap();
        (0..4)
            .map(|seed| {
                let sampling = Sampling { temperature: 0.7, top_p: 0.95, seed, max_tokens: 128, ..Sampling::default() };
                let req = GenerateRequest { messages: messages.clone(), tools: tools.clone(), sampling };
                s.generate_blocking(req, None, CancelToken::new()).unwrap()
            })
            .collect::<Vec<_>>()
    };
    let texts = |v: &[Generation]| v.iter().map(|g| (g.stop_reason, g.raw_text.clone())).collect::<Vec<_>>();
    eprintln!("with the grammar: {:?}", texts(&with));
    // A call cut by max_tokens is the budget's doing, not the grammar's.
    let complete = |g: &&Generation| (g.raw_text.contains("```json") || g.raw_text.contains("```\n{")) && g.stop_reason != StopReason::MaxTokens;
    let opened = with.iter().filter(complete).count();
    assert!(opened > 0, "no reply opened and finished a call: the test would prove nothing");
    for g in with.iter().filter(complete) {
        assert!(g.tool_parse_error.is_none(), "malformed call under the grammar: {:?} in {:?}", g.tool_parse_error, g.raw_text);
        assert_eq!(g.tool_calls.len(), 1, "{:?}", g.raw_text);
        let call = &g.tool_calls[0];
        assert_eq!(call.name, "http");
        let args = call.arguments.as_object().unwrap();
        assert!(args.get("url").is_some_and(serde_json::Value::is_string), "{:?}", call.arguments);
        for k in args.keys() {
            assert!(["method", "url", "headers", "body"].contains(&k.as_str()), "argument {k} is not in the schema: {:?}", call.arguments);
        }
    }
    eprintln!("tool-call grammar: {opened}/4 replies opened and finished a call, all well-formed");
}

/// One tool round of a scripted investigation: the call and its JSON result.
pub(super) fn order_round(k: u32) -> [ChatMessage; 2] {
    use mf_inference::ToolCall;
    let id = format!("call_{k}");
    let orders: Vec<_> = (0..6u32)
        .map(|i| {
            let n = k * 6 + i;
            let customer = ["acme", "globex", "initech", "umbrella"][(n % 4) as usize];
            let status = ["paid", "refunded", "shipped"][(n % 3) as usize];
            serde_json::json!({"id": format!("ord-{:04}", 1000 + n * 37 % 9000), "customer": customer,
                "amount": f64::from((n * 7919) % 50_000) / 100.0, "status": status})
        })
        .collect();
    [
        ChatMessage::assistant_tool_calls(
            format!("Fetching page {k}."),
            vec![ToolCall { id: id.clone(), name: "http_get".into(), arguments: serde_json::json!({"path": format!("/api/orders?page={k}")}) }],
        ),
        ChatMessage::tool_result(id, "http_get", serde_json::json!({"page": k, "orders": orders}).to_string()),
    ]
}

pub(super) fn order_head() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are an investigator. Use the tools, cite order ids, be brief."),
        ChatMessage::user("Which customer had the most refunded orders, and what was the refunded total?"),
    ]
}

/// Greedy tokens generated after `prompt_tokens`, read back from the cache.
fn generated_ids(s: &LlamaSession, prompt_tokens: u32) -> Vec<i32> {
    s.cached_token_ids_blocking().unwrap()[prompt_tokens as usize..].to_vec()
}

/// After a compaction (the head kept, the middle rounds replaced by a
/// summary, the last rounds kept), the worker keeps the head, shifts the
/// cached last rounds behind the summary and decodes only the summary and
/// what follows the tail; the greedy continuation is compared token by token
/// with a fresh decode of the same prompt. Returns (equal tokens, compared
/// tokens, identical replies, compactions).
fn shift_agreement(s: &LlamaSession, name: &str) -> (usize, usize, usize, usize) {
    let tools = super::support::tools();
    let ask = |messages: &[ChatMessage], max: u32| {
        let req = GenerateRequest { messages: messages.to_vec(), tools: tools.clone(), sampling: Sampling::greedy(max) };
        s.generate_blocking(req, None, CancelToken::new()).unwrap()
    };
    let summaries = [
        "Summary so far: pages 1-3 read; refunds: globex 2 (ord-1259, ord-1555), acme 1 (ord-1111).",
        "Summary: the first pages show umbrella with three refunds totalling 812.40; globex has one.",
        "Summary of earlier rounds: no refunds on pages 1 and 2; page 3 had ord-1407 refunded (233.10) for initech.",
    ];
    let (mut equal, mut compared, mut identical) = (0, 0, 0);
    for (v, summary) in summaries.iter().enumerate() {
        let kept = 2 + v as u32 % 2;
        let rounds = 5 + v as u32;
        s.clear_blocking().unwrap();
        let mut long = order_head();
        for k in 1..=rounds {
            long.extend(order_round(k));
            ask(&long, 8);
        }
        let mut compacted = order_head();
        compacted.push(ChatMessage::user(*summary));
        for k in rounds - kept + 1..=rounds {
            compacted.extend(order_round(k));
        }
        let shifted = ask(&compacted, 32);
        let kv = shifted.usage.kv;
        let after_shift = generated_ids(s, kv.prompt_tokens);
        // The summary message alone, rendered as the template does: what is left to decode.
        let opts = mf_inference::template::RenderOptions { add_generation_prompt: false, thinking: false };
        let with_summary = s.template().render(&compacted[..3], &tools, opts).unwrap().text;
        let head_only = s.template().render(&compacted[..2], &tools, opts).unwrap().text;
        let summary_tokens = s.count_text_tokens_blocking(&with_summary).unwrap() - s.count_text_tokens_blocking(&head_only).unwrap();
        s.clear_blocking().unwrap();
        let fresh = ask(&compacted, 32);
        let fresh_ids = generated_ids(s, fresh.usage.kv.prompt_tokens);
        let n = after_shift.len().min(fresh_ids.len());
        let same = after_shift.iter().zip(&fresh_ids).filter(|(a, b)| a == b).count();
        let prefix = after_shift.iter().zip(&fresh_ids).take_while(|(a, b)| a == b).count();
        eprintln!(
            "{name} compaction {v}: {kv:?}; summary {summary_tokens} tokens; greedy tokens equal {same}/{n} (first {prefix} in a row)\n  shifted: {:?}\n  fresh:   {:?}",
            shifted.raw_text, fresh.raw_text
        );
        assert_eq!(kv.path, KvPath::Shift, "{kv:?}");
        assert!(kv.shifted > 100, "the kept rounds were shifted, not decoded: {kv:?}");
        assert_eq!(kv.reused + kv.decoded, kv.prompt_tokens);
        // Decoded: the summary message plus the template's glue around the tail (the generation prompt).
        assert!(kv.decoded <= summary_tokens + 8, "decoded {} for a {summary_tokens}-token summary: {kv:?}", kv.decoded);
        // A shift that broke the positions (no re-rotation, wrong delta) gives garbage from the first token.
        assert_eq!(after_shift.first(), fresh_ids.first(), "{name}: the first greedy token after the shift differs");
        equal += same;
        compared += n;
        identical += usize::from(shifted.raw_text == fresh.raw_text);
    }
    eprintln!("{name}: KV shift agreement {equal}/{compared} greedy tokens, {identical}/{} replies identical", summaries.len());
    (equal, compared, identical, summaries.len())
}

/// A session with the shift switched on (it is off by default).
fn shifting(file: &str) -> Option<LlamaSession> {
    let mut cfg = config(model_path(file)?).with_n_ctx(N_CTX);
    cfg.kv_shift = true;
    Some(LlamaSession::load(cfg).unwrap())
}

#[test]
fn smollm2_kv_shift_after_compaction_agrees_with_fresh_decode() {
    let Some(s) = shifting(SMOL) else { return };
    shift_agreement(&s, "SmolLM2");
}

#[test]
fn gemma3_kv_shift_after_compaction_agrees_with_fresh_decode() {
    let Some(s) = shifting(GEMMA) else { return };
    shift_agreement(&s, "Gemma 3");
}

/// With the setting off the same compaction takes the plain path: prefix kept, the rest decoded.
#[test]
fn kv_shift_off_redecodes_the_tail() {
    let Some(path) = model_path(SMOL) else { return };
    let mut cfg = config(path).with_n_ctx(N_CTX);
    cfg.kv_shift = false;
    let s = LlamaSession::load(cfg).unwrap();
    let mut long = order_head();
    for k in 1..=4 {
        long.extend(order_round(k));
    }
    generate(&s, &long, 4);
    let mut compacted = order_head();
    compacted.push(ChatMessage::user("Summary: pages 1-2 read."));
    compacted.extend(order_round(3));
    compacted.extend(order_round(4));
    let kv = generate(&s, &compacted, 4).usage.kv;
    assert_eq!((kv.path, kv.shifted), (KvPath::Prefix, 0), "{kv:?}");
    assert!(kv.decoded > 200, "{kv:?}");
}

/// Gemma 3 without `swa_full`: a compaction restores the context checkpoint
/// nearest before the cut (the window's state) instead of clearing the cache,
/// and the greedy reply equals a fresh decode. Beside it the same rounds with
/// `swa_full` (shifting): decoded tokens and the KV bytes the sequence and its
/// checkpoints hold are printed for both.
#[test]
fn gemma3_checkpoints_replace_swa_full() {
    let Some(path) = model_path(GEMMA) else { return };
    let tools = super::support::tools();
    let run = |swa_full: bool| {
        let mut cfg = config(&path).with_n_ctx(N_CTX);
        cfg.swa_full = swa_full;
        cfg.kv_shift = true;
        let s = LlamaSession::load(cfg).unwrap();
        let ask = |messages: &[ChatMessage], max: u32| {
            let req = GenerateRequest { messages: messages.to_vec(), tools: tools.clone(), sampling: Sampling::greedy(max) };
            s.generate_blocking(req, None, CancelToken::new()).unwrap()
        };
        let mut long = order_head();
        let mut decoded = 0;
        let mut rounds = Vec::new();
        for k in 1..=6 {
            long.extend(order_round(k));
            let kv = ask(&long, 8).usage.kv;
            decoded += kv.decoded;
            rounds.push(kv);
        }
        let before = s.kv_memory_blocking().unwrap();
        let mut compacted = order_head();
        compacted.push(ChatMessage::user("Summary: pages 1-4 read; refunds so far: globex 2 (ord-1259, ord-1555)."));
        compacted.extend(order_round(5));
        compacted.extend(order_round(6));
        let after = ask(&compacted, 24);
        let memory = s.kv_memory_blocking().unwrap();
        s.clear_blocking().unwrap();
        let fresh = ask(&compacted, 24);
        (rounds, decoded, before, after, memory, fresh)
    };
    let (r_ckpt, dec_ckpt, mem_ckpt_before, ckpt, mem_ckpt, fresh_ckpt) = run(false);
    let (r_full, dec_full, mem_full_before, full, mem_full, fresh_full) = run(true);
    eprintln!(
        "swa_full: rounds {:?}\n  decoded in 6 rounds {dec_full}, memory after round 6 {mem_full_before:?}\n  compaction {:?}\n  memory {mem_full:?}",
        r_full.iter().map(|k| (k.decoded, k.path)).collect::<Vec<_>>(),
        full.usage.kv
    );
    eprintln!(
        "checkpoints: rounds {:?}\n  decoded in 6 rounds {dec_ckpt}, memory after round 6 {mem_ckpt_before:?}\n  compaction {:?}\n  memory {mem_ckpt:?}",
        r_ckpt.iter().map(|k| (k.decoded, k.path)).collect::<Vec<_>>(),
        ckpt.usage.kv
    );
    eprintln!("replies: swa_full {:?} (fresh {:?}); checkpoints {:?} (fresh {:?})", full.raw_text, fresh_full.raw_text, ckpt.raw_text, fresh_ckpt.raw_text);
    // Rounds 2-6 extend the previous prompt (past the window, 512): the
    // cache is kept, never cleared, and decodes what the full cache decodes.
    for kv in &r_ckpt[1..] {
        assert_ne!(kv.path, KvPath::Cleared, "{kv:?}");
        assert!(kv.checkpoint_redecoded <= 9, "{kv:?}");
    }
    assert_eq!(dec_ckpt, dec_full);
    let kv = ckpt.usage.kv;
    assert_eq!(kv.path, KvPath::Checkpoint, "the compaction resumed from a checkpoint: {kv:?}");
    assert!(!kv.full_clear);
    // Measured: the checkpoint at 128 of a 139-token head, 11 tokens decoded again.
    assert!(kv.reused >= 100 && kv.checkpoint_redecoded < 64, "{kv:?}");
    // The window's checkpoint makes the cut exact: the reply is a fresh decode's.
    assert_eq!(ckpt.raw_text, fresh_ckpt.raw_text);
    assert!(mem_ckpt_before.checkpoints > 0 && mem_ckpt_before.checkpoint_bytes > 0, "{mem_ckpt_before:?}");
    assert_eq!(mem_full_before.checkpoints, 0);
    assert!(mem_ckpt_before.tokens > 600, "{mem_ckpt_before:?}");
    // Measured (n_ctx 2048, 1,473 tokens): the sequence's state is the same
    // size either way (12.4 MB) and the checkpoints add 18.7 MB: at this
    // context the saving is in the window layers' allocated cache only.
    eprintln!(
        "sequence bytes: swa_full {} / window + checkpoints {} + {}",
        mem_full_before.sequence_bytes, mem_ckpt_before.sequence_bytes, mem_ckpt_before.checkpoint_bytes
    );
}
