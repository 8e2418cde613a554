//! Measured forgetting: the pure compaction core (under construction).
