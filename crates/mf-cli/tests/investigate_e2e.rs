//! `mf investigate` end to end through the built binary with the real
//! SmolLM2-135M against a JSON world served on 127.0.0.1 by this test, then
//! `mf sessions list / show / resume` on what it stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

#[path = "../../mf-agent/tests/support/loopback_world.rs"]
mod loopback_world;
use loopback_world::{PORT, QUESTION, SYSTEM, serve};

const CTX: u64 = 1024;
const RESERVE: u64 = 128;

fn model() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.is_file() {
        Some(p)
    } else {
        // The test command sets MF_REQUIRE_MODELS=1: there a missing model fails the test by name.
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", p.display());
        eprintln!("skipped: {} is missing (run scripts/setup.sh)", p.display());
        None
    }
}

fn mf(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mf")).args(args).env("MF_HOME", home).output().unwrap()
}

/// The JSON event lines of a run; every stdout line must be one.
fn events(out: &Output) -> Vec<Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON event line ({e}): {l}"));
            assert!(v["type"].is_string(), "{l}");
            v
        })
        .collect()
}

fn of_type<'a>(ev: &'a [Value], t: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["type"] == t).collect()
}

/// Every generation fits the window: prompt + its longest reply ≤ C. Every
/// gauge does too, except a resumed history stored over the window (the
/// closing request and answer are part of it): then a summary pass is the
/// next generation, before any round.
fn assert_within_window(ev: &[Value]) {
    for (i, e) in ev.iter().enumerate().filter(|(_, e)| e["type"] == "gauge") {
        let g = &e["gauge"];
        assert_eq!(g["context"], CTX);
        // Measured at a round's start, before a compaction: within the window, not yet within C − G.
        if g["prompt_tokens"].as_u64().unwrap() > CTX {
            let next = ev[i..].iter().find(|e| e["type"] == "kv").expect("a generation follows the gauge");
            assert_eq!(next["purpose"], "summary", "gauge over the window not followed by a compaction: {e}, then {next}");
        }
    }
    for e in of_type(ev, "kv") {
        let most = match e["purpose"].as_str().unwrap() {
            "summary" => 256,
            "probe" => 64,
            _ => RESERVE,
        };
        let prompt = e["stats"]["prompt_tokens"].as_u64().unwrap();
        assert!(prompt + most <= CTX, "{e}");
        assert!(e["completion_tokens"].as_u64().unwrap() <= most, "{e}");
    }
}

/// The restore event of a resumed run, the KV figures of its first
/// generation (a round, or a summary pass when it compacts first), and the
/// prompt tokens it decoded in all.
fn resume_figures(ev: &[Value]) -> (Value, Value, u64) {
    let restore = of_type(ev, "kv_restore").first().copied().cloned().expect("a resumed run says whether it loaded the KV snapshot");
    let first = of_type(ev, "kv").first().copied().cloned().expect("a generation ran");
    let total = of_type(ev, "kv").iter().map(|e| e["stats"]["decoded"].as_u64().unwrap()).sum();
    (restore, first["stats"].clone(), total)
}

