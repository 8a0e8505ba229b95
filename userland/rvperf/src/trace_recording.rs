//! `-i perf.data` of a decoding command: an N-Trace recording of `rvperf trace record`
//! turned into what `--trace`, `--elf` and the encoder options say otherwise, one trace
//! per thread that ran, each with the files its process mapped. A recording whose
//! contexts name tasks (`feature::CONTEXT_TASK`) is decoded here, once, with every
//! thread's code, and split at its context switches (`perf_session::ntrace_task_contexts`):
//! each thread's trace is its decoded elements, held until the command drops the
//! [`LoadedRecording`]. Any other is split into message streams at each hart's
//! synchronisations (`perf_session::ntrace_attribution`), which the command decodes.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ntrace_message::{AddressWidth, MessageOptions};
use perf_abi::ntrace::{feature, NtraceInfo};
use perf_data::PerfDataReader;
use perf_session::{
    decode_by_context, read_ntrace_recording, ContextDecode, ContextOwner, ElementsKept,
    NtraceRecording, PlacedElf, PlacementProblem, ProgramRun, TaskContexts,
    TaskContextsUnavailable, TraceCode, Unattributed,
};
use profiles::StopsKeepStacks;

use crate::trace_file::TraceFile;
use crate::trace_input::{CodeCache, TraceArgs, TraceInput};

/// Idle bytes between two pieces of a trace with a gap between them: whatever message
/// the first piece's last bytes began ends there, and the decoder reports it and
/// resynchronises in the next piece.
const GAP_SEPARATOR: [u8; 8] = [0xff; 8];

/// Whether the perf.data at `path` is an N-Trace recording (`rvperf trace record`) rather
/// than a sampled one. Standard input is read once, by the sampled path: never a
/// recording here.
pub fn is_recording(path: &Path) -> Result<bool> {
    if path == Path::new("-") {
        return Ok(false);
    }
    let reader = crate::perf_file::open(path)?;
    perf_session::is_ntrace_recording(&reader).with_context(|| path.display().to_string())
}

/// Which threads of a recording to decode (`--pid`, `--tid`, `--comm`, as perf script's;
/// all when none is given).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ThreadFilter {
    /// With -i: only the processes with these pids (comma-separated).
    #[arg(long = "pid", value_name = "PID,...", value_delimiter = ',')]
    pub pids: Vec<u32>,
    /// With -i: only the threads with these tids (comma-separated).
    #[arg(long = "tid", value_name = "TID,...", value_delimiter = ',')]
    pub tids: Vec<u32>,
    /// With -i: only the processes with these command names (comma-separated).
    #[arg(long = "comm", value_name = "COMM,...", value_delimiter = ',')]
    pub comms: Vec<String>,
}

impl ThreadFilter {
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.tids.is_empty() && self.comms.is_empty()
    }

    fn admits(&self, run: ProgramRun, tid: u32, comm: &str) -> bool {
        self.is_empty()
            || self.pids.contains(&run.pid)
            || self.tids.contains(&tid)
            || self.comms.iter().any(|name| name == comm)
    }
}

/// Who ran a trace of a recording split by thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedThread {
    pub run: ProgramRun,
    pub tid: u32,
    pub comm: String,
}

/// The trace of one thread, ready for a decoding command.
pub struct LoadedTrace {
    /// Its thread (`None`: the trace could not be split, and this is all of it).
    pub thread: Option<TracedThread>,
    /// The options the recording says, with the process's files (and the caller's --elf).
    pub arguments: TraceArgs,
    pub trace: TraceInput,
    /// Whether a trace stop keeps the call stack: a thread's trace, stopped by the
    /// user-mode filter while the thread was in the kernel.
    pub stops: StopsKeepStacks,
}

impl LoadedTrace {
    /// `comm-pid/tid` for messages and headers.
    pub fn label(&self) -> String {
        match &self.thread {
            Some(thread) => format!("{}-{}/{}", thread.comm, thread.run.pid, thread.tid),
            None => "all processes".to_owned(),
        }
    }
}

pub struct LoadedRecording {
    pub traces: Vec<LoadedTrace>,
    pub name: String,
    /// The code loaded already (to decode a recording split by task context), for the
    /// command to take rather than load again.
    pub codes: CodeCache,
}

