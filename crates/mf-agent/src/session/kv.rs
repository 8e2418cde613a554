//! Saved KV caches on disk: `kv/ID.bin` (the sequence state, written by the
//! session worker), `kv/ID.bin.key` (the worker's model + context key, the
//! state file's length and SHA-256, and the cached token ids) and
//! `kv/ID.bin.meta` (which model file and context the session ran with,
//! written here). A resume loads the cache only when the model file and
//! context still match ([`KvIdentity::check`]) and the file is the one saved
//! (the worker checks its length and checksum before llama.cpp reads it);
//! otherwise it says why ([`KvMiss`]) and decodes the history again. Only the
//! most recent caches are kept ([`prune`], which also deletes the temporary
//! files of saves that never finished): one cache is the whole context's
//! state — ~17 MB for SmolLM2 at 1K tokens, gigabytes for an 8B model at 16K.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::EngineChoice;
pub use crate::events::KvMiss;

/// The model file and context a cache was made with (`kv/ID.bin.meta`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvIdentity {
    /// The model file, canonical.
    pub model: PathBuf,
    /// Its size.
    pub model_bytes: u64,
    /// Its modification time, Unix seconds.
    pub model_modified: i64,
    /// The context size.
    pub context: u32,
}

impl KvIdentity {
    /// The identity of a session on `engine` with `context`; `None` for engines
    /// that keep no cache file, or when the model file cannot be read.
    #[must_use]
    pub fn of(engine: &EngineChoice, context: u32) -> Option<Self> {
        let EngineChoice::Embedded { model, .. } = engine else { return None };
        let model = std::fs::canonicalize(model).ok()?;
        let meta = std::fs::metadata(&model).ok()?;
        let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs() as i64);
        Some(KvIdentity { model, model_bytes: meta.len(), model_modified: modified, context })
    }

    /// Where the identity of the cache at `bin` is written.
    #[must_use]
    pub fn path_for(bin: &Path) -> PathBuf {
        sidecar(bin, ".meta")
    }

    /// Writes it beside the cache file `bin`.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save(&self, bin: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(Self::path_for(bin), text)
    }

    /// Reads the identity saved beside `bin` (`None`: none, or unreadable).
    #[must_use]
    pub fn load(bin: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(Self::path_for(bin)).ok()?).ok()
    }

    /// Whether the cache at `bin`, made under `saved`, may be loaded by a
    /// session that now runs as `now`.
    ///
    /// # Errors
    /// The reason it may not.
    pub fn check(bin: &Path, saved: Option<&KvIdentity>, now: Option<&KvIdentity>) -> Result<(), KvMiss> {
        let Some(now) = now else { return Err(KvMiss::EngineKeepsNoCache) };
        if !bin.is_file() {
            return Err(if saved.is_some() { KvMiss::FileMissing } else { KvMiss::NotSaved });
        }
        // A cache without an identity file is still guarded by the engine's own key.
        let Some(saved) = saved else { return Ok(()) };
        if saved.model != now.model || saved.model_bytes != now.model_bytes || saved.model_modified != now.model_modified {
            return Err(KvMiss::ModelChanged);
        }
        if saved.context != now.context {
            return Err(KvMiss::ContextChanged);
        }
        Ok(())
    }
}

fn sidecar(bin: &Path, suffix: &str) -> PathBuf {
    let mut p = bin.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// What [`prune`] deleted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// The cache files deleted (their `.key` files went with them).
    pub files: Vec<PathBuf>,
    /// The temporary files of saves that never finished (a full disk, a crash).
    pub temporary: Vec<PathBuf>,
    /// Bytes freed, `.key` and temporary files included.
    pub bytes: u64,
}

