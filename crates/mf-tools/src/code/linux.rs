//! Linux containment: the helper process (runs inside) and the spawning side.
//!
//! Order inside the helper, and why:
//! 1. read the program from stdin (before anything is restricted);
//! 2. as root, drop to uid/gid 65534 with no groups and make the process
//!    dumpable again (so it may write its own uid map): kernel permission
//!    checks then protect root's files even if a later layer had a gap, and
//!    RLIMIT_NPROC is enforced (it is not for uid 0);
//! 3. `unshare` user, pid, net, mount, IPC, UTS namespaces and map the
//!    current uid/gid to itself (no root inside, so exec drops all
//!    capabilities);
//! 4. fork: the child is pid 1 of the new pid namespace; when it dies the
//!    kernel kills everything else in it (no survivors), and it dies with
//!    the helper (`PR_SET_PDEATHSIG`);
//! 5. child: private mount propagation, then a minimal root
//!    ([`minimal_root`]: the read paths bound read-only, four `/dev` nodes,
//!    a size-limited tmpfs on `/tmp`, `pivot_root`, the host tree detached,
//!    so no host path, UNIX sockets included, can even be named), the
//!    program written into `/tmp`, stdin `/dev/null`, rlimits, Landlock,
//!    seccomp, exec.
//!
//! The helper reports to the parent on fd 3 (JSON lines): `started`, then
//! `exited`/`signaled`, or `setup_failed` with a reason.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{CodeArgs, CodeConfig, CodeResult, HeadTail, Language, SandboxReport, new_run_id, note_for};
use crate::ToolError;

/// What the parent tells the helper (JSON in the last argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SandboxSpec {
    interpreter: PathBuf,
    script_name: String,
    read_paths: Vec<PathBuf>,
    env: Vec<(String, String)>,
    cpu_seconds: u64,
    memory_bytes: u64,
    file_size_bytes: u64,
    scratch_bytes: u64,
    open_files: u64,
    processes: u64,
    max_code_bytes: usize,
}

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

