//! Always-on profiling of a whole machine (`rvperf daemon`): rvperf's eBPF programs
//! (`aya-probes/`) count (process, user stack, kernel stack) in a kernel hash map on
//! every sample of a perf event on every CPU, so no sample crosses to user space; each
//! interval the daemon reads and clears the maps and turns the counts into a pprof
//! profile (and folded stacks), symbolized as `rvperf export --pprof` symbolizes a
//! recording: each process's files from the kernel's own MMAP2 side band (with the
//! build ids the kernel reads at mmap time, so a process that lived for a millisecond is
//! still named), the kernel from kallsyms.
//!
//! Where things come from:
//! * stacks and counts: the `sample_stacks` perf_event program, `STACK_COUNTS` and
//!   `STACK_TRACES`; losses in `COUNTERS` (a full map is counted, never silent);
//! * process lifetimes: the `sched_process_exec`/`sched_process_exit` tracepoint
//!   programs through the `PROCESS_EVENTS` ring buffer: a process that exited is
//!   forgotten once its last interval is symbolized;
//! * mappings: a `dummy` perf event per CPU with `mmap2`, `build_id`, `comm` and
//!   `task`, read through perf rings into [`perf_session::Processes`]. A BPF program
//!   cannot name a mapping's file without kernel BTF, which the guest kernel lacks
//!   (aya-probes/README.md); the kernel's side band names it exactly, build id included;
//! * processes already running at start: `/proc/PID/maps` and `comm`.
//!
//! Where BPF is unavailable, [`Fallback::PerfRing`] samples through perf rings instead:
//! the side band's event per CPU becomes the sampled event with callchains, every
//! sample crosses to user space (as in `rvperf record -a -g`) and is counted there,
//! and process lifetimes come from the side band's exec COMM and EXIT records.
//!
//! The library does no file I/O of its outputs and never prints: [`Daemon::collect`]
//! returns each interval's profile and statistics; the CLI writes them.

mod batch;
pub mod drain;
pub mod kernel_names;
pub mod rewrites;
mod run_total;

use std::collections::HashMap as StdHashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aya::maps::{Array, HashMap, Map, MapData, PerCpuArray, RingBuf};
use aya::programs::perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy};
use aya::programs::{PerfEvent, TracePoint};
use aya::{Ebpf, EbpfLoader};
use aya_probes_common::{
    map_name, process_event_kind, program_name, stack_hash, Config, Counter, ProcessEvent,
    StackFrames, StackKey, CONFIG_INDEX, STACK_NOT_COLLECTED, STACK_RECORDED,
};
use perf_abi::sys::bindings as abi;
use perf_abi::sys::bindings::perf_event_attr;
use perf_ring::{Event, RingBuffer};
use perf_session::{
    sample_labels, IntervalProfile, LocationAddresses, LocationGranularity, Processes,
    SampleLabels, StackFrame, StackProfile, SymbolOptions,
};
use pprof::{EncodedProfile, MappingSymbols, ProfileMetadata, SampleType};
use profiles::FoldedStacks;
use rustc_hash::FxHashMap;

use drain::{DrainLoad, DrainSchedule, MapCapacity};
pub use drain::{DRAIN_PERIOD_MAX, DRAIN_PERIOD_MAX_FLOOR, DRAIN_PERIOD_MIN};
use kernel_names::KernelNamer;
use rewrites::MergedRewrites;
use run_total::RunTotal;
pub use run_total::MERGED_PROFILE_FULL;

/// The sampled event: any perf event rvperf can open (a PMU type and config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledEvent {
    pub name: String,
    pub pmu_type: u32,
    pub config: u64,
}

impl Default for SampledEvent {
    /// `cycles`, the default of the daemon and of perf record.
    fn default() -> Self {
        SampledEvent {
            name: "cycles".to_owned(),
            pmu_type: abi::PERF_TYPE_HARDWARE,
            config: u64::from(abi::PERF_COUNT_HW_CPU_CYCLES),
        }
    }
}

/// How the daemon profiles.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The eBPF object (aya-probes/build.sh's output).
    pub probes: PathBuf,
    pub event: SampledEvent,
    /// Samples per second of CPU time, on every CPU.
    pub frequency: u64,
    /// Most distinct (process, user stack, kernel stack) keys counted between two
    /// drains; a sample with a new key beyond it is counted as dropped. `None`: sized
    /// for the machine's CPUs and the frequency ([`drain::key_capacity_for`]).
    pub stack_counts: Option<u32>,
    /// Most distinct stacks held between two drains (the kernel preallocates ~1 KiB
    /// each); a sample with a new stack beyond it keeps its count but not its stack
    /// (`[stack lost]`). `None`: sized for the machine ([`drain::stack_capacity_for`]).
    pub stack_traces: Option<u32>,
    pub labels: SampleLabels,
    /// One pprof location per function (the default: a profile at the folded
    /// stacks' granularity, whose size follows the run's call paths) or per sampled
    /// address (every instruction for `go tool pprof -disasm`, at the cost of a stack
    /// for each sampled instruction of a leaf).
    pub locations: LocationGranularity,
    /// Where kernel frames' names come from.
    pub kernel_symbols: KernelSymbolSource,
    /// Where `/proc` is (tests may point elsewhere).
    pub proc: PathBuf,
    /// Pages of each CPU's side-band ring.
    pub side_band_pages: usize,
    /// Most distinct (stack, labels) samples of the run's merged profile: beyond them a
    /// new stack's samples are counted under `[merged profile full]` with its labels, so
    /// a long run's memory stays bounded (each interval's own profile is whole).
    pub merged_stacks: usize,
    /// What to do where BPF is unavailable (no permission, a kernel without BPF).
    pub fallback: Fallback,
}

/// Where the daemon's kernel frames' names come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KernelSymbolSource {
    /// The running kernel names each sampled address (the probes'
    /// `name_kernel_addresses`, [`kernel_names`]): no kallsyms file is read. Where the
    /// kernel refuses that program, and for the perf ring recorder, `kallsyms` under
    /// [`DaemonOptions::proc`].
    #[default]
    RunningKernel,
    /// A kallsyms file (`/proc/kallsyms`, or a copy taken on this boot).
    Kallsyms(PathBuf),
}

impl KernelSymbolSource {
    /// The kallsyms file read where no program names kernel addresses: the one given,
    /// else `kallsyms` under `proc`.
    fn kallsyms_path(&self, proc: &Path) -> PathBuf {
        match self {
            KernelSymbolSource::RunningKernel => proc.join("kallsyms"),
            KernelSymbolSource::Kallsyms(path) => path.clone(),
        }
    }
}

/// Where the daemon's kernel frames' names come from, as it started
/// ([`Daemon::kernel_symbols`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSymbolsFrom {
    /// The running kernel, address by address.
    RunningKernel,
    /// A kallsyms file; `fallback` says why the running kernel does not name them
    /// when it was asked to.
    Kallsyms {
        path: PathBuf,
        fallback: Option<String>,
    },
}

