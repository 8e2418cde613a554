//! Approvals bound to the call and its arguments.

use std::sync::Arc;

use futures::future::BoxFuture;
use mf_agent::{AgentEvent, Approver, Decision, FixedApprover, NoAnswer, Scope};
use mf_forgetting::StrategyKind;
use mf_tools::policy::ApprovalRequest;
use serde_json::json;

use crate::harness::*;
use crate::scripted::*;

struct WrongApprover;
impl Approver for WrongApprover {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, Option<Decision>> {
        // Approves other arguments than the ones asked about.
        let other = ApprovalRequest::new(&r.call_id, &r.tool, &json!({"path": "/etc/passwd"}));
        Box::pin(async move { Some(Decision::new(&other, true, Scope::Call)) })
    }
}

#[tokio::test]
async fn approvals_are_bound_to_the_call_and_its_arguments() {
    let script = || vec![Reply::Call("write", json!({"path": "a.txt"})), Reply::Text("done")];
    let cases: Vec<(Arc<dyn Approver>, bool, &str)> = vec![
        (Arc::new(FixedApprover(true)), true, "user"),
        (Arc::new(FixedApprover(false)), false, "user"),
        (Arc::new(NoAnswer), false, "no answer"),
        (Arc::new(WrongApprover), false, "mismatch"),
    ];
    for (approver, runs, by) in cases {
        let tools = world();
        let (_, sink) = run(Scripted::new(4096, script()), tools.clone(), approver, settings(StrategyKind::V2), "write it").await;
        let (call_id, hash) = sink
            .events
            .iter()
            .find_map(|e| if let AgentEvent::ApprovalRequested { call_id, args_sha256, .. } = e { Some((call_id.clone(), args_sha256.clone())) } else { None })
            .unwrap();
        assert_eq!(hash, ApprovalRequest::new(&call_id, "write", &json!({"path": "a.txt"})).args_sha256);
        let decided = sink
            .events
            .iter()
            .find_map(|e| if let AgentEvent::ApprovalDecided { approved, by, .. } = e { Some((*approved, by.clone())) } else { None })
            .unwrap();
        assert_eq!(decided, (runs, by.to_string()));
        assert_eq!(tools.runs.lock().unwrap().len(), usize::from(runs), "{by}");
    }
}
