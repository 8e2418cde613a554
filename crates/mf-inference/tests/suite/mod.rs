mod branches;
mod download;
mod http;
mod llama;
mod score;
mod support;
mod templates;
