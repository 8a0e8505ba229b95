//! Why a recording failed. Each variant says where (the event, the CPU event, the
//! file); the underlying error is its `source`, not part of its message, so that an
//! error chain prints it once. Some messages name `perf record`'s options (`-g`,
//! `--aux-pages`), which rvperf's recorder shares.

use std::path::PathBuf;

use perf_abi::ctr::CtrRecordError;
use perf_abi::{EventError, EventListError, RecordError as RecordParseError};
use perf_data::WriteError;
use perf_ring::{CpuListError, PollError, RingError};

use crate::{StopHandlerError, WorkloadError};

/// Why a recording failed. A failed recording leaves no output file behind and no
/// workload running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error(transparent)]
    EventList(#[from] EventListError),
    #[error(transparent)]
    Event(#[from] EventError),
    #[error(transparent)]
    Open(#[from] perf_ring::EventError),
    #[error(transparent)]
    Cpus(#[from] CpuListError),
    #[error(transparent)]
    Poll(#[from] PollError),
    /// A ring buffer held a record that is not one.
    #[error(transparent)]
    Ring(#[from] RingError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    StopHandler(#[from] StopHandlerError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    TraceDevice(#[from] trace_device::DeviceError),
    #[error("cannot copy the running kernel's code: {0}")]
    Kcore(#[from] crate::KcoreError),
    #[error("cannot write the kernel's code to {}: {source}", path.display())]
    KernelCopy {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot map the ring buffer of {event}")]
    MapRing { event: String, source: RingError },
    #[error("cannot map the AUX area of {event}")]
    MapAux { event: String, source: RingError },
    #[error("cannot create {}", path.display())]
    CreateOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the perf.data")]
    WriteOutput { source: std::io::Error },
    #[error("cannot move {} to {}", temporary.display(), output.display())]
    PlaceOutput {
        temporary: PathBuf,
        output: PathBuf,
        source: std::io::Error,
    },
    #[error("no event")]
    NoEvent,
    #[error(
        "--keep-aux: only rvperf_ctr recordings have AUX data to keep, and the rvperf_ctr \
         module is not loaded or not asked for (-b, -j or -e rvperf_ctr/.../)"
    )]
    NoAuxToKeep,
    #[error(
        "rvperf_ctr records one sampling event at a time (CTR is one per hart); got {events:?}"
    )]
    CtrEventCount { events: Vec<String> },
    #[error(
        "-g: rvperf_ctr records branch stacks, not callchains; -j call_stack gives CTR's call \
         stacks"
    )]
    CtrCallChains,
    #[error("event {event}: unknown rvperf_ctr trigger {trigger}")]
    UnknownCtrTrigger { event: String, trigger: u64 },
    #[error(
        "event {event} cannot trigger CTR branch stacks: rvperf_ctr samples on hardware, \
         cache or raw SBI PMU events (cycles, instructions, rNNNN)"
    )]
    NotACtrTrigger { event: String },
    #[error("--aux-pages {pages}: must be a power of two")]
    AuxPages { pages: usize },
    #[error(
        "rvperf_ctr: the trigger event {event} never got a hardware counter (the SBI \
         PMU's counters that can count it were all taken, e.g. by pinned events); \
         nothing was recorded"
    )]
    CtrNeverRunning { event: String },
    #[error("rvperf_ctr AUX data of CPU event {id}")]
    CtrData { id: u64, source: CtrRecordError },
    #[error("the counter of CPU event {id}")]
    CounterValues { id: u64, source: RecordParseError },
    #[error("the CPU event {id} was opened without its times")]
    CounterTimesMissing { id: u64 },
}
