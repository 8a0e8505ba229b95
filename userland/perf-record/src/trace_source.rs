//! The N-Trace sink of the `rvtrace` driver as an AUX source of the recording loop
//! (`rvperf trace record`): the trace device is opened and configured when the
//! recording is planned (so a refusal comes before anything runs), started before the
//! workload is released, drained every round into PERF_RECORD_AUXTRACE chunks (layout:
//! `perf_abi::ntrace`), and stopped when the events are disabled. The events are one
//! system-wide dummy event per CPU for the side-band the trace needs to be attributed
//! and symbolised: MMAP2, COMM, FORK/EXIT and PERF_RECORD_SWITCH_CPU_WIDE.

use std::path::Path;
use std::time::Duration;

use perf_abi::ntrace::{NtraceInfo, RVPERF_AUXTRACE_NTRACE};
use perf_abi::{build_attr, parse_event};
use perf_data::AuxtraceChunk;
use perf_ring::{online_cpus, Event};
use trace_device::{Config, Drain, SinkMemory, TraceDevice};

use crate::plan::{
    sampling_options, AuxPlan, AuxSource, Counts, CpuRing, Plan, PlannedEvent, SynthesizedFile,
    Writer,
};
use crate::synthesize::synthesize_processes;
use crate::{RecordError, RecordOptions, RecordWarning};

/// What `rvperf trace record` asks of the trace device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    /// The device (`/dev/rvtrace`).
    pub device: std::path::PathBuf,
    /// The encoders' configuration.
    pub config: Config,
    /// How often the sink is drained at least (the loop's poll wakes on the rings only).
    pub drain_interval: Duration,
    /// Where to write a copy of the running kernel's code ([`crate::KernelCode`], as an
    /// ELF), for a trace of the kernel. It is taken once the events are open (opening
    /// them switches the kernel's own static keys, which patches its text) and before
    /// anything is traced.
    pub kernel_copy: Option<std::path::PathBuf>,
}

impl TraceOptions {
    /// The device and configuration, drained every [`DEFAULT_DRAIN_INTERVAL`].
    pub fn new(device: std::path::PathBuf, config: Config) -> Self {
        Self {
            device,
            config,
            drain_interval: DEFAULT_DRAIN_INTERVAL,
            kernel_copy: None,
        }
    }
}

/// How often the sink is drained by default: a 16 MiB sink filled in less than 10 ms
/// would need 1.6 GB/s of trace.
pub const DEFAULT_DRAIN_INTERVAL: Duration = Duration::from_millis(10);

/// What the trace device did in a recording (for `--format raw`'s `.info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceOutcome {
    /// The block the trace came from.
    pub info: trace_device::Info,
    /// The configuration it ran with.
    pub config: Config,
    /// The driver's status after the stop and the last drain.
    pub status: trace_device::Status,
    /// Drains that found new bytes.
    pub drains: u64,
    /// The copy of the kernel's code made before tracing started, if one was asked for.
    pub kernel_copy: Option<KernelCopy>,
}

/// What copying the running kernel's code cost (`TraceOptions::kernel_copy`): it is made
/// after the events are open and before tracing starts, so the command waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCopy {
    /// Bytes of code copied (the kernel's text and the modules').
    pub code_bytes: u64,
    pub ranges: usize,
    /// Bytes of the ELF file written.
    pub file_bytes: u64,
    /// From reading kallsyms to the file written.
    pub elapsed: Duration,
}

/// N-Trace idle bytes pad a chunk to 8 bytes (PERF_RECORD_AUXTRACE data is 8-aligned).
const IDLE: u8 = 0xff;

