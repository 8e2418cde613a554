//! The binary's argument and input errors (no model needed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bench-forgetting"))
}

#[test]
fn a_malformed_scenario_is_rejected_with_file_and_field() {
    let d = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/compaction/lookup-short.json")).unwrap();
    let bad = good.replacen("\"dimension\"", "\"dimensoin\"", 1);
    std::fs::write(d.path().join("lookup-short.json"), bad).unwrap();
    let out = bin().args(["--model", "/nonexistent.gguf", "--scenarios"]).arg(d.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lookup-short.json") && err.contains("dimensoin"), "{err}");
}

#[test]
fn bad_settings_are_errors_not_panics() {
    let out = bin().args(["--model", "/nonexistent.gguf", "--conditions", "v3"]).current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown condition \"v3\""));
    let out = bin().output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --model"));
    let out = bin().args(["--reps", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn report_refuses_a_file_that_breaks_the_schema() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.json");
    std::fs::write(&f, r#"[{"model": "x"}]"#).unwrap();
    let out = bin().arg("report").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing required property"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&f, "[]").unwrap();
    let out = bin().arg("report").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

/// A model name that is not a file runs on Ollama (`OLLAMA_HOST`); with no
/// server there, one clear line names the address tried.
#[test]
fn a_model_name_without_an_ollama_server_says_where_it_looked() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let out = bin()
        .args(["--model", "some-model:tag", "--filter", "lookup-short"])
        .env("OLLAMA_HOST", format!("127.0.0.1:{port}"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("no Ollama server answered at http://127.0.0.1:{port}")) && err.contains("some-model:tag"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}
