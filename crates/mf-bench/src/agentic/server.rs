//! A world served on 127.0.0.1 by the harness: one thread, one request per
//! connection, every path logged. It can be told to die after a number of
//! requests (fault injection), and it says when it is no longer serving, so
//! a run whose world died ends with a typed reason instead of a string of
//! connection errors.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::world::World;
use crate::error::{BenchError, Result};

/// A world served on `127.0.0.1:port` until dropped; it records every path requested.
#[derive(Debug)]
pub struct WorldServer {
    port: u16,
    stop: Arc<AtomicBool>,
    alive: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Sets `alive` to false when the serving thread ends, however it ends (a
/// panic included).
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl WorldServer {
    /// Serves `world` on `127.0.0.1:port`.
    ///
    /// # Errors
    /// The port is taken (named in the message).
    pub fn start(world: &World, port: u16) -> Result<WorldServer> {
        Self::start_dying(world, port, None)
    }

    /// Serves `world`, and stops serving (closes its socket) after
    /// `die_after` requests when given: the fault a run must survive.
    ///
    /// # Errors
    /// The port is taken (named in the message).
    pub fn start_dying(world: &World, port: u16, die_after: Option<usize>) -> Result<WorldServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| BenchError::InvalidSetting { name: "port", reason: format!("cannot serve the world on 127.0.0.1:{port}: {e}") })?;
        listener.set_nonblocking(true).map_err(|e| BenchError::InvalidSetting { name: "port", reason: e.to_string() })?;
        let stop = Arc::new(AtomicBool::new(false));
        let alive = Arc::new(AtomicBool::new(true));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let pages: Vec<(String, u16, String)> = world.endpoints.iter().map(|e| (e.path.clone(), e.status, e.body.to_string())).collect();
        let (stop2, alive2, req2) = (stop.clone(), alive.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            let _guard = AliveGuard(alive2);
            let mut served = 0usize;
            while !stop2.load(Ordering::SeqCst) {
                if die_after.is_some_and(|n| served >= n) {
                    // Dropping the listener refuses every later connection.
                    return;
                }
                match listener.accept() {
                    Ok((mut c, _)) => {
                        served += 1;
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                        let path = read_request_path(&mut c);
                        if let Ok(mut r) = req2.lock() {
                            r.push(path.clone());
                        }
                        let (status, body) = match pages.iter().find(|(p, _, _)| *p == path) {
                            Some((_, s, b)) => (*s, b.clone()),
                            None => (404, r#"{"error": "no such endpoint"}"#.to_owned()),
                        };
                        let _ = write!(
                            c,
                            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            reason(status),
                            body.len()
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(WorldServer { port, stop, alive, requests, thread: Some(thread) })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Paths requested so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Whether it still serves (false once its thread has ended).
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// A flag that turns false when the server stops serving.
    pub fn alive_flag(&self) -> Arc<AtomicBool> {
        self.alive.clone()
    }
}

impl Drop for WorldServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Reads the request head and returns its path.
fn read_request_path(c: &mut std::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace().nth(1).unwrap_or("/").to_owned()
}
