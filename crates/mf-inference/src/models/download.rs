//! Downloads a GGUF model over HTTP(S) with progress, resume and a sha256
//! check, for the app's model manager and `mf models download`.
//!
//! How it goes:
//! 1. A `HEAD` request without following redirects learns the size and, from
//!    Hugging Face's `x-linked-etag` header (the LFS object's sha256), the
//!    checksum when the caller did not give one. No checksum known → refuse
//!    before downloading gigabytes that could not be verified.
//! 2. Bytes go to `<name>.part`, with `<name>.part.json` recording the URL and
//!    the expected checksum. An existing `.part` for the same checksum is resumed
//!    with a `Range` request; a server that ignores the range restarts from zero.
//!    A cancelled or broken download keeps its `.part`.
//! 3. The sha256 is computed while writing (the resumed prefix is re-hashed
//!    first); a mismatch deletes the `.part`; a match renames it into place.
//!
//! The URL is the user's own choice (the recommended one by default), so only
//! the scheme is restricted (http/https); this is not the agent's `http` tool.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::backend::CancelToken;

/// What to download and where.
#[derive(Debug, Clone)]
pub struct DownloadRequest {
    /// `http://` or `https://` URL of the GGUF file.
    pub url: String,
    /// Folder the model goes into (created if missing).
    pub dest_dir: PathBuf,
    /// File name; by default the URL's last path segment. Must end in `.gguf`.
    pub file_name: Option<String>,
    /// Expected sha256 (64 hex digits). When absent, the server's LFS checksum is used.
    pub sha256: Option<String>,
}

/// Where the download stands, reported as it goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Progress {
    /// Asking the server for the size and checksum.
    Probing,
    /// Re-hashing the bytes of an earlier, interrupted download.
    Rehashing {
        /// Bytes of the `.part` file.
        bytes: u64,
    },
    /// Receiving bytes.
    Downloading {
        /// Bytes in the `.part` file so far (including a resumed prefix).
        downloaded: u64,
        /// The full size, when the server said.
        total: Option<u64>,
        /// Bytes that were already there when this attempt started.
        resumed_from: u64,
    },
    /// Checking the checksum of a file that was already in place.
    Verifying,
}

/// Where the expected checksum came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChecksumSource {
    /// The caller (user, catalog) gave it.
    Given,
    /// The server's `x-linked-etag` (Hugging Face LFS sha256).
    Server,
}

/// A finished, verified download.
#[derive(Debug, Clone, Serialize)]
pub struct Downloaded {
    /// The model file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Its sha256, verified against the expected one.
    pub sha256: String,
    /// Where the expected checksum came from.
    pub checksum_source: ChecksumSource,
    /// Bytes taken from an earlier interrupted download (0 for a fresh one).
    pub resumed_from: u64,
    /// Bytes received over the network by this call.
    pub received: u64,
    /// The file was already present and verified; nothing was downloaded.
    pub already_present: bool,
}

/// Why a download did not finish.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The URL or file name is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// Neither the caller nor the server gave a checksum.
    #[error("no sha256 known for {url}: the server does not publish one; pass the publisher's checksum (--sha256)")]
    NoChecksum {
        /// The URL.
        url: String,
    },
    /// The request failed (connection, timeout, TLS) or the stream broke.
    #[error("download from {url} failed: {reason} (the partial file is kept; run again to resume)")]
    Http {
        /// The URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// A file could not be read or written.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        reason: String,
    },
    /// The stream ended before the announced size.
    #[error("the server closed the download at {got} of {expected} bytes (the partial file is kept; run again to resume)")]
    Incomplete {
        /// Bytes in the `.part` file.
        got: u64,
        /// The announced size.
        expected: u64,
    },
    /// The file's checksum is not the expected one; the bad file was deleted.
    #[error("sha256 mismatch for {path}: expected {expected}, got {actual}; the file was deleted")]
    ChecksumMismatch {
        /// The file.
        path: PathBuf,
        /// The expected checksum.
        expected: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// A different file with the same name is already there.
    #[error("{path} already exists with sha256 {actual}, not the expected {expected}; move it away first")]
    ExistsDifferent {
        /// The file.
        path: PathBuf,
        /// The expected checksum.
        expected: String,
        /// The existing file's checksum.
        actual: String,
    },
    /// Cancelled by the caller; the partial file is kept for a resume.
    #[error("download cancelled at {partial_bytes} bytes (the partial file is kept; run again to resume)")]
    Cancelled {
        /// Bytes in the `.part` file.
        partial_bytes: u64,
    },
}

