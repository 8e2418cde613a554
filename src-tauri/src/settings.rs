//! The app's settings file: mf-agent's [`RunSettings`] as JSON in the app's
//! config folder. Checking them is mf-agent's ([`RunSpec::resolve`], the one
//! validator); here its [`SettingErrors`] become the `invalid_settings`
//! error whose `details.fields` the settings panel shows beside each field.

use std::path::Path;

use mf_agent::{RunSettings, RunSpec, SettingErrors};

use crate::error::CommandError;

/// Every setting of the app (mf-agent's run settings).
pub type Settings = RunSettings;

/// The defaults, with `model_path` the default model of the app's models folder.
#[must_use]
pub fn defaults(model_path: &Path) -> Settings {
    RunSettings { model_path: model_path.display().to_string(), ..RunSettings::default() }
}

/// `invalid_settings`, its `details.fields` mapping each bad field to its message.
#[must_use]
pub fn invalid(e: &SettingErrors) -> CommandError {
    let fields: serde_json::Map<String, serde_json::Value> = e.0.iter().map(|f| (f.field.clone(), f.message.clone().into())).collect();
    CommandError::new("invalid_settings", e.to_string()).with_details(serde_json::json!({ "fields": fields }))
}

/// Checks `s` as a run would; the spec it would run with.
///
/// # Errors
/// `invalid_settings` listing every bad field.
pub fn resolve(s: &Settings) -> Result<RunSpec, CommandError> {
    RunSpec::resolve(s).map_err(|e| invalid(&e))
}

/// Reads the settings file; `None` when there is none yet. Files written by
/// earlier versions read as they are: every field they hold kept its name
/// and meaning (`threads` a number, `tool_approvals` the four groups), and
/// fields they lack take their defaults.
///
/// # Errors
/// `settings_file` when the file exists but is unreadable or not valid settings JSON.
pub fn load(path: &Path) -> Result<Option<Settings>, CommandError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CommandError::new("settings_file", format!("cannot read {}: {e}", path.display()))),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| CommandError::new("settings_file", format!("{} is not valid settings JSON: {e}", path.display())))
}

/// Writes the settings file atomically (temp file + rename).
///
/// # Errors
/// `settings_file` when the folder or file cannot be written.
pub fn save(s: &Settings, path: &Path) -> Result<(), CommandError> {
    let err = |e: std::io::Error| CommandError::new("settings_file", format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let text = serde_json::to_string_pretty(s).map_err(|e| CommandError::internal(e.to_string()))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn model() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.gguf");
        std::fs::write(&p, "GGUF").unwrap();
        (d, p)
    }

    #[test]
    fn defaults_are_valid_and_round_trip_through_the_file() {
        let (d, p) = model();
        let s = defaults(&p);
        resolve(&s).unwrap();
        let file = d.path().join("cfg/settings.json");
        assert_eq!(load(&file).unwrap(), None);
        save(&s, &file).unwrap();
        assert_eq!(load(&file).unwrap(), Some(s));
    }

    #[test]
    fn every_bad_field_reaches_the_form_by_name() {
        let (_d, p) = model();
        let mut s = defaults(&p);
        s.model_path = "/nowhere/x.gguf".into();
        s.context = 256;
        s.threads = Some(0);
        let e = resolve(&s).unwrap_err();
        assert_eq!(e.code, "invalid_settings");
        let fields: Vec<&String> = e.details["fields"].as_object().unwrap().keys().collect();
        assert_eq!(fields, ["context", "model_path", "reserve", "threads"]);
        assert_eq!(e.details["fields"]["reserve"], "Generation reserve must be smaller than the context size (256).");
        assert!(e.message.starts_with("4 setting(s) need fixing"), "{}", e.message);
    }

    #[test]
    fn a_file_written_by_the_former_settings_reads_and_runs_the_same() {
        let (d, p) = model();
        let file = d.path().join("settings.json");
        let old = serde_json::json!({
            "engine": "embedded", "model_path": p.display().to_string(), "tool_grammar": false,
            "context": 8192, "reserve": 1024, "ratio": 0.6, "recent": 3, "strategy": "v2.1", "gamma": 1.2,
            "threads": 4, "gpu": false, "thinking": false,
            "tool_approvals": {"code": "deny", "files": "allow", "http_get": "ask", "http_write": "ask"},
            "workspace_roots": [d.path().display().to_string()], "allowed_hosts": ["127.0.0.1:9"],
            "system_prompt": "Be brief.", "max_result_chars": 1500
        });
        std::fs::write(&file, old.to_string()).unwrap();
        let s = load(&file).unwrap().unwrap();
        let spec = resolve(&s).unwrap();
        assert_eq!(spec.engine, mf_agent::EngineChoice::Embedded { model: p, threads: Some(4), gpu: false, tool_grammar: false });
        assert_eq!((spec.context, spec.agent.reserve, spec.agent.recent, spec.agent.plan.gamma), (8192, 1024, 3, 1.2));
        assert_eq!(spec.agent.strategy, mf_forgetting::StrategyKind::V21);
        assert_eq!(spec.agent.system_prompt, "Be brief.");
        assert_eq!(spec.agent.max_result_chars, 1500);
        assert_eq!(spec.tools.policy.http_get, mf_tools::policy::Mode::Ask);
        assert_eq!(spec.tools.allowed_hosts, ["127.0.0.1:9"]);
    }

    #[test]
    fn a_corrupt_file_is_a_clear_error_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("settings.json");
        std::fs::write(&f, "{\"context\": \"big\"}").unwrap();
        let e = load(&f).unwrap_err();
        assert_eq!(e.code, "settings_file");
        assert!(e.message.contains("not valid settings JSON"), "{}", e.message);
    }
}