/// What the daemon does where BPF is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Refuse to start ([`DaemonError::BpfUnavailable`]).
    #[default]
    Refuse,
    /// Sample through perf rings instead, as `rvperf record -a -g` does: every sample
    /// (with its callchain) crosses to user space and is counted there.
    PerfRing,
}

/// What takes the samples ([`Daemon::recorder`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorder<'a> {
    /// The eBPF probes: stacks counted in the kernel.
    Bpf { sampler: ProgramExecution },
    /// The perf ring recorder, in place of the probes ([`Fallback::PerfRing`]).
    PerfRing { bpf_unavailable: &'a str },
}

/// How the kernel runs the sampling program, which runs on every sample of every CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramExecution {
    /// Compiled to machine code by the kernel's JIT.
    JitCompiled,
    /// Interpreted, each BPF instruction at a time: the kernel's JIT is off
    /// (`net.core.bpf_jit_enable` 0, the default of a kernel whose architecture does not
    /// ask for it, riscv64's included, unless `CONFIG_BPF_JIT_ALWAYS_ON`). Every sample
    /// costs the task it interrupts more: measured in the riscv64 guest, 45 to 52 µs a
    /// sample against 24 to 32 µs JIT-compiled.
    Interpreted,
}

/// What a CPU's perf event of the side band does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SideBandRole {
    /// A `dummy` event: mappings, names and task records only (beside the probes).
    SideBandOnly,
    /// The sampled event itself, with callchains (the perf ring recorder).
    Sampler,
}

/// The default of [`DaemonOptions::merged_stacks`]: about 40 MB of merged profile.
pub const MERGED_STACKS_DEFAULT: usize = 100_000;

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            probes: PathBuf::new(),
            event: SampledEvent::default(),
            frequency: 99,
            stack_counts: None,
            stack_traces: None,
            labels: SampleLabels::Command,
            locations: LocationGranularity::Function,
            kernel_symbols: KernelSymbolSource::RunningKernel,
            proc: PathBuf::from("/proc"),
            side_band_pages: 64,
            merged_stacks: MERGED_STACKS_DEFAULT,
            fallback: Fallback::Refuse,
        }
    }
}

/// Why the daemon cannot run, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// BPF is not open to this process (no privilege, or a kernel without BPF).
    #[error("BPF is unavailable: {reason}")]
    BpfUnavailable { reason: String },
    #[error("cannot read the eBPF object {path}: {source}")]
    Probes {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("eBPF program {program}: {message}")]
    Program { program: String, message: String },
    #[error("eBPF map {map}: {message}")]
    Map { map: &'static str, message: String },
    #[error("cannot sample {event} on CPU {cpu}: {message}")]
    Attach {
        event: String,
        cpu: u32,
        message: String,
    },
    #[error("side band: {0}")]
    SideBand(String),
    /// BPF is unavailable and so is the perf ring recorder that was to replace it.
    #[error("BPF is unavailable ({bpf}) and so is the perf ring recorder ({perf})")]
    NoRecorder { bpf: String, perf: String },
    #[error(transparent)]
    Pprof(#[from] pprof::PprofError),
}

/// What one interval counted, beside its stacks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntervalStatistics {
    /// Samples the probe took.
    pub samples_seen: u64,
    /// Samples in the interval's profile.
    pub samples_counted: u64,
    /// Samples lost because the stack-count map was full.
    pub samples_dropped: u64,
    /// Samples whose user or kernel stack could not be kept (the stack map full, or a
    /// collision): counted under a `[stack lost]` frame.
    pub stack_errors: u64,
    /// Process events the ring buffer could not take.
    pub process_events_lost: u64,
    /// Side-band records the kernel could not write (a ring full).
    pub side_band_lost: u64,
    pub execs: u64,
    pub exits: u64,
    /// Distinct stacks of the interval.
    pub stacks: u64,
    /// Samples of the interval the merged profile took under `[merged profile full]`
    /// (new stacks beyond [`DaemonOptions::merged_stacks`]).
    pub merged_over_cap: u64,
    /// Samples of the perf ring recorder too short for their fields (not counted).
    pub malformed_samples: u64,
    /// Times the kernel's maps were drained (their period adapts to the load: see
    /// [`DRAIN_PERIOD_MIN`] and [`DRAIN_PERIOD_MAX`]).
    pub drains: u64,
    /// Of the drains, those that read the stack map too (at least the interval's last:
    /// see [`BpfProbes::drain_maps`]).
    pub stack_map_reads: u64,
    /// New stacks read whose addresses do not hash to the name the probe gave them
    /// ([`aya_probes_common::stack_hash`]): never, unless the eBPF object and this
    /// build disagree on the hash. Their samples still count under their addresses.
    pub stacks_misnamed: u64,
}

/// One interval's profile.
#[derive(Debug)]
pub struct Interval {
    /// 1 for the first interval.
    pub number: u64,
    pub profile: EncodedProfile,
    pub folded: FoldedStacks,
    pub statistics: IntervalStatistics,
}

/// The whole run's profile so far ([`Daemon::merged`]).
#[derive(Debug)]
pub struct Merged<'a> {
    pub profile: EncodedProfile,
    /// Kept up to date interval by interval, as the profile's samples are.
    pub folded: &'a FoldedStacks,
}

/// The sample types of the daemon's profiles.
const SAMPLE_TYPES: [SampleType<'static>; 2] = [
    SampleType {
        kind: "samples",
        unit: "count",
    },
    SampleType {
        kind: "cpu",
        unit: "nanoseconds",
    },
];
const NANOSECONDS_PER_SECOND: u64 = 1_000_000_000;
/// The frame of a stack the kernel could not keep (its stack map full).
pub const STACK_LOST: &str = "[stack lost]";
/// bpf_get_stack's "no stack in this mode" (a kernel thread's user stack, a user
/// sample's kernel stack): not a loss.
const NO_STACK: i32 = -libc::EFAULT;

/// A running daemon: the samples' source open (the eBPF probes, or the perf ring
/// recorder in their place), the side band open.
pub struct Daemon {
    options: DaemonOptions,
    /// The eBPF probes, or `None` when the perf ring recorder samples
    /// ([`Fallback::PerfRing`]).
    probes: Option<BpfProbes>,
    kernel_symbols: KernelSymbolsFrom,
    /// Why the probes could not be used, when the perf ring recorder replaced them.
    fallback_reason: Option<String>,
    side_band: Vec<(Event, RingBuffer)>,
    processes: Processes,
    /// The run's mappings, functions and locations, and the interval's stacks: an
    /// address is symbolized once per run, not once per interval.
    profile: StackProfile,
    /// The run's samples and folded stacks so far (capped at
    /// [`DaemonOptions::merged_stacks`]).
    merged: RunTotal,
    started: Instant,
    run_started: SystemTime,
    interval_started: SystemTime,
    interval: u64,
    /// Processes that exited during the interval: forgotten after it.
    exited: Vec<u32>,
    pending: IntervalStatistics,
    /// The interval's counts so far, drained from the kernel's maps (or the samples
    /// the perf ring recorder read).
    drained: FxHashMap<DrainedStack, u64>,
    /// When the kernel's maps are drained next.
    next_drain: Instant,
    scratch: Vec<u8>,
}

