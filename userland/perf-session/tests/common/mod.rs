//! Support shared by perf-session's integration tests.

pub mod side_band;
