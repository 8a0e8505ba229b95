//! `rvperf record -b / -j` on RISC-V: branch stacks from the `rvperf_ctr` PMU
//! (kmod-shim/rvperf_ctr), which delivers one record per sample through the AUX area.
//! Each record becomes an ordinary PERF_RECORD_SAMPLE with PERF_SAMPLE_BRANCH_STACK,
//! written under the attr of the sampling event that triggered it (cycles, ...), so
//! that Linux perf and every perf.data reader see a normal branch-stack recording.
//! What a recording misses is said: a record at which perf throttled the trigger is
//! followed by the PERF_RECORD_THROTTLE the kernel would have written for the trigger,
//! and the events' enabled and running times tell how long the trigger held no
//! hardware counter (the module does not schedule the event then).

use std::io::{Seek, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use perf_abi::ctr::{
    CtrRecord, CtrRecords, CTR_PMU_NAME, CTR_TRIGGER_HARDWARE, CTR_TRIGGER_HW_CACHE,
    CTR_TRIGGER_RAW,
};
use perf_abi::sys::bindings::{self as b, perf_event_attr};
use perf_abi::{
    build_attr, parse_event, parse_read_values, EventSpec, Sample, SampleFormat, SampleId,
    Sampling, ThrottleRecord, Wakeup,
};
use perf_data::{AuxtraceChunk, EventDesc, PerfDataWriter, WriteError};
use perf_ring::{online_cpus, poll_readable, AuxMode, Event, RingBuffer};

use crate::record::{
    create_output, drain, finish, run_until_done, sampling_options, split_modifiers, start_target,
    Counts, Mappings, RecordArgs, Step, Writer,
};
use crate::workload::Exit;

/// The dynamic PMU type of rvperf_ctr, when the module is loaded.
pub fn ctr_pmu_type(sysfs: &Path) -> Option<u32> {
    let path = sysfs
        .join("bus/event_source/devices")
        .join(CTR_PMU_NAME)
        .join("type");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The rvperf_ctr event for a requested sampling event, and the attr type and config
/// of the trigger, under which perf.data presents the samples.
fn ctr_event(spec: &EventSpec, ctr_type: u32) -> Result<(EventSpec, u32, u64)> {
    if spec.pmu_type == ctr_type {
        let trigger_type = match spec.config1 {
            CTR_TRIGGER_HARDWARE => b::PERF_TYPE_HARDWARE,
            CTR_TRIGGER_HW_CACHE => b::PERF_TYPE_HW_CACHE,
            CTR_TRIGGER_RAW => b::PERF_TYPE_RAW,
            other => bail!("event {}: unknown rvperf_ctr trigger {other}", spec.name),
        };
        return Ok((spec.clone(), trigger_type, spec.config));
    }
    let trigger = match spec.pmu_type {
        b::PERF_TYPE_HARDWARE => CTR_TRIGGER_HARDWARE,
        b::PERF_TYPE_HW_CACHE => CTR_TRIGGER_HW_CACHE,
        b::PERF_TYPE_RAW => CTR_TRIGGER_RAW,
        _ => bail!(
            "event {} cannot trigger CTR branch stacks: rvperf_ctr samples on hardware, \
             cache or raw SBI PMU events (cycles, instructions, rNNNN)",
            spec.name
        ),
    };
    let ctr = EventSpec {
        name: spec.name.clone(),
        pmu_type: ctr_type,
        config: spec.config,
        config1: trigger,
        config2: 0,
    };
    Ok((ctr, spec.pmu_type, spec.config))
}

fn privileged() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Data and AUX pages per CPU. Root gets `data_pages` (-m) and `aux_pages`; anyone
/// else what fits perf_event_mlock_kb across all CPUs (the kernel refuses larger
/// mappings with EPERM), keeping the AUX area the larger part.
fn ring_sizes(data_pages: usize, aux_pages: usize, cpus: usize) -> (usize, usize) {
    if privileged() {
        return (data_pages, aux_pages);
    }
    let budget_kb: usize = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(516);
    let budget = budget_kb * 1024 / perf_ring::page_size() / cpus.max(1);
    let floor_pow2 = |n: usize| {
        if n == 0 {
            1
        } else {
            1 << (usize::BITS - 1 - n.leading_zeros())
        }
    };
    // Each ring also maps one metadata page.
    let data = floor_pow2(budget / 4).clamp(1, data_pages);
    let aux = floor_pow2(budget.saturating_sub(data + 1)).min(aux_pages);
    (data, aux.max(1))
}

struct CpuEvent {
    event: Event,
    ring: RingBuffer,
    id: u64,
    cpu: u32,
}

pub fn record(
    arguments: &RecordArgs,
    names: &[String],
    sysfs: &Path,
    sampling: Sampling,
    branch_sample_type: u64,
    ctr_type: u32,
) -> Result<Option<Exit>> {
    let [name] = names else {
        bail!(
            "rvperf_ctr records one sampling event at a time (CTR is one per hart); got {names:?}"
        );
    };
    if arguments.call_graph {
        bail!("-g: rvperf_ctr records branch stacks, not callchains; -j call_stack gives CTR's call stacks");
    }
    let (event_name, modifiers) = split_modifiers(name);
    let spec = parse_event(event_name, sysfs)?;
    let (ctr_spec, trigger_type, trigger_config) = ctr_event(&spec, ctr_type)?;

    let cpus = online_cpus()?;
    if !arguments.aux_pages.is_power_of_two() {
        bail!(
            "--aux-pages {}: must be a power of two",
            arguments.aux_pages
        );
    }

    let mut options = sampling_options(sampling);
    options.branch_sample_type = if branch_sample_type == 0 {
        perf_abi::DASH_B_BRANCH_FILTER
    } else {
        branch_sample_type
    };
    for modifier in modifiers.chars() {
        match modifier {
            'u' => options.exclude_kernel = true,
            'k' => options.exclude_user = true,
            other => bail!("event {name}: unknown modifier {other:?} (known: u, k)"),
        }
    }
    // User-mode branches only: the trigger need not count in the kernel either, and
    // an unprivileged user may then record at perf_event_paranoid=2 (as perf does).
    let privilege = u64::from(
        b::PERF_SAMPLE_BRANCH_USER | b::PERF_SAMPLE_BRANCH_KERNEL | b::PERF_SAMPLE_BRANCH_HV,
    );
    if options.branch_sample_type & privilege == u64::from(b::PERF_SAMPLE_BRANCH_USER)
        || (modifiers.is_empty() && !privileged())
    {
        options.exclude_kernel = true;
    }
    // The module cannot follow forks (its trigger counter is created per event), so
    // per-task events are opened on every CPU without inherit, which is mmap-able.
    options.inherit = false;
    options.disabled = true;
    options.enable_on_exec = !arguments.command.is_empty() && !arguments.all_cpus;
    options.sample_id_all = true;
    options.mmap = true;
    options.mmap2 = true;
    options.comm = true;
    options.task = true;
    // The default 512 pages (2 MiB) hold 2,500 samples of a 32-entry CTR, 340 of a
    // 256-entry one; rvperf is woken at each quarter. An unprivileged user's mappings
    // count against perf_event_mlock_kb, so they get what fits in it.
    let (data_pages, aux_pages) = ring_sizes(arguments.mmap_pages, arguments.aux_pages, cpus.len());
    options.wakeup = Wakeup::Watermark((data_pages * perf_ring::page_size() / 4) as u32);
    options.aux_watermark = (aux_pages * perf_ring::page_size() / 4) as u32;
    // The module does not schedule the event while its trigger holds no hardware
    // counter (taken by pinned events, say): the event's running time then falls
    // behind its enabled time, which is how rvperf learns what was not recorded.
    options.read_format |=
        u64::from(b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING);
    let mut attr = build_attr(&ctr_spec, &options);
    // As perf's modifiers do: `:u` and `:k` exclude the hypervisor (M-mode) too, which
    // rvperf_ctr accepts (S-mode CTR never records M-mode).
    if !modifiers.is_empty() {
        attr.set_exclude_hv(1);
    }
    let format = SampleFormat::from_attr(&attr);

    // Everything that can be refused has been checked: only now is the workload
    // started (held before its exec); if an event cannot be opened, dropping it
    // terminates and reaps it.
    let (workload, pid) = start_target(arguments)?;

    let mut opened = Vec::new();
    for &cpu in &cpus {
        let opened_cpu = (|| -> Result<CpuEvent> {
            let event = Event::open(name, &attr, pid, cpu as i32, None, 0)?;
            let mut ring = RingBuffer::new(&event, data_pages)
                .with_context(|| format!("cannot map the ring buffer of {name}"))?;
            ring.map_aux(aux_pages, AuxMode::Consume)
                .with_context(|| format!("cannot map the AUX area of {name}"))?;
            let id = event.id()?;
            Ok(CpuEvent {
                event,
                ring,
                id,
                cpu,
            })
        })();
        opened.push(opened_cpu?);
    }

    let desc = EventDesc {
        attr: trigger_attr(&attr, trigger_type, trigger_config),
        name: event_name.to_owned(),
        ids: opened.iter().map(|cpu| cpu.id).collect(),
    };
    let (mut writer, file) = create_output(&arguments.output, vec![desc])?;
    let keep_aux = arguments.keep_aux.then_some(pid);
    if keep_aux.is_some() {
        writer.write_auxtrace_info(
            perf_abi::ctr::RVPERF_AUXTRACE_CTR,
            &[u64::from(ctr_type), u64::from(trigger_type), trigger_config],
        )?;
    }
    if !options.enable_on_exec {
        for cpu in &opened {
            cpu.event.enable()?;
        }
    }
    let mut counts = Counts::default();
    let mut mappings = Mappings::new();
    let mut times = None;
    let exit = run_until_done(arguments, workload, |step| {
        if step == Step::Finish {
            for cpu in &opened {
                let _ = cpu.event.disable();
            }
            // Disabled, the events' times no longer change.
            times = Some(read_times(&opened, attr.read_format));
        } else {
            let fds: Vec<_> = opened.iter().map(|cpu| cpu.event.as_fd()).collect();
            poll_readable(&fds, Some(Duration::from_millis(100)))?;
        }
        drain_all(
            &mut opened,
            &format,
            &mut writer,
            &mut counts,
            &mut mappings,
            keep_aux,
        )?;
        file.flush_round()
    })?;
    // An error here leaves no file behind, as every error of a recording does.
    let coverage = match times {
        Some(Ok(times)) => ctr_coverage(&times, pid != -1),
        Some(Err(error)) => {
            eprintln!(
                "rvperf record: warning: cannot tell how long rvperf_ctr recorded: {error:#}"
            );
            CtrCoverage::NotEnabled
        }
        None => CtrCoverage::NotEnabled,
    };
    if coverage == CtrCoverage::NeverRunning {
        bail!(
            "rvperf_ctr: the trigger event {name} never got a hardware counter (the SBI \
             PMU's counters that can count it were all taken, e.g. by pinned events); \
             nothing was recorded"
        );
    }
    finish(writer, &counts, &mappings, &arguments.output, exit)?;
    if let CtrCoverage::Share(share) = coverage {
        if share < MINIMUM_COVERAGE {
            eprintln!(
                "rvperf record: warning: rvperf_ctr recorded during only {:.1}% of the time \
                 the event was enabled: its trigger could not always get a hardware counter",
                share * 100.0
            );
        }
    }
    if counts.throttled > 0 {
        eprintln!("{}", throttle_warning("rvperf record", counts.throttled));
    }
    Ok(exit)
}

/// The attr perf.data presents the samples under: the rvperf_ctr attr that was opened,
/// under the trigger's identity (cycles, ...), which is what the samples sample and
/// what perf knows: the trigger's type and config, and no config1, which holds
/// rvperf_ctr's trigger-type selector and means nothing for the trigger's type.
/// Everything else (sampling, sample_type, read_format, branch_sample_type, the flags)
/// is as opened.
fn trigger_attr(
    opened: &perf_event_attr,
    trigger_type: u32,
    trigger_config: u64,
) -> perf_event_attr {
    let mut attr = *opened;
    attr.type_ = trigger_type;
    attr.config = trigger_config;
    attr.config1 = 0;
    attr
}

/// Below this share of its enabled time recorded, a recording says it has gaps. Not 1:
/// scheduling an event in and out takes a moment of enabled time, and the CPU events
/// are read one after another, so a complete recording can read a hair under it.
const MINIMUM_COVERAGE: f64 = 0.99;

/// One CPU event's times from read(2) (`PERF_FORMAT_TOTAL_TIME_*`), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CounterTimes {
    /// While the event was enabled (and, per task, its task ran somewhere).
    enabled: u64,
    /// While the event was scheduled on its CPU: its trigger counted.
    running: u64,
}

/// How much of the time the CTR events were enabled they recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CtrCoverage {
    /// Never enabled (nothing ran): nothing to judge.
    NotEnabled,
    /// Enabled, never scheduled: the trigger never got a hardware counter.
    NeverRunning,
    /// Running time over enabled time, 0 (exclusive) to 1.
    Share(f64),
}

