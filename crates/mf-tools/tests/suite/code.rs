//! `run_code` attacks: each asserts the containment held and nothing leaked.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mf_tools::ToolError;
use mf_tools::code::{self, CodeArgs, CodeConfig, Language};

use super::support::{cfg, procs_with, run};

#[tokio::test]
async fn code_runs_and_drops_root() {
    let r = run(Language::Python, "import os; print('hi', os.getuid())", &cfg()).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.text.starts_with("hi "), "{r:?}");
    assert!(!r.stdout.text.contains("hi 0\n"));
}

#[tokio::test]
async fn code_infinite_loop_times_out_and_group_is_gone() {
    let started = std::time::Instant::now();
    let r = run(Language::Sh, "while :; do :; done", &cfg()).await;
    assert!(r.timed_out, "{r:?}");
    assert_eq!(r.signal, Some(9));
    assert!(r.note.as_deref().unwrap_or("").contains("time limit"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(procs_with(&r.run_id), 0);
}

#[tokio::test]
async fn code_fork_bomb_leaves_no_survivors() {
    let r = run(Language::Sh, "f() { f | f & }; f; sleep 2", &cfg()).await;
    // The bomb really went off and hit the process limit...
    assert!(r.stderr.text.to_lowercase().contains("fork"), "{r:?}");
    // ...and once the run is over not one of its processes is left.
    assert_eq!(procs_with(&r.run_id), 0, "{r:?}");
}

#[tokio::test]
async fn code_background_process_is_killed() {
    let marker = format!("mfbg{}", std::process::id());
    let src = format!("sh -c 'sleep 300; true' {marker} & echo started");
    let r = run(Language::Sh, &src, &cfg()).await;
    assert_eq!(r.stdout.text, "started\n");
    assert_eq!(procs_with(&marker), 0);
}

#[tokio::test]
async fn code_4gib_allocation_refused() {
    let r = run(Language::Python, "b = bytearray(4 * 1024**3)\nprint('allocated')", &cfg()).await;
    assert!(r.stderr.text.contains("MemoryError"), "{r:?}");
    assert!(!r.stdout.text.contains("allocated"));
}

#[tokio::test]
async fn code_10gb_write_stopped_by_file_size_limit() {
    let mut c = cfg();
    c.limits.file_size_bytes = 1 << 20;
    let name = format!("big-{}", std::process::id());
    let src = format!("dd if=/dev/zero of=/tmp/{name} bs=1M count=10240 2>/dev/null; stat -c %s /tmp/{name}");
    let r = run(Language::Sh, &src, &c).await;
    let size: u64 = r.stdout.text.trim().parse().unwrap_or(u64::MAX);
    assert!(size <= 1 << 20, "{r:?}");
    assert!(!Path::new(&format!("/tmp/{name}")).exists(), "the write reached the host /tmp");
}

#[tokio::test]
async fn code_50mb_stdout_truncated_head_tail() {
    let r = run(Language::Python, "import sys\nsys.stdout.write('HEAD' + 'x'*50_000_000 + 'TAIL')", &cfg()).await;
    assert!(r.stdout.truncated);
    assert_eq!(r.stdout.total_bytes, 50_000_008);
    assert!(r.stdout.text.starts_with("HEAD") && r.stdout.text.ends_with("TAIL"));
    assert!(r.stdout.text.contains("bytes omitted"));
    assert!(r.stdout.text.len() < 40_000);
    assert!(r.note.unwrap().contains("stdout was 50000008 bytes"));
}

#[tokio::test]
async fn code_network_tcp_udp_dns_blocked() {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp6 = TcpListener::bind("[::1]:0").ok();
    if let Some(t) = &tcp6 {
        t.set_nonblocking(true).unwrap();
    }
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let src = r#"import socket
def tcp(): socket.create_connection(('127.0.0.1', TP), timeout=1)
def tcp6(): socket.create_connection(('::1', T6), timeout=1)
def udp(): socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', UP))
def dns(): socket.getaddrinfo('example.com', 80)
def raw(): socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
def netlink(): socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
for f in (tcp, tcp6, udp, dns, raw, netlink):
    try:
        f(); print(f.__name__, 'CONNECTED')
    except Exception as e:
        print(f.__name__, 'blocked', type(e).__name__)
a, b = socket.socketpair(); a.send(b'u'); print('unix', b.recv(1))
"#
    .replace("TP", &tcp.local_addr().unwrap().port().to_string())
    .replace("T6", &tcp6.as_ref().map_or(1, |t| t.local_addr().unwrap().port()).to_string())
    .replace("UP", &udp.local_addr().unwrap().port().to_string());
    let r = run(Language::Python, &src, &cfg()).await;
    assert!(!r.stdout.text.contains("CONNECTED"), "{r:?}");
    assert_eq!(r.stdout.text.matches("blocked").count(), 6, "{r:?}");
    // AF_UNIX pairs still work (Python's subprocess and multiprocessing need them).
    assert!(r.stdout.text.contains("unix b'u'"), "{r:?}");
    assert!(tcp.accept().is_err());
    if let Some(t) = &tcp6 {
        assert!(t.accept().is_err());
    }
    assert!(udp.recv(&mut [0u8; 8]).is_err());
}

/// A folder every user can traverse, so only the sandbox (not file
/// permissions) stands between the program and what is put there.
fn world_traversable_dir() -> tempfile::TempDir {
    let candidates = [PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::env::temp_dir()];
    let ok = |p: &Path| p.ancestors().all(|a| std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    let base = candidates.iter().find(|p| ok(p)).expect("no world-traversable folder");
    let d = tempfile::Builder::new().prefix(".mf-attack-").tempdir_in(base).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

#[tokio::test]
async fn code_cannot_reach_host_unix_sockets() {
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let d = world_traversable_dir();
    let (sp, dp) = (d.path().join("s.sock"), d.path().join("d.sock"));
    let stream = UnixListener::bind(&sp).unwrap();
    stream.set_nonblocking(true).unwrap();
    let dgram = UnixDatagram::bind(&dp).unwrap();
    dgram.set_nonblocking(true).unwrap();
    for p in [&sp, &dp] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let abs_name = format!("mf-attack-{}", std::process::id());
    let abs = {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(abs_name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&a).unwrap();
        l.set_nonblocking(true).unwrap();
        l
    };
    let src = r#"import socket
def stream():
    s = socket.socket(socket.AF_UNIX); s.connect('SP'); s.send(b'LEAK')
def dgram(): socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'LEAK', 'DP')
def pair_dgram(): socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0].sendto(b'LEAK', 'DP')
def abstract():
    s = socket.socket(socket.AF_UNIX); s.connect('\0AB'); s.send(b'LEAK')
for f in (stream, dgram, pair_dgram, abstract):
    try:
        f(); print(f.__name__, 'CONNECTED')
    except Exception as e:
        print(f.__name__, 'blocked', type(e).__name__)
"#
    .replace("SP", sp.to_str().unwrap())
    .replace("DP", dp.to_str().unwrap())
    .replace("AB", &abs_name);
    let r = run(Language::Python, &src, &cfg()).await;
    assert!(!r.stdout.text.contains("CONNECTED"), "{r:?}");
    assert_eq!(r.stdout.text.matches("blocked").count(), 4, "{r:?}");
    assert!(stream.accept().is_err(), "a host UNIX socket was reached");
    assert!(abs.accept().is_err(), "a host abstract socket was reached");
    assert!(dgram.recv(&mut [0u8; 16]).is_err(), "a host datagram socket was reached");
}

#[tokio::test]
async fn code_host_files_invisible_and_unwritable() {
    let d = world_traversable_dir();
    std::fs::write(d.path().join("notes.txt"), "HOST-FILE-CONTENT").unwrap();
    std::fs::set_permissions(d.path().join("notes.txt"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let src = format!(
        "cat {dir}/notes.txt; echo pwned > {dir}/notes.txt; touch {dir}/new; cat {manifest}; ls /root /home /proc /sys /run; \
         touch /usr/evil /evil /etc/evil; echo end",
        dir = d.path().display(),
        manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
    );
    let r = run(Language::Sh, &src, &cfg()).await;
    assert!(r.stdout.text.ends_with("end\n"), "{r:?}");
    assert!(!r.stdout.text.contains("HOST-FILE-CONTENT") && !r.stdout.text.contains("[package]"), "{r:?}");
    assert_eq!(std::fs::read_to_string(d.path().join("notes.txt")).unwrap(), "HOST-FILE-CONTENT");
    assert!(!d.path().join("new").exists());
    for p in ["/usr/evil", "/evil", "/etc/evil"] {
        assert!(!Path::new(p).exists(), "{p} was written on the host");
    }
}

#[tokio::test]
async fn code_cannot_read_ssh_keys_or_env_secrets() {
    let home = world_traversable_dir();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "SECRET-KEY-MATERIAL").unwrap();
    std::fs::set_permissions(home.path().join(".ssh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(home.path().join(".ssh/id_rsa"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // SAFETY: test-only; set before the sandbox is spawned, read by no other test.
    unsafe { std::env::set_var("MF_TEST_SECRET", "hunter2-secret") };
    let src = format!(
        "cat {h}/.ssh/id_rsa; cat ~/.ssh/id_rsa; cat /root/.ssh/*; env; cat /proc/1/environ; cat /proc/{pid}/environ; \
         cat /proc/self/environ; tr '\\0' '\\n' < /proc/$PPID/environ",
        h = home.path().display(),
        pid = std::process::id()
    );
    let r = run(Language::Sh, &src, &cfg()).await;
    let all = format!("{}{}", r.stdout.text, r.stderr.text);
    assert!(!all.contains("SECRET-KEY-MATERIAL"), "{all}");
    assert!(!all.contains("hunter2-secret"), "{all}");
    assert!(!all.contains("CARGO"), "the test's own environment leaked: {all}");
    assert!(r.stdout.text.contains("HOME=/tmp"), "{all}");
}

/// A helper that runs the real one with one layer made impossible.
fn crippled_helper(dir: &Path, name: &str, wrapper: &str) -> CodeConfig {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\nexec {wrapper} {} \"$@\"\n", env!("CARGO_BIN_EXE_mf-sandbox"))).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = CodeConfig::new(path);
    c.limits.timeout = Duration::from_secs(5);
    c
}

#[tokio::test]
async fn code_refuses_when_containment_unavailable() {
    assert!(matches!(code::probe(&CodeConfig::new("/nonexistent/mf-sandbox")).await, Err(ToolError::SandboxUnavailable(_))));
    // A "helper" that runs nothing and reports nothing.
    let mut c = CodeConfig::new("/bin/true");
    c.limits.timeout = Duration::from_secs(3);
    let e = code::probe(&c).await.unwrap_err();
    assert_eq!(e.code(), "sandbox_unavailable", "{e:?}");

    // Layers made to fail for real: no process may be created once root is
    // dropped (no pid-1 child, so no pid namespace), and a user namespace in
    // which `nobody` does not exist (the root drop fails).
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let src = format!("touch {m}; echo RAN", m = marker.display());
    for c in [crippled_helper(dir.path(), "no-fork", "prlimit --nproc=0"), crippled_helper(dir.path(), "foreign-userns", "unshare --user --map-root-user")] {
        let e = code::probe(&c).await.unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable", "{}: {e:?}", c.helper.display());
        let e = code::run(&CodeArgs { language: Language::Sh, code: src.clone() }, &c).await.unwrap_err();
        assert_eq!(e.code(), "sandbox_unavailable", "{}: {e:?}", c.helper.display());
        assert!(e.is_refusal());
        assert!(!marker.exists(), "the program ran uncontained");
    }
}

#[tokio::test]
async fn code_extra_read_paths_are_bound_read_only() {
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    // Not in the default read paths: invisible.
    let r = run(Language::Sh, "cat /etc/hostname /etc/os-release", &cfg()).await;
    assert!(!r.stdout.text.contains("ID="), "{r:?}");
    // Listed (a plain file, and a symlink into /usr): readable, still not writable.
    let mut c = cfg();
    c.extra_read_paths = vec!["/etc/hostname".into(), "/etc/os-release".into()];
    let r = run(Language::Sh, "cat /etc/hostname; grep -c '^ID=' /etc/os-release; echo x > /etc/hostname; echo end", &c).await;
    assert!(r.stdout.text.starts_with(&format!("{hostname}1\n")), "{r:?}");
    assert!(r.stdout.text.ends_with("end\n"), "{r:?}");
    assert_eq!(std::fs::read_to_string("/etc/hostname").unwrap(), hostname);
    // Under /tmp (the sandbox's own scratch) it cannot be shown: a clear refusal.
    c.extra_read_paths = vec!["/tmp/venv".into()];
    let e = code::probe(&c).await.unwrap_err();
    assert_eq!(e.code(), "sandbox_unavailable");
    assert!(e.to_string().contains("outside /tmp"), "{e}");
}

#[tokio::test]
async fn code_too_large_refused_before_start() {
    let mut c = cfg();
    c.limits.max_code_bytes = 16;
    let e = code::run(&CodeArgs { language: Language::Sh, code: "echo 0123456789abcdef".into() }, &c).await.unwrap_err();
    assert_eq!(e.code(), "code_too_large");
}

#[test]
fn procs_with_finds_a_live_process() {
    // The survivor checks above are only as good as this counter.
    let marker = format!("mfcount{}", std::process::id());
    let mut child = std::process::Command::new("sh").args(["-c", "sleep 30; true", &marker]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(procs_with(&marker), 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(procs_with(&marker), 0);
}

/// The namespace attack: a raw `clone` and a `clone3` asking for a new user +
/// UTS namespace, whose child then tries `sethostname` (it succeeds only as
/// root of a new UTS namespace), plus `unshare` and `setns`. Prints one line
/// per attempt.
fn namespace_attack() -> String {
    r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NEWUSER, NEWUTS, SIGCHLD = 0x10000000, 0x04000000, 17
def child_or_report(pid, name):
    if pid == 0:
        os._exit(0 if libc.sethostname(b'pwned', 5) == 0 else 3)
    if pid < 0:
        print(name, 'refused errno', ctypes.get_errno())
        return
    _, st = os.waitpid(pid, 0)
    print(name, 'NAMESPACE sethostname', 'ok' if os.waitstatus_to_exitcode(st) == 0 else 'failed')
ctypes.set_errno(0)
child_or_report(libc.syscall(ctypes.c_long(SYS_CLONE), ctypes.c_long(NEWUSER | NEWUTS | SIGCHLD), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0)), 'clone')
args = (ctypes.c_uint64 * 8)(NEWUSER | NEWUTS, 0, 0, 0, SIGCHLD, 0, 0, 0)
ctypes.set_errno(0)
child_or_report(libc.syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_long(64)), 'clone3')
if ONLY_CLONE == 0:
    ctypes.set_errno(0)
    print('unshare', libc.unshare(NEWUSER), 'errno', ctypes.get_errno())
    ctypes.set_errno(0)
    print('setns', libc.setns(-1, 0), 'errno', ctypes.get_errno())
"#
    .replace("SYS_CLONE3", &libc::SYS_clone3.to_string())
    .replace("SYS_CLONE", &libc::SYS_clone.to_string())
}

/// Can an unprivileged process on this host create a user + UTS namespace?
/// The attack's clone part is run uncontained as `nobody` (dropped to it
/// when the tests run as root); `Err` says why not.
fn host_allows_unprivileged_userns() -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let src = namespace_attack().replace("ONLY_CLONE", "1");
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.arg("-c").arg(&src).current_dir("/");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534); // std drops the supplementary groups too
    }
    let out = cmd.output().map_err(|e| format!("python3 could not be started: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if text.contains("clone NAMESPACE sethostname ok") {
        Ok(())
    } else {
        Err(format!("an unprivileged process here cannot create a user namespace ({}{})", text.trim(), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

#[tokio::test]
async fn code_cannot_create_namespaces() {
    // The control: the same program, uncontained and unprivileged, does get
    // its namespaces here; otherwise the refusal below would prove nothing.
    if let Err(why) = host_allows_unprivileged_userns() {
        eprintln!("code_cannot_create_namespaces: SKIPPED: {why}");
        return;
    }
    let r = run(Language::Python, &namespace_attack().replace("ONLY_CLONE", "0"), &cfg()).await;
    let out = &r.stdout.text;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(!out.contains("NAMESPACE"), "a namespace was created inside the sandbox: {r:?}");
    assert!(out.contains(&format!("clone refused errno {}", libc::EPERM)), "{r:?}");
    assert!(out.contains(&format!("clone3 refused errno {}", libc::ENOSYS)), "{r:?}");
    assert!(out.contains(&format!("unshare -1 errno {}", libc::EPERM)), "{r:?}");
    // Without the filter setns(-1) fails with EBADF; EPERM means it was refused first.
    assert!(out.contains(&format!("setns -1 errno {}", libc::EPERM)), "{r:?}");
}

#[tokio::test]
async fn code_threads_fork_and_subprocess_still_work() {
    // glibc starts threads and posix_spawn children with clone3 first; with
    // clone3 answering ENOSYS they must fall back to clone and work.
    let src = r#"import os, subprocess, threading
got = []
ts = [threading.Thread(target=got.append, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print('threads', sorted(got))
print('subprocess', subprocess.run(['/bin/sh', '-c', 'echo from-child'], capture_output=True, text=True).stdout.strip())
pid = os.fork()
if pid == 0:
    os._exit(7)
print('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"#;
    let r = run(Language::Python, src, &cfg()).await;
    assert_eq!(r.stdout.text, "threads [0, 1, 2, 3]\nsubprocess from-child\nfork 7\n", "{r:?}");
    // And a shell pipeline with a background job (fork + exec under sh).
    let r = run(Language::Sh, "(echo a; echo b) | wc -l & wait", &cfg()).await;
    assert_eq!(r.stdout.text.trim(), "2", "{r:?}");
}
