//! `rvperf daemon`: always-on profiling of the whole machine through rvperf's eBPF
//! probes (aya-probes/, loaded by the profile-daemon library). Every interval writes
//! `interval-NNNNNN.pb.gz` (pprof) and `interval-NNNNNN.folded` into the output
//! directory, and at most every `--merged-every` intervals and after the last rewrites
//! `merged.pb.gz` and `merged.folded`, the whole run's; the
//! oldest intervals are removed beyond `--keep`. SIGTERM or SIGINT end the run after a
//! last, complete interval; SIGHUP recreates the output directory (after a rotation
//! moved it away).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use perf_session::{LocationGranularity, SampleLabels};
use profile_daemon::{
    Daemon, DaemonError, DaemonOptions, Fallback, KernelSymbolSource, KernelSymbolsFrom,
    ProgramExecution, Recorder, RunEnd, RunEvent, SampledEvent,
};

use crate::output::write_atomically;

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The directory profiles are written to.
    #[arg(long)]
    output: PathBuf,
    /// Seconds per interval.
    #[arg(long, default_value_t = 10.0)]
    interval: f64,
    /// The sampled event (any event `rvperf record -e` takes).
    #[arg(short = 'e', long, default_value = "cycles")]
    event: String,
    /// Samples per second on every CPU.
    #[arg(short = 'F', long, default_value_t = 99)]
    frequency: u64,
    /// Stop after this many intervals (default: run until SIGTERM or SIGINT).
    #[arg(long)]
    intervals: Option<u64>,
    /// Interval files kept; older ones are removed.
    #[arg(long, default_value_t = 60)]
    keep: u64,
    /// Most distinct (process, user stack, kernel stack) keys counted between two
    /// drains of the kernel's maps; samples beyond are counted as dropped. Default:
    /// what every CPU sampling at the frequency can bring in the shortest drain period
    /// (0.1 s), four times over, and at least 4,096.
    #[arg(long)]
    max_stacks: Option<u32>,
    /// Most distinct stacks the kernel holds between two drains (about 1 KiB of kernel
    /// memory each, preallocated); a sample's stack beyond them is counted and shown
    /// under `[stack lost]`. Default: two stacks a sample of every CPU in the shortest
    /// drain period (0.1 s), four times over, and at least 8,192.
    #[arg(long)]
    max_stack_traces: Option<u32>,
    /// Most distinct stacks of the merged profile: beyond them a new stack's samples
    /// are merged under `[merged profile full]`, so memory stays bounded over a long run
    /// (interval profiles are whole; each line says how many samples were merged so).
    #[arg(long, default_value_t = profile_daemon::MERGED_STACKS_DEFAULT)]
    max_merged_stacks: usize,
    /// The merged profile (`merged.pb.gz`, `merged.folded`) is rewritten at most every
    /// this many intervals, and always after the last. Its cost grows with the profile,
    /// so while the profile grows faster than its stacks recur (processes started all
    /// the time), a rewrite also waits until the intervals since the last one brought
    /// half as many stacks as it holds.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..))]
    merged_every: u64,
    /// Where BPF is unavailable (no permission, a kernel without BPF): `perf` samples
    /// through perf rings instead (every sample, with its callchain, crosses to user
    /// space, as `rvperf record -a -g`), named so on the first line. Without it the
    /// daemon refuses in one line.
    #[arg(long, value_enum)]
    fallback: Option<FallbackArgument>,
    /// The eBPF object (default: $RVPERF_PROBES, else rvperf-probes.bpf.o beside
    /// this binary, else /usr/lib/rvperf/rvperf-probes.bpf.o).
    #[arg(long)]
    probes: Option<PathBuf>,
    /// Kernel symbols from this kallsyms file (`/proc/kallsyms` or a copy). By
    /// default the running kernel names each sampled kernel address (an eBPF program
    /// run on demand), so the daemon does not read `/proc/kallsyms`, which the kernel
    /// formats whole on every read; where the kernel refuses that program, and for
    /// `--fallback perf`, `/proc/kallsyms`.
    #[arg(long)]
    kallsyms: Option<PathBuf>,
    /// One pprof location per function, as folded stacks and flame graphs count them
    /// (a leaf's sampled instructions are one stack), or per sampled `address`, for
    /// `go tool pprof -disasm` and `-addresses`: more stacks, a larger profile and
    /// more of the daemon's time and memory where stacks are new all the time.
    #[arg(long, value_enum, default_value_t = LocationsArgument::Function)]
    locations: LocationsArgument,
}

