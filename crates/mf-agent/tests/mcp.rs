//! The loop calling a tool of a real MCP server end to end: a scripted model
//! asks for `files__write_file` of `@modelcontextprotocol/server-filesystem`
//! (installed by scripts/setup.sh), the approval is asked with the server,
//! tool and arguments, and the server's effect and reply come back. Denied,
//! the file is never written.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::{Agent, AgentEvent, AgentSettings, Approver, FixedApprover, VecSink};
use mf_inference::{Backend, CancelToken, ChatMessage, GenerateRequest, Generation, KvStats, ModelInfo, StopReason, TokenSink, ToolCall, ToolSpec, Usage};
use mf_tools::mcp::{McpConfig, McpSettings};
use mf_tools::{ToolRegistry, ToolSettings};
use serde_json::json;

/// One scripted reply: its text and the tool call it makes, if any.
type Reply = (String, Option<(String, serde_json::Value)>);

/// A model that says what it is told, one reply per round.
struct Scripted {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<GenerateRequest>>,
}

fn tokens(messages: &[ChatMessage], tools: &[ToolSpec]) -> u32 {
    messages.iter().map(|m| 4 + m.content.chars().count().div_ceil(4) as u32).sum::<u32>() + 20 * tools.len() as u32
}

impl Backend for Scripted {
    fn generate<'a>(&'a self, request: GenerateRequest, _sink: Option<TokenSink>, _cancel: CancelToken) -> BoxFuture<'a, mf_inference::Result<Generation>> {
        Box::pin(async move {
            let prompt = tokens(&request.messages, &request.tools);
            self.requests.lock().unwrap().push(request);
            let (text, call) = self.replies.lock().unwrap().pop_front().unwrap_or(("The file is written.".into(), None));
            Ok(Generation {
                raw_text: text.clone(),
                content: text,
                thinking: None,
                tool_calls: call.map(|(name, arguments)| vec![ToolCall { id: String::new(), name, arguments }]).unwrap_or_default(),
                tool_parse_error: None,
                stop_reason: StopReason::EndOfTurn,
                usage: Usage { kv: KvStats { prompt_tokens: prompt, ..KvStats::default() }, completion_tokens: 5, thinking_tokens: 0 },
            })
        })
    }
    fn count_tokens<'a>(&'a self, messages: &'a [ChatMessage], tools: &'a [ToolSpec]) -> BoxFuture<'a, mf_inference::Result<u32>> {
        Box::pin(async move { Ok(tokens(messages, tools)) })
    }
    fn context_size(&self) -> u32 {
        8192
    }
    fn model_info(&self) -> ModelInfo {
        ModelInfo {
            name: "scripted".into(),
            backend: "test".into(),
            architecture: None,
            context_size: 8192,
            context_train: None,
            parameters: None,
            tool_format: None,
        }
    }
}

fn filesystem_server() -> String {
    let dir = match std::env::var_os("MF_MCP_SERVERS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/measured-forgetting/mcp"),
    };
    let p = dir.join("node_modules/.bin/mcp-server-filesystem");
    assert!(p.exists(), "the MCP test server is missing at {}: run scripts/setup.sh", p.display());
    p.display().to_string()
}

async fn investigate(root: &std::path::Path, approve: bool) -> (VecSink, Arc<Scripted>) {
    let args = json!({"path": root.join("report.txt"), "content": "disk web-07 is 97% full"});
    investigate_with(root, Arc::new(FixedApprover(approve)), vec![(String::new(), Some(("files__write_file".to_owned(), args)))]).await
}

