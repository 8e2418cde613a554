//! The model downloader against a real HTTP server on 127.0.0.1: a fresh
//! download, a connection cut half-way and resumed with `Range`, a server that
//! ignores ranges, a Hugging Face-style redirect carrying the checksum, a wrong
//! checksum, a corrupt partial file, cancel, and refusals.

use std::path::Path;
use std::sync::{Arc, Mutex};

use mf_inference::CancelToken;
use mf_inference::models::{ChecksumSource, DownloadError, DownloadRequest, Progress, download};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    range: Option<String>,
}

struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    body: Arc<Vec<u8>>,
}

impl Server {
    fn gets(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().iter().filter(|s| s.method == "GET").cloned().collect()
    }
    fn sha(&self) -> String {
        hex::encode(Sha256::digest(self.body.as_slice()))
    }
}

/// Serves:
/// - `/model.gguf`: the body, with ranges;
/// - `/flaky.gguf`: the first full GET announces the whole length, sends half and closes; later GETs behave;
/// - `/norange.gguf`: always the whole body with 200;
/// - `/hf/model.gguf`: 302 to `/model.gguf` with `x-linked-etag` and `x-linked-size`;
/// - anything else: 404.
async fn serve() -> Server {
    let body: Arc<Vec<u8>> = Arc::new((0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect());
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (b, s) = (body.clone(), seen.clone());
    tokio::spawn(async move {
        let flaky_done = Arc::new(Mutex::new(false));
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let (body, seen, flaky_done) = (b.clone(), s.clone(), flaky_done.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let mut lines = head.lines();
                let first: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
                let (method, path) = (first[0].to_string(), first.get(1).unwrap_or(&"/").to_string());
                let range = lines.filter_map(|l| l.split_once(':')).find(|(k, _)| k.eq_ignore_ascii_case("range")).map(|(_, v)| v.trim().to_string());
                seen.lock().unwrap().push(Seen { method: method.clone(), path: path.clone(), range: range.clone() });
                let sha = hex::encode(Sha256::digest(body.as_slice()));
                let head_only = method == "HEAD";
                let (status, mut headers, payload, cut): (&str, Vec<String>, &[u8], bool) = match path.as_str() {
                    "/hf/model.gguf" => (
                        "302 Found",
                        vec!["Location: /model.gguf".into(), format!("x-linked-etag: \"{sha}\""), format!("x-linked-size: {}", body.len())],
                        &[][..],
                        false,
                    ),
                    "/model.gguf" | "/flaky.gguf" | "/norange.gguf" => {
                        let start = range
                            .as_deref()
                            .filter(|_| path != "/norange.gguf")
                            .and_then(|r| r.strip_prefix("bytes="))
                            .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok());
                        let cut = path == "/flaky.gguf" && !head_only && {
                            let mut done = flaky_done.lock().unwrap();
                            let first = !*done;
                            *done = true;
                            first
                        };
                        match start {
                            Some(s) if s >= body.len() => ("416 Range Not Satisfiable", vec![], &[][..], false),
                            Some(s) => ("206 Partial Content", vec![format!("Content-Range: bytes {s}-{}/{}", body.len() - 1, body.len())], &body[s..], false),
                            None => ("200 OK", vec!["Accept-Ranges: bytes".into()], &body[..], cut),
                        }
                    }
                    _ => ("404 Not Found", vec![], &b"no"[..], false),
                };
                headers.push(format!("Content-Length: {}", payload.len()));
                headers.push("Connection: close".into());
                let mut out = format!("HTTP/1.1 {status}\r\n{}\r\n\r\n", headers.join("\r\n")).into_bytes();
                if !head_only {
                    let n = if cut { payload.len() / 2 } else { payload.len() };
                    out.extend_from_slice(&payload[..n]);
                }
                let _ = sock.write_all(&out).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Server { base, seen, body }
}

fn req(server: &Server, path: &str, dir: &Path, sha: Option<String>) -> DownloadRequest {
    DownloadRequest { url: format!("{}{path}", server.base), dest_dir: dir.to_path_buf(), file_name: None, sha256: sha }
}

#[tokio::test]
async fn fresh_download_reports_progress_and_verifies() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let mut progress = Vec::new();
    let done =
        download(&req(&server, "/model.gguf", dir.path(), Some(server.sha().to_uppercase())), |p| progress.push(p.clone()), &CancelToken::new()).await.unwrap();
    assert_eq!(done.bytes, server.body.len() as u64);
    assert_eq!(done.received, server.body.len() as u64);
    assert_eq!(done.checksum_source, ChecksumSource::Given);
    assert_eq!(std::fs::read(dir.path().join("model.gguf")).unwrap(), *server.body);
    assert!(!dir.path().join("model.gguf.part").exists() && !dir.path().join("model.gguf.part.json").exists());
    assert_eq!(progress.first(), Some(&Progress::Probing));
    let total = Some(server.body.len() as u64);
    assert_eq!(progress.last(), Some(&Progress::Downloading { downloaded: server.body.len() as u64, total, resumed_from: 0 }));

    // Again: already present, verified, nothing downloaded.
    let gets_before = server.gets().len();
    let again = download(&req(&server, "/model.gguf", dir.path(), Some(server.sha())), |_| {}, &CancelToken::new()).await.unwrap();
    assert!(again.already_present);
    assert_eq!(server.gets().len(), gets_before);
}

#[tokio::test]
async fn a_cut_connection_is_resumed_with_a_range_request() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let r = req(&server, "/flaky.gguf", dir.path(), Some(server.sha()));
    let err = download(&r, |_| {}, &CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, DownloadError::Incomplete { .. } | DownloadError::Http { .. }), "{err}");
    assert!(err.to_string().contains("resume"), "{err}");
    let half = (server.body.len() / 2) as u64;
    assert_eq!(std::fs::metadata(dir.path().join("flaky.gguf.part")).unwrap().len(), half);
    assert!(!dir.path().join("flaky.gguf").exists());

    let mut rehashed = None;
    let done = download(
        &r,
        |p| {
            if let Progress::Rehashing { bytes } = p {
                rehashed = Some(*bytes);
            }
        },
        &CancelToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(rehashed, Some(half));
    assert_eq!(done.resumed_from, half);
    assert_eq!(done.received, server.body.len() as u64 - half);
    assert_eq!(server.gets().last().unwrap().range.as_deref(), Some(format!("bytes={half}-").as_str()));
    assert_eq!(std::fs::read(dir.path().join("flaky.gguf")).unwrap(), *server.body);
}

#[tokio::test]
async fn a_server_ignoring_ranges_restarts_from_zero() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let sha = server.sha();
    // An earlier partial download of the same file.
    std::fs::write(dir.path().join("norange.gguf.part"), &server.body[..1000]).unwrap();
    let meta = serde_json::json!({"url": format!("{}/norange.gguf", server.base), "sha256": sha});
    std::fs::write(dir.path().join("norange.gguf.part.json"), meta.to_string()).unwrap();
    let done = download(&req(&server, "/norange.gguf", dir.path(), Some(sha)), |_| {}, &CancelToken::new()).await.unwrap();
    assert_eq!(server.gets()[0].range.as_deref(), Some("bytes=1000-"));
    assert_eq!(done.resumed_from, 0);
    assert_eq!(std::fs::read(dir.path().join("norange.gguf")).unwrap(), *server.body);
}

