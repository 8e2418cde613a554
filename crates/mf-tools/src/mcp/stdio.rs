//! A local MCP server: the child process and the stdio transport over it.
//!
//! The transport is ours (a reader task and a writer task joined to rmcp by a
//! sink/stream pair) rather than rmcp's child-process one, for three reasons:
//! the child runs in its own process group, so stopping it also stops what it
//! started (`npx` runs `node`); its stderr is kept (the last lines) to say why
//! it died; and a line on stdout that is not JSON is a protocol violation that
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

/// Longest message line accepted from a server (bytes).
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// Lines of the server's stderr kept for error messages.
const STDERR_LINES: usize = 12;
/// Characters kept of one stderr line, and of a malformed line.
const SAMPLE_CHARS: usize = 200;

/// What is known about a connection's end: the first protocol violation and
/// the last lines the server wrote to stderr.
#[derive(Debug, Default)]
pub struct Diagnostics {
    malformed: Mutex<Option<String>>,
    stderr: Mutex<VecDeque<String>>,
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
        self.stderr.lock().map(|l| l.iter().cloned().collect::<Vec<_>>().join(" | ")).unwrap_or_default()
    }

    fn push_stderr(&self, line: String) {
        if let Ok(mut l) = self.stderr.lock() {
            if l.len() == STDERR_LINES {
                l.pop_front();
            }
            l.push_back(line);
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
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            tracing::debug!(target: "mf_tools::mcp::stderr", "{l}");
            let l = sample(l.trim().as_bytes());
            if !l.is_empty() {
                d.push_stderr(l);
            }
        }
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
