//! The desktop app's shell: thin Tauri commands that adapt `mf-agent`
//! (investigations, approvals, the session store) and `mf-bench` (the
//! benchmark) to the Svelte UI in `ui/`.
//!
//! How it fits: [`run`] builds the app over [`app`], which registers the
//! commands of [`COMMANDS`] and, at start-up, an [`AppState`]: where things
//! live ([`Paths`]), the saved [`settings::Settings`], the loaded model,
//! the running investigations and benchmark runs. Each command parses its
//! arguments, calls the crates, and answers with their types or a
//! [`error::CommandError`] (`{code, message, details}`). Streams (an
//! investigation's `AgentEvent`s, a benchmark's progress) go to one
//! `ipc::Channel` per run. The names in [`COMMANDS`] are also in
//! `ui/src/lib/commands.json` and in the capability
//! `src-tauri/capabilities/default.json`; a test keeps the three equal.

pub mod approver;
pub mod bench;
pub mod calibration;
pub mod demo;
pub mod engine;
pub mod error;
pub mod investigation;
pub mod mcp;
pub mod models;
pub mod replay;
pub mod settings;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mf_agent::{Sessions, Store};
use tauri::{Manager as _, Runtime, State};

use crate::error::{CmdResult, CommandError};
use crate::settings::Settings;

/// Where the app keeps and finds things.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The settings file.
    pub settings: PathBuf,
    /// The session store.
    pub db: PathBuf,
    /// The folder of model files.
    pub models: PathBuf,
    /// The benchmark's scenario folder.
    pub scenarios: PathBuf,
    /// The live worlds (demo investigations and the agentic benchmark).
    pub worlds: PathBuf,
    /// Where benchmark exports are written.
    pub exports: PathBuf,
}

impl Paths {
    /// The paths for this process. `MF_CONFIG_DIR` (settings) and `MF_HOME`
    /// (sessions, as for `mf`) override the platform folders. `MF_ROOT` is
    /// a checkout holding `models/` and `scenarios/`. Without it, an
    /// installed app (its bundle's `resources` hold `scenarios/`) reads the
    /// scenarios and demo worlds from there and keeps models in the data
    /// folder; otherwise the checkout the app was built from (or the working
    /// directory) is used.
    #[must_use]
    pub fn resolve(config_dir: Option<PathBuf>, data_dir: Option<PathBuf>, resources: Option<PathBuf>) -> Self {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let installed = resources.filter(|r| env("MF_ROOT").is_none() && r.join("scenarios").is_dir());
        let root = env("MF_ROOT").unwrap_or_else(|| if built.join("models").is_dir() { built } else { PathBuf::from(".") });
        let data = env("MF_HOME").or(data_dir).unwrap_or_else(|| root.join(".mf-data"));
        let config = env("MF_CONFIG_DIR").or(config_dir).unwrap_or_else(|| root.join(".mf-config"));
        // An installed app keeps models in its data folder; a checkout in its `models/`.
        let (models, shipped) = match installed {
            Some(resources) => (data.join("models"), resources),
            None => (root.join("models"), root),
        };
        Self {
            settings: config.join("settings.json"),
            db: data.join("sessions.db"),
            models: env("MF_MODELS_DIR").unwrap_or(models),
            scenarios: env("MF_SCENARIOS_DIR").unwrap_or_else(|| shipped.join("scenarios/compaction")),
            worlds: env("MF_WORLDS_DIR").unwrap_or_else(|| shipped.join("scenarios/agentic")),
            exports: data.join("exports"),
        }
    }
}

/// Everything the commands share.
pub struct AppState {
    /// Where things live.
    pub paths: Paths,
    settings: Mutex<Settings>,
    /// The sessions (the store, the KV caches and the loaded model), shared with the CLI's data folder.
    pub sessions: Arc<Sessions>,
    /// The OpenAI-compatible engine's API key: kept in memory only, never in
    /// the settings file or the logs (`OPENAI_API_KEY` is the fallback).
    api_key: Mutex<Option<String>>,
    /// Investigations started in this process.
    runs: Mutex<HashMap<i64, investigation::Running>>,
    /// Benchmark runs of this process.
    benches: bench::BenchRuns,
    next_run: AtomicU64,
    /// How long a tool call waits for the user's approval.
    pub approval_timeout: Duration,
    /// Where `download_recommended_model` downloads from.
    pub download: Option<models::DownloadSource>,
    /// Why the settings file could not be used at start (the defaults are in
    /// use until Settings are saved): shown in the window, never a panic.
    pub settings_problem: Option<String>,
}

