//! A session's MCP servers are connected within their share of the model's
//! window, counted by the model: a server whose tool list would take more is
//! refused with a note, and its tools are not offered; a small one is.

use std::sync::Arc;

use mf_agent::{AgentEvent, EngineChoice, ExitReason, NoAnswer, RunSpec, Sessions, ToolsSpec, VecSink};
use mf_forgetting::StrategyKind;
use serde_json::json;

use crate::harness::*;
use crate::scripted::*;

const FAKE_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../mf-tools/tests/fixtures/fake_mcp_server.py");

/// Runs on the test's single-threaded runtime: the counts wait for the model
/// off the runtime's thread, which goes on driving the servers' pipes.
#[tokio::test]
async fn mcp_tools_over_their_share_of_the_window_are_refused_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    std::fs::write(&model, b"GGUF test model").unwrap();
    // 150 tools of ~240 tokens each against a quarter of a 4,096-token window;
    // the other server's one tool takes a few dozen.
    let servers = json!({"mcpServers": {
        "wide": {"command": "python3", "args": [FAKE_SERVER, "wide"]},
        "small": {"command": "python3", "args": [FAKE_SERVER, "hang"]},
    }});
    let spec = RunSpec {
        engine: EngineChoice::Embedded { model, threads: Some(1), gpu: false, tool_grammar: false },
        context: 4096,
        agent: settings(StrategyKind::V2),
        tools: ToolsSpec { mcp: Some(servers), ..ToolsSpec::default() },
        summariser: None,
    };
    let sessions = Sessions::new(dir.path());
    sessions.use_backend(&spec.engine, spec.context, Scripted::new(4096, vec![Reply::Text("Nothing to do.")])).await;
    let launch = tokio::time::timeout(std::time::Duration::from_secs(60), sessions.start(spec, "What tools are there?", Arc::new(NoAnswer), None))
        .await
        .expect("connecting the MCP servers is stuck")
        .unwrap();
    let note = launch.notes.iter().find(|n| n.contains("MCP server wide")).unwrap_or_else(|| panic!("no note on the wide server: {:?}", launch.notes));
    assert!(note.contains("150 tools") && note.contains("4096-token window"), "{note}");
    assert!(!launch.notes.iter().any(|n| n.contains("MCP server small")), "{:?}", launch.notes);
    let mut sink = VecSink::default();
    let (_, out) = launch.run(&mut sink).await;
    assert_eq!(out.unwrap().reason, ExitReason::FinalAnswer);
    let tools = sink.events.iter().find_map(|e| if let AgentEvent::Started { tools, .. } = e { Some(tools.clone()) } else { None }).unwrap();
    assert!(tools.iter().any(|t| t == "small__work"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("wide__")), "{tools:?}");
}
