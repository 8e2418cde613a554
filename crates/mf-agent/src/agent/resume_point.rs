//! The KV file a resume starts from: saved at each resume point, loaded (or
//! not, with the reason) when a stored investigation continues.

use mf_forgetting::Message;
use mf_inference::{InferenceError, KvSnapshot, SnapshotSlot};

use super::{Agent, n32};
use crate::compact::chat_history;
use crate::events::KvMiss;
use crate::events::{AgentEvent, EventSink};

impl Agent {
    /// Saves the cache to the KV file, if there is one (after a reply that
    /// calls tools, before they run; and at the end).
    pub(super) async fn save_resume_point(&self, round: u32, sink: &mut dyn EventSink) {
        if let Some(path) = &self.kv_file
            && self.backend.keeps_kv()
        {
            self.save_cache(SnapshotSlot::File(path.clone()), "resume_point", round, sink).await;
        }
    }

    /// On resume: loads the saved cache when the session planned it and it
    /// covers this investigation's prompt at least through the pinned zone;
    /// otherwise leaves the cache to be decoded again, and says which, and
    /// why, in one `kv_restore` event.
    pub(super) async fn load_resume_point(&self, history: &[Message], sink: &mut dyn EventSink) {
        let (path, plan) = match (self.kv_load.clone(), &self.kv_file) {
            (Some(planned), _) => planned,
            // Not planned by a session: the KV file, when the backend keeps a cache.
            (None, Some(file)) if self.backend.keeps_kv() => (file.clone(), if file.is_file() { Ok(()) } else { Err(KvMiss::NotSaved) }),
            _ => return,
        };
        let slot = SnapshotSlot::File(path.clone());
        let chat = chat_history(history);
        let prompt = match self.backend.prompt_token_ids(&chat, &self.specs).await {
            Ok(p) => p,
            Err(e) if plan.is_ok() => {
                sink.emit(&AgentEvent::Error { message: format!("resume: cannot tokenise the stored history ({e}); not loading the KV cache") });
                return;
            }
            Err(_) => Vec::new(),
        };
        let event = |used: bool, snapshot: usize, matched: usize, miss: Option<KvMiss>, note: String| AgentEvent::KvRestore {
            slot: slot.to_string(),
            used,
            snapshot_tokens: n32(snapshot),
            prompt_tokens: n32(prompt.len()),
            matched_tokens: n32(matched),
            note: Some(note),
            miss,
        };
        if let Err(miss) = plan {
            sink.emit(&event(false, 0, 0, Some(miss.clone()), format!("{}: decoding the history again", miss.describe())));
            return;
        }
        // The pinned zone's tokens: the prefix the pinned-only prompt shares with the whole one.
        let pinned_end = mf_forgetting::message::question_index(history).map_or(history.len(), |i| i + 1);
        let pinned = match self.backend.prompt_token_ids(&chat[..pinned_end.min(chat.len())], &self.specs).await {
            Ok(p) => mf_inference::common_prefix(&p, &prompt),
            Err(_) => prompt.len(),
        };
        match self.backend.kv_restore(&slot).await {
            Ok(snap) => {
                let matched = mf_inference::common_prefix(&snap.tokens, &prompt);
                if matched >= pinned && matched > 0 {
                    let left = prompt.len() - matched;
                    sink.emit(&event(true, snap.tokens.len(), matched, None, format!("{matched} tokens not decoded again; {left} left to decode")));
                } else {
                    // Not this investigation's cache: the next generation trims
                    // it at the divergence and decodes the rest.
                    let note = format!("the cache diverges at token {matched}, inside the pinned zone ({pinned} tokens): decoding the history again");
                    sink.emit(&event(false, snap.tokens.len(), matched, Some(KvMiss::Diverges), note));
                }
            }
            Err(e) => {
                let (miss, note) = match &e {
                    InferenceError::SnapshotMismatch { .. } => (KvMiss::ModelChanged, format!("{e}: decoding the history again")),
                    // Refused before the engine read it: the words say so first, the details follow.
                    InferenceError::SnapshotDamaged { .. } => (KvMiss::Damaged, format!("{}: decoding the history again ({e})", KvMiss::Damaged.describe())),
                    _ => (KvMiss::LoadFailed, format!("{e}: decoding the history again")),
                };
                sink.emit(&event(false, 0, 0, Some(miss), note));
            }
        }
    }

    /// Saves the cache as it is to `slot`, with an event.
    pub(super) async fn save_cache(&self, slot: SnapshotSlot, reason: &str, round: u32, sink: &mut dyn EventSink) -> Option<KvSnapshot> {
        let t0 = std::time::Instant::now();
        match self.backend.kv_snapshot(&slot).await {
            Ok(snap) => {
                sink.emit(&AgentEvent::KvSnapshot {
                    round,
                    reason: reason.into(),
                    slot: slot.to_string(),
                    tokens: n32(snap.tokens.len()),
                    bytes: snap.bytes,
                    ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
                Some(snap)
            }
            Err(e) => {
                sink.emit(&AgentEvent::Error { message: format!("KV snapshot ({reason}) to {slot} failed: {e}") });
                None
            }
        }
    }
}
