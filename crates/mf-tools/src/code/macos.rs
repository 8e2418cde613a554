//! macOS containment: `sandbox-exec` with a deny-default profile, rlimits,
//! scrubbed environment, own process group killed on timeout.
//!
//! Not compiled or tested on this project's Linux machines: treat as a
//! starting point that must be checked on a Mac before it is relied on. The
//! probe refuses when `sandbox-exec` is missing, so it fails closed.

use std::process::Stdio;

use tokio::io::AsyncReadExt;

use super::{CodeArgs, CodeConfig, CodeResult, HeadTail, Language, SandboxReport, new_run_id, note_for};
use crate::ToolError;

const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

fn profile(scratch: &str) -> String {
    format!(
        r#"(version 1)
(deny default)
(allow process-exec (subpath "/usr/bin") (subpath "/bin") (subpath "/Library/Developer/CommandLineTools") (subpath "/Applications/Xcode.app"))
(allow process-fork)
(allow signal (target self))
(allow sysctl-read)
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow file-read* (subpath "/usr") (subpath "/bin") (subpath "/System") (subpath "/Library/Developer/CommandLineTools")
  (subpath "/Applications/Xcode.app") (subpath "/private/etc") (literal "/dev/null") (literal "/dev/urandom") (literal "/dev/random")
  (literal "/") (literal "/private") (literal "/dev"))
(allow file-read* file-write* (subpath "{scratch}"))
(allow file-write-data (literal "/dev/null"))
(deny network*)
"#
    )
}

pub(super) async fn probe(cfg: &CodeConfig) -> Result<SandboxReport, ToolError> {
    if !std::path::Path::new(SANDBOX_EXEC).is_file() {
        return Err(ToolError::SandboxUnavailable("sandbox-exec not found".into()));
    }
    let r = run(&CodeArgs { language: Language::Sh, code: "echo contained".into() }, cfg).await?;
    if r.exit_code != Some(0) || r.stdout.text != "contained\n" {
        return Err(ToolError::SandboxUnavailable(format!("probe failed: {}", r.stderr.text)));
    }
    Ok(SandboxReport { mechanism: "sandbox-exec deny-default profile, rlimits".into() })
}

pub(super) async fn run(args: &CodeArgs, cfg: &CodeConfig) -> Result<CodeResult, ToolError> {
    let limits = cfg.limits.clone();
    let run_id = new_run_id();
    let scratch = tempfile_dir(&run_id)?;
    let scratch_s = scratch.to_string_lossy().into_owned();
    let (interp, ext) = match args.language {
        Language::Python => (cfg.python.clone(), "py"),
        Language::Sh => (cfg.shell.clone(), "sh"),
    };
    let script = scratch.join(format!("main-{run_id}.{ext}"));
    std::fs::write(&script, &args.code).map_err(|e| ToolError::SandboxFailed(e.to_string()))?;
    let mut cmd = tokio::process::Command::new(SANDBOX_EXEC);
    cmd.arg("-p")
        .arg(profile(&scratch_s))
        .arg(&interp)
        .arg(&script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &scratch_s)
        .env("TMPDIR", &scratch_s)
        .env("LANG", "C.UTF-8")
        .current_dir(&scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let l = limits.clone();
    // SAFETY: only setrlimit (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for (res, v) in [
                (libc::RLIMIT_CORE, 0),
                (libc::RLIMIT_CPU, l.cpu_seconds),
                (libc::RLIMIT_FSIZE, l.file_size_bytes),
                (libc::RLIMIT_NOFILE, l.open_files),
                (libc::RLIMIT_NPROC, l.processes),
            ] {
                let lim = libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: v as libc::rlim_t };
                if libc::setrlimit(res, &lim) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| ToolError::SandboxUnavailable(format!("sandbox-exec: {e}")))?;
    let pgid = child.id().map(|p| p as libc::pid_t);
    let (h, t) = (limits.output_head_bytes, limits.output_tail_bytes);
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let out_task = tokio::spawn(async move { cap(so.as_mut(), h, t).await });
    let err_task = tokio::spawn(async move { cap(se.as_mut(), h, t).await });
    let (status, timed_out) = match tokio::time::timeout(limits.timeout, child.wait()).await {
        Ok(r) => (r.ok(), false),
        Err(_) => {
            if let Some(pg) = pgid {
                // SAFETY: the child is not reaped yet.
                unsafe { libc::killpg(pg, libc::SIGKILL) };
            }
            (child.wait().await.ok(), true)
        }
    };
    if let Some(pg) = pgid {
        // SAFETY: best-effort cleanup of background processes left in the group.
        unsafe { libc::killpg(pg, libc::SIGKILL) };
    }
    let stdout = out_task.await.map(HeadTail::finish).unwrap_or_else(|_| HeadTail::new(0, 0).finish());
    let stderr = err_task.await.map(HeadTail::finish).unwrap_or_else(|_| HeadTail::new(0, 0).finish());
    let _ = std::fs::remove_dir_all(&scratch);
    use std::os::unix::process::ExitStatusExt;
    let mut r = CodeResult { exit_code: status.and_then(|s| s.code()), signal: status.and_then(|s| s.signal()), timed_out, stdout, stderr, note: None, run_id };
    r.note = note_for(&r, &limits);
    Ok(r)
}

async fn cap<R: tokio::io::AsyncRead + Unpin>(r: Option<&mut R>, h: usize, t: usize) -> HeadTail {
    let mut ht = HeadTail::new(h, t);
    if let Some(r) = r {
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 {
                break;
            }
            ht.push(&buf[..n]);
        }
    }
    ht
}

fn tempfile_dir(run_id: &str) -> Result<std::path::PathBuf, ToolError> {
    let p = std::env::temp_dir().join(format!("mf-code-{run_id}"));
    std::fs::create_dir(&p).map_err(|e| ToolError::SandboxFailed(e.to_string()))?;
    // /var/folders/... is a symlink target of /tmp-like dirs; the profile needs the real path.
    std::fs::canonicalize(&p).map_err(|e| ToolError::SandboxFailed(e.to_string()))
}
