//! Scoring by log-probabilities on the real models: it agrees with what
//! greedy generation saw, a warm cache scores as a cold one does, and a fact
//! in the context makes its statement far more likely (what the likelihood
//! scorer of the benchmark rests on).
//!
//! Tolerances were measured on both test models (this machine's CPU build):
//! the per-token differences come from batch composition (a continuation is
//! decoded in one batch when scored, one token at a time when generated; a
//! warm cache decodes a shorter suffix than a cold one).

use mf_inference::{CancelToken, ChatMessage, GenerateRequest, LlamaSession, Sampling, ScoreRequest, Scored};

use super::support::{GEMMA, SMOL, config, model_path};

/// Mean absolute difference per token allowed between two computations of
/// the same tokens in batches of other shapes (nats): llama.cpp's CPU kernels
/// give a position's logits slightly differently when it shares its batch
/// with more tokens, and keys and values computed in other batches carry it
/// on. Measured: greedy generation (one token per batch) against scoring
/// (one batch) 1.4e-2 (SmolLM2) and 1.3e-2 (Gemma 3); a prefix cached by
/// another round against a cold decode 2.8e-2 (SmolLM2). About twice that.
const BATCH_MEAN_TOL: f64 = 5e-2;
/// The largest such difference at any one token (measured up to 1.2e-1).
const BATCH_MAX_TOL: f64 = 2.5e-1;
/// A cache warmed by a generation of the same prompt: the continuation's
/// rows are computed in a batch of the same shape as from a cold cache, and
/// the prefix in the same batches: measured equal to the bit on both models.
const WARM_TOL: f64 = 1e-6;

fn load(file: &str) -> Option<LlamaSession> {
    let path = model_path(file)?;
    let mut cfg = config(path).with_n_ctx(2048);
    cfg.record_logprobs = true;
    Some(LlamaSession::load(cfg).unwrap_or_else(|e| panic!("load {file}: {e}")))
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a concise assistant. Answer in one sentence."),
        ChatMessage::user(
            "The billing API returned two invoices for customer cus_8841H: inv_30601 (18,450.00 NOK, paid at 02:11) and inv_30602 \
             (18,450.00 NOK, created at 02:14 by the retry-worker). Which invoice is the duplicate?",
        ),
    ]
}

fn score(s: &LlamaSession, messages: &[ChatMessage], continuations: &[&str]) -> Vec<Scored> {
    let req = ScoreRequest { messages: messages.to_vec(), tools: vec![], continuations: continuations.iter().map(|c| (*c).to_owned()).collect() };
    s.score_blocking(req, CancelToken::new()).unwrap_or_else(|e| panic!("score: {e}"))
}

/// Mean and max absolute difference of two scorings token by token (same tokens).
fn diff(a: &Scored, b: &Scored) -> (f64, f64) {
    assert_eq!(a.tokens.iter().map(|t| &t.text).collect::<Vec<_>>(), b.tokens.iter().map(|t| &t.text).collect::<Vec<_>>());
    let d: Vec<f64> = a.tokens.iter().zip(&b.tokens).map(|(x, y)| (x.logprob - y.logprob).abs()).collect();
    (d.iter().sum::<f64>() / d.len().max(1) as f64, d.iter().copied().fold(0.0, f64::max))
}

