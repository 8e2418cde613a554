//! Model commands: the models in `models/`, which one runs by default (and
//! the notice when it is only the test model) and the recommended model's
//! download. (The file picker is the dialog plugin's `open`, called by the UI.)

use std::path::{Path, PathBuf};

use serde::Serialize;
use tauri::State;
use tauri::ipc::Channel;

use crate::AppState;
use crate::error::{CmdResult, CommandError};

pub use mf_inference::models::{RECOMMENDED_FILE, TEST_FALLBACK_FILE as TEST_MODEL_FILE};

/// A model file (generated as ui/src/lib/generated/app.ts `ModelInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ModelInfo {
    /// File name.
    pub name: String,
    /// Full path.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
}

/// The `.gguf` files in `dir`, by name (mf-inference's `models::list`, without
/// interrupted downloads); a missing folder is an empty list.
///
/// # Errors
/// `models_dir` when the folder exists but cannot be read.
pub fn local_models(dir: &Path) -> CmdResult<Vec<ModelInfo>> {
    let found = mf_inference::models::list(dir).map_err(|e| CommandError::new("models_dir", format!("cannot read {}: {e}", dir.display())))?;
    Ok(found
        .into_iter()
        .filter(|m| !m.partial)
        .map(|m| ModelInfo { name: m.file_name, path: m.path.display().to_string(), size_bytes: m.size_bytes })
        .collect())
}

/// The default model in `dir` (mf-inference's `models::default_model`) and,
/// when it is only the test model, a notice for the UI. `None` when neither is there.
#[must_use]
pub fn default_model(dir: &Path) -> Option<(PathBuf, Option<String>)> {
    match mf_inference::models::default_model(dir)? {
        mf_inference::models::DefaultModel::Recommended { path } => Some((path, None)),
        mf_inference::models::DefaultModel::TestFallback { path, passed_over } => Some((
            path,
            Some(format!(
                "{}Running the small test model {TEST_MODEL_FILE}: it works end to end but answers poorly. Put {RECOMMENDED_FILE} in {} (or choose a model in Settings) for real investigations.",
                passed_over.map(|why| format!("{why}. ")).unwrap_or_default(),
                home_short(dir, std::env::var_os("HOME").map(PathBuf::from).as_deref())
            )),
        )),
    }
}

/// `dir` for a banner: under the home folder as `~/…`, else whole.
fn home_short(dir: &Path, home: Option<&Path>) -> String {
    match home.filter(|h| h.components().count() > 1).and_then(|h| dir.strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".into(),
        Some(rest) => format!("~/{}", rest.display()),
        None => dir.display().to_string(),
    }
}

/// What the app runs with (shown as a banner when `notice` is set).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AppInfo {
    /// The app's version.
    pub version: String,
    /// The model in the settings.
    pub model_path: String,
    /// Something the user should know (the test model is in use, no model found).
    pub notice: Option<String>,
    /// Where models are looked for.
    pub models_dir: String,
    /// The settings file.
    pub settings_file: String,
    /// Whether investigations offer `run_code`, and why not.
    pub run_code: RunCode,
}

/// Whether investigations offer `run_code` (generated as ui/src/lib/generated/app.ts `RunCode`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RunCode {
    /// Offered.
    pub available: bool,
    /// What the user should know: the sandbox in use, or why there is none.
    pub message: String,
}

/// Whether `run_code` is offered under `settings` with the helper `code`
/// (`CodeConfig::beside_exe`): off when its approval is deny; else the
/// helper must be found and its sandbox probe pass (what the tools check
/// when an investigation starts).
pub async fn run_code_status(settings: &crate::settings::Settings, code: Result<mf_tools::code::CodeConfig, mf_tools::ToolError>) -> RunCode {
    if settings.tool_approvals.code == mf_agent::ApprovalMode::Deny {
        return RunCode { available: false, message: "run_code is off: its approval (code) is set to deny.".into() };
    }
    let probed = match code {
        Ok(cfg) => mf_tools::code::probe(&cfg).await,
        Err(e) => Err(e),
    };
    match probed {
        Ok(r) => RunCode { available: true, message: format!("run_code is offered (sandbox: {}).", r.mechanism) },
        Err(e) => RunCode { available: false, message: format!("run_code unavailable: {e}") },
    }
}

