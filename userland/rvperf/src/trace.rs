//! `rvperf trace`: hardware trace through the `rvtrace` driver (`/dev/rvtrace`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use perf_data::PerfDataReader;
use perf_record::{
    RecordOptions, Recording, StopFlag, Target, TraceOptions, TraceOutcome, WorkloadExit,
};
use perf_session::{read_ntrace_recording, JoinedGap};
use trace_device::abi::{feature, mode, privilege, status_flag, SYNC_NONE};
use trace_device::Config;

use crate::output::write_atomically;
use crate::record::Outcome;

#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// Trace a command (or the system) with the machine's N-Trace hardware, through the
    /// rvtrace driver, into a perf.data (or a raw trace).
    Record(TraceRecordArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TraceMode {
    /// Branch trace messaging: one bit per conditional branch, addresses of indirect jumps.
    Btm,
    /// History trace messaging: branch histories in fewer messages.
    Htm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TraceFormat {
    /// A perf.data: the trace as AUXTRACE data, its configuration in AUXTRACE_INFO, and
    /// the side-band (MMAP2, COMM, FORK/EXIT, context switches) of the whole system.
    PerfData,
    /// The raw N-Trace bytes, and the configuration in FILE.info (`key=value` lines).
    Raw,
}

#[derive(Debug, Args)]
pub struct TraceRecordArgs {
    /// The output (default: perf.data, or trace.nt with --format raw).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "perf-data")]
    format: TraceFormat,
    /// Trace the whole system until SIGINT/SIGTERM (or, with a command, until it ends).
    /// The trace is of every hart either way: the hardware does not tell processes
    /// apart; the side-band does.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    #[arg(long, value_enum, default_value = "htm")]
    mode: TraceMode,
    /// User mode (with --kernel: user and supervisor mode, not the firmware's machine
    /// mode). Without --user and --kernel, every privilege level is traced.
    #[arg(long)]
    user: bool,
    /// Supervisor mode, the kernel (with --user: both).
    #[arg(long)]
    kernel: bool,
    /// Timestamps (the hart's `time`) in the messages: the default for a perf.data,
    /// where they tell the processes apart (with the context switches).
    #[arg(long, conflicts_with = "no_timestamps")]
    timestamps: bool,
    /// No timestamps: a smaller trace, decoded as one address space.
    #[arg(long)]
    no_timestamps: bool,
    /// Report every return's address instead of inferring it from the call stack.
    #[arg(long)]
    no_implicit_return: bool,
    /// Report repeated branch histories as they come, not as repeat counts.
    #[arg(long)]
    no_repeated_history: bool,
    /// Report direct jumps too.
    #[arg(long)]
    all_jumps: bool,
    /// Sequential jumps (an address loaded just before the jump) inferred, not reported.
    #[arg(long)]
    sequential_jumps: bool,
    /// Addresses whose high bits are all ones sent shortened.
    #[arg(long)]
    msb_extension: bool,
    /// Ownership messages on every change of privilege or thread, naming the thread
    /// that runs (the driver writes it at every context switch and exec): a trace that
    /// follows the kernel is then attributed to threads exactly, not at
    /// synchronisations. The block must have a context register.
    #[arg(long)]
    context: bool,
    /// A synchronisation every 2^(N+4) instruction half-words (0..15).
    #[arg(long, value_name = "N")]
    sync_max: Option<u32>,
    /// Bytes of sink memory to use (default: all of it).
    #[arg(long, value_name = "BYTES")]
    buffer_bytes: Option<u64>,
    /// Stop the trace when the buffer is full instead of overwriting it.
    #[arg(long)]
    stop_on_wrap: bool,
    /// Keep a copy of the running kernel's code (from /proc/kcore, with kallsyms'
    /// names), which decoding a trace of the kernel needs: the output is then a perf.data
    /// directory as `perf record --kcore` makes (`data`, `kcore_dir/kcore`); with
    /// `--format raw`, FILE.kcore beside the trace (an ELF for `--elf`).
    #[arg(long)]
    kcore: bool,
    /// Drain the sink at least every MS milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    poll_ms: u32,
    /// The trace device.
    #[arg(long, default_value = trace_device::DEVICE_PATH)]
    device: PathBuf,
    /// The command to trace.
    #[arg(last = true)]
    command: Vec<String>,
}

pub fn run(arguments: &TraceArgs) -> Result<Outcome> {
    match &arguments.command {
        TraceCommand::Record(record) => run_record(record),
    }
}

fn config(arguments: &TraceRecordArgs) -> Config {
    let mut config = Config::new(match arguments.mode {
        TraceMode::Btm => mode::BTM,
        TraceMode::Htm => mode::HTM,
    });
    for (wanted, bit) in [
        (!arguments.no_implicit_return, feature::IMPLICIT_RETURN),
        (!arguments.no_repeated_history, feature::REPEATED_HISTORY),
        (arguments.all_jumps, feature::ALL_JUMPS),
        (arguments.sequential_jumps, feature::SEQUENTIAL_JUMPS),
        (arguments.msb_extension, feature::MSB_EXTENSION),
        (
            arguments.timestamps
                || (arguments.format == TraceFormat::PerfData && !arguments.no_timestamps),
            feature::TIMESTAMPS,
        ),
        (arguments.context, feature::CONTEXT | feature::CONTEXT_TASK),
        (arguments.stop_on_wrap, feature::STOP_ON_WRAP),
    ] {
        if wanted {
            config.features |= bit;
        }
    }
    config.privileges = match (arguments.user, arguments.kernel) {
        (false, false) => 0,
        (user, kernel) => {
            (if user { privilege::USER } else { 0 })
                | (if kernel { privilege::SUPERVISOR } else { 0 })
        }
    };
    config.sync_max = arguments.sync_max.unwrap_or(SYNC_NONE);
    config.buffer_bytes = arguments.buffer_bytes.unwrap_or(0);
    config
}

/// Whether the recording traces the kernel (supervisor mode).
fn traces_kernel(arguments: &TraceRecordArgs) -> bool {
    arguments.kernel || !arguments.user
}

fn run_record(arguments: &TraceRecordArgs) -> Result<Outcome> {
    if arguments.kcore && !traces_kernel(arguments) {
        bail!("--kcore keeps the kernel's code, which a trace of user mode alone (--user) does not need");
    }
    match arguments.format {
        TraceFormat::PerfData => record_perf_data(arguments),
        TraceFormat::Raw => record_raw(arguments),
    }
}

/// Records into the perf.data at `output` (the recording loop of `perf-record`, with
/// the trace device as its AUX source).
fn record_into(
    arguments: &TraceRecordArgs,
    output: &Path,
    kernel_copy: Option<&Path>,
) -> Result<Recording> {
    let target = match (arguments.command.is_empty(), arguments.all_cpus) {
        (false, _) => Target::SystemWhileCommand(arguments.command.clone()),
        (true, true) => Target::System,
        (true, false) => bail!("nothing to trace: give -- COMMAND, or -a"),
    };
    let stop = StopFlag::new();
    stop.install_signal_handlers()?;
    let mut options = RecordOptions::default();
    options.target = target;
    options.output = output.to_owned();
    options.command_line = std::env::args().collect();
    let mut trace = TraceOptions::new(arguments.device.clone(), config(arguments));
    trace.drain_interval = Duration::from_millis(u64::from(arguments.poll_ms.max(1)));
    trace.kernel_copy = kernel_copy.map(Path::to_path_buf);
    options.trace = Some(trace);
    // The vDSO's image where readers look for recorded files (perf's ~/.debug): a
    // trace through it is decoded against it.
    options.vdso_cache = symbolize::SymbolizerOptions::default()
        .build_id_dirs
        .into_iter()
        .next();
    Ok(perf_record::record(&options, stop)?)
}

fn report(recording: &Recording) {
    match recording.workload {
        Some(WorkloadExit::Code(0)) | None => {}
        Some(exit) => eprintln!("rvperf trace record: the command {exit}"),
    }
    if let Some(copy) = recording.trace.as_ref().and_then(|trace| trace.kernel_copy) {
        eprintln!(
            "rvperf trace record: the kernel's code copied before tracing started: {} bytes in {} ranges ({} bytes of ELF) in {} ms",
            copy.code_bytes,
            copy.ranges,
            copy.file_bytes,
            copy.elapsed.as_millis()
        );
    }
    for warning in &recording.warnings {
        eprintln!("rvperf trace record: warning: {warning}");
    }
}

fn record_perf_data(arguments: &TraceRecordArgs) -> Result<Outcome> {
    let output = arguments
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("perf.data"));
    let recording = if arguments.kcore {
        record_directory(arguments, &output)?
    } else {
        note_kernel_without_copy(arguments);
        record_into(arguments, &output, None)?
    };
    let summary = &recording.summary;
    let lost = if summary.lost > 0 {
        format!(", {} side-band records lost", summary.lost)
    } else {
        String::new()
    };
    eprintln!(
        "[ rvperf trace record: {} bytes written to {}{lost} ]",
        summary.bytes_written,
        output.display()
    );
    report(&recording);
    Ok(Outcome::new(&recording))
}

/// A trace of the kernel without `--kcore` decodes its kernel parts against vmlinux at
/// best, which is not the code that ran: said before recording.
fn note_kernel_without_copy(arguments: &TraceRecordArgs) {
    if traces_kernel(arguments) {
        eprintln!(
            "rvperf trace record: note: the kernel is traced: --kcore keeps its code as it ran, which decoding it needs (vmlinux differs wherever the kernel patched itself)"
        );
    }
}

/// `--kcore`: a perf.data directory, as `perf record --kcore` writes one: the recording
/// in `data` and the kernel's code in `kcore_dir/kcore`, written in a temporary
/// directory beside `output` and moved into place when complete (nothing is left
/// behind otherwise).
fn record_directory(arguments: &TraceRecordArgs, output: &Path) -> Result<Recording> {
    let mut temporary = output.to_owned().into_os_string();
    temporary.push(".partial");
    let temporary = PathBuf::from(temporary);
    let result = (|| {
        let _ = std::fs::remove_dir_all(&temporary);
        let kcore_directory = temporary.join(perf_data::DIRECTORY_KCORE);
        std::fs::create_dir_all(&kcore_directory)
            .with_context(|| format!("cannot create {}", kcore_directory.display()))?;
        let recording = record_into(
            arguments,
            &temporary.join(perf_data::DIRECTORY_DATA),
            Some(&kcore_directory.join(perf_data::DIRECTORY_KCORE_ELF)),
        )?;
        // A file or an older directory of that name is replaced, as a perf.data file is.
        let replaced = if output.is_dir() {
            std::fs::remove_dir_all(output)
        } else if output.exists() {
            std::fs::remove_file(output)
        } else {
            Ok(())
        };
        replaced.with_context(|| format!("cannot replace {}", output.display()))?;
        std::fs::rename(&temporary, output).with_context(|| {
            format!(
                "cannot move {} to {}",
                temporary.display(),
                output.display()
            )
        })?;
        Ok(recording)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&temporary);
    }
    result
}

/// `--format raw`: the recording's trace bytes, gaps cut out, and its `.info`. The
/// recording is made as a perf.data beside the output (one recording loop for both
/// formats), read back, and removed.
fn record_raw(arguments: &TraceRecordArgs) -> Result<Outcome> {
    let output = arguments
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("trace.nt"));
    let mut intermediate = output.clone().into_os_string();
    intermediate.push(".perf.data");
    let intermediate = PathBuf::from(intermediate);
    let result = record_raw_through(arguments, &output, &intermediate);
    // Whatever happened: the perf.data was a means.
    let _ = std::fs::remove_file(&intermediate);
    if result.is_err() {
        let _ = std::fs::remove_file(kernel_copy_of(&output));
    }
    result
}