impl AppState {
    /// The state over `paths`, with the saved settings (or the defaults
    /// with the default model, when there is no settings file yet). A
    /// settings file that cannot be read or is not valid settings does not
    /// stop the app: the defaults are used, a copy of the file is kept
    /// beside it (`settings.json.unreadable`), and
    /// [`AppState::settings_problem`] says so in the window.
    ///
    /// # Errors
    /// `invalid_environment` for a malformed `MF_MODEL_DOWNLOAD_*` override.
    pub fn new(paths: Paths) -> CmdResult<Self> {
        let defaults = || {
            let model = models::default_model(&paths.models).map_or_else(|| paths.models.join(models::RECOMMENDED_FILE), |(p, _)| p);
            settings::defaults(&model)
        };
        let (settings, settings_problem) = match settings::load(&paths.settings) {
            Ok(Some(s)) => (s, None),
            Ok(None) => (defaults(), None),
            Err(e) => {
                let copy = paths.settings.with_extension("json.unreadable");
                let kept = match std::fs::copy(&paths.settings, &copy) {
                    Ok(_) => format!("a copy of it is kept as {}", copy.display()),
                    Err(c) => format!("it could not be copied aside ({c}), so it is left as it is until you save"),
                };
                tracing::warn!("{}", e.message);
                (defaults(), Some(format!("{} The defaults are in use; {kept}. Saving the settings writes a new file.", e.message)))
            }
        };
        let sessions = Arc::new(Sessions::at_db(&paths.db));
        Ok(Self {
            paths,
            settings: Mutex::new(settings),
            sessions,
            api_key: Mutex::new(None),
            runs: Mutex::new(HashMap::new()),
            benches: Mutex::new(HashMap::new()),
            next_run: AtomicU64::new(1),
            approval_timeout: approver::APPROVAL_TIMEOUT,
            download: match models::DownloadSource::from_env()? {
                Some(over) => Some(over),
                None => models::DownloadSource::recommended(),
            },
            settings_problem,
        })
    }

    /// The current settings.
    ///
    /// # Errors
    /// Only a poisoned lock.
    pub fn settings(&self) -> CmdResult<Settings> {
        self.settings.lock().map(|s| s.clone()).map_err(|_| CommandError::internal("settings poisoned"))
    }

    /// Changes the settings with `change` and saves them (validated).
    ///
    /// # Errors
    /// Validation or the settings file cannot be written; then nothing changed.
    pub fn update_settings(&self, change: impl FnOnce(&mut Settings)) -> CmdResult<Settings> {
        let mut s = self.settings.lock().map_err(|_| CommandError::internal("settings poisoned"))?;
        let mut next = s.clone();
        change(&mut next);
        settings::resolve(&next)?;
        settings::save(&next, &self.paths.settings)?;
        *s = next.clone();
        Ok(next)
    }

    /// A reading connection to the session store.
    ///
    /// # Errors
    /// `store` when it cannot be opened.
    pub fn store(&self) -> CmdResult<Store> {
        Ok(Store::open(&self.paths.db)?)
    }

    /// The API key for an OpenAI-compatible engine, if the user gave one.
    #[must_use]
    pub fn api_key(&self) -> Option<String> {
        self.api_key.lock().ok().and_then(|k| k.clone())
    }

    /// Keeps (or forgets) the API key in memory.
    ///
    /// # Errors
    /// Only a poisoned lock.
    pub fn set_api_key(&self, key: Option<String>) -> CmdResult<()> {
        *self.api_key.lock().map_err(|_| CommandError::internal("key poisoned"))? = key;
        Ok(())
    }

    fn next_run_id(&self) -> u64 {
        self.next_run.fetch_add(1, Ordering::SeqCst)
    }

    fn bench(&self, run_id: &str) -> CmdResult<Arc<bench::BenchRun>> {
        let b = self.benches.lock().map_err(|_| CommandError::internal("bench table poisoned"))?;
        b.get(run_id).cloned().ok_or_else(|| CommandError::new("not_found", format!("No benchmark run {run_id} in this window.")))
    }
}

/// Settings commands (the logic is in [`settings`]).
mod settings_cmd {
    use super::{AppState, CmdResult, Settings, State};
    use mf_agent::SettingErrors;

    /// The saved settings.
    #[tauri::command]
    pub fn get_settings(state: State<'_, AppState>) -> CmdResult<Settings> {
        state.settings()
    }

    /// Validates and saves `settings`; returns them as saved.
    #[tauri::command]
    pub fn save_settings(state: State<'_, AppState>, settings: Settings) -> CmdResult<Settings> {
        state.update_settings(|s| *s = settings)
    }

    /// Checks `settings` as a run would, without saving them: every field
    /// that cannot be used, with its message (none: they would run).
    #[tauri::command]
    pub fn validate_settings(settings: Settings) -> SettingErrors {
        mf_agent::RunSpec::resolve(&settings).err().unwrap_or_default()
    }
}

/// Declares the commands once: the list of names the sync test reads and
/// the `generate_handler!` that registers them.
macro_rules! app_commands {
    ($($module:ident :: $name:ident),* $(,)?) => {
        /// Every command the app registers, by name (the UI's
        /// `commands.json` and the capability must list exactly these).
        pub const COMMANDS: &[&str] = &[$(stringify!($name)),*];

        fn handler<R: Runtime>() -> impl Fn(tauri::ipc::Invoke<R>) -> bool + Send + Sync + 'static {
            tauri::generate_handler![$($module::$name),*]
        }
    };
}

