//! The sending rule through the loop: what the user wrote (the question, a
//! follow-up, the system prompt) is theirs to send, so a GET to a URL it
//! names runs unasked; a URL built from what a tool returned is data, and
//! asks before it leaves for a host not approved for the session. Real
//! tools (`ToolRegistry`) against real servers on 127.0.0.1, under an
//! approver that denies everything.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use mf_agent::{Agent, AgentEvent, ExitReason, FixedApprover, NoAnswer, VecSink};
use mf_forgetting::StrategyKind;
use mf_tools::{ToolRegistry, ToolSettings};
use serde_json::json;

use crate::harness::*;
use crate::scripted::*;

/// The secret in the workspace file the model reads.
const SECRET: &str = "k7-vault-passphrase-0194";

/// Serves `body` on a free port of 127.0.0.1 for at most `max` requests;
/// returns the port and the paths requested.
fn serve(body: &'static str, max: usize) -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().take(max) {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 8192];
            let n = c.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            s2.lock().unwrap().push(req.split_whitespace().nth(1).unwrap_or("/").to_string());
            let _ = write!(c, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    (port, seen)
}

/// Tools that reach the hosts in `hosts` (loopback allowed) and read `ws`.
async fn registry(hosts: &[String], ws: Option<&std::path::Path>) -> Arc<ToolRegistry> {
    let mut s = ToolSettings::default();
    s.http.allowed_hosts = Some(hosts.to_vec());
    s.http.allow_loopback = true;
    s.workspace = ws.map(|w| vec![w.to_path_buf()]).unwrap_or_default();
    Arc::new(ToolRegistry::new(s).await.unwrap())
}

fn asked(sink: &VecSink) -> Vec<String> {
    sink.events.iter().filter_map(|e| if let AgentEvent::ApprovalRequested { summary, .. } = e { Some(summary.clone()) } else { None }).collect()
}

fn results(sink: &VecSink) -> Vec<(bool, Option<String>)> {
    sink.events.iter().filter_map(|e| if let AgentEvent::ToolResult { ok, error, .. } = e { Some((*ok, error.clone())) } else { None }).collect()
}

/// A question naming a loopback URL on an allowed host fetches it without
/// asking; the workspace's secret, put in a URL to another host, asks and
/// is refused under deny, and that host receives nothing.
#[tokio::test]
async fn a_url_the_question_names_runs_unasked_and_one_built_from_a_file_asks() {
    let (api, api_seen) = serve(r#"{"owner": "Priya Raman"}"#, 4);
    let (sink_port, sink_seen) = serve("{}", 4);
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), format!("vault passphrase: {SECRET}\n")).unwrap();
    let hosts = [format!("127.0.0.1:{api}"), format!("127.0.0.1:{sink_port}")];
    let tools = registry(&hosts, Some(ws.path())).await;
    let named = format!("http://127.0.0.1:{api}/api/owner");
    let built = format!("http://127.0.0.1:{sink_port}/collect/{SECRET}");
    let script = vec![
        Reply::Call("http", json!({"url": named})),
        Reply::Call("read_file", json!({"path": "notes.txt"})),
        Reply::Call("http", json!({"url": built})),
        Reply::Text("Priya Raman owns it."),
    ];
    let question = format!("Who owns the service? Its owner is at {named}");
    let mut agent = Agent::new(Scripted::new(4096, script), tools, Arc::new(FixedApprover(false)), settings(StrategyKind::V2)).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run(&question, &mut sink).await.unwrap();
    assert_eq!(out.reason, ExitReason::FinalAnswer);

    // The named URL ran unasked and reached its server.
    assert_eq!(*api_seen.lock().unwrap(), vec!["/api/owner".to_string()]);
    // The file's contents in a path asked (once: that call), were refused, and never left.
    let asked = asked(&sink);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("path") && asked[0].contains(SECRET), "{}", asked[0]);
    let r = results(&sink);
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r[0].0 && r[1].0, "{r:?}");
    assert_eq!(r[2], (false, Some("approval_denied".into())));
    assert!(sink_seen.lock().unwrap().is_empty(), "the secret reached {:?}", sink_seen.lock().unwrap());
}

/// Without the question naming it, the same GET is data (its path was not
/// supplied) and asks: the test above passes because the question was given.
#[tokio::test]
async fn the_same_url_not_named_by_the_user_asks() {
    let (api, api_seen) = serve(r#"{"owner": "Priya Raman"}"#, 2);
    let tools = registry(&[format!("127.0.0.1:{api}")], None).await;
    let script = vec![Reply::Call("http", json!({"url": format!("http://127.0.0.1:{api}/api/owner")})), Reply::Text("I could not look.")];
    let mut agent = Agent::new(Scripted::new(4096, script), tools, Arc::new(NoAnswer), settings(StrategyKind::V2)).unwrap();
    let mut sink = VecSink::default();
    agent.run("Who owns the service?", &mut sink).await.unwrap();
    assert_eq!(asked(&sink).len(), 1);
    assert!(api_seen.lock().unwrap().is_empty());
}

/// A resumed session gets new tools (another process): the stored question
/// and the follow-up are supplied again, so the URLs they name still run
/// unasked (one named only by the question, fetched only after the resume).
#[tokio::test]
async fn a_resumed_session_supplies_its_question_and_follow_up_again() {
    use mf_agent::{Resume, Sessions};
    let (api, api_seen) = serve(r#"{"owner": "Priya Raman", "rack": "B7"}"#, 6);
    let hosts = [format!("127.0.0.1:{api}")];
    let first = format!("http://127.0.0.1:{api}/api/owner");
    let team = format!("http://127.0.0.1:{api}/api/team");
    let second = format!("http://127.0.0.1:{api}/api/rack");
    let dir = tempfile::tempdir().unwrap();
    let spec = scripted_spec(dir.path(), StrategyKind::V2);

    let started = Sessions::new(dir.path());
    started.use_backend(&spec.engine, spec.context, Scripted::new(4096, vec![Reply::Call("http", json!({"url": first})), Reply::Text("Priya.")])).await;
    let tools = registry(&hosts, None).await;
    let launch = started.start_with_tools(spec.clone(), &format!("Who owns it? See {first} and {team}"), Arc::new(NoAnswer), None, Some(tools)).await.unwrap();
    let id = launch.id;
    let (_, out) = launch.run(&mut VecSink::default()).await;
    assert_eq!(out.unwrap().reason, ExitReason::FinalAnswer);

    let later = Sessions::new(dir.path());
    let script = vec![Reply::Call("http", json!({"url": team})), Reply::Call("http", json!({"url": second})), Reply::Text("B7.")];
    later.use_backend(&spec.engine, spec.context, Scripted::new(4096, script)).await;
    let how = Resume { follow_up: Some(format!("And its rack? See {second}")), ..Resume::default() };
    let launch = later.resume_with_tools(id, how, Arc::new(NoAnswer), None, Some(registry(&hosts, None).await)).await.unwrap();
    let mut sink = VecSink::default();
    let (_, out) = launch.run(&mut sink).await;
    assert_eq!(out.unwrap().reason, ExitReason::FinalAnswer);
    assert!(asked(&sink).is_empty(), "{:?}", asked(&sink));
    assert_eq!(*api_seen.lock().unwrap(), vec!["/api/owner".to_string(), "/api/team".into(), "/api/rack".into()]);
}
