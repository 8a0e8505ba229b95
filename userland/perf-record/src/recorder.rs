//! The recording loop: the planned events opened on every online CPU, one ring per
//! CPU (the first event's; the others' records are sent into it), an optional AUX
//! source draining the AUX areas, polled and drained until the target is done, then
//! disabled, drained once more and written out with the header features.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use perf_abi::sys::bindings as b;
use perf_abi::{
    build_attr, expand_groups, parse_event, parse_modifiers, split_modifiers, EventModifier,
    Mmap2FileId, Record, SampleFormat, Wakeup,
};
use perf_data::{BuildIdEntry, EventDesc, Metadata, PerfDataWriter};
use perf_ring::{online_cpus, poll_readable, AuxMode, Event, RingBuffer};

use crate::ctr;
use crate::output::TemporaryOutput;
use crate::plan::{
    quarter_watermark, sampling_options, AuxSource, Counts, CpuRing, Plan, PlannedEvent, Writer,
};
use crate::trace_source;
use crate::vdso::{Vdso, VDSO_NAME};
use crate::{
    AuxData, CallChains, RecordError, RecordOptions, RecordWarning, Recording, Scope, StopFlag,
    Summary, Target, Workload,
};

/// How long the loop waits for a wake-up before it drains anyway.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// What the recorder calls itself in the perf.data header (perf_version).
const RECORDER_NAME: &str = "rvperf";

#[derive(Debug, Clone, PartialEq, Eq)]
struct ExecutableMapping {
    pid: i32,
    build_id: Option<Vec<u8>>,
}

/// The executable mappings seen, by file name.
type Mappings = BTreeMap<String, ExecutableMapping>;

/// Records `options.target` into `options.output`. SIGINT/SIGTERM stop it only if the
/// caller installed `stop`'s handlers. On error nothing is left behind: no output
/// file, no workload (terminated and reaped).
pub fn record(options: &RecordOptions, stop: StopFlag) -> Result<Recording, RecordError> {
    let mut plan = plan(options)?;
    // Everything that can be refused has been checked: only now is the workload
    // started (held before its exec); if an event cannot be opened, dropping it
    // terminates and reaps it.
    let mut workload = options.target.command().map(Workload::start).transpose()?;
    let pid = match (&options.target, &workload) {
        (Target::Command(_), Some(workload)) => workload.pid(),
        (Target::Process(pid), _) => *pid,
        _ => -1,
    };
    let mut opened = open(&plan, pid)?;
    let mut source = plan.aux.take().map(|aux| aux.source);
    let (output, file) = TemporaryOutput::create(&options.output)?;
    let mut writer = PerfDataWriter::new(file.clone(), opened.descs.clone())?;
    if let Some(source) = source.as_deref_mut() {
        source.begin(&mut writer, pid)?;
    }
    // A task's events start at its exec; the others are enabled here.
    if plan
        .events
        .first()
        .is_some_and(|event| event.attr.enable_on_exec() == 0)
    {
        for event in &opened.events {
            event.enable()?;
        }
    }
    let mut state = LoopState::default();
    if let Some(workload) = workload.as_mut() {
        workload.release()?;
    }
    let interval = source
        .as_deref()
        .and_then(AuxSource::poll_interval)
        .map_or(POLL_INTERVAL, |interval| interval.min(POLL_INTERVAL));
    loop {
        let fds: Vec<_> = opened.events.iter().map(AsFd::as_fd).collect();
        poll_readable(&fds, Some(interval))?;
        drain(&mut opened, source.as_deref_mut(), &mut writer, &mut state)?;
        file.flush_round()?;
        if let Some(workload) = workload.as_mut() {
            if workload.try_wait()?.is_some() {
                break;
            }
        }
        // A followed process that exits hangs its events up, and poll then returns at
        // once: stop when it is gone (or a zombie) rather than spin.
        if let Target::Process(pid) = options.target {
            if !process_alive(pid) {
                break;
            }
        }
        if stop.requested().is_some() {
            break;
        }
    }
    for event in &opened.events {
        let _ = event.disable();
    }
    if let Some(source) = source.as_deref_mut() {
        source.events_disabled(&opened.cpus, &opened.events);
    }
    drain(&mut opened, source.as_deref_mut(), &mut writer, &mut state)?;
    file.flush_round()?;
    // As perf does, a workload that still runs is ended with SIGTERM and reaped.
    let workload_exit = workload.as_mut().map(Workload::terminate).transpose()?;
    // An error here leaves no file behind, as every error of a recording does.
    let warnings = match source.as_deref_mut() {
        Some(source) => source.end(&state.counts)?,
        None => Vec::new(),
    };
    for file in source
        .as_deref()
        .map_or(&[][..], |source| source.synthesized_files())
    {
        state
            .mappings
            .entry(file.filename.clone())
            .or_insert(ExecutableMapping {
                pid: i32::try_from(file.pid).unwrap_or(-1),
                build_id: None,
            });
    }
    let mut warnings = warnings;
    let vdso = keep_vdso(options, &state.mappings, &mut warnings);
    let metadata = metadata(&state.mappings, vdso.as_ref(), options.command_line.clone());
    let mut inner = writer.finish(&metadata)?;
    inner
        .flush()
        .map_err(|source| RecordError::WriteOutput { source })?;
    drop(inner);
    drop(file);
    output.commit()?;
    let bytes_written = std::fs::metadata(&options.output)
        .map(|metadata| metadata.len())
        .unwrap_or(state.counts.bytes);
    Ok(Recording {
        workload: workload_exit,
        stop_signal: stop.requested(),
        summary: Summary {
            samples: state.counts.samples,
            lost: state.counts.lost,
            bytes_written,
            aux_truncated: state.counts.aux_truncated,
            throttled: state.counts.throttled,
        },
        warnings,
        trace: source.as_deref().and_then(|source| source.trace_outcome()),
    })
}