/// The coverage of the CPU events of one recording. Per task (`per_task`: one event per
/// CPU, all for the same task), each event is enabled whenever the task runs, on any
/// CPU, but runs only while the task is on its own CPU: the task's time is the largest
/// enabled time, and the running times add up to it when nothing was refused.
/// System-wide, each CPU's event is enabled for the whole recording on its CPU: the
/// running times over the enabled times, summed.
fn ctr_coverage(times: &[CounterTimes], per_task: bool) -> CtrCoverage {
    let running: u128 = times.iter().map(|time| u128::from(time.running)).sum();
    let enabled: u128 = if per_task {
        times
            .iter()
            .map(|time| u128::from(time.enabled))
            .max()
            .unwrap_or(0)
    } else {
        times.iter().map(|time| u128::from(time.enabled)).sum()
    };
    if enabled == 0 {
        CtrCoverage::NotEnabled
    } else if running == 0 {
        CtrCoverage::NeverRunning
    } else {
        // The times are read one event after another: clamp what rounding adds.
        CtrCoverage::Share((running as f64 / enabled as f64).min(1.0))
    }
}

/// Each CPU event's enabled and running times, as read(2) gives them for `read_format`.
fn read_times(opened: &[CpuEvent], read_format: u64) -> Result<Vec<CounterTimes>> {
    let mut buffer = [0u8; 64];
    opened
        .iter()
        .map(|cpu| {
            let length = cpu.event.read_counter(&mut buffer)?;
            let values = parse_read_values(&buffer[..length], read_format)
                .with_context(|| format!("the counter of CPU event {}", cpu.id))?;
            match (values.time_enabled, values.time_running) {
                (Some(enabled), Some(running)) => Ok(CounterTimes { enabled, running }),
                _ => bail!("the CPU event {} was opened without its times", cpu.id),
            }
        })
        .collect()
}

