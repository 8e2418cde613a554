//! HTTP backends against a server on 127.0.0.1 that replays protocol fixtures
//! (written from the documented Ollama NDJSON and OpenAI SSE formats) and
//! captures the request.

use mf_inference::{
    Backend, CancelToken, ChatMessage, GenerateRequest, InferenceError, OllamaBackend, OpenAiBackend, Sampling, StopReason, StreamEvent, Thinking,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::{tool_conversation, tools};

struct Captured {
    request_line: String,
    headers: String,
    body: Value,
}

/// Serves one request: answers `status` with `reply` in small chunks (split
/// inside lines, as a network does) and returns what was asked.
async fn serve_once(status: u16, content_type: &'static str, reply: &'static str) -> (String, tokio::task::JoinHandle<Captured>) {
    let (base, handle) = serve_seq(vec![(status, content_type, reply)]).await;
    (base, tokio::spawn(async move { handle.await.unwrap().pop().unwrap() }))
}

/// Serves one request per reply, in order, on one port; returns what was asked.
async fn serve_seq(replies: Vec<(u16, &'static str, &'static str)>) -> (String, tokio::task::JoinHandle<Vec<Captured>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let mut got = Vec::new();
        for (status, content_type, reply) in replies {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut tmp = [0u8; 4096];
            let header_end = loop {
                let n = sock.read(&mut tmp).await.unwrap();
                assert!(n > 0, "client closed early");
                buf.extend_from_slice(&tmp[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
            let len: usize = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
            while buf.len() < header_end + len {
                let n = sock.read(&mut tmp).await.unwrap();
                buf.extend_from_slice(&tmp[..n]);
            }
            let body: Value = serde_json::from_slice(&buf[header_end..header_end + len]).unwrap();
            let reason = match status {
                200 => "OK",
                400 => "Bad Request",
                404 => "Not Found",
                _ => "Internal Server Error",
            };
            let resp = format!("HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n");
            sock.write_all(resp.as_bytes()).await.unwrap();
            for chunk in reply.as_bytes().chunks(37) {
                if sock.write_all(chunk).await.is_err() {
                    break;
                }
                let _ = sock.flush().await;
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let _ = sock.shutdown().await;
            let request_line = head.lines().next().unwrap_or_default().to_string();
            got.push(Captured { request_line, headers: head, body });
        }
        got
    });
    (base, handle)
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<StreamEvent>) -> (String, String) {
    let (mut think, mut text) = (String::new(), String::new());
    while let Ok(e) = rx.try_recv() {
        match e {
            StreamEvent::Thinking(t) => think.push_str(&t),
            StreamEvent::Text(t) => text.push_str(&t),
        }
    }
    (think, text)
}

fn request(thinking: Thinking) -> GenerateRequest {
    let mut sampling = Sampling::greedy(64);
    sampling.thinking = thinking;
    sampling.stop = vec!["\n\n".into()];
    GenerateRequest { messages: tool_conversation(), tools: tools(), sampling }
}

#[tokio::test]
async fn ollama_streams_thinking_and_native_tool_calls() {
    let (base, server) = serve_once(200, "application/x-ndjson", include_str!("../fixtures/ollama_chat_tool.ndjson")).await;
    let backend = OllamaBackend::new(&base, "qwen3:0.6b", 4096).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let g = backend.generate(request(Thinking::On), Some(tx), CancelToken::new()).await.unwrap();
    let got = server.await.unwrap();

    assert_eq!(got.request_line, "POST /api/chat HTTP/1.1");
    let b = &got.body;
    assert_eq!(b["model"], "qwen3:0.6b");
    assert_eq!(b["stream"], true);
    assert_eq!(b["think"], true);
    assert_eq!(b["options"]["num_ctx"], 4096);
    assert_eq!(b["options"]["num_predict"], 64);
    assert_eq!(b["options"]["temperature"], 0.0);
    assert_eq!(b["options"]["stop"], json!(["\n\n"]));
    assert_eq!(b["tools"][0]["function"]["name"], "http_get");
    let roles: Vec<&str> = b["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "user"]);
    assert_eq!(b["messages"][2]["tool_calls"][0]["function"]["arguments"], json!({"path": "/api/orders?status=refunded"}));
    assert_eq!(b["messages"][3]["tool_name"], "http_get");

    assert_eq!(g.thinking.as_deref(), Some("The user wants refunds; call the API."));
    assert_eq!(g.tool_calls.len(), 1);
    assert_eq!(g.tool_calls[0].name, "http_get");
    assert_eq!(g.tool_calls[0].arguments, json!({"path": "/api/orders?status=refunded"}));
    assert_eq!(g.stop_reason, StopReason::ToolCall);
    assert_eq!(g.usage.kv.prompt_tokens, 187);
    assert_eq!(g.usage.kv.prefill_ms, 95);
    assert_eq!(g.usage.completion_tokens, 31);
    let (think, _) = drain(&mut rx);
    assert_eq!(think, "The user wants refunds; call the API.");
}

#[tokio::test]
async fn ollama_text_reply_and_length_stop() {
    let (base, server) = serve_once(200, "application/x-ndjson", include_str!("../fixtures/ollama_chat_text.ndjson")).await;
    let backend = OllamaBackend::new(&base, "qwen3:0.6b", 2048).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let g = backend.generate(request(Thinking::Off), Some(tx), CancelToken::new()).await.unwrap();
    let got = server.await.unwrap();
    assert!(got.body.get("think").is_none(), "think is only sent when asked for");
    assert_eq!(g.content, "Three orders were refunded.");
    assert_eq!(g.stop_reason, StopReason::MaxTokens);
    assert_eq!(drain(&mut rx).1, "Three orders were refunded.");
}

#[tokio::test]
async fn openai_accumulates_tool_call_deltas_and_reads_timings() {
    let (base, server) = serve_once(200, "text/event-stream", include_str!("../fixtures/openai_chat_tool.sse")).await;
    let backend = OpenAiBackend::new(&format!("{base}/v1"), "smollm2", Some("sk-test".into()), 8192).unwrap();
    let g = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap();
    let got = server.await.unwrap();
    assert_eq!(got.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert!(got.headers.to_ascii_lowercase().contains("authorization: bearer sk-test"), "{}", got.headers);
    let b = &got.body;
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"]["include_usage"], true);
    assert_eq!(b["max_tokens"], 64);
    // OpenAI wants arguments as a JSON string and tool results tied by id.
    assert_eq!(b["messages"][2]["tool_calls"][0]["function"]["arguments"], json!("{\"path\":\"/api/orders?status=refunded\"}"));
    assert_eq!(b["messages"][2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(b["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(b["tools"][0]["type"], "function");

    assert_eq!(g.tool_calls.len(), 1);
    assert_eq!(g.tool_calls[0].id, "call_abc");
    assert_eq!(g.tool_calls[0].arguments, json!({"path": "/api/orders"}));
    assert_eq!(g.thinking.as_deref(), Some("Need the refunds."));
    assert_eq!(g.stop_reason, StopReason::ToolCall);
    // llama-server's timings: 120 tokens from its cache, 30 decoded.
    assert_eq!((g.usage.kv.prompt_tokens, g.usage.kv.reused, g.usage.kv.decoded), (150, 120, 30));
    assert_eq!(g.usage.completion_tokens, 14);
}

#[tokio::test]
async fn openai_text_with_think_tags_in_content() {
    let (base, server) = serve_once(200, "text/event-stream", include_str!("../fixtures/openai_chat_text.sse")).await;
    let backend = OpenAiBackend::new(&base, "smollm2", None, 8192).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let g = backend.generate(request(Thinking::Off), Some(tx), CancelToken::new()).await.unwrap();
    let got = server.await.unwrap();
    assert!(!got.headers.to_ascii_lowercase().contains("authorization"));
    assert_eq!(g.thinking.as_deref(), Some("short"));
    assert_eq!(g.content, "The largest is ord-2 (a < b).");
    assert!(g.tool_calls.is_empty());
    assert_eq!(g.tool_parse_error, None);
    assert_eq!((g.usage.kv.prompt_tokens, g.usage.kv.reused, g.usage.kv.decoded), (90, 64, 26));
    assert_eq!(drain(&mut rx), ("short".to_string(), "The largest is ord-2 (a < b).".to_string()));
}

#[tokio::test]
async fn server_error_status_is_typed_and_retryable() {
    let (base, server) = serve_once(500, "application/json", "{\"error\":\"model crashed\"}").await;
    let backend = OllamaBackend::new(&base, "m", 2048).unwrap();
    let err = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap_err();
    server.await.unwrap();
    assert!(matches!(&err, InferenceError::HttpStatus { status: 500, body, .. } if body.contains("model crashed")), "{err}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn unreachable_server_is_an_http_error() {
    // Bind then drop: nothing listens on this port.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let backend = OpenAiBackend::new(&format!("http://127.0.0.1:{port}"), "m", None, 2048).unwrap();
    let err = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, InferenceError::Http { .. }), "{err}");
}

#[tokio::test]
async fn garbage_stream_is_a_protocol_error() {
    let (base, server) = serve_once(200, "application/x-ndjson", "this is not json\n").await;
    let backend = OllamaBackend::new(&base, "m", 2048).unwrap();
    let err = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap_err();
    let _ = server.await;
    assert!(matches!(err, InferenceError::Protocol { .. }), "{err}");
}

#[tokio::test]
async fn cancelled_stream_stops() {
    let (base, server) = serve_once(200, "application/x-ndjson", include_str!("../fixtures/ollama_chat_text.ndjson")).await;
    let backend = OllamaBackend::new(&base, "m", 2048).unwrap();
    let cancel = CancelToken::new();
    cancel.cancel();
    let g = backend.generate(request(Thinking::Off), None, cancel).await.unwrap();
    let _ = server.await;
    assert_eq!(g.stop_reason, StopReason::Cancelled);
}

#[tokio::test]
async fn estimates_tokens_without_a_tokenizer() {
    let backend = OllamaBackend::new("http://127.0.0.1:1", "m", 2048).unwrap();
    let short = backend.count_tokens(&[ChatMessage::user("hi")], &[]).await.unwrap();
    let long = backend.count_tokens(&tool_conversation(), &tools()).await.unwrap();
    assert!(short < long);
}

/// What llama-cpp-python 0.3.36 (`python -m llama_cpp.server`, SmolLM2-135M)
/// streamed for a real request: no usage chunk although it was asked for.
const LLAMA_CPP_PYTHON_REPLY: &str = include_str!("../fixtures/llama_cpp_python_chat.sse");

#[tokio::test]
async fn openai_sends_llama_sampler_no_ops_and_counts_chunks_without_usage() {
    let (base, server) = serve_once(200, "text/event-stream", LLAMA_CPP_PYTHON_REPLY).await;
    let backend = OpenAiBackend::new(&format!("{base}/v1"), "smollm2", None, 8192).unwrap();
    let g = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap();
    let b = server.await.unwrap().body;
    // Without these the server samples with top-k 40, min-p 0.05 and repeat penalty 1.1.
    assert_eq!((b["top_k"].clone(), b["min_p"].clone(), b["repeat_penalty"].clone()), (json!(0), json!(0.0), json!(1.0)));
    assert_eq!(g.content, "There are no three colours.");
    assert_eq!(g.stop_reason, StopReason::EndOfTurn);
    // The server said 6 completion tokens for this request when not streaming; it streamed 6 text chunks.
    assert_eq!(g.usage.completion_tokens, 6);
    assert_eq!(g.usage.kv.prompt_tokens, 0, "the prompt size is unknown, not guessed");
}

#[tokio::test]
async fn openai_empty_stream_after_200_is_an_error_not_an_empty_answer() {
    // llama-cpp-python with a prompt over its context: 200 OK, then nothing.
    let (base, server) = serve_once(200, "text/event-stream", "").await;
    let backend = OpenAiBackend::new(&base, "smollm2", None, 8192).unwrap();
    let err = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap_err();
    let _ = server.await;
    assert!(matches!(&err, InferenceError::Protocol { reason, .. } if reason.contains("without a finish_reason or [DONE]")), "{err}");
}

#[tokio::test]
async fn openai_finish_reason_without_done_is_a_complete_reply() {
    // Servers that close after the last chunk without `[DONE]` are not errors.
    let reply = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Four.\"},\"finish_reason\":\"stop\"}]}\n\n";
    let (base, server) = serve_once(200, "text/event-stream", reply).await;
    let backend = OpenAiBackend::new(&base, "m", None, 8192).unwrap();
    let g = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap();
    let _ = server.await;
    assert_eq!(g.content, "Four.");
    assert_eq!(g.usage.completion_tokens, 1);
}

#[tokio::test]
async fn openai_drops_llama_sampler_fields_once_a_server_refuses_them() {
    let refusal = r#"{"error":{"message":"Unrecognized request argument supplied: top_k","type":"invalid_request_error","param":null,"code":null}}"#;
    let (base, server) = serve_seq(vec![
        (400, "application/json", refusal),
        (200, "text/event-stream", LLAMA_CPP_PYTHON_REPLY),
        (200, "text/event-stream", LLAMA_CPP_PYTHON_REPLY),
    ])
    .await;
    let backend = OpenAiBackend::new(&base, "gpt", None, 8192).unwrap();
    assert!(backend.sends_llama_sampler_fields());
    let g = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap();
    assert_eq!(g.content, "There are no three colours.");
    assert!(!backend.sends_llama_sampler_fields());
    backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap();
    let got = server.await.unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].body["repeat_penalty"], json!(1.0));
    for later in &got[1..] {
        for f in ["top_k", "min_p", "repeat_penalty"] {
            assert!(later.body.get(f).is_none(), "{f} sent again after the refusal: {}", later.body);
        }
    }
}

#[tokio::test]
async fn openai_other_client_errors_are_not_retried() {
    let (base, server) = serve_once(400, "application/json", r#"{"error":{"message":"messages: field required"}}"#).await;
    let backend = OpenAiBackend::new(&base, "m", None, 8192).unwrap();
    let err = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap_err();
    let _ = server.await;
    assert!(matches!(&err, InferenceError::HttpStatus { status: 400, body, .. } if body.contains("field required")), "{err}");
    assert!(backend.sends_llama_sampler_fields());
}

#[tokio::test]
async fn openai_counts_tokens_with_llama_cpp_python_tokenizer() {
    let (base, server) = serve_seq(vec![(200, "application/json", r#"{"count": 40}"#), (200, "application/json", r#"{"count": 7}"#)]).await;
    let backend = OpenAiBackend::new(&format!("{base}/v1"), "smollm2", None, 8192).unwrap();
    assert_eq!(backend.counts_with_server_tokenizer(), None);
    let conv = tool_conversation();
    let n = backend.count_tokens(&conv, &tools()).await.unwrap();
    let framing = OpenAiBackend::FRAMING_PER_MESSAGE * conv.len() as u32 + OpenAiBackend::FRAMING_REPLY;
    assert_eq!(n, 40 + framing);
    assert_eq!(backend.counts_with_server_tokenizer(), Some(true));
    let n = backend.count_tokens(&[ChatMessage::user("hi")], &[]).await.unwrap();
    assert_eq!(n, 7 + OpenAiBackend::FRAMING_PER_MESSAGE + OpenAiBackend::FRAMING_REPLY);
    let got = server.await.unwrap();
    for g in &got {
        assert_eq!(g.request_line, "POST /extras/tokenize/count HTTP/1.1");
    }
    let input = got[0].body["input"].as_str().unwrap();
    for m in &conv {
        assert!(input.contains(&m.content), "{input}");
    }
    assert!(input.contains("/api/orders?status=refunded") && input.contains("Fetch a JSON resource"), "tool calls and tools are counted: {input}");
}

#[tokio::test]
async fn openai_counts_with_llama_server_tokenize_when_extras_are_missing() {
    let (base, server) = serve_seq(vec![(404, "application/json", r#"{"detail":"Not Found"}"#), (200, "application/json", r#"{"tokens": [1, 2, 3]}"#)]).await;
    let backend = OpenAiBackend::new(&base, "m", None, 8192).unwrap();
    let n = backend.count_tokens(&[ChatMessage::user("hi")], &[]).await.unwrap();
    assert_eq!(n, 3 + OpenAiBackend::FRAMING_PER_MESSAGE + OpenAiBackend::FRAMING_REPLY);
    let got = server.await.unwrap();
    assert_eq!(got[1].request_line, "POST /tokenize HTTP/1.1");
    assert_eq!(got[1].body["content"], "hi");
}

#[tokio::test]
async fn openai_without_a_tokenizer_estimates_and_stops_asking() {
    let (base, server) = serve_seq(vec![(404, "application/json", "{}"), (404, "application/json", "{}")]).await;
    let backend = OpenAiBackend::new(&base, "m", None, 8192).unwrap();
    let conv = tool_conversation();
    let n = backend.count_tokens(&conv, &tools()).await.unwrap();
    let _ = server.await;
    assert_eq!(backend.counts_with_server_tokenizer(), Some(false));
    let ollama = OllamaBackend::new("http://127.0.0.1:1", "m", 2048).unwrap();
    assert_eq!(n, ollama.count_tokens(&conv, &tools()).await.unwrap(), "the same estimate as elsewhere");
}

#[tokio::test]
async fn openai_tools_in_text_for_templates_that_render_only_content() {
    let reply = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Let me look.\\n```json\\n{\\\"name\\\": \\\"http_get\\\", \\\"arguments\\\": {\\\"path\\\": \\\"/api/orders\\\"}}\\n```\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let (base, server) = serve_once(200, "text/event-stream", reply).await;
    let backend = OpenAiBackend::new(&base, "smollm2", None, 8192).unwrap().with_tools_in_text(true);
    let g = backend.generate(request(Thinking::Off), None, CancelToken::new()).await.unwrap();
    let b = server.await.unwrap().body;
    assert!(b.get("tools").is_none(), "the template would drop them: {b}");
    let msgs = b["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant", "user"]);
    assert!(msgs.iter().all(|m| m.get("tool_calls").is_none() && m.get("tool_call_id").is_none()), "{b}");
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are a careful investigator.") && system.contains("You can call these tools") && system.contains("http_get"), "{system}");
    let call = msgs[2]["content"].as_str().unwrap();
    assert!(call.starts_with("Let me check.\n```json\n") && call.contains(r#""arguments":{"path":"/api/orders?status=refunded"}"#), "{call}");
    assert_eq!(msgs[3]["content"], "Tool result (http_get):\n{\"count\": 3, \"ids\": [\"a<1>\", \"b\", \"c\"]}");
    assert_eq!(g.tool_calls.len(), 1, "{g:?}");
    assert_eq!((g.tool_calls[0].name.as_str(), &g.tool_calls[0].arguments), ("http_get", &json!({"path": "/api/orders"})));
    assert_eq!(g.stop_reason, StopReason::ToolCall);
    assert_eq!(g.content, "Let me look.");
}

#[tokio::test]
async fn openai_tools_in_text_are_counted_as_sent() {
    let (base, server) = serve_seq(vec![(200, "application/json", r#"{"count": 10}"#)]).await;
    let backend = OpenAiBackend::new(&base, "m", None, 8192).unwrap().with_tools_in_text(true);
    let conv = tool_conversation();
    backend.count_tokens(&conv, &tools()).await.unwrap();
    let got = server.await.unwrap();
    let input = got[0].body["input"].as_str().unwrap();
    assert!(input.contains("You can call these tools") && input.contains("Tool result (http_get):"), "{input}");
}
