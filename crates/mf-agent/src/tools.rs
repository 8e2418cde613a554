//! The narrow tool interface the loop drives, and approvals.
//!
//! [`mf_tools::ToolRegistry`] implements [`ToolRunner`] with its contained
//! tools; tests use their own runners. Approval types and the argument hash
//! are `mf_tools::policy`'s: an [`Approval`] is bound to a call id and the
//! sha256 of the exact (canonical) arguments, and no answer is a denial.

use futures::future::BoxFuture;
use mf_inference::ToolSpec;
use mf_tools::policy::{Approval, ApprovalRequest};
use mf_tools::{Requirement, ToolError, ToolRegistry};
use serde::{Deserialize, Serialize};

/// Why a tool did not give a result; fed back to the model as a structured error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// A short type (`unknown_tool`, `invalid_arguments`, `timeout`, ...).
    pub kind: String,
    /// The message, written for the model to act on.
    pub message: String,
}

impl ToolFailure {
    /// A failure of `kind`.
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        ToolFailure { kind: kind.into(), message: message.into() }
    }

    /// The text the model sees: `ERROR kind: message`.
    #[must_use]
    pub fn to_model_text(&self) -> String {
        format!("ERROR {}: {}", self.kind, self.message)
    }
}

impl From<ToolError> for ToolFailure {
    fn from(e: ToolError) -> Self {
        ToolFailure { kind: e.code().into(), message: e.to_string() }
    }
}

/// A tool's successful result, as text for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReply {
    /// The text given to the model.
    pub content: String,
    /// A note when the tool cut its output.
    pub truncated: Option<String>,
}

/// Tools the model may call.
pub trait ToolRunner: Send + Sync {
    /// Descriptors with JSON schemas, given to the model.
    fn specs(&self) -> Vec<ToolSpec>;

    /// Whether a call may run now, or must be approved first. Parses and
    /// validates the arguments.
    ///
    /// # Errors
    /// Unknown tool, invalid or oversized arguments, a policy denial.
    fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> Result<Requirement, ToolFailure>;

    /// Runs one call; `approval` is required for calls that asked.
    fn run<'a>(
        &'a self,
        call_id: &'a str,
        name: &'a str,
        args_json: &'a str,
        approval: Option<&'a Approval>,
    ) -> BoxFuture<'a, Result<ToolReply, ToolFailure>>;
}

impl ToolRunner for ToolRegistry {
    fn specs(&self) -> Vec<ToolSpec> {
        self.descriptors()
            .into_iter()
            .map(|d| ToolSpec { name: d.name, description: d.description, parameters: d.parameters })
            .collect()
    }

    fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> Result<Requirement, ToolFailure> {
        ToolRegistry::requirement(self, call_id, name, args_json).map_err(ToolFailure::from)
    }

    fn run<'a>(
        &'a self,
        call_id: &'a str,
        name: &'a str,
        args_json: &'a str,
        approval: Option<&'a Approval>,
    ) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            let out = ToolRegistry::run(self, call_id, name, args_json, approval).await?;
            let truncated = out.truncation_note();
            let content = match &out {
                // The body is what the model needs; status and URL frame it.
                mf_tools::ToolOutput::Http(r) => format!("HTTP {} {}\n{}", r.status, r.url, r.body),
                other => serde_json::to_string(other).map_err(|e| ToolFailure::new("internal", e.to_string()))?,
            };
            Ok(ToolReply { content, truncated })
        })
    }
}

/// Decides on calls whose policy is `ask`. `None` (no answer) is a denial.
pub trait Approver: Send + Sync {
    /// Decides.
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Option<Approval>>;
}

/// Always the same answer (`--approve auto|deny` for calls that ask).
#[derive(Debug, Clone, Copy)]
pub struct FixedApprover(pub bool);

impl Approver for FixedApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Approval>> {
        let d = if self.0 { r.approve() } else { r.deny() };
        Box::pin(async move { Some(d) })
    }
}

/// Never answers (an interactive approver whose user walked away): every call that asks is denied.
#[derive(Debug, Clone, Copy)]
pub struct NoAnswer;

impl Approver for NoAnswer {
    fn decide<'a>(&'a self, _r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Approval>> {
        Box::pin(async { None })
    }
}
