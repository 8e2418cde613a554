//! `run_code`: model-written Python or shell in a contained child process.
//!
//! On Linux the child is started through a small helper program (the
//! `mf-sandbox` binary of this crate, or any binary that calls
//! [`sandbox_helper_main`]) that, before exec'ing the interpreter:
//! drops root to `nobody` (when run as root), enters new user, pid, net,
//! mount, IPC and UTS namespaces, switches to a minimal root (only the
//! read-only system folders, four `/dev` nodes and a private size-limited
//! tmpfs on `/tmp`, the only writable place and HOME; no host path, host
//! UNIX sockets included, is visible), sets rlimits, applies
//! Landlock (read-only system folders, read-write `/tmp`, no TCP) and a
//! seccomp filter (no sockets but `AF_UNIX`, no io_uring, ptrace, bpf, mount,
//! namespaces, keyrings). The interpreter is pid 1 of its namespace, so when
//! it exits — or is killed on timeout together with its process group — the
//! kernel kills every process left in the namespace.
//!
//! Why a helper process rather than `pre_exec`: a pid namespace only applies
//! to the *children* of the process that creates it, so one more fork is
//! needed after `unshare`; doing that (plus Landlock and seccomp set-up, which
//! allocate) inside `pre_exec` of a multi-threaded tokio process is not
//! async-signal-safe. The helper is a fresh single-threaded process where all
//! of it is ordinary code. Why not only util-linux `unshare`: it cannot apply
//! Landlock or seccomp, and this way nothing outside the crate is needed.
//!
//! Containment is probed once ([`probe`]); when it is unavailable the tool
//! refuses ([`ToolError::SandboxUnavailable`]) and never runs code uncontained.
//! On macOS `sandbox-exec` with a deny-default profile is used (compiled
//! there only, not tested on this project's Linux machines).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ToolError;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;

#[cfg(target_os = "linux")]
pub use linux::sandbox_helper_main;

/// Interpreter for the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// `python3`.
    #[serde(alias = "py", alias = "python3")]
    Python,
    /// POSIX `sh`.
    #[serde(alias = "shell", alias = "bash")]
    Sh,
}

/// Arguments of `run_code`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeArgs {
    /// `python` or `sh`.
    pub language: Language,
    /// The program text.
    pub code: String,
}

/// Limits of one run (all enforced by the kernel except `timeout`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodeLimits {
    /// Wall-clock limit; then the whole process group is killed. Default 20 s.
    #[serde(with = "crate::http::duration_millis")]
    pub timeout: Duration,
    /// CPU seconds (RLIMIT_CPU). Default 20.
    pub cpu_seconds: u64,
    /// Address space (RLIMIT_AS). Default 1 GiB.
    pub memory_bytes: u64,
    /// Largest file the code may write (RLIMIT_FSIZE). Default 16 MiB.
    pub file_size_bytes: u64,
    /// Size of the private `/tmp` (tmpfs, counts against RAM). Default 64 MiB.
    pub scratch_bytes: u64,
    /// Open files (RLIMIT_NOFILE). Default 64.
    pub open_files: u64,
    /// Processes in the sandbox (RLIMIT_NPROC, per namespace). Default 64.
    pub processes: u64,
    /// Bytes kept from the start of stdout and of stderr. Default 16 KiB.
    pub output_head_bytes: usize,
    /// Bytes kept from the end of stdout and of stderr. Default 16 KiB.
    pub output_tail_bytes: usize,
    /// Largest program accepted. Default 256 KiB.
    pub max_code_bytes: usize,
}

impl Default for CodeLimits {
    fn default() -> Self {
        CodeLimits {
            timeout: Duration::from_secs(20),
            cpu_seconds: 20,
            memory_bytes: 1 << 30,
            file_size_bytes: 16 << 20,
            scratch_bytes: 64 << 20,
            open_files: 64,
            processes: 64,
            output_head_bytes: 16 << 10,
            output_tail_bytes: 16 << 10,
            max_code_bytes: 256 << 10,
        }
    }
}

