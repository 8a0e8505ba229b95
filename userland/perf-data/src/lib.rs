//! Read and write Linux `perf.data` files: file mode (`PERFILE2`) and, for reading,
//! pipe mode (`perf record -o -`), little-endian.
//!
//! No crate both reads every record rvperf needs and writes perf.data, so both sides
//! follow `tools/perf/util/header.c` of Linux directly. Records are `perf_abi`'s: the
//! reader parses them with `perf_abi::parse_record`, the parser rvperf reads ring
//! buffers with, borrowing from the mapped file ([`PerfDataReader`]), and the writer
//! writes the same types ([`PerfDataWriter`]); attrs are the kernel's
//! `perf_event_attr`. Corrupt input yields a [`ReadError`] with the file and the byte
//! offset, never a panic or an allocation sized by the file. [`ctr`] converts rvperf_ctr
//! records to the samples and throttle records the writer writes. [`Threads`] keeps the
//! threads of a recording and their command names by perf's own rules.

pub mod ctr;
mod format;
mod reader;
mod threads;
mod writer;

pub use format::*;
pub use reader::{
    AttrInfo, BuildIdEntry, HeaderInfo, PerfDataReader, RawRecord, ReadError, Records,
    DIRECTORY_DATA, DIRECTORY_KCORE, DIRECTORY_KCORE_ELF,
};
pub use threads::{ExitedThreads, Threads};
pub use writer::{
    AuxtraceChunk, EventDesc, FeatureSection, Metadata, PerfDataWriter, TaskEvent, WriteError,
};
