//! Approval policy types: which calls run automatically, which ask the user,
//! which are denied; and approvals bound to one call and its exact arguments.
//! The interactive flow (asking, waiting, timing out) is the agent's; no
//! answer must be treated as deny.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What to do with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Run without asking.
    Auto,
    /// Ask the user; run only with a matching [`Approval`].
    Ask,
    /// Never run.
    Deny,
}

/// Per-tool modes. Default: read-only tools auto, code and non-GET HTTP ask,
/// and any HTTP request that carries data to a host not approved for the
/// session asks.
///
/// How an `http` call's mode is decided: `deny` for its method wins; then a
/// host the user approved for the session ([`crate::ToolRegistry::approve_host`])
/// runs without asking; then a request carrying data takes the stricter of
/// its method's mode and `http_data`; else its method's mode.
///
/// Data is anything the request holds beyond what the user or an approved
/// page supplied, on every channel it has: the host name, the path, the
/// query, each header, the body (a file's contents ride as well in
/// `/collect/<contents>` or an `X-Notes` header as in a body). What the
/// user wrote reaches the registry through
/// [`crate::ToolRegistry::supplied_by_user`]; pages fetched by requests
/// that carried no data are added by the registry (see
/// [`crate::http::Supplied`] for what counts, per channel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalPolicy {
    /// `list_files`, `read_file`, `search_files`.
    pub files: Mode,
    /// `http` with GET.
    pub http_get: Mode,
    /// `http` with any other method.
    pub http_write: Mode,
    /// `http` carrying data (on any channel: host, path, query, headers,
    /// body, beyond what the user or an approved page supplied) to a host
    /// not approved for this session, whatever its method. `deny`: nothing
    /// leaves for a new host.
    pub http_data: Mode,
    /// `run_code`.
    pub code: Mode,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy { files: Mode::Auto, http_get: Mode::Auto, http_write: Mode::Ask, http_data: Mode::Ask, code: Mode::Ask }
    }
}

impl ApprovalPolicy {
    /// The same mode for every tool (`--approve auto|ask|deny`).
    pub fn all(mode: Mode) -> Self {
        ApprovalPolicy { files: mode, http_get: mode, http_write: mode, http_data: mode, code: mode }
    }
}

impl Mode {
    /// The stricter of two modes (deny > ask > auto).
    pub fn stricter(self, other: Mode) -> Mode {
        let rank = |m: Mode| match m {
            Mode::Auto => 0,
            Mode::Ask => 1,
            Mode::Deny => 2,
        };
        if rank(other) > rank(self) { other } else { self }
    }
}

/// The decision the user gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run it.
    Approved,
    /// Do not run it.
    Denied,
}

/// A request for the user's approval of one call.
///
/// Show `summary` first (one line: what goes where), then `arguments`
/// folded. For `http`, `host` is what to pass to
/// [`crate::ToolRegistry::approve_host`] when the user approves the host for
/// the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// One line for a person, what leaves first: for `http`
    /// `POST api.example.com · 12,345 bytes · {"report": "…`, for `run_code`
    /// `run_code python · 812 bytes · import csv…`.
    pub summary: String,
    /// For `http`: the host the request goes to (`api.example.com`, or
    /// `127.0.0.1:8080` with a non-default port).
    pub host: Option<String>,
    /// For a tool from an MCP server: the server and its tool, under which
    /// the user's "always" answer is remembered
    /// ([`crate::ToolRegistry::remember_mcp`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpToolRef>,
    /// Canonical JSON of the arguments (keys sorted, no spaces): the full
    /// arguments, what the approval is bound to.
    pub arguments: String,
    /// sha256 (hex) of `tool`, a NUL byte and `arguments`.
    pub args_sha256: String,
}

/// Characters of data shown in a summary line.
const PREVIEW_CHARS: usize = 60;

