//! A judge on an OpenAI-compatible server (`--judge-openai URL --judge-model
//! NAME`): the answers come from SmolLM2 in-process, the grades from a
//! loopback server that grades everything 3. Such a judge fails its control
//! brackets (a contradiction gets what the reference gets), and the report
//! must say that its figures are not evidence.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Serves `POST /v1/chat/completions` with one streamed reply, `grade`,
/// to every request; records the requests' bodies. Anything else is a 404.
fn grading_server(grade: &'static str) -> (u16, Arc<Mutex<Vec<serde_json::Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap_or(0);
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':')
                    && k.trim().eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap_or(());
            let mut out = conn;
            if !first.starts_with("POST /v1/chat/completions ") {
                let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                continue;
            }
            if let Ok(v) = serde_json::from_slice(&body) {
                log.lock().unwrap().push(v);
            }
            let delta = serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": grade}, "finish_reason": "stop"}]});
            let _ = write!(out, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: {delta}\n\ndata: [DONE]\n\n");
        }
    });
    (port, seen)
}

#[test]
fn a_judge_on_a_server_that_fails_its_brackets_is_marked_not_evidence() {
    let model = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !model.exists() {
        // The test command sets MF_REQUIRE_MODELS=1: there a missing model fails the test by name.
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", model.display());
        eprintln!("skipped: {} is missing (run `make models`)", model.display());
        return;
    }
    let (port, seen) = grading_server("3");
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_bench-forgetting"))
        .current_dir(root())
        .args(["--model", model.to_str().unwrap(), "--filter", "lookup-short", "--conditions", "full", "--threads", "1", "--answer-tokens", "32"])
        .args(["--scorers", "keyword,judge"])
        .args(["--judge-openai", &format!("http://127.0.0.1:{port}/v1"), "--judge-model", "always-three", "--out"])
        .arg(&out_file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    // The grades came from the server, asked as the judge, for the answers and the controls.
    let asked = seen.lock().unwrap().clone();
    assert!(!asked.is_empty(), "the judge server was never asked");
    assert!(asked.iter().all(|b| b["model"] == "always-three"), "{asked:?}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    let r = &doc[0];
    assert_eq!(r["settings"]["judge_model"], "always-three", "{}", r["settings"]);
    let judge = &r["control_brackets"]["judge"];
    assert_eq!(judge["identical"], 3.0, "{judge}");
    assert_eq!(judge["contradiction"], 3.0, "{judge}");

    // Its brackets fail: every report of this file says its figures are not evidence.
    let md = Command::new(env!("CARGO_BIN_EXE_bench-forgetting")).arg("report").arg(&out_file).output().unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("judge (0–3; not evidence: its brackets fail)"), "{md}");
    assert!(md.contains("**The judge's brackets fail**"), "{md}");
    assert!(md.contains("judge mean (not evidence)"), "{md}");
}
