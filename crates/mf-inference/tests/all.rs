//! Integration tests, one binary: templates, real models, HTTP backends.

mod suite;