/// What [`BpfProbes::start`] opened: the probes, the side band opened between the
/// process watch and the sampler, and the processes running then.
struct StartedProbes {
    probes: BpfProbes,
    side_band: Vec<(Event, RingBuffer)>,
    processes: Processes,
    kernel_symbols: KernelSymbolsFrom,
}

/// The eBPF probes and their maps.
struct BpfProbes {
    /// Keeps the programs and their links alive.
    ebpf: Ebpf,
    /// Names the sampled kernel addresses; `None` where kallsyms does.
    kernel_namer: Option<KernelNamer>,
    /// How the kernel runs the sampling program.
    sampler_execution: ProgramExecution,
    /// The stack-count hash map (kept as aya's `Map`: its descriptor for the batch
    /// reads, aya's `HashMap` over it for the entry-by-entry fallback).
    counts: Map,
    /// Whether the kernel takes `BPF_MAP_LOOKUP_AND_DELETE_BATCH` (Linux 5.6 and later);
    /// cleared at its first refusal.
    batch_reads: bool,
    /// The stacks by hash (a hash map, kept as `counts` is).
    traces: Map,
    process_events: RingBuf<MapData>,
    counters: PerCpuArray<MapData, u64>,
    /// The counters' totals at the end of the last interval.
    counter_totals: [u64; Counter::COUNT as usize],
    /// The stacks the last read of the stack map found, by hash. A read empties the
    /// kernel's stack map, and a sample counted after a drain read the counts may name
    /// a stack that the read then removed: later drains find it here.
    recent_stacks: FxHashMap<u64, Rc<[u64]>>,
    /// Counts read whose stacks are not in `recent_stacks`: stacks recorded since the
    /// stack map's last read, which its next read resolves.
    unresolved: FxHashMap<StackKey, u64>,
    /// The distinct stacks counts named since the stack map's last read, held or not:
    /// about what the map holds (a stack userland holds is put back in the map by its
    /// next sample, since a read removed it), what decides when it is read.
    stacks_named: rustc_hash::FxHashSet<u64>,
    /// The addresses of a sample without that stack, shared.
    no_frames: Rc<[u64]>,
    /// Reads of the stack map since the last interval's end.
    stack_map_reads: u64,
    /// New stacks since the last interval's end whose addresses do not hash to their
    /// name ([`IntervalStatistics::stacks_misnamed`]).
    stacks_misnamed: u64,
    schedule: DrainSchedule,
}

/// Whether a drain reads the stack map too ([`BpfProbes::drain_maps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StackRead {
    /// Only when it is over the busy mark ([`DrainSchedule::stacks_due`]).
    WhenDue,
    /// Always: the interval's end, whose counts must all be resolved.
    Always,
}

/// Adds `count` samples of `key` to `drained`, its stacks' addresses from `stacks`. A
/// stack the key names that `stacks` lacks (not expected: see
/// [`BpfProbes::drain_maps`]) or that the probe could not record is lost, and the
/// samples are counted under what is known.
fn add_count(
    drained: &mut FxHashMap<DrainedStack, u64>,
    stacks: &FxHashMap<u64, Rc<[u64]>>,
    no_frames: &Rc<[u64]>,
    key: &StackKey,
    count: u64,
) {
    let mut lost = false;
    let mut frames_of = |status: i32, hash: u64| -> Rc<[u64]> {
        match status {
            STACK_RECORDED => match stacks.get(&hash) {
                Some(frames) => Rc::clone(frames),
                None => {
                    lost = true;
                    Rc::clone(no_frames)
                }
            },
            NO_STACK | STACK_NOT_COLLECTED => Rc::clone(no_frames),
            _ => {
                lost = true;
                Rc::clone(no_frames)
            }
        }
    };
    let kernel = frames_of(key.kernel_stack_status, key.kernel_stack);
    let user = frames_of(key.user_stack_status, key.user_stack);
    let stack = DrainedStack {
        pid: key.pid,
        kernel,
        user,
        lost,
    };
    let total = drained.entry(stack).or_default();
    *total = total.saturating_add(count);
}

/// A stack drained from the kernel's maps: its process, kernel and user addresses
/// (leaf first; empty when the sample had none) and whether part of it was lost.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DrainedStack {
    pid: u32,
    /// Shared with the stack cache: a drain clones no addresses.
    kernel: Rc<[u64]>,
    user: Rc<[u64]>,
    lost: bool,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Daemon")
            .field("options", &self.options)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

fn program_error(program: &str) -> impl Fn(aya::programs::ProgramError) -> DaemonError + '_ {
    move |error| {
        let message = error_chain(&error);
        if is_permission_error(&message) {
            DaemonError::BpfUnavailable {
                reason: format!("loading {program}: {message}"),
            }
        } else {
            DaemonError::Program {
                program: program.to_owned(),
                message,
            }
        }
    }
}

fn map_error(map: &'static str) -> impl Fn(aya::maps::MapError) -> DaemonError {
    move |error| DaemonError::Map {
        map,
        message: error_chain(&error),
    }
}

/// An error and its sources in one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    // On one line: a verifier's log (in aya's load errors) is many, and the message
    // may be a line of the daemon's own (the namer's refusal on its first line).
    if message.contains('\n') {
        message = message
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
    }
    message
}

fn is_permission_error(message: &str) -> bool {
    message.contains("Operation not permitted") || message.contains("Permission denied")
}

