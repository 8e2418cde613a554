//! Summaries by another engine or model than the investigation's.

use std::sync::Arc;

use mf_agent::{Agent, AgentEvent, NoAnswer, SummaryBy, VecSink};
use mf_forgetting::StrategyKind;

use crate::harness::*;
use crate::scripted::*;

/// Who wrote each model summary of a run, and what it says.
fn summaries(sink: &VecSink) -> Vec<(Option<String>, String)> {
    sink.events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::CompactionFinished { summary_by: SummaryBy::Model, summary_model, summary, .. } => {
                Some((summary_model.clone(), summary.clone().unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
}

/// With a summariser, every summary pass goes to it (none to the
/// investigation's model) and the ledger names it; without one, the ledger
/// names the investigation's own model.
#[tokio::test]
async fn summaries_are_written_by_the_summariser_and_the_ledger_names_it() {
    for strategy in [StrategyKind::V1, StrategyKind::V2] {
        let model = Scripted::new(1024, lookups(8));
        *model.summary.lock().unwrap() = Ok("- written by the investigation's model".into());
        let writer = Scripted::summariser(4096, "strong-summariser", "- key k1 is value 1001 (the summariser)");
        let mut agent = Agent::new(model.clone(), world(), Arc::new(NoAnswer), settings(strategy)).unwrap().with_summariser(Some(writer.clone()));
        let mut sink = VecSink::default();
        let out = agent.run("What is the value of k1?", &mut sink).await.unwrap();
        assert!(out.compactions >= 1, "{strategy:?}: the window is small enough to compact");
        let by = summaries(&sink);
        assert!(!by.is_empty(), "{strategy:?}: {:?}", sink.events);
        for (name, text) in &by {
            assert_eq!(name.as_deref(), Some("strong-summariser"), "{strategy:?}");
            assert!(text.contains("(the summariser)"), "{strategy:?}: {text}");
        }
        assert!(model.requests.lock().unwrap().iter().all(|r| kind_of(r) != "summary"), "{strategy:?}: the investigation's model wrote no summary");
        assert_eq!(writer.requests.lock().unwrap().iter().filter(|r| kind_of(r) == "summary").count(), by.len(), "{strategy:?}");
        // The summary is in the history the investigation goes on with.
        assert!(out.history.iter().any(|m| m.summary && m.content.contains("(the summariser)")), "{strategy:?}");
    }

    let model = Scripted::new(1024, lookups(8));
    let mut agent = Agent::new(model, world(), Arc::new(NoAnswer), settings(StrategyKind::V1)).unwrap();
    let mut sink = VecSink::default();
    agent.run("What is the value of k1?", &mut sink).await.unwrap();
    let by = summaries(&sink);
    assert!(!by.is_empty() && by.iter().all(|(name, _)| name.as_deref() == Some("scripted")), "{by:?}");
}

/// A whole investigation started from its spec, as the app and `mf` start
/// one, whose summaries come from a second, real embedded model (SmolLM2):
/// the session loads it beside the investigation's model, every model
/// summary is its text, and the stored ledger names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_whose_summaries_come_from_a_second_real_model() {
    use mf_agent::{EngineChoice, Sessions};
    let real = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(real.is_file(), "{} is missing: run scripts/setup.sh", real.display());
    let dir = tempfile::tempdir().unwrap();
    let mut spec = scripted_spec(dir.path(), StrategyKind::V1);
    spec.context = 1024;
    spec.summariser = Some(EngineChoice::Embedded { model: real, threads: Some(1), gpu: false, tool_grammar: false });
    let sessions = Sessions::new(dir.path());
    // The investigation's model is scripted (its calls fill the window); the summariser is loaded from the spec.
    let model = Scripted::new(1024, lookups(8));
    sessions.use_backend(&spec.engine, spec.context, model.clone()).await;
    let launch = sessions.start_with_tools(spec, "What is the value of k1?", Arc::new(NoAnswer), None, Some(world())).await.unwrap();
    let id = launch.id;
    let mut sink = VecSink::default();
    let (_agent, out) = launch.run(&mut sink).await;
    let out = out.unwrap();
    assert!(out.compactions >= 1, "{:?}", sink.events);
    let by = summaries(&sink);
    assert!(!by.is_empty(), "{:?}", sink.events);
    for (name, text) in &by {
        assert_eq!(name.as_deref(), Some("SmolLM2-135M-Instruct.Q4_1"));
        assert!(!text.trim().is_empty() && !text.contains("key k1 is value 1001\n- key k2"), "the real model's text, not the scripted summary: {text}");
    }
    assert!(model.requests.lock().unwrap().iter().all(|r| kind_of(r) != "summary"), "the investigation's model wrote no summary");
    let stored = sessions.store().unwrap().events(id).unwrap();
    let named =
        stored.iter().filter(|e| matches!(e, AgentEvent::CompactionFinished { summary_model: Some(m), .. } if m == "SmolLM2-135M-Instruct.Q4_1")).count();
    assert_eq!(named, by.len(), "the stored ledger names the summariser");
}
