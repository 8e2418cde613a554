//! The loop with the real SmolLM2-135M against a real HTTP JSON world served
//! on 127.0.0.1 by this test, through mf-tools' contained `http` tool with
//! loopback allowed explicitly. The model is loaded once per test binary.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use mf_agent::{Agent, AgentEvent, AgentSettings, FixedApprover, Purpose, Store, StoreSink, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{LlamaConfig, LlamaSession};
use mf_tools::{ToolRegistry, ToolSettings};

/// The port is fixed: the model's behaviour depends on the prompt's text, URL included.
const PORT: u16 = 18931;
const CTX: u32 = 1024;

fn model() -> Arc<LlamaSession> {
    static M: OnceLock<Arc<LlamaSession>> = OnceLock::new();
    M.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert!(path.is_file(), "{} is missing: run scripts/setup.sh", path.display());
        Arc::new(LlamaSession::load(LlamaConfig::new(path).with_n_ctx(CTX)).unwrap())
    })
    .clone()
}

fn world() -> Vec<(&'static str, String)> {
    let mut disks = Vec::new();
    for i in 1..=12 {
        let used = if i == 7 { 97 } else { 30 + (i * 7) % 60 };
        disks.push(serde_json::json!({"host": format!("web-{i:02}"), "device": "sda", "used_pct": used, "mount": "/var/cache/images", "model": "Samsung PM883 960GB", "serial": format!("S4{i:04}XYZ")}));
    }
    vec![
        ("/api/index.json", r#"{"endpoints": ["/api/disks.json", "/api/hosts/web-03.json", "/api/teams/storage.json"], "note": "Start with disks."}"#.into()),
        ("/api/disks.json", serde_json::json!({ "disks": disks }).to_string()),
        ("/api/hosts/web-03.json", r#"{"host": "web-03", "role": "image cache", "owner_team": "storage", "team_url": "/api/teams/storage.json", "rack": "B7"}"#.into()),
        ("/api/teams/storage.json", r#"{"team": "storage", "lead": "Priya Raman", "oncall": "Tomas Berg"}"#.into()),
    ]
}

/// Serves the world; returns the paths requested.
fn serve() -> Arc<Mutex<Vec<String>>> {
    let l = TcpListener::bind(("127.0.0.1", PORT)).unwrap_or_else(|e| panic!("port {PORT} is taken ({e}); the real-model test needs it"));
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

const SYSTEM: &str = "You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n{\"name\": \"http\", \"arguments\": {\"url\": \"http://127.0.0.1:18931/api/index.json\"}}\n```\nWhen you have the facts, answer in one sentence.";
const QUESTION: &str = "First call the http tool with url http://127.0.0.1:18931/api/disks.json, then call the http tool with url http://127.0.0.1:18931/api/hosts/web-03.json, then say who owns web-03.";

#[tokio::test(flavor = "multi_thread")]
async fn smollm2_investigates_a_local_api_compacts_and_stays_in_the_window() {
    let requests = serve();
    let backend = model();
    let mut tools = ToolSettings::default();
    tools.http.allowed_hosts = Some(vec![format!("127.0.0.1:{PORT}")]);
    tools.http.allow_loopback = true;
    let registry = Arc::new(ToolRegistry::new(tools).await.unwrap());
    let settings = AgentSettings {
        system_prompt: SYSTEM.into(),
        strategy: StrategyKind::V2,
        reserve: 128,
        ratio: 0.9,
        max_result_chars: 250,
        ..AgentSettings::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("real.db")).unwrap();
    let id = store.create(QUESTION, &serde_json::json!({"test": "real"})).unwrap();
    let mut agent = Agent::new(backend, registry, Arc::new(FixedApprover(false)), settings).unwrap();
    let mut mirror = VecSink::default();
    let out = {
        let mut sink = StoreSink { store: &store, id, next: &mut mirror, error: None };
        let out = agent.run(QUESTION, &mut sink).await.unwrap();
        assert!(sink.error.is_none(), "{:?}", sink.error);
        out
    };
    let ev = &mirror.events;
    eprintln!("exit {:?} after {} rounds, {} compactions; requests {:?}", out.reason, out.rounds, out.compactions, requests.lock().unwrap());

    // The run completed with an exit event, and the model reached the world.
    assert!(matches!(ev.last(), Some(AgentEvent::Exit { .. })));
    assert!(requests.lock().unwrap().iter().any(|p| p == "/api/disks.json"), "the model never fetched the disks");
    // Compaction fired at the small context.
    assert!(out.compactions >= 1 && ev.iter().any(|e| matches!(e, AgentEvent::CompactionStarted { .. })), "no compaction: {:?}", out.reason);
    // No generation ever asked for more than the window: prompt + its longest reply ≤ C.
    let c = CTX;
    for e in ev {
        if let AgentEvent::Kv { purpose, stats, completion_tokens, .. } = e {
            let most = match purpose {
                Purpose::Summary => 256,
                Purpose::Probe => 64,
                Purpose::Round | Purpose::Answer => 128,
            };
            assert!(stats.prompt_tokens + most <= c, "{purpose:?}: {} + {most} > {c}", stats.prompt_tokens);
            assert!(*completion_tokens <= most);
        }
        if let AgentEvent::Gauge { gauge } = e {
            assert_eq!(gauge.context, c);
        }
    }
    // Every event is in the store, verbatim, and the history too.
    let want: Vec<String> = ev.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    assert_eq!(store.events_json(id).unwrap(), want);
    assert_eq!(store.history(id).unwrap(), out.history);
    assert_ne!(store.get(id).unwrap().status, "running");
}
