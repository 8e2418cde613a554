//! `read_file`: one page of one file.

use std::io::{Read, Seek, SeekFrom};

use serde::{Deserialize, Serialize};

use super::Workspace;
use super::workspace::{io_err, resolve_file};
use crate::ToolError;

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
    let (rel, mut f) = resolve_file(ws, args.root.as_deref(), &args.path)?;
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
