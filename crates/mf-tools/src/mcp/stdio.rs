//! A local MCP server: the child process and the stdio transport over it.
//!
//! The transport is ours (a reader task and a writer task joined to rmcp by a
//! sink/stream pair) rather than rmcp's child-process one, for three reasons:
//! the child runs in its own process group, so stopping it also stops what it
//! started (`npx` runs `node`); its stderr is kept as a bounded tail (the
//! last [`STDERR_LINES`] lines, each cut to [`STDERR_LINE_BYTES`], the rest
//! counted and dropped as it arrives) to say why it died, so a server that
//! writes gigabytes without a newline costs a few kilobytes; and a line on stdout that is not JSON is a protocol violation that
//! ends the connection with a clear error, where rmcp would skip it and leave
//! the call to time out.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use futures::SinkExt;
use futures::channel::mpsc;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// Longest message line accepted from a server (bytes): one result or one
/// page of a list is one line. Results are cut to a page
/// (`McpSettings::max_result_bytes`, 256 KiB by default) after they
/// arrive, and a base64 image or a resource can be a few MiB on the wire;
/// 16 MiB holds those and bounds what one message can cost (read in one
/// buffer, then parsed). A longer line ends the connection with a protocol
/// error.
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// Lines of the server's stderr kept for error messages: a Python or Node
/// traceback's last frames and its message fit in a dozen lines; more would
/// only lengthen the one-line error the user reads.
pub const STDERR_LINES: usize = 12;
/// Characters kept of one stderr line, and of a malformed line.
const SAMPLE_CHARS: usize = 200;
/// Bytes kept of one stderr line as it arrives: 200 characters (`SAMPLE_CHARS`)
/// of up to 4 bytes each, all that is ever shown of it. The rest of the line
/// is counted, not kept: stderr is read in chunks, never a whole line at a
/// time, so a line with no newline costs this much whatever its length
/// (before, it was buffered whole and a server could grow the app to gigabytes).
pub const STDERR_LINE_BYTES: usize = SAMPLE_CHARS * 4;
/// Bytes read from stderr at a time.
const STDERR_CHUNK: usize = 8 << 10;

/// The bounded tail of a server's stderr: the last [`STDERR_LINES`] complete
/// lines and the line being written, each at most [`STDERR_LINE_BYTES`] plus
/// the count of bytes dropped from it.
#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
    partial: Vec<u8>,
    dropped: u64,
}

impl StderrTail {
    /// Takes one chunk of stderr, keeping what is shown and counting the rest.
    fn take(&mut self, chunk: &[u8]) {
        for part in chunk.split_inclusive(|b| *b == b'\n') {
            let (text, ends) = match part.strip_suffix(b"\n") {
                Some(t) => (t, true),
                None => (part, false),
            };
            let room = STDERR_LINE_BYTES.saturating_sub(self.partial.len()).min(text.len());
            self.partial.extend_from_slice(&text[..room]);
            self.dropped += (text.len() - room) as u64;
            if ends {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        let line = Self::shown(&self.partial, self.dropped);
        self.partial.clear();
        self.dropped = 0;
        if line.is_empty() {
            return;
        }
        tracing::debug!(target: "mf_tools::mcp::stderr", "{line}");
        if self.lines.len() == STDERR_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    fn shown(kept: &[u8], dropped: u64) -> String {
        let mut line = sample(String::from_utf8_lossy(kept).trim().as_bytes());
        if dropped > 0 {
            if !line.ends_with('…') {
                line.push('…');
            }
            line.push_str(&format!(" ({dropped} more bytes)"));
        }
        line
    }

    /// Complete lines, then the line still being written (when it has text).
    fn joined(&self) -> String {
        let mut all: Vec<String> = self.lines.iter().cloned().collect();
        if !self.partial.is_empty() || self.dropped > 0 {
            let line = Self::shown(&self.partial, self.dropped);
            if !line.is_empty() {
                all.push(line);
            }
        }
        if all.len() > STDERR_LINES {
            all.drain(..all.len() - STDERR_LINES);
        }
        all.join(" | ")
    }

    /// Bytes held, whatever the server wrote.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.lines.iter().map(String::len).sum::<usize>() + self.partial.capacity()
    }
}

/// What is known about a connection's end: the first protocol violation and
/// the last lines the server wrote to stderr.
#[derive(Debug, Default)]
pub struct Diagnostics {
    malformed: Mutex<Option<String>>,
    stderr: Mutex<StderrTail>,
}

fn sample(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let mut out: String = s.chars().take(SAMPLE_CHARS).collect();
    if s.chars().count() > SAMPLE_CHARS {
        out.push('…');
    }
    out
}

impl Diagnostics {
    /// The protocol violation that ended the connection, if one did.
    pub fn malformed(&self) -> Option<String> {
        self.malformed.lock().ok().and_then(|m| m.clone())
    }

    pub(crate) fn set_malformed(&self, what: String) {
        if let Ok(mut m) = self.malformed.lock()
            && m.is_none()
        {
            *m = Some(what);
        }
    }

    /// The last lines of the server's stderr, joined (empty when it wrote none).
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.joined()).unwrap_or_default()
    }

    fn take_stderr(&self, chunk: &[u8]) {
        if let Ok(mut t) = self.stderr.lock() {
            t.take(chunk);
        }
    }

