//! Opening perf events and reading their mmap'd ring buffers: the only crate
//! of rvperf that makes perf syscalls. Record decoding lives in `perf-abi`.

mod cpus;
mod event;
mod poll;
mod ring;

pub use cpus::{online_cpus, parse_cpu_list, CpuListError};
pub use event::{Event, EventError};
pub use perf_abi::TimeConversion;
pub use poll::{poll_readable, PollError, PollStatus};
pub use ring::{
    page_size, AuxChunk, AuxMode, RawData, RawRecord, RecordBatch, RingBuffer, RingError,
};