async fn investigate_with(root: &std::path::Path, approver: Arc<dyn Approver>, replies: Vec<Reply>) -> (VecSink, Arc<Scripted>) {
    let config = McpConfig::from_value(&json!({"mcpServers": {"files": {"command": filesystem_server(), "args": [root]}}})).unwrap();
    let registry = ToolRegistry::new(ToolSettings { mcp: McpSettings { config, ..McpSettings::default() }, ..ToolSettings::default() }).await.unwrap();
    registry.connect_mcp().await;
    let registry = Arc::new(registry);
    let backend = Arc::new(Scripted { replies: Mutex::new(VecDeque::from(replies)), requests: Mutex::new(Vec::new()) });
    let settings = AgentSettings { reserve: 256, system_prompt: "You investigate.".into(), ..AgentSettings::default() };
    let mut agent = Agent::new(backend.clone(), registry, approver, settings).unwrap();
    let mut sink = VecSink::default();
    let run = tokio::time::timeout(std::time::Duration::from_secs(30), agent.run("Write the finding to report.txt.", &mut sink)).await;
    assert!(run.is_ok(), "the investigation is stuck; events so far: {:#?}", sink.events);
    run.unwrap().unwrap();
    (sink, backend)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_calls_an_mcp_tool_after_approval_and_never_when_denied() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();

    let (sink, backend) = investigate(&root, true).await;
    // The server's tool reached the model's request with its schema.
    let requests = backend.requests.lock().unwrap().clone();
    let first = &requests[0];
    let spec = first.tools.iter().find(|t| t.name == "files__write_file").expect("the MCP tool is offered to the model");
    assert_eq!(spec.parameters["properties"]["content"]["type"], "string");
    // The approval named server and tool, with the arguments.
    let asked = sink
        .events
        .iter()
        .find_map(|e| if let AgentEvent::ApprovalRequested { name, arguments, .. } = e { Some((name.clone(), arguments.clone())) } else { None });
    let (name, arguments) = asked.expect("an MCP tool asks by default");
    assert_eq!(name, "files__write_file");
    assert!(arguments.contains("report.txt") && arguments.contains("97% full"), "{arguments}");
    let result = sink
        .events
        .iter()
        .find_map(|e| if let AgentEvent::ToolResult { name, ok, content, .. } = e { Some((name.clone(), *ok, content.clone())) } else { None })
        .unwrap();
    assert_eq!((result.0.as_str(), result.1), ("files__write_file", true), "{}", result.2);
    assert!(result.2.contains("Successfully wrote"), "{}", result.2);
    assert_eq!(std::fs::read_to_string(root.join("report.txt")).unwrap(), "disk web-07 is 97% full");
    // The model saw the server's reply in the next round.
    let second = &requests[1];
    assert!(second.messages.iter().any(|m| m.content.contains("Successfully wrote")), "{:?}", second.messages);

    std::fs::remove_file(root.join("report.txt")).unwrap();
    let (sink, _) = investigate(&root, false).await;
    let result = sink.events.iter().find_map(|e| if let AgentEvent::ToolResult { ok, error, .. } = e { Some((*ok, error.clone())) } else { None }).unwrap();
    assert_eq!(result, (false, Some("approval_denied".into())));
    assert!(!root.join("report.txt").exists(), "a denied call reached the server");
}

/// Answers every asked call with `approve` and "always" (for its MCP server and tool).
struct Always {
    approve: bool,
    asked: Mutex<u32>,
}

impl Approver for Always {
    fn decide<'a>(&'a self, r: &'a mf_tools::policy::ApprovalRequest) -> BoxFuture<'a, Option<mf_agent::Decision>> {
        *self.asked.lock().unwrap() += 1;
        let d = mf_agent::Decision::new(r, self.approve, mf_agent::Scope::Tool);
        Box::pin(async move { Some(d) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_answer_holds_for_the_servers_tool_for_the_rest_of_the_session() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let write = |name: &str| (String::new(), Some(("files__write_file".to_owned(), json!({"path": root.join(name), "content": name}))));
    let decisions = |sink: &VecSink| -> Vec<(bool, String)> {
        sink.events.iter().filter_map(|e| if let AgentEvent::ApprovalDecided { approved, by, .. } = e { Some((*approved, by.clone())) } else { None }).collect()
    };

    // "Always allow": asked once, the second write runs unasked.
    let always = Arc::new(Always { approve: true, asked: Mutex::new(0) });
    let (sink, _) = investigate_with(&root, always.clone(), vec![write("one.txt"), write("two.txt")]).await;
    assert_eq!(*always.asked.lock().unwrap(), 1, "asked once");
    let asked = sink
        .events
        .iter()
        .find_map(|e| if let AgentEvent::ApprovalRequested { mcp, summary, .. } = e { Some((mcp.clone(), summary.clone())) } else { None })
        .unwrap();
    assert_eq!(asked.0, Some(mf_agent::McpOrigin { server: "files".into(), tool: "write_file".into() }), "the request names server and tool");
    assert!(asked.1.starts_with("MCP server files · tool write_file"), "{}", asked.1);
    assert_eq!(decisions(&sink), vec![(true, "user, always for write_file on files".into()), (true, "policy".into())]);
    assert!(root.join("one.txt").exists() && root.join("two.txt").exists());

    // "Always deny": the first is refused, the second is refused unasked; neither reaches the server.
    let never = Arc::new(Always { approve: false, asked: Mutex::new(0) });
    let (sink, _) = investigate_with(&root, never.clone(), vec![write("three.txt"), write("four.txt")]).await;
    assert_eq!(*never.asked.lock().unwrap(), 1, "asked once");
    assert_eq!(decisions(&sink), vec![(false, "user, always for write_file on files".into()), (false, "policy".into())]);
    assert!(!root.join("three.txt").exists() && !root.join("four.txt").exists(), "a refused call reached the server");
}