    fn end_stderr(&self) {
        if let Ok(mut t) = self.stderr.lock()
            && (!t.partial.is_empty() || t.dropped > 0)
        {
            t.end_line();
        }
    }
}

/// The child process. Dropping it kills the whole process group.
#[derive(Debug)]
pub struct ChildGuard {
    child: Mutex<Child>,
}

impl ChildGuard {
    /// The process id, while the child has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.lock().ok().and_then(|c| c.id())
    }

    /// How the child ended, if it has (waits up to `wait` for it).
    pub async fn exit_status(&self, wait: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Ok(mut c) = self.child.lock()
                && let Ok(Some(st)) = c.try_wait()
            {
                return Some(st);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(c) = self.child.get_mut()
            && let Some(pid) = c.id()
            && let Ok(pgid) = i32::try_from(pid)
        {
            // The child leads its own group (process_group(0) at spawn) and has
            // not been reaped (id() is Some), so the group id is still ours.
            // SAFETY: killpg takes plain integers and touches no memory of ours.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
            let _ = c.start_kill();
        }
    }
}

/// The transport rmcp drives: a sink of our messages and a stream of the server's.
pub type StdioTransport = (mpsc::Sender<ClientJsonRpcMessage>, mpsc::Receiver<ServerJsonRpcMessage>);

/// The variables a server inherits from this process: what a program needs
/// to find itself, its home and its locale. Everything else (API keys,
/// tokens, this app's own settings) stays here; a server that needs more
/// names it in its `env`.
#[cfg(unix)]
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"];
/// The variables a server inherits from this process (see the Unix list).
#[cfg(windows)]
pub const INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
];

/// Spawns the server and starts its reader, writer and stderr tasks. The
/// server gets [`INHERITED_ENV`] from this process and its configured `env`,
/// nothing else.
///
/// # Errors
/// The spawn's I/O error (program not found, not executable, bad `cwd`).
pub fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
) -> std::io::Result<(ChildGuard, StdioTransport, Arc<Diagnostics>)> {
    let mut cmd = Command::new(command);
    cmd.env_clear();
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.args(args).envs(env).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
        return Err(std::io::Error::other("the child's pipes were not opened"));
    };
    let diag = Arc::new(Diagnostics::default());

    let (to_server, mut outgoing) = mpsc::channel::<ClientJsonRpcMessage>(32);
    tokio::spawn(async move {
        use futures::StreamExt;
        let mut stdin = stdin;
        while let Some(msg) = outgoing.next().await {
            let Ok(mut line) = serde_json::to_vec(&msg) else { continue };
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });

    let (mut incoming, from_server) = mpsc::channel::<ServerJsonRpcMessage>(32);
    let d = diag.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match read_line(&mut reader, &mut buf).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    d.set_malformed(e);
                    break;
                }
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
                Ok(m) => {
                    if incoming.send(m).await.is_err() {
                        break;
                    }
                }
                Err(e) if serde_json::from_slice::<serde_json::Value>(line).is_ok() => {
                    // Well-formed JSON of a shape rmcp does not know (a newer
                    // notification, say): not worth ending the connection.
                    tracing::warn!(error = %e, line = %sample(line), "MCP server sent a message this client does not understand; skipped");
                }
                Err(_) => {
                    d.set_malformed(format!("a line on its output is not JSON-RPC: `{}`", sample(line)));
                    break;
                }
            }
        }
    });

    let d = diag.clone();
    tokio::spawn(async move {
        let mut stderr = stderr;
        let mut chunk = vec![0u8; STDERR_CHUNK];
        loop {
            match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => d.take_stderr(&chunk[..n]),
            }
        }
        d.end_stderr();
    });

    Ok((ChildGuard { child: Mutex::new(child) }, (to_server, from_server), diag))
}

/// Reads one line of at most [`MAX_LINE_BYTES`]; `Ok(0)` at the end.
async fn read_line<R: AsyncRead + Unpin>(r: &mut BufReader<R>, buf: &mut Vec<u8>) -> Result<usize, String> {
    let n = (&mut *r).take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', buf).await.map_err(|e| format!("reading its output failed: {e}"))?;
    if buf.len() > MAX_LINE_BYTES {
        return Err(format!("it sent a message longer than {MAX_LINE_BYTES} bytes"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_is_bounded_whatever_arrives() {
        let mut t = StderrTail::default();
        // 64 MiB with no newline, in read-sized chunks.
        let chunk = vec![b'x'; STDERR_CHUNK];
        for _ in 0..(64 << 20) / STDERR_CHUNK {
            t.take(&chunk);
        }
        assert!(t.held() <= STDERR_LINE_BYTES + 64, "{}", t.held());
        assert!(t.joined().ends_with(&format!("… ({} more bytes)", (64 << 20) - STDERR_LINE_BYTES)), "{}", t.joined());
        // Lines split across chunks; only the last STDERR_LINES are kept.
        t.take(b"\nfirst half ");
        t.take(b"and second\n");
        for i in 0..30 {
            t.take(format!("line {i}\n").as_bytes());
        }
        let tail = t.joined();
        assert_eq!(tail.split(" | ").count(), STDERR_LINES, "{tail}");
        assert!(tail.ends_with("line 29") && !tail.contains("first half"), "{tail}");
        assert!(t.held() <= STDERR_LINES * STDERR_LINE_BYTES + STDERR_LINE_BYTES, "{}", t.held());
    }
}
