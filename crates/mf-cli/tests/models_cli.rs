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

/// The smallest well-formed GGUF: version 3, no tensors, one metadata entry.
fn tiny_gguf() -> Vec<u8> {
    let mut f = b"GGUF".to_vec();
    f.extend(3u32.to_le_bytes());
    f.extend(0u64.to_le_bytes());
    f.extend(1u64.to_le_bytes());
    let (key, value) = ("general.name", "tiny");
    f.extend((key.len() as u64).to_le_bytes());
    f.extend(key.as_bytes());
    f.extend(8u32.to_le_bytes());
    f.extend((value.len() as u64).to_le_bytes());
    f.extend(value.as_bytes());
    f
}

#[test]
fn list_verify_and_download() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = mf(&["models", "list", "--dir", d]);
    assert!(o.status.success() && text(&o).contains("no models"), "{}", text(&o));

    let body = tiny_gguf();
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

    // Verify: match (exit 0), mismatch (exit 1); list shows the header.
    let f = dir.path().join("tiny.gguf");
    let o = mf(&["models", "verify", f.to_str().unwrap(), "--sha256", &real]);
    assert!(o.status.success() && text(&o).contains("OK"), "{}", text(&o));
    let o = mf(&["models", "verify", f.to_str().unwrap(), "--sha256", sha]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = mf(&["models", "list", "--dir", d]);
    assert!(text(&o).contains("tiny.gguf") && !text(&o).contains("BROKEN"), "{}", text(&o));

    // Refused before any request: a file: URL, an unknown catalog id (exit 2).
    let o = mf(&["models", "download", "--url", "file:///etc/passwd", "--dir", d]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = mf(&["models", "download", "no-such-model", "--dir", d]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn broken_model_files_are_marked_and_fail_verify() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let not_gguf = d.join("notes.gguf");
    std::fs::write(&not_gguf, "these are notes, not a model").unwrap();
    let mut files = vec![(not_gguf, "not a GGUF")];
    // A truncated copy of the real test model (cut in its tensor data).
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if real.exists() {
        let whole = std::fs::read(&real).unwrap();
        let cut = d.join("SmolLM2-135M-Instruct.Q4_1.gguf");
        std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
        files.push((cut, "truncated GGUF"));
    } else {
        assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", real.display());
        eprintln!("truncated-model case skipped: {} missing (run scripts/setup.sh)", real.display());
    }
    for (f, why) in &files {
        let p = f.to_str().unwrap();
        // Without a known checksum...
        let o = mf(&["models", "verify", p, "--sha256", &"0".repeat(64)]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        // ...and with the file's own, correct checksum: still broken.
        let own = mf_inference::models::sha256_file(f).unwrap();
        let o = mf(&["models", "verify", p, "--sha256", &own]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("BROKEN") && text(&o).contains(why), "{}", text(&o));
    }
    // The truncated copy has the catalog's file name (a known checksum) and
    // fails; a file with no known checksum fails too.
    let o = mf(&["models", "verify", files[0].0.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("BROKEN: not a GGUF"), "{}", text(&o));
    if let Some((cut, _)) = files.get(1) {
        let o = mf(&["models", "verify", cut.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("BROKEN: truncated GGUF"), "{}", text(&o));
    }
    let o = mf(&["models", "list", "--dir", d.to_str().unwrap()]);
    let listing = text(&o);
    for (f, why) in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        let line = listing.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} not listed: {listing}"));
        assert!(line.contains("BROKEN") && line.contains(why), "{line}");
    }
    let o = mf(&["models", "list", "--dir", d.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.as_array().unwrap().iter().all(|m| m["broken"] == true), "{v}");
}
