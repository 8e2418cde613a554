//! `mf tool`, `mf sessions`, `mf investigate` through the built binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Command, Output};

fn mf(args: &[&str], home: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mf")).args(args).env("MF_HOME", home).output().unwrap()
}

/// A one-endpoint JSON server on 127.0.0.1; returns its port and counts requests.
fn serve(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s = s.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    (port, hits)
}

#[test]
fn tool_reaches_loopback_only_when_the_host_is_allowed() {
    let home = tempfile::tempdir().unwrap();
    let (port, hits) = serve(r#"{"owner": "Priya Raman"}"#);
    let url = format!(r#"{{"url": "http://127.0.0.1:{port}/api/owner"}}"#);
    let out = mf(&["tool", "http", "--args", &url], home.path());
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"], "address_blocked");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the refused request reached the server");

    let host = format!("127.0.0.1:{port}");
    let out = mf(&["tool", "http", "--args", &url, "--allow-host", &host], home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["status"], 200);
    assert!(v["result"]["body"].as_str().unwrap().contains("Priya Raman"));
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn tool_files_are_confined_to_the_workspace() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "disk sdb is 97% full").unwrap();
    std::fs::write(ws.path().join(".env"), "SECRET=hunter2").unwrap();
    let w = ws.path().to_str().unwrap();
    let out = mf(&["tool", "read_file", "--args", r#"{"path": "notes.txt"}"#, "--workspace", w], home.path());
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("97% full"));
    for args in [r#"{"path": "../../../etc/passwd"}"#, r#"{"path": "/etc/passwd"}"#, r#"{"path": ".env"}"#] {
        let out = mf(&["tool", "read_file", "--args", args, "--workspace", w], home.path());
        assert_eq!(out.status.code(), Some(1), "{args}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("root:") && !text.contains("hunter2"), "{args}: {text}");
    }
    let out = mf(&["tool", "nope", "--args", "{}"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unknown_tool"));
}

#[test]
fn sessions_on_an_empty_store_and_bad_input() {
    let home = tempfile::tempdir().unwrap();
    let out = mf(&["sessions", "list"], home.path());
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no investigations");
    let out = mf(&["sessions", "list", "--json"], home.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    let out = mf(&["sessions", "show", "7"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no investigation with id 7"));
    let out = mf(&["investigate", "q", "--model", "/nonexistent.gguf"], home.path());
    assert_eq!(out.status.code(), Some(2));
    let out = mf(&["investigate", "q", "--model", "/nonexistent.gguf", "--strategy", "v3"], home.path());
    assert_eq!(out.status.code(), Some(2));
    // A summariser is checked like the model, each flag named.
    let server = ["investigate", "q", "--openai", "http://127.0.0.1:9/v1", "--model", "m", "--summariser"];
    let out = mf(&[&server[..], &["ollama", "--summariser-model", "big", "--summariser-url", "h:1"]].concat(), home.path());
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--summariser-url"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = mf(&[&server[..], &["embedded", "--summariser-model", "/nowhere/s.gguf"]].concat(), home.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nowhere/s.gguf"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = mf(&[&server[..], &["embedded"]].concat(), home.path());
    assert_eq!(out.status.code(), Some(2), "--summariser needs --summariser-model");
}

/// An OpenAI-compatible chat server on 127.0.0.1 that answers every chat
/// request with one streamed text reply (no tool call) and anything else
/// (the tokenizer endpoints) with 404; returns its port and the chat request
/// bodies it received.
fn serve_openai(answer: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s = s.unwrap();
            let mut buf = Vec::new();
            let mut tmp = [0u8; 8192];
            let (head_end, len, chat) = loop {
                let n = s.read(&mut tmp).unwrap();
                assert!(n > 0, "client closed early");
                buf.extend_from_slice(&tmp[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                    let len = head.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())).unwrap_or(0);
                    break (i + 4, len, head.starts_with("post /v1/chat/completions "));
                }
            };
            while buf.len() < head_end + len {
                let n = s.read(&mut tmp).unwrap();
                buf.extend_from_slice(&tmp[..n]);
            }
            if !chat {
                let _ = write!(s, "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                continue;
            }
            seen.lock().unwrap().push(serde_json::from_slice(&buf[head_end..head_end + len]).unwrap());
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]});
            let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: {chunk}\r\n\r\ndata: [DONE]\r\n\r\n");
        }
    });
    (port, bodies)
}

#[test]
fn investigate_runs_on_an_openai_server_and_says_kv_is_unavailable() {
    let home = tempfile::tempdir().unwrap();
    let (port, bodies) = serve_openai("The owner is Priya Raman.");
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = mf(&["investigate", "Who owns the service?", "--openai", &url, "--model", "smol-server", "--ctx", "2048", "--json"], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("keeps no KV cache"), "the missing KV snapshots are not said: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(events.iter().any(|e| e["type"] == "final_answer" && e["text"] == "The owner is Priya Raman."), "{stdout}");
    assert!(!events.iter().any(|e| e["type"] == "error"), "{stdout}");
    assert!(!home.path().join("kv").exists(), "a KV file folder was made for a backend without a cache");
    let first_run = {
        let b = bodies.lock().unwrap();
        assert!(!b.is_empty());
        assert_eq!(b[0]["model"], "smol-server");
        assert_eq!(b[0]["stream"], true);
        assert!(b[0]["messages"].as_array().unwrap().iter().any(|m| m["content"] == "Who owns the service?"), "{}", b[0]);
        b.len()
    };

    // The stored settings name the server and the model, so a resume goes back to them.
    let out = mf(&["sessions", "list", "--json"], home.path());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    let id = rows[0]["id"].to_string();
    let out = mf(&["sessions", "resume", &id, "--follow-up", "And which team?", "--json"], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("keeps no KV cache"), "{stderr}");
    let b = bodies.lock().unwrap();
    assert!(b.len() > first_run, "the resume did not reach the server");
    let last = &b[b.len() - 1];
    assert_eq!(last["model"], "smol-server");
    assert!(last["messages"].as_array().unwrap().iter().any(|m| m["content"] == "And which team?"), "{last}");
}

#[test]
fn investigate_with_openai_tools_in_text_sends_no_tools_field() {
    let home = tempfile::tempdir().unwrap();
    let (port, bodies) = serve_openai("It is Priya Raman.");
    let url = format!("http://127.0.0.1:{port}/v1");
    let args = ["investigate", "Who owns the service?", "--openai", &url, "--openai-tools", "text", "--allow-host", "127.0.0.1:9", "--ctx", "2048", "--json"];
    let out = mf(&args, home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b = bodies.lock().unwrap();
    assert!(b[0].get("tools").is_none(), "{}", b[0]);
    let system = b[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("You can call these tools") && system.contains("\"http\""), "{system}");
    let out = mf(&["investigate", "q", "--openai", &url, "--openai-tools", "xml"], home.path());
    assert_eq!(out.status.code(), Some(2), "a bad --openai-tools is a usage error");
}

/// `mf calibrate` on a server's model: the route's calls come from the
/// world, the summaries and closing answers from the server, and the result
/// is stored under the engine and the model name, where the app's Settings
/// look for it when that server and model are chosen.
#[test]
fn calibrate_runs_on_an_openai_server_and_stores_under_its_name() {
    let home = tempfile::tempdir().unwrap();
    let (port, bodies) = serve_openai("- INC-7702 is commanded by the edge on-call; 4,812 subscribers were notified.");
    let url = format!("http://127.0.0.1:{port}/v1");
    let worlds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/agentic");
    let out = mf(
        &[
            "calibrate",
            "--openai",
            &url,
            "--model",
            "qwen/qwen3:8b",
            "--worlds",
            worlds,
            "--strategies",
            "v1",
            "--ratios",
            "0.75",
            "--route-len",
            "4",
            "--json",
        ],
        home.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stored = home.path().join("calibration/openai-qwen_qwen3_8b.json");
    let c: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stored).unwrap()).unwrap();
    assert_eq!(c["model"], "qwen/qwen3:8b", "{c}");
    let rows = c["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{c}");
    assert_eq!(rows[0]["strategy"], "v1");
    assert_eq!(rows[0]["route_total"], 4, "{c}");
    assert!(rows[0]["route_done"].as_u64().unwrap() >= 1, "{c}");
    let b = bodies.lock().unwrap();
    assert!(!b.is_empty() && b.iter().all(|r| r["model"] == "qwen/qwen3:8b"), "every request names the server's model");
}

/// Terminal commands in a server's answer, in the question and in a stored
/// tool result (set the title, clear the screen, colour, a C1 CSI, a
/// hyperlink, carriage return, bell) reach the human output of
/// `mf investigate`, `mf sessions list` and `mf sessions show` as their
/// visible text only.
#[test]
fn human_output_carries_no_terminal_controls() {
    const EVIL: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mSAFE\u{1b}[0m\u{9b}1m\u{9d}8;;http://127.0.0.1/\u{9c}\r\u{7}";
    let clean = |what: &str, out: &Output| {
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            let controls: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n' && *c != '\t').collect();
            assert!(controls.is_empty(), "{what} {stream}: controls reached the terminal: {controls:?} in {text:?}");
            assert!(!text.contains("pwned"), "{what} {stream}: {text:?}");
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let home = tempfile::tempdir().unwrap();
    let (port, _) = serve_openai(EVIL);
    let url = format!("http://127.0.0.1:{port}/v1");
    let question = format!("Who owns the service? {EVIL}");
    let out = mf(&["investigate", &question, "--openai", &url, "--model", "smol-server", "--ctx", "2048"], home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = clean("investigate", &out);
    assert!(text.contains("answer: SAFE"), "{text}");

    // A tool result stored by another face (the app) with the same text.
    let store = mf_agent::Store::open(&home.path().join("sessions.db")).unwrap();
    let id = store.create("What does the tool say?", &serde_json::json!({})).unwrap();
    let result = serde_json::json!({"type": "tool_result", "call_id": "c1", "name": "http", "ok": true, "error": null, "content": EVIL, "truncated": null});
    store.append_event(id, &serde_json::from_value(result).unwrap()).unwrap();
    drop(store);

    let text = clean("sessions list", &mf(&["sessions", "list"], home.path()));
    assert!(text.contains("Who owns the service? SAFE"), "{text}");
    let text = clean("sessions show", &mf(&["sessions", "show", "1"], home.path()));
    assert!(text.contains("answer: SAFE"), "{text}");
    let text = clean("sessions show", &mf(&["sessions", "show", &id.to_string()], home.path()));
    assert!(text.contains("← ok") && text.contains("SAFE"), "{text}");
}

#[test]
fn replay_of_a_missing_investigation_or_strategy_says_which() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("runs.db");
    let db = db.to_str().unwrap();
    let out = mf(&["replay", "42", "--db", db], home.path());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("investigation 42") && err.contains("runs.db"), "{err}");
    let out = mf(&["replay", "42", "--db", db, "--strategies", "v9"], home.path());
    assert_eq!(out.status.code(), Some(2), "an unknown strategy is a usage error: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("v9"));
    // Exporting: the investigation is named, a probe must be "QUESTION => ANSWER", and only with --export.
    let dir = home.path().join("mine");
    let out = mf(&["replay", "42", "--db", db, "--export", dir.to_str().unwrap()], home.path());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("investigation 42"));
    assert!(!dir.join("investigation-42.json").exists(), "nothing written for a missing investigation");
    let out = mf(&["replay", "42", "--db", db, "--export", dir.to_str().unwrap(), "--probe", "no arrow here"], home.path());
    assert_eq!(out.status.code(), Some(2), "a malformed probe is a usage error: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("QUESTION => ANSWER"));
    let out = mf(&["replay", "42", "--db", db, "--probe", "Q? => A"], home.path());
    assert_eq!(out.status.code(), Some(2), "--probe without --export: {}", String::from_utf8_lossy(&out.stderr));
}

/// `mf sessions history`, `pin`, `unpin` and `compact` on an investigation
/// stopped after its answer (on a server, so no model file is needed): the
/// history names each message's id; a pinned message survives a compaction
/// that drops everything else but the first and the recent messages; the
/// compaction is stored as one asked for by hand; unknown ids are usage errors.
#[test]
fn sessions_pin_and_compact_by_hand() {
    let home = tempfile::tempdir().unwrap();
    let (port, _) = serve_openai("The owner is Priya Raman.");
    let url = format!("http://127.0.0.1:{port}/v1");
    let out = mf(&["investigate", "Who owns the service?", "--openai", &url, "--model", "smol-server", "--ctx", "2048", "--json"], home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = mf(&["sessions", "resume", "1", "--follow-up", "And which team?", "--json"], home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let history = |home: &std::path::Path| -> Vec<serde_json::Value> {
        let out = mf(&["sessions", "history", "1", "--json"], home);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let ids = |h: &[serde_json::Value]| h.iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(&history(home.path())), ["m0", "m1", "m2", "m3", "m4"]);
    let out = mf(&["sessions", "history", "1"], home.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains("m2") && l.contains("assistant") && l.contains("The owner is Priya Raman.")), "{text}");

    // Keep m2 verbatim.
    let out = mf(&["sessions", "pin", "1", "m2"], home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("m2 pinned"), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&mf(&["sessions", "history", "1"], home.path()).stdout).lines().any(|l| l.contains("m2") && l.contains("pinned")));

    // Compact now with the baseline: the question goes, the pinned answer stays.
    let out = mf(&["sessions", "compact", "1", "--strategy", "baseline", "--json"], home.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let started = events.iter().find(|e| e["type"] == "compaction_started").expect("no compaction_started");
    assert_eq!(started["by_hand"]["kind"], "compact_now", "{started}");
    assert_eq!(started["strategy"], "baseline");
    let h = history(home.path());
    assert_eq!(ids(&h), ["m0", "m2", "m3", "m4"]);
    assert_eq!(h[1]["pinned"], true);
    assert_eq!(h[1]["content"], "The owner is Priya Raman.");
    let shown = String::from_utf8_lossy(&mf(&["sessions", "show", "1"], home.path()).stdout).into_owned();
    assert!(shown.contains("compaction by hand: compact now (baseline)"), "{shown}");

    // Unpin; unknown messages and investigations are refused.
    assert!(mf(&["sessions", "unpin", "1", "m2"], home.path()).status.success());
    assert_eq!(history(home.path())[1].get("pinned"), None);
    let out = mf(&["sessions", "pin", "1", "m9"], home.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no message m9"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = mf(&["sessions", "compact", "1", "--up-to", "m9"], home.path());
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let out = mf(&["sessions", "compact", "7"], home.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no investigation with id 7"));
}
