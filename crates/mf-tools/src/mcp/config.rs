//! The `mcpServers` configuration: parsed and validated, so a mistake is an
//! error that names the server and the field before anything is started.
//!
//! ```json
//! { "mcpServers": {
//!     "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
//!                "env": { "LOG_LEVEL": "warn" }, "cwd": "/data" },
//!     "tickets": { "url": "https://tickets.example/mcp", "headers": { "Authorization": "Bearer …" } },
//!     "old": { "command": "old-server", "disabled": true }
//! } }
//! ```
//!
//! A server has either `command` (a local program spoken to over stdio, with
//! optional `args`, `env`, `cwd`) or `url` (streamable HTTP, with optional
//! `headers`); `type` (`stdio`, `http`, `streamable-http`) may say which and
//! must then agree; `disabled: true` keeps an entry without starting it.
//! Unknown fields are refused, so a typo does not silently drop a setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::ToolError;

/// Separator between the server's name and the tool's in the name the model sees.
pub const NAME_SEPARATOR: &str = "__";

/// Longest server name: the model-facing `server__tool` name must stay short.
pub const MAX_SERVER_NAME: usize = 32;

/// How to reach one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A local program; MCP messages go over its stdin and stdout.
    Stdio {
        /// The program (looked up in `PATH` when it has no slash).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for the server, beside the few it inherits
        /// ([`INHERITED_ENV`](crate::mcp::INHERITED_ENV): HOME, PATH, USER, the locale…).
        env: BTreeMap<String, String>,
        /// Working directory (default: the app's).
        cwd: Option<PathBuf>,
    },
    /// A server reached over streamable HTTP.
    Http {
        /// Its endpoint (`http` or `https`).
        url: url::Url,
        /// Headers sent with every request (for example `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// Its name: letters, digits, `-` and `_`, no `__`; the prefix of its tools' names.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Kept in the configuration but never started.
    pub disabled: bool,
}

/// Every configured server, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    /// The servers.
    pub servers: Vec<McpServerConfig>,
}

/// Headers that the MCP transport sets itself.
const RESERVED_HEADERS: [&str; 6] = ["mcp-session-id", "mcp-protocol-version", "last-event-id", "accept", "content-type", "content-length"];

fn bad(server: &str, field: &str, message: impl Into<String>) -> ToolError {
    ToolError::McpConfig { server: server.into(), field: field.into(), message: message.into() }
}

fn strings(server: &str, field: &str, v: &Value) -> Result<Vec<String>, ToolError> {
    let arr = v.as_array().ok_or_else(|| bad(server, field, "must be an array of strings"))?;
    arr.iter().enumerate().map(|(i, x)| x.as_str().map(str::to_owned).ok_or_else(|| bad(server, &format!("{field}[{i}]"), "must be a string"))).collect()
}

fn string_map(server: &str, field: &str, v: &Value) -> Result<BTreeMap<String, String>, ToolError> {
    let obj = v.as_object().ok_or_else(|| bad(server, field, "must be an object of strings"))?;
    obj.iter().map(|(k, x)| x.as_str().map(|s| (k.clone(), s.to_owned())).ok_or_else(|| bad(server, &format!("{field}.{k}"), "must be a string"))).collect()
}

/// Checks a server name: it prefixes tool names the model writes and the grammar allows.
///
/// # Errors
/// [`ToolError::McpConfig`] naming the server and the field `name`.
pub fn validate_server_name(name: &str) -> Result<(), ToolError> {
    if name.is_empty() || name.len() > MAX_SERVER_NAME {
        return Err(bad(name, "name", format!("must be 1 to {MAX_SERVER_NAME} characters")));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(bad(name, "name", "may hold only letters, digits, `-` and `_`"));
    }
    if name.contains(NAME_SEPARATOR) || name.ends_with('_') {
        return Err(bad(name, "name", format!("may not contain `{NAME_SEPARATOR}` or end with `_` (it separates the server from the tool)")));
    }
    Ok(())
}