app_commands![
    investigation::start_investigation,
    investigation::stop_investigation,
    investigation::approve_tool_call,
    investigation::list_investigations,
    investigation::investigation_events,
    investigation::resume_investigation,
    investigation::undo_compaction,
    investigation::investigation_history,
    investigation::pin_message,
    investigation::compact_investigation,
    demo::list_demo_worlds,
    demo::start_demo,
    engine::list_server_models,
    engine::set_api_key,
    settings_cmd::get_settings,
    settings_cmd::save_settings,
    settings_cmd::validate_settings,
    models::app_info,
    models::list_models,
    models::download_recommended_model,
    bench::bench_options,
    bench::run_benchmark,
    bench::cancel_benchmark,
    bench::export_benchmark,
    calibration::calibration,
    calibration::calibrate_model,
    replay::replay_investigation,
    replay::export_investigation,
    mcp::test_mcp_servers,
];

/// The app over any runtime (tests use `tauri::test::mock_builder()`).
#[must_use]
pub fn app<R: Runtime>(builder: tauri::Builder<R>) -> tauri::Builder<R> {
    builder.plugin(tauri_plugin_dialog::init()).invoke_handler(handler()).setup(|app| {
        // Sessions go where `mf` keeps them, so History lists the CLI's too.
        let config_dir = app.path().app_config_dir().ok();
        if let Some(dir) = &config_dir {
            carry_over_settings(dir);
        }
        let paths = Paths::resolve(config_dir, Some(mf_agent::session::default_dir()), app.path().resource_dir().ok());
        let state = AppState::new(paths)?;
        // Investigations of a process that died are marked interrupted (resumable).
        if let Err(e) = state.sessions.recover_dead() {
            tracing::warn!("recovering interrupted investigations: {e}");
        }
        app.manage(state);
        Ok(())
    })
}

/// The app's identifier before `dev.measured-forgetting.desktop`: its
/// config folder ended in `.app`, which macOS takes for an application bundle.
const FORMER_IDENTIFIER: &str = "dev.measured-forgetting.app";

/// Copies the settings file of the former config folder (beside `dir`) into
/// `dir` when `dir` has none yet, so an update keeps the user's settings.
fn carry_over_settings(dir: &Path) {
    let (Some(parent), new) = (dir.parent(), dir.join("settings.json")) else { return };
    let old = parent.join(FORMER_IDENTIFIER).join("settings.json");
    if new.exists() || !old.is_file() {
        return;
    }
    let copied = std::fs::create_dir_all(dir).and_then(|()| std::fs::copy(&old, &new));
    if let Err(e) = copied {
        tracing::warn!("cannot carry the settings over from {}: {e}", old.display());
    }
}