/// What the app runs with.
#[tauri::command]
pub async fn app_info(state: State<'_, AppState>) -> CmdResult<AppInfo> {
    let s = state.settings()?;
    let run_code = run_code_status(&s, mf_tools::code::CodeConfig::beside_exe()).await;
    let mut notice = None;
    if !Path::new(&s.model_path).is_file() {
        notice = Some(format!(
            "No model file at {:?}. Download the recommended model or choose a model file in Settings (in a checkout, scripts/setup.sh fetches the small test models).",
            s.model_path
        ));
    } else if Path::new(&s.model_path).file_name().and_then(|n| n.to_str()) == Some(TEST_MODEL_FILE) {
        notice = default_model(&state.paths.models).and_then(|(_, n)| n);
    }
    // A settings file that could not be used comes first: the user's own file is at stake.
    if let Some(p) = &state.settings_problem {
        notice = Some(notice.map_or_else(|| p.clone(), |n| format!("{p} {n}")));
    }
    Ok(AppInfo {
        version: env!("CARGO_PKG_VERSION").into(),
        model_path: s.model_path,
        notice,
        models_dir: state.paths.models.display().to_string(),
        settings_file: state.paths.settings.display().to_string(),
        run_code,
    })
}

/// The model files in `models/`.
#[tauri::command]
pub fn list_models(state: State<'_, AppState>) -> CmdResult<Vec<ModelInfo>> {
    local_models(&state.paths.models)
}

/// What the download reports (generated as ui/src/lib/generated/app.ts `DownloadEvent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DownloadEvent {
    /// Bytes received so far.
    Progress {
        /// Bytes in the file so far (a resumed prefix included).
        received: u64,
        /// The full size, when the server said.
        total: Option<u64>,
        /// Bytes that were already there when this attempt started.
        resumed_from: u64,
    },
    /// Checking the sha256.
    Verifying,
    /// Saved and verified.
    Done {
        /// The model file.
        path: String,
        /// Its verified sha256.
        sha256: String,
    },
}

/// Where the recommended model comes from (the catalog of
/// `mf_inference::models`; tests point it at a server on 127.0.0.1).
#[derive(Debug, Clone)]
pub struct DownloadSource {
    /// URL of the GGUF file.
    pub url: String,
    /// File name in `models/`.
    pub file_name: String,
    /// Known sha256; `None`: the server's LFS checksum is required.
    pub sha256: Option<String>,
}

impl DownloadSource {
    /// A test-only override of the catalog: `MF_MODEL_DOWNLOAD_URL` (http or
    /// https, the file name is its last path segment and must end in `.gguf`)
    /// with `MF_MODEL_DOWNLOAD_SHA256` (64 hex digits, required). `Ok(None)`
    /// when the URL variable is unset or empty.
    ///
    /// # Errors
    /// `invalid_environment` naming the variable that is wrong.
    pub fn from_env() -> CmdResult<Option<Self>> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self::from_vars(var("MF_MODEL_DOWNLOAD_URL"), var("MF_MODEL_DOWNLOAD_SHA256"))
    }

    /// [`DownloadSource::from_env`] over the two values.
    ///
    /// # Errors
    /// As `from_env`.
    pub fn from_vars(url: Option<String>, sha256: Option<String>) -> CmdResult<Option<Self>> {
        let Some(url) = url else { return Ok(None) };
        let bad = |m: String| CommandError::new("invalid_environment", m);
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| bad(format!("MF_MODEL_DOWNLOAD_URL must be an http(s) URL, not {url:?}")))?;
        let file_name = rest.split(['?', '#']).next().and_then(|p| p.rsplit('/').next()).filter(|n| n.ends_with(".gguf") && n.len() > ".gguf".len());
        let file_name = file_name.ok_or_else(|| bad(format!("MF_MODEL_DOWNLOAD_URL must end in a file name ending in .gguf: {url:?}")))?.to_owned();
        let sha256 = sha256.filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()));
        let sha256 = sha256.ok_or_else(|| bad("MF_MODEL_DOWNLOAD_URL needs MF_MODEL_DOWNLOAD_SHA256 (64 hex digits)".into()))?;
        Ok(Some(Self { url, file_name, sha256: Some(sha256.to_ascii_lowercase()) }))
    }

    /// The recommended model of the catalog.
    #[must_use]
    pub fn recommended() -> Option<Self> {
        let e = mf_inference::models::catalog_entry(mf_inference::models::RECOMMENDED)?;
        Some(Self { url: e.url?.to_owned(), file_name: e.file_name.to_owned(), sha256: e.sha256.map(str::to_owned) })
    }
}

