//! The helper process: read the program, drop root, enter the namespaces,
//! fork pid 1, contain it and exec, and report to the parent on fd 3.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;

use super::confine::{landlock, seccomp, set_rlimit};
use super::root::{minimal_root, mount};
use super::{SandboxSpec, check, errno_msg};

const NOBODY: libc::uid_t = 65534;

/// Entry point of the sandbox helper (the `mf-sandbox` binary calls it with
/// its last argument). Returns the process exit code: the program's own, or
/// 128+signal, or 125 when the sandbox could not be set up.
pub fn sandbox_helper_main(spec_json: &str) -> i32 {
    let mut status = StatusPipe::open();
    match helper(spec_json, &mut status) {
        Ok(code) => code,
        Err(message) => {
            status.send(&serde_json::json!({ "event": "setup_failed", "message": message }));
            let _ = writeln!(std::io::stderr(), "mf-sandbox: {message}");
            125
        }
    }
}

struct StatusPipe(Option<std::fs::File>);

impl StatusPipe {
    fn open() -> StatusPipe {
        // SAFETY: fcntl on a possibly-closed fd number only queries it.
        if unsafe { libc::fcntl(3, libc::F_GETFD) } == -1 {
            return StatusPipe(None);
        }
        // SAFETY: fd 3 is open (checked above) and was handed to us by the parent for this use.
        unsafe { libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC) };
        // SAFETY: we take ownership of fd 3, which nothing else in this process uses.
        StatusPipe(Some(unsafe { std::fs::File::from_raw_fd(3) }))
    }

    fn send(&mut self, v: &serde_json::Value) {
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "{v}");
        }
    }
}

fn helper(spec_json: &str, status: &mut StatusPipe) -> Result<i32, String> {
    let spec: SandboxSpec = serde_json::from_str(spec_json).map_err(|e| format!("bad sandbox spec: {e}"))?;
    let mut script = Vec::new();
    std::io::stdin().take(spec.max_code_bytes as u64 + 1).read_to_end(&mut script).map_err(|e| format!("reading the program: {e}"))?;

    // SAFETY (this block and the helpers below): plain syscalls on values we own;
    // the helper is single-threaded, so fork and the calls after it are sound.
    let dropped = unsafe { drop_root()? };
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    check(unsafe { libc::unshare(flags) }, "unshare(user, pid, net, mount, ipc, uts namespaces)")?;
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_file("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;

    let mut fds = [0; 2];
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, "pipe2")?;
    let (rfd, wfd) = (fds[0], fds[1]);
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(errno_msg("fork"));
    }
    if pid == 0 {
        unsafe { libc::close(rfd) };
        // SAFETY: the write end is ours; wrapping it lets us write the report.
        let mut report = unsafe { std::fs::File::from_raw_fd(wfd) };
        let err = child(&spec, &script, &mut report);
        let _ = write!(report, "err {err}");
        unsafe { libc::_exit(127) };
    }
    unsafe { libc::close(wfd) };
    // SAFETY: the read end is ours.
    let mut report = String::new();
    let _ = unsafe { std::fs::File::from_raw_fd(rfd) }.read_to_string(&mut report);
    if let Some(err) = report.split("err ").nth(1) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
        return Err(err.to_string());
    }
    let landlock = report.strip_prefix("ok landlock=").unwrap_or("unknown").trim().to_string();
    if landlock.is_empty() || landlock == "unknown" {
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
        return Err("the sandboxed child ended before it was contained".into());
    }
    status.send(&serde_json::json!({ "event": "started", "landlock": landlock, "uid_dropped": dropped }));
    let mut st = 0;
    loop {
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(errno_msg("waitpid"));
        }
    }
    if libc::WIFSIGNALED(st) {
        let sig = libc::WTERMSIG(st);
        status.send(&serde_json::json!({ "event": "signaled", "signal": sig }));
        Ok(128 + sig)
    } else {
        let code = libc::WEXITSTATUS(st);
        status.send(&serde_json::json!({ "event": "exited", "code": code }));
        Ok(code)
    }
}

/// As root: become nobody for good. Returns whether it dropped.
unsafe fn drop_root() -> Result<bool, String> {
    // SAFETY: plain credential syscalls in a single-threaded process.
    unsafe {
        if libc::geteuid() != 0 {
            return Ok(false);
        }
        check(libc::setgroups(0, std::ptr::null()), "setgroups")?;
        check(libc::setresgid(NOBODY, NOBODY, NOBODY), "setresgid(nobody)")?;
        check(libc::setresuid(NOBODY, NOBODY, NOBODY), "setresuid(nobody)")?;
        if libc::setuid(0) == 0 {
            return Err("could not drop root".into());
        }
        // A uid change makes the process non-dumpable, which would make
        // /proc/self/uid_map unwritable; nothing secret is in this process.
        check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")?;
        Ok(true)
    }
}

fn write_file(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {path}: {e}"))
}

/// Pid 1 of the sandbox: contain, then exec. Returns only on failure.
fn child(spec: &SandboxSpec, script: &[u8], report: &mut std::fs::File) -> String {
    match contain(spec, script) {
        Err(e) => e,
        Ok(landlock) => {
            let _ = writeln!(report, "ok landlock={landlock}");
            let script_path = format!("/tmp/{}", spec.script_name);
            let err = std::process::Command::new(&spec.interpreter)
                .arg(&script_path)
                .env_clear()
                .envs(spec.env.iter().map(|(k, v)| (k, v)))
                .current_dir("/tmp")
                .exec();
            format!("exec {}: {err}", spec.interpreter.display())
        }
    }
}

fn contain(spec: &SandboxSpec, script: &[u8]) -> Result<&'static str, String> {
    // SAFETY: prctl with constant arguments.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) }, "prctl(PR_SET_PDEATHSIG)")?;
    if script.len() > spec.max_code_bytes {
        return Err(format!("program larger than {} bytes", spec.max_code_bytes));
    }
    mount("none", "/", "none", libc::MS_REC | libc::MS_PRIVATE, None)?;
    minimal_root(spec)?;
    let script_path = format!("/tmp/{}", spec.script_name);
    std::fs::write(&script_path, script).map_err(|e| format!("writing the program: {e}"))?;
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    // SAFETY: dup2 onto stdin of this process.
    check(unsafe { libc::dup2(null.as_raw_fd(), 0) }, "dup2(/dev/null, stdin)")?;
    drop(null);

    set_rlimit(libc::RLIMIT_CORE, 0)?;
    set_rlimit(libc::RLIMIT_CPU, spec.cpu_seconds)?;
    set_rlimit(libc::RLIMIT_AS, spec.memory_bytes)?;
    set_rlimit(libc::RLIMIT_FSIZE, spec.file_size_bytes)?;
    set_rlimit(libc::RLIMIT_NOFILE, spec.open_files)?;
    set_rlimit(libc::RLIMIT_NPROC, spec.processes)?;

    let landlock = landlock(&spec.read_paths)?;
    seccomp()?;
    Ok(landlock)
}
