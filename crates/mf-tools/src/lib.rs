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
//! calls [`ToolRegistry::run`].
//!
//! - [`http`]: SSRF-guarded GET/POST (IP literals, guarded resolver, each redirect re-checked).
//! - [`files`]: list/read/search through cap-std directory handles.
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