/// Downloads the recommended model into `models/` with progress on
/// `on_event`: an interrupted download resumes, the sha256 is checked
/// (mf-inference's `models::download`). Returns when it is saved and verified.
#[tauri::command]
pub async fn download_recommended_model(state: State<'_, AppState>, on_event: Channel<DownloadEvent>) -> CmdResult<()> {
    let src = state.download.clone().ok_or_else(|| CommandError::new("unsupported", "The catalog has no download for the recommended model."))?;
    let req = mf_inference::models::DownloadRequest { url: src.url, dest_dir: state.paths.models.clone(), file_name: Some(src.file_name), sha256: src.sha256 };
    let cancel = mf_inference::CancelToken::new();
    let send = |e: DownloadEvent| {
        let _ = on_event.send(e);
    };
    let done = mf_inference::models::download(
        &req,
        |p| match p {
            mf_inference::models::Progress::Downloading { downloaded, total, resumed_from } => {
                send(DownloadEvent::Progress { received: *downloaded, total: *total, resumed_from: *resumed_from });
            }
            mf_inference::models::Progress::Rehashing { .. } | mf_inference::models::Progress::Verifying => send(DownloadEvent::Verifying),
            mf_inference::models::Progress::Probing => {}
        },
        &cancel,
    )
    .await
    .map_err(|e| CommandError::new("download", e.to_string()))?;
    send(DownloadEvent::Done { path: done.path.display().to_string(), sha256: done.sha256 });
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn banner_paths_under_home_are_short() {
        let home = Path::new("/home/ada");
        assert_eq!(home_short(Path::new("/home/ada/mf/models"), Some(home)), "~/mf/models");
        assert_eq!(home_short(Path::new("/home/ada"), Some(home)), "~");
        // Only whole components: /home/adam is not under /home/ada.
        assert_eq!(home_short(Path::new("/home/adam/models"), Some(home)), "/home/adam/models");
        assert_eq!(home_short(Path::new("/srv/models"), Some(home)), "/srv/models");
        assert_eq!(home_short(Path::new("/srv/models"), None), "/srv/models");
        // A home of "/" would make every path "~/…".
        assert_eq!(home_short(Path::new("/srv/models"), Some(Path::new("/"))), "/srv/models");
    }

    #[test]
    fn the_recommended_model_has_a_download() {
        let s = DownloadSource::recommended().unwrap();
        assert_eq!(s.file_name, RECOMMENDED_FILE);
        assert!(s.url.starts_with("https://"), "{}", s.url);
    }

    #[test]
    fn lists_gguf_files_and_prefers_the_recommended_model() {
        let d = tempfile::tempdir().unwrap();
        assert!(local_models(&d.path().join("absent")).unwrap().is_empty());
        assert_eq!(default_model(d.path()), None);
        std::fs::write(d.path().join("notes.txt"), "x").unwrap();
        std::fs::write(d.path().join(TEST_MODEL_FILE), "GGUF1234").unwrap();
        std::fs::create_dir(d.path().join("dir.gguf")).unwrap();
        let l = local_models(d.path()).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].name.as_str(), l[0].size_bytes), (TEST_MODEL_FILE, 8));
        let (p, notice) = default_model(d.path()).unwrap();
        assert!(p.ends_with(TEST_MODEL_FILE));
        assert!(notice.unwrap().contains("small test model"));
        // A recommended file cut short is passed over, and the notice says why.
        std::fs::write(d.path().join(RECOMMENDED_FILE), "GGUF").unwrap();
        let (p, notice) = default_model(d.path()).unwrap();
        assert!(p.ends_with(TEST_MODEL_FILE));
        let notice = notice.unwrap();
        assert!(notice.contains(RECOMMENDED_FILE) && notice.contains("truncated") && notice.contains("small test model"), "{notice}");
        // A well-formed one (the smallest GGUF: version 3, no tensors, no metadata) is the default.
        let mut header = b"GGUF".to_vec();
        header.extend_from_slice(&3u32.to_le_bytes());
        header.extend_from_slice(&[0u8; 16]);
        std::fs::write(d.path().join(RECOMMENDED_FILE), header).unwrap();
        assert_eq!(default_model(d.path()), Some((d.path().join(RECOMMENDED_FILE), None)));
    }

    /// run_code's state as the UI shows it: off with deny; unavailable,
    /// naming where the helper was looked for, without it; offered with the
    /// real helper (the one `cargo build -p mf-tools --bins` puts beside the
    /// app, here beside the test binary's folder) when its sandbox works.
    #[tokio::test]
    async fn run_code_is_offered_only_with_the_helper_beside_the_app() {
        let d = tempfile::tempdir().unwrap();
        let mut s = crate::settings::defaults(&d.path().join(TEST_MODEL_FILE));
        let missing = mf_tools::ToolError::SandboxUnavailable("mf-sandbox not found beside measured-forgetting (looked in /x and its parent)".into());
        let r = run_code_status(&s, Err(missing)).await;
        assert!(!r.available);
        assert_eq!(
            r.message,
            "run_code unavailable: the code sandbox is unavailable, so code is not run: mf-sandbox not found beside measured-forgetting (looked in /x and its parent)"
        );
        // A helper path that is not there fails the probe: unavailable too, with the reason.
        let r = run_code_status(&s, Ok(mf_tools::code::CodeConfig::new(d.path().join("mf-sandbox")))).await;
        assert!(!r.available && r.message.starts_with("run_code unavailable: "), "{r:?}");
        match mf_tools::code::CodeConfig::beside_exe() {
            Ok(cfg) => {
                let r = run_code_status(&s, Ok(cfg)).await;
                assert!(r.available, "{r:?}");
                assert!(r.message.starts_with("run_code is offered (sandbox: "), "{r:?}");
            }
            Err(e) => {
                assert!(e.to_string().contains("mf-sandbox not found beside"), "{e}");
                eprintln!("note: no mf-sandbox beside the test binary ({e}); build it with cargo build -p mf-tools --bins");
            }
        }
        s.tool_approvals.code = mf_agent::ApprovalMode::Deny;
        let r = run_code_status(&s, Ok(mf_tools::code::CodeConfig::new(d.path().join("mf-sandbox")))).await;
        assert_eq!(r, RunCode { available: false, message: "run_code is off: its approval (code) is set to deny.".into() });
    }

    #[test]
    fn the_download_override_needs_a_gguf_url_and_its_sha256() {
        let sha = "AB".repeat(32);
        let src = DownloadSource::from_vars(Some("http://127.0.0.1:9/files/e2e.gguf?x=1".into()), Some(sha.clone())).unwrap().unwrap();
        assert_eq!((src.url.as_str(), src.file_name.as_str()), ("http://127.0.0.1:9/files/e2e.gguf?x=1", "e2e.gguf"));
        assert_eq!(src.sha256, Some("ab".repeat(32)));
        assert!(DownloadSource::from_vars(None, Some(sha.clone())).unwrap().is_none());
        let refused = |url: &str, sha: Option<String>| DownloadSource::from_vars(Some(url.into()), sha).unwrap_err();
        assert!(refused("ftp://h/m.gguf", Some(sha.clone())).message.contains("http(s) URL"));
        assert!(refused("http://h/model.bin", Some(sha.clone())).message.contains("ending in .gguf"));
        assert!(refused("http://h/.gguf", Some(sha.clone())).message.contains("ending in .gguf"));
        let e = refused("http://h/m.gguf", None);
        assert_eq!(e.code, "invalid_environment");
        assert!(e.message.contains("MF_MODEL_DOWNLOAD_SHA256"));
        assert!(refused("http://h/m.gguf", Some("xyz".into())).message.contains("64 hex digits"));
    }
}
