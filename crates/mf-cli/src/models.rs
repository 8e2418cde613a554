//! `mf models`: list the models on disk, download the recommended one (or any
//! GGUF URL) with progress, resume and a sha256 check, verify a file.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use mf_inference::CancelToken;
use mf_inference::models::{self, ChecksumSource, DownloadRequest, Progress};

use crate::UsageError;
use crate::terminal::printable;

/// Arguments of `mf models`.
#[derive(Debug, Args)]
pub struct ModelsArgs {
    #[command(subcommand)]
    command: ModelsCommand,
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// List the GGUF files (and interrupted downloads) in the models folder.
    List {
        /// The models folder.
        #[arg(long, default_value = "models")]
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show the models the project knows (ids, sources, checksums).
    Catalog,
    /// Download a model: a catalog id (default: the recommended Qwen3 8B
    /// Q4_K_M) or any GGUF URL. Interrupted downloads resume; the sha256 is
    /// checked before the file is put in place.
    Download {
        /// Catalog id (see `mf models catalog`).
        #[arg(default_value = models::RECOMMENDED, conflicts_with = "url")]
        id: String,
        /// A GGUF URL instead of a catalog id.
        #[arg(long)]
        url: Option<String>,
        /// Expected sha256 (64 hex digits); default: the catalog's, else the
        /// server's LFS checksum.
        #[arg(long)]
        sha256: Option<String>,
        /// File name to save as (default: the URL's last segment).
        #[arg(long)]
        file_name: Option<String>,
        /// The models folder.
        #[arg(long, default_value = "models")]
        dir: PathBuf,
    },
    /// Check a model file: its GGUF header must be well formed and fit the
    /// file's size, and its sha256 must match the expected one (given, or the
    /// catalog's for a known file name) when one is known. Exit 1 when the
    /// file is broken or the checksum does not match.
    Verify {
        /// The model file.
        file: PathBuf,
        /// Expected sha256.
        #[arg(long)]
        sha256: Option<String>,
    },
}

/// Runs `mf models`. `Ok(false)` means a verification failed.
pub async fn run(args: ModelsArgs) -> anyhow::Result<bool> {
    match args.command {
        ModelsCommand::List { dir, json } => list(&dir, json),
        ModelsCommand::Catalog => {
            for e in models::catalog() {
                println!("{:<18} {}", e.id, e.file_name);
                println!("{:<18} {}", "", e.role);
                println!("{:<18} licence: {}; source: {}", "", e.licence, e.url.unwrap_or("PyPI wheels via scripts/fetch_models.py"));
                println!("{:<18} sha256: {}", "", e.sha256.unwrap_or("taken from the server (x-linked-etag) at download time"));
            }
            Ok(true)
        }
        ModelsCommand::Download { id, url, sha256, file_name, dir } => download(id, url, sha256, file_name, dir).await,
        ModelsCommand::Verify { file, sha256 } => verify(&file, sha256),
    }
}

fn list(dir: &std::path::Path, json: bool) -> anyhow::Result<bool> {
    let found = models::list(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(true);
    }
    if found.is_empty() {
        println!("no models in {} (run `make setup` for the test models, `mf models download` for the recommended one)", dir.display());
        return Ok(true);
    }
    for m in &found {
        let size = format!("{:.1} MB", m.size_bytes as f64 / 1e6);
        let what = match (&m.info, &m.problem) {
            (Some(i), _) => format!(
                "{} · {} · train ctx {} · {}",
                i.architecture.as_deref().unwrap_or("?"),
                i.size_label.as_deref().unwrap_or("?"),
                i.context_length.map_or("?".to_string(), |c| c.to_string()),
                if i.has_chat_template { "chat template" } else { "NO chat template" }
            ),
            (None, Some(p)) if m.broken => format!("BROKEN: {p}"),
            (None, Some(p)) => p.clone(),
            (None, None) => String::new(),
        };
        // File names and header strings come from the files: text for a terminal.
        println!("{}", printable(&format!("{:<40} {:>10}  {}", m.file_name, size, what)));
    }
    if let Some(d) = models::default_model(dir) {
        println!("default: {}", printable(&d.path().display().to_string()));
    }
    Ok(true)
}

async fn download(id: String, url: Option<String>, sha256: Option<String>, file_name: Option<String>, dir: PathBuf) -> anyhow::Result<bool> {
    let (url, sha256, file_name) = match url {
        Some(u) => (u, sha256, file_name),
        None => {
            let e = models::catalog_entry(&id).ok_or_else(|| UsageError(format!("unknown model id {id:?}; see `mf models catalog`")))?;
            let u = e.url.ok_or_else(|| UsageError(format!("{id} is not downloaded over HTTP; run `python3 scripts/fetch_models.py` (it comes from PyPI)")))?;
            (u.to_string(), sha256.or(e.sha256.map(str::to_string)), file_name.or(Some(e.file_name.to_string())))
        }
    };
    let req = DownloadRequest { url: url.clone(), dest_dir: dir, file_name, sha256 };
    let cancel = CancelToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    eprintln!("downloading {}", printable(&url));
    let mut err = std::io::stderr();
    let result = models::download(
        &req,
        |p| {
            let line = match p {
                Progress::Probing => "asking the server for size and checksum".to_string(),
                Progress::Rehashing { bytes } => format!("checking {:.1} MB from an earlier attempt", *bytes as f64 / 1e6),
                Progress::Verifying => "already present: verifying its sha256".to_string(),
                Progress::Downloading { downloaded, total, resumed_from } => {
                    let mb = *downloaded as f64 / 1e6;
                    let resumed = if *resumed_from > 0 { format!(" (resumed at {:.1} MB)", *resumed_from as f64 / 1e6) } else { String::new() };
                    match total {
                        Some(t) if *t > 0 => format!("{mb:.1} / {:.1} MB  {:.0} %{resumed}", *t as f64 / 1e6, 100.0 * *downloaded as f64 / *t as f64),
                        _ => format!("{mb:.1} MB{resumed}"),
                    }
                }
            };
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        },
        &cancel,
    )
    .await;
    eprintln!();
    let done = result.map_err(|e| match e {
        models::DownloadError::Invalid(m) => anyhow::Error::new(UsageError(m)),
        other => anyhow::Error::new(other),
    })?;
    let source = match done.checksum_source {
        ChecksumSource::Given => "given",
        ChecksumSource::Server => "from the server",
    };
    if done.already_present {
        println!("{}", printable(&format!("{} already present; sha256 {} matches ({source})", done.path.display(), done.sha256)));
    } else {
        println!("{}", printable(&format!("{} ({} bytes) sha256 {} verified ({source})", done.path.display(), done.bytes, done.sha256)));
    }
    Ok(true)
}

fn verify(file: &std::path::Path, sha256: Option<String>) -> anyhow::Result<bool> {
    let expected = match sha256 {
        Some(s) => Some(models::download::normalise_sha(&s).map_err(|e| UsageError(e.to_string()))?),
        None => {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            models::catalog().iter().find(|e| e.file_name == name).and_then(|e| e.sha256).map(str::to_string)
        }
    };
    // The header first: a file that is not a GGUF, or is cut short, fails
    // whether or not a checksum is known (and before hashing gigabytes).
    match models::gguf::read_info(file) {
        Ok(_) => {}
        Err(models::gguf::GgufError::Io(e)) => return Err(anyhow::Error::new(e).context(format!("cannot read {}", file.display()))),
        Err(e) => {
            println!("{}", printable(&format!("{}  BROKEN: {e}", file.display())));
            return Ok(false);
        }
    }
    let actual = models::download::sha256_file(file)?;
    match expected {
        Some(e) if e == actual => {
            println!("{}  {actual}  OK", printable(&file.display().to_string()));
            Ok(true)
        }
        Some(e) => {
            println!("{}  {actual}  MISMATCH (expected {e})", printable(&file.display().to_string()));
            Ok(false)
        }
        None => {
            println!("{}  {actual}  (no expected checksum known; pass --sha256)", printable(&file.display().to_string()));
            Ok(true)
        }
    }
}
