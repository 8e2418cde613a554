//! Approval policy types: which calls run automatically, which ask the user,
//! which are denied; and approvals bound to one call and its exact arguments.
//! The interactive flow (asking, waiting, timing out) is the agent's; no
//! answer must be treated as deny.

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

/// Per-tool modes. Default: read-only tools auto, code and non-GET HTTP ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalPolicy {
    /// `list_files`, `read_file`, `search_files`.
    pub files: Mode,
    /// `http` with GET.
    pub http_get: Mode,
    /// `http` with any other method.
    pub http_write: Mode,
    /// `run_code`.
    pub code: Mode,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy { files: Mode::Auto, http_get: Mode::Auto, http_write: Mode::Ask, code: Mode::Ask }
    }
}

impl ApprovalPolicy {
    /// The same mode for every tool (`--approve auto|ask|deny`).
    pub fn all(mode: Mode) -> Self {
        ApprovalPolicy { files: mode, http_get: mode, http_write: mode, code: mode }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Canonical JSON of the arguments (keys sorted, no spaces): what the user sees.
    pub arguments: String,
    /// sha256 (hex) of `tool`, a NUL byte and `arguments`.
    pub args_sha256: String,
}

impl ApprovalRequest {
    /// Build the request for a call.
    pub fn new(call_id: &str, tool: &str, args: &serde_json::Value) -> Self {
        let arguments = canonical_json(args);
        ApprovalRequest { call_id: call_id.into(), tool: tool.into(), args_sha256: args_hash(tool, &arguments), arguments }
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

fn args_hash(tool: &str, canonical: &str) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0u8]);
    h.update(canonical.as_bytes());
    hex::encode(h.finalize())
}

/// Canonical JSON: object keys sorted (recursively), no insignificant spaces.
/// Independent of serde_json's `preserve_order` feature.
pub fn canonical_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(x) = m.get(*k) {
                    write_canonical(x, out);
                }
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_is_key_order_independent() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,2],"x":"s"}}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{ "a": {"x":"s","y":[1,2]}, "b":1 }"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
        assert_eq!(ApprovalRequest::new("c1", "http", &a).args_sha256, ApprovalRequest::new("c1", "http", &b).args_sha256);
        assert_ne!(ApprovalRequest::new("c1", "http", &a).args_sha256, ApprovalRequest::new("c1", "run_code", &a).args_sha256);
    }
}
