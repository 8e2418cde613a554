mod code;
mod files;
mod http;
mod mcp;
mod registry;
mod support;
