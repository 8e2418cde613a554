//! `list_files`, `read_file`, `search_files`: confined to the workspace roots
//! the user picked.
//!
//! Each root is opened once as a `cap_std::fs::Dir` handle and every access
//! goes through it, so the kernel-level lookup (openat2 `RESOLVE_BENEATH` or
//! cap-std's manual walk) refuses anything that leaves the root, including
//! through symlinks. In front of that, the path as written is refused when it
//! is absolute or contains `..`, and both the path as written and its
//! canonical form (after symlinks) are checked against the deny-list
//! (`.git/`, `.env*`, key and credential files), so `notes.txt -> .env` is
//! refused too.
//!
//! The check and the open are one step: the canonical path is then opened
//! one component at a time, each with `openat` from the handle of the folder
//! before it, `O_NOFOLLOW`, and its name checked against the deny-list as it
//! is opened. A symlink at any component means the path changed since it was
//! resolved (a folder swapped for a symlink to `.ssh`, say): it is resolved
//! again, at most three times, then refused; it is never followed. Listings
//! read the folder handle so opened, and a search opens each folder, and
//! each file from its folder's handle, the same way.
//!
//! Walks are bounded three ways, so a huge or hostile folder costs at most
//! a known amount of time and memory: every directory entry looked at counts
//! against [`FileLimits::max_visited`] (skipped ones too: binary, too large,
//! denied, symlinks, folders), a search opens at most
//! [`FileLimits::max_files`] files, and every listing and search stops at
//! [`FileLimits::deadline`]. A folder is read only as far as the budget goes
//! (never wholly into memory). What was found so far is returned, with
//! [`Limit`] saying which bound stopped it. The calls are blocking: the
//! registry runs them on tokio's blocking pool.
//!
//! Only regular files are read: the type is checked through the handle
//! without opening (a FIFO is never opened), the open itself uses
//! `O_NONBLOCK | O_NOFOLLOW`, and the opened file is checked again (fstat), so
//! a file swapped for a FIFO or device between the two steps is still refused.
//!
//! One module per tool (`list`, `read`, `search`) over the confined roots
//! of `workspace` ([`Workspace`], [`denied_name`]).

mod list;
mod read;
mod search;
mod workspace;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use list::{Entry, ListArgs, Listing, list};
pub use read::{FilePage, ReadArgs, read};
pub use search::{SearchArgs, SearchMatch, SearchResult, search};
pub use workspace::{Root, Workspace, denied_name};

/// Limits of the file tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileLimits {
    /// Default bytes returned by one `read_file` page. Default 64 KiB.
    pub read_bytes: u64,
    /// Most bytes one page may return, whatever the model asks. Default 256 KiB.
    pub max_read_bytes: u64,
    /// Most entries `list_files` returns. Default 500.
    pub max_entries: usize,
    /// Most matches `search_files` returns. Default 100.
    pub max_matches: usize,
    /// Most files `search_files` opens (searched, or opened and found
    /// binary). Default 5000.
    pub max_files: usize,
    /// Most directory entries one listing or search looks at, whatever
    /// becomes of them (listed, searched, skipped as binary, too large,
    /// denied or a symlink, descended into). Default 20,000.
    pub max_visited: usize,
    /// Wall-clock limit of one listing or search; what was found by then is
    /// returned. Default 3 s.
    #[serde(with = "crate::http::duration_millis")]
    pub deadline: Duration,
    /// Files larger than this are skipped by `search_files`. Default 2 MiB.
    pub max_search_file_bytes: u64,
    /// Deepest directory level `search_files` descends to. Default 16.
    pub max_depth: usize,
    /// Longest line text kept per match (characters). Default 240.
    pub max_line_chars: usize,
}

impl Default for FileLimits {
    fn default() -> Self {
        FileLimits {
            read_bytes: 64 << 10,
            max_read_bytes: 256 << 10,
            max_entries: 500,
            max_matches: 100,
            max_files: 5000,
            max_visited: 20_000,
            deadline: Duration::from_secs(3),
            max_search_file_bytes: 2 << 20,
            max_depth: 16,
            max_line_chars: 240,
        }
    }
}

/// The bound that stopped a listing or a search before it was complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The listing has its page ([`FileLimits::max_entries`]).
    Entries,
    /// The search has [`FileLimits::max_matches`] matches.
    Matches,
    /// The search opened [`FileLimits::max_files`] files.
    Files,
    /// [`FileLimits::max_visited`] directory entries were looked at.
    Visited,
    /// [`FileLimits::deadline`] passed.
    Deadline,
}

impl Limit {
    /// A note for the model and the UI: which bound stopped the walk, and
    /// that what came back is partial.
    pub fn note(self, limits: &FileLimits) -> String {
        let why = match self {
            Limit::Entries => format!("the listing stopped at its {}-entry page", limits.max_entries),
            Limit::Matches => format!("the search stopped at {} matches", limits.max_matches),
            Limit::Files => format!("the search stopped after opening {} files", limits.max_files),
            Limit::Visited => format!("stopped after looking at {} entries", limits.max_visited),
            Limit::Deadline => format!("stopped at the {} ms time limit", limits.deadline.as_millis()),
        };
        format!("{why}; the result is partial (narrow the path or the pattern)")
    }
}

/// Time and entry budget of one walk.
struct Budget {
    until: Instant,
    visited: usize,
    max_visited: usize,
}

impl Budget {
    fn new(limits: &FileLimits) -> Budget {
        Budget { until: Instant::now() + limits.deadline, visited: 0, max_visited: limits.max_visited }
    }

    /// Count one more entry; `Err` with the bound when there is no room for it.
    fn visit(&mut self) -> Result<(), Limit> {
        if Instant::now() >= self.until {
            return Err(Limit::Deadline);
        }
        if self.visited >= self.max_visited {
            return Err(Limit::Visited);
        }
        self.visited += 1;
        Ok(())
    }

    fn check_time(&self) -> Result<(), Limit> {
        if Instant::now() >= self.until { Err(Limit::Deadline) } else { Ok(()) }
    }
}

/// The default folder of a listing or a search: the root.
fn dot() -> String {
    ".".into()
}