/// `--locations`' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LocationsArgument {
    Function,
    Address,
}

/// `--fallback`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FallbackArgument {
    /// The perf ring recorder.
    Perf,
}

/// The file name of the eBPF object beside the binary or in /usr/lib/rvperf.
const PROBES_NAME: &str = "rvperf-probes.bpf.o";

fn probes_path(arguments: &DaemonArgs) -> PathBuf {
    if let Some(path) = &arguments.probes {
        return path.clone();
    }
    if let Some(path) = std::env::var_os("RVPERF_PROBES") {
        return PathBuf::from(path);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(PROBES_NAME)));
    match beside {
        Some(path) if path.exists() => path,
        _ => Path::new("/usr/lib/rvperf").join(PROBES_NAME),
    }
}

pub fn run(arguments: &DaemonArgs) -> Result<()> {
    if !(arguments.interval > 0.0 && arguments.interval.is_finite()) {
        bail!("--interval must be a positive number of seconds");
    }
    if arguments.keep == 0 {
        bail!("--keep must keep at least one interval");
    }
    let spec = perf_abi::parse_event(&arguments.event, Path::new("/sys"))
        .with_context(|| format!("event {:?}", arguments.event))?;
    let options = DaemonOptions {
        probes: probes_path(arguments),
        event: SampledEvent {
            name: spec.name.clone(),
            pmu_type: spec.pmu_type,
            config: spec.config,
        },
        frequency: arguments.frequency,
        stack_counts: arguments.max_stacks,
        stack_traces: arguments.max_stack_traces,
        merged_stacks: arguments.max_merged_stacks,
        fallback: match arguments.fallback {
            Some(FallbackArgument::Perf) => Fallback::PerfRing,
            None => Fallback::Refuse,
        },
        // By command: process ids churn, and the run's profile must not grow with them.
        labels: SampleLabels::Command,
        locations: match arguments.locations {
            LocationsArgument::Function => LocationGranularity::Function,
            LocationsArgument::Address => LocationGranularity::Address,
        },
        kernel_symbols: match &arguments.kallsyms {
            Some(path) => KernelSymbolSource::Kallsyms(path.clone()),
            None => KernelSymbolSource::RunningKernel,
        },
        ..DaemonOptions::default()
    };
    let mut daemon = match Daemon::start(options) {
        Ok(daemon) => daemon,
        Err(DaemonError::BpfUnavailable { reason }) => {
            bail!("BPF is unavailable ({reason}); run as root (or with CAP_BPF and CAP_PERFMON), or with --fallback perf")
        }
        Err(error) => return Err(error.into()),
    };
    // After the start: a refused start leaves nothing behind.
    std::fs::create_dir_all(&arguments.output)
        .with_context(|| format!("cannot create {}", arguments.output.display()))?;
    profile_daemon::install_signal_handlers().context("cannot handle SIGTERM/SIGINT/SIGHUP")?;
    let recorder = match daemon.recorder() {
        Recorder::Bpf {
            sampler: ProgramExecution::JitCompiled,
        } => "eBPF".to_owned(),
        Recorder::Bpf {
            sampler: ProgramExecution::Interpreted,
        } => "eBPF, interpreted: the kernel's BPF JIT is off (sysctl net.core.bpf_jit_enable=1 \
              turns it on), so every sample costs the task it interrupts more"
            .to_owned(),
        Recorder::PerfRing { bpf_unavailable } => {
            format!("perf ring recorder, the --fallback: BPF is unavailable: {bpf_unavailable}")
        }
    };
    let kernel_names = match daemon.kernel_symbols() {
        KernelSymbolsFrom::RunningKernel => "kernel names from the running kernel".to_owned(),
        KernelSymbolsFrom::Kallsyms {
            path,
            fallback: None,
        } => format!("kernel names from {}", path.display()),
        KernelSymbolsFrom::Kallsyms {
            path,
            fallback: Some(reason),
        } => format!(
            "kernel names from {} (the running kernel cannot name them: {reason})",
            path.display()
        ),
    };
    eprintln!(
        "rvperf daemon: profiling every CPU ({} at {} Hz, {recorder}; {kernel_names}) into {}, {} s intervals",
        arguments.event,
        arguments.frequency,
        arguments.output.display(),
        arguments.interval
    );
    let every = Duration::from_secs_f64(arguments.interval);
    let output = arguments.output.clone();
    let keep = arguments.keep;
    let sink = |event: RunEvent<'_>| {
        match event {
            RunEvent::Reopen => {
                std::fs::create_dir_all(&output)
                    .with_context(|| format!("cannot recreate {}", output.display()))?;
                eprintln!(
                    "rvperf daemon: SIGHUP: outputs reopened in {}",
                    output.display()
                );
            }
            RunEvent::Interval { interval, merged } => {
                write_interval(&output, interval, merged, keep)?;
                let statistics = &interval.statistics;
                eprintln!(
                    "rvperf daemon: interval {}: {} samples in {} stacks, {} dropped (stack map full), {} stacks lost, {} process events lost, {} side-band records lost, {} execs, {} exits, {} merged under {}, {} map drains, {} stack map reads",
                    interval.number,
                    statistics.samples_counted,
                    statistics.stacks,
                    statistics.samples_dropped,
                    statistics.stack_errors,
                    statistics.process_events_lost,
                    statistics.side_band_lost,
                    statistics.execs,
                    statistics.exits,
                    statistics.merged_over_cap,
                    profile_daemon::MERGED_PROFILE_FULL,
                    statistics.drains,
                    statistics.stack_map_reads,
                );
                if statistics.stacks_misnamed > 0 {
                    eprintln!(
                        "rvperf daemon: warning: interval {}: {} new stacks whose addresses do not hash to the name the eBPF probe gave them (an eBPF object of another rvperf?)",
                        interval.number, statistics.stacks_misnamed,
                    );
                }
            }
        }
        Ok::<(), anyhow::Error>(())
    };
    let end = profile_daemon::run(
        &mut daemon,
        every,
        arguments.intervals,
        arguments.merged_every,
        sink,
    )
    .map_err(|error| match error {
        profile_daemon::RunError::Daemon(error) => anyhow::Error::from(error),
        profile_daemon::RunError::Sink(error) => error,
    })?;
    for problem in daemon.problems() {
        eprintln!("rvperf daemon: warning: {problem}");
    }
    match end {
        RunEnd::Signal(signal) => {
            eprintln!("rvperf daemon: {signal}: stopped, the last interval written")
        }
        RunEnd::Intervals => eprintln!("rvperf daemon: done"),
    }
    // Not dropped: everything is written, and the process ends on return, when the
    // kernel closes the daemon's descriptors (which detaches its programs and frees
    // its maps) and takes back its memory at once. Freeing the run's profile piece by
    // piece first was 5% of the daemon's instructions over a host churn run of six
    // intervals.
    std::mem::forget(daemon);
    Ok(())
}

