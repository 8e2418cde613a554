//! The agent's tools and their containment. Knows nothing of models: every
//! tool takes typed arguments (serde, so the agent can parse the model's
//! JSON into them) and returns a typed result or a typed refusal
//! ([`ToolError`], classified by [`ToolError::is_refusal`]). Limits are
//! parameters with documented defaults.
//!
//! How the pieces fit: [`ToolSettings`] (from the user's settings) builds a
//! [`ToolRegistry`], which opens the workspace roots ([`files::Workspace`]),
//! probes the code sandbox ([`code::probe`]) and offers
//! [`ToolRegistry::descriptors`] (name, description, JSON Schema) for the
//! model. The agent asks [`ToolRegistry::requirement`] whether a call needs
//! approval ([`policy::ApprovalPolicy`]: read-only tools auto; code, data
//! sent to a host not approved for the session ([`ToolRegistry::approve_host`]) and
//! non-GET HTTP ask), gets the user's [`policy::Approval`] (bound to the
//! call id and the sha256 of the canonical arguments; no answer = deny), and
//! calls [`ToolRegistry::run`]. Data is whatever a request holds, on any
//! channel (host, path, query, headers, body), beyond what the user
//! ([`ToolRegistry::supplied_by_user`]) or a page fetched without data
//! supplied ([`http::Supplied`]).
//!
//! # Bounds
//!
//! Every bound is a parameter or a named constant whose comment says why it
//! is that number; the ones that keep hostile input in check:
//!
//! | bound | default | where |
//! | --- | --- | --- |
//! | MCP stderr kept | 12 lines × 800 bytes | [`mcp::STDERR_LINES`], [`mcp::STDERR_LINE_BYTES`] |
//! | MCP message | 16 MiB | [`mcp::MAX_LINE_BYTES`] |
//! | `tools/list` pages | 32 | [`mcp::McpLimits::max_list_pages`] ([`mcp::MAX_LIST_PAGES`]) |
//! | tools per server | 256 | [`mcp::McpLimits::max_tools`] ([`mcp::MAX_TOOLS_PER_SERVER`]) |
//! | tool description | 1,024 characters | [`mcp::McpLimits::max_description_chars`] ([`mcp::MAX_DESCRIPTION_CHARS`]) |
//! | tool schema | 16 KiB | [`mcp::McpLimits::max_schema_bytes`] ([`mcp::MAX_SCHEMA_BYTES`]) |
//! | MCP tools' share of the window | 25 % | [`mcp::McpLimits::max_window_share`] ([`mcp::MAX_WINDOW_SHARE`]), with [`ToolRegistry::connect_mcp_within`] |
//! | user text kept for the sending rule | 256 KiB | [`http::MAX_USER_BYTES`] |
//! | pages kept for the sending rule | 8 MiB | [`http::MAX_PAGE_BYTES`] |
//! | re-resolutions of a file path that changed while opened | 3 | `files::workspace::CHANGED_TRIES` |
//!
//! - [`http`]: SSRF-guarded GET/POST (IP literals, guarded resolver, each redirect re-checked).
//! - [`files`]: list/read/search through cap-std directory handles, each
//!   path opened a component at a time with `O_NOFOLLOW` (the deny-list and
//!   the open are one step).
//! - [`code`]: Python/sh in namespaces + Landlock + seccomp + rlimits (Linux).
//! - [`mcp`]: tools of MCP servers (stdio or streamable HTTP), started lazily,
//!   offered as `server__tool`, approved like ours (default *ask*).

pub mod code;
mod error;
pub mod files;
pub mod http;
pub mod mcp;
pub mod policy;
mod registry;

pub use error::ToolError;
pub use registry::{HTTP, LIST_FILES, READ_FILE, RUN_CODE, Requirement, SEARCH_FILES, ToolDescriptor, ToolOutput, ToolRegistry, ToolSettings};
