//! Integration tests of mf-tools, one binary: containment attacks made for
//! real (each asserts the refusal AND that nothing leaked), the HTTP tool
//! against loopback servers started by the test, and the registry's
//! approval flow end to end. Run as root here and in CI: the sandbox then
//! also drops to `nobody`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod suite;
