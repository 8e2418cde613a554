//! Markdown tables from a results file (`bench-forgetting report`), also
//! printed as the terminal's human-readable table, and the whole results page
//! (`docs/results.md`) from an index of the committed results files.
//!
//! The page is generated, never edited: [`results_page`] reads the index
//! (`crates/mf-bench/results/index.json`: per results file its title, the
//! commands that produced it, the machine, the build, the date and what the
//! numbers show) and renders every file's tables below its entry. A test
//! compares the committed page with what this produces, so the page cannot
//! drift from the results.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::agentic::{self, AgenticResult};
use crate::error::{BenchError, Result};
use crate::results::{ModelResult, Stat};
use crate::schema;

fn pm(s: &Stat, reps: u32) -> String {
    if reps > 1 { format!("{:.2} ± {:.2}", s.mean, s.sd) } else { format!("{:.2}", s.mean) }
}

/// Renders every model's tables.
pub fn markdown(results: &[ModelResult]) -> String {
    let mut out = String::new();
    for r in results {
        model_markdown(&mut out, r);
    }
    out
}

fn model_markdown(out: &mut String, r: &ModelResult) {
    let st = &r.settings;
    let _ = writeln!(out, "### {}\n", r.model);
    let _ = writeln!(
        out,
        "{} scenarios, {} answers, {} rep(s); backend {}, n_ctx {}; compaction budget C={} G={} recent={}; probes at temperature {}, ≤ {} tokens, thinking {}; judge: {}; v2.1 withholding test: {}; wall {:.0} s.\n",
        st.scenarios.len(),
        r.scores.len(),
        st.reps,
        st.backend,
        st.n_ctx,
        st.budget_context,
        st.budget_reserve,
        st.budget_recent,
        st.temperature,
        st.answer_max_tokens,
        st.thinking,
        st.judge_model.as_deref().unwrap_or("none"),
        if st.withholding_budget == 0 {
            "exact (one evaluation per unit)".to_owned()
        } else {
            format!("≤ {} evaluations per compaction", st.withholding_budget)
        },
        r.wall_s
    );
    if let Some(l) = &r.likelihood {
        crate::likelihood::markdown(out, l);
    }
    let answered = crate::results::generated_answers(&r.scores);
    if !answered {
        let _ = writeln!(out, "No answers were generated (scorers: {}): compactions only.\n", st.scorers.join(", "));
        let _ = writeln!(out, "| condition | prompt tokens before → after | fallbacks | not applied | over budget |");
        let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
        for c in &r.conditions {
            let _ = writeln!(
                out,
                "| {} | {:.0} → {:.0} | {} | {} | {} |",
                c.condition, c.tokens_before, c.tokens_after, c.fallbacks, c.not_applied, c.compaction_failures
            );
        }
        speed_markdown(out, r);
        return;
    }
    let b = &r.control_brackets;
    let _ = writeln!(
        out,
        "| condition | keyword (0–3) | {} | worst keyword | prompt tokens before → after | fallbacks | not applied | empty answers | over budget |",
        b.judge_heading()
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for c in &r.conditions {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} → {:.0} | {} | {} | {} | {} |",
            c.condition,
            pm(&c.keyword, st.reps),
            c.judge.as_ref().map_or("–".to_owned(), |j| pm(j, st.reps)),
            c.keyword.min,
            c.tokens_before,
            c.tokens_after,
            c.fallbacks,
            c.not_applied,
            c.empty_answers,
            c.compaction_failures
        );
    }
    let _ = writeln!(out, "\nControl brackets ({} probes; expected: identical 3, paraphrase high, contradiction low, empty 0):\n", b.probes);
    let _ = writeln!(out, "| scorer | identical | paraphrase | contradiction | empty |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    for (name, m) in [("keyword", &b.keyword), ("judge", &b.judge)] {
        if m.is_empty() {
            continue;
        }
        let g = |k: &str| m.get(k).map_or("–".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(out, "| {name} | {} | {} | {} | {} |", g("identical"), g("paraphrase"), g("contradiction"), g("empty"));
    }
    if b.judge_unparsed > 0 {
        let _ = writeln!(out, "\nJudge replies without a grade on controls: {}.", b.judge_unparsed);
    }
    if b.judge_holds() == Some(false) {
        let _ = writeln!(
            out,
            "\n**The judge's brackets fail** (it must grade the reference ≥ {}, a paraphrase ≥ {}, a contradiction ≤ {} and the empty answer ≤ {}): every judge figure for this model is not evidence.",
            crate::results::JUDGE_IDENTICAL_AT_LEAST,
            crate::results::JUDGE_PARAPHRASE_AT_LEAST,
            crate::results::JUDGE_CONTRADICTION_AT_MOST,
            crate::results::JUDGE_EMPTY_AT_MOST
        );
    }
    let conds: Vec<&str> = r.conditions.iter().map(|c| c.condition.as_str()).collect();
    for (title, kw, j) in
        [("By class", &r.by_class, r.judge.as_ref().map(|a| &a.by_class)), ("By dimension", &r.by_dimension, r.judge.as_ref().map(|a| &a.by_dimension))]
    {
        let judge = match b.judge_holds() {
            Some(false) => " / judge, not evidence",
            _ if j.is_some() => " / judge",
            _ => "",
        };
        let _ = writeln!(out, "\n{title} (keyword{judge}):\n");
        let _ = writeln!(out, "| | {} |", conds.join(" | "));
        let _ = writeln!(out, "| --- |{}", " ---: |".repeat(conds.len()));
        for (k, m) in kw {
            let cells: Vec<String> = conds
                .iter()
                .map(|c| {
                    let a = m.get(*c).map_or("–".to_owned(), |v| format!("{v:.2}"));
                    match j.and_then(|j| j.get(k)).and_then(|jm| jm.get(*c)) {
                        Some(v) => format!("{a} / {v:.2}"),
                        None if j.is_some() => format!("{a} / –"),
                        None => a,
                    }
                })
                .collect();
            let _ = writeln!(out, "| {k} | {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(out, "\nWorst cells (scenario × condition, lowest keyword mean first):\n");
    let marked = if b.judge_holds() == Some(false) { " (not evidence)" } else { "" };
    let _ = writeln!(out, "| scenario | condition | keyword mean | keyword min | judge mean{marked} | judge min{marked} |");
    let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: |");
    for c in r.worst_cells.iter().take(8) {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {} | {} | {} |",
            c.scenario,
            c.condition,
            c.keyword_mean,
            c.keyword_min,
            c.judge_mean.map_or("–".to_owned(), |v| format!("{v:.2}")),
            c.judge_min.map_or("–".to_owned(), |v| v.to_string())
        );
    }
    speed_markdown(out, r);
}

fn speed_markdown(out: &mut String, r: &ModelResult) {
    let sp = &r.speed;
    let ratio = |x: Option<f64>| x.map_or("n/a (backend reports no KV figures)".to_owned(), |v| format!("{:.1} %", 100.0 * v));
    let _ = writeln!(out, "\nPrefill: probes decoded {} of a naive resend; all calls {}.", ratio(sp.probe_prefill_ratio), ratio(sp.total_prefill_ratio));
    let _ = writeln!(out, "\n| calls | n | prompt tokens | decoded | generated | at max_tokens | wall s |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (k, c) in &sp.calls {
        let _ = writeln!(
            out,
            "| {k} | {} | {} | {} | {} | {} | {:.0} |",
            c.calls,
            c.prompt_tokens,
            c.decoded_tokens,
            c.completion_tokens,
            c.hit_max_tokens,
            c.wall_ms as f64 / 1000.0
        );
    }
    let _ = writeln!(out, "\nEmpty answers caused by the token budget: {}.\n", r.empty_by_budget);
}

/// A results file of either kind, checked against its schema.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultsFile {
    /// The scenario suite (`bench-forgetting --out`).
    Suite(Vec<ModelResult>),
    /// The live agentic worlds (`bench-forgetting agentic --out`).
    Agentic(Vec<AgenticResult>),
    /// KV-cache runs (`mf bench-kv --json`, one report or an array of them).
    Kv(Vec<crate::kv::BenchKvReport>),
    /// Stored investigations replayed under every strategy (`mf replay
    /// --out`, one result or an array of them).
    Replay(Vec<crate::replay::ReplayResult>),
}

impl ResultsFile {
    /// The file's tables, as `bench-forgetting report` prints them.
    #[must_use]
    pub fn markdown(&self) -> String {
        match self {
            ResultsFile::Suite(r) => markdown(r),
            ResultsFile::Agentic(r) => agentic::markdown(r),
            ResultsFile::Kv(r) => crate::kv::markdown(r),
            ResultsFile::Replay(r) => r.iter().map(crate::replay::markdown).collect::<Vec<_>>().join("\n"),
        }
    }
}

/// Reads a results file of either kind (agentic results hold `runs`) and
/// checks it against its schema.
///
/// # Errors
/// [`BenchError::ReadFile`] when it cannot be read; [`BenchError::Schema`],
/// naming the file, when it is not JSON of the right shape or does not match
/// its schema.
pub fn read_results(file: &Path) -> Result<ResultsFile> {
    let text = std::fs::read_to_string(file).map_err(|source| BenchError::ReadFile { path: file.to_path_buf(), source })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| named(file, &e))?;
    let is_agentic = v.as_array().and_then(|a| a.first()).is_some_and(|o| o.get("runs").is_some());
    let is_kv = |o: &serde_json::Value| o.get("compaction_step").is_some();
    let is_replay = |o: &serde_json::Value| o.get("points").is_some() && o.get("live_strategy").is_some();
    if is_replay(&v) {
        return Ok(ResultsFile::Replay(vec![serde_json::from_value(v).map_err(|e| named(file, &e))?]));
    }
    if v.as_array().and_then(|a| a.first()).is_some_and(is_replay) {
        return Ok(ResultsFile::Replay(serde_json::from_value(v).map_err(|e| named(file, &e))?));
    }
    if is_kv(&v) {
        return Ok(ResultsFile::Kv(vec![serde_json::from_value(v).map_err(|e| named(file, &e))?]));
    }
    if v.as_array().and_then(|a| a.first()).is_some_and(is_kv) {
        return Ok(ResultsFile::Kv(serde_json::from_value(v).map_err(|e| named(file, &e))?));
    }
    if is_agentic {
        agentic::validate_agentic(&v).map_err(|e| BenchError::Schema(format!("{}: {e}", file.display())))?;
        Ok(ResultsFile::Agentic(serde_json::from_value(v).map_err(|e| named(file, &e))?))
    } else {
        schema::validate_results(&v).map_err(|e| BenchError::Schema(format!("{}: {e}", file.display())))?;
        Ok(ResultsFile::Suite(serde_json::from_value(v).map_err(|e| named(file, &e))?))
    }
}