fn errno_msg(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn check(rc: libc::c_int, what: &str) -> Result<(), String> {
    if rc < 0 { Err(errno_msg(what)) } else { Ok(()) }
}

fn helper(spec_json: &str, status: &mut StatusPipe) -> Result<i32, String> {
    let spec: SandboxSpec = serde_json::from_str(spec_json).map_err(|e| format!("bad sandbox spec: {e}"))?;
    let mut script = Vec::new();
    std::io::stdin()
        .take(spec.max_code_bytes as u64 + 1)
        .read_to_end(&mut script)
        .map_err(|e| format!("reading the program: {e}"))?;

    // SAFETY (this block and the helpers below): plain syscalls on values we own;
    // the helper is single-threaded, so fork and the calls after it are sound.
    let dropped = unsafe { drop_root()? };
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
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

fn mount(src: &str, target: &str, fstype: &str, flags: libc::c_ulong, data: Option<&str>) -> Result<(), String> {
    let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
    let (src_c, target_c, fstype_c) = (c(src)?, c(target)?, c(fstype)?);
    let data_c = data.map(c).transpose()?;
    // SAFETY: all pointers are valid NUL-terminated strings or null.
    let rc = unsafe {
        libc::mount(
            src_c.as_ptr(),
            target_c.as_ptr(),
            fstype_c.as_ptr(),
            flags,
            data_c.as_ref().map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    };
    check(rc, &format!("mount {fstype} on {target}"))
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

/// Replace the file system the program sees with a minimal one, so that
/// nothing of the host is even visible except the read paths.
///
/// Why: Landlock (ABI ≤ 7) does not govern `connect`/`sendto` to a pathname
/// UNIX socket, so with the host tree visible the program could talk to any
/// world-writable socket (an attack test found exactly that). With a new root
/// there is no such path to name. Layout: a small tmpfs root; each read path
/// bind-mounted read-only at the same place (symlinks such as `/bin -> usr/bin`
/// recreated as symlinks); `/dev/{null,zero,random,urandom}` bound from the
/// host; a fresh size-limited tmpfs on `/tmp`. Then `pivot_root` and the old
/// root is detached, and the root tmpfs is made read-only. No `/proc`, `/sys`,
/// `/run`, `/home`, `/root`.
fn minimal_root(spec: &SandboxSpec) -> Result<(), String> {
    const NEW: &str = "/tmp";
    let no_dev = libc::MS_NOSUID | libc::MS_NODEV;
    mount("tmpfs", NEW, "tmpfs", no_dev, Some("size=1m,nr_inodes=4096,mode=0755"))?;
    let inside = |p: &Path| -> PathBuf { Path::new(NEW).join(p.strip_prefix("/").unwrap_or(p)) };
    let mut paths: Vec<PathBuf> = spec.read_paths.clone();
    let mut i = 0;
    while i < paths.len() {
        let p = paths[i].clone();
        i += 1;
        if !p.is_absolute() {
            return Err(format!("read path {} is not absolute", p.display()));
        }
        let target = inside(&p);
        if std::fs::symlink_metadata(&target).is_ok() {
            continue; // already made (listed twice, or under a bound folder)
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        let meta = std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.file_type().is_symlink() {
            let to = std::fs::read_link(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            std::os::unix::fs::symlink(&to, &target).map_err(|e| format!("symlink {}: {e}", target.display()))?;
            // What the link points at must be there too.
            if let Ok(real) = std::fs::canonicalize(&p)
                && !paths.iter().any(|q| real.starts_with(q))
            {
                paths.push(real);
            }
            continue;
        }
        if meta.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        } else {
            std::fs::File::create(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        }
        bind(&p, &target, true)?;
    }
    let dev = Path::new(NEW).join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| format!("creating {}: {e}", dev.display()))?;
    for name in ["null", "zero", "random", "urandom"] {
        let target = dev.join(name);
        std::fs::File::create(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        bind(&Path::new("/dev").join(name), &target, false)?;
    }
    let tmp = Path::new(NEW).join("tmp");
    std::fs::create_dir(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let tmp_opts = format!("size={},nr_inodes=16384,mode=0700", spec.scratch_bytes.max(4096));
    mount("tmpfs", &tmp.to_string_lossy(), "tmpfs", no_dev, Some(&tmp_opts))?;

    let c_new = CString::new(NEW).map_err(|e| e.to_string())?;
    let c_dot = CString::new(".").map_err(|e| e.to_string())?;
    // SAFETY: chdir/pivot_root/umount2 on valid NUL-terminated paths. pivot_root(".", ".")
    // stacks the old root on the new one; detaching "." then removes the old root.
    unsafe {
        check(libc::chdir(c_new.as_ptr()), "chdir(new root)")?;
        check(libc::syscall(libc::SYS_pivot_root, c_dot.as_ptr(), c_dot.as_ptr()) as libc::c_int, "pivot_root")?;
        check(libc::umount2(c_dot.as_ptr(), libc::MNT_DETACH), "detaching the old root")?;
        check(libc::chdir(c"/".as_ptr()), "chdir(/)")?;
    }
    if Path::new("/proc/self").exists() {
        return Err("the host file system is still visible after pivot_root".into());
    }
    mount("none", "/", "none", libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | no_dev, None)
}

/// Bind-mount `src` on `dst`; with `read_only`, remount it read-only, nosuid,
/// nodev, keeping the flags the kernel locks for a user namespace (noexec,
/// atime) as the source mount has them.
fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<(), String> {
    let (s, d) = (src.to_string_lossy(), dst.to_string_lossy());
    mount(&s, &d, "none", libc::MS_BIND | libc::MS_REC, None)?;
    if !read_only {
        return Ok(());
    }
    let c = CString::new(d.as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: statvfs into a zeroed local struct with a valid path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, &format!("statvfs {d}"))?;
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    for (st_flag, ms_flag) in [
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    mount("none", &d, "none", flags, None)
}

fn set_rlimit(res: libc::__rlimit_resource_t, value: u64) -> Result<(), String> {
    let lim = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
    // SAFETY: valid pointer to a local rlimit.
    check(unsafe { libc::setrlimit(res, &lim) }, &format!("setrlimit({res})"))
}

fn landlock(read_paths: &[PathBuf]) -> Result<&'static str, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
        path_beneath_rules,
    };
    let abi = ABI::V7;
    let e = |e: landlock::RulesetError| format!("landlock: {e}");
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(e)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(e)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(e)?
        .create()
        .map_err(e)?
        .add_rules(path_beneath_rules(read_paths, AccessFs::from_read(abi)))
        .map_err(e)?
        .add_rules(path_beneath_rules(["/tmp"], AccessFs::from_all(abi)))
        .map_err(e)?
        .add_rules(path_beneath_rules(
            ["/dev/null"],
            AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate,
        ))
        .map_err(e)?
        .add_rules(path_beneath_rules(["/dev/zero", "/dev/urandom", "/dev/random"], AccessFs::from_read(abi)))
        .map_err(e)?
        .restrict_self()
        .map_err(e)?;
    if !status.no_new_privs {
        return Err("landlock: no_new_privs not set".into());
    }
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok("full"),
        RulesetStatus::PartiallyEnforced => Ok("partial"),
        RulesetStatus::NotEnforced => Err("Landlock is not available in this kernel".into()),
    }
}

// --- seccomp: a small hand-written BPF deny-list -----------------------------

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// `clone` flags that create a namespace. `CLONE_NEWTIME` (0x80) is left out:
/// for `clone` that bit is part of the exit signal, and the kernel accepts it
/// only from `clone3` and `unshare`, both refused outright.
const CLONE_NEW_ANY: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// System calls refused with EPERM: kernel attack surface or escape tools
/// that sandboxed analysis code has no use for.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn denied_syscalls() -> Vec<libc::c_long> {
    vec![
        libc::SYS_io_uring_setup, libc::SYS_io_uring_enter, libc::SYS_io_uring_register,
        libc::SYS_ptrace, libc::SYS_process_vm_readv, libc::SYS_process_vm_writev,
        libc::SYS_bpf, libc::SYS_perf_event_open, libc::SYS_userfaultfd,
        libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key,
        libc::SYS_mount, libc::SYS_umount2, libc::SYS_pivot_root, libc::SYS_chroot,
        libc::SYS_move_mount, libc::SYS_open_tree, libc::SYS_fsopen, libc::SYS_fsmount, libc::SYS_fspick,
        libc::SYS_unshare, libc::SYS_setns,
        libc::SYS_kexec_load, libc::SYS_init_module, libc::SYS_finit_module, libc::SYS_delete_module,
        libc::SYS_reboot, libc::SYS_swapon, libc::SYS_swapoff, libc::SYS_acct,
        libc::SYS_open_by_handle_at, libc::SYS_name_to_handle_at,
    ]
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn seccomp() -> Result<(), String> {
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, 4), // seccomp_data.arch
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, 0), // seccomp_data.nr
    ];
    #[cfg(target_arch = "x86_64")]
    {
        // x32 system calls share the x86_64 audit arch: refuse them all.
        prog.push(jump(BPF_JMP_JGE_K, 0x4000_0000, 0, 1));
        prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    }
    // socket(domain, ...): only AF_UNIX.
    prog.push(jump(BPF_JMP_JEQ_K, libc::SYS_socket as u32, 0, 4));
    prog.push(stmt(BPF_LD_W_ABS, 16)); // low 32 bits of args[0] (little-endian)
    prog.push(jump(BPF_JMP_JEQ_K, libc::AF_UNIX as u32, 0, 1));
    prog.push(stmt(BPF_RET_K, RET_ALLOW));
    prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::EAFNOSUPPORT as u32));
    // clone(flags, ...): no namespace flags. The flags are an `unsigned long`
    // but the kernel reads only their low 32 bits, which are what is loaded.
    // Without this a program could start a child in a new user namespace
    // (nested in the sandbox's own) and be root there.
    prog.push(jump(BPF_JMP_JEQ_K, libc::SYS_clone as u32, 0, 4));
    prog.push(stmt(BPF_LD_W_ABS, 16)); // low 32 bits of args[0]
    prog.push(jump(BPF_JMP_JSET_K, CLONE_NEW_ANY, 0, 1));
    prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
    prog.push(stmt(BPF_RET_K, RET_ALLOW));
    // clone3 passes its flags in a struct in memory, which a seccomp filter
    // cannot read: answer ENOSYS, so libc (threads, fork, posix_spawn) falls
    // back to clone, whose flags are checked above.
    prog.push(jump(BPF_JMP_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
    for nr in denied_syscalls() {
        prog.push(jump(BPF_JMP_JEQ_K, nr as u32, 0, 1));
        prog.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));
    }
    prog.push(stmt(BPF_RET_K, RET_ALLOW));
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
    // SAFETY: prctl/seccomp with a valid program that outlives the call.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")?;
        let rc = libc::syscall(libc::SYS_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, &fprog as *const _);
        check(rc as libc::c_int, "seccomp(SET_MODE_FILTER)")
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn seccomp() -> Result<(), String> {
    Err("no seccomp filter for this CPU architecture".into())
}

// --- the spawning side ----------------------------------------------------------

fn read_paths(cfg: &CodeConfig) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache", "/etc/ld.so.conf",
        "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
        "/etc/alternatives",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Ok(rd) = std::fs::read_dir("/etc") {
        v.extend(rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("python3"))
        }));
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

