//! `list_files`: one folder, one page.

use serde::{Deserialize, Serialize};

use super::workspace::{io_err, kind_name, resolve_dir};
use super::{Budget, Limit, Workspace, denied_name, dot};
use crate::ToolError;

/// Arguments of `list_files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Folder relative to the root (default: the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Which root (default: the first).
    #[serde(default)]
    pub root: Option<String>,
}
/// One listed entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// File name.
    pub name: String,
    /// `file`, `directory`, `symlink`, `FIFO`, ...
    pub kind: String,
    /// Size in bytes (files only).
    pub size: Option<u64>,
}

/// Result of `list_files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    /// The folder listed (relative to the root).
    pub path: String,
    /// Entries, sorted by name. When the listing was cut, these are the
    /// first ones the folder returned (sorted), not the alphabetically first:
    /// finding those would mean reading the whole folder.
    pub entries: Vec<Entry>,
    /// Entries left out because they are on the deny-list (among those read).
    pub hidden: usize,
    /// True when the folder has more than was read.
    pub truncated: bool,
    /// Which bound cut the listing, when one did.
    pub stopped_by: Option<Limit>,
    /// What the cut means, for the model.
    pub note: Option<String>,
}

/// List one folder, reading it only as far as the page (and the budget) goes.
///
/// # Errors
/// Refusals for paths outside or denied; [`ToolError::NotFound`] / [`ToolError::Io`].
pub fn list(ws: &Workspace, args: &ListArgs) -> Result<Listing, ToolError> {
    // The folder's own handle, opened with no symlink along its path: the
    // entries read are those of the folder that passed the deny-list.
    let (_, rel, dir) = resolve_dir(ws, args.root.as_deref(), &args.path)?;
    let lim = &ws.limits;
    let mut budget = Budget::new(lim);
    let mut entries = Vec::new();
    let mut hidden = 0;
    let mut stopped_by = None;
    for e in dir.entries().map_err(|e| io_err(&args.path, &e))? {
        let e = e.map_err(|e| io_err(&args.path, &e))?;
        if entries.len() == lim.max_entries {
            // One entry past the page: the folder has more.
            stopped_by = Some(Limit::Entries);
            break;
        }
        if let Err(limit) = budget.visit() {
            stopped_by = Some(limit);
            break;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        if denied_name(&name).is_some() {
            hidden += 1;
            continue;
        }
        let ft = e.file_type().map_err(|err| io_err(&name, &err))?;
        let size = if ft.is_file() { e.metadata().ok().map(|m| m.len()) } else { None };
        entries.push(Entry { name, kind: kind_name(&ft).into(), size });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Listing { path: rel.display().to_string(), entries, hidden, truncated: stopped_by.is_some(), stopped_by, note: stopped_by.map(|l| l.note(lim)) })
}