/// The warning of a recording (or an injection) whose trigger was throttled.
pub(crate) fn throttle_warning(command: &str, throttled: u64) -> String {
    format!(
        "{command}: warning: the rvperf_ctr trigger was throttled {throttled} times \
         (kernel.perf_event_max_sample_rate); samples are missing after each"
    )
}

/// Side-band records first (so a sample's mapping precedes it), then each CPU's AUX
/// records as samples, or with `keep_aux` (the recorded pid, -1 for all) as AUXTRACE
/// chunks. A full AUX area disables the event in the kernel; once drained, it is
/// enabled again, so a burst costs samples (counted), never the recording.
fn drain_all(
    opened: &mut [CpuEvent],
    format: &SampleFormat,
    writer: &mut Writer,
    counts: &mut Counts,
    mappings: &mut Mappings,
    keep_aux: Option<i32>,
) -> Result<()> {
    let truncated_before = counts.aux_truncated;
    for cpu in opened.iter_mut() {
        drain(
            std::slice::from_mut(&mut cpu.ring),
            format,
            writer,
            counts,
            mappings,
            true,
        )?;
    }
    let mut scratch = Vec::new();
    let mut wrote = false;
    for (index, cpu) in opened.iter_mut().enumerate() {
        let Some(chunk) = cpu.ring.read_aux() else {
            continue;
        };
        let bytes = chunk.data().contiguous(&mut scratch);
        let mut records = CtrRecords::new(bytes);
        if let Some(pid) = keep_aux {
            if bytes.is_empty() {
                continue;
            }
            // Still parsed, to count samples and to refuse a stream rvperf could not read.
            while let Some(record) = records
                .next_record()
                .with_context(|| format!("rvperf_ctr AUX data of CPU event {}", cpu.id))?
            {
                counts.samples += 1;
                // `rvperf inject` writes the THROTTLE records of kept data.
                counts.throttled += u64::from(record.is_throttled());
            }
            writer.write_auxtrace(&AuxtraceChunk {
                offset: chunk.head - bytes.len() as u64,
                reference: 0,
                idx: index as u32,
                tid: pid as u32,
                cpu: cpu.cpu,
                data: bytes,
            })?;
            wrote = true;
            continue;
        }
        while let Some(record) = records
            .next_record()
            .with_context(|| format!("rvperf_ctr AUX data of CPU event {}", cpu.id))?
        {
            writer.write_sample(0, &ctr_sample(&record, cpu.id))?;
            counts.samples += 1;
            if let Some(throttle) = ctr_throttle(&record, cpu.id) {
                write_ctr_throttle(writer, &throttle)?;
                counts.throttled += 1;
            }
            wrote = true;
        }
        drop(chunk);
    }
    if wrote {
        writer.write_finished_round()?;
    }
    if counts.aux_truncated != truncated_before {
        for cpu in opened.iter() {
            let _ = cpu.event.enable();
        }
    }
    Ok(())
}