/// How a recording's trace is split by thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitRule {
    /// At each hart's context switches when its contexts name tasks, else at its
    /// synchronisations.
    TaskContextsFirst,
    /// At each hart's synchronisations, into message streams (what `--output messages`
    /// can print).
    Synchronisations,
}

/// The options of the trace of `info` (`given` for what the recording does not say).
fn arguments_of(info: &NtraceInfo, given: &TraceArgs, placed: &[PlacedElf]) -> TraceArgs {
    let mut elf: Vec<String> = placed
        .iter()
        .map(|file| match file.load_address {
            Some(address) => format!("{}@{address:#x}", file.path.display()),
            None => file.path.display().to_string(),
        })
        .collect();
    elf.extend(given.elf.iter().cloned());
    let mut arguments = given.clone();
    arguments.elf = elf;
    arguments.src_bits = info.src_bits;
    arguments.timestamps = info.has(feature::TIMESTAMPS);
    arguments.addr_ext = info.has(feature::MSB_EXTENSION);
    arguments.all_jumps = info.has(feature::ALL_JUMPS);
    arguments.max_stack = if info.has(feature::IMPLICIT_RETURN) {
        u16::try_from(info.return_stack_depth).unwrap_or(u16::MAX)
    } else {
        0
    };
    arguments
}

/// Maps a recorded file, found as perf finds it (`symbolize::binary_candidates`): by its
/// build id in perf's cache (`~/.debug/.build-id/`), else under `symfs`, else at its
/// recorded path. Placing it reads its headers and notes, not the whole file.
fn reader_under(
    symfs: Option<&Path>,
) -> impl Fn(&str, Option<&[u8]>) -> std::io::Result<(PathBuf, memmap2::Mmap)> + '_ {
    move |name, build_id| {
        let options = symbolize::SymbolizerOptions {
            symfs: symfs.map(Path::to_path_buf),
            ..symbolize::SymbolizerOptions::default()
        };
        let candidates = symbolize::binary_candidates(&options, Path::new(name), build_id);
        let mut last_error = std::io::Error::from(std::io::ErrorKind::NotFound);
        for path in candidates {
            match std::fs::File::open(&path) {
                Ok(file) => {
                    // SAFETY: read-only and private; the recorded files are not written
                    // while a recording is read (as perf assumes of the files it
                    // symbolizes).
                    let map = unsafe { memmap2::Mmap::map(&file) }?;
                    return Ok((path, map));
                }
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }
}

/// The copy of the kernel's code a `--kcore` recording holds (`kcore_dir/kcore` of its
/// perf.data directory; with kallsyms' names), placed at its addresses.
fn kernel_code_of(path: &Path) -> Option<PlacedElf> {
    let copy = path
        .join(perf_data::DIRECTORY_KCORE)
        .join(perf_data::DIRECTORY_KCORE_ELF);
    copy.is_file().then_some(PlacedElf {
        path: copy,
        load_address: None,
    })
}

/// The kernel's vmlinux for a recording without a copy of its code, found by the
/// recorded build id and release as perf finds one (`symbolize::kernel_image_candidates`)
/// and moved to where the kernel ran.
fn vmlinux_of(
    recording: &NtraceRecording,
    release: Option<&str>,
    symfs: Option<&Path>,
) -> Result<PlacedElf, perf_session::VmlinuxProblem> {
    let options = symbolize::SymbolizerOptions {
        symfs: symfs.map(Path::to_path_buf),
        ..symbolize::SymbolizerOptions::default()
    };
    let candidates = recording
        .kernel
        .as_ref()
        .and_then(|kernel| kernel.build_id.as_deref())
        .map(|build_id| symbolize::kernel_image_candidates(&options, build_id, release))
        .unwrap_or_default();
    perf_session::place_vmlinux(recording.kernel.as_ref(), &candidates, |path| {
        let file = std::fs::File::open(path)?;
        // SAFETY: read-only and private; a vmlinux is not written while a recording is
        // read (as perf assumes of the files it symbolizes).
        unsafe { memmap2::Mmap::map(&file) }
    })
}

/// A process's files and the kernel's code: every thread of a trace that follows the
/// kernel ran both.
fn with_kernel(mut placed: Vec<PlacedElf>, kernel: Option<&PlacedElf>) -> Vec<PlacedElf> {
    placed.extend(kernel.cloned());
    placed
}

/// Whether the missing vDSO was warned about: every process maps it, once is enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VdsoWarning {
    NotYet,
    Given,
}

