//! The approver that waits for the UI: a call whose policy is `ask` parks
//! here until `approve_tool_call` answers it, with the exact argument hash
//! the UI was shown. No answer within the timeout, or the investigation
//! stopping, is a denial (`mf_agent::Approver`: `None` is a denial).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
pub use mf_agent::Scope;
use mf_agent::{Approver, Decision};
use mf_tools::mcp::McpToolRef;
use mf_tools::policy::ApprovalRequest;
use tokio::sync::oneshot;

use crate::error::{CmdResult, CommandError};

/// How long a call waits for the user before it is denied.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// A call waiting for its answer.
#[derive(Debug)]
struct Pending {
    args_sha256: String,
    mcp: Option<McpToolRef>,
    tx: oneshot::Sender<(bool, Scope)>,
}

/// Pending approvals of one investigation.
#[derive(Debug)]
pub struct UiApprover {
    pending: Mutex<HashMap<String, Pending>>,
    timeout: Duration,
}

impl UiApprover {
    /// An approver whose questions expire after `timeout`.
    #[must_use]
    pub fn new(timeout: Duration) -> Self {
        Self { pending: Mutex::new(HashMap::new()), timeout }
    }

    /// The user's answer to call `call_id`, shown with `args_sha256`.
    ///
    /// # Errors
    /// `no_pending_approval` when nothing waits under that call id (already
    /// answered, timed out, stopped); `arguments_changed` when the hash is
    /// not the one of the waiting call (the call stays pending).
    pub fn answer(&self, call_id: &str, args_sha256: &str, approved: bool) -> CmdResult<()> {
        self.answer_scoped(call_id, args_sha256, approved, Scope::Call).map(|_| ())
    }

    /// [`UiApprover::answer`] for `scope`. Returns the MCP server and tool
    /// the answer is to be remembered for (with [`Scope::Tool`]).
    ///
    /// # Errors
    /// As [`UiApprover::answer`]; `invalid_argument` for [`Scope::Tool`] on a call
    /// that is not a tool from an MCP server (the call stays pending).
    pub fn answer_scoped(&self, call_id: &str, args_sha256: &str, approved: bool, scope: Scope) -> CmdResult<Option<McpToolRef>> {
        let mut p = self.pending.lock().map_err(|_| CommandError::internal("approval table poisoned"))?;
        let Some(waiting) = p.get(call_id) else {
            return Err(CommandError::new(
                "no_pending_approval",
                format!("No tool call {call_id} is waiting for approval (it was answered, timed out or the investigation stopped)."),
            ));
        };
        if waiting.args_sha256 != args_sha256 {
            return Err(CommandError::new(
                "arguments_changed",
                format!("The approval was for other arguments than tool call {call_id} has; it was not applied."),
            ));
        }
        let remembered =
            match scope {
                Scope::Tool => Some(waiting.mcp.clone().ok_or_else(|| {
                    CommandError::invalid(format!("Tool call {call_id} is not a tool from an MCP server; only those answers are remembered."))
                })?),
                Scope::Call | Scope::Host => None,
            };
        if let Some(w) = p.remove(call_id) {
            // The loop may have stopped meanwhile; then nothing waits.
            let _ = w.tx.send((approved, scope));
        }
        Ok(remembered)
    }

    /// Denies everything pending (the investigation stops).
    pub fn deny_all(&self) {
        if let Ok(mut p) = self.pending.lock() {
            for (_, w) in p.drain() {
                let _ = w.tx.send((false, Scope::Call));
            }
        }
    }
}