impl ApprovalRequest {
    /// Build the request for a call.
    pub fn new(call_id: &str, tool: &str, args: &serde_json::Value) -> Self {
        let arguments = canonical_json(args);
        let (summary, host) = summarize(tool, args, &arguments);
        ApprovalRequest { call_id: call_id.into(), tool: tool.into(), summary, host, mcp: None, args_sha256: args_hash(tool, &arguments), arguments }
    }

    /// The request for an `http` call, its summary saying which channels
    /// carry data by `out` (what the user and approved pages did not supply).
    pub(crate) fn for_http(call_id: &str, args: &serde_json::Value, out: &crate::http::Outgoing, url: &str) -> Self {
        let mut r = Self::new(call_id, crate::HTTP, args);
        r.summary = http_summary(out, url);
        r.host = out.host.clone();
        r
    }

    /// The request for a call of `origin.tool` on MCP server `origin.server`
    /// (model-facing name `tool`): the summary names the server and its tool.
    pub fn for_mcp(call_id: &str, tool: &str, origin: McpToolRef, args: &serde_json::Value) -> Self {
        let mut r = Self::new(call_id, tool, args);
        r.summary = format!("MCP server {} · tool {} · {}", origin.server, origin.tool, preview(&r.arguments));
        r.mcp = Some(origin);
        r
    }

    /// The user's approval of exactly this call.
    pub fn approve(&self) -> Approval {
        Approval { call_id: self.call_id.clone(), args_sha256: self.args_sha256.clone(), decision: Decision::Approved }
    }

    /// The user's refusal of this call.
    pub fn deny(&self) -> Approval {
        Approval { call_id: self.call_id.clone(), args_sha256: self.args_sha256.clone(), decision: Decision::Denied }
    }
}

/// The user's answer, bound to a call id and the hash of its exact arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The call it answers.
    pub call_id: String,
    /// Hash of the arguments it was given for.
    pub args_sha256: String,
    /// Approved or denied.
    pub decision: Decision,
}

/// The summary line and, for `http`, the host.
fn summarize(tool: &str, args: &serde_json::Value, canonical: &str) -> (String, Option<String>) {
    match tool {
        crate::HTTP => match serde_json::from_value::<crate::http::HttpArgs>(args.clone()) {
            Ok(a) => {
                let out = crate::http::outgoing(&a);
                (http_summary(&out, &a.url), out.host)
            }
            Err(_) => (format!("{tool} · {}", preview(canonical)), None),
        },
        crate::RUN_CODE => {
            let lang = args["language"].as_str().unwrap_or("?");
            let code = args["code"].as_str().unwrap_or("");
            (format!("{tool} {lang} · {} bytes · {}", thousands(code.len()), preview(code)), None)
        }
        _ => (format!("{tool} · {}", preview(canonical)), None),
    }
}

/// `GET api.example.com · path, header x-token · 42 bytes · /collect/…`:
/// method, host, the channels that carry data, their size, what leaves first.
fn http_summary(out: &crate::http::Outgoing, url: &str) -> String {
    let host = out.host.clone().unwrap_or_else(|| format!("(no host in {})", preview(url)));
    let data = if out.carries_data() {
        format!("{} · {} bytes · {}", out.channels.join(", "), thousands(out.data_bytes), preview(&out.data))
    } else {
        "no data sent".to_string()
    };
    format!("{} {host} · {data}", out.method)
}