/// Each process's files, placed once for all its threads, with what could not be
/// placed said once.
struct ProcessFiles<'r> {
    recording: &'r NtraceRecording,
    path: &'r Path,
    symfs: Option<&'r Path>,
    placed_of: Vec<(ProgramRun, Vec<PlacedElf>)>,
    vdso_warning: VdsoWarning,
}

impl<'r> ProcessFiles<'r> {
    fn new(recording: &'r NtraceRecording, path: &'r Path, symfs: Option<&'r Path>) -> Self {
        Self {
            recording,
            path,
            symfs,
            placed_of: Vec::new(),
            vdso_warning: VdsoWarning::NotYet,
        }
    }

    /// The files `run` (named `comm`) mapped, placed.
    fn of(&mut self, run: ProgramRun, comm: &str) -> Vec<PlacedElf> {
        if let Some((_, placed)) = self.placed_of.iter().find(|(known, _)| *known == run) {
            return placed.clone();
        }
        // The idle task runs the kernel alone.
        if run.pid == 0 {
            return Vec::new();
        }
        let (placed, problems) = self
            .recording
            .placed_files_of(run, reader_under(self.symfs));
        warn_problems(
            self.path,
            &problems,
            &format!("{comm}-{}: ", run.pid),
            &mut self.vdso_warning,
        );
        self.placed_of.push((run, placed.clone()));
        placed
    }
}

fn warn_problems(
    path: &Path,
    problems: &[PlacementProblem],
    whose: &str,
    vdso_warning: &mut VdsoWarning,
) {
    for problem in problems {
        match problem {
            PlacementProblem::Unreadable { filename, .. } if filename == symbolize::VDSO_NAME => {
                if *vdso_warning == VdsoWarning::NotYet {
                    eprintln!(
                        "rvperf: warning: {}: no image of the vDSO in perf's build-id cache (~/.debug, where rvperf trace record keeps it): a trace through it cannot be followed",
                        path.display()
                    );
                    *vdso_warning = VdsoWarning::Given;
                }
            }
            _ => eprintln!("rvperf: warning: {}: {whose}{problem}", path.display()),
        }
    }
}

/// The recording's trace, one [`LoadedTrace`] per thread `filter` admits, in order
/// of their first run in the trace. A trace that cannot be split (no timestamps, no
/// time conversion) is one process with every file, said in a note; with a filter, an
/// error.
pub fn load(
    path: &Path,
    symfs: Option<&Path>,
    given: &TraceArgs,
    filter: &ThreadFilter,
) -> Result<LoadedRecording> {
    load_split(path, symfs, given, filter, SplitRule::TaskContextsFirst)
}