impl McpServerConfig {
    fn from_value(name: &str, v: &Value) -> Result<Self, ToolError> {
        validate_server_name(name)?;
        let obj = v.as_object().ok_or_else(|| bad(name, "", "must be an object"))?;
        const KNOWN: [&str; 8] = ["command", "args", "env", "cwd", "url", "headers", "type", "disabled"];
        if let Some(k) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(bad(name, k, format!("is not a known field (known: {})", KNOWN.join(", "))));
        }
        let disabled = match obj.get("disabled") {
            None => false,
            Some(d) => d.as_bool().ok_or_else(|| bad(name, "disabled", "must be true or false"))?,
        };
        let kind = match obj.get("type") {
            None => None,
            Some(t) => match t.as_str() {
                Some("stdio") => Some(false),
                Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => Some(true),
                _ => return Err(bad(name, "type", "must be `stdio` or `http` (streamable HTTP)")),
            },
        };
        let transport = match (obj.get("command"), obj.get("url")) {
            (Some(_), Some(_)) => return Err(bad(name, "url", "and `command` are both set; a server has one or the other")),
            (None, None) => return Err(bad(name, "command", "is missing (give `command` for a local server or `url` for a remote one)")),
            (Some(c), None) => {
                if kind == Some(true) {
                    return Err(bad(name, "type", "says http but the server has a `command`"));
                }
                for f in ["headers"] {
                    if obj.contains_key(f) {
                        return Err(bad(name, f, "applies only to `url` servers"));
                    }
                }
                let command = c.as_str().map(str::trim).filter(|s| !s.is_empty()).ok_or_else(|| bad(name, "command", "must be a non-empty string"))?;
                let args = obj.get("args").map(|a| strings(name, "args", a)).transpose()?.unwrap_or_default();
                let env = obj.get("env").map(|e| string_map(name, "env", e)).transpose()?.unwrap_or_default();
                if let Some(k) = env.keys().find(|k| k.is_empty() || k.contains('=') || k.contains('\0')) {
                    return Err(bad(name, &format!("env.{k}"), "is not a valid variable name"));
                }
                let cwd = match obj.get("cwd") {
                    None => None,
                    Some(d) => Some(PathBuf::from(d.as_str().filter(|s| !s.is_empty()).ok_or_else(|| bad(name, "cwd", "must be a non-empty string"))?)),
                };
                McpTransport::Stdio { command: command.to_owned(), args, env, cwd }
            }
            (None, Some(u)) => {
                if kind == Some(false) {
                    return Err(bad(name, "type", "says stdio but the server has a `url`"));
                }
                for f in ["args", "env", "cwd"] {
                    if obj.contains_key(f) {
                        return Err(bad(name, f, "applies only to `command` servers"));
                    }
                }
                let s = u.as_str().ok_or_else(|| bad(name, "url", "must be a string"))?;
                let url = url::Url::parse(s).map_err(|e| bad(name, "url", format!("is not a valid URL: {e}")))?;
                if url.scheme() != "http" && url.scheme() != "https" {
                    return Err(bad(name, "url", format!("has scheme `{}`; only http and https are supported", url.scheme())));
                }
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(bad(name, "url", "has no host"));
                }
                let headers = obj.get("headers").map(|h| string_map(name, "headers", h)).transpose()?.unwrap_or_default();
                for (k, v) in &headers {
                    if RESERVED_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                        return Err(bad(name, &format!("headers.{k}"), "is set by the MCP transport itself"));
                    }
                    if reqwest_mcp::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
                        return Err(bad(name, &format!("headers.{k}"), "is not a valid header name"));
                    }
                    if reqwest_mcp::header::HeaderValue::from_str(v).is_err() {
                        return Err(bad(name, &format!("headers.{k}"), "has a value that is not a valid header value"));
                    }
                }
                McpTransport::Http { url, headers }
            }
        };
        Ok(McpServerConfig { name: name.to_owned(), transport, disabled })
    }

    /// This server in the `mcpServers` shape.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut v = match &self.transport {
            McpTransport::Stdio { command, args, env, cwd } => {
                let mut m = Map::new();
                m.insert("command".into(), json!(command));
                if !args.is_empty() {
                    m.insert("args".into(), json!(args));
                }
                if !env.is_empty() {
                    m.insert("env".into(), json!(env));
                }
                if let Some(c) = cwd {
                    m.insert("cwd".into(), json!(c.to_string_lossy()));
                }
                m
            }
            McpTransport::Http { url, headers } => {
                let mut m = Map::new();
                m.insert("url".into(), json!(url.as_str()));
                if !headers.is_empty() {
                    m.insert("headers".into(), json!(headers));
                }
                m
            }
        };
        if self.disabled {
            v.insert("disabled".into(), json!(true));
        }
        Value::Object(v)
    }
}

impl McpConfig {
    /// Parses and validates the `mcpServers` JSON (the whole file, `{"mcpServers": {…}}`).
    ///
    /// # Errors
    /// [`ToolError::McpConfig`] naming the server (empty for the file itself) and the field.
    pub fn parse(text: &str) -> Result<Self, ToolError> {
        let v: Value = serde_json::from_str(text).map_err(|e| bad("", "", format!("the file is not valid JSON: {e}")))?;
        Self::from_value(&v)
    }

