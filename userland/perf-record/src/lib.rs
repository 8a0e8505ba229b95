//! Recording perf events into a perf.data that Linux perf reads, as `perf record`
//! does: [`record`] opens the events (perf's syntax, groups and modifiers, parsed by
//! `perf-abi`) on every online CPU, maps one ring per CPU (`perf-ring`), starts the
//! workload held before its exec ([`Workload`]), and drains the rings into the file
//! (`perf-data`'s writer) until the target is done or [`StopFlag`] says stop.
//!
//! One loop serves every recording; an AUX source plugs into it. rvperf_ctr (RISC-V
//! branch stacks from kmod-shim's PMU) is the first: its records become branch-stack
//! samples (`perf_data::ctr`) or are kept as PERF_RECORD_AUXTRACE. An N-Trace sink
//! is the second ([`TraceOptions`]): the `rvtrace` driver's sink drained into
//! PERF_RECORD_AUXTRACE, with the side-band that attributes it to processes.
//!
//! The library never prints: what a recording missed is returned as
//! [`RecordWarning`]s in its [`Recording`], and errors are typed ([`RecordError`]).
//! Signals are the caller's: SIGINT/SIGTERM stop a recording only once the caller
//! installed [`StopFlag::install_signal_handlers`].

mod ctr;
mod error;
mod kcore;
mod options;
mod output;
mod plan;
mod recorder;
mod stop;
mod synthesize;
mod trace_source;
mod vdso;
mod workload;

pub use ctr::pmu_type as ctr_pmu_type;
pub use error::RecordError;
pub use kcore::{
    gnu_build_id, CodeRange, KcoreError, KernelCode, KernelPlace, KernelSources, KernelSymbol,
};
pub use options::{
    AuxData, CallChains, RecordOptions, RecordWarning, Recording, Summary, Target,
    DEFAULT_AUX_PAGES, DEFAULT_DATA_PAGES,
};
pub use plan::quarter_watermark;
pub use recorder::record;
pub use stop::{StopFlag, StopHandlerError};
// /proc/PID/maps lines, for the daemon's view of processes already running.
pub use synthesize::{parse_maps_line, MapsLine};
pub use trace_source::{KernelCopy, TraceOptions, TraceOutcome, DEFAULT_DRAIN_INTERVAL};
pub use workload::{Workload, WorkloadError, WorkloadExit};

pub(crate) use options::Scope;
