//! The world file: a question, JSON endpoints, the route that answers it, and
//! probes on the final answer; parsed and checked here (the same rules as
//! `scenarios/tools/validate.py`'s errors).

use std::path::{Path, PathBuf};

use mf_forgetting::scenario::Keyword;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// One endpoint of a world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Path, from `/` (a query string is part of it when the world lists one).
    pub path: String,
    /// HTTP status (default 200).
    #[serde(default = "ok_status")]
    pub status: u16,
    /// The JSON body.
    pub body: serde_json::Value,
}

fn ok_status() -> u16 {
    200
}

/// What a probe tests beyond recall of one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// A value read on one endpoint.
    #[default]
    Fact,
    /// A later endpoint corrects an earlier one; the `wrong` list holds the superseded value.
    Contradiction,
    /// The earliest event of a date-ordered chain, which sits on a later page
    /// than the events a reader meets first.
    Order,
}

impl ProbeKind {
    fn is_fact(&self) -> bool {
        *self == ProbeKind::Fact
    }
}

/// A probe on the final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldProbe {
    /// Id, unique in the world.
    pub id: String,
    /// The fact, in words.
    pub fact: String,
    /// The endpoint whose body holds the fact.
    pub source: String,
    /// Keywords the answer must hold (each a string or a list of variants).
    pub required: Vec<Keyword>,
    /// Keywords worth partial credit.
    #[serde(default)]
    pub partial: Vec<Keyword>,
    /// Values the world gives for *other* things (another host's owner, an
    /// older figure): an answer holding one contradicts a tool result.
    #[serde(default)]
    pub wrong: Vec<Keyword>,
    /// The reference answer for this fact.
    pub reference: String,
    /// Whole wrong answers, phrased like `reference` but stating a value a
    /// forgetful reader would confuse (often one of `wrong`: the other
    /// rotation's on-call, the superseded figure): the likelihood scorer's
    /// choice test asks that the reference out-score each. Optional.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_answers: Vec<String>,
    /// What the probe tests (default: a fact).
    #[serde(default, skip_serializing_if = "ProbeKind::is_fact")]
    pub kind: ProbeKind,
}

/// A live world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    /// Id (the file name without `.json`).
    pub id: String,
    /// One line for people.
    pub title: String,
    /// The system prompt (`{base}` is replaced); default: the harness's.
    #[serde(default)]
    pub system: Option<String>,
    /// The question (`{base}` is replaced by `http://127.0.0.1:PORT`): what
    /// the model is asked.
    pub question: String,
    /// The question as a person would ask it, when `question` adds what only
    /// a small model needs (the step-by-step route): the app's demo shows it
    /// as the investigation's title, the whole question folded beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_question: Option<String>,
    /// The calls that answer the question, in order (endpoint paths): what
    /// the route-driven driver replays as the assistant's tool calls.
    #[serde(default)]
    pub route: Vec<String>,
    /// The endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Probes on the final answer.
    pub probes: Vec<WorldProbe>,
}

/// A world and its file.
#[derive(Debug, Clone)]
pub struct LoadedWorld {
    /// The file.
    pub path: PathBuf,
    /// The world.
    pub world: World,
}

/// The system prompt used when a world gives none.
pub const DEFAULT_SYSTEM: &str = "You investigate by calling tools. Call exactly one tool per reply, for example:\n```json\n{\"name\": \"http\", \"arguments\": {\"url\": \"{base}/index.json\"}}\n```\nWhen you have the facts, answer in one or two sentences with the names and numbers you found.";

fn invalid(path: &Path, field: impl Into<String>, reason: impl Into<String>) -> BenchError {
    BenchError::InvalidScenario { file: path.to_path_buf(), field: field.into(), reason: reason.into() }
}

