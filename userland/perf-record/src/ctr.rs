//! Branch stacks on RISC-V from the `rvperf_ctr` PMU (kmod-shim/rvperf_ctr), an AUX
//! source: the module delivers one record per sample through the AUX area. Each
//! record becomes an ordinary PERF_RECORD_SAMPLE with PERF_SAMPLE_BRANCH_STACK
//! (`perf_data::ctr`), written under the attr of the sampling event that triggered
//! it (cycles, ...), so that Linux perf and every perf.data reader see a normal
//! branch-stack recording; or, kept, the AUX data is written as PERF_RECORD_AUXTRACE.
//! What a recording misses is said: a record at which perf throttled the trigger is
//! followed by the PERF_RECORD_THROTTLE the kernel would have written for the
//! trigger, and the events' enabled and running times tell how long the trigger held
//! no hardware counter (the module does not schedule the event then).

use std::path::Path;

use perf_abi::ctr::{
    CtrRecords, CTR_PMU_NAME, CTR_TRIGGER_HARDWARE, CTR_TRIGGER_HW_CACHE, CTR_TRIGGER_RAW,
    RVPERF_AUXTRACE_CTR,
};
use perf_abi::sys::bindings::{self as b, perf_event_attr};
use perf_abi::{
    build_attr, parse_event, parse_modifiers, parse_read_values, split_modifiers, EventModifier,
    EventSpec, Wakeup, DASH_B_BRANCH_FILTER,
};
use perf_data::ctr::{ctr_sample, ctr_throttle, write_ctr_throttle};
use perf_data::AuxtraceChunk;
use perf_ring::{online_cpus, page_size, Event};

use crate::plan::{
    quarter_watermark, sampling_options, AuxPlan, AuxSource, Counts, CpuRing, Plan, PlannedEvent,
    Writer,
};
use crate::{AuxData, CallChains, RecordError, RecordOptions, RecordWarning};

/// The dynamic PMU type of rvperf_ctr, when the module is loaded.
pub fn pmu_type(sysfs: &Path) -> Option<u32> {
    let path = sysfs
        .join("bus/event_source/devices")
        .join(CTR_PMU_NAME)
        .join("type");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The rvperf_ctr event for a requested sampling event, and the trigger's identity,
/// under which perf.data presents the samples.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CtrTrigger {
    /// The rvperf_ctr event to open.
    event: EventSpec,
    /// The trigger's attr type (PERF_TYPE_HARDWARE, ...).
    trigger_type: u32,
    /// The trigger's attr config.
    trigger_config: u64,
}

fn ctr_event(spec: &EventSpec, ctr_type: u32) -> Result<CtrTrigger, RecordError> {
    if spec.pmu_type == ctr_type {
        let trigger_type = match spec.config1 {
            CTR_TRIGGER_HARDWARE => b::PERF_TYPE_HARDWARE,
            CTR_TRIGGER_HW_CACHE => b::PERF_TYPE_HW_CACHE,
            CTR_TRIGGER_RAW => b::PERF_TYPE_RAW,
            trigger => {
                return Err(RecordError::UnknownCtrTrigger {
                    event: spec.name.clone(),
                    trigger,
                })
            }
        };
        return Ok(CtrTrigger {
            event: spec.clone(),
            trigger_type,
            trigger_config: spec.config,
        });
    }
    let trigger = match spec.pmu_type {
        b::PERF_TYPE_HARDWARE => CTR_TRIGGER_HARDWARE,
        b::PERF_TYPE_HW_CACHE => CTR_TRIGGER_HW_CACHE,
        b::PERF_TYPE_RAW => CTR_TRIGGER_RAW,
        _ => {
            return Err(RecordError::NotACtrTrigger {
                event: spec.name.clone(),
            })
        }
    };
    Ok(CtrTrigger {
        event: EventSpec {
            name: spec.name.clone(),
            pmu_type: ctr_type,
            config: spec.config,
            config1: trigger,
            config2: 0,
        },
        trigger_type: spec.pmu_type,
        trigger_config: spec.config,
    })
}

