//! `mf models` through the built binary: list a folder, verify a file (match
//! and mismatch), refuse a bad download before touching the network, and a
//! real download from a server on 127.0.0.1 with its checksum verified.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Command, Output};

fn mf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mf")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Serves `body` for every request (GET and HEAD) on 127.0.0.1.
fn serve(body: Vec<u8>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s = s.unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            let head = buf[..n].starts_with(b"HEAD");
            let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
            if !head {
                let _ = s.write_all(&body);
            }
        }
    });
    port
}

#[test]
fn list_verify_and_download() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = mf(&["models", "list", "--dir", d]);
    assert!(o.status.success() && text(&o).contains("no models"), "{}", text(&o));

    let body = b"GGUF not really a model, but bytes with a known checksum".to_vec();
    let sha = "4f0d2a8bbd0c8d0bd1b2b7f3f1f4f8ba8e9e7d1b5f0e3a6c2d9b8a7f6e5d4c3b"; // wrong on purpose
    let port = serve(body.clone());
    let url = format!("http://127.0.0.1:{port}/tiny.gguf");

    // A wrong checksum: exit 1, nothing left behind.
    let o = mf(&["models", "download", "--url", &url, "--sha256", sha, "--dir", d]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("sha256 mismatch"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // The right one: exit 0, the file in place.
    // The real checksum, from `mf models verify` on a copy (no expected one known).
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("copy.gguf");
    std::fs::write(&copy, &body).unwrap();
    let o = mf(&["models", "verify", copy.to_str().unwrap()]);
    assert!(o.status.success() && text(&o).contains("no expected checksum"), "{}", text(&o));
    let real = String::from_utf8_lossy(&o.stdout).split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(real.len(), 64);
    assert_ne!(real, sha);
    let o = mf(&["models", "download", "--url", &url, "--sha256", &real, "--dir", d]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(dir.path().join("tiny.gguf")).unwrap(), body);

    // Verify: match (exit 0), mismatch (exit 1); list shows the broken header.
    let f = dir.path().join("tiny.gguf");
    let o = mf(&["models", "verify", f.to_str().unwrap(), "--sha256", &real]);
    assert!(o.status.success() && text(&o).contains("OK"), "{}", text(&o));
    let o = mf(&["models", "verify", f.to_str().unwrap(), "--sha256", sha]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = mf(&["models", "list", "--dir", d]);
    assert!(text(&o).contains("tiny.gguf") && text(&o).contains("malformed"), "{}", text(&o));

    // Refused before any request: a file: URL, an unknown catalog id (exit 2).
    let o = mf(&["models", "download", "--url", "file:///etc/passwd", "--dir", d]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = mf(&["models", "download", "no-such-model", "--dir", d]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
