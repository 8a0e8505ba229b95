//! `rvperf record`: sample a command, a process or the whole system with
//! `perf_event_open` and write a perf.data that Linux perf reads.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::signal::{self, raise, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use perf_abi::sys::bindings as b;
use perf_abi::{
    build_attr, parse_branch_filters, parse_event, AttrOptions, Record, SampleFormat, Sampling,
    Wakeup, DASH_B_BRANCH_FILTER,
};
use perf_data::{EventDesc, Metadata, PerfDataWriter};
use perf_ring::{online_cpus, poll_readable, Event, RingBuffer};

use crate::workload::{Exit, Workload};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Event to sample (perf syntax: cpu-clock, cycles, rNNNN, pmu/config=.../); repeatable.
    #[arg(short = 'e', long = "event")]
    pub(crate) events: Vec<String>,
    /// Sampling frequency in Hz.
    #[arg(short = 'F', long = "freq", conflicts_with = "count")]
    frequency: Option<u64>,
    /// Sampling period in events.
    #[arg(short = 'c', long = "count")]
    count: Option<u64>,
    /// Record call chains.
    #[arg(short = 'g')]
    pub(crate) call_graph: bool,
    /// Record branch stacks of any taken branch.
    #[arg(short = 'b', long = "branch-any", conflicts_with = "branch_filter")]
    branch_any: bool,
    /// Record branch stacks with perf's filter names (any, any_call, any_ret, ind_call, u, k, ...).
    #[arg(short = 'j', long = "branch-filter", value_name = "FILTERS")]
    branch_filter: Option<String>,
    /// System-wide, on every online CPU.
    #[arg(short = 'a', long = "all-cpus", conflicts_with = "pid")]
    pub(crate) all_cpus: bool,
    /// An existing process.
    #[arg(short = 'p', long = "pid")]
    pub(crate) pid: Option<i32>,
    /// Data pages of each CPU's ring buffer (a power of two), as perf's -m: a small ring
    /// loses records (counted in the summary) when the recorder falls behind.
    #[arg(short = 'm', long = "mmap-pages", value_name = "PAGES", default_value_t = RING_PAGES)]
    pub(crate) mmap_pages: usize,
    /// AUX area pages per CPU for AUX-based PMUs such as rvperf_ctr (a power of two).
    #[arg(long = "aux-pages", value_name = "PAGES", default_value_t = 512)]
    pub(crate) aux_pages: usize,
    /// rvperf_ctr: keep the AUX data in perf.data as PERF_RECORD_AUXTRACE, decoded by
    /// rvperf script/report, instead of converting it to samples that Linux perf reads.
    #[arg(long = "keep-aux")]
    pub(crate) keep_aux: bool,
    /// Output file.
    #[arg(short = 'o', long = "output", default_value = "perf.data")]
    pub(crate) output: PathBuf,
    /// The command to run and sample.
    #[arg(last = true)]
    pub(crate) command: Vec<String>,
}

/// The last SIGINT or SIGTERM received (0 for none): it stops the recording.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Default data pages of each CPU's ring (256 KiB with 4 KiB pages).
pub(crate) const RING_PAGES: usize = 64;

extern "C" fn request_stop(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, Ordering::Relaxed);
}

/// SIGINT and SIGTERM stop the recording: what the rings hold is still written, and
/// rvperf then ends by that signal, as perf does.
fn install_stop_handlers() -> Result<()> {
    // Without SA_RESTART: the signal interrupts the recorder's poll, which returns.
    let action = SigAction::new(
        SigHandler::Handler(request_stop),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for stop in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: `request_stop` only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(stop, &action) }
            .with_context(|| format!("cannot handle {}", stop.as_str()))?;
    }
    Ok(())
}