/// A results file that is JSON of the wrong shape, named.
fn named(file: &Path, e: &serde_json::Error) -> BenchError {
    BenchError::Schema(format!("{}: {e}", file.display()))
}

/// Reads a scenario-suite results file, as [`read_results`] does.
///
/// # Errors
/// As [`read_results`]; [`BenchError::Incomparable`] for a file of another kind.
pub fn read_suite(file: &Path) -> Result<Vec<ModelResult>> {
    match read_results(file)? {
        ResultsFile::Suite(r) => Ok(r),
        _ => Err(BenchError::Incomparable(format!("{} is not a scenario-suite results file", file.display()))),
    }
}

/// The index the results page is generated from (`results/index.json`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageIndex {
    /// The page's title.
    pub title: String,
    /// The command that writes the page (said in its first line).
    pub generate: String,
    /// Paragraphs under the title (Markdown).
    pub intro: Vec<String>,
    /// How the page links to a results file: this prefix, then the file's
    /// path relative to the index (`../crates/mf-bench/results/` for a page
    /// in `docs/`).
    pub link_prefix: String,
    /// The page's sections, in order.
    pub sections: Vec<PageSection>,
}

/// A section of the results page.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageSection {
    /// Its heading.
    pub title: String,
    /// Paragraphs under the heading (Markdown).
    #[serde(default)]
    pub intro: Vec<String>,
    /// The results files shown in it.
    pub entries: Vec<PageEntry>,
    /// Two runs compared (`bench-forgetting compare`), after the entries.
    #[serde(default)]
    pub comparisons: Vec<PageComparison>,
}

