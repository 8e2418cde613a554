//! Tools and their containment (under construction).
