mod branches;
mod download;
mod http;
mod llama;
mod qwen3;
mod score;
mod support;
mod templates;