/// Runs the desktop app.
pub fn run() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama-cpp-2=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = app(tauri::Builder::default()).run(tauri::generate_context!()) {
        eprintln!("measured-forgetting: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;
    use std::path::Path;
    use tauri::Manager;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// Settings saved under the former identifier are carried over once,
    /// and never over settings the new folder already has.
    #[test]
    fn settings_of_the_former_config_folder_are_carried_over() {
        let d = tempfile::tempdir().unwrap();
        let old = d.path().join(FORMER_IDENTIFIER);
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("settings.json"), r#"{"context": 4096}"#).unwrap();
        let new = d.path().join("dev.measured-forgetting.desktop");
        carry_over_settings(&new);
        assert_eq!(std::fs::read_to_string(new.join("settings.json")).unwrap(), r#"{"context": 4096}"#);
        std::fs::write(new.join("settings.json"), r#"{"context": 8192}"#).unwrap();
        carry_over_settings(&new);
        assert_eq!(std::fs::read_to_string(new.join("settings.json")).unwrap(), r#"{"context": 8192}"#, "existing settings are kept");
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root().join("tauri.conf.json")).unwrap()).unwrap();
        let id = json["identifier"].as_str().unwrap();
        assert!(!id.ends_with(".app") && id != FORMER_IDENTIFIER, "{id}");
    }

    /// An installed app (a bundle whose resources hold `scenarios/`) reads
    /// its demo worlds and scenarios from the bundle and keeps models in the
    /// data folder, wherever it is started from; without such a bundle (a
    /// binary under `target/`) the checkout it was built from is used.
    #[test]
    fn an_installed_app_reads_its_bundle_and_keeps_models_in_the_data_folder() {
        let set = ["MF_ROOT", "MF_HOME", "MF_CONFIG_DIR", "MF_MODELS_DIR", "MF_SCENARIOS_DIR", "MF_WORLDS_DIR"];
        if set.iter().any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty())) {
            eprintln!("skipped: one of {set:?} is set in this environment");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let res = d.path().join("usr/lib/Measured Forgetting");
        std::fs::create_dir_all(res.join("scenarios/agentic")).unwrap();
        let p = Paths::resolve(Some(d.path().join("cfg")), Some(d.path().join("data")), Some(res.clone()));
        assert_eq!(p.worlds, res.join("scenarios/agentic"));
        assert_eq!(p.scenarios, res.join("scenarios/compaction"));
        assert_eq!(p.models, d.path().join("data/models"));
        assert_eq!(p.db, d.path().join("data/sessions.db"));
        assert_eq!(p.settings, d.path().join("cfg/settings.json"));
        // A resource folder without scenarios (the binary under target/): the checkout.
        let p = Paths::resolve(Some(d.path().join("cfg")), Some(d.path().join("data")), Some(d.path().join("empty")));
        assert_eq!(p.worlds, root().join("scenarios/agentic"));
        assert_eq!(p.models, root().join("models"));
    }

    fn json(path: &str) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap()
    }

    fn strings(v: &serde_json::Value) -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
    }

    /// The plugin permissions the capability may grant: the dialog plugin's
    /// open (a native file/folder picker that returns a path). Not
    /// `dialog:default` (it adds save and message dialogs), no fs, shell or
    /// opener permission: the webview gets no file access.
    const PLUGIN_PERMISSIONS: &[&str] = &["dialog:allow-open"];

    /// Checks a capability against the commands and the granted plugin
    /// permissions: exactly `allow-<command>` for each command plus exactly
    /// `plugins`, every one a plain string (no scoped grants), window `main` only.
    fn check_capability(cap: &serde_json::Value, commands: &[String], plugins: &[&str]) -> Result<(), String> {
        let perms = cap["permissions"].as_array().ok_or("no permissions array")?;
        let mut granted = BTreeSet::new();
        for p in perms {
            let name = p.as_str().ok_or_else(|| format!("a scoped or non-string permission: {p}"))?;
            if !granted.insert(name.to_owned()) {
                return Err(format!("{name} is granted twice"));
            }
        }
        let mut wanted: BTreeSet<String> = commands.iter().map(|c| format!("allow-{}", c.replace('_', "-"))).collect();
        wanted.extend(plugins.iter().map(|p| (*p).to_owned()));
        if granted != wanted {
            let extra: Vec<_> = granted.difference(&wanted).collect();
            let missing: Vec<_> = wanted.difference(&granted).collect();
            return Err(format!("capability grants extra {extra:?}, lacks {missing:?}"));
        }
        if cap["windows"] != serde_json::json!(["main"]) {
            return Err(format!("windows must be [\"main\"], not {}", cap["windows"]));
        }
        if cap.get("remote").is_some() || cap.get("webviews").is_some() || cap.get("platforms").is_some() {
            return Err("no remote URLs, extra webviews or platform limits".into());
        }
        Ok(())
    }

    /// `generate_handler!` (through `app_commands!`), the UI's commands.json and
    /// the capability name the same commands, and the capability grants no
    /// plugin permission but the open dialog: adding one to only one place,
    /// or a broader dialog/fs/shell permission anywhere, fails here.
    #[test]
    fn registered_commands_ui_list_and_capability_agree() {
        let registered: Vec<String> = COMMANDS.iter().map(|s| (*s).to_owned()).collect();
        let list = json("ui/src/lib/commands.json");
        let ui = strings(&list["commands"]);
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        assert_eq!(set(&registered).len(), registered.len(), "a command is registered twice");
        assert_eq!(set(&ui), set(&registered), "ui/src/lib/commands.json vs app_commands! in src-tauri/src/lib.rs");
        assert_eq!(strings(&list["plugin_permissions"]), PLUGIN_PERMISSIONS, "ui/src/lib/commands.json plugin_permissions");
        let cap = json("src-tauri/capabilities/default.json");
        check_capability(&cap, &registered, PLUGIN_PERMISSIONS).unwrap();
    }

    /// The checker refuses what must not sneak in (so the test above can fail).
    #[test]
    fn capability_check_refuses_broader_or_missing_permissions() {
        let registered: Vec<String> = COMMANDS.iter().map(|s| (*s).to_owned()).collect();
        let cap = json("src-tauri/capabilities/default.json");
        let with = |extra: serde_json::Value| {
            let mut c = cap.clone();
            c["permissions"].as_array_mut().unwrap().push(extra);
            check_capability(&c, &registered, PLUGIN_PERMISSIONS)
        };
        for p in [
            "dialog:default",
            "dialog:allow-save",
            "dialog:allow-message",
            "fs:default",
            "fs:allow-read-file",
            "shell:allow-open",
            "core:default",
            "allow-nope",
        ] {
            let e = with(p.into()).unwrap_err();
            assert!(e.contains(p), "{p}: {e}");
        }
        let scoped = serde_json::json!({"identifier": "fs:scope", "allow": [{"path": "$HOME/**"}]});
        assert!(with(scoped).unwrap_err().contains("scoped"));
        let mut c = cap.clone();
        c["permissions"].as_array_mut().unwrap().retain(|p| p != "dialog:allow-open");
        assert!(check_capability(&c, &registered, PLUGIN_PERMISSIONS).unwrap_err().contains("dialog:allow-open"));
        let mut c = cap.clone();
        c["remote"] = serde_json::json!({"urls": ["https://*"]});
        assert!(check_capability(&c, &registered, PLUGIN_PERMISSIONS).is_err());
    }

    /// build.rs turned exactly these commands into the app's permissions, and
    /// the dialog plugin's `allow-open` (what the capability grants) allows
    /// its `open` command and nothing else.
    #[test]
    fn build_script_generated_one_permission_per_command() {
        let acl = json("gen/schemas/acl-manifests.json");
        let app = &acl["__app-acl__"]["permissions"];
        let mut got: BTreeSet<String> = app.as_object().unwrap().keys().cloned().collect();
        let cmds: BTreeSet<String> = app.as_object().unwrap().values().flat_map(|p| strings(&p["commands"]["allow"])).collect();
        let want: BTreeSet<String> = COMMANDS.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(cmds, want);
        got.retain(|k| k.starts_with("deny-"));
        assert_eq!(got.len(), COMMANDS.len(), "one deny- permission per command too");
        let open = &acl["dialog"]["permissions"]["allow-open"]["commands"];
        assert_eq!(strings(&open["allow"]), ["open"], "{open}");
        assert_eq!(open["deny"], serde_json::json!([]));
        let plugins: BTreeSet<&str> = acl.as_object().unwrap().keys().map(String::as_str).filter(|k| !k.starts_with("__")).collect();
        assert!(!plugins.contains("fs") && !plugins.contains("shell"), "no fs or shell plugin is registered: {plugins:?}");
    }

    /// A settings file that is not valid settings (a hand edit gone wrong, a
    /// file cut short) does not stop the app: the defaults are used, the file
    /// is copied aside untouched, and the window is told, with the path.
    #[test]
    fn an_unreadable_settings_file_is_kept_and_named_and_the_defaults_run() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("config/settings.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let broken = r#"{"context": "four thousand", "ratio": 0.7"#;
        std::fs::write(&file, broken).unwrap();
        let state = crate::testing::state(d.path());
        assert_eq!(state.paths.settings, file);
        let problem = state.settings_problem.clone().unwrap();
        assert!(problem.contains(&file.display().to_string()) && problem.contains("defaults are in use"), "{problem}");
        assert_eq!(state.settings().unwrap().context, mf_agent::RunSettings::default().context);
        assert_eq!(std::fs::read_to_string(file.with_extension("json.unreadable")).unwrap(), broken);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), broken, "nothing is written before the user saves");
        let app = tauri::test::mock_builder().invoke_handler(handler()).build(tauri::generate_context!()).unwrap();
        app.manage(state);
        let info = invoke(&app, "app_info", serde_json::json!({})).unwrap();
        assert!(info["notice"].as_str().unwrap().starts_with(&problem), "{info}");
    }

    /// With the real context (the generated ACL from the capability), the
    /// window reaches the app's commands, but none of the dialog plugin's
    /// other commands (save, message, ask, confirm) nor any fs command.
    /// (`open` itself would show a GTK dialog: it is not invoked here.)
    #[test]
    fn the_real_acl_grants_no_plugin_command_but_open() {
        let d = tempfile::tempdir().unwrap();
        let paths = Paths {
            settings: d.path().join("cfg/settings.json"),
            db: d.path().join("data/sessions.db"),
            models: d.path().join("models"),
            scenarios: root().join("scenarios/compaction"),
            worlds: root().join("scenarios/agentic"),
            exports: d.path().join("exports"),
        };
        let app = tauri::test::mock_builder().plugin(tauri_plugin_dialog::init()).invoke_handler(handler()).build(tauri::generate_context!()).unwrap();
        app.manage(AppState::new(paths).unwrap());
        assert!(invoke(&app, "get_settings", serde_json::json!({})).is_ok());
        for cmd in ["plugin:dialog|save", "plugin:dialog|message", "plugin:dialog|ask", "plugin:dialog|confirm", "plugin:fs|read_file", "plugin:fs|read_dir"] {
            // Arguments of the wrong type: a command the ACL let through fails
            // on them at once (and the assertion says so) instead of opening a dialog.
            let e = invoke(&app, cmd, serde_json::json!({"options": 5, "message": 5, "title": 5, "path": 5})).unwrap_err();
            eprintln!("{cmd}: {e}");
            assert!(e.as_str().unwrap_or_default().contains("not allowed"), "{cmd}: {e}");
        }
        // A remote page reaches nothing, open included.
        let e = invoke_from(&app, "https://evil.example", "plugin:dialog|open", serde_json::json!({"options": 5})).unwrap_err();
        assert!(e.to_string().contains("not allowed"), "{e}");
    }

    /// The content security policy forbids remote scripts, images and connections.
    #[test]
    fn csp_is_strict() {
        let conf = json("tauri.conf.json");
        let csp = conf["app"]["security"]["csp"].as_str().unwrap();
        let directive =
            |name: &str| csp.split(';').map(str::trim).find(|d| d.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("no {name} in {csp}")).to_owned();
        assert_eq!(directive("default-src"), "default-src 'self'");
        assert_eq!(directive("script-src"), "script-src 'self'");
        assert_eq!(directive("img-src"), "img-src 'self' data:");
        assert_eq!(directive("object-src"), "object-src 'none'");
        for d in csp.split(';') {
            assert!(!d.contains("https:") && !d.contains("http://*") && !d.contains(" *"), "remote source in {d}");
            assert!(!d.contains("unsafe-eval"), "{d}");
        }
        assert_eq!(conf["app"]["withGlobalTauri"], serde_json::Value::Null, "no global __TAURI__ object");
    }

    fn mock_app(dir: &Path) -> tauri::App<tauri::test::MockRuntime> {
        mock_app_with(dir, None)
    }

    fn mock_app_with(dir: &Path, download: Option<models::DownloadSource>) -> tauri::App<tauri::test::MockRuntime> {
        let models = dir.join("models");
        std::fs::create_dir_all(&models).unwrap();
        std::fs::write(models.join(models::TEST_MODEL_FILE), "GGUF").unwrap();
        let paths = Paths {
            settings: dir.join("cfg/settings.json"),
            db: dir.join("data/sessions.db"),
            models,
            scenarios: root().join("scenarios/compaction"),
            worlds: root().join("scenarios/agentic"),
            exports: dir.join("exports"),
        };
        let mut state = AppState::new(paths).unwrap();
        if download.is_some() {
            state.download = download;
        }
        let app = tauri::test::mock_builder().invoke_handler(handler()).build(tauri::test::mock_context(tauri::test::noop_assets())).unwrap();
        app.manage(state);
        app
    }

    fn invoke(app: &tauri::App<tauri::test::MockRuntime>, cmd: &str, body: serde_json::Value) -> Result<serde_json::Value, serde_json::Value> {
        invoke_from(app, "tauri://localhost", cmd, body)
    }

    fn invoke_from(
        app: &tauri::App<tauri::test::MockRuntime>,
        origin: &str,
        cmd: &str,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, serde_json::Value> {
        let w = tauri::WebviewWindowBuilder::new(app, "main", Default::default()).build().or_else(|_| app.get_webview_window("main").ok_or(())).unwrap();
        let req = tauri::webview::InvokeRequest {
            cmd: cmd.into(),
            callback: tauri::ipc::CallbackFn(0),
            error: tauri::ipc::CallbackFn(1),
            url: origin.parse().unwrap(),
            body: tauri::ipc::InvokeBody::Json(body),
            headers: Default::default(),
            invoke_key: tauri::test::INVOKE_KEY.to_string(),
        };
        tauri::test::get_ipc_response(&w, req).map(|b| b.deserialize::<serde_json::Value>().unwrap())
    }

    /// Commands answer over IPC with the UI's shapes, and refusals are `{code, message, details}`.
    #[test]
    fn settings_and_errors_over_ipc() {
        let d = tempfile::tempdir().unwrap();
        let app = mock_app(d.path());
        let s = invoke(&app, "get_settings", serde_json::json!({})).unwrap();
        assert!(s["model_path"].as_str().unwrap().ends_with(models::TEST_MODEL_FILE), "{s}");
        let info = invoke(&app, "app_info", serde_json::json!({})).unwrap();
        assert!(info["notice"].as_str().unwrap().contains("small test model"), "{info}");

        let mut bad = s.clone();
        bad["context"] = 100.into();
        let e = invoke(&app, "save_settings", serde_json::json!({ "settings": bad })).unwrap_err();
        assert_eq!(e["code"], "invalid_settings");
        assert!(e["details"]["fields"]["context"].as_str().unwrap().contains("at least 512"), "{e}");
        assert!(!d.path().join("cfg/settings.json").exists(), "refused settings are not written");

        let mut good = s.clone();
        good["ratio"] = 0.5.into();
        assert_eq!(invoke(&app, "save_settings", serde_json::json!({ "settings": good })).unwrap()["ratio"], 0.5);
        assert_eq!(settings::load(&d.path().join("cfg/settings.json")).unwrap().unwrap().ratio, 0.5);
        // A fresh state reads what was saved.
        let again = mock_app(d.path());
        assert_eq!(invoke(&again, "get_settings", serde_json::json!({})).unwrap()["ratio"], 0.5);

        assert_eq!(invoke(&app, "list_investigations", serde_json::json!({})).unwrap(), serde_json::json!([]));
        assert_eq!(invoke(&app, "investigation_events", serde_json::json!({"id": 42})).unwrap_err()["code"], "not_found");
        assert_eq!(invoke(&app, "stop_investigation", serde_json::json!({"id": 42})).unwrap_err()["code"], "not_found");
        let e = invoke(&app, "approve_tool_call", serde_json::json!({"id": 1, "callId": "c", "argumentsHash": "h", "approved": true})).unwrap_err();
        assert_eq!(e["code"], "not_found");
        let models = invoke(&app, "list_models", serde_json::json!({})).unwrap();
        assert_eq!(models[0]["name"], models::TEST_MODEL_FILE);
        assert_eq!(invoke(&app, "export_benchmark", serde_json::json!({"runId": "x", "format": "json"})).unwrap_err()["code"], "not_found");
    }

    /// A page from another origin (a remote site the webview was sent to)
    /// reaches no command: nothing grants remote origins.
    #[test]
    fn remote_origins_reach_no_command() {
        let d = tempfile::tempdir().unwrap();
        let app = mock_app(d.path());
        for cmd in ["get_settings", "save_settings", "start_investigation"] {
            let e = invoke_from(&app, "https://evil.example", cmd, serde_json::json!({})).unwrap_err();
            assert!(e.as_str().unwrap_or_default().contains("not allowed"), "{cmd}: {e}");
        }
        assert!(invoke(&app, "get_settings", serde_json::json!({})).is_ok());
    }

    /// Serves `body` for every request on 127.0.0.1 (HEAD gets the headers only).
    fn serve(body: Vec<u8>) -> u16 {
        use std::io::{Read as _, Write as _};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let mut buf = [0u8; 4096];
                let n = c.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).starts_with("HEAD");
                let _ = write!(c, "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                if !head {
                    let _ = c.write_all(&body);
                }
            }
        });
        port
    }

    /// The download command fetches into models/, checks the sha256, and refuses a wrong one.
    #[test]
    fn downloads_the_recommended_model_from_a_local_server_and_checks_it() {
        let d = tempfile::tempdir().unwrap();
        let body: Vec<u8> = b"GGUF".iter().copied().chain((0..200_000u32).map(|i| (i % 251) as u8)).collect();
        let sample = d.path().join("sample.bin");
        std::fs::write(&sample, &body).unwrap();
        let sha = mf_inference::models::download::sha256_file(&sample).unwrap();
        let port = serve(body.clone());
        let src = |sha256: &str, name: &str| models::DownloadSource {
            url: format!("http://127.0.0.1:{port}/m.gguf"),
            file_name: name.into(),
            sha256: Some(sha256.into()),
        };
        let app = mock_app_with(d.path(), Some(src(&sha, "fetched.gguf")));
        invoke(&app, "download_recommended_model", serde_json::json!({"onEvent": "__CHANNEL__:7"})).unwrap();
        assert_eq!(std::fs::read(d.path().join("models/fetched.gguf")).unwrap(), body);
        let listed = invoke(&app, "list_models", serde_json::json!({})).unwrap();
        assert!(listed.as_array().unwrap().iter().any(|m| m["name"] == "fetched.gguf"), "{listed}");

        let wrong = "0".repeat(64);
        let app = mock_app_with(d.path(), Some(src(&wrong, "other.gguf")));
        let e = invoke(&app, "download_recommended_model", serde_json::json!({"onEvent": "__CHANNEL__:8"})).unwrap_err();
        assert_eq!(e["code"], "download", "{e}");
        assert!(e["message"].as_str().unwrap().contains("sha256 mismatch"), "{e}");
        assert!(!d.path().join("models/other.gguf").exists(), "a file that fails its checksum is not kept");
    }

    /// A benchmark cancelled while it runs (SmolLM2 from models/) reports
    /// `cancelled` and no model result, and has nothing to export.
    #[test]
    fn a_cancelled_benchmark_reports_cancelled_and_no_result() {
        let models_dir = root().join("models");
        if !models_dir.join(models::TEST_MODEL_FILE).is_file() {
            assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "models/{} is missing and MF_REQUIRE_MODELS=1", models::TEST_MODEL_FILE);
            eprintln!("skipped: models/{} is missing (scripts/setup.sh fetches it)", models::TEST_MODEL_FILE);
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let paths = Paths {
            settings: d.path().join("cfg/settings.json"),
            db: d.path().join("data/sessions.db"),
            models: models_dir,
            scenarios: root().join("scenarios/compaction"),
            worlds: root().join("scenarios/agentic"),
            exports: d.path().join("exports"),
        };
        let state = AppState::new(paths).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let req = bench::BenchRequest {
            models: own(&[models::TEST_MODEL_FILE]),
            scenarios: own(&["lookup-short"]),
            conditions: own(&["full", "v2"]),
            scorers: own(&["keyword"]),
            reps: 1,
            judge: None,
        };
        let id = bench::start(&state, req, move |e| {
            let _ = tx.send(serde_json::to_value(e).unwrap());
        })
        .unwrap();
        let first = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(first["type"], "started", "{first}");
        std::thread::sleep(Duration::from_millis(1500));
        let t = std::time::Instant::now();
        state.bench(&id).unwrap().cancel();
        let mut seen = Vec::new();
        loop {
            let e = rx.recv_timeout(Duration::from_secs(120)).expect("the run ended");
            let kind = e["type"].as_str().unwrap().to_owned();
            seen.push(kind.clone());
            if kind != "progress" {
                break;
            }
        }
        eprintln!("cancel answered after {:?}; events after the cancel: {seen:?}", t.elapsed());
        assert_eq!(seen.last().map(String::as_str), Some("cancelled"), "{seen:?}");
        let exported = bench::export(&state, &id, "json").unwrap();
        assert_eq!(std::fs::read_to_string(exported).unwrap().trim(), "[]");
    }

    #[test]
    fn bench_options_list_the_scenarios_and_conditions() {
        let d = tempfile::tempdir().unwrap();
        let app = mock_app(d.path());
        let o = invoke(&app, "bench_options", serde_json::json!({})).unwrap();
        assert_eq!(o["models"], serde_json::json!([models::TEST_MODEL_FILE]));
        assert_eq!(o["conditions"], serde_json::json!(["full", "baseline", "masking", "v1", "v2", "v2.1"]));
        let ids = strings(&o["scenarios"].as_array().unwrap().iter().map(|s| s["id"].clone()).collect::<Vec<_>>().into());
        assert!(ids.contains(&"lookup-short".to_owned()), "{ids:?}");
        assert!(o["scenarios"][0]["class"].is_string());
        // A request the panel cannot make is refused with a clear message.
        let req = serde_json::json!({"models": [models::TEST_MODEL_FILE], "scenarios": ["nope"], "conditions": ["v2"], "scorers": ["keyword"], "reps": 1});
        let e = invoke(&app, "run_benchmark", serde_json::json!({"request": req, "onEvent": "__CHANNEL__:1"})).unwrap_err();
        assert_eq!(e["code"], "bench", "{e}");
    }
}