#[tokio::test]
async fn the_checksum_comes_from_a_hugging_face_style_redirect() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let done = download(&req(&server, "/hf/model.gguf", dir.path(), None), |_| {}, &CancelToken::new()).await.unwrap();
    assert_eq!(done.checksum_source, ChecksumSource::Server);
    assert_eq!(done.sha256, server.sha());
    let gets = server.gets();
    assert_eq!(gets.last().unwrap().path, "/model.gguf", "the redirect was followed: {gets:?}");
    assert_eq!(std::fs::read(dir.path().join("model.gguf")).unwrap(), *server.body);
}

#[tokio::test]
async fn no_known_checksum_is_refused_before_downloading() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let err = download(&req(&server, "/model.gguf", dir.path(), None), |_| {}, &CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, DownloadError::NoChecksum { .. }), "{err}");
    assert!(server.gets().is_empty(), "nothing may be downloaded without a checksum");
}

#[tokio::test]
async fn a_wrong_checksum_deletes_the_file() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let wrong = "0".repeat(64);
    let err = download(&req(&server, "/model.gguf", dir.path(), Some(wrong)), |_| {}, &CancelToken::new()).await.unwrap_err();
    match err {
        DownloadError::ChecksumMismatch { actual, .. } => assert_eq!(actual, server.sha()),
        other => panic!("{other}"),
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing is left behind: {left:?}");
}

