//! `rvperf record`: sample a command, a process or the whole system with
//! `perf_event_open` and write a perf.data that Linux perf reads. The recording is
//! `perf-record`'s; this is its command line, and what it prints and how it ends.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::signal::{self, raise, SigHandler, Signal};
use perf_abi::{parse_branch_filters, Sampling, DASH_B_BRANCH_FILTER};
use perf_record::{
    AuxData, CallChains, RecordOptions, RecordWarning, Recording, StopFlag, Target, WorkloadExit,
    DEFAULT_AUX_PAGES, DEFAULT_DATA_PAGES,
};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Event to sample (perf syntax: cpu-clock, cycles, rNNNN, pmu/config=.../); repeatable.
    #[arg(short = 'e', long = "event")]
    events: Vec<String>,
    /// Sampling frequency in Hz.
    #[arg(short = 'F', long = "freq", conflicts_with = "count")]
    frequency: Option<u64>,
    /// Sampling period in events.
    #[arg(short = 'c', long = "count")]
    count: Option<u64>,
    /// Record call chains.
    #[arg(short = 'g')]
    call_graph: bool,
    /// Record branch stacks of any taken branch.
    #[arg(short = 'b', long = "branch-any", conflicts_with = "branch_filter")]
    branch_any: bool,
    /// Record branch stacks with perf's filter names (any, any_call, any_ret, ind_call, u, k, ...).
    #[arg(short = 'j', long = "branch-filter", value_name = "FILTERS")]
    branch_filter: Option<String>,
    /// System-wide, on every online CPU.
    #[arg(short = 'a', long = "all-cpus", conflicts_with = "pid")]
    all_cpus: bool,
    /// An existing process.
    #[arg(short = 'p', long = "pid")]
    pid: Option<i32>,
    /// Data pages of each CPU's ring buffer (a power of two), as perf's -m: a small ring
    /// loses records (counted in the summary) when the recorder falls behind.
    #[arg(short = 'm', long = "mmap-pages", value_name = "PAGES", default_value_t = DEFAULT_DATA_PAGES)]
    mmap_pages: usize,
    /// AUX area pages per CPU for AUX-based PMUs such as rvperf_ctr (a power of two).
    #[arg(long = "aux-pages", value_name = "PAGES", default_value_t = DEFAULT_AUX_PAGES)]
    aux_pages: usize,
    /// rvperf_ctr: keep the AUX data in perf.data as PERF_RECORD_AUXTRACE, decoded by
    /// rvperf script/report, instead of converting it to samples that Linux perf reads.
    #[arg(long = "keep-aux")]
    keep_aux: bool,
    /// Output file.
    #[arg(short = 'o', long = "output", default_value = "perf.data")]
    output: PathBuf,
    /// The command to run and sample.
    #[arg(last = true)]
    command: Vec<String>,
}

/// How `rvperf record` ends, as `perf record` ends (builtin-record.c): by the signal
/// that killed the workload, else by the SIGINT/SIGTERM that stopped the recording,
/// raised again once the output is written; else with the workload's exit status (0
/// without a workload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    signal: Option<Signal>,
    code: u8,
}

impl Outcome {
    pub(crate) fn new(recording: &Recording) -> Outcome {
        match recording.workload {
            Some(WorkloadExit::Signal(signal)) => Outcome {
                signal: Some(signal),
                code: 0,
            },
            Some(WorkloadExit::Code(code)) => Outcome {
                signal: recording.stop_signal,
                code: u8::try_from(code).unwrap_or(u8::MAX),
            },
            None => Outcome {
                signal: recording.stop_signal,
                code: 0,
            },
        }
    }

    /// Ends rvperf accordingly: returns the exit code, or kills rvperf by the signal.
    pub fn exit(self) -> ExitCode {
        let Some(signal) = self.signal else {
            return ExitCode::from(self.code);
        };
        // The crash is the workload's: no core file of rvperf's.
        if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_CORE) {
            let _ = setrlimit(Resource::RLIMIT_CORE, 0, hard);
        }
        // SAFETY: SIG_DFL installs no handler; the default action ends the process.
        let _ = unsafe { signal::signal(signal, SigHandler::SigDfl) };
        let _ = raise(signal);
        // Not reached for a terminating signal; the shell's convention otherwise.
        ExitCode::from(128u8.saturating_add(signal as u8))
    }
}

