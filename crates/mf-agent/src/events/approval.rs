//! What an approval request names beside the call.

use serde::{Deserialize, Serialize};

/// The MCP server and tool behind a model-facing tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct McpOrigin {
    /// The server's configured name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
}
