//! One configured server: started on first use, restarted after it stopped
//! (a bounded number of times), every request bounded by a time limit.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, Implementation, PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};

use super::config::{McpServerConfig, McpTransport};
use super::stdio::{self, ChildGuard, Diagnostics};
use crate::ToolError;

/// Time limits, restarts and list bounds of one server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub start: Duration,
    pub call: Duration,
    pub max_restarts: u32,
    /// Most pages of `tools/list` requested.
    pub max_pages: usize,
    /// Most tools taken from the list.
    pub max_tools: usize,
}

struct Live {
    service: RunningService<RoleClient, ClientConfig>,
    /// Dropped after `service`: the child is killed once the connection is closed.
    child: Option<ChildGuard>,
    diag: Arc<Diagnostics>,
}

impl Live {
    fn closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }
}

enum Conn {
    Idle,
    Up(Box<Live>),
    /// It stopped more often than allowed, or could not be started: the reason.
    Broken(ToolError),
}

/// What the server's state looks like from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    NotStarted,
    Running { pid: Option<u32> },
    Stopped(String),
}

pub struct Server {
    pub cfg: McpServerConfig,
    limits: Limits,
    conn: tokio::sync::Mutex<Conn>,
    starts: std::sync::atomic::AtomicU32,
}

fn client_info() -> ClientConfig {
    ClientConfig::new(Default::default(), Implementation::new("measured-forgetting", env!("CARGO_PKG_VERSION")))
}

impl Server {
    pub fn new(cfg: McpServerConfig, limits: Limits) -> Self {
        Server { cfg, limits, conn: tokio::sync::Mutex::new(Conn::Idle), starts: 0.into() }
    }

    fn name(&self) -> String {
        self.cfg.name.clone()
    }

    /// Its state now (without waiting for a start in progress).
    pub fn snapshot(&self) -> Snapshot {
        match self.conn.try_lock() {
            Err(_) => Snapshot::Running { pid: None },
            Ok(c) => match &*c {
                Conn::Idle => Snapshot::NotStarted,
                Conn::Up(l) if !l.closed() => Snapshot::Running { pid: l.child.as_ref().and_then(ChildGuard::pid) },
                Conn::Up(l) => Snapshot::Stopped(l.diag.malformed().unwrap_or_else(|| "the connection closed".into())),
                Conn::Broken(e) => Snapshot::Stopped(e.to_string()),
            },
        }
    }

    async fn start(&self) -> Result<Live, ToolError> {
        let name = self.name();
        let start_err = |message: String| ToolError::McpStart { server: name.clone(), message };
        let ms = u64::try_from(self.limits.start.as_millis()).unwrap_or(u64::MAX);
        match &self.cfg.transport {
            McpTransport::Stdio { command, args, env, cwd } => {
                let (child, transport, diag) =
                    stdio::spawn(command, args, env, cwd.as_ref()).map_err(|e| start_err(format!("`{command}` could not be run: {e}")))?;
                match tokio::time::timeout(self.limits.start, client_info().serve(transport)).await {
                    Ok(Ok(service)) => Ok(Live { service, child: Some(child), diag }),
                    Ok(Err(e)) => {
                        let why = match diag.malformed() {
                            Some(m) => m,
                            None => match child.exit_status(Duration::from_millis(500)).await {
                                Some(st) => format!("it exited ({st}) during the handshake: {e}"),
                                None => format!("the handshake failed: {e}"),
                            },
                        };
                        Err(start_err(with_stderr(why, &diag)))
                    }
                    Err(_) => Err(start_err(with_stderr(format!("it did not answer the handshake within {ms} ms"), &diag))),
                }
            }
            McpTransport::Http { url, headers } => {
                let transport = super::http::transport(url, headers, self.limits.start).map_err(start_err)?;
                match tokio::time::timeout(self.limits.start, client_info().serve(transport)).await {
                    Ok(Ok(service)) => Ok(Live { service, child: None, diag: Arc::new(Diagnostics::default()) }),
                    Ok(Err(e)) => Err(start_err(format!("the handshake with {url} failed: {e}"))),
                    Err(_) => Err(start_err(format!("{url} did not answer the handshake within {ms} ms"))),
                }
            }
        }
    }

