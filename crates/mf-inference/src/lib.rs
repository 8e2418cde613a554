//! Inference backends (under construction).