/// A record as the SAMPLE a recording writes for it under the CPU event `id` (of the
/// triggering event's attr): what `rvperf record` writes, what `rvperf inject` writes
/// for kept AUX data and what `rvperf script` reads kept AUX data as.
pub(crate) fn ctr_sample<'a>(record: &CtrRecord<'a>, id: u64) -> Sample<'a> {
    let misc = if record.is_kernel() {
        b::PERF_RECORD_MISC_KERNEL
    } else {
        b::PERF_RECORD_MISC_USER
    };
    Sample {
        ip: Some(record.header.ip),
        pid: Some(record.header.pid),
        tid: Some(record.header.tid),
        time: Some(record.header.time),
        id: Some(id),
        cpu: Some(record.header.cpu),
        period: Some(record.header.period),
        // Newest first, no hw_idx: the record's own entries.
        branch_stack: Some(record.branch_stack()),
        misc: misc as u16,
        ..Sample::default()
    }
}

/// When perf throttled the trigger at a record: the PERF_RECORD_THROTTLE that follows
/// its sample (for the CPU event `id`, at the sample's time), as the kernel writes one
/// for an event it throttles. `rvperf record` and `rvperf inject` write it with
/// [`write_ctr_throttle`].
pub(crate) fn ctr_throttle(record: &CtrRecord<'_>, id: u64) -> Option<ThrottleRecord> {
    let time = record.header.time;
    // The event that counted: the event itself, as nothing is inherited.
    let stream_id = id;
    record.is_throttled().then_some(ThrottleRecord {
        time,
        id,
        stream_id,
        sample_id: SampleId {
            pid: Some(record.header.pid),
            tid: Some(record.header.tid),
            time: Some(time),
            id: Some(id),
            stream_id: Some(stream_id),
            cpu: Some(record.header.cpu),
        },
    })
}

