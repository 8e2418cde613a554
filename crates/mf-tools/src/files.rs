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

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use serde::{Deserialize, Serialize};

use crate::ToolError;

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

/// One workspace root: a name the model uses and a directory handle.
#[derive(Debug)]
pub struct Root {
    /// Name shown to the model (the folder's last component, made unique).
    pub name: String,
    /// Where it is on disk (for display; access goes through `dir`).
    pub path: PathBuf,
    dir: Dir,
}

/// The workspace roots the user picked.
#[derive(Debug, Default)]
pub struct Workspace {
    roots: Vec<Root>,
    /// Limits.
    pub limits: FileLimits,
}

impl Workspace {
    /// Open the given folders as roots.
    ///
    /// # Errors
    /// [`ToolError::Io`] when a folder cannot be opened.
    pub fn open(paths: &[PathBuf], limits: FileLimits) -> Result<Workspace, ToolError> {
        let mut roots: Vec<Root> = Vec::new();
        for p in paths {
            let dir = Dir::open_ambient_dir(p, ambient_authority()).map_err(|e| io_err(&p.display().to_string(), &e))?;
            let base = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into());
            let mut name = base.clone();
            let mut i = 2;
            while roots.iter().any(|r| r.name == name) {
                name = format!("{base}-{i}");
                i += 1;
            }
            roots.push(Root { name, path: p.clone(), dir });
        }
        Ok(Workspace { roots, limits })
    }

    /// The roots, in the order given.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    fn root(&self, name: Option<&str>) -> Result<&Root, ToolError> {
        match name {
            None => self.roots.first().ok_or(ToolError::NoWorkspace),
            Some(n) => {
                if self.roots.is_empty() {
                    return Err(ToolError::NoWorkspace);
                }
                self.roots.iter().find(|r| r.name == n).ok_or_else(|| ToolError::UnknownRoot(n.to_string()))
            }
        }
    }
}

/// Why a file name is on the deny-list, if it is.
///
/// Denied: version-control internals (`.git`, `.hg`, `.svn`), `.env*`,
/// credential folders (`.ssh`, `.gnupg`, `.aws`, `.kube`, `.docker`),
/// private keys (`id_rsa`, `id_ed25519`, …), credential files (`.netrc`,
/// `.pgpass`, `.git-credentials`, `.npmrc`, `.pypirc`, `.htpasswd`) and key
/// material by extension (`.pem`, `.key`, `.p12`, `.pfx`, `.jks`,
/// `.keystore`, `.kdbx`, `.ppk`, `.asc`, `.gpg`).
pub fn denied_name(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    if [".git", ".hg", ".svn"].contains(&n.as_str()) {
        return Some("version-control internals are not readable");
    }
    if n.starts_with(".env") {
        return Some("environment files hold secrets");
    }
    if [".ssh", ".gnupg", ".aws", ".kube", ".docker", ".azure", ".gcloud"].contains(&n.as_str()) {
        return Some("credential folders are not readable");
    }
    if n.starts_with("id_") && !n.ends_with(".pub") && ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk"].iter().any(|k| n.starts_with(k)) {
        return Some("private keys are not readable");
    }
    if [".netrc", "_netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".htpasswd", "credentials.json", "secrets.json"].contains(&n.as_str()) {
        return Some("credential files are not readable");
    }
    let ext = Path::new(&n).extension().and_then(|e| e.to_str()).unwrap_or("");
    if ["pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "ppk", "asc", "gpg"].contains(&ext) {
        return Some("key files are not readable");
    }
    None
}

/// Turn the model's path into a clean relative path, refusing absolute paths,
/// `..` and denied names.
fn relative(path: &str) -> Result<PathBuf, ToolError> {
    if path.contains('\0') {
        return Err(ToolError::InvalidArguments { tool: "files".into(), message: "path contains a NUL byte".into() });
    }
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('\\') || path.starts_with('~') {
        return Err(ToolError::AbsolutePath(path.to_string()));
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => return Err(ToolError::PathTraversal(path.to_string())),
            Component::RootDir | Component::Prefix(_) => return Err(ToolError::AbsolutePath(path.to_string())),
        }
    }
    check_denied(path, &out)?;
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Ok(out)
}

fn check_denied(shown: &str, p: &Path) -> Result<(), ToolError> {
    for c in p.components() {
        if let Component::Normal(n) = c
            && let Some(reason) = denied_name(&n.to_string_lossy())
        {
            return Err(ToolError::PathDenied { path: shown.to_string(), reason: reason.to_string() });
        }
    }
    Ok(())
}

fn io_err(path: &str, e: &std::io::Error) -> ToolError {
    ToolError::Io { path: path.to_string(), message: e.to_string() }
}

/// Map a cap-std lookup error: escapes become [`ToolError::PathEscapes`].
fn lookup_err(path: &str, e: &std::io::Error) -> ToolError {
    let msg = e.to_string();
    if msg.contains("outside of the filesystem") || e.raw_os_error() == Some(libc::EXDEV) {
        return ToolError::PathEscapes(path.to_string());
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::NotFound(path.to_string()),
        _ => io_err(path, e),
    }
}

/// Resolve the model's path inside a root: checked as written, then
/// canonicalised through the handle (escapes refused) and checked again.
fn resolve<'w>(ws: &'w Workspace, root: Option<&str>, path: &str) -> Result<(&'w Root, PathBuf), ToolError> {
    let r = ws.root(root)?;
    let rel = relative(path)?;
    let canon = r.dir.canonicalize(&rel).map_err(|e| lookup_err(path, &e))?;
    check_denied(path, &canon)?;
    let canon = if canon.as_os_str().is_empty() { PathBuf::from(".") } else { canon };
    Ok((r, canon))
}

