//! Shared helpers: the sandbox config, process counting, and a loopback
//! HTTP server on tokio that records every request and answers with a
//! script of writes and pauses.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mf_tools::code::{self, CodeArgs, CodeConfig, Language};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sandbox config using this crate's helper binary, 3 s wall clock.
pub fn cfg() -> CodeConfig {
    let mut c = CodeConfig::new(env!("CARGO_BIN_EXE_mf-sandbox"));
    c.limits.timeout = Duration::from_secs(3);
    c
}

/// Probe (must pass here) and run.
pub async fn run(lang: Language, src: &str, c: &CodeConfig) -> code::CodeResult {
    code::probe(c).await.expect("sandbox must be available here");
    code::run(&CodeArgs { language: lang, code: src.into() }, c).await.unwrap()
}

/// Processes on the host whose command line contains `marker`.
pub fn procs_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| std::fs::read(e.path().join("cmdline")).map(|c| String::from_utf8_lossy(&c).contains(marker)).unwrap_or(false))
        .count()
}

/// One step of a scripted answer.
pub enum Step {
    /// Write these bytes (the connection ends when the client went away).
    Send(Vec<u8>),
    /// Pause.
    Sleep(Duration),
}

type Respond = dyn Fn(&str, usize) -> Vec<Step> + Send + Sync;

/// A loopback HTTP/1.1 server: one request per connection, recorded.
pub struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Start on 127.0.0.1 with a fresh port; `respond(request, index)`
    /// scripts the answer to the `index`-th request (0-based).
    pub async fn start(respond: impl Fn(&str, usize) -> Vec<Step> + Send + Sync + 'static) -> Server {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let respond: Arc<Respond> = Arc::new(respond);
        let s2 = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut c, _)) = l.accept().await else { continue };
                let seen = s2.clone();
                let respond = respond.clone();
                tokio::spawn(async move {
                    let req = read_request(&mut c).await;
                    let index = {
                        let mut s = seen.lock().unwrap();
                        s.push(req.clone());
                        s.len() - 1
                    };
                    for step in respond(&req, index) {
                        match step {
                            Step::Send(b) => {
                                if c.write_all(&b).await.is_err() || c.flush().await.is_err() {
                                    return;
                                }
                            }
                            Step::Sleep(d) => tokio::time::sleep(d).await,
                        }
                    }
                    let _ = c.shutdown().await;
                });
            }
        });
        Server { port, seen }
    }

    /// Requests received so far (head and body as text).
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

async fn read_request(c: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(0);
            if buf.len() >= end + 4 + len {
                break;
            }
        }
        match c.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 1 << 20 {
            break;
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A whole response with content-length.
pub fn reply(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<Step> {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    vec![Step::Send(bytes)]
}

/// A redirect.
pub fn redirect(status: &str, location: &str) -> Vec<Step> {
    reply(status, &[("location", location)], b"")
}

/// A small JSON body.
pub fn json_ok() -> Vec<Step> {
    reply("200 OK", &[("content-type", "application/json")], br#"{"items":[1,2]}"#)
}