/// Whose limits the recorder's mappings are under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Privilege {
    /// Root: no mlock budget, kernel branches allowed by default.
    Root,
    /// Anyone else: perf_event_mlock_kb and perf_event_paranoid apply.
    User,
}

fn privilege() -> Privilege {
    if nix::unistd::geteuid().is_root() {
        Privilege::Root
    } else {
        Privilege::User
    }
}

/// Data and AUX pages of each CPU's ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RingSizes {
    data_pages: usize,
    aux_pages: usize,
}

/// perf_event_mlock_kb's default (512 KiB and one page), when it cannot be read.
const DEFAULT_MLOCK_KB: usize = 516;

/// Root gets what it asked for; anyone else what fits perf_event_mlock_kb across all
/// CPUs (the kernel refuses larger mappings with EPERM).
fn ring_sizes(requested: RingSizes, cpus: usize) -> RingSizes {
    if privilege() == Privilege::Root {
        return requested;
    }
    let budget_kb = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(DEFAULT_MLOCK_KB);
    fit_mlock_budget(requested, cpus, budget_kb, page_size())
}

/// The largest power-of-two rings within `budget_kb` over `cpus` rings, the data ring a
/// quarter of the budget at most, the AUX area the larger part.
fn fit_mlock_budget(
    requested: RingSizes,
    cpus: usize,
    budget_kb: usize,
    page_size: usize,
) -> RingSizes {
    let budget = budget_kb.saturating_mul(1024) / page_size.max(1) / cpus.max(1);
    let floor_power_of_two = |pages: usize| {
        if pages == 0 {
            1
        } else {
            1 << (usize::BITS - 1 - pages.leading_zeros())
        }
    };
    // Each ring also maps one metadata page.
    let data_pages = floor_power_of_two(budget / 4).clamp(1, requested.data_pages.max(1));
    let aux_pages = floor_power_of_two(budget.saturating_sub(data_pages + 1))
        .min(requested.aux_pages)
        .max(1);
    RingSizes {
        data_pages,
        aux_pages,
    }
}