/// [`load`], split by `rule`.
pub fn load_split(
    path: &Path,
    symfs: Option<&Path>,
    given: &TraceArgs,
    filter: &ThreadFilter,
    rule: SplitRule,
) -> Result<LoadedRecording> {
    let reader =
        PerfDataReader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let recording = read_ntrace_recording(&reader).with_context(|| path.display().to_string())?;
    warn_lost(path, &recording);
    let name = path.display().to_string();
    let mut kernel = kernel_code_of(path);
    if recording.info.traces_kernel() && kernel.is_none() && given.elf.is_empty() {
        match vmlinux_of(&recording, reader.info().os_release.as_deref(), symfs) {
            Ok(vmlinux) => {
                eprintln!(
                    "rvperf: note: {}: the kernel's code is {} (its build id; the kernel patched itself where it ran, which only a copy, --kcore, holds: those places are gaps)",
                    path.display(),
                    vmlinux.path.display()
                );
                kernel = Some(vmlinux);
            }
            Err(problem) => eprintln!(
                "rvperf: warning: {}: the trace follows the kernel, and the recording has no copy of its code ({problem}; record with --kcore, or give a kernel image with --elf): the kernel's parts are gaps",
                path.display()
            ),
        }
    }
    let options = MessageOptions::default()
        .with_src_bits(recording.info.src_bits)
        .with_timestamps(recording.info.has(feature::TIMESTAMPS))
        .with_address_msb_extension(recording.info.has(feature::MSB_EXTENSION))
        // Linux recordings are of rv64 harts.
        .with_address_width(AddressWidth::Bits64);
    if rule == SplitRule::TaskContextsFirst {
        match recording.task_contexts(options) {
            Ok(contexts) => {
                return load_by_context(
                    path,
                    &recording,
                    &contexts,
                    symfs,
                    given,
                    filter,
                    kernel.as_ref(),
                )
            }
            Err(TaskContextsUnavailable::NotRecorded) => {}
            Err(reason) => eprintln!(
                "rvperf: note: {}: not split at the task contexts the trace reports: {reason}; split at synchronisations",
                path.display()
            ),
        }
    }
    let attribution = match recording.attribute(options) {
        Ok(attribution) => attribution,
        Err(error) if filter.is_empty() => {
            eprintln!(
                "rvperf: note: {}: not split by thread: {error}; decoded as one address space",
                path.display()
            );
            return Ok(LoadedRecording {
                traces: vec![whole_trace(
                    path,
                    &recording,
                    symfs,
                    given,
                    kernel.as_ref(),
                )?],
                name,
                codes: CodeCache::default(),
            });
        }
        Err(error) => bail!(
            "{}: --pid, --tid and --comm need the trace split by thread: {error}",
            path.display()
        ),
    };
    warn_unattributed(path, &attribution.unattributed);
    let stops = stops_of(&recording);
    let mut files = ProcessFiles::new(&recording, path, symfs);
    let mut traces = Vec::new();
    let mut admitted = 0;
    for thread in attribution.threads {
        if !filter.admits(thread.run, thread.tid, &thread.comm) {
            continue;
        }
        admitted += 1;
        let label = format!("{}-{}/{}", thread.comm, thread.run.pid, thread.tid);
        let placed = with_kernel(files.of(thread.run, &thread.comm), kernel.as_ref());
        if placed.is_empty() && given.elf.is_empty() {
            eprintln!(
                "rvperf: warning: {}: {label}: none of its files was found: its {} messages are left out",
                path.display(),
                thread.messages
            );
            continue;
        }
        traces.push(LoadedTrace {
            thread: Some(TracedThread {
                run: thread.run,
                tid: thread.tid,
                comm: thread.comm,
            }),
            arguments: arguments_of(&recording.info, given, &placed),
            trace: TraceInput::Messages(TraceFile::from_bytes(&thread.trace)?),
            stops,
        });
    }
    if traces.is_empty() {
        bail!(
            "{}",
            no_trace(
                path,
                admitted,
                filter,
                "none of the traced files was found (--symfs, perf's build-id cache)"
            )
        );
    }
    Ok(LoadedRecording {
        traces,
        name,
        codes: CodeCache::default(),
    })
}

/// Why a recording gave no thread's trace: the filter admitted none of its threads
/// (`admitted`), or `otherwise`.
fn no_trace(path: &Path, admitted: usize, filter: &ThreadFilter, otherwise: &str) -> String {
    if admitted == 0 && !filter.is_empty() {
        format!(
            "{}: no thread of the trace is one --pid, --tid or --comm names",
            path.display()
        )
    } else {
        format!("{}: {otherwise}", path.display())
    }
}

/// Says what of the trace no thread's decode will see, so that nothing is dropped
/// unsaid.
fn warn_unattributed(path: &Path, unattributed: &Unattributed) {
    let outside = unattributed.no_task_messages + unattributed.unknown_hart_messages;
    if outside > 0 {
        eprintln!(
            "rvperf: warning: {}: {outside} messages ran when the side-band names no task for their hart's CPU: left out",
            path.display()
        );
    }
    if unattributed.unreadable_messages > 0 {
        eprintln!(
            "rvperf: warning: {}: {} unreadable messages: left out, and each hart's messages until its next synchronisation",
            path.display(),
            unattributed.unreadable_messages
        );
    }
    if unattributed.unsynchronised_messages > 0 {
        eprintln!(
            "rvperf: note: {}: {} messages came before their hart's first synchronisation (of the trace or after lost bytes): skipped, as a decoder skips them",
            path.display(),
            unattributed.unsynchronised_messages
        );
    }
}

