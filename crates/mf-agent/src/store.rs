//! The session store: investigations, messages and events in SQLite (WAL),
//! each written as it happens so a `kill -9` loses nothing committed.

use std::path::{Path, PathBuf};

use mf_forgetting::Message;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use crate::error::AgentError;
use crate::events::{AgentEvent, EventSink};

/// Where an investigation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Its loop is running (in the process recorded with it).
    Running,
    /// It ended with an exit reason (a follow-up continues it).
    Finished,
    /// Its process died while it ran; it can be resumed.
    Interrupted,
    /// The loop failed with an error it could not turn into an exit.
    Failed,
}

impl SessionStatus {
    /// The word stored and shown.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Finished => "finished",
            SessionStatus::Interrupted => "interrupted",
            SessionStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "running" => SessionStatus::Running,
            "finished" => SessionStatus::Finished,
            "interrupted" => SessionStatus::Interrupted,
            // Nothing else is ever written; an unknown word is treated as a failure.
            _ => SessionStatus::Failed,
        }
    }
}

impl std::fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One investigation as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct InvestigationRow {
    /// Its id.
    pub id: i64,
    /// The question, as the model was asked it.
    pub question: String,
    /// The question as shown to people, when it differs (its first
    /// [`AgentEvent::Started`]'s `title`: a demo world's plain question).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub title: Option<String>,
    /// Where it stands.
    pub status: SessionStatus,
    /// The exit reason for people (or why it failed).
    pub exit_reason: Option<String>,
    /// The exit reason's kind (`ExitReason`'s `kind` tag), when finished.
    #[serde(default)]
    pub exit_kind: Option<String>,
    /// Whether it can be continued as it stood: interrupted, failed,
    /// cancelled or cut by the safety cap.
    #[serde(default)]
    pub resumable: bool,
    /// Unix seconds.
    pub created: i64,
    /// Events stored.
    pub events: i64,
}

/// The store: its file, and the connection to it. Every error it returns
/// names the file ([`AgentError::StoreFile`]); a file SQLite reports as
/// damaged is [`AgentError::StoreCorrupt`] and is not written to again by
/// this process.
pub struct Store {
    db: Db,
    path: PathBuf,
}

/// The connection; its errors do not know the file ([`Store`] adds it).
struct Db {
    conn: Connection,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Store files found damaged in this process: never written to again.
static DAMAGED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Store files whose integrity this process has checked (once each: the
/// check reads the whole file).
static CHECKED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Whether SQLite's error says the file is damaged or not a database.
fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

/// The key a store file is remembered by.
fn key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Remembers `path` as damaged; the error that says so.
fn damaged(path: &Path, detail: String) -> AgentError {
    if let Ok(mut d) = DAMAGED.lock() {
        let k = key(path);
        if !d.contains(&k) {
            d.push(k);
        }
    }
    AgentError::StoreCorrupt { path: path.to_path_buf(), detail }
}

/// `e` with the store's file named: corruption becomes [`AgentError::StoreCorrupt`].
fn named(path: &Path, e: AgentError) -> AgentError {
    match e {
        AgentError::Store(se) if is_corruption(&se) => damaged(path, se.to_string()),
        e @ (AgentError::Store(_) | AgentError::StoredJson(_)) => AgentError::StoreFile { path: path.to_path_buf(), source: Box::new(e) },
        other => other,
    }
}

impl Store {
    /// Opens (creating) the store at `path`, in WAL mode. An existing file
    /// is checked (`PRAGMA quick_check`, once per process) before anything
    /// is written to it.
    ///
    /// # Errors
    /// [`AgentError::StoreCorrupt`] for a damaged file (or one found damaged
    /// earlier in this process); [`AgentError::StoreFile`] for other SQLite
    /// errors (an unwritable path).
    pub fn open(path: &Path) -> Result<Self, AgentError> {
        let k = key(path);
        if DAMAGED.lock().is_ok_and(|d| d.contains(&k)) {
            return Err(AgentError::StoreCorrupt { path: path.to_path_buf(), detail: "found damaged earlier".to_owned() });
        }
        let existed = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
        let check = existed && !CHECKED.lock().is_ok_and(|c| c.contains(&k));
        let db = Db::open(path, check).map_err(|e| named(path, e))?;
        if check && let Ok(mut c) = CHECKED.lock() {
            c.push(k);
        }
        Ok(Store { db, path: path.to_path_buf() })
    }

    /// The store's file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn named<T>(&self, r: Result<T, AgentError>) -> Result<T, AgentError> {
        r.map_err(|e| named(&self.path, e))
    }

    /// Records a new running investigation; returns its id.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn create(&self, question: &str, settings: &serde_json::Value) -> Result<i64, AgentError> {
        self.named(self.db.create(question, settings))
    }