/// Writes an interval's files and the merged profile, each whole (write then rename),
/// and removes the interval files beyond `keep`.
fn write_interval(
    directory: &Path,
    interval: &profile_daemon::Interval,
    merged: Option<&profile_daemon::Merged>,
    keep: u64,
) -> Result<()> {
    let stem = format!("interval-{:06}", interval.number);
    let write_profile = |name: &str, profile: &pprof::EncodedProfile| {
        let path = directory.join(name);
        write_atomically(&path, |out| Ok(profile.write_gzip(out)?))
            .with_context(|| format!("cannot write {}", path.display()))
    };
    let write_text = |name: &str, text: &str| {
        let path = directory.join(name);
        write_atomically(&path, |out| Ok(out.write_all(text.as_bytes())?))
            .with_context(|| format!("cannot write {}", path.display()))
    };
    write_profile(&format!("{stem}.pb.gz"), &interval.profile)?;
    write_text(&format!("{stem}.folded"), &interval.folded.to_text())?;
    if let Some(merged) = merged {
        write_profile("merged.pb.gz", &merged.profile)?;
        let path = directory.join("merged.folded");
        write_atomically(&path, |out| Ok(merged.folded.write_text(out)?))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(old) = interval.number.checked_sub(keep) {
        if old > 0 {
            let stem = format!("interval-{old:06}");
            for extension in ["pb.gz", "folded"] {
                let _ = std::fs::remove_file(directory.join(format!("{stem}.{extension}")));
            }
        }
    }
    Ok(())
}