/// The whole trace against every file of the recording (one address space).
fn whole_trace(
    path: &Path,
    recording: &NtraceRecording,
    symfs: Option<&Path>,
    given: &TraceArgs,
    kernel: Option<&PlacedElf>,
) -> Result<LoadedTrace> {
    let (placed, problems) = recording.placed_files(reader_under(symfs));
    warn_problems(path, &problems, "", &mut VdsoWarning::NotYet);
    let placed = with_kernel(placed, kernel);
    let mut bytes = Vec::new();
    for (index, piece) in recording.pieces.iter().enumerate() {
        if index > 0 {
            bytes.extend_from_slice(&GAP_SEPARATOR);
        }
        bytes.extend_from_slice(&piece.bytes);
    }
    Ok(LoadedTrace {
        thread: None,
        arguments: arguments_of(&recording.info, given, &placed),
        trace: TraceInput::Messages(TraceFile::from_bytes(&bytes)?),
        stops: StopsKeepStacks::No,
    })
}

/// Whether a trace stop keeps the call stack (see [`LoadedTrace::stops`]).
fn stops_of(recording: &NtraceRecording) -> StopsKeepStacks {
    // A user-mode trace stops whenever its thread enters the kernel, which returns
    // to it (or runs a signal handler on top): its stack goes on.
    if recording.info.privileges == perf_abi::ntrace::privilege::USER {
        StopsKeepStacks::Yes
    } else {
        StopsKeepStacks::No
    }
}

/// The recording decoded once with every thread's code and split at each hart's
/// context switches (`perf_session::ntrace_task_contexts`): one [`LoadedTrace`] of
/// decoded elements per thread `filter` admits. The shared code, the one a context
/// of no thread runs in, is the kernel's (or the caller's --elf).
fn load_by_context(
    path: &Path,
    recording: &NtraceRecording,
    contexts: &TaskContexts,
    symfs: Option<&Path>,
    given: &TraceArgs,
    filter: &ThreadFilter,
    kernel: Option<&PlacedElf>,
) -> Result<LoadedRecording> {
    warn_contexts_of_no_thread(path, contexts);
    let (threads, thread_of_context) = contexts.threads();
    let mut codes = CodeCache::default();
    let shared_arguments = arguments_of(&recording.info, given, &with_kernel(Vec::new(), kernel));
    let shared = if shared_arguments.elf.is_empty() {
        std::rc::Rc::new(TraceCode::load(&[])?)
    } else {
        codes.code_for(&shared_arguments)?
    };
    // Each process's files placed, and its code loaded, once for all its threads.
    let mut files = ProcessFiles::new(recording, path, symfs);
    let mut thread_arguments = Vec::with_capacity(threads.len());
    let mut thread_codes = Vec::with_capacity(threads.len());
    for thread in &threads {
        let placed = with_kernel(files.of(thread.run, &thread.comm), kernel);
        let arguments = arguments_of(&recording.info, given, &placed);
        let code = if arguments.elf.is_empty() {
            std::rc::Rc::clone(&shared)
        } else {
            codes.code_for(&arguments)?
        };
        thread_arguments.push(arguments);
        thread_codes.push(code);
    }
    fn program(code: &TraceCode) -> ntrace_flow::ProgramCode<'_> {
        ntrace_flow::ProgramCode {
            image: code.image(),
            files: code.decode_infos().to_vec(),
        }
    }
    let context_code = ntrace_flow::ContextCode {
        shared: program(&shared),
        contexts: thread_of_context
            .iter()
            .map(|(&value, &index)| (value, program(&thread_codes[index])))
            .collect(),
    };
    let options = shared_arguments.decoder_options(&shared);
    // The threads the filter leaves out are counted, not held.
    let decoded = decode_by_context(
        &recording.pieces,
        &context_code,
        &threads,
        &thread_of_context,
        |thread| {
            if filter.admits(thread.run, thread.tid, &thread.comm) {
                ElementsKept::Kept
            } else {
                ElementsKept::Counted
            }
        },
        options,
    );
    warn_context_decode(path, &decoded);
    let stops = stops_of(recording);
    let mut traces = Vec::new();
    let mut admitted = 0;
    let mut empty = 0;
    for (thread, arguments) in decoded.threads.into_iter().zip(thread_arguments) {
        let traced = &thread.thread;
        if !filter.admits(traced.run, traced.tid, &traced.comm) {
            continue;
        }
        admitted += 1;
        // A thread whose contexts were reported but that ran nothing the decode placed
        // (its switches fell in a gap): nothing to give.
        if thread.elements.is_empty() {
            empty += 1;
            continue;
        }
        traces.push(LoadedTrace {
            thread: Some(TracedThread {
                run: traced.run,
                tid: traced.tid,
                comm: traced.comm.clone(),
            }),
            arguments,
            trace: TraceInput::Decoded(thread),
            stops,
        });
    }
    if empty > 0 {
        eprintln!(
            "rvperf: note: {}: {empty} threads were reported running but no element of their trace was decoded",
            path.display()
        );
    }
    if traces.is_empty() {
        bail!(
            "{}",
            no_trace(
                path,
                admitted,
                filter,
                &format!(
                    "no thread's trace could be decoded ({} instructions in all)",
                    decoded.statistics.instructions
                )
            )
        );
    }
    Ok(LoadedRecording {
        traces,
        name: path.display().to_string(),
        codes,
    })
}