/// Parses and checks one world file: unknown or missing fields, an id that
/// differs from the file name, paths not from `/`, duplicate paths, a route
/// step that is not an endpoint or comes twice, a probe whose `source` is not
/// an endpoint or whose required keywords are not in that endpoint's body
/// (the world would not hold its own answer), a wrong keyword found in the
/// reference.
///
/// # Errors
/// [`BenchError::InvalidScenario`] naming the file and the field.
pub fn parse_world(path: &Path, text: &str) -> Result<World> {
    let w: World = serde_json::from_str(text).map_err(|e| {
        let msg = e.to_string();
        // The probe kind is the format's only enum: an unknown variant is a bad `kind`.
        let field = if msg.contains("unknown variant `") {
            "kind".to_owned()
        } else {
            ["unknown field `", "missing field `"]
                .iter()
                .find_map(|m| msg.find(m).map(|p| &msg[p + m.len()..]).and_then(|r| r.find('`').map(|e| r[..e].to_owned())))
                .unwrap_or_else(|| "json".to_owned())
        };
        invalid(path, field, msg)
    })?;
    if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        && stem != w.id
    {
        return Err(invalid(path, "id", format!("{:?} differs from the file name {stem:?}", w.id)));
    }
    if w.question.trim().is_empty() {
        return Err(invalid(path, "question", "empty"));
    }
    if let Some(plain) = &w.plain_question {
        if plain.trim().is_empty() {
            return Err(invalid(path, "plain_question", "empty (leave it out instead)"));
        }
        if plain.contains("{base}") {
            return Err(invalid(path, "plain_question", "names {base}: a person's question does not carry the server's address"));
        }
    }
    if w.endpoints.is_empty() {
        return Err(invalid(path, "endpoints", "a world needs at least one endpoint"));
    }
    for (i, e) in w.endpoints.iter().enumerate() {
        if !e.path.starts_with('/') {
            return Err(invalid(path, format!("endpoints[{i}].path"), format!("{:?} does not start with /", e.path)));
        }
        if w.endpoints[..i].iter().any(|o| o.path == e.path) {
            return Err(invalid(path, format!("endpoints[{i}].path"), format!("{:?} is listed twice", e.path)));
        }
        if !(100..=599).contains(&e.status) {
            return Err(invalid(path, format!("endpoints[{i}].status"), format!("{} is not an HTTP status", e.status)));
        }
    }
    for (i, r) in w.route.iter().enumerate() {
        if !w.endpoints.iter().any(|e| e.path == *r) {
            return Err(invalid(path, format!("route[{i}]"), format!("{r:?} is not an endpoint of this world")));
        }
        if w.route[..i].contains(r) {
            return Err(invalid(path, format!("route[{i}]"), format!("{r:?} is on the route twice")));
        }
    }
    if w.probes.is_empty() {
        return Err(invalid(path, "probes", "a world needs at least one probe"));
    }
    for (i, p) in w.probes.iter().enumerate() {
        if w.probes[..i].iter().any(|o| o.id == p.id) {
            return Err(invalid(path, format!("probes[{i}].id"), format!("{:?} is used twice", p.id)));
        }
        if p.reference.trim().is_empty() {
            return Err(invalid(path, format!("probes[{i}].reference"), "empty"));
        }
        if p.required.is_empty() {
            return Err(invalid(path, format!("probes[{i}].required"), "a probe needs at least one required keyword"));
        }
        let Some(src) = w.endpoints.iter().find(|e| e.path == p.source) else {
            return Err(invalid(path, format!("probes[{i}].source"), format!("{:?} is not an endpoint of this world", p.source)));
        };
        let body = crate::keyword::normalise(&src.body.to_string());
        for (k, kw) in p.required.iter().enumerate() {
            if !crate::keyword::group_matches(&body, kw) {
                return Err(invalid(path, format!("probes[{i}].required[{k}]"), format!("{:?} is not in the body of {}", kw.variants(), p.source)));
            }
        }
        let reference = crate::keyword::normalise(&p.reference);
        for (k, kw) in p.wrong.iter().enumerate() {
            if crate::keyword::group_matches(&reference, kw) {
                return Err(invalid(path, format!("probes[{i}].wrong[{k}]"), "a wrong value appears in the reference answer"));
            }
        }
    }
    Ok(w)
}

/// The world of `dir` whose id is exactly `id` (`None` when there is none).
///
/// # Errors
/// As [`load_worlds`], but a folder without that world is `Ok(None)`.
pub fn load_world(dir: &Path, id: &str) -> Result<Option<World>> {
    match load_worlds(dir, &[id.to_owned()]) {
        Ok(loaded) => Ok(loaded.into_iter().map(|l| l.world).find(|w| w.id == id)),
        Err(BenchError::NoScenarios(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Loads every `*.json` world of `dir` (sorted), keeping ids that contain one of `filters`.
///
/// # Errors
/// I/O errors, the first malformed world, nothing selected.
pub fn load_worlds(dir: &Path, filters: &[String]) -> Result<Vec<LoadedWorld>> {
    let paths = crate::load::json_files(dir)?;
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|source| BenchError::ReadFile { path: path.clone(), source })?;
        let world = parse_world(&path, &text)?;
        if filters.is_empty() || filters.iter().any(|f| world.id.contains(f.as_str())) {
            out.push(LoadedWorld { path, world });
        }
    }
    if out.is_empty() {
        return Err(BenchError::NoScenarios(dir.to_path_buf()));
    }
    Ok(out)
}