/// Mounts tracefs where aya looks for it when none is mounted (the guest mounts none;
/// tracepoint programs are attached through its event ids).
fn ensure_tracefs() {
    let mounted = std::fs::read_to_string("/proc/mounts")
        .is_ok_and(|mounts| mounts.lines().any(|line| line.contains(" tracefs ")));
    if !mounted {
        // Failure shows as the tracepoint attach error that follows.
        let _ = nix::mount::mount(
            Some("tracefs"),
            "/sys/kernel/tracing",
            Some("tracefs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        );
    }
}

impl BpfProbes {
    /// Loads the probes, attaches the process watch, opens the side band and attaches
    /// the sampling program on every CPU of `cpus`.
    fn start(
        options: &DaemonOptions,
        bytes: &[u8],
        cpus: &[u32],
    ) -> Result<StartedProbes, DaemonError> {
        let stack_counts = options
            .stack_counts
            .unwrap_or_else(|| drain::key_capacity_for(cpus.len(), options.frequency));
        let stack_traces = options
            .stack_traces
            .unwrap_or_else(|| drain::stack_capacity_for(cpus.len(), options.frequency));
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(map_name::STACK_COUNTS, stack_counts)
            .map_max_entries(map_name::STACK_TRACES, stack_traces)
            .load(bytes)
            .map_err(|error| {
                let message = error_chain(&error);
                if is_permission_error(&message) {
                    DaemonError::BpfUnavailable { reason: message }
                } else {
                    DaemonError::Program {
                        program: "the object".to_owned(),
                        message,
                    }
                }
            })?;
        let mut config: Array<&mut MapData, Config> = Array::try_from(
            ebpf.map_mut(map_name::CONFIG)
                .ok_or_else(|| missing_map(map_name::CONFIG))?,
        )
        .map_err(map_error(map_name::CONFIG))?;
        config
            .set(CONFIG_INDEX, Config::default(), 0)
            .map_err(map_error(map_name::CONFIG))?;

        // The process watch first, so no exec between the two is missed.
        ensure_tracefs();
        for (name, tracepoint) in [
            (program_name::SCHED_PROCESS_EXEC, "sched_process_exec"),
            (program_name::SCHED_PROCESS_EXIT, "sched_process_exit"),
        ] {
            let program: &mut TracePoint = ebpf
                .program_mut(name)
                .ok_or_else(|| missing_program(name))?
                .try_into()
                .map_err(program_error(name))?;
            program.load().map_err(program_error(name))?;
            program
                .attach("sched", tracepoint)
                .map_err(program_error(name))?;
        }

        // The side band before the samples: a mapping is known before its addresses
        // are counted.
        let side_band = open_side_band(options, cpus, SideBandRole::SideBandOnly)?;
        let kallsyms = options.kernel_symbols.kallsyms_path(&options.proc);
        let (kernel_namer, kernel_symbols) = match &options.kernel_symbols {
            KernelSymbolSource::RunningKernel => match KernelNamer::load(&mut ebpf) {
                Ok(namer) => (Some(namer), KernelSymbolsFrom::RunningKernel),
                Err(error) => (
                    None,
                    KernelSymbolsFrom::Kallsyms {
                        path: kallsyms,
                        fallback: Some(error_chain(&error)),
                    },
                ),
            },
            KernelSymbolSource::Kallsyms(_) => (
                None,
                KernelSymbolsFrom::Kallsyms {
                    path: kallsyms,
                    fallback: None,
                },
            ),
        };
        let processes = new_processes(options, &kernel_symbols);

        let sampler: &mut PerfEvent = ebpf
            .program_mut(program_name::SAMPLE_STACKS)
            .ok_or_else(|| missing_program(program_name::SAMPLE_STACKS))?
            .try_into()
            .map_err(program_error(program_name::SAMPLE_STACKS))?;
        sampler
            .load()
            .map_err(program_error(program_name::SAMPLE_STACKS))?;
        // A JIT-compiled program has machine code; an interpreted one has none. A
        // kernel that does not say (no program info) is not warned about.
        let sampler_execution = match sampler.info() {
            Ok(info) if info.size_jitted() == 0 => ProgramExecution::Interpreted,
            _ => ProgramExecution::JitCompiled,
        };
        for &cpu in cpus {
            sampler
                .attach(
                    PerfEventConfig::Pmu {
                        pmu_type: options.event.pmu_type,
                        config: options.event.config,
                    },
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Frequency(options.frequency),
                    false,
                )
                .map_err(|error| {
                    let message = error_chain(&error);
                    if is_permission_error(&message) {
                        DaemonError::BpfUnavailable {
                            reason: format!("sampling {}: {message}", options.event.name),
                        }
                    } else {
                        DaemonError::Attach {
                            event: options.event.name.clone(),
                            cpu,
                            message,
                        }
                    }
                })?;
        }

        let counts = ebpf
            .take_map(map_name::STACK_COUNTS)
            .ok_or_else(|| missing_map(map_name::STACK_COUNTS))?;
        // Its type and key and value sizes, checked once.
        HashMap::<_, StackKey, u64>::try_from(&counts)
            .map_err(map_error(map_name::STACK_COUNTS))?;
        let traces = ebpf
            .take_map(map_name::STACK_TRACES)
            .ok_or_else(|| missing_map(map_name::STACK_TRACES))?;
        HashMap::<_, u64, StackFrames>::try_from(&traces)
            .map_err(map_error(map_name::STACK_TRACES))?;
        let process_events = RingBuf::try_from(
            ebpf.take_map(map_name::PROCESS_EVENTS)
                .ok_or_else(|| missing_map(map_name::PROCESS_EVENTS))?,
        )
        .map_err(map_error(map_name::PROCESS_EVENTS))?;
        let counters = PerCpuArray::try_from(
            ebpf.take_map(map_name::COUNTERS)
                .ok_or_else(|| missing_map(map_name::COUNTERS))?,
        )
        .map_err(map_error(map_name::COUNTERS))?;
        Ok(StartedProbes {
            probes: BpfProbes {
                ebpf,
                kernel_namer,
                sampler_execution,
                counts,
                batch_reads: true,
                traces,
                process_events,
                counters,
                counter_totals: [0; Counter::COUNT as usize],
                recent_stacks: FxHashMap::default(),
                unresolved: FxHashMap::default(),
                stacks_named: rustc_hash::FxHashSet::default(),
                no_frames: Rc::from(Vec::new()),
                stack_map_reads: 0,
                stacks_misnamed: 0,
                schedule: DrainSchedule::new(
                    MapCapacity {
                        keys: stack_counts as usize,
                        stacks: stack_traces as usize,
                    },
                    options
                        .frequency
                        .saturating_mul(u64::try_from(cpus.len()).unwrap_or(u64::MAX)),
                ),
            },
            side_band,
            processes,
            kernel_symbols,
        })
    }
    /// Moves the kernel's counts into the interval's own: reads and clears the count
    /// map, and the stack map when `stack_read` says so. Done often enough (see
    /// `drain.rs`) that neither map fills up. Returns what it found, for the drain
    /// schedule.
    ///
    /// The stack map is read only when it is due or at the interval's end, not at
    /// every drain: each read walks its every bucket (twice the count map's), and a
    /// count whose stack userland does not hold yet can wait for the next read (the
    /// probe keeps a stack in the map until a read removes it). It is due once the
    /// stacks counts named since its last read, held by userland or not, are over a
    /// quarter of it: a held stack sampled again is back in the map too, so counting
    /// only the stacks not held would let a machine whose many stacks recur fill it.
    ///
    /// The counts are read before the stacks: the probe records a stack before it
    /// counts a sample of it, so every count read names a stack that is either read
    /// after it here, read by a later read, or was read by an earlier one (kept in
    /// `recent_stacks`).
    fn drain_maps(
        &mut self,
        drained: &mut FxHashMap<DrainedStack, u64>,
        stack_read: StackRead,
    ) -> DrainLoad {
        let counted =
            batch::read_and_clear::<StackKey, u64>(&mut self.counts, &mut self.batch_reads);
        let keys = counted.len();
        for (key, count) in counted {
            let mut held = true;
            for (status, hash) in [
                (key.kernel_stack_status, key.kernel_stack),
                (key.user_stack_status, key.user_stack),
            ] {
                if status == STACK_RECORDED {
                    self.stacks_named.insert(hash);
                    held &= self.recent_stacks.contains_key(&hash);
                }
            }
            if held {
                add_count(drained, &self.recent_stacks, &self.no_frames, &key, count);
            } else {
                let total = self.unresolved.entry(key).or_default();
                *total = total.saturating_add(count);
            }
        }
        let stacks_held = if stack_read == StackRead::Always
            || self.schedule.stacks_due(self.stacks_named.len())
        {
            let read =
                batch::read_and_clear::<u64, StackFrames>(&mut self.traces, &mut self.batch_reads);
            let mut stacks: FxHashMap<u64, Rc<[u64]>> = FxHashMap::default();
            stacks.reserve(read.len());
            for (hash, frames) in &read {
                // A stack seen before keeps its addresses' allocation; a new one is
                // checked against its name, which the probe and userland must agree
                // on (the probe hashes in the kernel, with its own code).
                let addresses = self.recent_stacks.remove(hash).unwrap_or_else(|| {
                    if stack_hash(frames.used()) != *hash {
                        self.stacks_misnamed = self.stacks_misnamed.saturating_add(1);
                    }
                    Rc::from(frames.used())
                });
                stacks.insert(*hash, addresses);
            }
            self.recent_stacks = stacks;
            for (key, count) in self.unresolved.drain() {
                add_count(drained, &self.recent_stacks, &self.no_frames, &key, count);
            }
            self.stacks_named.clear();
            self.stack_map_reads = self.stack_map_reads.saturating_add(1);
            read.len()
        } else {
            self.stacks_named.len()
        };
        let load = DrainLoad { keys, stacks_held };
        self.schedule.after_drain(load);
        load
    }

    /// Counts the process watch's execs and exits into `pending`, and the exited
    /// processes into `exited`.
    fn read_process_events(&mut self, pending: &mut IntervalStatistics, exited: &mut Vec<u32>) {
        while let Some(item) = self.process_events.next() {
            let bytes: &[u8] = &item;
            if bytes.len() < std::mem::size_of::<ProcessEvent>() {
                continue;
            }
            // SAFETY: the ring holds whole ProcessEvents written by the probe (the
            // length was checked); ProcessEvent is plain old data (aya::Pod), so any
            // bytes are a valid value, and read_unaligned takes no alignment.
            let event: ProcessEvent =
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<ProcessEvent>()) };
            match event.kind {
                process_event_kind::EXEC => pending.execs += 1,
                process_event_kind::EXIT => {
                    pending.exits += 1;
                    exited.push(event.tgid);
                }
                _ => {}
            }
        }
    }

    /// The probe's counters since the last call, into `statistics`.
    fn read_counters(&mut self, statistics: &mut IntervalStatistics) -> Result<(), DaemonError> {
        statistics.stack_map_reads = std::mem::take(&mut self.stack_map_reads);
        statistics.stacks_misnamed = std::mem::take(&mut self.stacks_misnamed);
        // The counters are totals since load: the interval's are the differences.
        for counter in Counter::ALL {
            let values = self
                .counters
                .get(&counter.index(), 0)
                .map_err(map_error(map_name::COUNTERS))?;
            let total = values
                .iter()
                .fold(0u64, |sum, value| sum.saturating_add(*value));
            let index = counter.index() as usize;
            let delta = total.saturating_sub(self.counter_totals[index]);
            self.counter_totals[index] = total;
            match counter {
                Counter::SamplesSeen => statistics.samples_seen = delta,
                Counter::SamplesDropped => statistics.samples_dropped = delta,
                Counter::UserStackErrors | Counter::KernelStackErrors => {
                    statistics.stack_errors = statistics.stack_errors.saturating_add(delta)
                }
                Counter::ProcessEventsLost => statistics.process_events_lost = delta,
            }
        }
        Ok(())
    }
}