fn kind_name(ft: &cap_std::fs::FileType) -> &'static str {
    use cap_std::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "file"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Open a regular file without ever blocking on a FIFO.
fn open_regular(dir: &Dir, rel: &Path, shown: &str) -> Result<cap_std::fs::File, ToolError> {
    let meta = dir.metadata(rel).map_err(|e| lookup_err(shown, &e))?;
    if !meta.is_file() {
        return Err(ToolError::NotRegularFile { path: shown.to_string(), kind: kind_name(&meta.file_type()).into() });
    }
    let mut opts = OpenOptions::new();
    opts.read(true);
    {
        use cap_std::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY);
    }
    let f = dir.open_with(rel, &opts).map_err(|e| lookup_err(shown, &e))?;
    let meta = f.metadata().map_err(|e| io_err(shown, &e))?;
    if !meta.is_file() {
        return Err(ToolError::NotRegularFile { path: shown.to_string(), kind: kind_name(&meta.file_type()).into() });
    }
    Ok(f)
}

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

fn dot() -> String {
    ".".into()
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
    let (r, rel) = resolve(ws, args.root.as_deref(), &args.path)?;
    let lim = &ws.limits;
    let mut budget = Budget::new(lim);
    let mut entries = Vec::new();
    let mut hidden = 0;
    let mut stopped_by = None;
    for e in r.dir.read_dir(&rel).map_err(|e| lookup_err(&args.path, &e))? {
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
    Ok(Listing {
        path: rel.display().to_string(),
        entries,
        hidden,
        truncated: stopped_by.is_some(),
        stopped_by,
        note: stopped_by.map(|l| l.note(lim)),
    })
}

/// Arguments of `read_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File relative to the root.
    pub path: String,
    /// Byte offset to start at (for paging; use the previous `next_offset`).
    #[serde(default)]
    pub offset: u64,
    /// Most bytes to return (capped by the limits).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Which root (default: the first).
    #[serde(default)]
    pub root: Option<String>,
}

/// Result of `read_file`: one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilePage {
    /// The file (relative to the root, after symlinks).
    pub path: String,
    /// Size of the whole file.
    pub size: u64,
    /// Where this page starts.
    pub offset: u64,
    /// Bytes in this page.
    pub bytes: u64,
    /// Page text (lossy UTF-8; a page never ends inside a UTF-8 sequence).
    pub content: String,
    /// Offset of the next page, `None` at the end of the file.
    pub next_offset: Option<u64>,
}

/// Read one page of a file.
///
/// # Errors
/// Refusals for paths outside, denied or not regular; [`ToolError::NotFound`] / [`ToolError::Io`].
pub fn read(ws: &Workspace, args: &ReadArgs) -> Result<FilePage, ToolError> {
    let (r, rel) = resolve(ws, args.root.as_deref(), &args.path)?;
    let mut f = open_regular(&r.dir, &rel, &args.path)?;
    let size = f.metadata().map_err(|e| io_err(&args.path, &e))?.len();
    let cap = args.max_bytes.unwrap_or(ws.limits.read_bytes).clamp(1, ws.limits.max_read_bytes);
    let offset = args.offset.min(size);
    f.seek(SeekFrom::Start(offset)).map_err(|e| io_err(&args.path, &e))?;
    let mut buf = Vec::with_capacity(cap.min(size - offset) as usize);
    (&mut f).take(cap).read_to_end(&mut buf).map_err(|e| io_err(&args.path, &e))?;
    // Do not end a page in the middle of a UTF-8 sequence: back off to its start.
    if offset + (buf.len() as u64) < size
        && let Err(e) = std::str::from_utf8(&buf)
        && e.error_len().is_none()
        && e.valid_up_to() > 0
    {
        buf.truncate(e.valid_up_to());
    }
    let end = offset + buf.len() as u64;
    Ok(FilePage {
        path: rel.display().to_string(),
        size,
        offset,
        bytes: buf.len() as u64,
        content: String::from_utf8_lossy(&buf).into_owned(),
        next_offset: (end < size).then_some(end),
    })
}

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
    let (r, start) = resolve(ws, args.root.as_deref(), &args.path)?;
    let lim = &ws.limits;
    let mut budget = Budget::new(lim);
    let mut out = SearchResult {
        matches: Vec::new(),
        files_searched: 0,
        files_skipped: 0,
        entries_visited: 0,
        truncated: false,
        stopped_by: None,
        note: None,
    };
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
        let Ok(rd) = r.dir.read_dir(&dir_rel) else { continue };
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
        for (name, e) in names {
            budget.check_time()?;
            let name = name.to_string_lossy().into_owned();
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
            let Some(text) = read_text(&r.dir, &rel, &shown, lim.max_search_file_bytes) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_list() {
        for n in [".git", ".env", ".env.local", ".ENV", "id_rsa", "id_ed25519", "server.pem", "tls.key", ".netrc", ".ssh", "store.p12"] {
            assert!(denied_name(n).is_some(), "{n}");
        }
        for n in ["README.md", "id_rsa.pub", "environment.txt", "keys.txt", "main.rs", "id_card.txt"] {
            assert_eq!(denied_name(n), None, "{n}");
        }
    }

    #[test]
    fn relative_paths() {
        assert_eq!(relative("a/./b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(relative("").unwrap(), PathBuf::from("."));
        assert!(matches!(relative("/etc/passwd"), Err(ToolError::AbsolutePath(_))));
        assert!(matches!(relative("~/x"), Err(ToolError::AbsolutePath(_))));
        assert!(matches!(relative("a/../../b"), Err(ToolError::PathTraversal(_))));
        assert!(matches!(relative("cfg/.env.prod"), Err(ToolError::PathDenied { .. })));
        assert!(matches!(relative(".git/config"), Err(ToolError::PathDenied { .. })));
    }
}