/// The sidecar next to a `.part` file: which download it belongs to.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct PartMeta {
    url: String,
    sha256: String,
}

const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Downloads `req`, calling `on_progress` as it goes (at most every 200 ms while
/// receiving). Idempotent: a verified file already in place is returned as is.
///
/// # Errors
/// [`DownloadError`]; a broken or cancelled download keeps its `.part` file so the
/// next call resumes it.
pub async fn download(req: &DownloadRequest, mut on_progress: impl FnMut(&Progress), cancel: &CancelToken) -> Result<Downloaded, DownloadError> {
    let url = parse_url(&req.url)?;
    let file_name = match &req.file_name {
        Some(n) => n.clone(),
        None => url.path_segments().and_then(|mut s| s.next_back()).map(str::to_string).unwrap_or_default(),
    };
    check_file_name(&file_name)?;
    let given = req.sha256.as_deref().map(normalise_sha).transpose()?;

    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| http_err(&req.url, &e))?;

    on_progress(&Progress::Probing);
    let probe = probe(&client, &req.url).await?;
    let (expected, checksum_source) = match (given, probe.sha256) {
        (Some(s), _) => (s, ChecksumSource::Given),
        (None, Some(s)) => (s, ChecksumSource::Server),
        (None, None) => return Err(DownloadError::NoChecksum { url: req.url.clone() }),
    };

    std::fs::create_dir_all(&req.dest_dir).map_err(|e| io_err(&req.dest_dir, &e))?;
    let dest = req.dest_dir.join(&file_name);
    let part = req.dest_dir.join(format!("{file_name}.part"));
    let meta_path = req.dest_dir.join(format!("{file_name}.part.json"));

    if dest.exists() {
        on_progress(&Progress::Verifying);
        let (bytes, actual) = hash_file(&dest, None)?;
        if actual == expected {
            return Ok(Downloaded { path: dest, bytes, sha256: actual, checksum_source, resumed_from: 0, received: 0, already_present: true });
        }
        return Err(DownloadError::ExistsDifferent { path: dest, expected, actual });
    }

    // Resume only a `.part` that belongs to the same checksum.
    let meta = PartMeta { url: req.url.clone(), sha256: expected.clone() };
    let same_download = std::fs::read(&meta_path).ok().and_then(|b| serde_json::from_slice::<PartMeta>(&b).ok()).is_some_and(|m| m.sha256 == expected);
    if !same_download {
        let _ = std::fs::remove_file(&part);
    }
    let meta_json = serde_json::to_vec(&meta).map_err(|e| DownloadError::Invalid(e.to_string()))?;
    std::fs::write(&meta_path, meta_json).map_err(|e| io_err(&meta_path, &e))?;

    let mut hasher = Sha256::new();
    let mut have = match std::fs::metadata(&part) {
        Ok(m) if m.is_file() => m.len(),
        _ => 0,
    };
    if have > 0 {
        on_progress(&Progress::Rehashing { bytes: have });
        let (n, _) = hash_file(&part, Some(&mut hasher))?;
        have = n;
    }
    if probe.size.is_some_and(|total| have > total) {
        // Longer than the file: not ours after all.
        have = 0;
        hasher = Sha256::new();
    }

    let mut request = client.get(url.clone());
    if have > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let resp = request.send().await.map_err(|e| http_err(&req.url, &e))?;
    let status = resp.status();
    let resumed_from = if status == reqwest::StatusCode::PARTIAL_CONTENT && have > 0 {
        let starts_at_have =
            resp.headers().get(reqwest::header::CONTENT_RANGE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with(&format!("bytes {have}-")));
        if !starts_at_have {
            return Err(DownloadError::Http { url: req.url.clone(), reason: "the server resumed at a different offset".into() });
        }
        have
    } else if status.is_success() {
        // A plain 200: the server ignored the range; start over.
        have = 0;
        hasher = Sha256::new();
        0
    } else if status == reqwest::StatusCode::RANGE_NOT_SATISFIABLE && probe.size == Some(have) {
        // The `.part` is already complete.
        return finish(part, meta_path, dest, have, hasher, expected, checksum_source, have, 0);
    } else {
        return Err(DownloadError::Status { url: req.url.clone(), status: status.as_u16() });
    };
    let total = if resumed_from > 0 { probe.size.or_else(|| resp.content_length().map(|n| n + resumed_from)) } else { resp.content_length().or(probe.size) };

    let file =
        std::fs::OpenOptions::new().create(true).write(true).append(resumed_from > 0).truncate(resumed_from == 0).open(&part).map_err(|e| io_err(&part, &e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut received = 0u64;
    let mut last = Instant::now();
    on_progress(&Progress::Downloading { downloaded: have, total, resumed_from });
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        if cancel.is_cancelled() {
            out.flush().map_err(|e| io_err(&part, &e))?;
            return Err(DownloadError::Cancelled { partial_bytes: have });
        }
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                out.flush().map_err(|e| io_err(&part, &e))?;
                return Err(http_err(&req.url, &e));
            }
        };
        out.write_all(&chunk).map_err(|e| io_err(&part, &e))?;
        hasher.update(&chunk);
        have += chunk.len() as u64;
        received += chunk.len() as u64;
        if last.elapsed() >= PROGRESS_EVERY {
            last = Instant::now();
            on_progress(&Progress::Downloading { downloaded: have, total, resumed_from });
        }
    }
    out.flush().map_err(|e| io_err(&part, &e))?;
    let file = out.into_inner().map_err(|e| io_err(&part, e.error()))?;
    file.sync_all().map_err(|e| io_err(&part, &e))?;
    on_progress(&Progress::Downloading { downloaded: have, total, resumed_from });
    if let Some(total) = total
        && have < total
    {
        return Err(DownloadError::Incomplete { got: have, expected: total });
    }
    finish(part, meta_path, dest, have, hasher, expected, checksum_source, resumed_from, received)
}