pub(crate) fn plan(options: &RecordOptions, trace: &TraceOptions) -> Result<Plan, RecordError> {
    let device = TraceDevice::open(&trace.device)?;
    let mut config = trace.config;
    if device.info().return_stack_depth == 0 {
        config.features &= !trace_device::abi::feature::IMPLICIT_RETURN;
    }
    // Configured now: a configuration the block refuses fails before anything runs.
    device.configure(&config)?;
    let sink = device.map_sink()?;
    let cpus = online_cpus()?;
    let mut attr_options = sampling_options(options);
    attr_options.sampling = perf_abi::Sampling::Period(1);
    attr_options.mmap = true;
    attr_options.mmap2 = true;
    attr_options.comm = true;
    attr_options.task = true;
    attr_options.context_switch = true;
    attr_options.inherit = false;
    attr_options.enable_on_exec = false;
    let spec = parse_event("dummy", &options.sysfs)?;
    let attr = build_attr(&spec, &attr_options);
    Ok(Plan {
        events: vec![PlannedEvent {
            name: "dummy".to_owned(),
            attr,
            header_name: "dummy:u".to_owned(),
            header_attr: attr,
            group_leader: None,
        }],
        cpus,
        data_pages: options.data_pages,
        aux: Some(AuxPlan {
            pages: 0,
            source: Box::new(TraceSource {
                device,
                sink,
                config,
                drain: Drain::new(),
                info_written: false,
                chunk: Vec::new(),
                started: false,
                stop_error: None,
                synthesized: Vec::new(),
                drain_interval: trace.drain_interval,
                kernel_copy: trace.kernel_copy.clone(),
                drains: 0,
                final_status: None,
                kernel_not_placed: None,
                kernel_copy_made: None,
            }),
        }),
    })
}

struct TraceSource {
    device: TraceDevice,
    sink: SinkMemory,
    config: Config,
    drain: Drain,
    info_written: bool,
    /// This round's bytes, then padded into a chunk.
    chunk: Vec<u8>,
    started: bool,
    /// A failed stop, reported at the end.
    stop_error: Option<trace_device::DeviceError>,
    /// The files of the mappings synthesized at the start.
    synthesized: Vec<SynthesizedFile>,
    drain_interval: Duration,
    kernel_copy: Option<std::path::PathBuf>,
    /// Drains that found new bytes.
    drains: u64,
    /// The status after the last drain.
    final_status: Option<trace_device::Status>,
    /// Why the kernel's mapping was not recorded, for a trace that follows the kernel.
    kernel_not_placed: Option<String>,
    /// What the copy of the kernel's code cost, once made.
    kernel_copy_made: Option<KernelCopy>,
}

impl TraceSource {
    fn write_info(&mut self, cpus: &[CpuRing], writer: &mut Writer) -> Result<(), RecordError> {
        let status = self.device.status()?;
        let time = cpus.first().and_then(|cpu| cpu.ring.time_conversion());
        let harts = if self.config.harts == 0 {
            self.device.info().harts
        } else {
            self.config.harts
        };
        let info = NtraceInfo {
            mode: self.config.mode,
            features: u64::from(self.config.features),
            privileges: self.config.privileges,
            sync_max: (self.config.sync_max != trace_device::abi::SYNC_NONE)
                .then_some(self.config.sync_max),
            src_bits: u8::try_from(status.src_bits).unwrap_or(12),
            return_stack_depth: self.device.info().return_stack_depth,
            harts,
            buffer_bytes: status.buffer_bytes,
            time,
            timestamp_prescale: self.config.timestamp_prescale,
            // Unreadable (no /proc): hart i is taken for CPU i.
            hart_cpus: std::fs::read_to_string("/proc/cpuinfo")
                .map(|cpuinfo| crate::synthesize::hart_cpus(&cpuinfo))
                .unwrap_or_default(),
        };
        writer.write_auxtrace_info(RVPERF_AUXTRACE_NTRACE, &info.to_words())?;
        self.info_written = true;
        Ok(())
    }
}

/// The kernel's mapping as perf synthesizes it (`perf_event__synthesize_kernel_mmap`):
/// pid -1, `[kernel.kallsyms]_text` with `_text`'s run-time address as pgoff, and the
/// kernel's build id in the record.
fn write_kernel_mapping(
    writer: &mut Writer,
    place: &crate::KernelPlace,
) -> Result<(), RecordError> {
    let file_id = match &place.build_id {
        Some(id) => perf_abi::Mmap2FileId::BuildId(id),
        None => perf_abi::Mmap2FileId::Inode {
            maj: 0,
            min: 0,
            ino: 0,
            ino_generation: 0,
        },
    };
    let filename = format!("{}{}", symbolize::KERNEL_DSO, symbolize::KERNEL_TEXT_SYMBOL);
    writer.write_mmap2(
        0,
        u16::try_from(perf_abi::sys::bindings::PERF_RECORD_MISC_KERNEL).unwrap_or(1),
        &perf_abi::Mmap2Record {
            // The kernel's u32 of pid -1: no process's.
            pid: u32::MAX,
            tid: 0,
            addr: place.text,
            len: place.end - place.text,
            pgoff: place.text,
            file_id,
            prot: (libc::PROT_READ | libc::PROT_EXEC) as u32,
            flags: 0,
            filename: filename.as_bytes(),
            sample_id: perf_abi::SampleId {
                pid: Some(u32::MAX),
                tid: Some(0),
                time: Some(0),
                ..perf_abi::SampleId::default()
            },
        },
    )?;
    Ok(())
}

