//! Loading and validating a scenario directory.
//!
//! Every `*.json` file of the directory is one conversation in the format of
//! [`mf_forgetting::Scenario`]. A malformed file is rejected with its path and
//! the field at fault; the benchmark never runs on a partly valid set.

use std::path::{Path, PathBuf};

use mf_forgetting::{ForgettingError, Scenario};

use crate::error::{BenchError, Result};

/// A scenario and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The file.
    pub path: PathBuf,
    /// The conversation and its probes.
    pub scenario: Scenario,
}

/// Parses one file's text; `path` is only used in errors.
///
/// # Errors
/// [`BenchError::InvalidScenario`] naming the file and the field: a JSON
/// syntax error (`json`, with line and column), an unknown or missing field,
/// a validation failure of the format (e.g. `probes[0].required`), an `id`
/// that differs from the file name, or a file without probes.
pub fn parse_file(path: &Path, text: &str) -> Result<Scenario> {
    let invalid = |field: String, reason: String| BenchError::InvalidScenario { file: path.to_path_buf(), field, reason };
    let scenario = Scenario::parse(text).map_err(|e| match e {
        ForgettingError::Parse { line, column, message } => {
            let field = field_of_serde_message(&message).unwrap_or_else(|| "json".to_owned());
            invalid(field, format!("{message} (line {line}, column {column})"))
        }
        ForgettingError::InvalidConversation { field, reason } => invalid(field, reason),
        ForgettingError::EmptyHistory => invalid("messages".to_owned(), "the history is empty".to_owned()),
        ForgettingError::NoUserMessage => invalid("messages".to_owned(), "no user message (the question is missing)".to_owned()),
        other => invalid("scenario".to_owned(), other.to_string()),
    })?;
    if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        && stem != scenario.id
    {
        return Err(invalid("id".to_owned(), format!("{:?} differs from the file name {stem:?}", scenario.id)));
    }
    if scenario.probes.is_empty() {
        return Err(invalid("probes".to_owned(), "a benchmark scenario needs at least one probe".to_owned()));
    }
    for (i, p) in scenario.probes.iter().enumerate() {
        if p.reference.trim().is_empty() {
            return Err(invalid(format!("probes[{i}].reference"), "the judge needs a non-empty reference answer".to_owned()));
        }
    }
    Ok(scenario)
}

/// serde names the field in "unknown field `x`" / "missing field `x`" messages.
fn field_of_serde_message(message: &str) -> Option<String> {
    for marker in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some(p) = message.find(marker) {
            let rest = &message[p + marker.len()..];
            return rest.find('`').map(|e| rest[..e].to_owned());
        }
    }
    None
}