/// rvperf_ctr's plan: one sampling event (CTR is one per hart), opened as the
/// rvperf_ctr event on every CPU, with an AUX area.
pub(crate) fn plan(options: &RecordOptions, ctr_type: u32) -> Result<Plan, RecordError> {
    let names = if options.events.is_empty() {
        vec!["cycles".to_owned()]
    } else {
        options.events.clone()
    };
    let [name] = &names[..] else {
        return Err(RecordError::CtrEventCount { events: names });
    };
    if options.call_chains == CallChains::Sampled {
        return Err(RecordError::CtrCallChains);
    }
    let split = split_modifiers(name);
    let spec = parse_event(split.event, &options.sysfs)?;
    let trigger = ctr_event(&spec, ctr_type)?;
    let cpus = online_cpus()?;
    if !options.aux_pages.is_power_of_two() {
        return Err(RecordError::AuxPages {
            pages: options.aux_pages,
        });
    }
    let mut attr_options = sampling_options(options);
    attr_options.branch_sample_type = if options.branch_sample_type == 0 {
        DASH_B_BRANCH_FILTER
    } else {
        options.branch_sample_type
    };
    let modifiers = parse_modifiers(
        name,
        split.modifiers,
        &[EventModifier::User, EventModifier::Kernel],
    )?;
    for modifier in &modifiers {
        modifier.apply(&mut attr_options);
    }
    // User-mode branches only: the trigger need not count in the kernel either, and
    // an unprivileged user may then record at perf_event_paranoid=2 (as perf does).
    let privilege_bits = u64::from(
        b::PERF_SAMPLE_BRANCH_USER | b::PERF_SAMPLE_BRANCH_KERNEL | b::PERF_SAMPLE_BRANCH_HV,
    );
    if attr_options.branch_sample_type & privilege_bits == u64::from(b::PERF_SAMPLE_BRANCH_USER)
        || (modifiers.is_empty() && privilege() == Privilege::User)
    {
        attr_options.exclude_kernel = true;
    }
    // The module cannot follow forks (its trigger counter is created per event), so
    // per-task events are opened on every CPU without inherit, which is mmap-able.
    attr_options.inherit = false;
    attr_options.mmap = true;
    attr_options.mmap2 = true;
    attr_options.comm = true;
    attr_options.task = true;
    // The default 512 pages (2 MiB) hold 2,500 samples of a 32-entry CTR, 340 of a
    // 256-entry one; the recorder is woken at each quarter. An unprivileged user's
    // mappings count against perf_event_mlock_kb, so they get what fits in it.
    let sizes = ring_sizes(
        RingSizes {
            data_pages: options.data_pages,
            aux_pages: options.aux_pages,
        },
        cpus.len(),
    );
    attr_options.wakeup = Wakeup::Watermark(quarter_watermark(sizes.data_pages));
    attr_options.aux_watermark = quarter_watermark(sizes.aux_pages);
    // The module does not schedule the event while its trigger holds no hardware
    // counter (taken by pinned events, say): the event's running time then falls
    // behind its enabled time, which is how the recorder learns what was not recorded.
    attr_options.read_format |=
        u64::from(b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING);
    let mut attr = build_attr(&trigger.event, &attr_options);
    // As perf's modifiers do: `:u` and `:k` exclude the hypervisor (M-mode) too, which
    // rvperf_ctr accepts (S-mode CTR never records M-mode).
    if !modifiers.is_empty() {
        attr.set_exclude_hv(1);
    }
    let source = CtrSource {
        event: name.clone(),
        ctr_type,
        trigger_type: trigger.trigger_type,
        trigger_config: trigger.trigger_config,
        aux_data: options.aux_data,
        read_format: attr.read_format,
        pid: -1,
        times: None,
    };
    Ok(Plan {
        events: vec![PlannedEvent {
            name: name.clone(),
            attr,
            header_name: split.event.to_owned(),
            header_attr: trigger_attr(&attr, trigger.trigger_type, trigger.trigger_config),
            group_leader: None,
        }],
        cpus,
        data_pages: sizes.data_pages,
        aux: Some(AuxPlan {
            pages: sizes.aux_pages,
            source: Box::new(source),
        }),
    })
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

/// Whom the CPU events of a recording follow, which decides how their times add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoverageScope {
    /// One task: one event per CPU, all for the same task.
    Task,
    /// Each CPU's event for the whole recording on its CPU.
    System,
}

