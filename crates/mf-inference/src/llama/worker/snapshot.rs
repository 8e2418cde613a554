//! Snapshots of the cached sequence: to a file (with a key file beside it)
//! or to memory by name.

use std::path::{Path, PathBuf};

use llama_cpp_2::LlamaStateSeqFlags;

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
    /// The model + context key.
    key: String,
    /// The token ids, position by position.
    #[serde(default)]
    ids: Vec<i32>,
}

impl Worker<'_> {
    fn key_path(path: &Path) -> PathBuf {
        let mut p = path.as_os_str().to_owned();
        p.push(".key");
        PathBuf::from(p)
    }

    pub(super) fn snapshot(&mut self, path: &Path) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: path.to_path_buf(), reason };
        // Written beside the target and renamed, so a crash mid-write never
        // leaves a half file under the real name; the key file, written
        // last, carries the token ids that `restore` checks the state against.
        let tmp = {
            let mut p = path.as_os_str().to_owned();
            p.push(".tmp");
            PathBuf::from(p)
        };
        let bytes = self.ctx.state_seq_save_file(&tmp, SEQ, &self.cached).map_err(|e| fail(format!("llama.cpp could not save the state: {e}")))?;
        std::fs::rename(&tmp, path).map_err(|e| fail(format!("cannot move the state file in place: {e}")))?;
        let snap = KvSnapshot { tokens: ids(&self.cached), bytes: bytes as u64, key: self.key.clone() };
        let key = KeyFile { tokens: snap.tokens.len() as u32, bytes: snap.bytes, key: snap.key.clone(), ids: snap.tokens.clone() };
        let json = serde_json::to_vec_pretty(&key).map_err(|e| fail(e.to_string()))?;
        let key_path = Self::key_path(path);
        let key_tmp = Self::key_path(&tmp);
        std::fs::write(&key_tmp, json).map_err(|e| fail(format!("cannot write the key file: {e}")))?;
        std::fs::rename(&key_tmp, &key_path).map_err(|e| fail(format!("cannot move the key file in place: {e}")))?;
        Ok(snap)
    }

    pub(super) fn restore(&mut self, path: &Path) -> Result<KvSnapshot> {
        let fail = |reason: String| InferenceError::Snapshot { path: path.to_path_buf(), reason };
        let key_json = std::fs::read(Self::key_path(path)).map_err(|e| fail(format!("cannot read its key file: {e}")))?;
        let saved: KeyFile = serde_json::from_slice(&key_json).map_err(|e| fail(format!("bad key file: {e}")))?;
        if saved.key != self.key {
            return Err(InferenceError::SnapshotMismatch { path: path.to_path_buf(), expected: self.key.clone(), found: saved.key });
        }
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
        if !saved.ids.is_empty() && saved.ids != ids(&tokens) {
            self.reset();
            return Err(fail("the key file's tokens differ from the state file's (an interrupted save?)".into()));
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