/// Writes the PERF_RECORD_THROTTLE of [`ctr_throttle`] under the triggering event's attr.
pub(crate) fn write_ctr_throttle<W: Write + Seek>(
    writer: &mut PerfDataWriter<W>,
    throttle: &ThrottleRecord,
) -> Result<(), WriteError> {
    writer.write_throttle(0, throttle)
}

#[cfg(test)]
mod tests {
    use perf_abi::ctr::{encode_ctr_record, CtrRecordHeader, CTR_RECORD_THROTTLED};

    use super::*;

    fn times(pairs: &[(u64, u64)]) -> Vec<CounterTimes> {
        pairs
            .iter()
            .map(|&(enabled, running)| CounterTimes { enabled, running })
            .collect()
    }

    #[test]
    fn samples_are_written_under_the_trigger_s_type_and_config() {
        let ctr = EventSpec {
            name: "rvperf_ctr/event=0x2,trigger=1/".into(),
            pmu_type: 42,
            config: 2,
            config1: CTR_TRIGGER_HARDWARE,
            config2: 7,
        };
        let mut options = sampling_options(Sampling::Period(20_000));
        options.branch_sample_type = perf_abi::DASH_B_BRANCH_FILTER;
        options.exclude_kernel = true;
        options.aux_watermark = 4096;
        let mut opened = build_attr(&ctr, &options);
        opened.set_exclude_hv(1);
        let written = trigger_attr(&opened, b::PERF_TYPE_HARDWARE, 2);
        assert_eq!(
            (written.type_, written.config, written.config1),
            (b::PERF_TYPE_HARDWARE, 2, 0)
        );
        // The rest is the opened attr's, byte for byte.
        let (opened_bytes, written_bytes) = (
            perf_abi::attr_bytes(&opened),
            perf_abi::attr_bytes(&written),
        );
        let identity = [0..4, 8..16, 56..64];
        for at in 0..opened_bytes.len() {
            if !identity.iter().any(|range| range.contains(&at)) {
                assert_eq!(written_bytes[at], opened_bytes[at], "byte {at}");
            }
        }
        assert_eq!((written.exclude_hv(), written.config2), (1, 7));
    }

