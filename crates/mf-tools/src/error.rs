//! The crate's one error type: every refusal and every failure a tool can return.

/// Why a tool call did not produce a result.
///
/// Most variants are *refusals*: the call asked for something the policy or the
/// containment does not allow, and nothing was done. [`ToolError::is_refusal`]
/// tells them apart from operational failures (network down, I/O error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The model asked for a tool that does not exist (or is not enabled).
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The arguments are not valid JSON for this tool.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// Tool name.
        tool: String,
        /// What was wrong, written for the model to fix it.
        message: String,
    },
    /// The arguments are larger than the configured maximum.
    #[error("arguments are {len} bytes, more than the {max}-byte limit")]
    ArgumentsTooLarge {
        /// Size of the arguments.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The approval policy denies this tool outright.
    #[error("the policy denies `{0}`")]
    DeniedByPolicy(String),
    /// The tool needs the user's approval and none was given (no answer means deny).
    #[error("`{tool}` needs the user's approval for call `{call_id}`")]
    ApprovalRequired {
        /// Tool name.
        tool: String,
        /// The call that needs approval.
        call_id: String,
    },
    /// The user denied this call.
    #[error("the user denied call `{0}`")]
    ApprovalDenied(String),
    /// The approval given belongs to another call or to other arguments.
    #[error("the approval does not match call `{0}` and its exact arguments")]
    ApprovalMismatch(String),

    /// Only http and https URLs may be fetched.
    #[error("URL scheme `{0}` is not allowed (only http and https)")]
    SchemeNotAllowed(String),
    /// The URL could not be parsed or is unusable.
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// The host is not on the user's allow-list.
    #[error("host `{0}` is not on the allow-list")]
    HostNotAllowed(String),
    /// The host is, or resolves to, an address in a blocked range.
    #[error("`{host}` is {addr}, a {range} address, which is blocked")]
    AddressBlocked {
        /// Host as written in the URL.
        host: String,
        /// The offending address.
        addr: String,
        /// Which blocked range it falls in.
        range: String,
    },
    /// A request header that the tool sets itself or that is not allowed.
    #[error("header `{0}` may not be set")]
    HeaderNotAllowed(String),
    /// More redirects than allowed.
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    /// The operation took longer than its limit.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The HTTP transport failed (connection refused, TLS, reset, ...).
    #[error("request failed: {0}")]
    Transport(String),

    /// File tools are called but no workspace root was chosen.
    #[error("no workspace folder was chosen, so files cannot be read")]
    NoWorkspace,
    /// The named workspace root does not exist.
    #[error("unknown workspace root `{0}`")]
    UnknownRoot(String),
    /// Absolute paths are refused: paths are relative to a workspace root.
    #[error("`{0}` is absolute; give a path relative to the workspace")]
    AbsolutePath(String),
    /// `..` components are refused.
    #[error("`{0}` contains `..`; paths may not leave the workspace")]
    PathTraversal(String),
    /// The path (through a symlink) leads outside the workspace.
    #[error("`{0}` leads outside the workspace")]
    PathEscapes(String),
    /// The path names something on the deny-list (`.git/`, `.env*`, key files).
    #[error("`{path}` is not readable: {reason}")]
    PathDenied {
        /// Path as given.
        path: String,
        /// Which rule denies it.
        reason: String,
    },
    /// Only regular files can be read (FIFOs, devices, sockets are refused).
    #[error("`{path}` is a {kind}, not a regular file")]
    NotRegularFile {
        /// Path as given.
        path: String,
        /// What it is.
        kind: String,
    },
    /// The path does not exist in the workspace.
    #[error("`{0}` does not exist")]
    NotFound(String),
    /// An I/O error while reading the workspace.
    #[error("I/O error on `{path}`: {message}")]
    Io {
        /// Path as given.
        path: String,
        /// The system's message.
        message: String,
    },
    /// The search pattern is not a valid (or is too large a) regular expression.
    #[error("invalid search pattern: {0}")]
    InvalidPattern(String),

    /// The code is larger than the configured maximum.
    #[error("code is {len} bytes, more than the {max}-byte limit")]
    CodeTooLarge {
        /// Size of the code.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Containment is not available here, so code is not run at all.
    #[error("the code sandbox is unavailable, so code is not run: {0}")]
    SandboxUnavailable(String),
    /// The sandbox could not be started for this call.
    #[error("the code sandbox failed: {0}")]
    SandboxFailed(String),
    /// The MCP configuration is invalid; names the server (empty for the file) and the field.
    #[error("MCP configuration, server `{server}`, field `{field}`: {message}")]
    McpConfig {
        /// The server's name.
        server: String,
        /// The field that is wrong.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// An MCP server could not be started, or did not finish its start-up in time.
    #[error("MCP server `{server}` could not be started: {message}")]
    McpStart {
        /// The server's name.
        server: String,
        /// Why (spawn error, exit status and its last error lines, time-out).
        message: String,
    },
    /// The MCP server stopped (exited, crashed, dropped the connection) during the call.
    #[error("MCP server `{server}` stopped during the call: {message}")]
    McpCrashed {
        /// The server's name.
        server: String,
        /// What is known: exit status and its last error lines.
        message: String,
    },
    /// The MCP server did not answer the call within the per-call time limit.
    #[error("MCP server `{server}` did not answer `{tool}` within {ms} ms")]
    McpTimeout {
        /// The server's name.
        server: String,
        /// The tool called.
        tool: String,
        /// The limit.
        ms: u64,
    },
    /// The MCP server sent something that is not a valid MCP message.
    #[error("MCP server `{server}` sent a malformed answer: {message}")]
    McpProtocol {
        /// The server's name.
        server: String,
        /// What was wrong, with a short sample.
        message: String,
    },
    /// The MCP server answered the call with a protocol error (unknown tool, invalid parameters, ...).
    #[error("MCP server `{server}` refused `{tool}`: {message}")]
    McpRemote {
        /// The server's name.
        server: String,
        /// The tool called.
        tool: String,
        /// The server's message.
        message: String,
    },
    /// The MCP server's output went over a bound (tools listed, pages of the
    /// list, the share of the window its tool list takes): it is not offered.
    #[error("MCP server `{server}` is not offered: {message}")]
    McpOverLimit {
        /// The server's name.
        server: String,
        /// Which bound, the server's size against it.
        message: String,
    },
    /// The MCP tool ran and reported a failure (`isError`); its text is the message.
    #[error("`{tool}` on MCP server `{server}` failed: {message}")]
    McpToolFailed {
        /// The server's name.
        server: String,
        /// The tool called.
        tool: String,
        /// The tool's own words (cut to the result limit).
        message: String,
    },
}

impl ToolError {
    /// True when the call was refused by policy or containment (nothing was
    /// done), false for operational failures that might succeed another time.
    pub fn is_refusal(&self) -> bool {
        match self {
            ToolError::UnknownTool(_)
            | ToolError::InvalidArguments { .. }
            | ToolError::ArgumentsTooLarge { .. }
            | ToolError::DeniedByPolicy(_)
            | ToolError::ApprovalRequired { .. }
            | ToolError::ApprovalDenied(_)
            | ToolError::ApprovalMismatch(_)
            | ToolError::SchemeNotAllowed(_)
            | ToolError::InvalidUrl(_)
            | ToolError::HostNotAllowed(_)
            | ToolError::AddressBlocked { .. }
            | ToolError::HeaderNotAllowed(_)
            | ToolError::TooManyRedirects(_)
            | ToolError::NoWorkspace
            | ToolError::UnknownRoot(_)
            | ToolError::AbsolutePath(_)
            | ToolError::PathTraversal(_)
            | ToolError::PathEscapes(_)
            | ToolError::PathDenied { .. }
            | ToolError::NotRegularFile { .. }
            | ToolError::InvalidPattern(_)
            | ToolError::CodeTooLarge { .. }
            | ToolError::SandboxUnavailable(_)
            | ToolError::McpConfig { .. }
            | ToolError::McpOverLimit { .. } => true,
            ToolError::Timeout(_)
            | ToolError::Transport(_)
            | ToolError::NotFound(_)
            | ToolError::Io { .. }
            | ToolError::SandboxFailed(_)
            | ToolError::McpStart { .. }
            | ToolError::McpCrashed { .. }
            | ToolError::McpTimeout { .. }
            | ToolError::McpProtocol { .. }
            | ToolError::McpRemote { .. }
            | ToolError::McpToolFailed { .. } => false,
        }
    }

    /// A short stable code for the error (for structured errors fed back to
    /// the model and for the UI).
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::UnknownTool(_) => "unknown_tool",
            ToolError::InvalidArguments { .. } => "invalid_arguments",
            ToolError::ArgumentsTooLarge { .. } => "arguments_too_large",
            ToolError::DeniedByPolicy(_) => "denied_by_policy",
            ToolError::ApprovalRequired { .. } => "approval_required",
            ToolError::ApprovalDenied(_) => "approval_denied",
            ToolError::ApprovalMismatch(_) => "approval_mismatch",
            ToolError::SchemeNotAllowed(_) => "scheme_not_allowed",
            ToolError::InvalidUrl(_) => "invalid_url",
            ToolError::HostNotAllowed(_) => "host_not_allowed",
            ToolError::AddressBlocked { .. } => "address_blocked",
            ToolError::HeaderNotAllowed(_) => "header_not_allowed",
            ToolError::TooManyRedirects(_) => "too_many_redirects",
            ToolError::Timeout(_) => "timeout",
            ToolError::Transport(_) => "transport",
            ToolError::NoWorkspace => "no_workspace",
            ToolError::UnknownRoot(_) => "unknown_root",
            ToolError::AbsolutePath(_) => "absolute_path",
            ToolError::PathTraversal(_) => "path_traversal",
            ToolError::PathEscapes(_) => "path_escapes",
            ToolError::PathDenied { .. } => "path_denied",
            ToolError::NotRegularFile { .. } => "not_regular_file",
            ToolError::NotFound(_) => "not_found",
            ToolError::Io { .. } => "io",
            ToolError::InvalidPattern(_) => "invalid_pattern",
            ToolError::CodeTooLarge { .. } => "code_too_large",
            ToolError::SandboxUnavailable(_) => "sandbox_unavailable",
            ToolError::SandboxFailed(_) => "sandbox_failed",
            ToolError::McpConfig { .. } => "mcp_config",
            ToolError::McpStart { .. } => "mcp_start",
            ToolError::McpCrashed { .. } => "mcp_crashed",
            ToolError::McpTimeout { .. } => "mcp_timeout",
            ToolError::McpProtocol { .. } => "mcp_protocol",
            ToolError::McpRemote { .. } => "mcp_remote",
            ToolError::McpOverLimit { .. } => "mcp_over_limit",
            ToolError::McpToolFailed { .. } => "mcp_tool_failed",
        }
    }
}
