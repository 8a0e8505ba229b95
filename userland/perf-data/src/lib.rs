//! Read and write Linux `perf.data` files in file mode (`PERFILE2`).
//!
//! Reading goes through the `linux-perf-data` / `linux-perf-event-reader` crates, wrapped so
//! that corrupt input yields a typed error with the byte offset instead of a panic or an
//! absurd allocation. No crate writes perf.data, so [`PerfDataWriter`] follows
//! `tools/perf/util/header.c` of Linux directly; [`ctr`] converts rvperf_ctr records to the
//! samples and throttle records it writes. [`Threads`] keeps the threads of a
//! recording and their command names by perf's own rules.

mod abi;
mod brstack;
pub mod ctr;
mod reader;
mod threads;
mod writer;

pub use abi::*;
pub use brstack::{format_brstack, BranchEntry, BranchFlags, BranchStack};
pub use reader::{
    AttrInfo, BuildIdEntry, HeaderInfo, PerfDataReader, RawRecord, ReadError, Records, Sample,
};
pub use threads::Threads;
pub use writer::{
    AuxtraceChunk, EventDesc, Metadata, Mmap2, Mmap2FileId, PerfDataWriter, SampleData, SampleId,
    WriteError,
};
