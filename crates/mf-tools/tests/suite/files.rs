//! File-tool attacks: each asserts the typed refusal and that no secret
//! reached the result or the error text.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use mf_tools::ToolError;
use mf_tools::files::{self, FileLimits, ListArgs, ReadArgs, SearchArgs, Workspace};

struct Fixture {
    outside: tempfile::TempDir,
    _ws: tempfile::TempDir,
    w: Workspace,
}

fn write(p: &Path, text: &str) {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, text).unwrap();
}

fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: valid C string; creating a node in our own temp folder.
    assert_eq!(unsafe { libc::mknod(c.as_ptr(), mode, dev) }, 0, "mknod {}: {}", p.display(), std::io::Error::last_os_error());
}

/// A workspace full of traps. Every secret contains "SECRET".
fn fixture() -> Fixture {
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("secret"), "OUTSIDE-SECRET");
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    write(&p.join("ok.txt"), "hello");
    write(&p.join("sub/notes.md"), "notes");
    write(&p.join(".env"), "ENV-SECRET");
    write(&p.join("config/.env.production"), "ENV-PROD-SECRET");
    write(&p.join(".git/config"), "[remote] url = https://user:GIT-SECRET@example.com");
    write(&p.join("sub/.git/HEAD"), "GIT-SECRET-HEAD");
    write(&p.join("id_rsa"), "-----BEGIN KEY----- KEY-SECRET");
    write(&p.join(".ssh/id_ed25519"), "SSH-KEY-SECRET");
    write(&p.join("certs/server.pem"), "PEM-SECRET");
    write(&p.join("tls.key"), "TLS-SECRET");
    write(&p.join(".netrc"), "machine x password NETRC-SECRET");
    std::os::unix::fs::symlink(outside.path().join("secret"), p.join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.join("dirlink")).unwrap();
    std::os::unix::fs::symlink("/etc", p.join("etc")).unwrap();
    std::os::unix::fs::symlink(".env", p.join("innocent.txt")).unwrap();
    std::os::unix::fs::symlink(".git/config", p.join("gitcfg.txt")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", p.join("zero")).unwrap();
    // A real /dev/zero inside the workspace (char device 1:5), and a FIFO
    // that would block a reader for ever.
    mknod(&p.join("devzero"), libc::S_IFCHR | 0o666, libc::makedev(1, 5));
    mknod(&p.join("fifo"), libc::S_IFIFO | 0o644, 0);
    let f = std::fs::File::create(p.join("huge.bin")).unwrap();
    f.set_len(10 << 30).unwrap();
    let w = Workspace::open(&[p.to_path_buf()], FileLimits::default()).unwrap();
    Fixture { outside, _ws: ws, w }
}

fn read(w: &Workspace, path: &str) -> Result<files::FilePage, ToolError> {
    files::read(w, &ReadArgs { path: path.into(), offset: 0, max_bytes: None, root: None })
}

/// Run `f` on a thread and fail (instead of hanging) if it blocks.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("the file tool blocked")
}

#[test]
fn files_reads_refused_with_the_right_reason() {
    within(30, || {
        let fx = fixture();
        let w = &fx.w;
        assert_eq!(read(w, "ok.txt").unwrap().content, "hello");
        assert_eq!(read(w, "sub/notes.md").unwrap().content, "notes");
        let outside_rel = format!("../{}/secret", fx.outside.path().file_name().unwrap().to_str().unwrap());
        let cases = [
            (outside_rel.as_str(), "path_traversal"),
            ("sub/../../x", "path_traversal"),
            ("/etc/passwd", "absolute_path"),
            ("~/.ssh/id_rsa", "absolute_path"),
            ("escape", "path_escapes"),
            ("dirlink/secret", "path_escapes"),
            ("etc/passwd", "path_escapes"),
            (".env", "path_denied"),
            ("config/.env.production", "path_denied"),
            ("innocent.txt", "path_denied"),
            (".git/config", "path_denied"),
            ("sub/.git/HEAD", "path_denied"),
            ("gitcfg.txt", "path_denied"),
            ("id_rsa", "path_denied"),
            (".ssh/id_ed25519", "path_denied"),
            ("certs/server.pem", "path_denied"),
            ("tls.key", "path_denied"),
            (".netrc", "path_denied"),
            ("zero", "path_escapes"),
            ("devzero", "not_regular_file"),
            ("fifo", "not_regular_file"),
        ];
        for (path, want) in cases {
            let e = read(w, path).unwrap_err();
            assert_eq!(e.code(), want, "{path}: {e}");
            assert!(e.is_refusal(), "{path}");
            assert!(!format!("{e} {e:?}").contains("SECRET"), "{path}: {e}");
        }
    });
}

#[test]
fn files_huge_file_is_paged_under_the_cap() {
    let fx = fixture();
    let page = read(&fx.w, "huge.bin").unwrap();
    assert_eq!(page.size, 10 << 30);
    assert_eq!(page.bytes, 64 << 10);
    assert_eq!(page.next_offset, Some(64 << 10));
    // Asking for everything still gets at most the hard cap.
    let page = files::read(&fx.w, &ReadArgs { path: "huge.bin".into(), offset: 0, max_bytes: Some(u64::MAX), root: None }).unwrap();
    assert_eq!(page.bytes, 256 << 10);
    let last = files::read(&fx.w, &ReadArgs { path: "huge.bin".into(), offset: (10 << 30) - 10, max_bytes: None, root: None }).unwrap();
    assert_eq!((last.bytes, last.next_offset), (10, None));
}

#[test]
fn files_listing_and_search_leak_nothing() {
    within(60, || {
        let fx = fixture();
        let w = &fx.w;
        let l = files::list(w, &ListArgs { path: ".".into(), root: None }).unwrap();
        let names: Vec<&str> = l.entries.iter().map(|e| e.name.as_str()).collect();
        for hidden in [".env", ".git", "id_rsa", ".ssh", "tls.key", ".netrc"] {
            assert!(!names.contains(&hidden), "{hidden} listed: {names:?}");
        }
        assert_eq!(l.hidden, 6, "{names:?}");
        assert!(names.contains(&"ok.txt"));
        for (path, want) in [("dirlink", "path_escapes"), (".git", "path_denied"), ("../", "path_traversal"), ("/", "absolute_path")] {
            let e = files::list(w, &ListArgs { path: path.into(), root: None }).unwrap_err();
            assert_eq!(e.code(), want, "{path}: {e}");
        }
        let search = |pattern: &str, path: &str| {
            files::search(w, &SearchArgs { pattern: pattern.into(), regex: false, ignore_case: true, path: path.into(), root: None })
        };
        // Every secret contains "secret": none may be found, and the search
        // neither follows symlinks out nor blocks on the FIFO.
        let s = search("secret", ".").unwrap();
        assert!(s.matches.is_empty(), "{s:?}");
        assert!(s.files_searched >= 2, "{s:?}");
        assert_eq!(search("hello", ".").unwrap().matches.len(), 1);
        assert_eq!(search("x", "dirlink").unwrap_err().code(), "path_escapes");
        assert_eq!(search("x", ".git").unwrap_err().code(), "path_denied");
    });
}

#[test]
fn files_without_workspace_refuse() {
    let w = Workspace::open(&[], FileLimits::default()).unwrap();
    assert_eq!(read(&w, "ok.txt").unwrap_err().code(), "no_workspace");
}