/// What the loop keeps between drains.
#[derive(Debug, Default)]
struct LoopState {
    counts: Counts,
    mappings: Mappings,
}

/// The events to open: rvperf_ctr's where it is loaded and asked for (by name, or by
/// a branch stack), else the events as given.
fn plan(options: &RecordOptions) -> Result<Plan, RecordError> {
    if let Some(trace) = &options.trace {
        return trace_source::plan(options, trace);
    }
    let ctr_type = ctr::pmu_type(&options.sysfs);
    let names_ctr = options
        .events
        .iter()
        .any(|name| name.starts_with(perf_abi::ctr::CTR_PMU_NAME));
    match ctr_type {
        Some(ctr_type) if names_ctr || options.branch_sample_type != 0 => {
            ctr::plan(options, ctr_type)
        }
        _ if options.aux_data == AuxData::KeepAsAuxtrace => Err(RecordError::NoAuxToKeep),
        _ => plan_events(options),
    }
}

/// The events as given, each on every CPU: the first one carries the side-band records.
fn plan_events(options: &RecordOptions) -> Result<Plan, RecordError> {
    let cpus = online_cpus()?;
    let names = if options.events.is_empty() {
        vec!["cpu-clock".to_owned()]
    } else {
        options.events.clone()
    };
    let mut base = sampling_options(options);
    base.callchain = options.call_chains == CallChains::Sampled;
    base.branch_sample_type = options.branch_sample_type;
    // A per-task event that follows the task's children must be opened per CPU to be
    // mmap-able (inherit with cpu=-1 cannot be), so every event is opened on every CPU.
    base.inherit = options.target.scope() == Scope::Task;
    base.wakeup = Wakeup::Watermark(quarter_watermark(options.data_pages));
    let mut events = Vec::new();
    for (index, entry) in expand_groups(&names)?.into_iter().enumerate() {
        let split = split_modifiers(&entry.name);
        let spec = parse_event(split.event, &options.sysfs)?;
        let mut attr_options = base.clone();
        for modifier in parse_modifiers(&entry.name, split.modifiers, &EventModifier::ALL)? {
            modifier.apply(&mut attr_options);
        }
        // Side-band records (mmaps, comms, forks) once, from the first event. The
        // kernel reports executable mappings only with `mmap` set; `mmap2` only
        // chooses the richer record format (inode or build id), as perf sets both.
        let tracks = index == 0;
        attr_options.mmap = tracks;
        attr_options.mmap2 = tracks;
        attr_options.comm = tracks;
        attr_options.task = tracks;
        if entry.group_leader.is_some() {
            // Group members start and stop with their leader.
            attr_options.disabled = false;
            attr_options.enable_on_exec = false;
        }
        let attr = build_attr(&spec, &attr_options);
        // perf.data gets the attr that was opened: `perf evlist -v` shows what ran.
        events.push(PlannedEvent {
            name: entry.name.clone(),
            attr,
            header_name: entry.name,
            header_attr: attr,
            group_leader: entry.group_leader,
        });
    }
    Ok(Plan {
        events,
        cpus,
        data_pages: options.data_pages,
        aux: None,
    })
}

