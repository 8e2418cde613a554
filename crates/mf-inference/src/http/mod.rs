//! Backends that talk to existing servers over HTTP (streaming).

mod common;
mod ollama;
mod openai;

pub use ollama::OllamaBackend;
pub use openai::OpenAiBackend;
