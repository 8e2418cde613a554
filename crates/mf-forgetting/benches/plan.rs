//! Planning time for histories of 100 and 1,000 messages (the goal: < 1 ms
//! for 100). `cargo bench -p mf-forgetting --bench plan`; under `cargo test`
//! each benchmark runs once, as a smoke test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use mf_forgetting::evaluator::ProbeEvaluator;
use mf_forgetting::scenario::{Keyword, Probe, ProbeDimension};
use mf_forgetting::{ApproxTokenCounter, Budget, KeywordOracle, Message, PlanConfig, StrategyKind, ToolCall, plan};
use serde_json::json;

fn main() {
    divan::main();
}

/// A deterministic investigation of `n` messages: rounds of call → result →
/// interpretation with the kinds of text real tool output carries.
fn history(n: usize) -> Vec<Message> {
    let mut h = vec![
        Message::system("sys", "You are an investigator with http_get and read_file."),
        Message::user("q", "Why did the nightly export to s3://exports-7f3a fail after the 2026-03-01 deploy?"),
    ];
    let mut r = 0;
    while h.len() < n {
        let call = ToolCall { id: format!("c{r}"), name: "http_get".into(), arguments: json!({"url": format!("http://api.internal/v2/jobs/{r}")}) };
        h.push(Message::assistant_calls(&format!("a{r}"), "", vec![call]));
        let body = if r % 5 == 3 {
            format!("TimeoutError: upstream api.internal timed out after 30 s (attempt {r})")
        } else {
            format!(
                "{{\"job\": \"export-{r}\", \"status\": \"failed\", \"started\": \"2026-03-0{}T02:{:02}:11Z\", \"rows\": {}, \"owner\": \"team-ledger\", \"error\": \"S3 PutObject denied because the role ExportWriter lost s3:PutObject\"}}",
                1 + r % 9,
                r % 60,
                1000 + 37 * r
            )
        };
        if r % 5 == 3 {
            h.push(Message::tool_error(&format!("t{r}"), &format!("c{r}"), "http_get", &body));
        } else {
            h.push(Message::tool_result(&format!("t{r}"), &format!("c{r}"), "http_get", &body));
        }
        h.push(Message::assistant(&format!("i{r}"), "So this job failed too, therefore the role change matters."));
        r += 1;
    }
    h.truncate(n);
    h
}

const SIZES: [usize; 2] = [100, 1_000];

fn budget() -> Budget {
    Budget { context: 8_192, reserve: 2_048, ratio: 0.75, recent: 2 }
}

#[divan::bench(args = SIZES)]
fn baseline(b: divan::Bencher, n: usize) {
    let h = history(n);
    b.bench(|| plan(StrategyKind::Baseline, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap());
}

#[divan::bench(args = SIZES)]
fn v1(b: divan::Bencher, n: usize) {
    let h = history(n);
    b.bench(|| plan(StrategyKind::V1, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap());
}

#[divan::bench(args = SIZES)]
fn v2(b: divan::Bencher, n: usize) {
    let h = history(n);
    b.bench(|| plan(StrategyKind::V2, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), None).unwrap());
}

/// v2.1 with the offline keyword oracle: the planner's own cost around Δ
/// (one evaluation per unit), not a model's.
#[divan::bench(args = [100])]
fn v21_oracle(b: divan::Bencher, n: usize) {
    let h = history(n);
    let probe = Probe {
        id: "p".into(),
        question: "which role?".into(),
        dimension: ProbeDimension::EntityRecall,
        required: vec![Keyword::One("ExportWriter".into())],
        partial: vec![],
        reference: "ExportWriter".into(),
        wrong: vec![],
    };
    b.bench(|| {
        let mut oracle = KeywordOracle::new(vec![probe.clone()]);
        let e: &mut dyn ProbeEvaluator = &mut oracle;
        plan(StrategyKind::V21, &h, &budget(), &ApproxTokenCounter, &PlanConfig::default(), Some(e)).unwrap()
    });
}