pub(super) async fn probe(cfg: &CodeConfig) -> Result<SandboxReport, ToolError> {
    if !Path::new(&cfg.helper).is_file() {
        return Err(ToolError::SandboxUnavailable(format!("helper {} not found", cfg.helper.display())));
    }
    let args = CodeArgs { language: Language::Sh, code: "echo contained".into() };
    let (r, landlock) = run_inner(&args, cfg).await.map_err(|e| match e {
        ToolError::SandboxFailed(m) => ToolError::SandboxUnavailable(m),
        other => other,
    })?;
    if r.exit_code != Some(0) || r.stdout.text != "contained\n" {
        return Err(ToolError::SandboxUnavailable(format!(
            "probe program did not run (exit {:?}, stderr {:?})",
            r.exit_code, r.stderr.text
        )));
    }
    Ok(SandboxReport {
        mechanism: format!(
            "user+pid+net+mount+ipc+uts namespaces, landlock({landlock}), seccomp(no sockets but AF_UNIX, no new namespaces), rlimits, tmpfs /tmp"
        ),
    })
}

pub(super) async fn run(args: &CodeArgs, cfg: &CodeConfig) -> Result<CodeResult, ToolError> {
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
    cmd.args(&cfg.helper_args)
        .arg(&spec)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
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