#[allow(clippy::too_many_arguments)]
fn finish(
    part: PathBuf,
    meta_path: PathBuf,
    dest: PathBuf,
    bytes: u64,
    hasher: Sha256,
    expected: String,
    checksum_source: ChecksumSource,
    resumed_from: u64,
    received: u64,
) -> Result<Downloaded, DownloadError> {
    let actual = hex::encode(hasher.finalize());
    if actual != expected {
        let _ = std::fs::remove_file(&part);
        let _ = std::fs::remove_file(&meta_path);
        return Err(DownloadError::ChecksumMismatch { path: dest, expected, actual });
    }
    std::fs::rename(&part, &dest).map_err(|e| io_err(&dest, &e))?;
    let _ = std::fs::remove_file(&meta_path);
    Ok(Downloaded { path: dest, bytes, sha256: actual, checksum_source, resumed_from, received, already_present: false })
}

/// What the `HEAD` probe learned.
struct Probe {
    size: Option<u64>,
    sha256: Option<String>,
}

async fn probe(client: &reqwest::Client, url: &str) -> Result<Probe, DownloadError> {
    // Without redirects: Hugging Face puts the LFS checksum on the redirect itself.
    let no_redirect = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| http_err(url, &e))?;
    let resp = no_redirect.head(url).send().await.map_err(|e| http_err(url, &e))?;
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(|s| s.trim_matches('"').to_string());
    let linked_sha = header("x-linked-etag").and_then(|s| normalise_sha(&s).ok());
    let linked_size = header("x-linked-size").and_then(|s| s.parse::<u64>().ok());
    let status = resp.status();
    if status.is_redirection() {
        if linked_size.is_some() || linked_sha.is_some() {
            return Ok(Probe { size: linked_size, sha256: linked_sha });
        }
        // Follow the redirect for the size.
        let followed = client.head(url).send().await.map_err(|e| http_err(url, &e))?;
        let size = followed.status().is_success().then(|| content_length(&followed)).flatten();
        return Ok(Probe { size, sha256: None });
    }
    if status.is_success() {
        let size = linked_size.or_else(|| content_length(&resp));
        return Ok(Probe { size, sha256: linked_sha });
    }
    if status == reqwest::StatusCode::METHOD_NOT_ALLOWED || status == reqwest::StatusCode::NOT_IMPLEMENTED {
        return Ok(Probe { size: None, sha256: None });
    }
    Err(DownloadError::Status { url: url.to_string(), status: status.as_u16() })
}

