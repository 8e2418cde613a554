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

/// What kind of failure a call met: the loop's own refusals, or a tool's error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum FailureKind {
    /// The model named a tool that is not offered.
    UnknownTool,
    /// The arguments were over the size limit; they were not kept.
    ArgumentsTooLarge,
    /// The approval policy refuses this call.
    DeniedByPolicy,
    /// The user said no (or did not answer).
    ApprovalDenied,
    /// The answer was for another call or other arguments.
    ApprovalMismatch,
    /// The same call (name and arguments) was already made.
    RepeatedCall,
    /// Not run: the investigation was stopping.
    NotRun,
    /// The reply held a tool call that could not be parsed.
    MalformedToolCall,
    /// The program stopped during the call; it was not re-run.
    Interrupted,
    /// A failure of ours (a result that could not be encoded).
    Internal,
    /// The tool's own error, by its code (`timeout`, `path_escapes`, `address_blocked`, …).
    Tool(String),
}

impl FailureKind {
    /// Its code, as the model and the events see it.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            FailureKind::UnknownTool => "unknown_tool",
            FailureKind::ArgumentsTooLarge => "arguments_too_large",
            FailureKind::DeniedByPolicy => "denied_by_policy",
            FailureKind::ApprovalDenied => "approval_denied",
            FailureKind::ApprovalMismatch => "approval_mismatch",
            FailureKind::RepeatedCall => "repeated_call",
            FailureKind::NotRun => "not_run",
            FailureKind::MalformedToolCall => "malformed_tool_call",
            FailureKind::Interrupted => "interrupted",
            FailureKind::Internal => "internal",
            FailureKind::Tool(code) => code,
        }
    }
}

impl From<FailureKind> for String {
    fn from(k: FailureKind) -> Self {
        k.as_str().to_owned()
    }
}

impl From<String> for FailureKind {
    fn from(s: String) -> Self {
        const OURS: [FailureKind; 10] = [
            FailureKind::UnknownTool,
            FailureKind::ArgumentsTooLarge,
            FailureKind::DeniedByPolicy,
            FailureKind::ApprovalDenied,
            FailureKind::ApprovalMismatch,
            FailureKind::RepeatedCall,
            FailureKind::NotRun,
            FailureKind::MalformedToolCall,
            FailureKind::Interrupted,
            FailureKind::Internal,
        ];
        OURS.into_iter().find(|k| k.as_str() == s).unwrap_or(FailureKind::Tool(s))
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a tool did not give a result; fed back to the model as a structured error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The message, written for the model to act on.
    pub message: String,
}

impl ToolFailure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        ToolFailure { kind, message: message.into() }
    }

    /// The text the model sees: `ERROR kind: message`.
    #[must_use]
    pub fn to_model_text(&self) -> String {
        format!("ERROR {}: {}", self.kind, self.message)
    }
}

impl From<ToolError> for ToolFailure {
    fn from(e: ToolError) -> Self {
        let kind = match &e {
            ToolError::UnknownTool(_) => FailureKind::UnknownTool,
            ToolError::ArgumentsTooLarge { .. } => FailureKind::ArgumentsTooLarge,
            ToolError::DeniedByPolicy(_) => FailureKind::DeniedByPolicy,
            ToolError::ApprovalDenied(_) => FailureKind::ApprovalDenied,
            ToolError::ApprovalMismatch(_) => FailureKind::ApprovalMismatch,
            other => FailureKind::Tool(other.code().to_owned()),
        };
        ToolFailure { kind, message: e.to_string() }
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

    /// Lets calls to `host` that carry data run without asking for the rest
    /// of the session (the user's "allow this host"). Runners without
    /// host approvals refuse.
    ///
    /// # Errors
    /// A failure saying why the host was not approved.
    fn approve_host(&self, host: &str) -> Result<(), ToolFailure> {
        Err(ToolFailure::new(FailureKind::Tool("unsupported".into()), format!("these tools cannot approve the host {host} for the session")))
    }

    /// Remembers the user's "always" answer for the MCP tool behind `name`
    /// (its server and tool) for the rest of the session: `approve` runs its
    /// later calls unasked, otherwise they are refused unasked. Runners
    /// without MCP tools refuse.
    ///
    /// # Errors
    /// A failure saying why the answer was not remembered (not an MCP tool).
    fn remember_tool(&self, name: &str, approve: bool) -> Result<(), ToolFailure> {
        let _ = approve;
        Err(ToolFailure::new(FailureKind::Tool("unsupported".into()), format!("these tools cannot remember an answer for {name}")))
    }

    /// Text the user wrote (the system prompt they set, the question, a
    /// follow-up): what it names an `http` call may repeat without it
    /// counting as data (mf-tools' sending rule, [`ToolRegistry::supplied_by_user`]).
    /// Runners without that rule ignore it.
    fn supplied_by_user(&self, text: &str) {
        let _ = text;
    }

    /// Runs one call; `approval` is required for calls that asked.
    fn run<'a>(&'a self, call_id: &'a str, name: &'a str, args_json: &'a str, approval: Option<&'a Approval>) -> BoxFuture<'a, Result<ToolReply, ToolFailure>>;
}

