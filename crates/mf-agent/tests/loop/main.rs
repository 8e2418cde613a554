//! The loop over a scripted backend: deterministic transcripts. One test
//! binary; the scripted backend and the harness are shared, the tests are
//! grouped by theme.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod harness;
mod scripted;

mod approvals;
mod by_hand;
mod compaction;
mod exits;
mod kv;
mod mcp_window;
mod sending;
mod sessions;
mod store;
mod summariser;
mod window;
