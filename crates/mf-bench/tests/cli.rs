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
