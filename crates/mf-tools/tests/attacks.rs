//! Containment attacks, for real: each asserts the refusal and that nothing leaked.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use mf_tools::code::{self, CodeArgs, CodeConfig, Language};
use mf_tools::files::{self, FileLimits, ReadArgs, Workspace};
use mf_tools::http::{self, HttpArgs, HttpMethod, HttpPolicy};
use mf_tools::ToolError;

fn cfg() -> CodeConfig {
    let mut c = CodeConfig::new(env!("CARGO_BIN_EXE_mf-sandbox"));
    c.limits.timeout = std::time::Duration::from_secs(3);
    c
}

async fn run(lang: Language, src: &str, c: &CodeConfig) -> code::CodeResult {
    code::probe(c).await.expect("sandbox must be available here");
    code::run(&CodeArgs { language: lang, code: src.into() }, c).await.unwrap()
}

fn procs_with(marker: &str) -> usize {
    std::fs::read_dir("/proc").unwrap().filter_map(Result::ok)
        .filter(|e| std::fs::read(e.path().join("cmdline")).map(|c| String::from_utf8_lossy(&c).contains(marker)).unwrap_or(false))
        .count()
}

#[tokio::test]
async fn code_runs_and_drops_root() {
    let r = run(Language::Python, "import os; print('hi', os.getuid())", &cfg()).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.text.starts_with("hi "), "{r:?}");
    assert!(!r.stdout.text.contains("hi 0\n"));
}

#[tokio::test]
async fn code_infinite_loop_times_out_and_group_is_gone() {
    let r = run(Language::Sh, "while :; do :; done", &cfg()).await;
    assert!(r.timed_out);
    assert_eq!(procs_with(&r.run_id), 0);
}

#[tokio::test]
async fn code_fork_bomb_leaves_no_survivors() {
    let r = run(Language::Sh, "f() { f | f & }; f; sleep 2", &cfg()).await;
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
    assert!(!std::path::Path::new(&format!("/tmp/{name}")).exists(), "the write reached the host /tmp");
}

#[tokio::test]
async fn code_50mb_stdout_truncated_head_tail() {
    let r = run(Language::Python, "import sys\nsys.stdout.write('HEAD' + 'x'*50_000_000 + 'TAIL')", &cfg()).await;
    assert!(r.stdout.truncated);
    assert_eq!(r.stdout.total_bytes, 50_000_008);
    assert!(r.stdout.text.starts_with("HEAD") && r.stdout.text.ends_with("TAIL"));
    assert!(r.stdout.text.len() < 40_000);
    assert!(r.note.unwrap().contains("stdout was 50000008 bytes"));
}

#[tokio::test]
async fn code_network_tcp_udp_dns_blocked() {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let src = r#"import socket
def tcp(): socket.create_connection(('127.0.0.1', TP), timeout=1)
def udp(): socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', UP))
def dns(): socket.getaddrinfo('example.com', 80)
for f in (tcp, udp, dns):
    try:
        f(); print(f.__name__, 'CONNECTED')
    except Exception as e:
        print(f.__name__, 'blocked', type(e).__name__)
a, b = socket.socketpair(); a.send(b'u'); print('unix', b.recv(1))
"#
    .replace("TP", &tcp.local_addr().unwrap().port().to_string())
    .replace("UP", &udp.local_addr().unwrap().port().to_string());
    let r = run(Language::Python, &src, &cfg()).await;
    assert!(!r.stdout.text.contains("CONNECTED"), "{r:?}");
    assert_eq!(r.stdout.text.matches("blocked").count(), 3, "{r:?}");
    assert!(r.stdout.text.contains("unix b'u'"), "{r:?}");
    assert!(tcp.accept().is_err());
    assert!(udp.recv(&mut [0u8; 8]).is_err());
}

#[tokio::test]
async fn code_cannot_read_ssh_keys_or_env_secrets() {
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "SECRET-KEY-MATERIAL").unwrap();
    // SAFETY: test-only; no other thread of this test reads this variable.
    unsafe { std::env::set_var("MF_TEST_SECRET", "hunter2-secret") };
    let src = format!("cat {}/.ssh/id_rsa; cat ~/.ssh/id_rsa; cat /root/.ssh/* ; env; cat /proc/1/environ", home.path().display());
    let r = run(Language::Sh, &src, &cfg()).await;
    let all = format!("{}{}", r.stdout.text, r.stderr.text);
    assert!(!all.contains("SECRET-KEY-MATERIAL"), "{all}");
    assert!(!all.contains("hunter2-secret"), "{all}");
    assert!(r.stdout.text.contains("HOME=/tmp"));
}

#[tokio::test]
async fn code_refuses_when_containment_unavailable() {
    let c = CodeConfig::new("/nonexistent/mf-sandbox");
    assert!(matches!(code::probe(&c).await, Err(ToolError::SandboxUnavailable(_))));
    let mut c = CodeConfig::new("/bin/true");
    c.limits.timeout = std::time::Duration::from_secs(3);
    let e = code::probe(&c).await.unwrap_err();
    assert!(e.is_refusal(), "{e:?}");
}

// ---- files -------------------------------------------------------------------

