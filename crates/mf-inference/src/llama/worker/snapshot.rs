//! Snapshots of the cached sequence: to a file (with a key file beside it)
//! or to memory by name.
//!
//! llama.cpp trusts a state file: flipped tensor bytes load silently (and the
//! model then answers garbage), a file cut short reaches an assertion that
//! aborts the process. So the key file records the state file's length and
//! SHA-256, and [`verify`] checks both before llama.cpp opens the file; a
//! file that fails is [`InferenceError::SnapshotDamaged`], never loaded.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use llama_cpp_2::LlamaStateSeqFlags;
use sha2::{Digest as _, Sha256};

use super::{SEQ, Worker, ids};
use crate::backend::KvSnapshot;
use crate::error::{InferenceError, Result};

/// What `FILE.key` holds beside a snapshot file.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeyFile {
    /// Tokens saved.
    tokens: u32,
    /// Bytes of the state file.
    bytes: u64,
    /// SHA-256 of the whole state file, hex (absent in files saved before it
    /// was recorded: those are not loaded, since nothing vouches for them).
    #[serde(default)]
    sha256: Option<String>,
    /// The model + context key.
    key: String,
    /// The token ids, position by position.
    #[serde(default)]
    ids: Vec<i32>,
}

/// Checks the state file at `path` against what its key file recorded: its
/// length first (a cut, an append, an empty file: no read needed), then the
/// SHA-256 of every byte (a flipped byte anywhere, another save's file).
///
/// # Errors
/// Why the file is not the one that was saved, in words for the user.
fn verify(path: &Path, saved: &KeyFile) -> std::result::Result<(), String> {
    let Some(want) = saved.sha256.as_deref() else {
        return Err("its key file records no checksum (it was saved by an earlier version)".into());
    };
    let len = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?.len();
    if len != saved.bytes {
        return Err(format!("it is {len} bytes, but {} were saved", saved.bytes));
    }
    let (read, got) = hash_file(path).map_err(|e| format!("cannot read it: {e}"))?;
    if read != saved.bytes {
        return Err(format!("it is {read} bytes, but {} were saved", saved.bytes));
    }
    if !got.eq_ignore_ascii_case(want) {
        return Err("its checksum differs from the one recorded when it was saved".into());
    }
    Ok(())
}

/// The length and hex SHA-256 of the file at `path`, streamed.
fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    // 1 MiB: large enough that a multi-GB state is a few thousand reads.
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
        n += k as u64;
    }
    Ok((n, hex::encode(hasher.finalize())))
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

