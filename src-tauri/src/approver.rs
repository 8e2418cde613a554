//! The approver that waits for the UI: a call whose policy is `ask` parks
//! here until `approve_tool_call` answers it, with the exact argument hash
//! the UI was shown. No answer within the timeout, or the investigation
//! stopping, is a denial (`mf_agent::Approver`: `None` is a denial).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use mf_agent::Approver;
use mf_tools::policy::{Approval, ApprovalRequest};
use tokio::sync::oneshot;

use crate::error::{CmdResult, CommandError};

/// How long a call waits for the user before it is denied.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Pending approvals of one investigation.
#[derive(Debug)]
pub struct UiApprover {
    pending: Mutex<HashMap<String, (String, oneshot::Sender<bool>)>>,
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
        let mut p = self.pending.lock().map_err(|_| CommandError::internal("approval table poisoned"))?;
        match p.get(call_id) {
            None => Err(CommandError::new("no_pending_approval", format!("No tool call {call_id} is waiting for approval (it was answered, timed out or the investigation stopped)."))),
            Some((hash, _)) if hash != args_sha256 => Err(CommandError::new(
                "arguments_changed",
                format!("The approval was for other arguments than tool call {call_id} has; it was not applied."),
            )),
            Some(_) => {
                if let Some((_, tx)) = p.remove(call_id) {
                    // The loop may have stopped meanwhile; then nothing waits.
                    let _ = tx.send(approved);
                }
                Ok(())
            }
        }
    }

    /// Denies everything pending (the investigation stops).
    pub fn deny_all(&self) {
        if let Ok(mut p) = self.pending.lock() {
            for (_, (_, tx)) in p.drain() {
                let _ = tx.send(false);
            }
        }
    }
}

impl Approver for UiApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Approval>> {
        let (tx, rx) = oneshot::channel();
        let parked = self.pending.lock().map(|mut p| p.insert(r.call_id.clone(), (r.args_sha256.clone(), tx))).is_ok();
        Box::pin(async move {
            if !parked {
                return None;
            }
            let answer = tokio::time::timeout(self.timeout, rx).await;
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&r.call_id);
            }
            match answer {
                Ok(Ok(true)) => Some(r.approve()),
                Ok(Ok(false)) => Some(r.deny()),
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
    use mf_tools::policy::Decision;
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
        assert_eq!(got.decision, Decision::Approved);
        assert_eq!(got.args_sha256, r.args_sha256);
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
        assert_eq!(waiting.await.unwrap().unwrap().decision, Decision::Denied);

        let (a2, r2) = (a.clone(), r.clone());
        let waiting = tokio::spawn(async move { a2.decide(&r2).await });
        wait_parked(&a).await;
        a.deny_all();
        assert_eq!(waiting.await.unwrap().unwrap().decision, Decision::Denied);
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_in_time_is_no_approval() {
        let a = UiApprover::new(Duration::from_secs(300));
        let r = req();
        assert_eq!(a.decide(&r).await, None);
        assert!(a.pending.lock().unwrap().is_empty(), "the expired question is gone");
        assert_eq!(a.answer("call_1", &r.args_sha256, true).unwrap_err().code, "no_pending_approval");
    }
}