impl Approver for UiApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Decision>> {
        let (tx, rx) = oneshot::channel();
        let parked =
            self.pending.lock().map(|mut p| p.insert(r.call_id.clone(), Pending { args_sha256: r.args_sha256.clone(), mcp: r.mcp.clone(), tx })).is_ok();
        Box::pin(async move {
            if !parked {
                return None;
            }
            let answer = tokio::time::timeout(self.timeout, rx).await;
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&r.call_id);
            }
            match answer {
                Ok(Ok((approved, scope))) => Some(Decision::new(r, approved, scope)),
                // Timed out, or the sender was dropped: no answer.
                _ => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use mf_tools::policy::Decision as Verdict;
    use std::sync::Arc;

    fn req() -> ApprovalRequest {
        ApprovalRequest::new("call_1", "http", &serde_json::json!({"url": "http://127.0.0.1:9/x", "method": "POST"}))
    }

    async fn wait_parked(a: &UiApprover) {
        while a.pending.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn the_users_answer_is_bound_to_the_shown_arguments() {
        let a = Arc::new(UiApprover::new(Duration::from_secs(30)));
        let r = req();
        let a2 = a.clone();
        let r2 = r.clone();
        let waiting = tokio::spawn(async move { a2.decide(&r2).await });
        wait_parked(&a).await;
        // A hash of other arguments is refused and the call keeps waiting.
        let e = a.answer("call_1", "00ff", true).unwrap_err();
        assert_eq!(e.code, "arguments_changed");
        assert_eq!(a.answer("call_9", &r.args_sha256, true).unwrap_err().code, "no_pending_approval");
        a.answer("call_1", &r.args_sha256, true).unwrap();
        let got = waiting.await.unwrap().unwrap();
        assert_eq!(got.approval.decision, Verdict::Approved);
        assert_eq!(got.approval.args_sha256, r.args_sha256);
        assert_eq!(got.scope, Scope::Call);
        // Answered once: a second answer finds nothing.
        assert_eq!(a.answer("call_1", &r.args_sha256, false).unwrap_err().code, "no_pending_approval");
    }

    #[tokio::test]
    async fn a_denial_and_a_stop_both_deny() {
        let a = Arc::new(UiApprover::new(Duration::from_secs(30)));
        let r = req();
        let (a2, r2) = (a.clone(), r.clone());
        let waiting = tokio::spawn(async move { a2.decide(&r2).await });
        wait_parked(&a).await;
        a.answer("call_1", &r.args_sha256, false).unwrap();
        assert_eq!(waiting.await.unwrap().unwrap().approval.decision, Verdict::Denied);

        let (a2, r2) = (a.clone(), r.clone());
        let waiting = tokio::spawn(async move { a2.decide(&r2).await });
        wait_parked(&a).await;
        a.deny_all();
        assert_eq!(waiting.await.unwrap().unwrap().approval.decision, Verdict::Denied);
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_in_time_is_no_approval() {
        let a = UiApprover::new(Duration::from_secs(300));
        let r = req();
        assert_eq!(a.decide(&r).await, None);
        assert!(a.pending.lock().unwrap().is_empty(), "the expired question is gone");
        assert_eq!(a.answer("call_1", &r.args_sha256, true).unwrap_err().code, "no_pending_approval");
    }

    #[tokio::test]
    async fn two_pending_approvals_answered_out_of_order_reach_their_own_calls() {
        let a = Arc::new(UiApprover::new(Duration::from_secs(30)));
        let r1 = req();
        let r2 = ApprovalRequest::new("call_2", "http", &serde_json::json!({"url": "http://127.0.0.1:9/y", "method": "POST", "body": "b"}));
        let (a1, q1) = (a.clone(), r1.clone());
        let first = tokio::spawn(async move { a1.decide(&q1).await });
        let (a2, q2) = (a.clone(), r2.clone());
        let second = tokio::spawn(async move { a2.decide(&q2).await });
        while a.pending.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        // The second is answered first (approved for its host), then the first (denied).
        a.answer_scoped("call_2", &r2.args_sha256, true, Scope::Host).unwrap();
        a.answer("call_1", &r1.args_sha256, false).unwrap();
        let (one, two) = (first.await.unwrap().unwrap(), second.await.unwrap().unwrap());
        assert_eq!((one.approval.call_id.as_str(), one.approval.decision, one.scope), ("call_1", Verdict::Denied, Scope::Call));
        assert_eq!((two.approval.call_id.as_str(), two.approval.decision), ("call_2", Verdict::Approved));
        assert_eq!(two.scope, Scope::Host, "the second was approved for its host");
    }

    #[tokio::test]
    async fn always_is_only_for_mcp_tools_and_names_their_server_and_tool() {
        let a = Arc::new(UiApprover::new(Duration::from_secs(30)));
        let origin = McpToolRef { server: "tickets".into(), tool: "close".into() };
        let r = ApprovalRequest::for_mcp("call_3", "tickets__close", origin.clone(), &serde_json::json!({"id": 7}));
        let (a1, q1) = (a.clone(), r.clone());
        let waiting = tokio::spawn(async move { a1.decide(&q1).await });
        wait_parked(&a).await;
        // An http call cannot be answered "always"; the MCP call can, even with a denial.
        let h = req();
        let (a2, q2) = (a.clone(), h.clone());
        let http = tokio::spawn(async move { a2.decide(&q2).await });
        while a.pending.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(a.answer_scoped("call_1", &h.args_sha256, true, Scope::Tool).unwrap_err().code, "invalid_argument");
        assert_eq!(a.answer_scoped("call_3", &r.args_sha256, false, Scope::Tool).unwrap(), Some(origin));
        let d = waiting.await.unwrap().unwrap();
        assert_eq!((d.approval.decision, d.scope), (Verdict::Denied, Scope::Tool), "the denial holds for the tool");
        a.answer("call_1", &h.args_sha256, true).unwrap();
        let d = http.await.unwrap().unwrap();
        assert_eq!((d.approval.decision, d.scope), (Verdict::Approved, Scope::Call));
    }
}