impl Daemon {
    /// Loads and attaches the probes on every online CPU and opens the side band.
    pub fn start(options: DaemonOptions) -> Result<Daemon, DaemonError> {
        let bytes = std::fs::read(&options.probes).map_err(|source| DaemonError::Probes {
            path: options.probes.clone(),
            source,
        })?;
        if options.frequency == 0 {
            return Err(DaemonError::Attach {
                event: options.event.name.clone(),
                cpu: 0,
                message: "a sampling frequency of 0".to_owned(),
            });
        }
        let cpus = perf_ring::online_cpus().map_err(|error| DaemonError::Attach {
            event: options.event.name.clone(),
            cpu: 0,
            message: error.to_string(),
        })?;
        let (probes, side_band, processes, kernel_symbols, fallback_reason) =
            match BpfProbes::start(&options, &bytes, &cpus) {
                Ok(started) => (
                    Some(started.probes),
                    started.side_band,
                    started.processes,
                    started.kernel_symbols,
                    None,
                ),
                Err(DaemonError::BpfUnavailable { reason })
                    if options.fallback == Fallback::PerfRing =>
                {
                    let side_band = open_side_band(&options, &cpus, SideBandRole::Sampler)
                        .map_err(|error| DaemonError::NoRecorder {
                            bpf: reason.clone(),
                            perf: error.to_string(),
                        })?;
                    // Without BPF, no program names kernel addresses: kallsyms does.
                    let kernel_symbols = KernelSymbolsFrom::Kallsyms {
                        path: options.kernel_symbols.kallsyms_path(&options.proc),
                        fallback: None,
                    };
                    let processes = new_processes(&options, &kernel_symbols);
                    (None, side_band, processes, kernel_symbols, Some(reason))
                }
                Err(error) => return Err(error),
            };
        let mut profile = StackProfile::new(
            &SAMPLE_TYPES,
            None,
            StdHashMap::new(),
            MappingSymbols::Functions,
        )
        // A long run's processes come and go (and load their code at random
        // addresses): by file offset, the run's profile grows with its code only.
        .with_addresses(LocationAddresses::FileOffsets)
        .with_granularity(options.locations);
        let merged = RunTotal::new(&mut profile, options.merged_stacks)?;
        let now = SystemTime::now();
        Ok(Daemon {
            options,
            probes,
            kernel_symbols,
            fallback_reason,
            side_band,
            processes,
            profile,
            merged,
            started: Instant::now(),
            run_started: now,
            interval_started: now,
            interval: 0,
            exited: Vec::new(),
            pending: IntervalStatistics::default(),
            drained: FxHashMap::default(),
            next_drain: Instant::now(),
            scratch: Vec::new(),
        })
    }

    /// Where kernel frames' names come from.
    pub fn kernel_symbols(&self) -> &KernelSymbolsFrom {
        &self.kernel_symbols
    }

