//! Profiles built from samples, independent of where the samples came from (perf
//! callchains, CTR branch stacks, N-Trace): folded stacks and flame graphs, and AutoFDO
//! sample profiles with writers for the formats LLVM and GCC read.
//!
//! The crate does no file I/O: writers append to a `Vec<u8>` or an `io::Write` the
//! caller owns, so the CLI decides where bytes go (and writes then renames).

pub mod sample_profile;

pub use sample_profile::{BodySample, FunctionProfile, LineLocation, SampleProfile};
