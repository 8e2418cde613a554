//! A stored investigation exported as a scenario (`mf replay ID --export
//! DIR`): the file passes the scenario validator in its strict mode, and
//! `bench-forgetting --scenarios DIR` runs it on SmolLM2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use mf_agent::events::Gauge;
use mf_agent::{AgentEvent, RunSettings, RunSpec};
use mf_bench::export::{UserProbe, export_session};
use mf_forgetting::{Message, ToolCall};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn call(id: &str, path: &str) -> Message {
    let args = serde_json::json!({ "url": format!("http://127.0.0.1:18950{path}") });
    Message::assistant_calls(&format!("a-{id}"), "", vec![ToolCall { id: id.into(), name: "http_get".into(), arguments: args }])
}

fn result(id: &str, body: &str) -> Message {
    Message::tool_result(&format!("r-{id}"), id, "http_get", body)
}

/// An investigation as the loop stores it: the transcript message by
/// message, and a gauge per round (the fourth round over the threshold).
fn store_investigation(db: &Path) -> i64 {
    let settings = RunSettings { model_path: root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf").display().to_string(), ..RunSettings::default() };
    let spec = RunSpec::resolve(&settings).unwrap();
    let sessions = mf_agent::Sessions::at_db(db);
    let store = sessions.store().unwrap();
    let question = "Why did checkout payments fail on the night of the 14th, and who owns the fix?";
    let id = store.create(question, &serde_json::to_value(&spec).unwrap()).unwrap();
    let mut t = vec![Message::system("s", "You investigate with the http_get tool."), Message::user("q", question)];
    let rounds: [(&str, &str, &str); 5] = [
        ("c1", "/deploys", r#"{"deploy": "checkout-api v4.17.2", "by": "Marisol Okafor", "at": "02:14"}"#),
        ("c2", "/errors", r#"{"error_rate": "38 percent", "code": "E-PAYMENT-TIMEOUT", "upstream": "ledgerd"}"#),
        ("c3", "/oncall", r#"{"team": "payments-core", "lead": "Tobias Lindqvist"}"#),
        ("c4", "/weather", r#"{"sky": "clear", "wind": "calm"}"#),
        ("c5", "/status", r#"{"page": "green"}"#),
    ];
    let mut events = Vec::new();
    for (i, (cid, path, body)) in rounds.iter().enumerate() {
        let tokens = 400 + 300 * i as u32;
        events.push(AgentEvent::Gauge {
            gauge: Gauge {
                pinned: 60,
                compressible: tokens - 120,
                recent: 60,
                free: 0,
                threshold: 1100,
                prompt_tokens: tokens,
                context: 2048,
                reserve: 192,
                messages: t.len() as u32,
            },
            forecast: None,
        });
        t.push(call(cid, path));
        t.push(result(cid, body));
    }
    t.push(Message::assistant("m-next", "Marisol Okafor shipped checkout-api v4.17.2; ledgerd timed out behind it. Checking rollbacks next."));
    t.push(call("c6", "/rollbacks"));
    t.push(result("c6", r#"{"rollback": "none"}"#));
    t.push(Message::assistant(
        "answer",
        "Payments failed because checkout-api v4.17.2 (Marisol Okafor, 02:14) raised E-PAYMENT-TIMEOUT to 38 percent against ledgerd; Tobias Lindqvist of payments-core owns the fix.",
    ));
    store.save_history(id, &t).unwrap();
    for e in &events {
        store.append_event(id, e).unwrap();
    }
    id
}

#[test]
fn an_exported_investigation_passes_the_strict_validator_and_runs_in_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let id = store_investigation(&db);
    let out = dir.path().join("mine");
    let user: Vec<UserProbe> = vec!["Which upstream timed out? => ledgerd, with E-PAYMENT-TIMEOUT".parse().unwrap()];
    let (path, exported) = export_session(&mf_agent::Sessions::at_db(&db), id, &out, &user, 3).unwrap();
    assert_eq!(path, out.join(format!("investigation-{id}.json")));
    let s = &exported.scenario;
    // The fourth gauge (800 + 300 = 1300 > 1100) is the first over the
    // threshold: the history then held the question and three rounds.
    assert_eq!(s.messages.len(), 2 + 2 * 3, "{:?}", s.messages.iter().map(|m| m.id.as_str()).collect::<Vec<_>>());
    assert_eq!(s.probes[0].question, user[0].question, "the user's probe comes first");
    assert!(s.probes.len() >= 2, "{:?}", exported.notes);
    assert!(!path.with_extension("json.tmp").exists());

    let validator = Command::new("python3").arg(root().join("scenarios/tools/validate.py")).arg(&out).arg("--strict").output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&validator.stdout), String::from_utf8_lossy(&validator.stderr));
    assert!(validator.status.success(), "validate.py --strict refused the export:\n{said}\n{}", std::fs::read_to_string(&path).unwrap());

    let model = root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !model.exists() {
        assert!(std::env::var_os("MF_REQUIRE_MODELS").is_none(), "{} is missing and MF_REQUIRE_MODELS is set", model.display());
        eprintln!("skipped the suite run: {} is missing (run `make models`)", model.display());
        return;
    }
    let results = dir.path().join("r.json");
    let run = Command::new(env!("CARGO_BIN_EXE_bench-forgetting"))
        .args(["--model", model.to_str().unwrap(), "--scenarios", out.to_str().unwrap(), "--conditions", "full,baseline", "--scorers", "likelihood"])
        .args(["--threads", "1", "--n-ctx", "4096", "--out", results.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(run.status.success(), "bench-forgetting on the export: {}", String::from_utf8_lossy(&run.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let scores = doc[0]["scores"].as_array().unwrap();
    // Every probe scored under both conditions.
    assert_eq!(scores.len(), 2 * s.probes.len(), "{scores:?}");
    assert!(scores.iter().all(|r| r["scenario"] == s.id.as_str() && r["likelihood"]["nll_facts"].as_f64().is_some_and(f64::is_finite)));
}
