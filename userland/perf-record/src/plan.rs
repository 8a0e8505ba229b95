//! The contract between the recording loop and what plugs into it: the events a
//! recording opens ([`Plan`]) and the AUX sources ([`AuxSource`]: rvperf_ctr today, the
//! N-Trace sink later) that drain the AUX areas. The loop (`recorder`) and each source
//! (`ctr`) depend on this module, not on each other.

use perf_abi::sys::bindings::{self as b, perf_event_attr};
use perf_abi::AttrOptions;
use perf_data::PerfDataWriter;
use perf_ring::{page_size, Event, RingBuffer};

use crate::output::OutputFile;
use crate::{RecordError, RecordOptions, RecordWarning, Target};

/// The perf.data writer of a recording.
pub(crate) type Writer = PerfDataWriter<OutputFile>;

/// One event to open on every CPU.
#[derive(Debug, Clone)]
pub(crate) struct PlannedEvent {
    /// The event as given (for messages).
    pub(crate) name: String,
    /// The attr opened.
    pub(crate) attr: perf_event_attr,
    /// The event as perf.data presents it: its name and attr.
    pub(crate) header_name: String,
    pub(crate) header_attr: perf_event_attr,
    /// The position of its group leader in the plan.
    pub(crate) group_leader: Option<usize>,
}

/// Everything decided before the workload starts: what can be refused is refused
/// before anything runs.
pub(crate) struct Plan {
    pub(crate) events: Vec<PlannedEvent>,
    pub(crate) cpus: Vec<u32>,
    pub(crate) data_pages: usize,
    pub(crate) aux: Option<AuxPlan>,
}

/// An executable file mapped by a process that ran before the recording started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SynthesizedFile {
    pub(crate) filename: String,
    pub(crate) pid: u32,
}

/// An AUX source and the size of the AUX area it reads on each CPU (0: it maps none,
/// as the trace device's sink is mapped from its own device).
pub(crate) struct AuxPlan {
    pub(crate) pages: usize,
    pub(crate) source: Box<dyn AuxSource>,
}

/// What a source of AUX data does in the recording loop. rvperf_ctr is one
/// ([`crate::ctr::CtrSource`]); an N-Trace sink would be another.
pub(crate) trait AuxSource {
    /// Once the output exists, before the events are enabled: records that describe
    /// the source (PERF_RECORD_AUXTRACE_INFO). `pid` is the recorded task's (-1: all).
    fn begin(&mut self, writer: &mut Writer, pid: i32) -> Result<(), RecordError>;

    /// After the data rings were drained: what each CPU's AUX area holds.
    fn drain(
        &mut self,
        cpus: &mut [CpuRing],
        writer: &mut Writer,
        counts: &mut Counts,
    ) -> Result<(), RecordError>;

    /// How often the loop must drain this source at least (the loop's poll wakes on
    /// the rings only); `None`: the loop's own interval.
    fn poll_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// What the trace device did, for a trace source, once the recording ended.
    fn trace_outcome(&self) -> Option<crate::TraceOutcome> {
        None
    }

    /// The executable files of the mappings this source wrote itself (synthesized from
    /// /proc), for the header's build ids.
    fn synthesized_files(&self) -> &[SynthesizedFile] {
        &[]
    }

    /// Once the events are disabled, before the last drain.
    fn events_disabled(&mut self, cpus: &[CpuRing], events: &[Event]);

    /// After the last drain: what the caller should be told, or why the recording
    /// holds nothing worth keeping.
    fn end(&mut self, counts: &Counts) -> Result<Vec<RecordWarning>, RecordError>;
}

/// The ring (and AUX area) of one CPU.
#[derive(Debug)]
pub(crate) struct CpuRing {
    pub(crate) cpu: u32,
    pub(crate) ring: RingBuffer,
    /// The first event on this CPU, which owns the ring: its index in the events.
    pub(crate) event: usize,
    /// The kernel's id of that event.
    pub(crate) id: u64,
}

/// What the rings gave so far.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) samples: u64,
    pub(crate) lost: u64,
    pub(crate) bytes: u64,
    pub(crate) aux_truncated: u64,
    pub(crate) throttled: u64,
}

/// An executable mapping seen (MMAP2 with PROT_EXEC): the first process that mapped
/// it and its build id, when the kernel gave one.
/// Attr options every recording starts from: the sampling, and the fields each sample
/// carries (ID, so that samples and side-band records name their event in perf.data).
pub(crate) fn sampling_options(options: &RecordOptions) -> AttrOptions {
    let mut attr_options = AttrOptions::default();
    attr_options.sampling = options.sampling;
    attr_options.sample_type = u64::from(
        b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_PERIOD
            | b::PERF_SAMPLE_ID,
    );
    attr_options.disabled = true;
    attr_options.sample_id_all = true;
    // A task's events start at its exec; CPU-wide events are enabled explicitly.
    attr_options.enable_on_exec = matches!(options.target, Target::Command(_));
    attr_options
}

/// A watermark a quarter of `pages` pages: the recorder is woken when a ring is a
/// quarter full, not per sample (each wake-up is a poll and a drain); the poll
/// timeout drains the rest regularly anyway.
pub fn quarter_watermark(pages: usize) -> u32 {
    u32::try_from(pages.saturating_mul(page_size()) / 4).unwrap_or(u32::MAX)
}
