//! A perf.data session (or a decoded trace), as perf's `session.c`, `ordered-events.c` and `machine.c`
//! build one, and the tools that consume it.
//!
//! * [`Session`] reads a [`perf_data::PerfDataReader`]'s records and gives their
//!   samples in time order ([`Session::next_sample`]), with the side band (MMAP,
//!   MMAP2, COMM, FORK, EXIT) applied before each to the [`Processes`]: each
//!   process's address space (the symbolizer's, with perf's fork and exec rules) and
//!   its threads' command names. Records are ordered by perf's rounds
//!   ([`OrderedEvents`]); AUX data kept as PERF_RECORD_AUXTRACE is decoded into
//!   samples ([`AuxDecoder`]: rvperf_ctr's records become branch-stack samples),
//!   other AUX types are counted.
//! * The consumers: [`fold`](fold()) (a flame graph's collapse stage, over
//!   `profiles::StackCollapser`), [`report`](report::report) (perf report's rows), [`autofdo`]
//!   (branch stacks to an AutoFDO sample profile of one binary) and [`inject`] (a
//!   perf.data rewritten with its AUX data decoded into samples).
//! * Decoded instruction trace ([`trace`]): the code a trace ran ([`TraceCode`], ELF
//!   files placed where they were loaded) and the same products from any protocol's
//!   trace elements: call-stack flame graphs ([`fold_trace`]), exact execution counts
//!   for AutoFDO ([`count_trace`]) and a perf.data of LBR-style branch-stack samples
//!   a complete trace would have given ([`trace_inject`], `rvperf inject --itrace`).
//!
//! The library never prints: progress, losses, undecoded AUX data, symbolizer
//! problems and what a profile left out are returned for the caller to show.

pub mod autofdo;
pub mod aux;
pub mod fold;
pub mod inject;
pub mod lost;
pub mod ntrace_attribution;
pub mod ntrace_recording;
pub mod ntrace_task_contexts;
pub mod ordered;
pub mod pprof_export;
pub mod processes;
pub mod report;
pub mod session;
pub mod timed_messages;
pub mod trace;
pub mod trace_inject;

pub use aux::{AuxDecoder, CorruptAux, UndecodedAux};
pub use fold::{fold, FoldOptions, Split, Weight};
pub use lost::Lost;
pub use ntrace_attribution::{
    Attribution, AttributionError, ProgramRun, ThreadTrace, Unattributed,
};
pub use ntrace_recording::{
    is_ntrace_recording, place_files, place_vmlinux, read_ntrace_recording, CommandName,
    ExecutableMapping, JoinedGap, KernelMapping, NtraceRecording, NtraceRecordingError,
    PlacementProblem, Task, TaskFork, TaskSwitch, TracePiece, VmlinuxProblem,
};
pub use ntrace_task_contexts::{
    decode_by_context, ContextDecode, ContextOwner, ContextThread, ElementsKept, TaskContext,
    TaskContexts, TaskContextsUnavailable, ThreadElements, UnattributedElements,
};
pub use ordered::OrderedEvents;
pub use pprof_export::{
    folded_pprof, pprof_profile, sample_labels, FoldedLine, IntervalProfile, LocationAddresses,
    LocationGranularity, PprofExport, PprofExportError, PprofOptions, SampleLabels, StackFrame,
    StackProfile,
};
pub use processes::{thread_id, InlineFrames, Place, Processes, SymbolOptions};
pub use session::{Session, SessionError, SessionSample};
pub use timed_messages::{TimedMessage, TimedMessages};
pub use trace::{
    count_trace, elf_build_id, fold_trace, LoadedFile, PlacedElf, SampledTraceCounts, TraceCode,
    TraceCodeError, TraceFold, TraceFoldOptions, TRACE_PID,
};
pub use trace_inject::{
    ElfMapping, TraceInjectError, TraceInjectOptions, TraceInjected, TraceInjector,
};