/// Greedy generation, then the reply scored after the same prompt from a
/// cold cache: the same tokens, each within the batch floor of what
/// generation saw (generation decoded them one per batch, scoring in one),
/// nearly every one the top choice.
fn greedy_agrees(s: &LlamaSession, name: &str) {
    s.clear_blocking().unwrap();
    let req = GenerateRequest { messages: conversation(), tools: vec![], sampling: Sampling::greedy(24) };
    let g = s.generate_blocking(req, None, CancelToken::new()).unwrap();
    let seen = s.last_reply_logprobs_blocking().unwrap();
    assert!(seen.len() >= 4, "{name}: a reply of a few tokens: {:?}", g.raw_text);
    let text: String = seen.iter().map(|t| t.text.as_str()).collect();
    s.clear_blocking().unwrap();
    let scored = score(s, &conversation(), &[&text]).remove(0);
    let generated = Scored { tokens: seen, prompt_tokens: scored.prompt_tokens, decoded: 0 };
    let (mean, max) = diff(&scored, &generated);
    let first = (scored.tokens[0].logprob - generated.tokens[0].logprob).abs();
    let top = scored.tokens.iter().filter(|t| t.top_logprob.unwrap() - t.logprob < 1e-9).count();
    eprintln!(
        "{name}: greedy reply of {} tokens scored afterwards: first token |Δ| {first:.2e}; all tokens mean |Δ| {mean:.2e}, max |Δ| {max:.2e} nats/token; {top} top choices",
        scored.tokens.len()
    );
    assert!(mean <= BATCH_MEAN_TOL && max <= BATCH_MAX_TOL, "{name}: scoring agrees with generation: mean {mean:.2e}, max {max:.2e}");
    assert!(top * 10 >= scored.tokens.len() * 9, "{name}: the greedy tokens are the top choices ({top} of {})", scored.tokens.len());
}

/// Several continuations after one prompt, on a warm cache (the prompt
/// cached by a generation, then trimmed back between continuations), equal
/// each one scored alone from a cold cache.
fn warm_equals_cold(s: &LlamaSession, name: &str) {
    let conts = ["The duplicate is inv_30602, created by the retry-worker.", "The duplicate is inv_30601.", "Neither; both are paid."];
    s.clear_blocking().unwrap();
    let req = GenerateRequest { messages: conversation(), tools: vec![], sampling: Sampling::greedy(8) };
    s.generate_blocking(req, None, CancelToken::new()).unwrap();
    let warm = score(s, &conversation(), &conts);
    assert!(warm[0].decoded < warm[0].prompt_tokens, "{name}: the prompt came from the cache: {:?}", (warm[0].decoded, warm[0].prompt_tokens));
    for (i, c) in conts.iter().enumerate() {
        if i > 0 {
            let n = warm[i].tokens.len() as u32;
            assert!(warm[i].decoded <= n + 1, "{name}: a further continuation decodes one prompt token again, not the prompt: {}", warm[i].decoded);
        }
        s.clear_blocking().unwrap();
        let cold = score(s, &conversation(), &[c]).remove(0);
        assert_eq!(cold.decoded, cold.prompt_tokens + cold.tokens.len() as u32 - 1);
        let (mean, max) = diff(&warm[i], &cold);
        eprintln!("{name}: continuation {i} warm vs cold: mean |Δ| {mean:.2e}, max |Δ| {max:.2e} nats/token");
        assert!(mean <= WARM_TOL && max <= WARM_TOL, "{name}: warm equals cold: mean {mean:.2e}, max {max:.2e}");
    }
}

/// A warm cache whose prefix was decoded for another conversation (the
/// system prompt, cached by an earlier round) scores as a cold one, within
/// the batch floor: the prefix's keys and values come from another batch.
fn shared_prefix_equals_cold(s: &LlamaSession, name: &str) {
    let c = "The duplicate is inv_30602, created by the retry-worker.";
    s.clear_blocking().unwrap();
    // The same system prompt and the same start of the question (every
    // template shares a prefix for them), another ending.
    let question = conversation()[1].content.clone();
    let start = question.find("Which invoice").unwrap();
    let earlier = vec![conversation()[0].clone(), ChatMessage::user(format!("{}Are both paid?", &question[..start]))];
    s.generate_blocking(GenerateRequest { messages: earlier, tools: vec![], sampling: Sampling::greedy(4) }, None, CancelToken::new()).unwrap();
    let warm = score(s, &conversation(), &[c]).remove(0);
    assert!(warm.decoded < warm.prompt_tokens, "{name}: the system prompt came from the cache");
    s.clear_blocking().unwrap();
    let cold = score(s, &conversation(), &[c]).remove(0);
    let (mean, max) = diff(&warm, &cold);
    eprintln!("{name}: prefix from another round vs cold: mean |Δ| {mean:.2e}, max |Δ| {max:.2e} nats/token");
    assert!(mean <= BATCH_MEAN_TOL && max <= BATCH_MAX_TOL, "{name}: mean {mean:.2e}, max {max:.2e}");
}