/// The signal that asked the recording to stop, if one did.
fn stop_requested() -> Option<Signal> {
    Signal::try_from(STOP_SIGNAL.load(Ordering::Relaxed)).ok()
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
    fn new(workload: Option<Exit>) -> Outcome {
        match workload {
            Some(Exit::Signal(signal)) => Outcome {
                signal: Some(signal),
                code: 0,
            },
            Some(Exit::Code(code)) => Outcome {
                signal: stop_requested(),
                code: u8::try_from(code).unwrap_or(u8::MAX),
            },
            None => Outcome {
                signal: stop_requested(),
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

/// The perf.data being written, shared by the writer and the recording loop, which
/// flushes it after each round: the file grows as the recording goes, as perf's does.
#[derive(Debug, Clone)]
pub(crate) struct OutputFile(Rc<RefCell<BufWriter<File>>>);

impl OutputFile {
    fn create(path: &Path) -> Result<OutputFile> {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(OutputFile(Rc::new(RefCell::new(BufWriter::with_capacity(
            1 << 20,
            file,
        )))))
    }

    /// Writes what is buffered to the file.
    pub(crate) fn flush_round(&self) -> Result<()> {
        self.0
            .borrow_mut()
            .flush()
            .context("cannot write the perf.data")
    }
}

impl Write for OutputFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.borrow_mut().write_all(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

impl Seek for OutputFile {
    fn seek(&mut self, position: SeekFrom) -> std::io::Result<u64> {
        self.0.borrow_mut().seek(position)
    }
}

pub(crate) type Writer = PerfDataWriter<OutputFile>;

/// Creates the temporary output `output.tmp` and its writer.
pub(crate) fn create_output(output: &Path, events: Vec<EventDesc>) -> Result<(Writer, OutputFile)> {
    let file = OutputFile::create(&temporary_output(output))?;
    let writer = PerfDataWriter::new(file.clone(), events)?;
    Ok((writer, file))
}

/// Where the recording is written until it is complete and renamed to `output`.
fn temporary_output(output: &Path) -> PathBuf {
    output.with_extension("tmp")
}

/// Whether `pid` still runs: gone or a zombie (exited, not yet reaped by its parent)
/// both mean its events will produce nothing more.
pub(crate) fn process_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself contain ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

/// Expands perf's group syntax: `{a,b}:u` is `a:u` leading `b:u`. Each result names its
/// group leader's position (None for leaders and ungrouped events). Commas inside a
/// PMU's `/terms/` do not separate members.
fn expand_groups(names: &[String]) -> Result<Vec<(String, Option<usize>)>> {
    let mut expanded = Vec::new();
    for name in names {
        let Some(inner) = name.strip_prefix('{') else {
            expanded.push((name.clone(), None));
            continue;
        };
        let Some((body, modifiers)) = inner.rsplit_once('}') else {
            bail!("event group {name}: no closing brace");
        };
        let suffix = modifiers.trim_start_matches(':');
        let mut members = Vec::new();
        let (mut start, mut inside_terms) = (0, false);
        for (position, character) in body.char_indices() {
            match character {
                '/' => inside_terms = !inside_terms,
                ',' if !inside_terms => {
                    members.push(&body[start..position]);
                    start = position + 1;
                }
                _ => {}
            }
        }
        members.push(&body[start..]);
        let leader = expanded.len();
        for (member_index, member) in members.into_iter().enumerate() {
            if member.is_empty() {
                bail!("event group {name}: empty member");
            }
            let member = if suffix.is_empty() {
                member.to_owned()
            } else {
                format!("{member}:{suffix}")
            };
            expanded.push((member, (member_index > 0).then_some(leader)));
        }
    }
    Ok(expanded)
}

/// Splits perf's event modifiers off an event name: `cycles:u` and `pmu/config=1/u`
/// both give ("...", "u").
pub(crate) fn split_modifiers(name: &str) -> (&str, &str) {
    if let Some(end) = name.rfind('/') {
        if name[..end].contains('/') {
            let (event, rest) = name.split_at(end + 1);
            return (event, rest.trim_start_matches(':'));
        }
    }
    match name.rsplit_once(':') {
        Some((event, modifiers))
            if !modifiers.is_empty() && modifiers.chars().all(|c| c.is_ascii_lowercase()) =>
        {
            (event, modifiers)
        }
        _ => (name, ""),
    }
}

pub fn run(arguments: &RecordArgs) -> Result<Outcome> {
    if arguments.command.is_empty() && arguments.pid.is_none() && !arguments.all_cpus {
        bail!("nothing to record: give -- COMMAND, -p PID or -a");
    }
    if !arguments.mmap_pages.is_power_of_two() {
        bail!(
            "-m {}: the ring's data pages must be a power of two",
            arguments.mmap_pages
        );
    }
    let sysfs = Path::new("/sys");
    let names = if arguments.events.is_empty() {
        vec!["cpu-clock".to_owned()]
    } else {
        arguments.events.clone()
    };
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
    install_stop_handlers()?;
    // Branch stacks on RISC-V come from the rvperf_ctr PMU (kmod-shim) where it is
    // loaded: asked for by name, or picked for -b/-j.
    let ctr_type = crate::record_ctr::ctr_pmu_type(sysfs);
    let names_ctr = names
        .iter()
        .any(|name| name.starts_with(perf_abi::ctr::CTR_PMU_NAME));
    let result = match ctr_type {
        Some(ctr_type) if names_ctr || branch_sample_type != 0 => {
            let names = if arguments.events.is_empty() {
                vec!["cycles".to_owned()]
            } else {
                names
            };
            crate::record_ctr::record(
                arguments,
                &names,
                sysfs,
                sampling,
                branch_sample_type,
                ctr_type,
            )
        }
        _ if arguments.keep_aux => Err(anyhow::anyhow!(
            "--keep-aux: only rvperf_ctr recordings have AUX data to keep, and the rvperf_ctr \
             module is not loaded or not asked for (-b, -j or -e rvperf_ctr/.../)"
        )),
        _ => record(arguments, &names, sysfs, sampling, branch_sample_type),
    };
    if result.is_err() {
        // A recording that failed leaves no file behind (nor the workload: dropped,
        // it is terminated and reaped).
        let _ = std::fs::remove_file(temporary_output(&arguments.output));
    }
    result.map(Outcome::new)
}

struct Opened {
    descs: Vec<EventDesc>,
    rings: Vec<RingBuffer>,
    events: Vec<Event>,
    format: SampleFormat,
}

fn open_events(
    names: &[String],
    sysfs: &Path,
    base: &AttrOptions,
    pid: i32,
    cpus: &[u32],
    ring_pages: usize,
) -> Result<Opened> {
    let mut descs = Vec::new();
    let mut rings: Vec<RingBuffer> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut leaders: Vec<usize> = Vec::new();
    // events[placed[name index][cpu slot]] is that event on that CPU.
    let mut placed: Vec<Vec<usize>> = Vec::new();
    let mut format = None;
    for (index, (name, group_leader)) in expand_groups(names)?.iter().enumerate() {
        let (event, modifiers) = split_modifiers(name);
        let spec = parse_event(event, sysfs)?;
        let mut options = base.clone();
        for modifier in modifiers.chars() {
            match modifier {
                'u' => options.exclude_kernel = true,
                'k' => options.exclude_user = true,
                'p' => options.precise_ip = (options.precise_ip + 1).min(3),
                other => bail!("event {name}: unknown modifier {other:?} (known: u, k, p)"),
            }
        }
        // Side-band records (mmaps, comms, forks) once, from the first event.
        let tracks = index == 0;
        // The kernel reports executable mappings only with `mmap` set; `mmap2` only
        // chooses the richer record format (inode or build id), as perf sets both.
        options.mmap = tracks;
        options.mmap2 = tracks;
        options.comm = tracks;
        options.task = tracks;
        if group_leader.is_some() {
            // Group members start and stop with their leader.
            options.disabled = false;
            options.enable_on_exec = false;
        }
        let attr = build_attr(&spec, &options);
        format.get_or_insert_with(|| SampleFormat::from_attr(&attr));
        let mut ids = Vec::new();
        let mut here = Vec::new();
        for (slot, &cpu) in cpus.iter().enumerate() {
            let leader = group_leader.map(|leader: usize| &events[placed[leader][slot]]);
            let event = Event::open(name, &attr, pid, cpu as i32, leader, 0)?;
            ids.push(event.id()?);
            if index == 0 {
                rings.push(
                    RingBuffer::new(&event, ring_pages)
                        .with_context(|| format!("cannot map the ring buffer of {name}"))?,
                );
                leaders.push(events.len());
            } else {
                event.set_output(&events[leaders[slot]])?;
            }
            here.push(events.len());
            events.push(event);
        }
        placed.push(here);
        // perf.data gets the attr that was opened: `perf evlist -v` shows what ran.
        descs.push(EventDesc {
            attr,
            name: name.clone(),
            ids,
        });
    }
    Ok(Opened {
        descs,
        rings,
        events,
        format: format.context("no event")?,
    })
}

#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) samples: u64,
    pub(crate) lost: u64,
    pub(crate) bytes: u64,
    /// AUX areas that filled up (PERF_RECORD_AUX with the TRUNCATED flag).
    pub(crate) aux_truncated: u64,
    /// rvperf_ctr records at which perf throttled the trigger (each followed by a gap).
    pub(crate) throttled: u64,
}

/// The executable mappings seen, by file name: (pid, build id from MMAP2).
pub(crate) type Mappings = BTreeMap<String, (i32, Option<Vec<u8>>)>;

/// Copies what the data rings hold into the perf.data. With `consume_aux`, the AUX
/// bookkeeping records (PERF_RECORD_AUX, ITRACE_START) are counted but not written:
/// the AUX data they describe is turned into ordinary records instead.
pub(crate) fn drain(
    rings: &mut [RingBuffer],
    format: &SampleFormat,
    writer: &mut Writer,
    counts: &mut Counts,
    mappings: &mut Mappings,
    consume_aux: bool,
) -> Result<()> {
    let mut record_bytes = Vec::with_capacity(4096);
    let mut scratch = Vec::new();
    let before = counts.bytes;
    for ring in rings.iter_mut() {
        let mut batch = ring.read();
        while let Some(record) = batch.next_record()? {
            let aux_bookkeeping = record.record_type == b::PERF_RECORD_AUX
                || record.record_type == b::PERF_RECORD_ITRACE_START;
            if consume_aux && aux_bookkeeping {
                if let Ok(Record::Aux(aux)) = record.parse(format, &mut scratch) {
                    if aux.flags & u64::from(b::PERF_AUX_FLAG_TRUNCATED) != 0 {
                        counts.aux_truncated += 1;
                    }
                }
                continue;
            }
            record_bytes.clear();
            record_bytes.extend_from_slice(&record.record_type.to_ne_bytes());
            record_bytes.extend_from_slice(&record.misc.to_ne_bytes());
            record_bytes.extend_from_slice(&(record.size() as u16).to_ne_bytes());
            record.body.copy_to(&mut record_bytes);
            writer.write_record(&record_bytes)?;
            counts.bytes += record_bytes.len() as u64;
            match record.parse(format, &mut scratch) {
                Ok(Record::Sample(_)) => counts.samples += 1,
                Ok(Record::Lost(lost)) => counts.lost += lost.lost,
                Ok(Record::LostSamples { lost, .. }) => counts.lost += lost,
                Ok(Record::Mmap2(mmap)) if mmap.prot & (libc::PROT_EXEC as u32) != 0 => {
                    let build_id = match mmap.file_id {
                        perf_abi::Mmap2FileId::BuildId(id) => Some(id.to_vec()),
                        _ => None,
                    };
                    mappings
                        .entry(String::from_utf8_lossy(mmap.filename).into_owned())
                        .or_insert((mmap.pid as i32, build_id));
                }
                _ => {}
            }
        }
    }
    // A round marker lets perf sort what came before it; empty rounds would only bloat.
    if counts.bytes != before {
        writer.write_finished_round()?;
    }
    Ok(())
}

fn record(
    arguments: &RecordArgs,
    names: &[String],
    sysfs: &Path,
    sampling: Sampling,
    branch_sample_type: u64,
) -> Result<Option<Exit>> {
    let cpus = online_cpus()?;
    let (workload, pid) = start_target(arguments)?;
    let mut base = sampling_options(sampling);
    base.callchain = arguments.call_graph;
    base.branch_sample_type = branch_sample_type;
    // A per-task event that follows the task's children must be opened per CPU to be
    // mmap-able (inherit with cpu=-1 cannot be), so every event is opened on every CPU.
    base.inherit = !arguments.all_cpus;
    base.disabled = true;
    // A task's events start at its exec; CPU-wide events are enabled explicitly.
    base.enable_on_exec = workload.is_some() && !arguments.all_cpus;
    base.sample_id_all = true;
    // Wake the recorder when a ring is a quarter full, not per sample (each wake-up is a
    // poll and a drain); the poll timeout drains the rest regularly anyway.
    base.wakeup = Wakeup::Watermark((arguments.mmap_pages * perf_ring::page_size() / 4) as u32);
    // On an error the workload, dropped, is terminated and reaped.
    let mut opened = open_events(names, sysfs, &base, pid, &cpus, arguments.mmap_pages)?;
    let (mut writer, file) = create_output(&arguments.output, opened.descs.clone())?;
    if !base.enable_on_exec {
        for event in &opened.events {
            event.enable()?;
        }
    }
    let mut counts = Counts::default();
    let mut mappings = BTreeMap::new();
    let exit = run_until_done(arguments, workload, |step| {
        if step == Step::Finish {
            for event in &opened.events {
                let _ = event.disable();
            }
        } else {
            let fds: Vec<_> = opened.events.iter().map(AsFd::as_fd).collect();
            poll_readable(&fds, Some(Duration::from_millis(100)))?;
        }
        drain(
            &mut opened.rings,
            &opened.format,
            &mut writer,
            &mut counts,
            &mut mappings,
            false,
        )?;
        file.flush_round()
    })?;
    finish(writer, &counts, &mappings, &arguments.output, exit)?;
    Ok(exit)
}

/// Ends a recording: the header features (build ids of every executable mapping), the
/// rename of the temporary file into place, and the summary line.
pub(crate) fn finish(
    writer: Writer,
    counts: &Counts,
    mappings: &Mappings,
    output: &Path,
    exit: Option<Exit>,
) -> Result<()> {
    let mut metadata = Metadata::from_host("rvperf", std::env::args().collect());
    for (filename, (pid, build_id)) in mappings {
        let build_id = build_id.clone().or_else(|| {
            // Read in place: the headers and notes, not the whole file.
            std::fs::File::open(filename)
                .ok()
                .and_then(|file| symbolize::ObjectSymbolizer::symbols_only(filename, &file).ok())
                .and_then(|elf| elf.build_id().map(<[u8]>::to_vec))
        });
        if let Some(build_id) = build_id {
            metadata.build_ids.push((
                *pid,
                build_id,
                filename.clone(),
                u16::try_from(b::PERF_RECORD_MISC_USER).unwrap_or(2),
            ));
        }
    }
    let mut inner = writer.finish(&metadata)?;
    inner.flush()?;
    drop(inner);
    let temporary = temporary_output(output);
    crate::output::place_output(&temporary, output).with_context(|| {
        format!(
            "cannot move {} to {}",
            temporary.display(),
            output.display()
        )
    })?;
    let written = std::fs::metadata(output)
        .map(|meta| meta.len())
        .unwrap_or(counts.bytes);
    let truncated = if counts.aux_truncated > 0 {
        format!(", AUX area full {} times", counts.aux_truncated)
    } else {
        String::new()
    };
    eprintln!(
        "[ rvperf record: {} samples, {} lost{truncated}, {} bytes written to {} ]",
        counts.samples,
        counts.lost,
        written,
        output.display()
    );
    match exit {
        Some(Exit::Code(0)) | None => {}
        Some(exit) => eprintln!("rvperf record: the command {exit}"),
    }
    Ok(())
}

/// The workload of `-- CMD` (started, held before its exec) and the pid the events
/// follow: the workload's, `-p`'s, or -1 for CPU-wide recording.
pub(crate) fn start_target(arguments: &RecordArgs) -> Result<(Option<Workload>, i32)> {
    let workload = if arguments.command.is_empty() {
        None
    } else {
        Some(Workload::start(&arguments.command)?)
    };
    // As perf's target rules: -p overrides -a; with -a the command only runs while
    // everything is recorded (its events are not the command's).
    let pid = match (&workload, arguments.pid) {
        (None, Some(pid)) => pid,
        _ if arguments.all_cpus => -1,
        (Some(workload), _) => workload.pid(),
        (None, None) => -1,
    };
    Ok((workload, pid))
}

/// Attr options every recording starts from: the sampling, and the fields each sample
/// carries (ID, so that samples and side-band records name their event in perf.data).
pub(crate) fn sampling_options(sampling: Sampling) -> AttrOptions {
    let mut options = AttrOptions::default();
    options.sampling = sampling;
    options.sample_type = u64::from(
        b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_PERIOD
            | b::PERF_SAMPLE_ID,
    );
    options
}

/// What the recording loop asks of its caller's events.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Wait (at most 100 ms) for data, then drain it.
    Poll,
    /// Disable the events, then drain what is left.
    Finish,
}

/// Releases the workload and records until it exits, the followed process (-p) is
/// gone, or SIGINT/SIGTERM; then finishes and, as perf does, ends a workload that
/// still runs with SIGTERM and reaps it. Returns how the workload ended.
pub(crate) fn run_until_done(
    arguments: &RecordArgs,
    mut workload: Option<Workload>,
    mut step: impl FnMut(Step) -> Result<()>,
) -> Result<Option<Exit>> {
    if let Some(workload) = workload.as_mut() {
        workload.release()?;
    }
    loop {
        step(Step::Poll)?;
        if let Some(workload) = workload.as_mut() {
            if workload.try_wait()?.is_some() {
                break;
            }
        }
        // A followed process (-p) that exits hangs its events up, and poll then returns
        // at once: stop when it is gone (or a zombie) rather than spin.
        if let (None, Some(pid)) = (&workload, arguments.pid) {
            if !process_alive(pid) {
                break;
            }
        }
        if stop_requested().is_some() {
            break;
        }
    }
    step(Step::Finish)?;
    workload.as_mut().map(Workload::terminate).transpose()
}
