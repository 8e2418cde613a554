//! Saved KV caches on disk (`kv/ID.bin` + `kv/ID.bin.key`, written for
//! `mf sessions resume`): keeping only the most recent ones, because one
//! cache is the whole context's state — ~17 MB for SmolLM2 at 1K tokens,
//! gigabytes for an 8B model at 16K.

use std::path::{Path, PathBuf};

/// What [`prune`] deleted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// The cache files deleted (their `.key` files went with them).
    pub files: Vec<PathBuf>,
    /// Bytes freed, `.key` files included.
    pub bytes: u64,
}

/// Deletes the saved caches in `dir` beyond the `keep` most recently written
/// ones, never `except` (the one the current run writes). Only files named
/// `<digits>.bin` (and their `<digits>.bin.key`) are touched; a missing folder
/// is nothing to do.
///
/// # Errors
/// When the folder cannot be read or a file cannot be deleted.
pub fn prune(dir: &Path, keep: usize, except: Option<&Path>) -> std::io::Result<Pruned> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Pruned::default()),
        Err(e) => return Err(e),
    };
    let mut caches = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_cache = name.strip_suffix(".bin").is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()));
        if !is_cache {
            continue;
        }
        let meta = entry.metadata()?;
        if !meta.is_file() {
            continue;
        }
        let path = entry.path();
        if except.is_some_and(|e| e == path) {
            continue;
        }
        caches.push((meta.modified()?, path, meta.len()));
    }
    // Newest first; the current run's cache counts as one of those kept.
    caches.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    let keep_others = keep.saturating_sub(usize::from(except.is_some_and(Path::exists)));
    let mut pruned = Pruned::default();
    for (_, path, len) in caches.into_iter().skip(keep_others) {
        std::fs::remove_file(&path)?;
        pruned.bytes += len;
        let mut key = path.clone().into_os_string();
        key.push(".key");
        let key = PathBuf::from(key);
        if let Ok(m) = std::fs::metadata(&key) {
            std::fs::remove_file(&key)?;
            pruned.bytes += m.len();
        }
        pruned.files.push(path);
    }
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
        write(d, "notes.bin", 5, 1000); // not an id: left alone
        write(d, "sessions.db", 5, 1000);
        // The current run resumes the oldest one: it stays, and one other.
        let current = d.join("1.bin");
        let p = prune(d, 2, Some(&current)).unwrap();
        assert_eq!(p.bytes, 2 * 110);
        let mut left: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["1.bin", "1.bin.key", "4.bin", "4.bin.key", "notes.bin", "sessions.db"]);
        // keep 0 without a current run: every cache goes.
        let p = prune(d, 0, None).unwrap();
        assert_eq!(p.files.len(), 2);
        assert!(!d.join("4.bin.key").exists() && d.join("notes.bin").exists());
    }
}
