//! Inference for Measured Forgetting.
//!
//! How the pieces fit:
//! - [`types`] is the chat vocabulary ([`ChatMessage`], [`ToolSpec`], [`Sampling`],
//!   [`Generation`] with its [`KvStats`]).
//! - [`Backend`] is what the agent talks to: generate (streamed, cancellable),
//!   count tokens, context size, model info.
//! - [`LlamaSession`] runs a GGUF model in-process on a worker thread that keeps the
//!   KV cache between calls and reuses the longest common prefix of each prompt.
//! - [`OllamaBackend`] and [`OpenAiBackend`] talk to existing servers.
//! - [`template::ChatTemplate`] renders the model's own chat template (tools
//!   included) and chooses the [`tool_parse::ToolCallFormat`] its replies are
//!   parsed with; [`thinking`] separates `<think>` blocks.
//! - [`grammar`] holds the embedded model's tool calls to the offered tools'
//!   schemas (a lazy GBNF grammar, from the call's opener on).
//! - [`models`] is the model manager: catalog, local list, GGUF header,
//!   download with resume and sha256.

pub mod backend;
pub mod error;
pub mod grammar;
pub mod http;
pub mod llama;
pub mod models;
pub mod reply;
pub mod template;
pub mod thinking;
pub mod tool_parse;
pub mod types;

pub use backend::{Backend, CancelToken, KvSnapshot, SnapshotSlot, TokenSink, common_prefix};
pub use error::{InferenceError, Result};
pub use http::{OllamaBackend, OpenAiBackend};
pub use llama::{KvMemory, LlamaConfig, LlamaSession};
pub use types::*;