fn record_raw_through(
    arguments: &TraceRecordArgs,
    output: &Path,
    intermediate: &Path,
) -> Result<Outcome> {
    let kernel_copy = kernel_copy_of(output);
    if !arguments.kcore {
        note_kernel_without_copy(arguments);
    }
    let recording = record_into(
        arguments,
        intermediate,
        arguments.kcore.then_some(kernel_copy.as_path()),
    )?;
    let Some(outcome) = recording.trace else {
        bail!("the recording holds no trace device outcome");
    };
    let reader = PerfDataReader::open(intermediate)
        .with_context(|| format!("cannot read {}", intermediate.display()))?;
    let traced =
        read_ntrace_recording(&reader).with_context(|| intermediate.display().to_string())?;
    let (trace, gaps) = traced.joined_trace();
    write_atomically(output, |out| {
        out.write_all(&trace)?;
        Ok(())
    })
    .with_context(|| format!("cannot write {}", output.display()))?;
    let mut info_path = output.to_owned().into_os_string();
    info_path.push(".info");
    let info_path = PathBuf::from(info_path);
    let exit = recording.workload.unwrap_or(WorkloadExit::Code(0));
    write_atomically(&info_path, |out| {
        out.write_all(info_text(&outcome, &gaps, exit).as_bytes())?;
        Ok(())
    })
    .with_context(|| format!("cannot write {}", info_path.display()))?;
    let lost: u64 = gaps.iter().map(|gap| gap.lost).sum();
    eprintln!(
        "rvperf: {} bytes of trace in {} ({} drains, {} wraps{})",
        trace.len(),
        output.display(),
        outcome.drains,
        outcome.status.wraps,
        if lost > 0 {
            format!(", {lost} bytes lost in {} gaps", gaps.len())
        } else {
            String::new()
        }
    );
    report(&recording);
    Ok(Outcome::new(&recording))
}