/// The opened events of a recording.
struct Opened {
    /// Every event on every CPU.
    events: Vec<Event>,
    /// One ring per CPU.
    cpus: Vec<CpuRing>,
    /// The events as perf.data presents them, with their ids.
    descs: Vec<EventDesc>,
    /// The layout of the samples in the rings.
    format: SampleFormat,
}

/// Opens each planned event for `pid` on every CPU; the first one's ring (and AUX
/// area) per CPU receives the others' records.
fn open(plan: &Plan, pid: i32) -> Result<Opened, RecordError> {
    let format = SampleFormat::from_attr(&plan.events.first().ok_or(RecordError::NoEvent)?.attr);
    let mut events: Vec<Event> = Vec::new();
    let mut cpus: Vec<CpuRing> = Vec::new();
    let mut descs = Vec::new();
    // events[placed[event index][cpu slot]] is that event on that CPU.
    let mut placed: Vec<Vec<usize>> = Vec::new();
    for (index, planned) in plan.events.iter().enumerate() {
        let mut ids = Vec::new();
        let mut here = Vec::new();
        for (slot, &cpu) in plan.cpus.iter().enumerate() {
            let leader = planned
                .group_leader
                .map(|leader| &events[placed[leader][slot]]);
            let cpu_number = i32::try_from(cpu).unwrap_or(i32::MAX);
            let event = Event::open(&planned.name, &planned.attr, pid, cpu_number, leader, 0)?;
            let id = event.id()?;
            ids.push(id);
            if index == 0 {
                let mut ring = RingBuffer::new(&event, plan.data_pages).map_err(|source| {
                    RecordError::MapRing {
                        event: planned.name.clone(),
                        source,
                    }
                })?;
                if let Some(aux) = plan.aux.as_ref().filter(|aux| aux.pages > 0) {
                    ring.map_aux(aux.pages, AuxMode::Consume)
                        .map_err(|source| RecordError::MapAux {
                            event: planned.name.clone(),
                            source,
                        })?;
                }
                cpus.push(CpuRing {
                    cpu,
                    ring,
                    event: events.len(),
                    id,
                });
            } else {
                event.set_output(&events[cpus[slot].event])?;
            }
            here.push(events.len());
            events.push(event);
        }
        placed.push(here);
        descs.push(EventDesc {
            attr: planned.header_attr,
            name: planned.header_name.clone(),
            ids,
        });
    }
    Ok(Opened {
        events,
        cpus,
        descs,
        format,
    })
}

/// One round: the data rings, then the AUX source. A full AUX area disables the event
/// in the kernel; once drained, the events are enabled again, so a burst costs
/// samples (counted), never the recording.
fn drain(
    opened: &mut Opened,
    source: Option<&mut (dyn AuxSource + 'static)>,
    writer: &mut Writer,
    state: &mut LoopState,
) -> Result<(), RecordError> {
    let aux_bookkeeping = match source {
        Some(_) => AuxBookkeeping::Consume,
        None => AuxBookkeeping::Copy,
    };
    let truncated_before = state.counts.aux_truncated;
    drain_rings(
        &mut opened.cpus,
        &opened.format,
        writer,
        state,
        aux_bookkeeping,
    )?;
    if let Some(source) = source {
        source.drain(&mut opened.cpus, writer, &mut state.counts)?;
        if state.counts.aux_truncated != truncated_before {
            for event in &opened.events {
                let _ = event.enable();
            }
        }
    }
    Ok(())
}

/// What becomes of the AUX bookkeeping records (PERF_RECORD_AUX, ITRACE_START).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuxBookkeeping {
    /// Written as they are.
    Copy,
    /// Counted (full AUX areas) but not written: the AUX data they describe is
    /// turned into ordinary records instead.
    Consume,
}

