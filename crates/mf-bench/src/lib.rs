//! The forgetting benchmark.
//!
//! How the pieces fit: [`load`] reads a scenario directory (the
//! `mf_forgetting::Scenario` format) and rejects a malformed file naming the
//! file and the field. [`run::run_suite`] takes a [`model::Model`] (any
//! `mf_inference::Backend` behind a blocking façade) and, per scenario,
//! compacts the conversation under each [`condition::Condition`] through
//! `mf_forgetting::{plan, apply}` — the app's code path, with the model as
//! summariser and as v2.1's evaluator — then asks each probe and scores the
//! answers with [`keyword`] and the model [`judge`], beside the judge's
//! control brackets. [`results`] holds the per-model JSON, [`report`] renders
//! it as Markdown or a terminal table, and [`schema`] checks a results file
//! against `schema/results.schema.json`. [`agentic`] runs the real
//! `mf-agent` loop per strategy against live JSON worlds served on
//! 127.0.0.1 (`scenarios/agentic/`).

pub mod agentic;
pub mod condition;
pub mod error;
pub mod judge;
pub mod keyword;
pub mod load;
pub mod model;
pub mod report;
pub mod results;
pub mod run;
pub mod schema;

pub use condition::Condition;
pub use error::{BenchError, Result};
pub use model::Model;
pub use results::ModelResult;
pub use run::{RunConfig, Scorers, Worker, run_suite, run_suite_parallel};