/// The `Content-Length` header (reqwest's `content_length()` is 0 for HEAD).
fn content_length(resp: &reqwest::Response) -> Option<u64> {
    resp.headers().get(reqwest::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

fn parse_url(raw: &str) -> Result<url::Url, DownloadError> {
    let url = url::Url::parse(raw).map_err(|e| DownloadError::Invalid(format!("invalid URL {raw:?}: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(DownloadError::Invalid(format!("only http and https downloads are supported, not {}:", url.scheme())));
    }
    Ok(url)
}

fn check_file_name(name: &str) -> Result<(), DownloadError> {
    let ok = name.ends_with(".gguf") && name.len() > 5 && !name.starts_with('.') && !name.contains(['/', '\\', '\0']) && name != "..";
    if ok { Ok(()) } else { Err(DownloadError::Invalid(format!("{name:?} is not a plain file name ending in .gguf"))) }
}

/// Lower-cases and checks a sha256 given as 64 hex digits.
///
/// # Errors
/// [`DownloadError::Invalid`] for anything else.
pub fn normalise_sha(s: &str) -> Result<String, DownloadError> {
    let s = s.trim().to_ascii_lowercase();
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s)
    } else {
        Err(DownloadError::Invalid(format!("{s:?} is not a sha256 (64 hex digits)")))
    }
}

/// Hashes a file (into `into` when given, to continue a running hash), returning
/// its length and, when hashing on its own, its hex sha256.
fn hash_file(path: &Path, into: Option<&mut Sha256>) -> Result<(u64, String), DownloadError> {
    let mut f = std::fs::File::open(path).map_err(|e| io_err(path, &e))?;
    let mut own = Sha256::new();
    let hasher = match into {
        Some(h) => h,
        None => &mut own,
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(|e| io_err(path, &e))?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
        n += k as u64;
    }
    Ok((n, hex::encode(own.finalize())))
}

/// The sha256 of a file, streamed (for "verify" in the model manager).
///
/// # Errors
/// [`DownloadError::Io`] when the file cannot be read.
pub fn sha256_file(path: &Path) -> Result<String, DownloadError> {
    hash_file(path, None).map(|(_, h)| h)
}

fn http_err(url: &str, e: &reqwest::Error) -> DownloadError {
    let mut reason = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        reason.push_str(": ");
        reason.push_str(&s.to_string());
        src = s.source();
    }
    DownloadError::Http { url: url.to_string(), reason }
}

fn io_err(path: &Path, e: &std::io::Error) -> DownloadError {
    DownloadError::Io { path: path.to_path_buf(), reason: e.to_string() }
}
