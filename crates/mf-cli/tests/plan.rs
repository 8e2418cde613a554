//! `mf plan` end to end: every scenario plans, bad input exits 2 with one line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mf")).args(args).output().expect("run mf")
}

fn scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("scenarios dir").map(|e| e.expect("entry").path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    files
}

#[test]
fn every_scenario_plans_with_every_strategy_as_json() {
    let files = scenarios();
    assert!(files.len() >= 3, "need at least three conversation files, found {}", files.len());
    for f in &files {
        for s in ["none", "baseline", "masking", "v1", "v2", "v2.1"] {
            let out = mf(&["plan", "--strategy", s, "--json", f.to_str().expect("utf8")]);
            assert!(out.status.success(), "{} {s}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
            let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("plan is JSON");
            assert_eq!(plan["strategy"], s);
            assert!(plan["messages"].as_array().is_some_and(|m| !m.is_empty()));
        }
    }
}

#[test]
fn small_context_makes_compaction_needed_and_table_readable() {
    let f = scenarios().into_iter().find(|p| p.to_string_lossy().contains("long")).expect("a long scenario");
    let out = mf(&["plan", "--strategy", "v2", "--ctx", "2048", "--reserve", "512", f.to_str().expect("utf8")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("compaction needed"), "{text}");
    assert!(text.contains("pinned") && text.contains("recent") && text.contains("tier"), "{text}");
}

fn assert_usage_error(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(needle), "{err} should mention {needle}");
    assert!(!err.contains("panicked"), "{err}");
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    p.to_str().expect("utf8").to_owned()
}

const HEAD: &str = r#""id": "t", "class": "lookup", "length": "short", "title": "t", "probes": [], "#;

#[test]
fn missing_file_is_a_usage_error() {
    assert_usage_error(&mf(&["plan", "/definitely/not/here.json"]), "cannot read");
}

#[test]
fn invalid_json_is_a_usage_error() {
    let d = tempfile::tempdir().expect("tmp");
    let f = write(&d, "bad.json", "{\"id\": \"x\",");
    assert_usage_error(&mf(&["plan", &f]), "bad.json");
}

#[test]
fn unknown_field_is_named() {
    let d = tempfile::tempdir().expect("tmp");
    let f = write(&d, "typo.json", &format!("{{{HEAD} \"mesages\": []}}"));
    assert_usage_error(&mf(&["plan", &f]), "mesages");
}

#[test]
fn empty_history_is_a_usage_error() {
    let d = tempfile::tempdir().expect("tmp");
    let f = write(&d, "empty.json", &format!("{{{HEAD} \"messages\": []}}"));
    assert_usage_error(&mf(&["plan", &f]), "empty.json");
}

#[test]
fn no_user_message_is_a_usage_error() {
    let d = tempfile::tempdir().expect("tmp");
    let f = write(
        &d,
        "nouser.json",
        &format!("{{{HEAD} \"messages\": [{{\"role\": \"system\", \"content\": \"hi\"}}, {{\"role\": \"assistant\", \"content\": \"yo\"}}]}}"),
    );
    assert_usage_error(&mf(&["plan", &f]), "user");
}

#[test]
fn bad_setting_is_a_usage_error() {
    let f = scenarios().into_iter().next().expect("a scenario");
    assert_usage_error(&mf(&["plan", "--gamma=-3", f.to_str().expect("utf8")]), "gamma");
}
