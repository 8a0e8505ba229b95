//! Work in progress (issue 3).