/// The first line(s) of `text`, newlines shown as `⏎`, cut at
/// [`PREVIEW_CHARS`] characters with `…`.
fn preview(text: &str) -> String {
    let flat: String = text
        .trim_start()
        .chars()
        .map(|c| {
            if c == '\n' {
                '⏎'
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    let mut out: String = flat.chars().take(PREVIEW_CHARS).collect();
    if flat.chars().count() > PREVIEW_CHARS {
        out.push('…');
    }
    out
}

/// `12345` → `12,345`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn args_hash(tool: &str, canonical: &str) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0u8]);
    h.update(canonical.as_bytes());
    hex::encode(h.finalize())
}

/// Canonical JSON: object keys sorted (recursively), no insignificant
/// spaces, independent of serde_json's `preserve_order` feature. One
/// definition for the whole workspace: the loop's repeated-call check and the
/// approval hash must agree on what "the same arguments" are.
pub use mf_forgetting::message::canonical_json;

// ---------------------------------------------------------------- MCP tools

/// Modes remembered per server and tool: `{"files": {"write_file": "auto"}}`.
/// Serialisable so the app can keep them in its settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct McpApprovals(pub BTreeMap<String, BTreeMap<String, Mode>>);

impl McpApprovals {
    /// The remembered mode of `tool` on `server`.
    #[must_use]
    pub fn get(&self, server: &str, tool: &str) -> Option<Mode> {
        self.0.get(server).and_then(|t| t.get(tool)).copied()
    }

    /// Nothing remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remembers `mode` for `tool` on `server` (`ask` forgets the answer).
    pub fn set(&mut self, server: &str, tool: &str, mode: Mode) {
        if mode == Mode::Ask {
            if let Some(t) = self.0.get_mut(server) {
                t.remove(tool);
                if t.is_empty() {
                    self.0.remove(server);
                }
            }
        } else {
            self.0.entry(server.to_owned()).or_default().insert(tool.to_owned(), mode);
        }
    }
}

/// The server and the tool behind a model-facing name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolRef {
    /// The server's configured name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_says_what_leaves_first() {
        let body = format!("{{\"report\": \"{}\"}}", "x".repeat(12_000));
        let args = serde_json::json!({"url": "https://API.example.com./upload?x=1", "method": "POST", "body": body});
        let r = ApprovalRequest::new("c1", crate::HTTP, &args);
        let want = format!(
            "POST api.example.com · path, query, body · {} bytes · {{\"report\": \"{}…",
            thousands(body.len() + "/upload?x=1".len()),
            "x".repeat(PREVIEW_CHARS - 12)
        );
        assert_eq!(r.summary, want);
        assert_eq!(r.host.as_deref(), Some("api.example.com"));
        // The full arguments are still there, and still what the approval binds.
        assert!(r.arguments.contains(&"x".repeat(12_000)));
        // A GET carries its path and query; a port that is not the default is part of the host.
        let r = ApprovalRequest::new("c2", crate::HTTP, &serde_json::json!({"url": "http://127.0.0.1:8931/s?q=secret%20notes"}));
        assert_eq!(r.summary, "GET 127.0.0.1:8931 · path, query · 19 bytes · /s?q=secret%20notes");
        // Headers too, by name.
        let rh = ApprovalRequest::new("c5", crate::HTTP, &serde_json::json!({"url": "http://h.example/", "headers": {"X-Notes": "rows: 42"}}));
        assert_eq!(rh.summary, "GET h.example · header x-notes · 17 bytes · x-notes: rows: 42");
        assert_eq!(r.host.as_deref(), Some("127.0.0.1:8931"));
        let r = ApprovalRequest::new("c3", crate::HTTP, &serde_json::json!({"url": "http://[::1]/"}));
        assert_eq!(r.summary, "GET [::1] · no data sent");
        let r = ApprovalRequest::new("c4", crate::RUN_CODE, &serde_json::json!({"language": "python", "code": "import os\nprint(1)"}));
        assert_eq!(r.summary, "run_code python · 18 bytes · import os⏎print(1)");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn stricter_mode() {
        assert_eq!(Mode::Auto.stricter(Mode::Ask), Mode::Ask);
        assert_eq!(Mode::Deny.stricter(Mode::Ask), Mode::Deny);
        assert_eq!(Mode::Ask.stricter(Mode::Auto), Mode::Ask);
    }

    #[test]
    fn canonical_is_key_order_independent() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,2],"x":"s"}}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{ "a": {"x":"s","y":[1,2]}, "b":1 }"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
        assert_eq!(ApprovalRequest::new("c1", "http", &a).args_sha256, ApprovalRequest::new("c1", "http", &b).args_sha256);
        assert_ne!(ApprovalRequest::new("c1", "http", &a).args_sha256, ApprovalRequest::new("c1", "run_code", &a).args_sha256);
    }
}