impl ToolRunner for ToolRegistry {
    fn specs(&self) -> Vec<ToolSpec> {
        self.descriptors().into_iter().map(|d| ToolSpec { name: d.name, description: d.description, parameters: d.parameters }).collect()
    }

    fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> Result<Requirement, ToolFailure> {
        ToolRegistry::requirement(self, call_id, name, args_json).map_err(ToolFailure::from)
    }

    fn approve_host(&self, host: &str) -> Result<(), ToolFailure> {
        ToolRegistry::approve_host(self, host).map(|_| ()).map_err(ToolFailure::from)
    }

    fn supplied_by_user(&self, text: &str) {
        ToolRegistry::supplied_by_user(self, text);
    }

    fn remember_tool(&self, name: &str, approve: bool) -> Result<(), ToolFailure> {
        let origin = self.mcp_tool(name).ok_or_else(|| {
            ToolFailure::new(FailureKind::Tool("unsupported".into()), format!("{name} is not a tool from an MCP server; only those answers are remembered"))
        })?;
        let mode = if approve { mf_tools::policy::Mode::Auto } else { mf_tools::policy::Mode::Deny };
        self.remember_mcp(&origin.server, &origin.tool, mode);
        Ok(())
    }

    fn run<'a>(&'a self, call_id: &'a str, name: &'a str, args_json: &'a str, approval: Option<&'a Approval>) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            let out = ToolRegistry::run(self, call_id, name, args_json, approval).await?;
            let truncated = out.truncation_note();
            let content = match &out {
                // The body is what the model needs; status and URL frame it.
                mf_tools::ToolOutput::Http(r) => format!("HTTP {} {}\n{}", r.status, r.url, r.body),
                // An MCP tool's text is its answer.
                mf_tools::ToolOutput::Mcp(m) => m.text.clone(),
                other => serde_json::to_string(other).map_err(|e| ToolFailure::new(FailureKind::Internal, e.to_string()))?,
            };
            Ok(ToolReply { content, truncated })
        })
    }
}

/// How far an answer to a call that asked reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// This call only.
    #[default]
    Call,
    /// An approval also lets later calls to the same host run unasked for
    /// the rest of the session.
    Host,
    /// For a tool from an MCP server: the answer (approve or deny) holds for
    /// every later call of that server's tool in the session (a face may
    /// also keep it in its settings).
    Tool,
}

/// An answer to a call that asked, with how far it reaches. The loop does
/// the remembering (the host approved for the session, the MCP tool's
/// answer), so every face's approver only says what the user chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The answer, bound to the call and its argument hash.
    pub approval: Approval,
    /// How far it reaches.
    pub scope: Scope,
}

impl Decision {
    /// The answer `approved` to `r`, reaching as far as `scope` where the
    /// request allows it: [`Scope::Host`] only for an approval of a call
    /// that names a host, [`Scope::Tool`] only for a tool from an MCP
    /// server; otherwise this call only.
    #[must_use]
    pub fn new(r: &ApprovalRequest, approved: bool, scope: Scope) -> Self {
        let scope = match scope {
            Scope::Host if approved && r.host.is_some() => Scope::Host,
            Scope::Tool if r.mcp.is_some() => Scope::Tool,
            _ => Scope::Call,
        };
        Decision { approval: if approved { r.approve() } else { r.deny() }, scope }
    }

    /// Whether the call may run.
    #[must_use]
    pub fn approved(&self) -> bool {
        self.approval.decision == mf_tools::policy::Decision::Approved
    }
}

/// Decides on calls whose policy is `ask`. `None` (no answer) is a denial.
pub trait Approver: Send + Sync {
    /// Decides, and says how far the answer reaches.
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Option<Decision>>;
}

/// Always the same answer (`--approve auto|deny` for calls that ask).
#[derive(Debug, Clone, Copy)]
pub struct FixedApprover(pub bool);

impl Approver for FixedApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Decision>> {
        let d = Decision::new(r, self.0, Scope::Call);
        Box::pin(async move { Some(d) })
    }
}

/// Never answers (an interactive approver whose user walked away): every call that asks is denied.
#[derive(Debug, Clone, Copy)]
pub struct NoAnswer;

impl Approver for NoAnswer {
    fn decide<'a>(&'a self, _r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Decision>> {
        Box::pin(async { None })
    }
}
