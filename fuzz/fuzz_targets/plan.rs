//! Fuzz target: arbitrary bytes as UTF-8 JSON, parsed as a scenario or a bare
//! message list; whatever parses is planned with every strategy (v2.1 through
//! the offline keyword oracle when probes exist) and must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mf_forgetting::message::assign_default_ids;
use mf_forgetting::{ApproxTokenCounter, Budget, KeywordOracle, Message, PlanConfig, Scenario, StrategyKind, plan};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (messages, probes) = if let Ok(s) = Scenario::parse(text) {
        (s.messages, Some(s.probes))
    } else if let Ok(mut m) = serde_json::from_str::<Vec<Message>>(text) {
        assign_default_ids(&mut m);
        (m, None)
    } else {
        return;
    };
    let budget = Budget { context: 2048, reserve: 512, ratio: 0.75, recent: 2 };
    let config = PlanConfig::default();
    for kind in StrategyKind::ALL {
        let mut oracle = probes.clone().map(KeywordOracle::new);
        let evaluator = oracle.as_mut().map(|o| o as &mut dyn mf_forgetting::ProbeEvaluator);
        // Errors are fine (typed); panics are what the fuzzer hunts.
        let _ = plan(kind, &messages, &budget, &ApproxTokenCounter, &config, evaluator);
    }
});
