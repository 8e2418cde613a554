//! The spawning side: the spec for the helper, the helper started with its
//! status pipe on fd 3, the output captured head and tail, the report read.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::SandboxSpec;
use crate::ToolError;
use crate::code::{CodeArgs, CodeConfig, CodeResult, HeadTail, Language, SandboxReport, new_run_id, note_for};

fn read_paths(cfg: &CodeConfig) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib64",
        "/lib32",
        "/libx32",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/localtime",
        "/etc/nsswitch.conf",
        "/etc/passwd",
        "/etc/group",
        "/etc/alternatives",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Ok(rd) = std::fs::read_dir("/etc") {
        v.extend(rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3"))));
    }
    v.extend(cfg.extra_read_paths.iter().cloned());
    v.retain(|p| p.exists());
    v
}

fn spec_for(args: &CodeArgs, cfg: &CodeConfig, run_id: &str) -> SandboxSpec {
    let (interpreter, ext) = match args.language {
        Language::Python => (cfg.python.clone(), "py"),
        Language::Sh => (cfg.shell.clone(), "sh"),
    };
    let l = &cfg.limits;
    SandboxSpec {
        interpreter,
        script_name: format!("main-{run_id}.{ext}"),
        read_paths: read_paths(cfg),
        env: [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("HOME", "/tmp"),
            ("TMPDIR", "/tmp"),
            ("LANG", "C.UTF-8"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("PYTHONUNBUFFERED", "1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        cpu_seconds: l.cpu_seconds,
        memory_bytes: l.memory_bytes,
        file_size_bytes: l.file_size_bytes,
        scratch_bytes: l.scratch_bytes,
        open_files: l.open_files,
        processes: l.processes,
        max_code_bytes: l.max_code_bytes,
    }
}

pub(in crate::code) async fn probe(cfg: &CodeConfig) -> Result<SandboxReport, ToolError> {
    if !Path::new(&cfg.helper).is_file() {
        return Err(ToolError::SandboxUnavailable(format!("helper {} not found", cfg.helper.display())));
    }
    let args = CodeArgs { language: Language::Sh, code: "echo contained".into() };
    let (r, landlock) = run_inner(&args, cfg).await.map_err(|e| match e {
        ToolError::SandboxFailed(m) => ToolError::SandboxUnavailable(m),
        other => other,
    })?;
    if r.exit_code != Some(0) || r.stdout.text != "contained\n" {
        return Err(ToolError::SandboxUnavailable(format!("probe program did not run (exit {:?}, stderr {:?})", r.exit_code, r.stderr.text)));
    }
    Ok(SandboxReport {
        mechanism: format!(
            "user+pid+net+mount+ipc+uts namespaces, landlock({landlock}), seccomp(no sockets but AF_UNIX, no new namespaces), rlimits, tmpfs /tmp"
        ),
    })
}

pub(in crate::code) async fn run(args: &CodeArgs, cfg: &CodeConfig) -> Result<CodeResult, ToolError> {
    run_inner(args, cfg).await.map(|(r, _)| r)
}

async fn run_inner(args: &CodeArgs, cfg: &CodeConfig) -> Result<(CodeResult, String), ToolError> {
    // `/tmp` inside is the sandbox's own empty scratch, mounted over whatever
    // would be bound there, so an extra read path under it cannot be shown:
    // say so instead of failing in the middle of the set-up.
    if let Some(p) = cfg.extra_read_paths.iter().find(|p| !p.is_absolute() || p.starts_with("/tmp")) {
        return Err(ToolError::SandboxUnavailable(format!(
            "extra read path {} must be absolute and outside /tmp (the sandbox's private scratch)",
            p.display()
        )));
    }
    let limits = &cfg.limits;
    let run_id = new_run_id();
    let spec = serde_json::to_string(&spec_for(args, cfg, &run_id)).map_err(|e| ToolError::SandboxFailed(e.to_string()))?;
    let fail = |what: &str, e: std::io::Error| ToolError::SandboxFailed(format!("{what}: {e}"));
    let (status_r, status_w) = std::io::pipe().map_err(|e| fail("pipe", e))?;
    let wfd = status_w.as_raw_fd();
    let mut cmd = tokio::process::Command::new(&cfg.helper);
    cmd.args(&cfg.helper_args).arg(&spec).env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if wfd == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(wfd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| fail(&format!("starting {}", cfg.helper.display()), e))?;
    drop(status_w);
    let pgid = child.id().map(|p| p as libc::pid_t);
    let status_task = tokio::task::spawn_blocking(move || {
        let mut s = String::new();
        let _ = (&status_r).take(64 << 10).read_to_string(&mut s);
        s
    });
    if let Some(mut stdin) = child.stdin.take() {
        let code = args.code.clone().into_bytes();
        tokio::spawn(async move {
            let _ = stdin.write_all(&code).await;
        });
    }
    let (h, t) = (limits.output_head_bytes, limits.output_tail_bytes);
    let out_task = child.stdout.take().map(|s| tokio::spawn(capture(s, h, t)));
    let err_task = child.stderr.take().map(|s| tokio::spawn(capture(s, h, t)));

    let timed_out = match tokio::time::timeout(limits.timeout, child.wait()).await {
        Ok(r) => {
            r.map_err(|e| fail("waiting for the sandbox", e))?;
            false
        }
        Err(_) => {
            if let Some(pg) = pgid {
                // SAFETY: the helper is not reaped yet, so its pgid cannot be reused.
                unsafe { libc::killpg(pg, libc::SIGKILL) };
            }
            let _ = child.wait().await;
            true
        }
    };
    // Pid 1 is gone, so the kernel has killed the rest of the namespace and
    // every pipe writer with it; the grace period only guards against a bug.
    let grace = std::time::Duration::from_secs(5);
    let collect = |task: Option<tokio::task::JoinHandle<HeadTail>>| async move {
        match task {
            Some(t) => match tokio::time::timeout(grace, t).await {
                Ok(Ok(ht)) => ht.finish(),
                _ => HeadTail::new(0, 0).finish(),
            },
            None => HeadTail::new(0, 0).finish(),
        }
    };
    let stdout = collect(out_task).await;
    let stderr = collect(err_task).await;
    let status = tokio::time::timeout(grace, status_task).await.ok().and_then(Result::ok).unwrap_or_default();

    let mut started = None;
    let (mut exit_code, mut signal) = (None, None);
    for line in status.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        match v["event"].as_str() {
            Some("setup_failed") => {
                let msg = v["message"].as_str().unwrap_or("unknown reason").to_string();
                return Err(ToolError::SandboxUnavailable(msg));
            }
            Some("started") => started = Some(v["landlock"].as_str().unwrap_or("?").to_string()),
            Some("exited") => exit_code = v["code"].as_i64().map(|c| c as i32),
            Some("signaled") => signal = v["signal"].as_i64().map(|s| s as i32),
            _ => {}
        }
    }
    let Some(landlock) = started else {
        if timed_out {
            return Err(ToolError::SandboxFailed("the sandbox did not start before the time limit".into()));
        }
        return Err(ToolError::SandboxFailed(format!("the sandbox helper did not start: {}", stderr.text.trim())));
    };
    if timed_out {
        signal = Some(libc::SIGKILL);
    }
    let mut result = CodeResult { exit_code, signal, timed_out, stdout, stderr, note: None, run_id };
    result.note = note_for(&result, limits);
    Ok((result, landlock))
}

async fn capture(mut r: impl tokio::io::AsyncRead + Unpin, head: usize, tail: usize) -> HeadTail {
    let mut ht = HeadTail::new(head, tail);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => ht.push(&buf[..n]),
        }
    }
    ht
}