impl Worker<'_> {
    fn key_path(path: &Path) -> PathBuf {
        sidecar(path, ".key")
    }

    pub(super) fn snapshot(&mut self, path: &Path) -> Result<KvSnapshot> {
        // Written beside the target and renamed, so a crash mid-write never
        // leaves a half file under the real name; the key file, written
        // last, carries the length, checksum and token ids that `restore`
        // checks the state against.
        let tmp = sidecar(path, ".tmp");
        let key_tmp = Self::key_path(&tmp);
        let saved = self.write_snapshot(path, &tmp, &key_tmp);
        if saved.is_err() {
            // A failed save (a full disk) must not keep its temporary files:
            // they hold the space that the next save needs.
            for t in [&tmp, &key_tmp] {
                let _ = std::fs::remove_file(t);
            }
        }
        saved
    }

    fn write_snapshot(&mut self, path: &Path, tmp: &Path, key_tmp: &Path) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: path.to_path_buf(), reason };
        let written = self.ctx.state_seq_save_file(tmp, SEQ, &self.cached).map_err(|e| fail(format!("llama.cpp could not save the state: {e}")))?;
        // The checksum is taken of the bytes on disk, which are what a later load reads.
        let (bytes, sha256) = hash_file(tmp).map_err(|e| fail(format!("cannot read the state back to checksum it: {e}")))?;
        if bytes != written as u64 {
            return Err(fail(format!("llama.cpp wrote {written} bytes but the file holds {bytes}")));
        }
        let snap = KvSnapshot { tokens: ids(&self.cached), bytes, key: self.key.clone() };
        let key = KeyFile { tokens: snap.tokens.len() as u32, bytes, sha256: Some(sha256), key: snap.key.clone(), ids: snap.tokens.clone() };
        let json = serde_json::to_vec_pretty(&key).map_err(|e| fail(e.to_string()))?;
        std::fs::write(key_tmp, json).map_err(|e| fail(format!("cannot write the key file: {e}")))?;
        std::fs::rename(tmp, path).map_err(|e| fail(format!("cannot move the state file in place: {e}")))?;
        // A crash here leaves the new state beside the old key file: its
        // checksum no longer matches, so a load refuses the pair.
        std::fs::rename(key_tmp, Self::key_path(path)).map_err(|e| fail(format!("cannot move the key file in place: {e}")))?;
        Ok(snap)
    }

    pub(super) fn restore(&mut self, path: &Path) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: path.to_path_buf(), reason };
        let damaged = |reason: String| InferenceError::SnapshotDamaged { path: path.to_path_buf(), reason };
        let key_path = Self::key_path(path);
        let saved: KeyFile = match std::fs::read(&key_path) {
            Ok(json) => serde_json::from_slice(&json).map_err(|e| damaged(format!("its key file {} is unreadable: {e}", key_path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.is_file() => {
                return Err(damaged(format!("its key file {} is missing (an interrupted save?)", key_path.display())));
            }
            Err(e) => return Err(fail(format!("cannot read its key file: {e}"))),
        };
        if saved.key != self.key {
            return Err(InferenceError::SnapshotMismatch { path: path.to_path_buf(), expected: self.key.clone(), found: saved.key });
        }
        // Checked before llama.cpp sees a byte. The file could still change
        // between this read and llama.cpp's; only this program writes the
        // folder, and a session's file only while that session runs.
        verify(path, &saved).map_err(damaged)?;
        self.reset();
        let max = self.ctx.n_ctx() as usize;
        let (tokens, bytes) = match self.ctx.state_seq_load_file(path, SEQ, max) {
            Ok(r) => r,
            Err(e) => {
                self.reset();
                return Err(fail(format!("llama.cpp could not load the state: {e}")));
            }
        };
        if !self.cache_holds(tokens.len()) {
            self.reset();
            return Err(fail("the restored cache does not hold the saved positions".into()));
        }
        // A key file from another save (a crash between the two renames)
        // names other tokens: refuse rather than trust either.
        if saved.ids != ids(&tokens) {
            self.reset();
            return Err(damaged("the key file's tokens differ from the state file's (an interrupted save?)".into()));
        }
        self.cached = tokens;
        self.last_logits = None;
        Ok(KvSnapshot { tokens: ids(&self.cached), bytes: bytes as u64, key: self.key.clone() })
    }

    pub(super) fn snapshot_memory(&mut self, name: String) -> Result<KvSnapshot> {
        let state = self
            .ctx
            .state_seq_get(SEQ, LlamaStateSeqFlags::empty())
            .map_err(|e| InferenceError::Snapshot { path: PathBuf::from(format!("memory:{name}")), reason: e.to_string() })?;
        let snap = KvSnapshot { tokens: ids(&self.cached), bytes: state.byte_len() as u64, key: self.key.clone() };
        self.memory.insert(name, (state, self.cached.clone()));
        Ok(snap)
    }

    pub(super) fn restore_memory(&mut self, name: &str) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: PathBuf::from(format!("memory:{name}")), reason };
        let Some((state, tokens)) = self.memory.get(name) else {
            return Err(fail("no snapshot of that name".into()));
        };
        let (state, tokens) = (state.clone(), tokens.clone());
        self.reset();
        if let Err(e) = self.ctx.state_seq_set(&state, SEQ) {
            self.reset();
            return Err(fail(format!("llama.cpp could not restore the state: {e}")));
        }
        if !self.cache_holds(tokens.len()) {
            self.reset();
            return Err(fail("the restored cache does not hold the saved positions".into()));
        }
        self.cached = tokens;
        self.last_logits = None;
        Ok(KvSnapshot { tokens: ids(&self.cached), bytes: state.byte_len() as u64, key: self.key.clone() })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A state file of `len` varied bytes and the key file a save writes for it.
    fn saved(dir: &Path, name: &str, len: usize, seed: u8) -> (PathBuf, KeyFile) {
        let path = dir.join(name);
        let bytes: Vec<u8> = (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[2] ^ seed).collect();
        std::fs::write(&path, &bytes).unwrap();
        let (n, sha256) = hash_file(&path).unwrap();
        assert_eq!(n, len as u64);
        (path, KeyFile { tokens: 3, bytes: n, sha256: Some(sha256), key: "model, n_ctx 2048".into(), ids: vec![1, 2, 3] })
    }

    #[test]
    fn an_intact_file_passes() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = saved(dir.path(), "1.bin", 3 << 20, 0);
        assert_eq!(verify(&path, &key), Ok(()));
        // The checksum as a user's sha256sum prints it, or in capitals.
        let upper = KeyFile { sha256: key.sha256.as_ref().map(|s| s.to_uppercase()), ..key };
        assert_eq!(verify(&path, &upper), Ok(()));
    }

    /// One flipped bit anywhere: the header, the middle, the last byte, and
    /// on either side of a 1 MiB read boundary.
    #[test]
    fn a_flipped_byte_anywhere_fails() {
        let dir = tempfile::tempdir().unwrap();
        let len = (2 << 20) + 17;
        let (path, key) = saved(dir.path(), "1.bin", len, 0);
        let good = std::fs::read(&path).unwrap();
        for at in [0, 1, 8, len / 2, (1 << 20) - 1, 1 << 20, len - 1] {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= mask;
                std::fs::write(&path, &bad).unwrap();
                let err = verify(&path, &key).unwrap_err();
                assert!(err.contains("checksum differs"), "byte {at} ^ {mask:#x}: {err}");
            }
        }
        std::fs::write(&path, &good).unwrap();
        assert_eq!(verify(&path, &key), Ok(()), "the same bytes again pass");
    }

    #[test]
    fn a_cut_an_empty_file_or_an_appended_byte_fails_on_the_recorded_length() {
        let dir = tempfile::tempdir().unwrap();
        let len = 40_000;
        let (path, key) = saved(dir.path(), "1.bin", len, 0);
        let good = std::fs::read(&path).unwrap();
        for cut in [0, 1, 4, 23, len / 2, len - 1] {
            std::fs::write(&path, &good[..cut]).unwrap();
            let err = verify(&path, &key).unwrap_err();
            assert_eq!(err, format!("it is {cut} bytes, but {len} were saved"), "cut at {cut}");
        }
        let mut longer = good.clone();
        longer.push(0);
        std::fs::write(&path, &longer).unwrap();
        assert_eq!(verify(&path, &key).unwrap_err(), format!("it is {} bytes, but {len} were saved", len + 1));
    }

    /// Another session's state file under this name, of the same length (the
    /// same model and a history as long): only the checksum tells them apart.
    #[test]
    fn another_sessions_file_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = saved(dir.path(), "1.bin", 50_000, 0);
        let (other, _) = saved(dir.path(), "2.bin", 50_000, 0x5a);
        std::fs::copy(&other, &path).unwrap();
        assert!(verify(&path, &key).unwrap_err().contains("checksum differs"));
    }

    #[test]
    fn a_key_file_without_a_checksum_or_a_missing_state_file_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (path, key) = saved(dir.path(), "1.bin", 1000, 0);
        let old = KeyFile { sha256: None, ..key };
        assert!(verify(&path, &old).unwrap_err().contains("no checksum"));
        // Files written before the checksum was recorded still parse (and fail `verify`).
        let json = r#"{"tokens": 3, "bytes": 1000, "key": "k", "ids": [1, 2, 3]}"#;
        let parsed: KeyFile = serde_json::from_str(json).unwrap();
        assert!(parsed.sha256.is_none());
        let gone = KeyFile { sha256: Some("00".repeat(32)), ..old };
        std::fs::remove_file(&path).unwrap();
        assert!(verify(&path, &gone).unwrap_err().starts_with("cannot read it"));
    }
}