/// Says which context values name no thread: their trace is decoded (in the kernel's
/// code) and counted, not given to anyone.
fn warn_contexts_of_no_thread(path: &Path, contexts: &TaskContexts) {
    for context in &contexts.contexts {
        let why = match context.owner {
            ContextOwner::Thread(_) => continue,
            ContextOwner::NoTask => {
                "names no task (the hart had not switched since tracing started)".to_owned()
            }
            ContextOwner::UnknownTid { tid } => {
                format!("names tid {tid}, which the side-band never mentions")
            }
            ContextOwner::NoTime { tid } => {
                format!("names tid {tid}, but no report of it has a time to tell which program ran")
            }
        };
        eprintln!(
            "rvperf: warning: {}: the trace context {:#x} (reported {} times) {why}: its trace is left out",
            path.display(),
            context.value,
            context.reports
        );
    }
    if contexts.unreadable_messages > 0 {
        eprintln!(
            "rvperf: warning: {}: {} unreadable messages",
            path.display(),
            contexts.unreadable_messages
        );
    }
}

/// Says what of the decode no thread was given, what the whole decode lost, and what
/// the decoded elements held cost.
fn warn_context_decode(path: &Path, decoded: &ContextDecode) {
    let unattributed = &decoded.unattributed;
    if unattributed.no_thread_elements > 0 {
        eprintln!(
            "rvperf: warning: {}: {} instructions ({} elements) ran in contexts of no known thread: left out",
            path.display(),
            unattributed.no_thread_instructions,
            unattributed.no_thread_elements
        );
    }
    if unattributed.before_context_elements > 0 {
        eprintln!(
            "rvperf: note: {}: {} instructions ({} elements) ran before their hart reported a context (at the start of the trace or after lost bytes): left out",
            path.display(),
            unattributed.before_context_instructions,
            unattributed.before_context_elements
        );
    }
    let statistics = &decoded.statistics;
    if statistics.skipped_units > 0 {
        eprintln!(
            "rvperf: warning: {}: the decode could not place {} I-CNT units (16-bit instruction units, about {} to {} instructions)",
            path.display(),
            statistics.skipped_units,
            statistics.skipped_units / 2,
            statistics.skipped_units
        );
    }
    if statistics.unresolved_units_at_end > 0 {
        eprintln!(
            "rvperf: warning: {}: the trace ends with {} I-CNT units (16-bit instruction units) not followed by a message that places them; those instructions are not counted",
            path.display(),
            statistics.unresolved_units_at_end
        );
    }
    let bytes = decoded
        .elements_held
        .saturating_mul(std::mem::size_of::<trace_elements::TraceElement>() as u64);
    eprintln!(
        "rvperf: note: {}: split at its context switches: {} instructions of {} threads, {} decoded elements held ({} MiB)",
        path.display(),
        statistics.instructions,
        decoded.threads.len(),
        decoded.elements_held,
        bytes >> 20
    );
}

fn warn_lost(path: &Path, recording: &NtraceRecording) {
    if recording.lost_bytes > 0 {
        eprintln!(
            "rvperf: warning: {}: {} bytes of trace were lost while recording, in {} gaps",
            path.display(),
            recording.lost_bytes,
            recording.pieces.len().saturating_sub(1)
                + usize::from(
                    recording
                        .pieces
                        .first()
                        .is_some_and(|piece| piece.offset > 0)
                )
        );
    }
}