#[test]
fn investigate_stores_everything_and_sessions_list_show_resume_through_the_binary() {
    let Some(model) = model() else { return };
    let model = model.to_str().unwrap().to_owned();
    let requests = serve();
    let home = tempfile::tempdir().unwrap();
    let host = format!("127.0.0.1:{PORT}");
    let t0 = std::time::Instant::now();
    let out = mf(
        &[
            "investigate",
            QUESTION,
            "--system",
            SYSTEM,
            "--strategy",
            "v2",
            "--model",
            &model,
            // Two threads, whatever the machine: greedy decoding's arithmetic
            // (and so SmolLM2's run, which this test's checks were written
            // for) depends on how the work is split.
            "--threads",
            "2",
            "--ctx",
            "1024",
            "--reserve",
            "128",
            "--ratio",
            "0.9",
            "--max-result-chars",
            "250",
            "--allow-host",
            &host,
            "--approve",
            "auto",
            "--safety-cap",
            "6",
            "--json",
            // Free-form calls, as this test was written: held by the grammar,
            // SmolLM2 repeats its first call here and the run ends before C fills.
            "--tool-grammar",
            "false",
        ],
        home.path(),
    );
    eprintln!("investigate: {:.1} s, requests {:?}", t0.elapsed().as_secs_f64(), requests.lock().unwrap());
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let ev = events(&out);

    // The run: started, reached the world, compacted, never left the window, ended with a reason.
    assert_eq!(ev[0]["type"], "started");
    assert!(requests.lock().unwrap().iter().any(|p| p == "/api/disks.json"), "the model never fetched the disks");
    assert_within_window(&ev);
    let finished = of_type(&ev, "compaction_finished");
    assert!(!finished.is_empty(), "no compaction fired at C = 1024");
    for f in &finished {
        assert!(f["tokens_after"].as_u64() < f["tokens_before"].as_u64(), "{f}");
        assert!(f["duration_ms"].as_u64().unwrap() > 0, "{f}");
    }
    // Each compaction was preceded by a KV snapshot, and the gauge that follows it carries a forecast field.
    assert_eq!(of_type(&ev, "kv_snapshot").iter().filter(|e| e["reason"] == "before_compaction").count(), of_type(&ev, "compaction_started").len());
    assert!(of_type(&ev, "gauge").iter().all(|g| g.get("forecast").is_some()));
    let exit = ev.last().unwrap();
    assert_eq!(exit["type"], "exit", "the last event is the exit");
    let reason = exit["reason"]["kind"].as_str().unwrap().to_owned();
    for e in &ev {
        if e["type"] == "kv" || e["type"] == "compaction_finished" || e["type"] == "exit" || e["type"] == "kv_snapshot" {
            let mut e = e.clone();
            for k in ["report", "summary", "notes", "verbatim", "summarised", "masked", "dropped"] {
                e.as_object_mut().unwrap().remove(k);
            }
            eprintln!("{e}");
        }
    }
    // The KV cache was saved beside the store for a resume.
    assert!(home.path().join("kv/1.bin").is_file());

    // sessions list: one finished investigation with every event stored.
    let list = mf(&["sessions", "list", "--json"], home.path());
    assert!(list.status.success());
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["id"], 1);
    assert_eq!(rows[0]["status"], "finished");
    assert_eq!(rows[0]["events"].as_u64().unwrap() as usize, ev.len());
    assert!(rows[0]["exit_reason"].as_str().unwrap().len() > 3);
    // sessions show: the stored events are exactly the lines printed.
    let show = mf(&["sessions", "show", "1", "--json"], home.path());
    assert!(show.status.success());
    assert_eq!(String::from_utf8_lossy(&show.stdout), String::from_utf8_lossy(&out.stdout));
    let human = mf(&["sessions", "show", "1"], home.path());
    assert!(String::from_utf8_lossy(&human.stdout).contains("⟳ compacted"));

    // sessions resume, once decoding the stored history again and once from the saved KV cache.
    let follow = "Who owns web-03? Answer in one sentence.";
    let again = mf(&["sessions", "resume", "1", "--approve", "auto", "--json", "--safety-cap", "1", "--no-kv", "--follow-up", follow], home.path());
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let ev2 = events(&again);
    assert_eq!(ev2[0]["type"], "started");
    assert_eq!(ev2[0]["resumed"], true);
    assert_within_window(&ev2);
    let (restore, first, total) = resume_figures(&ev2);
    assert_eq!(restore["used"], false);
    assert_eq!(first["reused"], 0, "without the snapshot the first prompt is decoded whole: {first}");
    assert_eq!(first["decoded"], first["prompt_tokens"]);
    eprintln!("resume without the KV snapshot: {restore} / first generation {first} / decoded in all {total}");

    let resumed = mf(&["sessions", "resume", "1", "--approve", "auto", "--json", "--safety-cap", "1"], home.path());
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let ev3 = events(&resumed);
    assert_within_window(&ev3);
    let (restore, first, total) = resume_figures(&ev3);
    eprintln!("resume with the KV snapshot: {restore} / first generation {first} / decoded in all {total}");
    assert_eq!(restore["used"], true, "{restore}");
    // The first generation reuses the loaded cache: all that matched when it
    // is a round, the pinned prefix when a compaction's summary pass comes first.
    let reused = first["reused"].as_u64().unwrap();
    assert!(reused > 300 && reused <= restore["matched_tokens"].as_u64().unwrap(), "{first} vs {restore}");
    if ev3.iter().find(|e| e["type"] == "kv").unwrap()["purpose"] == "round" {
        assert_eq!(first["reused"], restore["matched_tokens"]);
    }
    assert_eq!(ev3.last().unwrap()["type"], "exit");

    // The store has all three runs' events, in order, and the status is final again.
    let show = mf(&["sessions", "show", "1", "--json"], home.path());
    let all = events(&show);
    assert_eq!(all.len(), ev.len() + ev2.len() + ev3.len());
    let list: Value = serde_json::from_slice(&mf(&["sessions", "list", "--json"], home.path()).stdout).unwrap();
    assert_eq!(list[0]["status"], "finished");
    eprintln!("first run exit: {reason}; total {:.1} s", t0.elapsed().as_secs_f64());
}

