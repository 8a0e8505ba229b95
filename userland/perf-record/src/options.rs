//! What to record ([`RecordOptions`]) and what a recording gave ([`Recording`]).

use std::fmt;
use std::path::PathBuf;

use nix::sys::signal::Signal;
use perf_abi::Sampling;

use crate::{RecordError, WorkloadExit};

/// Default data pages of each CPU's ring (256 KiB with 4 KiB pages), as perf's -m.
pub const DEFAULT_DATA_PAGES: usize = 64;

/// Default AUX area pages of each CPU for AUX-based PMUs (2 MiB with 4 KiB pages).
pub const DEFAULT_AUX_PAGES: usize = 512;

/// What is recorded, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A command the recorder starts (held before its exec until the events are
    /// open, so that its first instruction is sampled) and follows into its
    /// children, until it exits.
    Command(Vec<String>),
    /// An existing process (its threads at the time of opening), until it exits.
    Process(i32),
    /// Every online CPU, until stopped.
    System,
    /// Every online CPU, while a command the recorder starts runs.
    SystemWhileCommand(Vec<String>),
}

impl Target {
    /// The command the recorder starts, if any.
    pub fn command(&self) -> Option<&[String]> {
        match self {
            Target::Command(command) | Target::SystemWhileCommand(command) => Some(command),
            Target::Process(_) | Target::System => None,
        }
    }

    /// Whether the events follow one task (and its children), not CPUs.
    pub(crate) fn scope(&self) -> Scope {
        match self {
            Target::Command(_) | Target::Process(_) => Scope::Task,
            Target::System | Target::SystemWhileCommand(_) => Scope::System,
        }
    }
}

/// Whom the events of a recording count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// One task (a command or a process), on every CPU it runs on.
    Task,
    /// Every task, on every CPU.
    System,
}

/// Whether samples carry call chains (perf's -g).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CallChains {
    #[default]
    Omitted,
    /// PERF_SAMPLE_CALLCHAIN: the kernel's and the user stack's frames.
    Sampled,
}

/// What becomes of an AUX source's data (rvperf_ctr's records).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuxData {
    /// Converted while recording into the samples Linux perf reads.
    #[default]
    ConvertToSamples,
    /// Kept as PERF_RECORD_AUXTRACE (decoded by rvperf script/report, converted later
    /// by rvperf inject).
    KeepAsAuxtrace,
}

/// Everything a recording needs. Branch stacks on RISC-V come from the rvperf_ctr PMU
/// (kmod-shim) where it is loaded: asked for by name (`-e rvperf_ctr/.../`) or picked
/// when `branch_sample_type` asks for branch stacks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordOptions {
    /// Events in perf's syntax, groups and modifiers included; none means perf's
    /// default (cpu-clock, or cycles when rvperf_ctr records).
    pub events: Vec<String>,
    pub sampling: Sampling,
    pub call_chains: CallChains,
    /// `PERF_SAMPLE_BRANCH_*` bits (perf's -b, -j); 0 for no branch stacks.
    pub branch_sample_type: u64,
    pub target: Target,
    /// Data pages of each CPU's ring (a power of two): a small ring loses records
    /// (counted) when the recorder falls behind.
    pub data_pages: usize,
    /// AUX area pages of each CPU (a power of two), for AUX sources.
    pub aux_pages: usize,
    pub aux_data: AuxData,
    /// The perf.data to write; written only when the recording is complete.
    pub output: PathBuf,
    /// The sysfs mount point, where PMUs are found.
    pub sysfs: PathBuf,
    /// The recorder's command line, for the perf.data header (`perf report --header`).
    pub command_line: Vec<String>,
    /// Record the trace device's N-Trace instead of sampling `events` (`rvperf trace
    /// record`): the events are then a system-wide dummy event for the side-band.
    pub trace: Option<crate::TraceOptions>,
    /// perf's build-id cache (`~/.debug`), where a copy of the vDSO is kept when a
    /// recorded process mapped it (as perf record keeps one); `None`: not kept.
    pub vdso_cache: Option<PathBuf>,
}

impl Default for RecordOptions {
    /// perf record's defaults: cpu-clock at 4000 Hz, no call chains or branch stacks,
    /// the whole system, into `perf.data`.
    fn default() -> RecordOptions {
        RecordOptions {
            events: Vec::new(),
            sampling: Sampling::Frequency(4000),
            call_chains: CallChains::Omitted,
            branch_sample_type: 0,
            target: Target::System,
            data_pages: DEFAULT_DATA_PAGES,
            aux_pages: DEFAULT_AUX_PAGES,
            aux_data: AuxData::ConvertToSamples,
            output: PathBuf::from("perf.data"),
            sysfs: PathBuf::from("/sys"),
            command_line: Vec::new(),
            trace: None,
            vdso_cache: None,
        }
    }
}

