mod branches;
mod download;
mod http;
mod llama;
mod support;
mod templates;
