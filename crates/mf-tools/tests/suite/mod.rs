mod code;
mod files;
mod http;
mod registry;
mod support;
