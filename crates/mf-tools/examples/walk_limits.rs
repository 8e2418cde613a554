//! Times one `list_files` and one `search_files` over a folder with the
//! default limits, to measure how a huge folder is bounded:
//!
//! ```text
//! cargo run --release -p mf-tools --example walk_limits -- ROOT FOLDER [list|search|both]
//! ```
//!
//! (Run it under `/usr/bin/time -v` for the peak memory.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a measuring tool: a panic is the report

use std::path::PathBuf;
use std::time::Instant;

use mf_tools::files::{self, FileLimits, ListArgs, SearchArgs, Workspace};

fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(args.next().expect("ROOT"));
    let folder = args.next().unwrap_or_else(|| ".".into());
    let what = args.next().unwrap_or_else(|| "both".into());
    let limits = FileLimits::default();
    println!("limits: deadline {:?}, {} entries visited, {} files opened, page {}", limits.deadline, limits.max_visited, limits.max_files, limits.max_entries);
    let w = Workspace::open(&[root], limits).unwrap();
    if what == "list" || what == "both" {
        let t = Instant::now();
        let l = files::list(&w, &ListArgs { path: folder.clone(), root: None }).unwrap();
        println!("list: {:?}, {} entries, stopped by {:?}: {}", t.elapsed(), l.entries.len(), l.stopped_by, l.note.unwrap_or_default());
    }
    if what == "search" || what == "both" {
        let t = Instant::now();
        let s = files::search(&w, &SearchArgs { pattern: "needle".into(), regex: false, ignore_case: false, path: folder, root: None }).unwrap();
        println!(
            "search: {:?}, {} visited, {} searched, {} skipped, stopped by {:?}: {}",
            t.elapsed(),
            s.entries_visited,
            s.files_searched,
            s.files_skipped,
            s.stopped_by,
            s.note.unwrap_or_default()
        );
    }
}