#[tokio::test]
async fn a_corrupt_partial_file_fails_the_check_and_is_removed() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let sha = server.sha();
    // Same download by its sidecar, but the bytes on disk are wrong.
    std::fs::write(dir.path().join("model.gguf.part"), vec![0xAAu8; 5000]).unwrap();
    let meta = serde_json::json!({"url": format!("{}/model.gguf", server.base), "sha256": sha});
    std::fs::write(dir.path().join("model.gguf.part.json"), meta.to_string()).unwrap();
    let err = download(&req(&server, "/model.gguf", dir.path(), Some(sha.clone())), |_| {}, &CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, DownloadError::ChecksumMismatch { .. }), "{err}");
    assert!(!dir.path().join("model.gguf.part").exists() && !dir.path().join("model.gguf").exists());
    // The next attempt starts clean and succeeds.
    download(&req(&server, "/model.gguf", dir.path(), Some(sha)), |_| {}, &CancelToken::new()).await.unwrap();
}

#[tokio::test]
async fn cancel_keeps_the_partial_file_and_a_different_file_is_not_overwritten() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    cancel.cancel();
    let err = download(&req(&server, "/model.gguf", dir.path(), Some(server.sha())), |_| {}, &cancel).await.unwrap_err();
    assert!(matches!(err, DownloadError::Cancelled { .. }), "{err}");
    assert!(dir.path().join("model.gguf.part").exists());

    std::fs::write(dir.path().join("model.gguf"), b"someone else's file").unwrap();
    let err = download(&req(&server, "/model.gguf", dir.path(), Some(server.sha())), |_| {}, &CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, DownloadError::ExistsDifferent { .. }), "{err}");
    assert_eq!(std::fs::read(dir.path().join("model.gguf")).unwrap(), b"someone else's file");
}

#[tokio::test]
async fn bad_urls_names_and_statuses_are_refused() {
    let server = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let sha = Some(server.sha());
    let mut r = req(&server, "/model.gguf", dir.path(), sha.clone());
    r.url = "file:///etc/passwd".into();
    assert!(matches!(download(&r, |_| {}, &CancelToken::new()).await, Err(DownloadError::Invalid(_))));
    for name in ["../escape.gguf", ".gguf", "model.bin", "a/b.gguf"] {
        let mut r = req(&server, "/model.gguf", dir.path(), sha.clone());
        r.file_name = Some(name.into());
        assert!(matches!(download(&r, |_| {}, &CancelToken::new()).await, Err(DownloadError::Invalid(_))), "{name}");
    }
    let r = req(&server, "/model.gguf", dir.path(), Some("abc".into()));
    assert!(matches!(download(&r, |_| {}, &CancelToken::new()).await, Err(DownloadError::Invalid(_))));
    let r = req(&server, "/missing.gguf", dir.path(), sha);
    assert!(matches!(download(&r, |_| {}, &CancelToken::new()).await, Err(DownloadError::Status { status: 404, .. })));
    assert!(!dir.path().parent().unwrap().join("escape.gguf").exists());
}
