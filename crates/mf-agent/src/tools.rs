//! The narrow tool interface the loop drives, and approvals.
//!
//! `mf-tools` implements [`ToolRunner`] with its contained tools; tests use
//! their own. An approval is bound to a call id and the SHA-256 of the exact
//! (canonical) arguments: a decision for anything else is a denial.

use futures::future::BoxFuture;
use mf_inference::ToolSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Per-tool approval policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Runs without asking.
    Auto,
    /// Asks the [`Approver`].
    Ask,
    /// Never runs.
    Deny,
}

/// Why a tool did not give a result; fed back to the model as a structured error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// A short type (`refused`, `timeout`, `not_found`, ...).
    pub kind: String,
    /// The message.
    pub message: String,
}

/// Tools the model may call.
pub trait ToolRunner: Send + Sync {
    /// Descriptors with JSON schemas, given to the model.
    fn specs(&self) -> Vec<ToolSpec>;
    /// The approval policy for a call of `name` with `arguments`.
    fn policy(&self, name: &str, arguments: &serde_json::Value) -> Policy;
    /// Whether a call has side effects (never re-run without approval on resume).
    fn has_side_effects(&self, name: &str, arguments: &serde_json::Value) -> bool;
    /// Runs one call.
    fn run<'a>(&'a self, name: &'a str, arguments: &'a serde_json::Value) -> BoxFuture<'a, Result<String, ToolFailure>>;
}

/// What the approver is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments.
    pub arguments: serde_json::Value,
    /// [`arguments_hash`] of them.
    pub arguments_hash: String,
}

/// The answer, naming what it approves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// The call id approved or denied.
    pub call_id: String,
    /// The hash of the arguments approved or denied.
    pub arguments_hash: String,
    /// Yes or no.
    pub approved: bool,
}

/// Decides on calls whose policy is [`Policy::Ask`]. `None` (no answer) is a denial.
pub trait Approver: Send + Sync {
    /// Decides.
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalDecision>>;
}

/// Always the same answer (`--approve auto|deny`).
#[derive(Debug, Clone, Copy)]
pub struct FixedApprover(pub bool);

impl Approver for FixedApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<ApprovalDecision>> {
        let d = ApprovalDecision { call_id: r.call_id.clone(), arguments_hash: r.arguments_hash.clone(), approved: self.0 };
        Box::pin(async move { Some(d) })
    }
}

/// JSON with object keys sorted at every level.
#[must_use]
pub fn canonical_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", serde_json::Value::String((*k).clone()), map.get(*k).map(canonical_json).unwrap_or_default()))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        serde_json::Value::Array(items) => format!("[{}]", items.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// SHA-256 (hex) of the tool name and the canonical arguments.
#[must_use]
pub fn arguments_hash(name: &str, arguments: &serde_json::Value) -> String {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0u8]);
    h.update(canonical_json(arguments).as_bytes());
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_ignores_key_order_but_not_values() {
        let a = arguments_hash("http", &json!({"url": "u", "m": {"b": 1, "a": 2}}));
        let b = arguments_hash("http", &json!({"m": {"a": 2, "b": 1}, "url": "u"}));
        assert_eq!(a, b);
        assert_ne!(a, arguments_hash("http", &json!({"url": "v", "m": {"b": 1, "a": 2}})));
        assert_ne!(a, arguments_hash("files", &json!({"url": "u", "m": {"b": 1, "a": 2}})));
    }
}