/// A fact stated in the context makes the statement of it much more likely
/// than without it: even a 135M model copies.
fn fact_in_context_is_recognised(s: &LlamaSession, name: &str) {
    let with = conversation();
    let mut without = conversation();
    without[1] = ChatMessage::user("The billing API returned two invoices for a customer. Which invoice is the duplicate?");
    let reference = "The duplicate is inv_30602, created by the retry-worker.";
    let nll = |m: &[ChatMessage]| score(s, m, &[reference]).remove(0).nll_per_token().unwrap();
    let (a, b) = (nll(&with), nll(&without));
    eprintln!("{name}: NLL per token of the reference with the fact {a:.3}, without {b:.3}");
    assert!(a + 0.3 < b, "{name}: the fact lowers the reference's NLL: {a:.3} vs {b:.3}");
}

/// Offsets locate each token's text in the continuation.
fn offsets_cover_the_text(s: &LlamaSession, name: &str) {
    let text = "Invoice inv_30602 (18,450.00 NOK) is the duplicate.";
    let sc = score(s, &conversation(), &[text]).remove(0);
    let at = text.find("30602").unwrap();
    let span: String = sc.overlapping(at, at + 5).map(|t| t.text.as_str()).collect();
    assert!(span.contains("30602"), "{name}: the tokens over '30602' hold it: {span:?}");
    assert!(sc.tokens.windows(2).all(|w| w[0].start <= w[1].start), "{name}: offsets ascend");
}

fn all(file: &str, name: &str) {
    let Some(s) = load(file) else { return };
    greedy_agrees(&s, name);
    warm_equals_cold(&s, name);
    shared_prefix_equals_cold(&s, name);
    fact_in_context_is_recognised(&s, name);
    offsets_cover_the_text(&s, name);
}

#[test]
fn smollm2_scoring() {
    all(SMOL, "SmolLM2");
}

#[test]
fn gemma3_scoring() {
    all(GEMMA, "Gemma 3");
}

/// The OpenAI-compatible server's Python (llama-cpp-python's virtual
/// environment, installed by setup).
fn server_python() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("MF_OPENAI_SERVER_PYTHON").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/measured-forgetting/openai-server/venv/bin/python")
    });
    if p.is_file() {
        return Some(p);
    }
    super::support::absent(&format!("the OpenAI-compatible test server's Python {}", p.display()), "scripts/setup.sh installs it")
}

/// A server process, killed when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(python: &std::path::Path, args: &[&str], port: u16) -> Server {
    let child = std::process::Command::new(python)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", python.display()));
    let mut server = Server(child);
    let t0 = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed().as_secs() < 120, "the server on port {port} did not start");
        assert!(server.0.try_wait().ok().flatten().is_none(), "the server on port {port} exited");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    server
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn server_backend(port: u16, model_file: &std::path::Path) -> mf_inference::OpenAiBackend {
    let template = super::support::gguf_chat_template(model_file);
    let t = mf_inference::template::ChatTemplate::for_model(template.as_deref(), None, "", "").unwrap();
    mf_inference::OpenAiBackend::new(&format!("http://127.0.0.1:{port}/v1"), "smollm2", None, 2048).unwrap().with_template(t)
}