    #[test]
    fn per_task_coverage_is_the_running_times_over_the_task_s_time() {
        // The task ran 1000 ns: 600 on CPU 0, 400 on CPU 1; each CPU's event was
        // enabled all 1000 (a few ns apart, as the reads are).
        let complete = times(&[(1000, 600), (998, 400)]);
        assert_eq!(ctr_coverage(&complete, true), CtrCoverage::Share(1.0));
        let refused = times(&[(1000, 300), (1000, 200)]);
        assert_eq!(ctr_coverage(&refused, true), CtrCoverage::Share(0.5));
        // Read a hair apart, the sum may pass the largest enabled time.
        let rounding = times(&[(1000, 600), (1000, 401)]);
        assert_eq!(ctr_coverage(&rounding, true), CtrCoverage::Share(1.0));
    }

    #[test]
    fn system_wide_coverage_sums_both_times() {
        // Each CPU's event is enabled for the whole recording on its own CPU.
        let complete = times(&[(1000, 1000), (1000, 1000)]);
        assert_eq!(ctr_coverage(&complete, false), CtrCoverage::Share(1.0));
        let half_refused = times(&[(1000, 1000), (1000, 0)]);
        assert_eq!(ctr_coverage(&half_refused, false), CtrCoverage::Share(0.5));
        // The same times per task would be a complete recording.
        assert_eq!(ctr_coverage(&half_refused, true), CtrCoverage::Share(1.0));
    }

    #[test]
    fn enabled_but_never_running_is_told_apart_from_never_enabled() {
        let never_running = times(&[(1000, 0), (1000, 0)]);
        assert_eq!(
            ctr_coverage(&never_running, true),
            CtrCoverage::NeverRunning
        );
        assert_eq!(
            ctr_coverage(&never_running, false),
            CtrCoverage::NeverRunning
        );
        // A workload that never ran (or no event at all): nothing to judge.
        let never_enabled = times(&[(0, 0), (0, 0)]);
        assert_eq!(ctr_coverage(&never_enabled, true), CtrCoverage::NotEnabled);
        assert_eq!(ctr_coverage(&never_enabled, false), CtrCoverage::NotEnabled);
        assert_eq!(ctr_coverage(&[], true), CtrCoverage::NotEnabled);
    }

    #[test]
    fn a_throttled_record_gets_a_throttle_record_at_its_sample() {
        let header = CtrRecordHeader {
            flags: CTR_RECORD_THROTTLED,
            cpu: 3,
            pid: 40,
            tid: 41,
            time: 5_000,
            ip: 0x1000,
            period: 100,
            ..CtrRecordHeader::default()
        };
        let bytes = encode_ctr_record(&header, &[]);
        let record = CtrRecords::new(&bytes).next_record().unwrap().unwrap();
        let sample = ctr_sample(&record, 9);
        let throttle = ctr_throttle(&record, 9).unwrap();
        assert_eq!(
            throttle.sample_id,
            SampleId {
                pid: Some(40),
                tid: Some(41),
                time: sample.time,
                id: Some(9),
                stream_id: Some(9),
                cpu: Some(3),
            }
        );
        assert_eq!(
            (throttle.time, throttle.id, throttle.stream_id),
            (5_000, 9, 9)
        );
        let plain = encode_ctr_record(&CtrRecordHeader { flags: 0, ..header }, &[]);
        let record = CtrRecords::new(&plain).next_record().unwrap().unwrap();
        assert_eq!(ctr_throttle(&record, 9), None);
    }

    #[test]
    fn the_throttle_warning_names_the_count_and_the_limit() {
        assert_eq!(
            throttle_warning("rvperf record", 3),
            "rvperf record: warning: the rvperf_ctr trigger was throttled 3 times \
             (kernel.perf_event_max_sample_rate); samples are missing after each"
        );
    }
}