impl AuxSource for TraceSource {
    fn begin(&mut self, writer: &mut Writer, _pid: i32) -> Result<(), RecordError> {
        // The code of what already runs (this recorder among it), as perf synthesizes it.
        self.synthesized = synthesize_processes(writer, Path::new("/proc"))?;
        if self.config.privileges & !perf_abi::ntrace::privilege::USER != 0 {
            match crate::KernelPlace::read(&crate::KernelSources::default()) {
                Ok(place) => write_kernel_mapping(writer, &place)?,
                Err(error) => self.kernel_not_placed = Some(error.to_string()),
            }
        }
        if let Some(path) = &self.kernel_copy {
            let started = std::time::Instant::now();
            let code = crate::KernelCode::read(&crate::KernelSources::default())?;
            let code_bytes = code
                .ranges
                .iter()
                .map(|range| range.bytes.len() as u64)
                .sum();
            let ranges = code.ranges.len();
            let elf = code.to_elf()?;
            std::fs::write(path, &elf).map_err(|source| RecordError::KernelCopy {
                path: path.clone(),
                source,
            })?;
            self.kernel_copy_made = Some(KernelCopy {
                code_bytes,
                ranges,
                file_bytes: elf.len() as u64,
                elapsed: started.elapsed(),
            });
        }
        // Before the workload is released: its first instruction is traced.
        self.device.start()?;
        self.started = true;
        Ok(())
    }

    fn poll_interval(&self) -> Option<Duration> {
        Some(self.drain_interval)
    }

    fn trace_outcome(&self) -> Option<TraceOutcome> {
        Some(TraceOutcome {
            info: *self.device.info(),
            config: self.config,
            status: self.final_status?,
            drains: self.drains,
            kernel_copy: self.kernel_copy_made,
        })
    }

    fn synthesized_files(&self) -> &[SynthesizedFile] {
        &self.synthesized
    }

    fn drain(
        &mut self,
        cpus: &mut [CpuRing],
        writer: &mut Writer,
        counts: &mut Counts,
    ) -> Result<(), RecordError> {
        if !self.info_written {
            self.write_info(cpus, writer)?;
        }
        self.chunk.clear();
        let device = &self.device;
        let status = device.status()?;
        let kept = self
            .drain
            .drain_with(&status, &self.sink, &mut self.chunk, || device.status())?;
        if kept == 0 {
            return Ok(());
        }
        self.drains += 1;
        // Everything before these bytes was read or lost: the stream position.
        let offset = self.drain.drained() + self.drain.lost() - kept;
        let length = self.chunk.len();
        self.chunk.resize(length.next_multiple_of(8), IDLE);
        writer.write_auxtrace(&AuxtraceChunk {
            offset,
            reference: kept,
            idx: 0,
            tid: u32::MAX,
            cpu: u32::MAX,
            data: &self.chunk,
        })?;
        counts.bytes += self.chunk.len() as u64;
        Ok(())
    }

    fn events_disabled(&mut self, _cpus: &[CpuRing], _events: &[Event]) {
        // The last drain comes after this: the encoders flushed, the sink stopped.
        if self.started {
            if let Err(error) = self.device.stop() {
                self.stop_error = Some(error);
            }
        }
    }

    fn end(&mut self, _counts: &Counts) -> Result<Vec<RecordWarning>, RecordError> {
        if let Some(error) = self.stop_error.take() {
            return Err(error.into());
        }
        self.final_status = Some(self.device.status()?);
        let mut warnings = Vec::new();
        if let Some(reason) = self.kernel_not_placed.take() {
            warnings.push(RecordWarning::KernelNotPlaced { reason });
        }
        if self.drain.lost() > 0 {
            warnings.push(RecordWarning::TraceLost {
                bytes: self.drain.lost(),
                gaps: self.drain.gaps().len(),
            });
        }
        Ok(warnings)
    }
}