/// `--format raw --kcore`'s copy of the kernel's code: FILE.kcore.
fn kernel_copy_of(output: &Path) -> PathBuf {
    let mut path = output.to_owned().into_os_string();
    path.push(".kcore");
    PathBuf::from(path)
}

/// The configuration and the outcome, one `key=value` per line (the keys
/// `rvtrace-ctl` writes, for the same decoders and tests).
fn info_text(recording: &TraceOutcome, gaps: &[JoinedGap], exit: WorkloadExit) -> String {
    let config = &recording.config;
    let status = &recording.status;
    let flag = |bit: u32| u8::from(config.features & bit != 0);
    let exit_status = match exit {
        WorkloadExit::Code(code) => code,
        WorkloadExit::Signal(signal) => 128 + signal as i32,
    };
    let harts = if config.harts == 0 {
        recording.info.harts
    } else {
        config.harts
    };
    let lost_bytes: u64 = gaps.iter().map(|gap| gap.lost).sum();
    let gaps: Vec<String> = gaps
        .iter()
        .map(|gap| format!("{:#x}:{}", gap.position, gap.lost))
        .collect();
    let lines = [
        ("recorder", "rvperf".to_string()),
        (
            "mode",
            if config.mode == mode::BTM {
                "btm"
            } else {
                "htm"
            }
            .to_string(),
        ),
        (
            "implicit_return",
            flag(feature::IMPLICIT_RETURN).to_string(),
        ),
        (
            "return_stack_depth",
            recording.info.return_stack_depth.to_string(),
        ),
        (
            "repeated_history",
            flag(feature::REPEATED_HISTORY).to_string(),
        ),
        ("all_jumps", flag(feature::ALL_JUMPS).to_string()),
        (
            "sequential_jumps",
            flag(feature::SEQUENTIAL_JUMPS).to_string(),
        ),
        ("msb_extension", flag(feature::MSB_EXTENSION).to_string()),
        ("timestamps", flag(feature::TIMESTAMPS).to_string()),
        ("context", flag(feature::CONTEXT).to_string()),
        ("task_context", flag(feature::CONTEXT_TASK).to_string()),
        ("privileges", config.privileges.to_string()),
        (
            "sync_max",
            if config.sync_max == SYNC_NONE {
                "-1".to_string()
            } else {
                config.sync_max.to_string()
            },
        ),
        ("harts", harts.count_ones().to_string()),
        ("hart_mask", format!("{harts:#x}")),
        ("src_bits", status.src_bits.to_string()),
        ("sink_bytes", status.buffer_bytes.to_string()),
        ("stop_on_wrap", flag(feature::STOP_ON_WRAP).to_string()),
        (
            "wrapped",
            u8::from(status.flags & status_flag::WRAPPED != 0).to_string(),
        ),
        (
            "stopped_on_wrap",
            u8::from(status.flags & status_flag::STOPPED_ON_WRAP != 0).to_string(),
        ),
        ("overflow_harts", status.overflow_harts.to_string()),
        ("exit_status", exit_status.to_string()),
        ("bytes_written", status.bytes_written.to_string()),
        ("wraps", status.wraps.to_string()),
        (
            "wraps_counted_by_sink",
            u8::from(recording.info.flags & trace_device::abi::info_flag::WRAP_COUNT != 0)
                .to_string(),
        ),
        ("drains", recording.drains.to_string()),
        ("lost_bytes", lost_bytes.to_string()),
        ("gaps", gaps.join(",")),
    ];
    lines
        .iter()
        .map(|(key, value)| format!("{key}={value}\n"))
        .collect()
}