/// A complete recording: the output is in place.
#[derive(Debug)]
#[non_exhaustive]
pub struct Recording {
    /// How the started command ended (None without one). A command still running when
    /// the recording stopped got SIGTERM, as perf sends it.
    pub workload: Option<WorkloadExit>,
    /// The signal that stopped the recording ([`crate::StopFlag`]), if one did.
    pub stop_signal: Option<Signal>,
    pub summary: Summary,
    /// What the recording missed, in the order found.
    pub warnings: Vec<RecordWarning>,
    /// What the trace device did (an N-Trace recording).
    pub trace: Option<crate::TraceOutcome>,
}

/// What a recording wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// PERF_RECORD_SAMPLE records written (for an AUX source, the records it held).
    pub samples: u64,
    /// Records the kernel could not write into a full ring (PERF_RECORD_LOST and
    /// PERF_RECORD_LOST_SAMPLES).
    pub lost: u64,
    /// The output's size (the records' size where the output is not a file).
    pub bytes_written: u64,
    /// AUX areas that filled up (PERF_RECORD_AUX with the TRUNCATED flag).
    pub aux_truncated: u64,
    /// rvperf_ctr records at which perf throttled the trigger (each followed by a gap).
    pub throttled: u64,
}

/// Something a complete recording missed, for the caller to tell.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordWarning {
    /// rvperf_ctr's events' times could not be read: how long it recorded is unknown.
    CoverageUnknown { error: Box<RecordError> },
    /// rvperf_ctr recorded during only `share` (0 to 1) of the time its event was
    /// enabled: its trigger could not always get a hardware counter.
    LowCoverage { share: f64 },
    /// The trace sink overwrote `bytes` of trace before they were read, in `gaps`
    /// places (recorded as discontinuities of the AUXTRACE offsets).
    TraceLost { bytes: u64, gaps: usize },
    /// perf throttled the rvperf_ctr trigger `count` times
    /// (kernel.perf_event_max_sample_rate): samples are missing after each.
    Throttled { count: u64 },
    /// The vDSO was mapped, and no copy of it could be kept: a trace through it cannot
    /// be decoded there.
    VdsoNotKept { reason: String },
    /// The trace follows the kernel and where the kernel is could not be recorded (no
    /// `[kernel.kallsyms]_text` mapping): its vmlinux cannot be placed when decoding.
    KernelNotPlaced { reason: String },
}

impl RecordWarning {
    /// Whether the warning is about how the recording went, told before its summary,
    /// rather than about what it holds, told after.
    pub fn precedes_summary(&self) -> bool {
        matches!(self, RecordWarning::CoverageUnknown { .. })
    }
}

impl fmt::Display for RecordWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordWarning::CoverageUnknown { error } => {
                write!(f, "cannot tell how long rvperf_ctr recorded: {error}")?;
                // The whole chain, as one line.
                let mut source = std::error::Error::source(error.as_ref());
                while let Some(cause) = source {
                    write!(f, ": {cause}")?;
                    source = cause.source();
                }
                Ok(())
            }
            RecordWarning::TraceLost { bytes, gaps } => write!(
                f,
                "the trace sink overtook the recorder: {bytes} bytes of trace lost in {gaps} \
                 gaps (a larger --buffer-bytes, or a trace of fewer instructions)"
            ),
            RecordWarning::LowCoverage { share } => write!(
                f,
                "rvperf_ctr recorded during only {:.1}% of the time the event was \
                 enabled: its trigger could not always get a hardware counter",
                share * 100.0
            ),
            RecordWarning::VdsoNotKept { reason } => write!(
                f,
                "no copy of the vDSO was kept ({reason}): its code in the recording has no image"
            ),
            RecordWarning::KernelNotPlaced { reason } => write!(
                f,
                "where the kernel is was not recorded ({reason}): only a copy of its code \
                 (--kcore) can decode its trace"
            ),
            RecordWarning::Throttled { count } => write!(
                f,
                "the rvperf_ctr trigger was throttled {count} times \
                 (kernel.perf_event_max_sample_rate); samples are missing after each"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_say_what_was_missed_in_perf_s_terms() {
        assert_eq!(
            RecordWarning::Throttled { count: 3 }.to_string(),
            "the rvperf_ctr trigger was throttled 3 times \
             (kernel.perf_event_max_sample_rate); samples are missing after each"
        );
        assert_eq!(
            RecordWarning::LowCoverage { share: 0.5 }.to_string(),
            "rvperf_ctr recorded during only 50.0% of the time the event was enabled: its \
             trigger could not always get a hardware counter"
        );
    }

    #[test]
    fn an_unknown_coverage_tells_the_whole_error_chain_before_the_summary() {
        let warning = RecordWarning::CoverageUnknown {
            error: Box::new(RecordError::CtrData {
                id: 7,
                source: perf_abi::ctr::CtrRecordError::Truncated {
                    offset: 0,
                    needed: 48,
                    available: 8,
                },
            }),
        };
        let text = warning.to_string();
        assert!(
            text.starts_with(
                "cannot tell how long rvperf_ctr recorded: rvperf_ctr AUX data of CPU event 7: "
            ),
            "{text}"
        );
        assert!(warning.precedes_summary());
        assert!(!RecordWarning::Throttled { count: 1 }.precedes_summary());
    }
}