/// The OpenAI-compatible path on a server whose prompt log-probabilities
/// are aligned (the reference server beside this test, llama.cpp through
/// llama-cpp-python on the same file): the same tokens as the embedded
/// engine, and log-probabilities within the tolerance measured between the
/// two builds of llama.cpp.
#[test]
fn openai_scoring_matches_the_embedded_engine() {
    use mf_inference::Backend as _;
    let (Some(path), Some(python)) = (model_path(SMOL), server_python()) else { return };
    let port = free_port();
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aligned_echo_server.py");
    let _server = start(&python, &[script.to_str().unwrap(), path.to_str().unwrap(), &port.to_string()], port);
    let backend = server_backend(port, &path);
    let conts = ["The duplicate is inv_30602, created by the retry-worker.", "The duplicate is inv_30601."];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let req = ScoreRequest { messages: conversation(), tools: vec![], continuations: conts.iter().map(|c| (*c).to_owned()).collect() };
    let remote = rt.block_on(backend.score(req, CancelToken::new())).unwrap();
    let local = {
        let s = LlamaSession::load(config(&path).with_n_ctx(2048)).unwrap();
        score(&s, &conversation(), &conts)
    };
    for (i, (r, l)) in remote.iter().zip(&local).enumerate() {
        let (mean, max) = diff(r, l);
        eprintln!("SmolLM2 continuation {i}: server vs embedded mean |Δ| {mean:.2e}, max |Δ| {max:.2e} nats/token");
        assert!(mean <= SERVER_MEAN_TOL && max <= SERVER_MAX_TOL, "server vs embedded: mean {mean:.2e}, max {max:.2e}");
        assert_eq!(r.tokens.iter().map(|t| t.start).collect::<Vec<_>>(), l.tokens.iter().map(|t| t.start).collect::<Vec<_>>());
    }
}

/// Between the embedded engine and llama-cpp-python's build of llama.cpp
/// (another version, other kernels, the prompt in one batch): the mean and
/// largest per-token difference allowed (nats). Measured 3.6e-2 and 1.6e-1
/// on SmolLM2; a misrendered prompt or misplaced offsets move the
/// continuation's log-probabilities by nats, not hundredths.
const SERVER_MEAN_TOL: f64 = 1e-1;
const SERVER_MAX_TOL: f64 = 5e-1;

/// llama-cpp-python's own server (the one the app's tests start) echoes
/// prompt log-probabilities one position late: the client finds it out on
/// the first call and refuses to score, saying why, instead of returning
/// numbers that mean nothing.
#[test]
fn llama_cpp_python_server_is_refused_as_misaligned() {
    use mf_inference::Backend as _;
    let (Some(path), Some(python)) = (model_path(SMOL), server_python()) else { return };
    let port = free_port();
    let args = [
        "-m",
        "llama_cpp.server",
        "--model",
        path.to_str().unwrap(),
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",
    ];
    let _server = start(&python, &args, port);
    let backend = server_backend(port, &path);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let req = ScoreRequest { messages: conversation(), tools: vec![], continuations: vec!["The duplicate is inv_30602.".into()] };
    let e = rt.block_on(backend.score(req.clone(), CancelToken::new())).unwrap_err();
    assert!(matches!(&e, mf_inference::InferenceError::ScoringUnsupported { reason, .. } if reason.contains("one position off")), "{e}");
    // Decided once: the next call says the same without asking the server.
    drop(_server);
    let again = rt.block_on(backend.score(req, CancelToken::new())).unwrap_err();
    assert_eq!(again.to_string(), e.to_string());
}

/// Ollama returns no log-probabilities of a given text: a typed refusal.
#[test]
fn ollama_cannot_score() {
    use mf_inference::Backend as _;
    let b = mf_inference::OllamaBackend::new("http://127.0.0.1:1", "m", 2048).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let req = ScoreRequest { messages: conversation(), tools: vec![], continuations: vec!["x".into()] };
    let e = rt.block_on(b.score(req, CancelToken::new())).unwrap_err();
    assert!(matches!(e, mf_inference::InferenceError::ScoringUnsupported { .. }), "{e}");
    assert!(e.to_string().contains("scoring not supported by this engine"), "{e}");
}