fn workspace() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "OUTSIDE-SECRET").unwrap();
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    std::fs::write(p.join("ok.txt"), "hello").unwrap();
    std::fs::write(p.join(".env"), "ENV-SECRET").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), p.join("escape")).unwrap();
    std::os::unix::fs::symlink(".env", p.join("innocent.txt")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", p.join("zero")).unwrap();
    let fifo = std::ffi::CString::new(p.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let f = std::fs::File::create(p.join("huge.bin")).unwrap();
    f.set_len(10 << 30).unwrap();
    let w = Workspace::open(&[p.to_path_buf()], FileLimits::default()).unwrap();
    (outside, ws, w)
}

fn read(w: &Workspace, path: &str) -> Result<files::FilePage, ToolError> {
    files::read(w, &ReadArgs { path: path.into(), offset: 0, max_bytes: None, root: None })
}

#[test]
fn files_attacks_refused() {
    let (_o, _d, w) = workspace();
    assert_eq!(read(&w, "ok.txt").unwrap().content, "hello");
    let outside_rel = format!("../{}/secret", _o.path().file_name().unwrap().to_str().unwrap());
    for (path, want) in [
        (outside_rel.as_str(), "path_traversal"),
        ("/etc/passwd", "absolute_path"),
        ("escape", "path_escapes"),
        (".env", "path_denied"),
        ("innocent.txt", "path_denied"),
        ("zero", "path_escapes"),
        ("fifo", "not_regular_file"),
    ] {
        let e = read(&w, path).unwrap_err();
        assert_eq!(e.code(), want, "{path}: {e}");
        assert!(e.is_refusal());
        assert!(!e.to_string().contains("SECRET"));
    }
    let page = read(&w, "huge.bin").unwrap();
    assert_eq!(page.bytes, 64 << 10);
    assert_eq!(page.next_offset, Some(64 << 10));
    let s = files::search(&w, &files::SearchArgs { pattern: "SECRET".into(), regex: false, ignore_case: false, path: ".".into(), root: None }).unwrap();
    assert!(s.matches.is_empty(), "{s:?}");
}

// ---- http --------------------------------------------------------------------

type Seen = Arc<Mutex<Vec<String>>>;

fn server(respond: fn(&str) -> String) -> (u16, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = vec![0u8; 65536];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).into_owned();
            s2.lock().unwrap().push(req.clone());
            let _ = c.write_all(respond(&req).as_bytes());
        }
    });
    (port, seen)
}

fn ok_json(_: &str) -> String {
    let body = r#"{"items":[1,2]}"#;
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
}

fn redirect_meta(_: &str) -> String {
    "HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into()
}

async fn get(url: &str, p: &HttpPolicy) -> Result<http::HttpResponse, ToolError> {
    http::run(&HttpArgs { method: HttpMethod::Get, url: url.into(), headers: Default::default(), body: None }, p).await
}

#[tokio::test]
async fn http_allowed_loopback_api_works_and_request_is_captured() {
    let (port, seen) = server(ok_json);
    let p = HttpPolicy { allowed_hosts: Some(vec![format!("127.0.0.1:{port}")]), ..Default::default() };
    let args = HttpArgs { method: HttpMethod::Post, url: format!("http://127.0.0.1:{port}/api/items?q=1"), headers: [("x-test".to_string(), "yes".to_string())].into(), body: Some(serde_json::json!({"a": 1})) };
    let r = http::run(&args, &p).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, r#"{"items":[1,2]}"#);
    let req = seen.lock().unwrap()[0].clone();
    assert!(req.starts_with("POST /api/items?q=1 HTTP/1.1"), "{req}");
    assert!(req.contains("x-test: yes") && req.contains(r#"{"a":1}"#), "{req}");
}

#[tokio::test]
async fn http_ssrf_refused_before_any_request() {
    let (port, seen) = server(ok_json);
    let p = HttpPolicy::default();
    for url in [
        "http://169.254.169.254/latest/meta-data/".to_string(), "http://2852039166/".into(), "http://0xA9FEA9FE/".into(),
        "http://0251.0376.0251.0376/".into(), "http://169.254.43518/".into(), "http://[::ffff:169.254.169.254]/".into(),
        "http://[fd00:ec2::254]/".into(),
        format!("http://127.0.0.1:{port}/"), format!("http://2130706433:{port}/"), format!("http://0x7f.1:{port}/"),
        format!("http://0177.0.0.1:{port}/"), format!("http://[::ffff:127.0.0.1]:{port}/"), format!("http://[::1]:{port}/"),
        format!("http://localhost:{port}/"), format!("http://vm:{port}/"), format!("http://LOCALHOST.:{port}/"),
    ] {
        let e = get(&url, &p).await.unwrap_err();
        assert_eq!(e.code(), "address_blocked", "{url}: {e}");
    }
    for url in ["file:///etc/passwd", "ftp://example.com/", "gopher://127.0.0.1/"] {
        assert_eq!(get(url, &p).await.unwrap_err().code(), "scheme_not_allowed", "{url}");
    }
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn http_redirect_hops_rechecked() {
    let (port, _seen) = server(redirect_meta);
    let (other, other_seen) = server(ok_json);
    let p = HttpPolicy { allowed_hosts: Some(vec![format!("127.0.0.1:{port}")]), ..Default::default() };
    let e = get(&format!("http://127.0.0.1:{port}/"), &p).await.unwrap_err();
    assert_eq!(e.code(), "host_not_allowed", "{e}");
    let _ = other;
    assert!(other_seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn http_allow_loopback_lets_localhost_through_and_caps_body() {
    let (port, seen) = server(ok_json);
    let mut p = HttpPolicy { allow_loopback: true, ..Default::default() };
    p.limits.max_bytes = 5;
    let r = get(&format!("http://localhost:{port}/x"), &p).await.unwrap();
    assert_eq!(r.body, r#"{"ite"#);
    assert!(r.truncated);
    assert_eq!(seen.lock().unwrap().len(), 1);
}
