//! `search_files`: a bounded depth-first walk that greps regular text files.

use std::io::Read;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::workspace::{Root, open_dir, open_regular, resolve_dir};
use super::{Budget, FileLimits, Limit, Workspace, denied_name, dot};
use crate::ToolError;

/// Arguments of `search_files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Text to find (a regular expression when `regex` is true).
    pub pattern: String,
    /// Treat `pattern` as a regular expression.
    #[serde(default)]
    pub regex: bool,
    /// Ignore case.
    #[serde(default)]
    pub ignore_case: bool,
    /// Folder to search (default: the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Which root (default: the first).
    #[serde(default)]
    pub root: Option<String>,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchMatch {
    /// File (relative to the root).
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The line (cut at `max_line_chars`).
    pub text: String,
}

/// Result of `search_files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Matches in walk order (sorted names per folder).
    pub matches: Vec<SearchMatch>,
    /// Files opened and searched.
    pub files_searched: usize,
    /// Files skipped: too large, binary, denied, not regular, symlinks.
    pub files_skipped: usize,
    /// Directory entries looked at (files, folders, skipped ones).
    pub entries_visited: usize,
    /// True when a limit stopped the search early.
    pub truncated: bool,
    /// Which bound stopped it, when one did.
    pub stopped_by: Option<Limit>,
    /// What the stop means, for the model.
    pub note: Option<String>,
}

/// Search files under a folder, bounded by the limits (see the module
/// docs). Symlinks are not followed, denied names are skipped, binary files
/// (NUL in the first 8 KiB) are skipped.
///
/// # Errors
/// [`ToolError::InvalidPattern`]; refusals for the start folder.
pub fn search(ws: &Workspace, args: &SearchArgs) -> Result<SearchResult, ToolError> {
    let src = if args.regex { args.pattern.clone() } else { regex::escape(&args.pattern) };
    if args.pattern.is_empty() {
        return Err(ToolError::InvalidPattern("empty pattern".into()));
    }
    let re = regex::RegexBuilder::new(&src)
        .case_insensitive(args.ignore_case)
        .size_limit(1 << 20)
        .dfa_size_limit(4 << 20)
        .build()
        .map_err(|e| ToolError::InvalidPattern(e.to_string()))?;
    let (r, start, _) = resolve_dir(ws, args.root.as_deref(), &args.path)?;
    let lim = &ws.limits;
    let mut budget = Budget::new(lim);
    let mut out = SearchResult { matches: Vec::new(), files_searched: 0, files_skipped: 0, entries_visited: 0, truncated: false, stopped_by: None, note: None };
    let stopped = walk(r, start, lim, &mut budget, &re, &mut out).err();
    out.entries_visited = budget.visited;
    out.truncated = stopped.is_some();
    out.stopped_by = stopped;
    out.note = stopped.map(|l| l.note(lim));
    Ok(out)
}

/// The search's walk: depth first, names sorted within each folder. Returns
/// the bound that stopped it, if one did.
fn walk(r: &Root, start: PathBuf, lim: &FileLimits, budget: &mut Budget, re: &regex::Regex, out: &mut SearchResult) -> Result<(), Limit> {
    let mut stack: Vec<(PathBuf, usize)> = vec![(start, 0)];
    let mut opened = 0usize;
    while let Some((dir_rel, depth)) = stack.pop() {
        // Each folder through its own handle, opened with no symlink along
        // its path, and its files opened from that handle: a folder swapped
        // for a symlink since it was listed is skipped, never followed.
        let Ok(dir) = open_dir(&r.dir, &dir_rel, &dir_rel.display().to_string()) else { continue };
        let Ok(rd) = dir.entries() else { continue };
        // Read no more of the folder than the budget allows, so a folder of
        // a million entries is never held in memory; sort what was read.
        let mut names = Vec::new();
        let mut cut = None;
        for e in rd.filter_map(Result::ok) {
            if let Err(limit) = budget.visit() {
                cut = Some(limit);
                break;
            }
            names.push((e.file_name(), e));
        }
        // Names taken once: sorting by `file_name()` would allocate in every comparison.
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut subdirs = Vec::new();
        for (os_name, e) in names {
            budget.check_time()?;
            let name = os_name.to_string_lossy().into_owned();
            let rel = if dir_rel == Path::new(".") { PathBuf::from(&name) } else { dir_rel.join(&name) };
            let Ok(ft) = e.file_type() else { continue };
            if denied_name(&name).is_some() || ft.is_symlink() {
                out.files_skipped += 1;
                continue;
            }
            if ft.is_dir() {
                if depth < lim.max_depth {
                    subdirs.push((rel, depth + 1));
                }
                continue;
            }
            if !ft.is_file() || e.metadata().map(|m| m.len()).unwrap_or(u64::MAX) > lim.max_search_file_bytes {
                out.files_skipped += 1;
                continue;
            }
            if opened >= lim.max_files {
                return Err(Limit::Files);
            }
            opened += 1;
            let shown = rel.display().to_string();
            let Some(text) = read_text(&dir, Path::new(&os_name), &shown, lim.max_search_file_bytes) else {
                out.files_skipped += 1;
                continue;
            };
            out.files_searched += 1;
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    if out.matches.len() >= lim.max_matches {
                        return Err(Limit::Matches);
                    }
                    out.matches.push(SearchMatch { path: shown.clone(), line: i + 1, text: line.chars().take(lim.max_line_chars).collect() });
                }
            }
        }
        if let Some(limit) = cut {
            return Err(limit);
        }
        // Depth-first in name order: push reversed so the first name pops first.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// A file's text for searching: `None` when it cannot be opened as a
/// regular file, is larger than `max` (it may have grown since it was
/// listed), or is binary (a NUL in its first 8 KiB, read before the rest).
fn read_text(dir: &Dir, rel: &Path, shown: &str, max: u64) -> Option<String> {
    let mut f = open_regular(dir, rel, shown).ok()?;
    if f.metadata().map(|m| m.len()).unwrap_or(u64::MAX) > max {
        return None;
    }
    let mut buf = Vec::new();
    (&mut f).take(8192).read_to_end(&mut buf).ok()?;
    if buf.contains(&0) {
        return None;
    }
    (&mut f).take(max.saturating_sub(buf.len() as u64)).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}
