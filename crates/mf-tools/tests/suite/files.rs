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

/// 100,000 generated files in one folder: half binary (skipped, but opened
/// to find out), half text. Every listing and search comes back within its
/// deadline with a note naming the bound that stopped it.
#[test]
fn files_100k_entries_bounded_by_budget_and_deadline() {
    use mf_tools::files::Limit;
    use std::time::Instant;
    let ws = tempfile::tempdir().unwrap();
    let many = ws.path().join("many");
    std::fs::create_dir(&many).unwrap();
    let made = Instant::now();
    for i in 0..100_000 {
        let (name, body): (String, &[u8]) = if i % 2 == 0 { (format!("b{i:06}.bin"), b"\0binary") } else { (format!("t{i:06}.txt"), b"plain text\n") };
        std::fs::write(many.join(name), body).unwrap();
    }
    std::fs::write(many.join("t099999.txt"), "the needle\n").unwrap();
    eprintln!("made 100,000 files in {:?}", made.elapsed());
    let open = |f: &dyn Fn(&mut FileLimits)| {
        let mut l = FileLimits::default();
        f(&mut l);
        Workspace::open(&[ws.path().to_path_buf()], l).unwrap()
    };
    let search =
        |w: &Workspace| files::search(w, &SearchArgs { pattern: "needle".into(), regex: false, ignore_case: false, path: "many".into(), root: None }).unwrap();
    let timed = |what: &str, deadline: Duration, f: &dyn Fn() -> (Option<Limit>, Option<String>)| {
        let t = Instant::now();
        let (stopped, note) = f();
        let took = t.elapsed();
        eprintln!("{what}: {took:?}, stopped by {stopped:?}: {}", note.as_deref().unwrap_or("-"));
        assert!(took < deadline + Duration::from_millis(500), "{what} took {took:?}, deadline {deadline:?}");
        (stopped, note)
    };
    let deadline = FileLimits::default().deadline;

    // Listing: one page, read no further.
    let w = open(&|_| {});
    let (stopped, note) = timed("list", deadline, &|| {
        let l = files::list(&w, &ListArgs { path: "many".into(), root: None }).unwrap();
        assert_eq!(l.entries.len(), 500);
        assert!(l.truncated);
        (l.stopped_by, l.note)
    });
    assert_eq!(stopped, Some(Limit::Entries));
    assert!(note.unwrap().contains("500-entry page"));

    // Default search: binary files are opened to be skipped, and count: the
    // 5000-file bound stops it long before the folder's end.
    let (stopped, _) = timed("search (defaults)", deadline, &|| {
        let s = search(&w);
        assert_eq!(s.files_skipped + s.files_searched, 5000, "{s:?}");
        assert!(s.matches.is_empty());
        (s.stopped_by, s.note)
    });
    assert_eq!(stopped, Some(Limit::Files));

    // Every file skipped without being opened (all too large): the entry
    // budget still stops the walk.
    let w = open(&|l| l.max_search_file_bytes = 1);
    let (stopped, note) = timed("search (all skipped)", deadline, &|| {
        let s = search(&w);
        assert_eq!((s.files_searched, s.files_skipped, s.entries_visited), (0, 20_000, 20_000), "{s:?}");
        (s.stopped_by, s.note)
    });
    assert_eq!(stopped, Some(Limit::Visited));
    assert!(note.unwrap().contains("20000 entries"));

    // No count bounds, a short deadline: the deadline stops it, with what it found.
    let short = Duration::from_millis(300);
    let w = open(&|l| {
        l.max_visited = usize::MAX;
        l.max_files = usize::MAX;
        l.deadline = short;
    });
    let (stopped, note) = timed("search (deadline)", short, &|| {
        let s = search(&w);
        assert!(s.entries_visited < 100_001, "{s:?}");
        (s.stopped_by, s.note)
    });
    assert_eq!(stopped, Some(Limit::Deadline));
    assert!(note.unwrap().contains("300 ms time limit"));
    let w0 = open(&|l| l.deadline = Duration::ZERO);
    let l = files::list(&w0, &ListArgs { path: "many".into(), root: None }).unwrap();
    assert_eq!((l.entries.len(), l.stopped_by), (0, Some(Limit::Deadline)));

    // With room for all of it, the search does finish, and counts every file.
    let long = Duration::from_secs(120);
    let w = open(&|l| {
        l.max_visited = 200_000;
        l.max_files = 200_000;
        l.deadline = long;
    });
    let (stopped, _) = timed("search (complete)", long, &|| {
        let s = search(&w);
        assert_eq!((s.files_searched, s.files_skipped, s.entries_visited), (50_000, 50_000, 100_000), "{s:?}");
        assert_eq!(s.matches.len(), 1);
        assert_eq!(s.matches[0].path, "many/t099999.txt");
        (s.stopped_by, s.note)
    });
    assert_eq!(stopped, None);

    // Through the registry the walk runs on the blocking pool: a
    // single-threaded runtime keeps ticking while a search runs to its deadline.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let limits = FileLimits { max_visited: usize::MAX, max_files: usize::MAX, deadline: Duration::from_millis(1500), ..FileLimits::default() };
        let reg = mf_tools::ToolRegistry::new(mf_tools::ToolSettings { workspace: vec![ws.path().to_path_buf()], file_limits: limits, ..Default::default() })
            .await
            .unwrap();
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let t2 = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                t2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let t = Instant::now();
        let out = reg.run("c1", mf_tools::SEARCH_FILES, r#"{"pattern":"needle","path":"many"}"#, None).await.unwrap();
        let took = t.elapsed();
        ticker.abort();
        let n = ticks.load(std::sync::atomic::Ordering::Relaxed) as u128;
        let mf_tools::ToolOutput::Search(s) = &out else { panic!("{out:?}") };
        assert!(s.files_searched + s.files_skipped > 1000, "{s:?}");
        if s.stopped_by == Some(Limit::Deadline) {
            assert!(out.truncation_note().unwrap().contains("1500 ms time limit"));
        }
        // Had the walk run on the runtime's only thread, no tick could happen until it ended.
        assert!(took > Duration::from_millis(200), "too quick to tell: {took:?}");
        assert!(n * 2 * 50 >= took.as_millis() - 100, "the runtime was blocked: {n} ticks of 50 ms in {took:?}");
    });
}