/// What the commands' tests share.
#[cfg(test)]
pub(crate) mod testing {
    #![allow(clippy::unwrap_used)]
    use std::path::Path;

    use crate::{AppState, Paths};

    /// An app over `dir`: no settings file (the defaults), an empty models
    /// folder, the sessions in `dir/data`, the repository's scenarios and worlds.
    pub(crate) fn state(dir: &Path) -> AppState {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::create_dir_all(dir.join("models")).unwrap();
        AppState::new(Paths {
            settings: dir.join("config/settings.json"),
            db: dir.join("data/sessions.db"),
            models: dir.join("models"),
            scenarios: repo.join("scenarios/compaction"),
            worlds: repo.join("scenarios/agentic"),
            exports: dir.join("data/exports"),
        })
        .unwrap()
    }
}

/// The shell's wire types as TypeScript (ui/src/lib/generated/app.ts): what
/// the commands return and their channels send, generated from the Rust
/// types so the window's copy cannot drift. The types the crates generate
/// (settings, events, benchmark results) are imported, not repeated.
#[cfg(test)]
mod typescript {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use ts_rs::TS;

    fn typescript() -> String {
        let cfg = ts_rs::Config::new().with_large_int("number");
        let mut out = String::from(
            "// GENERATED by src-tauri/src/lib.rs (test `typescript::app_types_are_current`).\n\
             // Do not edit: change the Rust types and run\n\
             //   MF_UPDATE_TS=1 cargo test -p measured-forgetting --lib typescript\n\n\
             import type { Calibration, CalibrationRow, ReplayResult, ScenarioOption } from './bench-events';\n\n",
        );
        for decl in [
            crate::error::CommandError::decl(&cfg),
            crate::models::ModelInfo::decl(&cfg),
            crate::models::RunCode::decl(&cfg),
            crate::models::AppInfo::decl(&cfg),
            crate::models::DownloadEvent::decl(&cfg),
            crate::demo::DemoWorld::decl(&cfg),
            crate::bench::BenchOptions::decl(&cfg),
            crate::calibration::CalibrationEvent::decl(&cfg),
            crate::replay::ReplayEvent::decl(&cfg),
            crate::replay::ProbeText::decl(&cfg),
            crate::replay::ScenarioExport::decl(&cfg),
            crate::mcp::McpTestRow::decl(&cfg),
            crate::investigation::MessageCard::decl(&cfg),
            crate::investigation::HandResult::decl(&cfg),
        ] {
            out.push_str("export ");
            out.push_str(decl.trim());
            out.push_str("\n\n");
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }

    #[test]
    fn app_types_are_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/src/lib/generated/app.ts");
        let want = typescript();
        if std::env::var_os("MF_UPDATE_TS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(have == want, "{} is stale: run `MF_UPDATE_TS=1 cargo test -p measured-forgetting --lib typescript` and commit it", path.display());
    }
}