/// The `*.json` files of `dir`, sorted by path (scenario and world folders).
///
/// # Errors
/// [`BenchError::ReadDir`] when the folder cannot be read.
pub(crate) fn json_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|source| BenchError::ReadDir { path: dir.to_path_buf(), source })?;
    let mut paths = Vec::new();
    for e in entries {
        let e = e.map_err(|source| BenchError::ReadDir { path: dir.to_path_buf(), source })?;
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") && p.is_file() {
            paths.push(p);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Loads every `*.json` file of `dir`, sorted by file name, keeping those
/// whose id contains one of `filters` (all when `filters` is empty).
///
/// # Errors
/// [`BenchError::ReadDir`] / [`BenchError::ReadFile`] for I/O,
/// [`BenchError::InvalidScenario`] for the first malformed file (every file is
/// validated, selected or not), [`BenchError::NoScenarios`] when nothing is left.
pub fn load_dir(dir: &Path, filters: &[String]) -> Result<Vec<LoadedScenario>> {
    let paths = json_files(dir)?;
    let mut out = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|source| BenchError::ReadFile { path: path.clone(), source })?;
        let scenario = parse_file(&path, &text)?;
        if !ids.insert(scenario.id.clone()) {
            return Err(BenchError::InvalidScenario { file: path, field: "id".to_owned(), reason: format!("duplicate scenario id {:?}", scenario.id) });
        }
        if filters.is_empty() || filters.iter().any(|f| scenario.id.contains(f.as_str())) {
            out.push(LoadedScenario { path, scenario });
        }
    }
    if out.is_empty() {
        return Err(BenchError::NoScenarios(dir.to_path_buf()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const GOOD: &str = r##"{
      "id": "tiny", "class": "lookup", "length": "short", "title": "t",
      "messages": [
        {"role": "system", "content": "You are an investigation assistant."},
        {"role": "user", "content": "Which build broke checkout?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "call_1", "name": "http_get", "arguments": {"url": "http://api.local/builds"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "http_get", "content": "{\"build\": 4817}"},
        {"role": "assistant", "content": "Build 4817."},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "You are welcome."}
      ],
      "probes": [{"id": "p1", "question": "Which build?", "dimension": "fact_retention",
                  "required": [["4817", "#4817"]], "partial": ["build"], "reference": "Build 4817."}]
    }"##;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn loads_and_filters() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "tiny.json", GOOD);
        write(d.path(), "other.json", &GOOD.replace("\"tiny\"", "\"other\""));
        write(d.path(), "notes.txt", "ignored");
        let all = load_dir(d.path(), &[]).unwrap();
        assert_eq!(all.iter().map(|s| s.scenario.id.as_str()).collect::<Vec<_>>(), ["other", "tiny"]);
        let some = load_dir(d.path(), &["ti".to_owned()]).unwrap();
        assert_eq!(some.len(), 1);
        assert!(matches!(load_dir(d.path(), &["zzz".to_owned()]), Err(BenchError::NoScenarios(_))));
    }

    /// Each malformed file is rejected with its path and the field at fault.
    #[test]
    fn malformed_files_name_file_and_field() {
        let cases: Vec<(String, &str)> = vec![
            (GOOD.replace("\"title\": \"t\"", "\"title\": \"t\", \"titel\": 1"), "titel"),
            (GOOD.replace("\"title\": \"t\",", ""), "title"),
            (GOOD.replace("\"required\": [[\"4817\", \"#4817\"]]", "\"required\": []"), "probes[0].required"),
            (GOOD.replace("\"required\": [[\"4817\", \"#4817\"]]", "\"required\": [[\"\"]]"), "probes[0].required[0]"),
            (GOOD.replace("\"reference\": \"Build 4817.\"", "\"reference\": \" \""), "probes[0].reference"),
            (GOOD.replace("\"tool_call_id\": \"call_1\"", "\"tool_call_id\": \"call_9\""), "messages[3].tool_call_id"),
            (GOOD.replace("\"id\": \"tiny\"", "\"id\": \"tony\""), "id"),
            (GOOD.replace("\"dimension\": \"fact_retention\"", "\"dimension\": \"vibes\""), "json"),
            (GOOD.replace("\"probes\": [{", "\"probes\": [], \"x\": [{"), "x"),
            (GOOD[..200].to_owned(), "json"),
        ];
        for (text, field) in cases {
            let d = tempfile::tempdir().unwrap();
            let p = write(d.path(), "tiny.json", &text);
            let e = load_dir(d.path(), &[]).unwrap_err();
            match &e {
                BenchError::InvalidScenario { file, field: f, .. } => {
                    assert_eq!(file, &p, "{e}");
                    assert_eq!(f, field, "{e}");
                }
                other => panic!("{field}: unexpected {other}"),
            }
            let msg = e.to_string();
            assert!(msg.contains("tiny.json") && msg.contains(field), "{msg}");
        }
    }

    #[test]
    fn a_file_without_probes_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        let start = GOOD.find("\"probes\"").unwrap();
        write(d.path(), "tiny.json", &format!("{}\"probes\": []}}", &GOOD[..start]));
        let e = load_dir(d.path(), &[]).unwrap_err().to_string();
        assert!(e.contains("tiny.json: probes: "), "{e}");
    }

    #[test]
    fn the_shipped_set_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/compaction");
        let all = load_dir(&dir, &[]).unwrap();
        assert_eq!(all.len(), 18);
        assert_eq!(all.iter().map(|s| s.scenario.probes.len()).sum::<usize>(), 54);
    }

    #[test]
    fn a_missing_directory_is_an_io_error() {
        let e = load_dir(Path::new("/nonexistent/dir"), &[]).unwrap_err();
        assert!(matches!(e, BenchError::ReadDir { .. }), "{e}");
    }
}
