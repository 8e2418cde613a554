//! The forgetting benchmark.
//!
//! How the pieces fit: [`load`] reads a scenario directory (the
//! `mf_forgetting::Scenario` format) and rejects a malformed file naming the
//! file and the field. [`run::run_suite`] takes a [`model::Model`] (any
//! `mf_inference::Backend` behind a blocking façade) and, per scenario,
//! compacts the conversation under each [`condition::Condition`] with the
//! app's adapter (`mf_agent::model::compact`), then asks each probe and scores the
//! answers with [`keyword`] and the model [`judge`], beside the judge's
//! control brackets. [`results`] holds the per-model JSON, [`report`] renders
//! it as Markdown or a terminal table, and [`schema`] checks a results file
//! against `schema/results.schema.json`. [`agentic`] runs the real
//! `mf-agent` loop per strategy against live JSON worlds served on
//! 127.0.0.1 (`scenarios/agentic/`). [`orchestrate`] is a run as a face
//! starts it (several models in turn, cancel), reporting [`BenchEvent`]s.
//!
//! Compaction, token counts, the summary pass and v2.1's withholding test
//! are the app's own (`mf_agent::model`), so a table describes the requests
//! the app sends.

/// Serde by name for a choice of the benchmark (`as_str` out, `FromStr`
/// in, with `#[serde(into = "&'static str", try_from = "String")]` on the
/// type), so results files carry the names the command line takes.
macro_rules! serde_by_name {
    ($t:ty) => {
        impl From<$t> for &'static str {
            fn from(x: $t) -> &'static str {
                x.as_str()
            }
        }

        impl TryFrom<String> for $t {
            type Error = $crate::error::BenchError;

            fn try_from(s: String) -> $crate::error::Result<$t> {
                s.parse()
            }
        }
    };
}

pub mod agentic;
pub mod compare;
pub mod condition;
pub mod config;
pub mod error;
pub mod events;
pub mod export;
pub mod judge;
pub mod keyword;
pub mod kv;
pub mod likelihood;
pub mod load;
pub mod model;
pub mod orchestrate;
pub mod replay;
pub mod report;
pub mod results;
pub mod run;
mod scenario;
pub mod schema;

pub use condition::Condition;
pub use config::{RunConfig, Scorers};
pub use error::{BenchError, Result};
pub use events::BenchEvent;
pub use model::Model;
pub use orchestrate::{BenchJob, BenchRequest, BenchRun, Environment};
pub use results::ModelResult;
pub use run::{Worker, run_suite, run_suite_parallel};