/// How to start the sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeConfig {
    /// The helper program (`mf-sandbox`, or a binary with a hidden subcommand
    /// that calls [`sandbox_helper_main`]).
    pub helper: PathBuf,
    /// Arguments put before the spec (e.g. `["__sandbox"]`).
    #[serde(default)]
    pub helper_args: Vec<String>,
    /// Python interpreter. Default `/usr/bin/python3`.
    pub python: PathBuf,
    /// Shell. Default `/bin/sh`.
    pub shell: PathBuf,
    /// Folders the code may read (and execute from) besides the defaults
    /// (`/usr`, `/bin`, `/sbin`, `/lib*`, a few `/etc` files). Add an
    /// interpreter's prefix here when it lives elsewhere.
    #[serde(default)]
    pub extra_read_paths: Vec<PathBuf>,
    /// Limits.
    #[serde(default)]
    pub limits: CodeLimits,
}

impl CodeConfig {
    /// A config using `helper`, `/usr/bin/python3` and `/bin/sh`.
    pub fn new(helper: impl Into<PathBuf>) -> CodeConfig {
        CodeConfig {
            helper: helper.into(),
            helper_args: Vec::new(),
            python: PathBuf::from("/usr/bin/python3"),
            shell: PathBuf::from("/bin/sh"),
            extra_read_paths: Vec::new(),
            limits: CodeLimits::default(),
        }
    }

    /// Find `mf-sandbox` next to the running executable (or one folder up,
    /// as for test binaries in `target/*/deps`).
    pub fn locate_helper() -> Option<PathBuf> {
        let exe = std::env::current_exe().ok()?;
        let dir = exe.parent()?;
        let name = format!("mf-sandbox{}", std::env::consts::EXE_SUFFIX);
        [dir.join(&name), dir.parent()?.join(&name)].into_iter().find(|p| p.is_file())
    }

    /// The config for the `mf-sandbox` beside the running executable
    /// ([`CodeConfig::locate_helper`]): how `mf --code` and the desktop app
    /// find their helper.
    ///
    /// # Errors
    /// [`ToolError::SandboxUnavailable`] naming the folder where it was looked for.
    pub fn beside_exe() -> Result<CodeConfig, ToolError> {
        Self::locate_helper().map(CodeConfig::new).ok_or_else(|| {
            let exe = std::env::current_exe().ok();
            let name = exe.as_deref().and_then(Path::file_name).map_or_else(|| "the program".into(), |n| n.to_string_lossy().into_owned());
            let dir = exe.as_deref().and_then(Path::parent).map_or_else(|| "?".into(), |d| d.display().to_string());
            ToolError::SandboxUnavailable(format!("mf-sandbox{} not found beside {name} (looked in {dir} and its parent)", std::env::consts::EXE_SUFFIX))
        })
    }
}

/// One captured stream, head and tail kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Captured {
    /// The kept text (lossy UTF-8); when truncated, head + a note + tail.
    pub text: String,
    /// Bytes the program wrote in all.
    pub total_bytes: u64,
    /// True when the middle was dropped.
    pub truncated: bool,
}

/// Result of `run_code`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeResult {
    /// Exit status of the program, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that ended it, when one did (e.g. 9 after the timeout, 24 for
    /// the CPU limit, 25 for the file-size limit).
    pub signal: Option<i32>,
    /// True when the wall-clock limit was hit and the sandbox was killed.
    pub timed_out: bool,
    /// Standard output.
    pub stdout: Captured,
    /// Standard error.
    pub stderr: Captured,
    /// A note for the model when output was cut or the run was killed.
    pub note: Option<String>,
    /// Identifier of this run (part of the script's file name).
    pub run_id: String,
}