/// How long a save's temporary file may go unmodified before [`prune`] takes
/// it for the leftover of a save that failed or crashed. A save in progress
/// (another process's session) writes its file continuously and renames it
/// within milliseconds of the last write, so it is never this old; a shorter
/// age would risk deleting a file under a save stalled on a slow disk, a
/// longer one only keeps dead bytes longer.
pub const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Deletes the saved caches in `dir` beyond the `keep` most recently written
/// ones, never `except` (the one the current run writes), and the temporary
/// files of saves that never finished: `except`'s own at once (its session is
/// the one starting, so no save of it is running), the others once they are
/// [`STALE_TMP`] old. Only files named `<digits>.bin` (and their
/// `<digits>.bin.key` and `.bin.meta`) and `<digits>.bin.tmp` (and
/// `<digits>.bin.tmp.key`) are touched; a missing folder is nothing to do.
///
/// # Errors
/// When the folder cannot be read or a file cannot be deleted.
pub fn prune(dir: &Path, keep: usize, except: Option<&Path>) -> std::io::Result<Pruned> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Pruned::default()),
        Err(e) => return Err(e),
    };
    let is_id = |id: &str| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
    let mut caches = Vec::new();
    let mut pruned = Pruned::default();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_cache = name.strip_suffix(".bin").is_some_and(is_id);
        let tmp_of = name.strip_suffix(".bin.tmp").or_else(|| name.strip_suffix(".bin.tmp.key")).filter(|id| is_id(id));
        if !is_cache && tmp_of.is_none() {
            continue;
        }
        let meta = entry.metadata()?;
        if !meta.is_file() {
            continue;
        }
        let path = entry.path();
        if let Some(id) = tmp_of {
            let ours = except.is_some_and(|e| e == dir.join(format!("{id}.bin")));
            let stale = meta.modified()?.elapsed().is_ok_and(|age| age >= STALE_TMP);
            if ours || stale {
                match std::fs::remove_file(&path) {
                    Ok(()) => {
                        pruned.bytes += meta.len();
                        pruned.temporary.push(path);
                    }
                    // Another process's start pruned it first.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            continue;
        }
        if except.is_some_and(|e| e == path) {
            continue;
        }
        caches.push((meta.modified()?, path, meta.len()));
    }
    // Newest first; the current run's cache counts as one of those kept.
    caches.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    let keep_others = keep.saturating_sub(usize::from(except.is_some_and(Path::exists)));
    for (_, path, len) in caches.into_iter().skip(keep_others) {
        std::fs::remove_file(&path)?;
        pruned.bytes += len;
        for side in [sidecar(&path, ".key"), sidecar(&path, ".meta")] {
            if let Ok(m) = std::fs::metadata(&side) {
                std::fs::remove_file(&side)?;
                pruned.bytes += m.len();
            }
        }
        pruned.files.push(path);
    }
    pruned.temporary.sort();
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::{Duration, SystemTime};

    fn write(dir: &Path, name: &str, bytes: usize, age_s: u64) {
        let p = dir.join(name);
        std::fs::write(&p, vec![0u8; bytes]).unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_s)).unwrap();
    }

    #[test]
    fn keeps_the_newest_and_the_current_one_and_touches_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(prune(&d.join("absent"), 1, None).unwrap(), Pruned::default());
        for (i, age) in [(1, 400), (2, 300), (3, 200), (4, 100)] {
            write(d, &format!("{i}.bin"), 100, age);
            write(d, &format!("{i}.bin.key"), 10, age);
        }
        write(d, "2.bin.meta", 7, 300);
        write(d, "notes.bin", 5, 1000); // not an id: left alone
        write(d, "sessions.db", 5, 1000);
        // The current run resumes the oldest one: it stays, and one other.
        let current = d.join("1.bin");
        let p = prune(d, 2, Some(&current)).unwrap();
        assert_eq!(p.bytes, 2 * 110 + 7);
        let mut left: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["1.bin", "1.bin.key", "4.bin", "4.bin.key", "notes.bin", "sessions.db"]);
        // keep 0 without a current run: every cache goes.
        let p = prune(d, 0, None).unwrap();
        assert_eq!(p.files.len(), 2);
        assert!(!d.join("4.bin.key").exists() && d.join("notes.bin").exists());
    }

    /// The temporary files of saves that failed or crashed go: the current
    /// session's at once, the others' once stale; a fresh one of another
    /// session (its save may be running) and other names stay.
    #[test]
    fn pruning_deletes_the_temporary_files_of_failed_saves() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let stale = STALE_TMP.as_secs() + 60;
        write(d, "1.bin", 100, 30);
        write(d, "1.bin.tmp", 1000, 5); // the current session's, however fresh
        write(d, "1.bin.tmp.key", 10, 5);
        write(d, "2.bin.tmp", 2000, stale); // a crashed save of another session
        write(d, "2.bin.tmp.key", 20, stale);
        write(d, "3.bin.tmp", 3000, 1); // another session saving right now
        write(d, "notes.bin.tmp", 5, stale); // not an id: left alone
        write(d, "4.tmp", 5, stale);
        let p = prune(d, 5, Some(&d.join("1.bin"))).unwrap();
        assert_eq!(p.temporary, [d.join("1.bin.tmp"), d.join("1.bin.tmp.key"), d.join("2.bin.tmp"), d.join("2.bin.tmp.key")]);
        assert_eq!(p.bytes, 1000 + 10 + 2000 + 20);
        assert!(p.files.is_empty());
        let mut left: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["1.bin", "3.bin.tmp", "4.tmp", "notes.bin.tmp"]);
    }

    #[test]
    fn a_cache_is_loaded_only_for_the_same_model_file_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"GGUF model").unwrap();
        let engine = EngineChoice::Embedded { model: model.clone(), threads: None, gpu: false, tool_grammar: false };
        let bin = dir.path().join("7.bin");
        let id = KvIdentity::of(&engine, 2048).unwrap();
        assert_eq!(KvIdentity::check(&bin, None, Some(&id)), Err(KvMiss::NotSaved));
        assert_eq!(KvIdentity::check(&bin, Some(&id), Some(&id)), Err(KvMiss::FileMissing));
        std::fs::write(&bin, b"state").unwrap();
        id.save(&bin).unwrap();
        let saved = KvIdentity::load(&bin).unwrap();
        assert_eq!(KvIdentity::check(&bin, Some(&saved), Some(&id)), Ok(()));
        assert_eq!(KvIdentity::check(&bin, Some(&saved), KvIdentity::of(&engine, 4096).as_ref()), Err(KvMiss::ContextChanged));
        std::fs::write(&model, b"GGUF another model").unwrap();
        assert_eq!(KvIdentity::check(&bin, Some(&saved), KvIdentity::of(&engine, 2048).as_ref()), Err(KvMiss::ModelChanged));
        let server = EngineChoice::Ollama { url: "http://127.0.0.1:1".into(), model: "m".into() };
        assert_eq!(KvIdentity::check(&bin, Some(&saved), KvIdentity::of(&server, 2048).as_ref()), Err(KvMiss::EngineKeepsNoCache));
    }
}