/// Where set-up installed the MCP test servers.
fn mcp_server(name: &str) -> PathBuf {
    let dir = match std::env::var_os("MF_MCP_SERVERS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/measured-forgetting/mcp"),
    };
    let p = dir.join("node_modules/.bin").join(name);
    assert!(p.exists(), "the MCP test server `{name}` is missing at {}: run scripts/setup.sh", p.display());
    p
}

/// The real SmolLM2, with the tool grammar, picks a tool of a real MCP server
/// (`@modelcontextprotocol/server-everything`) from the tools offered,
/// the call is asked for with its server and tool named, runs on the server,
/// and its reply is in the model's next round and the stored session.
#[test]
fn a_small_model_calls_an_mcp_servers_tool_end_to_end() {
    let Some(model) = model() else { return };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("mcp.json");
    std::fs::write(&config, serde_json::json!({"mcpServers": {"everything": {"command": mcp_server("mcp-server-everything"), "args": ["stdio"]}}}).to_string())
        .unwrap();
    let out = mf(
        &[
            "investigate",
            "--model",
            model.to_str().unwrap(),
            // One llama.cpp thread: the other test of this binary runs beside
            // it, and llama.cpp's threads spin while they wait.
            "--threads",
            "1",
            "--tool-grammar",
            "--mcp-config",
            config.to_str().unwrap(),
            "--approve",
            "auto",
            // The server's 13 tools take about 1,200 tokens: MCP tools may
            // take a quarter of the window, so 2,048 refuses the server.
            "--ctx",
            "6144",
            "--safety-cap",
            "3",
            "--json",
            "Call the everything__echo tool with message 'hello from the investigation', then tell me what it echoed.",
        ],
        home.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = events(&out);
    let started = of_type(&ev, "started")[0];
    assert!(started["tools"].as_array().unwrap().iter().any(|t| t == "everything__echo"), "the server's tools are offered: {started}");
    let call = of_type(&ev, "tool_call")
        .into_iter()
        .find(|c| c["name"].as_str().unwrap().starts_with("everything__"))
        .expect("the model called a tool of the MCP server");
    let asked = of_type(&ev, "approval_requested").into_iter().find(|a| a["call_id"] == call["call_id"]).expect("an MCP call asks");
    assert_eq!(asked["mcp"]["server"], "everything", "{asked}");
    assert!(asked["summary"].as_str().unwrap().starts_with("MCP server everything · tool "), "{asked}");
    let result = of_type(&ev, "tool_result").into_iter().find(|r| r["call_id"] == call["call_id"]).expect("the call ran");
    assert_eq!(result["ok"], true, "{result}");
    if call["name"] == "everything__echo" {
        assert!(result["content"].as_str().unwrap().starts_with("Echo: "), "{result}");
    }
    // The server's reply reached the model: a later generation's prompt grew by it, and the session stored it.
    assert!(of_type(&ev, "kv").len() >= 2, "the model ran again after the call");
    let show = mf(&["sessions", "show", "1", "--json"], home.path());
    assert!(String::from_utf8_lossy(&show.stdout).contains(result["content"].as_str().unwrap()), "the stored session holds the MCP reply");
}