    /// Appends one event (committed before it returns).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn append_event(&self, id: i64, event: &AgentEvent) -> Result<(), AgentError> {
        self.named(self.db.append_event(id, event))
    }

    /// Replaces the stored history of `id`.
    ///
    /// # Errors
    /// SQLite errors.
    /// Also appends to the investigation's transcript each message it has
    /// not seen yet (by id), as it is now: the loop saves the history after
    /// every message it adds, so the transcript holds every message as first
    /// written, whatever a compaction later did to it (see [`Store::transcript`]).
    pub fn save_history(&self, id: i64, history: &[Message]) -> Result<(), AgentError> {
        self.named(self.db.save_history(id, history))
    }

    /// The investigation as it would be had nothing been compacted: every
    /// message its history held, each as first saved (a masked or summarised
    /// message keeps its original text), in order, without compaction
    /// summaries — what [`crate::Outcome::transcript`] is for a run.
    /// Investigations stored before the transcript was kept have none: their
    /// stored history is given instead.
    ///
    /// # Errors
    /// SQLite or JSON errors.
    pub fn transcript(&self, id: i64) -> Result<Vec<Message>, AgentError> {
        self.named(self.db.transcript(id))
    }

    /// The stored history.
    ///
    /// # Errors
    /// SQLite or JSON errors.
    pub fn history(&self, id: i64) -> Result<Vec<Message>, AgentError> {
        self.named(self.db.history(id))
    }

    /// Marks the end of an investigation that failed.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn mark_failed(&self, id: i64, why: &str) -> Result<(), AgentError> {
        self.named(self.db.mark_failed(id, why))
    }

    /// All investigations, newest first.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn list(&self) -> Result<Vec<InvestigationRow>, AgentError> {
        self.named(self.db.list())
    }

    /// One investigation.
    ///
    /// # Errors
    /// [`AgentError::NotFound`], SQLite errors.
    pub fn get(&self, id: i64) -> Result<InvestigationRow, AgentError> {
        self.named(self.db.get(id))
    }

    /// The events of `id`, in order.
    ///
    /// # Errors
    /// SQLite or JSON errors.
    pub fn events(&self, id: i64) -> Result<Vec<AgentEvent>, AgentError> {
        self.named(self.db.events(id))
    }

    /// The events of `id` as stored (JSON text), in order.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn events_json(&self, id: i64) -> Result<Vec<String>, AgentError> {
        self.named(self.db.events_json(id))
    }

    /// The settings an investigation was started with.
    ///
    /// # Errors
    /// [`AgentError::NotFound`], SQLite or JSON errors.
    pub fn settings(&self, id: i64) -> Result<serde_json::Value, AgentError> {
        self.named(self.db.settings(id))
    }

    /// Marks `id` running again under this process (resume).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn mark_running(&self, id: i64) -> Result<(), AgentError> {
        self.named(self.db.mark_running(id))
    }

    /// [`Store::recover`] for the investigations whose process is gone
    /// (`alive(pid)` false), so a running one in another process is left alone.
    ///
    /// # Errors
    /// SQLite or JSON errors.
    pub fn recover_dead(&self, alive: impl Fn(i64) -> bool) -> Result<Vec<i64>, AgentError> {
        self.named(self.db.recover_dead(alive))
    }

    /// After a crash: every `running` investigation becomes `interrupted`, and
    /// each tool call that has no result gets a `tool_interrupted` event (it is
    /// never re-run silently). Returns the ids recovered.
    ///
    /// # Errors
    /// SQLite or JSON errors.
    pub fn recover(&self) -> Result<Vec<i64>, AgentError> {
        self.named(self.db.recover())
    }
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