/// Two suite runs of the page compared: time, decoded tokens and agreement.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageComparison {
    /// Its heading.
    pub title: String,
    /// The first run's results file, relative to the index.
    pub before: String,
    /// The second run's results file, relative to the index.
    pub after: String,
    /// What the comparison shows (Markdown paragraphs).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One results file on the page, with how it was measured.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageEntry {
    /// Its heading.
    pub title: String,
    /// The results file, relative to the index.
    pub file: String,
    /// Results files that were merged into `file` (listed, not rendered).
    #[serde(default)]
    pub parts: Vec<String>,
    /// The day of the run (`YYYY-MM-DD`).
    pub date: String,
    /// The machine it ran on.
    pub machine: String,
    /// The build and its settings (profile, threads, workers).
    pub build: String,
    /// The commands that produced the file, in order.
    pub commands: Vec<String>,
    /// What the numbers show, and what they do not (Markdown paragraphs).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Reads the index of the results page.
///
/// # Errors
/// [`BenchError::ReadFile`] or [`BenchError::Json`] for an unreadable or
/// malformed index.
pub fn read_index(index: &Path) -> Result<PageIndex> {
    let text = std::fs::read_to_string(index).map_err(|source| BenchError::ReadFile { path: index.to_path_buf(), source })?;
    Ok(serde_json::from_str(&text)?)
}