/// Keeps the first `head` and last `tail` bytes of a stream in bounded memory.
#[derive(Debug)]
pub(crate) struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl HeadTail {
    pub(crate) fn new(head_cap: usize, tail_cap: usize) -> HeadTail {
        HeadTail { head: Vec::new(), tail: VecDeque::new(), head_cap, tail_cap, total: 0 }
    }

    pub(crate) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.head_cap - self.head.len();
        let n = room.min(chunk.len());
        self.head.extend_from_slice(&chunk[..n]);
        chunk = &chunk[n..];
        if self.tail_cap == 0 || chunk.is_empty() {
            return;
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
            return;
        }
        let over = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..over);
        self.tail.extend(chunk);
    }

    pub(crate) fn finish(self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let truncated = kept < self.total;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if truncated {
            text.push_str(&format!("\n[... {} bytes omitted ...]\n", self.total - kept));
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        Captured { text, total_bytes: self.total, truncated }
    }
}

pub(crate) fn note_for(r: &CodeResult, limits: &CodeLimits) -> Option<String> {
    let mut parts = Vec::new();
    if r.timed_out {
        parts.push(format!("killed after the {} ms time limit", limits.timeout.as_millis()));
    }
    match r.signal {
        Some(24) => parts.push("killed by the CPU-time limit".to_string()),
        Some(25) => parts.push(format!("killed by the {}-byte file-size limit", limits.file_size_bytes)),
        _ => {}
    }
    for (name, c) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if c.truncated {
            parts.push(format!("{name} was {} bytes; kept the first {} and the last {}", c.total_bytes, limits.output_head_bytes, limits.output_tail_bytes));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What the start-up probe found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// Mechanism in words (e.g. "namespaces+landlock(full)+seccomp+rlimits").
    pub mechanism: String,
}

/// Check that the sandbox starts and contains a trivial program.
///
/// # Errors
/// [`ToolError::SandboxUnavailable`] with the reason.
pub async fn probe(cfg: &CodeConfig) -> Result<SandboxReport, ToolError> {
    #[cfg(target_os = "linux")]
    {
        linux::probe(cfg).await
    }
    #[cfg(target_os = "macos")]
    {
        macos::probe(cfg).await
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = cfg;
        Err(ToolError::SandboxUnavailable("no sandbox for this operating system".into()))
    }
}

/// Run code in the sandbox. Call only after [`probe`] succeeded (the
/// registry does this).
///
/// # Errors
/// [`ToolError::CodeTooLarge`], [`ToolError::SandboxUnavailable`] when
/// containment cannot be set up for this run, [`ToolError::SandboxFailed`].
pub async fn run(args: &CodeArgs, cfg: &CodeConfig) -> Result<CodeResult, ToolError> {
    if args.code.len() > cfg.limits.max_code_bytes {
        return Err(ToolError::CodeTooLarge { len: args.code.len(), max: cfg.limits.max_code_bytes });
    }
    #[cfg(target_os = "linux")]
    {
        linux::run(args, cfg).await
    }
    #[cfg(target_os = "macos")]
    {
        macos::run(args, cfg).await
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Err(ToolError::SandboxUnavailable("no sandbox for this operating system".into()))
    }
}

pub(crate) fn new_run_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{:x}{:08x}{:x}", std::process::id(), nanos, COUNTER.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_keeps_ends_in_bounded_memory() {
        let mut h = HeadTail::new(4, 4);
        h.push(b"ab");
        h.push(b"cdef");
        for _ in 0..1000 {
            h.push(b"xxxxxxx");
        }
        h.push(b"WXYZ");
        assert!(h.head.len() <= 4 && h.tail.len() <= 4);
        let c = h.finish();
        assert!(c.truncated);
        assert_eq!(c.total_bytes, 6 + 7000 + 4);
        assert!(c.text.starts_with("abcd\n[... 7002 bytes omitted ...]\nWXYZ"), "{}", c.text);
    }

    #[test]
    fn head_tail_short_output_is_whole() {
        let mut h = HeadTail::new(4, 4);
        h.push(b"abcdefg");
        let c = h.finish();
        assert_eq!(c.text, "abcdefg");
        assert!(!c.truncated);
    }
}