pub fn run(arguments: &RecordArgs) -> Result<Outcome> {
    let Some(target) = target(arguments) else {
        bail!("nothing to record: give -- COMMAND, -p PID or -a");
    };
    if !arguments.mmap_pages.is_power_of_two() {
        bail!(
            "-m {}: the ring's data pages must be a power of two",
            arguments.mmap_pages
        );
    }
    let branch_sample_type = match (&arguments.branch_filter, arguments.branch_any) {
        (Some(filters), _) => parse_branch_filters(filters)?,
        (None, true) => DASH_B_BRANCH_FILTER,
        (None, false) => 0,
    };
    let sampling = match (arguments.count, arguments.frequency) {
        (Some(period), _) => Sampling::Period(period),
        (None, Some(hz)) => Sampling::Frequency(hz),
        (None, None) => Sampling::Frequency(4000),
    };
    // SIGINT and SIGTERM stop the recording: what the rings hold is still written, and
    // rvperf then ends by that signal, as perf does.
    let stop = StopFlag::new();
    stop.install_signal_handlers()?;
    let mut options = RecordOptions::default();
    options.events = arguments.events.clone();
    options.sampling = sampling;
    options.call_chains = if arguments.call_graph {
        CallChains::Sampled
    } else {
        CallChains::Omitted
    };
    options.branch_sample_type = branch_sample_type;
    options.target = target;
    options.data_pages = arguments.mmap_pages;
    options.aux_pages = arguments.aux_pages;
    options.aux_data = if arguments.keep_aux {
        AuxData::KeepAsAuxtrace
    } else {
        AuxData::ConvertToSamples
    };
    options.output = arguments.output.clone();
    options.command_line = std::env::args().collect();
    let recording = perf_record::record(&options, stop)?;
    print_recording(&recording, &arguments.output);
    Ok(Outcome::new(&recording))
}

/// What is recorded, by perf's target rules: -a with a command records everything
/// while the command runs; a command is recorded rather than -p's process.
fn target(arguments: &RecordArgs) -> Option<Target> {
    let command = arguments.command.clone();
    match (command.is_empty(), arguments.pid, arguments.all_cpus) {
        (false, _, true) => Some(Target::SystemWhileCommand(command)),
        (false, _, false) => Some(Target::Command(command)),
        (true, Some(pid), _) => Some(Target::Process(pid)),
        (true, None, true) => Some(Target::System),
        (true, None, false) => None,
    }
}

/// The summary line, how the command ended, and the warnings: a warning about how the
/// recording went before the summary, about what it holds after.
fn print_recording(recording: &Recording, output: &Path) {
    let (before, after): (Vec<&RecordWarning>, Vec<&RecordWarning>) = recording
        .warnings
        .iter()
        .partition(|warning| warning.precedes_summary());
    for warning in before {
        eprintln!("rvperf record: warning: {warning}");
    }
    let summary = &recording.summary;
    let truncated = if summary.aux_truncated > 0 {
        format!(", AUX area full {} times", summary.aux_truncated)
    } else {
        String::new()
    };
    eprintln!(
        "[ rvperf record: {} samples, {} lost{truncated}, {} bytes written to {} ]",
        summary.samples,
        summary.lost,
        summary.bytes_written,
        output.display()
    );
    match recording.workload {
        Some(WorkloadExit::Code(0)) | None => {}
        Some(exit) => eprintln!("rvperf record: the command {exit}"),
    }
    for warning in after {
        eprintln!("rvperf record: warning: {warning}");
    }
}

/// The warning of a recording (or an injection) whose trigger was throttled.
pub(crate) fn throttle_warning(command: &str, throttled: u64) -> String {
    format!(
        "{command}: warning: {}",
        RecordWarning::Throttled { count: throttled }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throttle_warning_names_the_count_and_the_limit() {
        assert_eq!(
            throttle_warning("rvperf record", 3),
            "rvperf record: warning: the rvperf_ctr trigger was throttled 3 times \
             (kernel.perf_event_max_sample_rate); samples are missing after each"
        );
    }
}