    /// A connected peer, starting (or restarting) the server when needed.
    async fn peer(&self) -> Result<(Peer<RoleClient>, Arc<Diagnostics>), ToolError> {
        let mut conn = self.conn.lock().await;
        if let Conn::Up(l) = &*conn
            && !l.closed()
        {
            return Ok((l.service.peer().clone(), l.diag.clone()));
        }
        if let Conn::Broken(e) = &*conn {
            return Err(e.clone());
        }
        let started = self.starts.load(std::sync::atomic::Ordering::Relaxed);
        if started > self.limits.max_restarts {
            let e = ToolError::McpCrashed { server: self.name(), message: format!("it stopped {} times; it is not started again in this session", started) };
            *conn = Conn::Broken(e.clone());
            return Err(e);
        }
        if started > 0 {
            tracing::warn!(server = %self.cfg.name, "MCP server stopped; starting it again");
        }
        // Drop (kill) the old one before starting the new one.
        *conn = Conn::Idle;
        self.starts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let live = self.start().await?;
        let out = (live.service.peer().clone(), live.diag.clone());
        *conn = Conn::Up(Box::new(live));
        Ok(out)
    }

    /// Why the connection ended, for a request that lost it.
    async fn lost(&self, diag: &Diagnostics) -> ToolError {
        if let Some(m) = diag.malformed() {
            return ToolError::McpProtocol { server: self.name(), message: m };
        }
        let status = {
            let conn = self.conn.lock().await;
            match &*conn {
                Conn::Up(l) => match &l.child {
                    Some(c) => c.exit_status(Duration::from_millis(500)).await.map(|s| s.to_string()),
                    None => None,
                },
                _ => None,
            }
        };
        let why = match status {
            Some(s) => format!("it exited ({s})"),
            None => "the connection closed".to_owned(),
        };
        ToolError::McpCrashed { server: self.name(), message: with_stderr(why, diag) }
    }

    fn map_err(&self, tool: &str, e: ServiceError) -> Result<ToolError, ServiceError> {
        Ok(match e {
            ServiceError::McpError(d) => ToolError::McpRemote { server: self.name(), tool: tool.into(), message: format!("{} (code {})", d.message, d.code.0) },
            ServiceError::UnexpectedResponse => {
                ToolError::McpProtocol { server: self.name(), message: format!("the answer to `{tool}` is not a valid result") }
            }
            ServiceError::Timeout { timeout } => {
                ToolError::McpTimeout { server: self.name(), tool: tool.into(), ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX) }
            }
            other => return Err(other),
        })
    }

    /// Lists the server's tools (starting it if needed), page by page, at
    /// most [`Limits::max_pages`] pages and [`Limits::max_tools`] tools:
    /// past either the server is refused ([`ToolError::McpOverLimit`]) and
    /// no further page is asked for, so what is held stays bounded whatever
    /// the server lists (rmcp's `list_all_tools` gathers every page).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ToolError> {
        let (peer, diag) = self.peer().await?;
        let limits = self.limits;
        let over = |message: String| ToolError::McpOverLimit { server: self.name(), message };
        let pages = async {
            let mut tools: Vec<Tool> = Vec::new();
            let mut cursor: Option<String> = None;
            for page in 1.. {
                if page > limits.max_pages {
                    return Ok(Err(over(format!("its tool list goes on past {} pages (the most asked for)", limits.max_pages))));
                }
                let r = peer.list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor.take()))).await?;
                if tools.len() + r.tools.len() > limits.max_tools {
                    return Ok(Err(over(format!("it lists more than {} tools (the most offered from one server)", limits.max_tools))));
                }
                tools.extend(r.tools);
                match r.next_cursor {
                    Some(c) if !c.is_empty() => cursor = Some(c),
                    _ => break,
                }
            }
            Ok::<_, ServiceError>(Ok(tools))
        };
        match tokio::time::timeout(self.limits.call, pages).await {
            Err(_) => Err(ToolError::McpTimeout { server: self.name(), tool: "tools/list".into(), ms: self.call_ms() }),
            Ok(Ok(t)) => t,
            Ok(Err(e)) => match self.map_err("tools/list", e) {
                Ok(t) => Err(t),
                Err(_) => Err(self.lost(&diag).await),
            },
        }
    }

    fn call_ms(&self) -> u64 {
        u64::try_from(self.limits.call.as_millis()).unwrap_or(u64::MAX)
    }

    /// Calls one tool; `arguments` must be a JSON object.
    pub async fn call(&self, tool: &str, arguments: serde_json::Map<String, serde_json::Value>) -> Result<CallToolResult, ToolError> {
        let (peer, diag) = self.peer().await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // Dropping the request at the time limit sends the server a cancellation.
        match tokio::time::timeout(self.limits.call, peer.call_tool(params)).await {
            Err(_) => Err(ToolError::McpTimeout { server: self.name(), tool: tool.into(), ms: self.call_ms() }),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => match self.map_err(tool, e) {
                Ok(t) => Err(t),
                Err(_) => Err(self.lost(&diag).await),
            },
        }
    }
}

fn with_stderr(why: String, diag: &Diagnostics) -> String {
    let tail = diag.stderr_tail();
    if tail.is_empty() { why } else { format!("{why}; its last error output: {tail}") }
}