/// The coverage of the CPU events of one recording. Per task, each event is enabled
/// whenever the task runs, on any CPU, but runs only while the task is on its own CPU:
/// the task's time is the largest enabled time, and the running times add up to it
/// when nothing was refused. System-wide, each CPU's event is enabled for the whole
/// recording on its CPU: the running times over the enabled times, summed.
fn ctr_coverage(times: &[CounterTimes], scope: CoverageScope) -> CtrCoverage {
    let running: u128 = times.iter().map(|time| u128::from(time.running)).sum();
    let enabled: u128 = match scope {
        CoverageScope::Task => times
            .iter()
            .map(|time| u128::from(time.enabled))
            .max()
            .unwrap_or(0),
        CoverageScope::System => times.iter().map(|time| u128::from(time.enabled)).sum(),
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
fn read_times(
    cpus: &[CpuRing],
    events: &[Event],
    read_format: u64,
) -> Result<Vec<CounterTimes>, RecordError> {
    let mut buffer = [0u8; 64];
    cpus.iter()
        .map(|cpu| {
            let length = events[cpu.event].read_counter(&mut buffer)?;
            let values = parse_read_values(&buffer[..length], read_format)
                .map_err(|source| RecordError::CounterValues { id: cpu.id, source })?;
            match (values.time_enabled, values.time_running) {
                (Some(enabled), Some(running)) => Ok(CounterTimes { enabled, running }),
                _ => Err(RecordError::CounterTimesMissing { id: cpu.id }),
            }
        })
        .collect()
}

/// rvperf_ctr as the recording's AUX source.
pub(crate) struct CtrSource {
    /// The sampling event as given, for messages.
    event: String,
    ctr_type: u32,
    trigger_type: u32,
    trigger_config: u64,
    aux_data: AuxData,
    /// The opened attr's, for reading the events' times.
    read_format: u64,
    /// The recorded task (-1: all), known once the workload has started.
    pid: i32,
    /// The events' times, read once they are disabled.
    times: Option<Result<Vec<CounterTimes>, RecordError>>,
}

impl AuxSource for CtrSource {
    fn begin(&mut self, writer: &mut Writer, pid: i32) -> Result<(), RecordError> {
        self.pid = pid;
        if self.aux_data == AuxData::KeepAsAuxtrace {
            writer.write_auxtrace_info(
                RVPERF_AUXTRACE_CTR,
                &[
                    u64::from(self.ctr_type),
                    u64::from(self.trigger_type),
                    self.trigger_config,
                ],
            )?;
        }
        Ok(())
    }

    /// Each CPU's AUX records as samples, or kept as AUXTRACE chunks.
    fn drain(
        &mut self,
        cpus: &mut [CpuRing],
        writer: &mut Writer,
        counts: &mut Counts,
    ) -> Result<(), RecordError> {
        let mut scratch = Vec::new();
        let mut wrote = false;
        for (index, cpu) in cpus.iter_mut().enumerate() {
            let (id, cpu_number) = (cpu.id, cpu.cpu);
            let Some(chunk) = cpu.ring.read_aux() else {
                continue;
            };
            let bytes = chunk.data().contiguous(&mut scratch);
            let mut records = CtrRecords::new(bytes);
            let corrupt = |source| RecordError::CtrData { id, source };
            if self.aux_data == AuxData::KeepAsAuxtrace {
                if bytes.is_empty() {
                    continue;
                }
                // Still parsed, to count samples and to refuse a stream that could not
                // be read later.
                while let Some(record) = records.next_record().map_err(corrupt)? {
                    counts.samples += 1;
                    // `rvperf inject` writes the THROTTLE records of kept data.
                    counts.throttled += u64::from(record.is_throttled());
                }
                writer.write_auxtrace(&AuxtraceChunk {
                    // The chunk ends at the head: its start is where the bytes began.
                    offset: chunk.head.saturating_sub(bytes.len() as u64),
                    reference: 0,
                    idx: u32::try_from(index).unwrap_or(u32::MAX),
                    // -1 (every task) is all ones, as perf writes it.
                    tid: self.pid as u32,
                    cpu: cpu_number,
                    data: bytes,
                })?;
                wrote = true;
                continue;
            }
            while let Some(record) = records.next_record().map_err(corrupt)? {
                writer.write_sample(0, &ctr_sample(&record, id))?;
                counts.samples += 1;
                if let Some(throttle) = ctr_throttle(&record, id) {
                    write_ctr_throttle(writer, &throttle)?;
                    counts.throttled += 1;
                }
                wrote = true;
            }
        }
        if wrote {
            writer.write_finished_round()?;
        }
        Ok(())
    }

    fn events_disabled(&mut self, cpus: &[CpuRing], events: &[Event]) {
        // Disabled, the events' times no longer change.
        self.times = Some(read_times(cpus, events, self.read_format));
    }

    fn end(&mut self, counts: &Counts) -> Result<Vec<RecordWarning>, RecordError> {
        let mut warnings = Vec::new();
        let scope = if self.pid == -1 {
            CoverageScope::System
        } else {
            CoverageScope::Task
        };
        let coverage = match self.times.take() {
            Some(Ok(times)) => ctr_coverage(&times, scope),
            Some(Err(error)) => {
                warnings.push(RecordWarning::CoverageUnknown {
                    error: Box::new(error),
                });
                CtrCoverage::NotEnabled
            }
            None => CtrCoverage::NotEnabled,
        };
        match coverage {
            CtrCoverage::NeverRunning => {
                return Err(RecordError::CtrNeverRunning {
                    event: self.event.clone(),
                })
            }
            CtrCoverage::Share(share) if share < MINIMUM_COVERAGE => {
                warnings.push(RecordWarning::LowCoverage { share });
            }
            CtrCoverage::Share(_) | CtrCoverage::NotEnabled => {}
        }
        if counts.throttled > 0 {
            warnings.push(RecordWarning::Throttled {
                count: counts.throttled,
            });
        }
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use perf_abi::AttrOptions;
    use perf_abi::Sampling;

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
        let mut options = AttrOptions::default();
        options.sampling = Sampling::Period(20_000);
        options.branch_sample_type = DASH_B_BRANCH_FILTER;
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
    fn a_sampling_event_becomes_the_rvperf_ctr_event_it_triggers() {
        let cycles = EventSpec {
            name: "cycles".into(),
            pmu_type: b::PERF_TYPE_HARDWARE,
            config: 0,
            config1: 0,
            config2: 0,
        };
        let trigger = ctr_event(&cycles, 42).unwrap();
        assert_eq!(
            (trigger.event.pmu_type, trigger.event.config1),
            (42, CTR_TRIGGER_HARDWARE)
        );
        assert_eq!(
            (trigger.trigger_type, trigger.trigger_config),
            (b::PERF_TYPE_HARDWARE, 0)
        );
        // Asked for by name: the trigger is what config1 selects.
        let named = EventSpec {
            name: "rvperf_ctr/event=0x10004,trigger=2/".into(),
            pmu_type: 42,
            config: 0x10004,
            config1: CTR_TRIGGER_RAW,
            config2: 0,
        };
        let trigger = ctr_event(&named, 42).unwrap();
        assert_eq!(trigger.event, named);
        assert_eq!(
            (trigger.trigger_type, trigger.trigger_config),
            (b::PERF_TYPE_RAW, 0x10004)
        );
        let unknown = EventSpec {
            config1: 3,
            ..named
        };
        assert_eq!(
            ctr_event(&unknown, 42).unwrap_err().to_string(),
            "event rvperf_ctr/event=0x10004,trigger=2/: unknown rvperf_ctr trigger 3"
        );
        let software = EventSpec {
            name: "cpu-clock".into(),
            pmu_type: b::PERF_TYPE_SOFTWARE,
            ..cycles
        };
        assert!(ctr_event(&software, 42)
            .unwrap_err()
            .to_string()
            .starts_with("event cpu-clock cannot trigger CTR branch stacks"));
    }

    #[test]
    fn an_unprivileged_user_s_rings_fit_the_mlock_budget() {
        let requested = RingSizes {
            data_pages: 64,
            aux_pages: 512,
        };
        // 516 KiB over 4 CPUs with 4 KiB pages: 32 pages each, 8 of data, 16 of AUX
        // (the largest power of two in the 23 left after the data and metadata page).
        assert_eq!(
            fit_mlock_budget(requested, 4, 516, 4096),
            RingSizes {
                data_pages: 8,
                aux_pages: 16,
            }
        );
        // A budget larger than what was asked for: what was asked for.
        assert_eq!(fit_mlock_budget(requested, 1, 1 << 30, 4096), requested);
        // A budget too small for anything: one page each, which the kernel judges.
        assert_eq!(
            fit_mlock_budget(requested, 64, 4, 4096),
            RingSizes {
                data_pages: 1,
                aux_pages: 1,
            }
        );
        // Absurd inputs do not overflow or divide by zero.
        assert_eq!(
            fit_mlock_budget(requested, 0, usize::MAX, 0),
            RingSizes {
                data_pages: 64,
                aux_pages: 512,
            }
        );
    }

    #[test]
    fn per_task_coverage_is_the_running_times_over_the_task_s_time() {
        // The task ran 1000 ns: 600 on CPU 0, 400 on CPU 1; each CPU's event was
        // enabled all 1000 (a few ns apart, as the reads are).
        let complete = times(&[(1000, 600), (998, 400)]);
        assert_eq!(
            ctr_coverage(&complete, CoverageScope::Task),
            CtrCoverage::Share(1.0)
        );
        let refused = times(&[(1000, 300), (1000, 200)]);
        assert_eq!(
            ctr_coverage(&refused, CoverageScope::Task),
            CtrCoverage::Share(0.5)
        );
        // Read a hair apart, the sum may pass the largest enabled time.
        let rounding = times(&[(1000, 600), (1000, 401)]);
        assert_eq!(
            ctr_coverage(&rounding, CoverageScope::Task),
            CtrCoverage::Share(1.0)
        );
    }

    #[test]
    fn system_wide_coverage_sums_both_times() {
        // Each CPU's event is enabled for the whole recording on its own CPU.
        let complete = times(&[(1000, 1000), (1000, 1000)]);
        assert_eq!(
            ctr_coverage(&complete, CoverageScope::System),
            CtrCoverage::Share(1.0)
        );
        let half_refused = times(&[(1000, 1000), (1000, 0)]);
        assert_eq!(
            ctr_coverage(&half_refused, CoverageScope::System),
            CtrCoverage::Share(0.5)
        );
        // The same times per task would be a complete recording.
        assert_eq!(
            ctr_coverage(&half_refused, CoverageScope::Task),
            CtrCoverage::Share(1.0)
        );
    }

    #[test]
    fn enabled_but_never_running_is_told_apart_from_never_enabled() {
        let never_running = times(&[(1000, 0), (1000, 0)]);
        for scope in [CoverageScope::Task, CoverageScope::System] {
            assert_eq!(
                ctr_coverage(&never_running, scope),
                CtrCoverage::NeverRunning
            );
        }
        // A workload that never ran (or no event at all): nothing to judge.
        let never_enabled = times(&[(0, 0), (0, 0)]);
        for scope in [CoverageScope::Task, CoverageScope::System] {
            assert_eq!(ctr_coverage(&never_enabled, scope), CtrCoverage::NotEnabled);
        }
        assert_eq!(
            ctr_coverage(&[], CoverageScope::Task),
            CtrCoverage::NotEnabled
        );
    }

    /// A sysfs where rvperf_ctr is loaded as PMU type 42.
    fn sysfs_with_ctr() -> tempfile::TempDir {
        let sysfs = tempfile::tempdir().unwrap();
        let pmu = sysfs.path().join("bus/event_source/devices/rvperf_ctr");
        std::fs::create_dir_all(&pmu).unwrap();
        std::fs::write(pmu.join("type"), "42\n").unwrap();
        sysfs
    }

    fn ctr_options(sysfs: &Path, events: &[&str]) -> RecordOptions {
        RecordOptions {
            events: events.iter().map(|event| (*event).to_owned()).collect(),
            branch_sample_type: u64::from(b::PERF_SAMPLE_BRANCH_ANY),
            target: crate::Target::Command(vec!["true".to_owned()]),
            sysfs: sysfs.to_owned(),
            ..RecordOptions::default()
        }
    }

    #[test]
    fn a_branch_stack_request_plans_one_rvperf_ctr_event_with_an_aux_area() {
        let sysfs = sysfs_with_ctr();
        assert_eq!(pmu_type(sysfs.path()), Some(42));
        let plan = plan(&ctr_options(sysfs.path(), &["cycles:u"]), 42).unwrap();
        let [event] = &plan.events[..] else {
            panic!("one event");
        };
        assert!(plan.aux.is_some());
        assert_eq!(event.name, "cycles:u");
        assert_eq!(
            (event.attr.type_, event.attr.config1),
            (42, CTR_TRIGGER_HARDWARE)
        );
        // `:u` excludes the kernel and the hypervisor; the events follow no forks.
        assert_eq!(
            (
                event.attr.exclude_kernel(),
                event.attr.exclude_hv(),
                event.attr.inherit()
            ),
            (1, 1, 0)
        );
        assert_ne!(
            event.attr.read_format & u64::from(b::PERF_FORMAT_TOTAL_TIME_RUNNING),
            0
        );
        // perf.data names the trigger, without the modifiers.
        assert_eq!(event.header_name, "cycles");
        assert_eq!(
            (event.header_attr.type_, event.header_attr.config1),
            (b::PERF_TYPE_HARDWARE, 0)
        );
    }

    #[test]
    fn what_rvperf_ctr_cannot_record_is_refused_before_anything_runs() {
        let sysfs = sysfs_with_ctr();
        let refused = |options: &RecordOptions| plan(options, 42).err().unwrap().to_string();
        assert_eq!(
            refused(&ctr_options(sysfs.path(), &["cycles", "instructions"])),
            "rvperf_ctr records one sampling event at a time (CTR is one per hart); got \
             [\"cycles\", \"instructions\"]"
        );
        let mut call_chains = ctr_options(sysfs.path(), &[]);
        call_chains.call_chains = CallChains::Sampled;
        assert!(refused(&call_chains).starts_with("-g: rvperf_ctr records branch stacks"));
        let mut aux_pages = ctr_options(sysfs.path(), &[]);
        aux_pages.aux_pages = 3;
        assert_eq!(refused(&aux_pages), "--aux-pages 3: must be a power of two");
        assert_eq!(
            refused(&ctr_options(sysfs.path(), &["cycles:p"])),
            "event cycles:p: unknown modifier 'p' (known: u, k)"
        );
    }

    fn source(pid: i32, times: Option<Result<Vec<CounterTimes>, RecordError>>) -> CtrSource {
        CtrSource {
            event: "cycles".into(),
            ctr_type: 42,
            trigger_type: b::PERF_TYPE_HARDWARE,
            trigger_config: 0,
            aux_data: AuxData::ConvertToSamples,
            read_format: 0,
            pid,
            times,
        }
    }

    #[test]
    fn the_end_of_a_recording_warns_of_gaps_and_throttling_and_refuses_nothing_recorded() {
        let throttled = Counts {
            throttled: 3,
            ..Counts::default()
        };
        let warnings = source(40, Some(Ok(times(&[(1000, 500)]))))
            .end(&throttled)
            .unwrap();
        assert!(
            matches!(
                warnings[..],
                [
                    RecordWarning::LowCoverage { share },
                    RecordWarning::Throttled { count: 3 }
                ] if share == 0.5
            ),
            "{warnings:?}"
        );
        let complete = source(-1, Some(Ok(times(&[(1000, 995)]))))
            .end(&Counts::default())
            .unwrap();
        assert!(complete.is_empty(), "{complete:?}");
        let error = source(40, Some(Ok(times(&[(1000, 0)]))))
            .end(&Counts::default())
            .unwrap_err();
        assert!(error
            .to_string()
            .contains("the trigger event cycles never got a hardware counter"));
        let unknown = source(40, Some(Err(RecordError::CounterTimesMissing { id: 5 })))
            .end(&Counts::default())
            .unwrap();
        assert!(
            matches!(unknown[..], [RecordWarning::CoverageUnknown { .. }]),
            "{unknown:?}"
        );
    }
}