    /// As [`McpConfig::parse`], from a JSON value.
    ///
    /// # Errors
    /// As [`McpConfig::parse`].
    pub fn from_value(v: &Value) -> Result<Self, ToolError> {
        let top = v.as_object().ok_or_else(|| bad("", "", "the configuration must be a JSON object with `mcpServers`"))?;
        if let Some(k) = top.keys().find(|k| k.as_str() != "mcpServers") {
            return Err(bad("", k, "is not a known field (the file holds `mcpServers`)"));
        }
        let Some(servers) = top.get("mcpServers") else {
            return Ok(McpConfig::default());
        };
        let servers = servers.as_object().ok_or_else(|| bad("", "mcpServers", "must be an object of servers by name"))?;
        let mut servers = servers.iter().map(|(name, s)| McpServerConfig::from_value(name, s)).collect::<Result<Vec<_>, _>>()?;
        // One order whatever serde_json's map keeps (sorted, or the file's with `preserve_order`).
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(McpConfig { servers })
    }

    /// Reads and validates a configuration file (`mf investigate --mcp-config FILE`).
    ///
    /// # Errors
    /// [`ToolError::Io`] when the file cannot be read, else as [`McpConfig::parse`].
    pub fn load(path: &Path) -> Result<Self, ToolError> {
        let text = std::fs::read_to_string(path).map_err(|e| ToolError::Io { path: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text)
    }

    /// The configuration in the `mcpServers` shape (what the app's settings save).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let servers: Map<String, Value> = self.servers.iter().map(|s| (s.name.clone(), s.to_value())).collect();
        json!({ "mcpServers": servers })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn err(text: &str) -> (String, String, String) {
        match McpConfig::parse(text).unwrap_err() {
            ToolError::McpConfig { server, field, message } => (server, field, message),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn parses_both_transports_and_round_trips() {
        let text = r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "pkg", "/data"], "env": {"A": "1"}, "cwd": "/tmp"},
            "remote": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer x"}},
            "off": {"command": "x", "disabled": true}
        }}"#;
        let c = McpConfig::parse(text).unwrap();
        assert_eq!(c.servers.len(), 3);
        let names: Vec<&str> = c.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["files", "off", "remote"]);
        assert!(matches!(&c.servers[0].transport, McpTransport::Stdio { command, args, .. } if command == "npx" && args.len() == 3));
        assert!(matches!(&c.servers[2].transport, McpTransport::Http { url, .. } if url.as_str() == "https://mcp.example/mcp"));
        assert!(c.servers[1].disabled);
        let again = McpConfig::from_value(&c.to_value()).unwrap();
        assert_eq!(again, c);
        assert_eq!(McpConfig::parse("{}").unwrap(), McpConfig::default());
    }

    #[test]
    fn mistakes_name_the_server_and_the_field() {
        let cases: [(&str, &str, &str); 12] = [
            (r#"{"mcpServers": {"a": {}}}"#, "a", "command"),
            (r#"{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}"#, "a", "url"),
            (r#"{"mcpServers": {"a": {"command": ""}}}"#, "a", "command"),
            (r#"{"mcpServers": {"a": {"command": "x", "args": ["ok", 3]}}}"#, "a", "args[1]"),
            (r#"{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}"#, "a", "env.K"),
            (r#"{"mcpServers": {"a": {"command": "x", "colour": 1}}}"#, "a", "colour"),
            (r#"{"mcpServers": {"a": {"url": "ftp://h/x"}}}"#, "a", "url"),
            (r#"{"mcpServers": {"a": {"url": "not a url"}}}"#, "a", "url"),
            (r#"{"mcpServers": {"a": {"url": "http://h/", "args": []}}}"#, "a", "args"),
            (r#"{"mcpServers": {"a": {"url": "http://h/", "headers": {"Mcp-Session-Id": "1"}}}}"#, "a", "headers.Mcp-Session-Id"),
            (r#"{"mcpServers": {"a__b": {"command": "x"}}}"#, "a__b", "name"),
            (r#"{"mcpServers": {"a": {"type": "stdio", "url": "http://h/"}}}"#, "a", "type"),
        ];
        for (text, server, field) in cases {
            let (s, f, m) = err(text);
            assert_eq!((s.as_str(), f.as_str()), (server, field), "{text}: {m}");
            let shown = McpConfig::parse(text).unwrap_err().to_string();
            assert!(shown.contains(server) && shown.contains(field), "{shown}");
        }
        assert_eq!(err("[1]").0, "");
        assert_eq!(err(r#"{"servers": {}}"#).1, "servers");
        assert!(err("{").2.contains("not valid JSON"));
    }
}