impl Db {
    /// Opens (creating) the database at `path`; with `check`, verifies an
    /// existing file before the first write.
    fn open(path: &Path, check: bool) -> Result<Self, AgentError> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path)?;
        // Another process (a `mf sessions list` beside a running investigation) may hold the lock briefly.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        if check {
            // Before the pragmas and tables below write anything.
            let verdict: Vec<String> = {
                let mut st = conn.prepare("PRAGMA quick_check")?;
                let rows = st.query_map([], |r| r.get::<_, String>(0))?;
                rows.collect::<Result<_, _>>()?
            };
            if verdict != ["ok"] {
                return Err(damaged(path, verdict.join("; ")));
            }
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS investigations (
                id INTEGER PRIMARY KEY AUTOINCREMENT, question TEXT NOT NULL, settings TEXT NOT NULL,
                status TEXT NOT NULL, exit_reason TEXT, created INTEGER NOT NULL, pid INTEGER);
             CREATE TABLE IF NOT EXISTS events (
                investigation INTEGER NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL,
                PRIMARY KEY (investigation, seq));
             CREATE TABLE IF NOT EXISTS messages (
                investigation INTEGER NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL,
                PRIMARY KEY (investigation, seq));
             CREATE TABLE IF NOT EXISTS transcript (
                investigation INTEGER NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, json TEXT NOT NULL,
                PRIMARY KEY (investigation, seq), UNIQUE (investigation, id));",
        )?;
        // Stores made before the exit's kind was kept beside its text: add
        // the column and fill it from each run's stored exit event.
        let has_kind = conn.prepare("SELECT exit_kind FROM investigations LIMIT 0").is_ok();
        if !has_kind {
            conn.execute_batch(
                "ALTER TABLE investigations ADD COLUMN exit_kind TEXT;
                 UPDATE investigations SET exit_kind = (
                     SELECT json_extract(e.json, '$.reason.kind') FROM events e
                     WHERE e.investigation = investigations.id AND json_extract(e.json, '$.type') = 'exit'
                     ORDER BY e.seq DESC LIMIT 1)
                 WHERE status = 'finished';",
            )?;
        }
        Ok(Self { conn })
    }

    fn create(&self, question: &str, settings: &serde_json::Value) -> Result<i64, AgentError> {
        self.conn.execute(
            "INSERT INTO investigations (question, settings, status, created, pid) VALUES (?1, ?2, 'running', ?3, ?4)",
            params![question, settings.to_string(), now(), i64::from(std::process::id())],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn append_event(&self, id: i64, event: &AgentEvent) -> Result<(), AgentError> {
        let json = serde_json::to_string(event)?;
        self.conn.execute(
            "INSERT INTO events (investigation, seq, json) VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE investigation = ?1), ?2)",
            params![id, json],
        )?;
        if let AgentEvent::Exit { reason, .. } = event {
            self.conn.execute(
                "UPDATE investigations SET status = 'finished', exit_reason = ?2, exit_kind = ?3 WHERE id = ?1",
                params![id, reason.describe(), reason.kind()],
            )?;
        }
        Ok(())
    }

    fn save_history(&self, id: i64, history: &[Message]) -> Result<(), AgentError> {
        let tx = self.conn.unchecked_transaction()?;
        tx.execute("DELETE FROM messages WHERE investigation = ?1", params![id])?;
        for (i, m) in history.iter().enumerate() {
            let json = serde_json::to_string(m)?;
            tx.execute("INSERT INTO messages (investigation, seq, json) VALUES (?1, ?2, ?3)", params![id, i as i64, json])?;
            if !m.summary && !m.id.as_str().is_empty() {
                tx.execute(
                    "INSERT OR IGNORE INTO transcript (investigation, seq, id, json)
                     VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM transcript WHERE investigation = ?1), ?2, ?3)",
                    params![id, m.id.as_str(), json],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn transcript(&self, id: i64) -> Result<Vec<Message>, AgentError> {
        let out = self.messages_of("transcript", id)?;
        if out.is_empty() {
            return self.history(id);
        }
        Ok(out)
    }

    fn history(&self, id: i64) -> Result<Vec<Message>, AgentError> {
        self.messages_of("messages", id)
    }

    /// The messages of `id` in `table` (`messages` or `transcript`), in order.
    fn messages_of(&self, table: &str, id: i64) -> Result<Vec<Message>, AgentError> {
        let mut st = self.conn.prepare(&format!("SELECT json FROM {table} WHERE investigation = ?1 ORDER BY seq"))?;
        let rows = st.query_map(params![id], |r| r.get::<_, String>(0))?;
        let mut out = Vec::new();
        for r in rows {
            out.push(serde_json::from_str(&r?)?);
        }
        Ok(out)
    }

    fn mark_failed(&self, id: i64, why: &str) -> Result<(), AgentError> {
        self.conn.execute("UPDATE investigations SET status = 'failed', exit_reason = ?2, exit_kind = NULL WHERE id = ?1", params![id, why])?;
        Ok(())
    }

    fn list(&self) -> Result<Vec<InvestigationRow>, AgentError> {
        let mut st = self.conn.prepare(
            "SELECT i.id, i.question, i.status, i.exit_reason, i.created,
                    (SELECT COUNT(*) FROM events e WHERE e.investigation = i.id), i.exit_kind,
                    (SELECT json_extract(e.json, '$.title') FROM events e
                     WHERE e.investigation = i.id AND json_extract(e.json, '$.type') = 'started' ORDER BY e.seq LIMIT 1)
             FROM investigations i ORDER BY i.id DESC",
        )?;
        let rows = st.query_map([], |r| {
            let status = SessionStatus::parse(&r.get::<_, String>(2)?);
            let exit_kind: Option<String> = r.get(6)?;
            let resumable = match status {
                SessionStatus::Interrupted | SessionStatus::Failed => true,
                SessionStatus::Finished => exit_kind.as_deref().is_some_and(crate::events::ExitReason::resumable_kind),
                SessionStatus::Running => false,
            };
            Ok(InvestigationRow {
                id: r.get(0)?,
                question: r.get(1)?,
                title: r.get(7)?,
                status,
                exit_reason: r.get(3)?,
                exit_kind,
                resumable,
                created: r.get(4)?,
                events: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn get(&self, id: i64) -> Result<InvestigationRow, AgentError> {
        self.list()?.into_iter().find(|r| r.id == id).ok_or(AgentError::NotFound(id))
    }

    fn events(&self, id: i64) -> Result<Vec<AgentEvent>, AgentError> {
        let mut st = self.conn.prepare("SELECT json FROM events WHERE investigation = ?1 ORDER BY seq")?;
        let rows = st.query_map(params![id], |r| r.get::<_, String>(0))?;
        let mut out = Vec::new();
        for r in rows {
            out.push(serde_json::from_str(&r?)?);
        }
        Ok(out)
    }

    fn events_json(&self, id: i64) -> Result<Vec<String>, AgentError> {
        let mut st = self.conn.prepare("SELECT json FROM events WHERE investigation = ?1 ORDER BY seq")?;
        let rows = st.query_map(params![id], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn settings(&self, id: i64) -> Result<serde_json::Value, AgentError> {
        let s: String = self.conn.query_row("SELECT settings FROM investigations WHERE id = ?1", params![id], |r| r.get(0)).map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => AgentError::NotFound(id),
            e => AgentError::Store(e),
        })?;
        Ok(serde_json::from_str(&s)?)
    }

    fn mark_running(&self, id: i64) -> Result<(), AgentError> {
        self.conn.execute(
            "UPDATE investigations SET status = 'running', exit_reason = NULL, exit_kind = NULL, pid = ?2 WHERE id = ?1",
            params![id, i64::from(std::process::id())],
        )?;
        Ok(())
    }

    fn recover_dead(&self, alive: impl Fn(i64) -> bool) -> Result<Vec<i64>, AgentError> {
        let ids: Vec<(i64, Option<i64>)> = {
            let mut st = self.conn.prepare("SELECT id, pid FROM investigations WHERE status = 'running'")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        let dead: Vec<i64> = ids.into_iter().filter(|(_, pid)| !pid.is_some_and(&alive)).map(|(id, _)| id).collect();
        for &id in &dead {
            self.recover_one(id)?;
        }
        Ok(dead)
    }

    fn recover(&self) -> Result<Vec<i64>, AgentError> {
        let ids: Vec<i64> = {
            let mut st = self.conn.prepare("SELECT id FROM investigations WHERE status = 'running'")?;
            let rows = st.query_map([], |r| r.get(0))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        for &id in &ids {
            self.recover_one(id)?;
        }
        Ok(ids)
    }

    fn recover_one(&self, id: i64) -> Result<(), AgentError> {
        {
            let events = self.events(id)?;
            let mut open: Vec<(String, String)> = Vec::new();
            for e in &events {
                match e {
                    AgentEvent::ToolCall { call_id, name, .. } => open.push((call_id.clone(), name.clone())),
                    AgentEvent::ToolResult { call_id, .. } => open.retain(|(c, _)| c != call_id),
                    _ => {}
                }
            }
            for (call_id, name) in open {
                self.append_event(id, &AgentEvent::ToolInterrupted { call_id, name })?;
            }
            self.conn.execute("UPDATE investigations SET status = 'interrupted' WHERE id = ?1", params![id])?;
        }
        Ok(())
    }
}

/// An [`EventSink`] that writes every event to the store and passes it on.
pub struct StoreSink<'a> {
    /// The store.
    pub store: &'a Store,
    /// The investigation.
    pub id: i64,
    /// Where events go next (printer, UI).
    pub next: &'a mut dyn EventSink,
    /// The first store error, if any (the loop is not stopped by it).
    pub error: Option<AgentError>,
}

impl StoreSink<'_> {
    /// Whether the store may still be written: not after it reported damage.
    fn writable(&self) -> bool {
        !matches!(self.error, Some(AgentError::StoreCorrupt { .. }))
    }

    /// Keeps the first store error and says it, once, where the user reads
    /// the run (the window, the terminal): the run goes on.
    fn failed(&mut self, e: AgentError) {
        if self.error.is_some() {
            return;
        }
        self.next.emit(&AgentEvent::Error {
            message: format!("not saved: {e}. The investigation goes on, but what follows may be missing from the stored investigation."),
        });
        self.error = Some(e);
    }
}

impl EventSink for StoreSink<'_> {
    fn emit(&mut self, event: &AgentEvent) {
        if self.writable()
            && let Err(e) = self.store.append_event(self.id, event)
        {
            self.failed(e);
        }
        self.next.emit(event);
    }

    fn history(&mut self, messages: &[Message]) {
        if self.writable()
            && let Err(e) = self.store.save_history(self.id, messages)
        {
            self.failed(e);
        }
        self.next.history(messages);
    }
}
