mod download;
mod http;
mod branches;
mod llama;
mod support;
mod templates;