/// Swaps two names in one step (`renameat2` with `RENAME_EXCHANGE`), so the
/// path always exists: one moment a directory, the next a symlink.
fn exchange(a: &Path, b: &Path) {
    let a = std::ffi::CString::new(a.to_str().unwrap()).unwrap();
    let b = std::ffi::CString::new(b.to_str().unwrap()).unwrap();
    // SAFETY: valid C strings naming entries of our own temp folder.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
}

/// The deny-list check and the open are one step: a thread swaps `pub`
/// between a real folder and a symlink to the denied `.ssh` (both inside the
/// workspace, so the root's own confinement does not stop it) while the
/// tools read, list and search through `pub` thousands of times. Checking
/// the path first and opening it after would, between the two, follow the
/// fresh symlink into `.ssh`; no call may ever return what is in there.
#[test]
fn files_a_folder_swapped_for_a_symlink_to_a_denied_folder_never_leaks() {
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    write(&p.join("pub/notes.txt"), "public notes");
    write(&p.join(".ssh/notes.txt"), "SSH-SWAP-SECRET");
    write(&p.join(".ssh/only-in-ssh.txt"), "SSH-SWAP-SECRET too");
    std::os::unix::fs::symlink(".ssh", p.join("pub.link")).unwrap();
    let w = Workspace::open(&[p.to_path_buf()], FileLimits::default()).unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (a, b) = (p.join("pub"), p.join("pub.link"));
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                exchange(&a, &b);
                swaps += 1;
            }
            swaps
        })
    };
    let (mut ok, mut refused) = (0u32, 0u32);
    let mut leaks = Vec::new();
    let started = std::time::Instant::now();
    for i in 0..20_000u32 {
        let text = match i % 3 {
            0 => read(&w, "pub/notes.txt").map(|pg| format!("{} {}", pg.path, pg.content)),
            1 => files::list(&w, &ListArgs { path: "pub".into(), root: None }).map(|l| format!("{:?}", l.entries)),
            _ => files::search(&w, &SearchArgs { pattern: "SECRET".into(), regex: false, ignore_case: false, path: "pub".into(), root: None })
                .map(|s| format!("{:?}", s.matches)),
        };
        match text {
            Ok(t) if t.contains("SECRET") || t.contains("only-in-ssh") => leaks.push(t),
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(!e.to_string().contains("SECRET"), "{e}");
                refused += 1;
            }
        }
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("{ok} calls answered, {refused} refused, {swaps} swaps, {} leaks", leaks.len());
    assert!(leaks.is_empty(), "{} of the calls returned the denied folder, e.g. {}", leaks.len(), leaks[0]);
    assert!(ok > 100, "the race left no call to succeed ({ok} ok, {refused} refused): the test proves nothing");
    assert!(swaps > 1000, "too few swaps ({swaps}) to race");
}