/// Copies what the data rings hold into the perf.data, then a round marker.
fn drain_rings(
    cpus: &mut [CpuRing],
    format: &SampleFormat,
    writer: &mut Writer,
    state: &mut LoopState,
    aux_bookkeeping: AuxBookkeeping,
) -> Result<(), RecordError> {
    let mut record_bytes = Vec::with_capacity(4096);
    let mut scratch = Vec::new();
    let counts = &mut state.counts;
    let before = counts.bytes;
    for cpu in cpus.iter_mut() {
        let mut batch = cpu.ring.read();
        while let Some(record) = batch.next_record()? {
            let is_bookkeeping = record.record_type == b::PERF_RECORD_AUX
                || record.record_type == b::PERF_RECORD_ITRACE_START;
            if aux_bookkeeping == AuxBookkeeping::Consume && is_bookkeeping {
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
            // The ring's reader checked the size against the header's u16.
            let size = u16::try_from(record.size()).unwrap_or(u16::MAX);
            record_bytes.extend_from_slice(&size.to_ne_bytes());
            record.body.copy_to(&mut record_bytes);
            writer.write_record(&record_bytes)?;
            counts.bytes += record_bytes.len() as u64;
            match record.parse(format, &mut scratch) {
                Ok(Record::Sample(_)) => counts.samples += 1,
                Ok(Record::Lost(lost)) => counts.lost = counts.lost.saturating_add(lost.lost),
                Ok(Record::LostSamples { lost, .. }) => {
                    counts.lost = counts.lost.saturating_add(lost);
                }
                Ok(Record::Mmap2(mmap)) if mmap.prot & (libc::PROT_EXEC as u32) != 0 => {
                    let build_id = match mmap.file_id {
                        // A mapping of no file (the vDSO) has an empty one.
                        Mmap2FileId::BuildId(id) if !id.is_empty() => Some(id.to_vec()),
                        _ => None,
                    };
                    state
                        .mappings
                        .entry(String::from_utf8_lossy(mmap.filename).into_owned())
                        .or_insert(ExecutableMapping {
                            // The pid field is the kernel's u32 of a pid_t.
                            pid: mmap.pid as i32,
                            build_id,
                        });
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

/// A copy of the vDSO in `options.vdso_cache` when a recorded process mapped it; what
/// went wrong is a warning (the recording holds everything else).
fn keep_vdso(
    options: &RecordOptions,
    mappings: &Mappings,
    warnings: &mut Vec<RecordWarning>,
) -> Option<Vdso> {
    let directory = options.vdso_cache.as_ref()?;
    if !mappings.contains_key(VDSO_NAME) {
        return None;
    }
    let Some(vdso) = Vdso::of_process(Path::new("/proc/self")) else {
        warnings.push(RecordWarning::VdsoNotKept {
            reason: "this process's vDSO has no build id, or could not be read".to_owned(),
        });
        return None;
    };
    if let Err(error) = vdso.cache(directory) {
        warnings.push(RecordWarning::VdsoNotKept {
            reason: format!("{}: {error}", directory.display()),
        });
    }
    Some(vdso)
}

/// The header features: the host, the command line, and the build id of every
/// executable mapping (from MMAP2, else read from the file; the vDSO's from its copy).
fn metadata(mappings: &Mappings, vdso: Option<&Vdso>, command_line: Vec<String>) -> Metadata {
    let mut metadata = Metadata::from_host(RECORDER_NAME, command_line);
    for (filename, mapping) in mappings {
        let vdso_id = vdso
            .filter(|_| filename == VDSO_NAME)
            .map(|vdso| vdso.build_id.clone());
        let build_id = mapping.build_id.clone().or(vdso_id).or_else(|| {
            // Read in place: the headers and notes, not the whole file.
            std::fs::File::open(filename)
                .ok()
                .and_then(|file| symbolize::ObjectSymbolizer::symbols_only(filename, &file).ok())
                .and_then(|elf| elf.build_id().map(<[u8]>::to_vec))
        });
        if let Some(build_id) = build_id {
            metadata.build_ids.push(BuildIdEntry {
                pid: mapping.pid,
                misc: u16::try_from(b::PERF_RECORD_MISC_USER).unwrap_or(2),
                build_id,
                filename: filename.clone(),
            });
        }
    }
    metadata
}

/// Whether `pid` still runs: gone or a zombie (exited, not yet reaped by its parent)
/// both mean its events will produce nothing more.
fn process_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    process_state_running(&stat)
}

/// Whether a `/proc/PID/stat` line is of a process that still runs.
fn process_state_running(stat: &str) -> bool {
    // The state follows the parenthesised command name, which may itself contain ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_or_a_dead_process_is_not_running() {
        assert!(process_state_running("42 (sh) S 1 42 42"));
        assert!(process_state_running("42 (a) b) R 1"));
        assert!(!process_state_running("42 (sh) Z 1 42 42"));
        assert!(!process_state_running("42 (sh) X 1"));
        assert!(!process_state_running("garbage"));
        assert!(process_alive(std::process::id() as i32));
    }

    #[test]
    fn plain_events_are_planned_with_groups_modifiers_and_one_tracking_event() {
        let sysfs = tempfile::tempdir().unwrap();
        let options = RecordOptions {
            events: vec!["{cpu-clock,task-clock}:up".to_owned(), "cycles".to_owned()],
            target: Target::Command(vec!["true".to_owned()]),
            sysfs: sysfs.path().to_owned(),
            data_pages: 16,
            ..RecordOptions::default()
        };
        let plan = plan(&options).unwrap();
        assert!(plan.aux.is_none());
        let names: Vec<_> = plan
            .events
            .iter()
            .map(|event| event.name.as_str())
            .collect();
        assert_eq!(names, ["cpu-clock:up", "task-clock:up", "cycles"]);
        let leaders: Vec<_> = plan.events.iter().map(|event| event.group_leader).collect();
        assert_eq!(leaders, [None, Some(0), None]);
        let [leader, member, cycles] = &plan.events[..] else {
            panic!("three events");
        };
        // The first event tracks mappings, comms and tasks; it starts at the exec.
        assert_eq!(
            (leader.attr.mmap(), leader.attr.mmap2(), leader.attr.comm()),
            (1, 1, 1)
        );
        assert_eq!((cycles.attr.mmap(), cycles.attr.comm()), (0, 0));
        assert_eq!(
            (leader.attr.enable_on_exec(), leader.attr.disabled()),
            (1, 1)
        );
        // A member starts with its leader.
        assert_eq!(
            (member.attr.enable_on_exec(), member.attr.disabled()),
            (0, 0)
        );
        assert_eq!(
            (
                member.attr.exclude_kernel(),
                member.attr.precise_ip(),
                member.attr.inherit()
            ),
            (1, 1, 1)
        );
        assert_eq!(cycles.attr.wakeup_watermark, quarter_watermark(16));
        // perf.data holds the attr that was opened.
        assert_eq!(
            perf_abi::attr_bytes(&member.header_attr),
            perf_abi::attr_bytes(&member.attr)
        );
    }

    #[test]
    fn system_wide_events_are_not_inherited_and_are_enabled_explicitly() {
        let sysfs = tempfile::tempdir().unwrap();
        let options = RecordOptions {
            target: Target::SystemWhileCommand(vec!["true".to_owned()]),
            sysfs: sysfs.path().to_owned(),
            ..RecordOptions::default()
        };
        let plan = plan(&options).unwrap();
        let [event] = &plan.events[..] else {
            panic!("one default event");
        };
        assert_eq!(event.name, "cpu-clock");
        assert_eq!((event.attr.inherit(), event.attr.enable_on_exec()), (0, 0));
    }

    #[test]
    fn keeping_aux_data_without_an_aux_source_is_refused() {
        let sysfs = tempfile::tempdir().unwrap();
        let options = RecordOptions {
            aux_data: AuxData::KeepAsAuxtrace,
            sysfs: sysfs.path().to_owned(),
            ..RecordOptions::default()
        };
        assert!(matches!(plan(&options), Err(RecordError::NoAuxToKeep)));
    }

    #[test]
    fn an_unknown_modifier_is_refused_with_the_event_named() {
        let sysfs = tempfile::tempdir().unwrap();
        let options = RecordOptions {
            events: vec!["cycles:x".to_owned()],
            sysfs: sysfs.path().to_owned(),
            ..RecordOptions::default()
        };
        let error = plan(&options).err().unwrap();
        assert_eq!(
            error.to_string(),
            "event cycles:x: unknown modifier 'x' (known: u, k, p)"
        );
    }
}
