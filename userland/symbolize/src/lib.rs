//! Symbolization (work in progress by a helper).
