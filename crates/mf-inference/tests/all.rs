//! Integration tests, one binary: templates, real models, HTTP backends.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