/// Every results file the index names (entries, their parts, compared runs), relative to the index.
#[must_use]
pub fn indexed_files(index: &PageIndex) -> Vec<String> {
    let entries = index.sections.iter().flat_map(|s| &s.entries).flat_map(|e| std::iter::once(&e.file).chain(&e.parts));
    let compared = index.sections.iter().flat_map(|s| &s.comparisons).flat_map(|c| [&c.before, &c.after]);
    entries.chain(compared).cloned().collect()
}

/// The whole results page (`docs/results.md`) from its index: the title, an
/// overview of every suite run's keyword means, then per section and entry
/// the command, model, machine, build and date, the file's tables and the notes.
///
/// # Errors
/// As [`read_index`] and [`read_results`], for the index and every file it names.
pub fn results_page(index_path: &Path) -> Result<String> {
    let index = read_index(index_path)?;
    let dir = index_path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    let mut loaded = Vec::new();
    let mut compared = Vec::new();
    for section in &index.sections {
        let mut tables = Vec::new();
        for c in &section.comparisons {
            let (before, after) = (read_suite(&dir.join(&c.before))?, read_suite(&dir.join(&c.after))?);
            tables.push(crate::compare::markdown(&crate::compare::compare_files(&before, &after)?));
        }
        compared.push(tables);
        let mut files = Vec::new();
        for e in &section.entries {
            for part in &e.parts {
                let p = dir.join(part);
                if !p.is_file() {
                    return Err(BenchError::ReadFile { path: p, source: std::io::Error::from(std::io::ErrorKind::NotFound) });
                }
            }
            files.push(read_results(&dir.join(&e.file))?);
        }
        loaded.push(files);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Generated by `{}` from the committed results files. Do not edit: edit the index or the results and generate it again (a test checks that this file is what the generator writes). -->\n",
        index.generate
    );
    let _ = writeln!(out, "# {}\n", index.title);
    for p in &index.intro {
        let _ = writeln!(out, "{p}\n");
    }
    overview(&mut out, &index, &loaded);
    // The link prefix is relative to the page in docs/; commands run from the repository's root.
    let from_root = index.link_prefix.strip_prefix("../").unwrap_or(&index.link_prefix);
    for ((section, files), tables) in index.sections.iter().zip(&loaded).zip(&compared) {
        let _ = writeln!(out, "## {}\n", section.title);
        for p in &section.intro {
            let _ = writeln!(out, "{p}\n");
        }
        for (e, file) in section.entries.iter().zip(files) {
            entry(&mut out, &index.link_prefix, e, file);
        }
        for (c, table) in section.comparisons.iter().zip(tables) {
            let _ = writeln!(out, "### {}\n", c.title);
            let _ = writeln!(out, "```sh\nbench-forgetting compare {from_root}{} {from_root}{}\n```\n", c.before, c.after);
            for line in table.lines() {
                let _ = writeln!(out, "{line}");
            }
            if !c.notes.is_empty() {
                let _ = writeln!(out, "**What it shows.**\n");
                for p in &c.notes {
                    let _ = writeln!(out, "{p}\n");
                }
            }
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    Ok(out)
}

const OVERVIEW_CONDITIONS: [&str; 6] = ["full", "baseline", "masking", "v1", "v2", "v2.1"];

/// One line per suite run: keyword mean per condition and the judge's brackets.
fn overview(out: &mut String, index: &PageIndex, loaded: &[Vec<ResultsFile>]) {
    let _ = writeln!(out, "## At a glance\n");
    let suites = || {
        index.sections.iter().zip(loaded).flat_map(|(section, files)| section.entries.iter().zip(files)).filter_map(|(e, f)| match f {
            ResultsFile::Suite(models) => Some((e, models)),
            _ => None,
        })
    };
    if suites().any(|(_, models)| models.iter().any(|r| r.likelihood.is_some())) {
        let _ = writeln!(
            out,
            "Likelihood retention R per condition (1 = what the whole history gives, 0 = what pinned + recent give; 95 % bootstrap interval over the probes with signal) and choice accuracy (the reference out-scores every wrong answer), for every scenario-suite run scored by likelihood.\n"
        );
        let _ = writeln!(out, "| run | model | probes with signal | {} | choice: {} |", OVERVIEW_CONDITIONS.join(" | "), OVERVIEW_CONDITIONS.join(" / "));
        let _ = writeln!(out, "| --- | --- | ---: |{} --- |", " ---: |".repeat(OVERVIEW_CONDITIONS.len()));
        for (e, models) in suites() {
            for r in models {
                let Some(l) = &r.likelihood else { continue };
                let find = |c: &str| l.conditions.iter().find(|x| x.condition == c);
                // A condition ranked on fewer probes (its compaction grew the
                // history, or could not fit the budget, elsewhere) says on how many and why.
                let signal = l.probes - l.no_signal;
                let cells: Vec<String> = OVERVIEW_CONDITIONS
                    .iter()
                    .map(|c| {
                        let x = find(c);
                        let r = x.and_then(|x| x.retention.as_ref());
                        let text = crate::likelihood::fmt_interval(r);
                        match (r, x) {
                            (Some(i), Some(x)) if i.n < signal => {
                                let why = match (x.grew > 0, x.probes < l.probes) {
                                    (true, true) => "grew or failed elsewhere",
                                    (false, true) => "compaction failed elsewhere",
                                    _ => "grew elsewhere",
                                };
                                format!("{text} on {} ({why})", i.n)
                            }
                            _ => text,
                        }
                    })
                    .collect();
                let choice: Vec<String> =
                    OVERVIEW_CONDITIONS.iter().map(|c| find(c).and_then(|x| x.choice.as_ref()).map_or("–".to_owned(), |i| format!("{:.2}", i.value))).collect();
                let _ = writeln!(
                    out,
                    "| [{}](#{}) | {} | {} of {} | {} | {} |",
                    e.title,
                    anchor(&e.title),
                    r.model,
                    signal,
                    l.probes,
                    cells.join(" | "),
                    choice.join(" / ")
                );
            }
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Keyword score (0–3, mean over every probe) per condition for every scenario-suite run below, and the judge's grades of its control answers (a judge to trust grades the reference 3, a contradiction low and the empty answer 0).\n"
    );
    let _ = writeln!(out, "| run | model | scenarios | {} | judge: identical / contradiction / empty |", OVERVIEW_CONDITIONS.join(" | "));
    let _ = writeln!(out, "| --- | --- | ---: |{} --- |", " ---: |".repeat(OVERVIEW_CONDITIONS.len()));
    for (section, files) in index.sections.iter().zip(loaded) {
        for (e, file) in section.entries.iter().zip(files) {
            let ResultsFile::Suite(models) = file else { continue };
            for r in models.iter().filter(|r| crate::results::generated_answers(&r.scores)) {
                let cells: Vec<String> = OVERVIEW_CONDITIONS
                    .iter()
                    .map(|c| r.conditions.iter().find(|x| x.condition == *c).map_or("–".to_owned(), |x| format!("{:.2}", x.keyword.mean)))
                    .collect();
                let j = &r.control_brackets.judge;
                let g = |k: &str| j.get(k).map_or("–".to_owned(), |v| format!("{v:.2}"));
                let brackets = match r.control_brackets.judge_holds() {
                    None => "not run".to_owned(),
                    Some(holds) => format!("{} / {} / {}{}", g("identical"), g("contradiction"), g("empty"), if holds { "" } else { " (fail: not evidence)" }),
                };
                let _ = writeln!(
                    out,
                    "| [{}](#{}) | {} | {} | {} | {brackets} |",
                    e.title,
                    anchor(&e.title),
                    r.model,
                    r.settings.scenarios.len(),
                    cells.join(" | ")
                );
            }
        }
    }
    out.push('\n');
}

/// The anchor a Markdown renderer gives a heading (lower case, punctuation dropped, spaces to dashes).
fn anchor(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() => Some(c.to_lowercase().next().unwrap_or(c)),
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn entry(out: &mut String, link_prefix: &str, e: &PageEntry, file: &ResultsFile) {
    let _ = writeln!(out, "### {}\n", e.title);
    let models: Vec<&str> = match file {
        ResultsFile::Suite(r) => r.iter().map(|m| m.model.as_str()).collect(),
        ResultsFile::Agentic(r) => r.iter().map(|m| m.model.as_str()).collect(),
        ResultsFile::Kv(r) => r.iter().map(|m| m.model.as_str()).collect(),
        ResultsFile::Replay(r) => r.iter().map(|m| m.model.as_str()).collect(),
    };
    let _ = writeln!(out, "- Model: {}", models.join(", "));
    let _ = writeln!(out, "- Date: {}", e.date);
    let _ = writeln!(out, "- Machine: {}", e.machine);
    let _ = writeln!(out, "- Build: {}", e.build);
    let _ = writeln!(out, "- Results: [`{}`]({link_prefix}{})", e.file, e.file);
    if !e.parts.is_empty() {
        let parts: Vec<String> = e.parts.iter().map(|p| format!("[`{p}`]({link_prefix}{p})")).collect();
        let _ = writeln!(out, "- Merged from: {}", parts.join(", "));
    }
    let _ = writeln!(out, "\n```sh");
    for c in &e.commands {
        let _ = writeln!(out, "{c}");
    }
    let _ = writeln!(out, "```\n");
    // The file's own tables, one heading level down.
    for line in file.markdown().lines() {
        if line.starts_with('#') {
            let _ = writeln!(out, "#{line}");
        } else {
            let _ = writeln!(out, "{line}");
        }
    }
    if !e.notes.is_empty() {
        let _ = writeln!(out, "\n**What it shows.**\n");
        for p in &e.notes {
            let _ = writeln!(out, "{p}\n");
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    const INDEX: &str = "crates/mf-bench/results/index.json";

    #[test]
    fn a_file_that_cannot_be_read_as_results_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("cut-short.json");
        std::fs::write(&bad, "[{\"model\": \"m\", \"runs\": [").unwrap();
        let e = read_results(&bad).unwrap_err().to_string();
        assert!(e.contains("cut-short.json"), "{e}");
        let shape = dir.path().join("wrong-shape.json");
        std::fs::write(&shape, r#"{"compaction_step": 3}"#).unwrap();
        let e = read_results(&shape).unwrap_err().to_string();
        assert!(e.contains("wrong-shape.json"), "{e}");
    }

    #[test]
    fn a_likelihood_run_whose_compactions_failed_somewhere_shows_no_keyword_tables() {
        let path = root().join("crates/mf-bench/results/suite-smollm2-likelihood.json");
        let ResultsFile::Suite(runs) = read_results(&path).unwrap() else { panic!("a suite file") };
        let r = &runs[0];
        // Masking could not fit the budget on the long scenarios: rows that no scorer answered.
        assert!(r.scores.iter().any(|s| s.stop_reason == crate::results::COMPACTION_FAILED));
        assert!(!crate::results::generated_answers(&r.scores));
        let md = markdown(std::slice::from_ref(r));
        assert!(md.contains("No answers were generated (scorers: likelihood)"), "{md}");
        assert!(!md.contains("By class (keyword)"), "{md}");
    }

    #[test]
    fn a_replay_reads_as_one_and_renders() {
        let r = crate::replay::ReplayResult {
            model: "SmolLM2".into(),
            session: 4,
            question: "Which edge purged?".into(),
            live_strategy: "v1".into(),
            transcript_messages: 31,
            context: 2048,
            reserve: 192,
            ratio: 0.75,
            recent: 2,
            threshold: 1392,
            outside: 140,
            score_ctx: 8192,
            points: vec![],
            scores: vec![],
            unscored: vec![],
            likelihood: None,
            wall_s: 1.0,
        };
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("replay.json");
        std::fs::write(&one, serde_json::to_string(&r).unwrap()).unwrap();
        let ResultsFile::Replay(read) = read_results(&one).unwrap() else { panic!("not read as a replay") };
        assert_eq!(read, vec![r.clone()]);
        let many = dir.path().join("replays.json");
        std::fs::write(&many, serde_json::to_string(&vec![r.clone(), r]).unwrap()).unwrap();
        let file = read_results(&many).unwrap();
        assert!(file.markdown().contains("### Investigation 4 replayed — SmolLM2"), "{}", file.markdown());
    }

    /// The committed page is exactly what the generator writes from the
    /// committed results, so neither can change without the other.
    #[test]
    fn committed_results_page_is_generated() {
        let root = root();
        let page = results_page(&root.join(INDEX)).unwrap();
        let committed = std::fs::read_to_string(root.join("docs/results.md")).unwrap();
        if committed != page {
            let line = committed.lines().zip(page.lines()).position(|(a, b)| a != b).unwrap_or_else(|| committed.lines().count().min(page.lines().count()));
            panic!(
                "docs/results.md is not what the generator writes (first difference at line {}:\n committed: {:?}\n generated: {:?}).\nRegenerate it: bench-forgetting report --index {INDEX} --out docs/results.md",
                line + 1,
                committed.lines().nth(line),
                page.lines().nth(line)
            );
        }
    }

    /// Every committed results file is on the page (as an entry or as a part
    /// merged into one), so a new run cannot be left out of it.
    #[test]
    fn every_results_file_is_indexed() {
        let dir = root().join("crates/mf-bench/results");
        let index = read_index(&dir.join("index.json")).unwrap();
        let named: BTreeSet<String> = indexed_files(&index).into_iter().collect();
        let mut on_disk = BTreeSet::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for ent in std::fs::read_dir(&d).unwrap() {
                let p = ent.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "json") && p.file_name().is_some_and(|n| n != "index.json") {
                    on_disk.insert(p.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let missing: Vec<&String> = on_disk.difference(&named).collect();
        assert!(missing.is_empty(), "results files not in {INDEX}: {missing:?}");
        let dangling: Vec<&String> = named.difference(&on_disk).collect();
        assert!(dangling.is_empty(), "{INDEX} names files that do not exist: {dangling:?}");
    }

    #[test]
    fn anchors_follow_the_renderer() {
        assert_eq!(anchor("SmolLM2 135M — the six short scenarios"), "smollm2-135m--the-six-short-scenarios");
        assert_eq!(anchor("Gemma 3 (v2.1, budget 16)"), "gemma-3-v21-budget-16");
    }

    #[test]
    fn a_malformed_index_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("index.json");
        std::fs::write(&p, r#"{"title": "t", "generate": "g", "intro": [], "link_prefix": "", "sections": [], "extra": 1}"#).unwrap();
        assert!(matches!(results_page(&p), Err(BenchError::Json(_))));
        std::fs::write(&p, r#"{"title": "t", "generate": "g", "intro": [], "link_prefix": "", "sections": [{"title": "s", "entries": [{"title": "e", "file": "nope.json", "date": "d", "machine": "m", "build": "b", "commands": []}]}]}"#).unwrap();
        assert!(matches!(results_page(&p), Err(BenchError::ReadFile { .. })));
    }
}