    /// What samples: the eBPF probes, or the perf ring recorder in their place (with
    /// why the probes could not be used).
    pub fn recorder(&self) -> Recorder<'_> {
        match (&self.fallback_reason, &self.probes) {
            (Some(reason), _) => Recorder::PerfRing {
                bpf_unavailable: reason,
            },
            (None, probes) => Recorder::Bpf {
                sampler: probes
                    .as_ref()
                    .map_or(ProgramExecution::JitCompiled, |probes| {
                        probes.sampler_execution
                    }),
            },
        }
    }

    /// Sleeps until there is something to read: a side-band ring a quarter full (the
    /// events' watermark), the next drain of the kernel's maps, or `limit`, whichever
    /// comes first. A signal ends it early.
    pub fn wait(&self, limit: Duration) {
        let timeout = match self.probes {
            Some(_) => limit.min(self.next_drain.saturating_duration_since(Instant::now())),
            None => limit,
        };
        let fds: Vec<BorrowedFd<'_>> = self
            .side_band
            .iter()
            .map(|(event, _)| event.as_fd())
            .collect();
        if perf_ring::poll_readable(&fds, Some(timeout)).is_err() {
            // Not expected of perf event descriptors; a sleep keeps the loop from
            // spinning.
            std::thread::sleep(timeout);
        }
    }

    /// Reads what the side band and the process watch published, and drains the
    /// kernel's maps when their drain is due: called after every [`Daemon::wait`].
    pub fn poll(&mut self) {
        self.read_rings();
        if Instant::now() >= self.next_drain {
            self.drain(StackRead::WhenDue);
        }
    }

    fn read_rings(&mut self) {
        // Every CPU's records, applied in time order: a process that moves between
        // CPUs has its FORK, COMM (exec) and MMAP2 records in several rings, and a
        // mapping applied before the exec that precedes it would be cleared by it.
        let mut records: Vec<SideBandRecord> = Vec::new();
        for (_, ring) in &mut self.side_band {
            let mut batch = ring.read();
            while let Ok(Some(record)) = batch.next_record() {
                let body = record.body.contiguous(&mut self.scratch);
                if record.record_type == abi::PERF_RECORD_LOST {
                    // PERF_RECORD_LOST: u64 id, u64 lost.
                    if let Some(lost) = read_u64(body, 8) {
                        self.pending.side_band_lost =
                            self.pending.side_band_lost.saturating_add(lost);
                    }
                    continue;
                }
                if record.record_type == abi::PERF_RECORD_SAMPLE {
                    // The perf ring recorder's samples (the only event with samples).
                    match perf_ring_sample(body) {
                        Some(stack) => {
                            self.pending.samples_seen = self.pending.samples_seen.saturating_add(1);
                            let total = self.drained.entry(stack).or_default();
                            *total = total.saturating_add(1);
                        }
                        None => {
                            self.pending.malformed_samples =
                                self.pending.malformed_samples.saturating_add(1)
                        }
                    }
                    continue;
                }
                if !Processes::is_side_band(record.record_type) {
                    continue;
                }
                if self.probes.is_none() {
                    // Without the process watch, process lifetimes come from the
                    // side band: an exec's COMM, a process's (its leader's) EXIT.
                    match record.record_type {
                        abi::PERF_RECORD_COMM
                            if u32::from(record.misc) & abi::PERF_RECORD_MISC_COMM_EXEC != 0 =>
                        {
                            self.pending.execs += 1;
                        }
                        abi::PERF_RECORD_EXIT => {
                            // pid, ppid, tid, ptid (u32 each).
                            let field = |offset: usize| {
                                body.get(offset..offset + 4)
                                    .and_then(|bytes| bytes.try_into().ok())
                                    .map(u32::from_ne_bytes)
                            };
                            if let (Some(pid), Some(tid)) = (field(0), field(8)) {
                                if pid == tid {
                                    self.pending.exits += 1;
                                    self.exited.push(pid);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                // sample_id_all with TID and TIME: the time is the body's last u64.
                let time = body
                    .len()
                    .checked_sub(8)
                    .and_then(|offset| read_u64(body, offset))
                    .unwrap_or(0);
                records.push(SideBandRecord {
                    time,
                    record_type: record.record_type,
                    misc: record.misc,
                    body: body.to_vec(),
                });
            }
        }
        records.sort_by_key(|record| record.time);
        for record in &records {
            self.processes
                .observe(record.record_type, record.misc, &record.body);
        }
        if let Some(probes) = &mut self.probes {
            probes.read_process_events(&mut self.pending, &mut self.exited);
        }
    }

    /// Moves the kernel's counts into the interval's and schedules the next drain;
    /// at the interval's end (`stack_read` [`StackRead::Always`]), all of them.
    fn drain(&mut self, stack_read: StackRead) {
        if let Some(probes) = &mut self.probes {
            probes.drain_maps(&mut self.drained, stack_read);
            self.pending.drains = self.pending.drains.saturating_add(1);
            self.next_drain = Instant::now() + probes.schedule.period();
        }
    }

    /// Ends the interval: reads and clears the maps, symbolizes the counts into the
    /// interval's profile and merges it into the run's.
    pub fn collect(&mut self) -> Result<Interval, DaemonError> {
        self.read_rings();
        self.drain(StackRead::Always);
        let now = SystemTime::now();
        let mut statistics = std::mem::take(&mut self.pending);
        self.interval += 1;
        if let Some(probes) = &mut self.probes {
            probes.read_counters(&mut statistics)?;
        }
        let nanoseconds_per_sample = self.nanoseconds_per_sample();
        let mut comm = String::new();
        // Emptied, not replaced: the next interval's counts reuse its room.
        let mut drained = std::mem::take(&mut self.drained);
        if let Some(BpfProbes {
            ebpf,
            kernel_namer: Some(namer),
            ..
        }) = &mut self.probes
        {
            // The kernel names the functions of the interval's new kernel addresses
            // before they are symbolized.
            let mut addresses: Vec<u64> = drained
                .keys()
                .flat_map(|stack| address_frames(&stack.kernel).map(StackFrame::lookup_address))
                .collect();
            addresses.sort_unstable();
            addresses.dedup();
            namer
                .name(ebpf, addresses, self.processes.symbolizer())
                .map_err(|error| DaemonError::Program {
                    program: program_name::NAME_KERNEL_ADDRESSES.to_owned(),
                    message: error_chain(&error),
                })?;
        }
        for (stack, count) in drained.drain() {
            // A lost stack shows as a frame of its own, under what is known.
            let frames = address_frames(&stack.kernel)
                .chain(address_frames(&stack.user))
                .chain(stack.lost.then_some(StackFrame::Placeholder(STACK_LOST)));
            let count_value = i64::try_from(count).unwrap_or(i64::MAX);
            let values = [
                count_value,
                count_value.saturating_mul(nanoseconds_per_sample),
            ];
            let pid = i32::try_from(stack.pid).unwrap_or(i32::MAX);
            comm.clear();
            comm.push_str(if stack.pid == 0 {
                "swapper"
            } else {
                self.processes.comm(pid, pid)
            });
            let labels = sample_labels(self.options.labels, pid, pid, &comm);
            self.profile
                .add_stack(&mut self.processes, stack.pid, frames, &values, &labels)?;
            statistics.samples_counted = statistics.samples_counted.saturating_add(count);
        }
        self.drained = drained;
        let duration = now
            .duration_since(self.interval_started)
            .unwrap_or(Duration::ZERO);
        let metadata = self.metadata(
            self.interval_started,
            duration,
            format!(
                "rvperf daemon: {} at {} Hz on every CPU, interval {}",
                self.options.event.name, self.options.frequency, self.interval
            ),
        );
        let IntervalProfile { profile, samples } = self.profile.take_interval(&metadata)?;
        statistics.stacks = samples.len() as u64;
        let added = self.merged.add_interval(&mut self.profile, &samples)?;
        statistics.merged_over_cap = added.over_cap;
        for pid in self.exited.drain(..) {
            self.processes.forget_process(pid);
        }
        self.interval_started = now;
        Ok(Interval {
            number: self.interval,
            profile,
            folded: added.folded,
            statistics,
        })
    }

    /// The distinct stacks of the run's profile so far ([`Self::merged`]'s).
    pub fn merged_stacks(&self) -> usize {
        self.merged.len()
    }

    /// The profile of the whole run so far, and its folded stacks.
    pub fn merged(&self) -> Result<Merged<'_>, DaemonError> {
        let metadata = self.metadata(
            self.run_started,
            self.started.elapsed(),
            format!(
                "rvperf daemon: {} at {} Hz on every CPU, intervals 1 to {}",
                self.options.event.name, self.options.frequency, self.interval
            ),
        );
        Ok(Merged {
            profile: self
                .profile
                .encode_profile_of(self.merged.samples(), &metadata)?,
            folded: self.merged.folded(),
        })
    }

    /// A profile's metadata: from `start` for `duration`, one sample a period of the
    /// frequency, and `comment`.
    fn metadata(&self, start: SystemTime, duration: Duration, comment: String) -> ProfileMetadata {
        let nanoseconds =
            |duration: Duration| i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        ProfileMetadata {
            time_nanos: start.duration_since(UNIX_EPOCH).map_or(0, nanoseconds),
            duration_nanos: nanoseconds(duration),
            period: Some((
                "cpu".to_owned(),
                "nanoseconds".to_owned(),
                self.nanoseconds_per_sample(),
            )),
            comments: vec![comment],
            default_sample_type: Some("cpu".to_owned()),
        }
    }

    fn nanoseconds_per_sample(&self) -> i64 {
        i64::try_from(NANOSECONDS_PER_SECOND / self.options.frequency).unwrap_or(i64::MAX)
    }

    /// Symbols the symbolizer could not find (files, kernel), one line each.
    pub fn problems(&self) -> Vec<String> {
        self.processes
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

/// A side-band record taken from a ring, for ordering.
struct SideBandRecord {
    time: u64,
    record_type: u32,
    misc: u16,
    body: Vec<u8>,
}

fn read_u64(bytes: &[u8], offset: usize) -> Option<u64> {
    let slice = bytes.get(offset..offset.checked_add(8)?)?;
    let mut value = [0u8; 8];
    value.copy_from_slice(slice);
    Some(u64::from_ne_bytes(value))
}

fn missing_map(map: &'static str) -> DaemonError {
    DaemonError::Map {
        map,
        message: "not in the eBPF object (built from another aya-probes?)".to_owned(),
    }
}

fn missing_program(program: &str) -> DaemonError {
    DaemonError::Program {
        program: program.to_owned(),
        message: "not in the eBPF object (built from another aya-probes?)".to_owned(),
    }
}

/// A `dummy` event on `cpu` that carries the side band: MMAP2 with build ids, COMM
/// (exec too), FORK and EXIT of every process.
/// The side band's (or the perf ring recorder's) descriptors and rings, one per CPU,
/// enabled.
fn open_side_band(
    options: &DaemonOptions,
    cpus: &[u32],
    role: SideBandRole,
) -> Result<Vec<(Event, RingBuffer)>, DaemonError> {
    let mut side_band = Vec::new();
    for &cpu in cpus {
        let event = side_band_event(cpu, role, options)?;
        let ring = RingBuffer::new(&event, options.side_band_pages)
            .map_err(|error| DaemonError::SideBand(error.to_string()))?;
        event
            .enable()
            .map_err(|error| DaemonError::SideBand(error.to_string()))?;
        side_band.push((event, ring));
    }
    Ok(side_band)
}

/// The process model: processes running now from /proc, exited threads' names kept
/// until their last interval is written.
fn new_processes(options: &DaemonOptions, kernel_symbols: &KernelSymbolsFrom) -> Processes {
    let kallsyms = match kernel_symbols {
        KernelSymbolsFrom::RunningKernel => None,
        KernelSymbolsFrom::Kallsyms { path, .. } => Some(path.clone()),
    };
    let mut processes = Processes::new(SymbolOptions {
        kallsyms,
        ..SymbolOptions::default()
    });
    processes.keep_exited_threads();
    synthesize_running(&mut processes, &options.proc);
    processes
}

/// Frames of a callchain the perf ring recorder asks for (perf's default,
/// `kernel.perf_event_max_stack`).
const PERF_RING_MAX_STACK: u32 = 127;

/// A stack's addresses as frames: its leaf the sampled instruction, the rest return
/// addresses.
fn address_frames(addresses: &[u64]) -> impl Iterator<Item = StackFrame> + '_ {
    addresses.iter().enumerate().map(|(index, &address)| {
        if index == 0 {
            StackFrame::Instruction(address)
        } else {
            StackFrame::ReturnAddress(address)
        }
    })
}

/// `enum perf_callchain_context` markers (`include/uapi/linux/perf_event.h`): what
/// follows them is kernel or user addresses; any value at or above
/// `PERF_CONTEXT_MAX` (-4095) is a marker.
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

/// A PERF_RECORD_SAMPLE of the perf ring recorder (IP, TID, TIME, CALLCHAIN) as a
/// drained stack; `None` when it is too short for its fields.
fn perf_ring_sample(body: &[u8]) -> Option<DrainedStack> {
    // ip u64, pid u32, tid u32, time u64, nr u64, ips[nr] u64.
    let pid = u32::from_ne_bytes(body.get(8..12)?.try_into().ok()?);
    let count = usize::try_from(read_u64(body, 24)?).ok()?;
    let (mut kernel, mut user) = (Vec::new(), Vec::new());
    let mut context = None;
    for index in 0..count {
        let offset = index.checked_mul(8)?.checked_add(32)?;
        let address = read_u64(body, offset)?;
        if address >= PERF_CONTEXT_MAX {
            context = Some(address);
            continue;
        }
        match context {
            Some(PERF_CONTEXT_KERNEL) => kernel.push(address),
            Some(PERF_CONTEXT_USER) => user.push(address),
            // Hypervisor and guest contexts: not this machine's code.
            _ => {}
        }
    }
    Some(DrainedStack {
        pid,
        kernel: Rc::from(kernel),
        user: Rc::from(user),
        lost: false,
    })
}

fn side_band_event(
    cpu: u32,
    role: SideBandRole,
    options: &DaemonOptions,
) -> Result<Event, DaemonError> {
    let mut attr = perf_event_attr {
        type_: abi::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(abi::PERF_COUNT_SW_DUMMY),
        ..Default::default()
    };
    if role == SideBandRole::Sampler {
        attr.type_ = options.event.pmu_type;
        attr.config = options.event.config;
        attr.set_freq(1);
        attr.__bindgen_anon_1.sample_freq = options.frequency;
        // Kernel and user callchains, as `perf record -a -g` takes them.
        attr.sample_max_stack = u16::try_from(PERF_RING_MAX_STACK).unwrap_or(u16::MAX);
    }
    attr.set_disabled(1);
    // mmap2 only widens the records mmap asks for.
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_build_id(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_exclude_kernel(0);
    // Each record ends with its task and time, so the rings' records can be merged in
    // time order.
    attr.set_sample_id_all(1);
    attr.sample_type = u64::from(abi::PERF_SAMPLE_TID | abi::PERF_SAMPLE_TIME);
    // The daemon is woken when a ring is a quarter full, not per record; it reads
    // them at every drain of the kernel's maps anyway (at least every few seconds).
    attr.set_watermark(1);
    attr.wakeup_watermark = perf_record::quarter_watermark(options.side_band_pages);
    let name = match role {
        SideBandRole::SideBandOnly => "dummy (side band)",
        SideBandRole::Sampler => {
            // IP, TID, TIME, CALLCHAIN: the order of a sample's fields.
            attr.sample_type = u64::from(
                abi::PERF_SAMPLE_IP
                    | abi::PERF_SAMPLE_TID
                    | abi::PERF_SAMPLE_TIME
                    | abi::PERF_SAMPLE_CALLCHAIN,
            );
            options.event.name.as_str()
        }
    };
    let cpu_number = i32::try_from(cpu).unwrap_or(i32::MAX);
    Event::open(name, &attr, -1, cpu_number, None, 0).map_err(|error| {
        let message = error.to_string();
        if is_permission_error(&message) || message.contains("permission denied") {
            DaemonError::BpfUnavailable {
                reason: format!("the side band: {message}"),
            }
        } else {
            DaemonError::SideBand(message)
        }
    })
}

/// The names and executable mappings of the processes running at start, from /proc
/// (perf's synthesized side band).
fn synthesize_running(processes: &mut Processes, proc: &Path) {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let directory = entry.path();
        let (Ok(comm), Ok(maps)) = (
            std::fs::read_to_string(directory.join("comm")),
            std::fs::read_to_string(directory.join("maps")),
        ) else {
            continue; // ended meanwhile
        };
        let pid_number = i32::try_from(pid).unwrap_or(i32::MAX);
        processes.name_thread(pid_number, pid_number, comm.trim_end());
        for line in maps.lines().filter_map(perf_record::parse_maps_line) {
            if !line.path.starts_with('/') {
                continue;
            }
            processes.symbolizer().add_mapping(
                pid,
                line.start,
                line.end.saturating_sub(line.start),
                line.offset,
                &line.path,
                None,
            );
        }
    }
}

/// What a running daemon is asked from outside: stop (SIGINT, SIGTERM) or reopen its
/// outputs (SIGHUP). Process-wide, as signal dispositions are.
static STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static REOPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, std::sync::atomic::Ordering::Relaxed);
}

extern "C" fn on_reopen(_: libc::c_int) {
    REOPEN.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM end the run after a last complete interval, and SIGHUP
/// reopen the outputs, instead of their default actions.
pub fn install_signal_handlers() -> Result<(), nix::errno::Errno> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let stop = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    let reopen = SigAction::new(
        SigHandler::Handler(on_reopen),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handlers only store to atomics, which is async-signal-safe.
    unsafe {
        sigaction(Signal::SIGINT, &stop)?;
        sigaction(Signal::SIGTERM, &stop)?;
        sigaction(Signal::SIGHUP, &reopen)?;
    }
    Ok(())
}

/// The signal that asked the run to stop, if one did.
pub fn stop_requested() -> Option<nix::sys::signal::Signal> {
    let signal = STOP_SIGNAL.load(std::sync::atomic::Ordering::Relaxed);
    (signal != 0)
        .then(|| nix::sys::signal::Signal::try_from(signal).ok())
        .flatten()
}

/// What the run loop hands its caller.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// An interval ended: its profile and, at most every `merged_every` intervals
    /// ([`MergedRewrites`]) and at the run's last, the run's merged profile.
    Interval {
        interval: &'a Interval,
        merged: Option<&'a Merged<'a>>,
    },
    /// SIGHUP: the caller reopens (recreates) its outputs.
    Reopen,
}

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// A signal asked it to stop; the last interval was collected whole.
    Signal(nix::sys::signal::Signal),
    /// The interval count asked for was reached.
    Intervals,
}

/// Runs intervals of `every` until a stop signal (or `intervals` intervals), handing
/// each to `sink`. A stop ends the interval under way early, and it is collected and
/// handed over like the others.
pub fn run<E>(
    daemon: &mut Daemon,
    every: Duration,
    intervals: Option<u64>,
    merged_every: u64,
    mut sink: impl FnMut(RunEvent<'_>) -> Result<(), E>,
) -> Result<RunEnd, RunError<E>> {
    let mut rewrites = MergedRewrites::new(merged_every);
    loop {
        let started = Instant::now();
        let mut stop = None;
        while started.elapsed() < every {
            daemon.wait(every.saturating_sub(started.elapsed()));
            daemon.poll();
            if REOPEN.swap(false, std::sync::atomic::Ordering::Relaxed) {
                sink(RunEvent::Reopen).map_err(RunError::Sink)?;
            }
            stop = stop_requested();
            if stop.is_some() {
                break;
            }
        }
        let interval = daemon.collect().map_err(RunError::Daemon)?;
        let last = stop.is_some() || intervals.is_some_and(|count| interval.number >= count);
        // The merged profile is the whole run's: taking and writing it costs in
        // proportion to the run, so not at every interval (rewrites.rs).
        let merged = rewrites
            .after_interval(interval.profile.samples(), daemon.merged_stacks(), last)
            .then(|| daemon.merged())
            .transpose()
            .map_err(RunError::Daemon)?;
        sink(RunEvent::Interval {
            interval: &interval,
            merged: merged.as_ref(),
        })
        .map_err(RunError::Sink)?;
        if let Some(signal) = stop {
            return Ok(RunEnd::Signal(signal));
        }
        if last {
            return Ok(RunEnd::Intervals);
        }
    }
}

/// Why [`run`] stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E> {
    #[error(transparent)]
    Daemon(DaemonError),
    #[error("{0}")]
    Sink(E),
}
