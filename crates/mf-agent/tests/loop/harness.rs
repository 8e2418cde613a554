//! The tools of the scripted world, the settings every test starts from,
//! one run, and readers of the events.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mf_agent::{Agent, AgentEvent, AgentSettings, Approver, ToolFailure, ToolReply, ToolRunner, VecSink};
use mf_forgetting::StrategyKind;
use mf_inference::{KvStats, ToolSpec};
use mf_tools::Requirement;
use mf_tools::policy::{Approval, ApprovalRequest};
use serde_json::json;

use crate::scripted::{Reply, Scripted};

pub(crate) struct World {
    pub(crate) runs: Mutex<Vec<String>>,
}

impl ToolRunner for World {
    fn specs(&self) -> Vec<ToolSpec> {
        ["lookup", "fail", "write"]
            .iter()
            .map(|n| ToolSpec { name: (*n).into(), description: format!("{n} tool"), parameters: json!({"type": "object"}) })
            .collect()
    }
    fn requirement(&self, call_id: &str, name: &str, args_json: &str) -> Result<Requirement, ToolFailure> {
        let v: serde_json::Value =
            serde_json::from_str(args_json).map_err(|e| ToolFailure::new(mf_agent::FailureKind::Tool("invalid_arguments".into()), e.to_string()))?;
        Ok(if name == "write" { Requirement::Ask(ApprovalRequest::new(call_id, name, &v)) } else { Requirement::Auto })
    }
    fn run<'a>(
        &'a self,
        _call_id: &'a str,
        name: &'a str,
        args_json: &'a str,
        approval: Option<&'a Approval>,
    ) -> BoxFuture<'a, Result<ToolReply, ToolFailure>> {
        Box::pin(async move {
            self.runs.lock().unwrap().push(format!("{name} {args_json}"));
            let v: serde_json::Value = serde_json::from_str(args_json).unwrap();
            match name {
                "lookup" => {
                    let k = v["key"].as_str().unwrap_or("?");
                    let n: u32 = k.trim_start_matches('k').parse().unwrap_or(0);
                    let filler = "the record says nothing else of note here; ".repeat(12);
                    Ok(ToolReply { content: format!("key {k} is value {} owned by Alice. {filler}", 1000 + n), truncated: None })
                }
                "write" => {
                    assert!(approval.is_some(), "write ran without an approval");
                    Ok(ToolReply { content: "written".into(), truncated: None })
                }
                _ => Err(ToolFailure::new(mf_agent::FailureKind::Tool("timeout".into()), "upstream timed out")),
            }
        })
    }
}

pub(crate) fn world() -> Arc<World> {
    Arc::new(World { runs: Mutex::new(Vec::new()) })
}

/// A session spec on a model file that only has to exist (the tests give
/// the sessions a scripted backend for it), at a 4,096-token window.
pub(crate) fn scripted_spec(dir: &std::path::Path, strategy: StrategyKind) -> mf_agent::RunSpec {
    let model = dir.join("tiny.gguf");
    std::fs::write(&model, b"GGUF test model").unwrap();
    mf_agent::RunSpec {
        engine: mf_agent::EngineChoice::Embedded { model, threads: Some(1), gpu: false, tool_grammar: false },
        context: 4096,
        agent: settings(strategy),
        tools: mf_agent::ToolsSpec::default(),
        summariser: None,
    }
}

pub(crate) fn settings(strategy: StrategyKind) -> AgentSettings {
    AgentSettings { strategy, reserve: 256, system_prompt: "You investigate.".into(), ..AgentSettings::default() }
}

pub(crate) fn lookups(n: u32) -> Vec<Reply> {
    let keys = ["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10"];
    let mut v: Vec<Reply> = keys[..n as usize].iter().map(|k| Reply::Call("lookup", json!({"key": k}))).collect();
    v.push(Reply::Text("The value of k1 is 1001."));
    v
}

pub(crate) async fn run(backend: Arc<Scripted>, tools: Arc<World>, approver: Arc<dyn Approver>, s: AgentSettings, q: &str) -> (mf_agent::Outcome, VecSink) {
    let mut agent = Agent::new(backend, tools, approver, s).unwrap();
    let mut sink = VecSink::default();
    let out = agent.run(q, &mut sink).await.unwrap();
    (out, sink)
}

pub(crate) fn gauges(sink: &VecSink) -> Vec<mf_agent::Gauge> {
    sink.events.iter().filter_map(|e| if let AgentEvent::Gauge { gauge, .. } = e { Some(*gauge) } else { None }).collect()
}

pub(crate) fn tool_errors(sink: &VecSink) -> Vec<String> {
    sink.events.iter().filter_map(|e| if let AgentEvent::ToolResult { ok: false, error, .. } = e { error.clone() } else { None }).collect()
}

pub(crate) fn first_round_kv(sink: &VecSink) -> KvStats {
    sink.events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Kv { purpose: mf_agent::Purpose::Round, stats, .. } => {
                Some(KvStats { prompt_tokens: stats.prompt_tokens, reused: stats.reused, decoded: stats.decoded, trimmed: stats.trimmed, ..KvStats::default() })
            }
            _ => None,
        })
        .unwrap()
}

pub(crate) fn kv_restore(sink: &VecSink) -> (bool, u32, u32, Option<String>) {
    sink.events
        .iter()
        .find_map(|e| match e {
            AgentEvent::KvRestore { used, matched_tokens, prompt_tokens, note, .. } => Some((*used, *matched_tokens, *prompt_tokens, note.clone())),
            _ => None,
        })
        .expect("no kv_restore event")
}
