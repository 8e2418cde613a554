//! The loopback JSON world of the real-model tests (mf-agent's `real.rs`,
//! mf-cli's `investigate_e2e.rs`; the app's `ui/e2e/app.mjs` serves the same
//! pages): a disk inventory, a host and its team, served on 127.0.0.1:PORT,
//! with the system prompt and question that make SmolLM2 walk it. Included by
//! each test with `#[path]`, so the two stay one.
//!
//! The port is fixed: the model's behaviour depends on the prompt's text, URL
//! included (at 18932 SmolLM2 never reached a compaction).

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub const PORT: u16 = 18931;

pub const SYSTEM: &str = "You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n{\"name\": \"http\", \"arguments\": {\"url\": \"http://127.0.0.1:18931/api/index.json\"}}\n```\nWhen you have the facts, answer in one sentence.";
pub const QUESTION: &str = "First call the http tool with url http://127.0.0.1:18931/api/disks.json, then call the http tool with url http://127.0.0.1:18931/api/hosts/web-03.json, then say who owns web-03.";

pub fn world() -> Vec<(&'static str, String)> {
    let mut disks = Vec::new();
    for i in 1..=12 {
        let used = if i == 7 { 97 } else { 30 + (i * 7) % 60 };
        disks.push(serde_json::json!({"host": format!("web-{i:02}"), "device": "sda", "used_pct": used, "mount": "/var/cache/images", "model": "Samsung PM883 960GB", "serial": format!("S4{i:04}XYZ")}));
    }
    vec![
        ("/api/index.json", r#"{"endpoints": ["/api/disks.json", "/api/hosts/web-03.json", "/api/teams/storage.json"], "note": "Start with disks."}"#.into()),
        ("/api/disks.json", serde_json::json!({ "disks": disks }).to_string()),
        (
            "/api/hosts/web-03.json",
            r#"{"host": "web-03", "role": "image cache", "owner_team": "storage", "team_url": "/api/teams/storage.json", "rack": "B7"}"#.into(),
        ),
        ("/api/teams/storage.json", r#"{"team": "storage", "lead": "Priya Raman", "oncall": "Tomas Berg"}"#.into()),
    ]
}

/// Serves the world; returns the paths requested.
pub fn serve() -> Arc<Mutex<Vec<String>>> {
    // Fixed port (it is in the prompt); another process may hold it for a
    // while on a shared machine, so wait up to ten minutes for it.
    let mut tries = 0;
    let l = loop {
        match TcpListener::bind(("127.0.0.1", PORT)) {
            Ok(l) => break l,
            Err(e) if tries < 600 => {
                if tries == 0 {
                    eprintln!("port {PORT} is taken ({e}); waiting");
                }
                tries += 1;
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            Err(e) => panic!("port {PORT} is taken ({e}); this test needs it"),
        }
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let pages = world();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 8192];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
            s2.lock().unwrap().push(path.clone());
            let (status, body) = match pages.iter().find(|(p, _)| *p == path) {
                Some((_, b)) => ("200 OK", b.clone()),
                None => ("404 Not Found", r#"{"error": "no such endpoint"}"#.to_string()),
            };
            let _ = write!(c, "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    seen
}
