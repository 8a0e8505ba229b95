//! A perf.data of branch-stack samples synthesized from a complete trace, as `perf
//! inject --itrace=il64` makes one from Intel PT: every `period` retired instructions
//! of a hart, a SAMPLE with the instruction where the period expired and the last
//! taken transfers before it ([`profiles::BranchSampler`]), so that tools that read
//! LBR recordings (`perf report --branch-history`, `llvm-profgen`, AutoFDO's
//! `create_llvm_prof`) read a trace too.
//!
//! Protocol-free: the caller decodes the trace (N-Trace today) and gives its elements
//! in order to [`TraceInjector::add`], with the addresses of the instructions inside a
//! range (it has the code). The file holds one event, `instructions:u` with
//! PERF_SAMPLE_IP | TID | TIME | CPU | PERIOD | BRANCH_STACK and branch_sample_type
//! ANY | USER; the traced code runs as one process (`pid`, with `comm`), which maps
//! every ELF given at its load address (PERF_RECORD_MMAP2 with its build id, and the
//! HEADER_BUILD_ID feature) before the first sample; a hart is a CPU; a sample's time
//! is the hart's latest trace timestamp (trace units, 0 before the first). No I/O but
//! the writer's; no messages.

use std::io::{Seek, Write};

use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::{BranchEntry, BranchStack, CommRecord, Mmap2FileId, Mmap2Record, Sample, SampleId};
use perf_data::{BuildIdEntry, EventDesc, Metadata, PerfDataWriter, WriteError};
use profiles::{BranchSample, BranchSampler, SamplerOptions, SamplerOptionsError};
use trace_elements::{ElementKind, TraceElement};

use crate::ntrace_recording::Task;
use crate::trace::TraceCode;

/// Why a trace could not be injected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceInjectError {
    #[error(transparent)]
    Sampler(#[from] SamplerOptionsError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// One executable mapping of an ELF, as PERF_RECORD_MMAP2 gives it (page-aligned, as
/// the kernel maps a PT_LOAD segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfMapping {
    /// The file's path, as perf and llvm-profgen look it up (absolute, ideally).
    pub path: String,
    pub start: u64,
    pub length: u64,
    /// File offset of `start`.
    pub file_offset: u64,
    pub build_id: Option<Vec<u8>>,
}

/// The page size the mappings are aligned to: 4 KiB, RISC-V's base page (and what
/// llvm-profgen assumes when it matches a mapping with a segment).
const PAGE: u64 = 4096;

impl ElfMapping {
    /// The executable segments of `code`'s files as a process maps them (page-aligned),
    /// named by their absolute paths, what perf and llvm-profgen look files up by.
    pub fn of_code(code: &TraceCode) -> Vec<Self> {
        let mut mappings = Vec::new();
        for file in code.loaded_files() {
            let path = std::path::absolute(file.path)
                .unwrap_or_else(|_| file.path.to_owned())
                .display()
                .to_string();
            for mapping in file
                .info
                .mappings
                .iter()
                .filter(|mapping| mapping.executable)
            {
                // The loader placed the segment without overflow; its page end may not
                // fit (a segment ending in the last page): then it ends where it ends.
                let end = mapping.start.saturating_add(mapping.size);
                let end = end.checked_next_multiple_of(PAGE).unwrap_or(end);
                let start = mapping.start & !(PAGE - 1);
                mappings.push(Self {
                    path: path.clone(),
                    start,
                    length: end - start,
                    file_offset: mapping.file_offset & !(PAGE - 1),
                    build_id: file.info.build_id.clone(),
                });
            }
        }
        mappings
    }
}

/// What [`TraceInjector`] writes besides the samples.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceInjectOptions {
    pub sampler: SamplerOptions,
    /// The process id (and thread id) the samples and mappings are given.
    pub pid: u32,
    /// Its command name (perf keeps 15 bytes).
    pub comm: String,
    pub mappings: Vec<ElfMapping>,
}

impl TraceInjectOptions {
    pub fn new(sampler: SamplerOptions, pid: u32, comm: String, mappings: Vec<ElfMapping>) -> Self {
        Self {
            sampler,
            pid,
            comm,
            mappings,
        }
    }
}

/// What [`TraceInjector`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceInjected {
    /// SAMPLE records written.
    pub samples: u64,
    /// Retired instructions of the elements given.
    pub instructions: u64,
    /// Samples lost because the caller could not place their instruction.
    pub unplaced_samples: u64,
    /// Gap elements: trace lost to the encoder, or bytes the decoder could not follow.
    pub gaps: u64,
    /// Harts seen (the highest hart number + 1).
    pub harts: usize,
}

/// Sums of the statistics of finished samplers.
#[derive(Debug, Clone, Copy, Default)]
struct SamplerTotals {
    samples: u64,
    instructions: u64,
    unplaced_samples: u64,
    harts: usize,
}

/// `perf_event_header.misc` of user-mode records (a u32 binding of a u16 field).
const MISC_USER: u16 = abi::PERF_RECORD_MISC_USER as u16;
const _: () = assert!(abi::PERF_RECORD_MISC_USER <= u16::MAX as u32);

/// Streams the samples of a trace into a perf.data file.
#[derive(Debug)]
pub struct TraceInjector<W: Write + Seek> {
    writer: PerfDataWriter<W>,
    sampler: BranchSampler,
    pid: u32,
    /// The thread the samples are given.
    tid: u32,
    mappings: Vec<ElfMapping>,
    gaps: u64,
    /// What the samplers of the threads before this one did.
    earlier: SamplerTotals,
    /// The processes whose COMM and mappings are written.
    processes: Vec<u32>,
    /// The branch entries of the sample being written, reused.
    entries: Vec<u8>,
}

impl<W: Write + Seek> TraceInjector<W> {
    /// Writes the header, the process's COMM and its mappings to `out`.
    pub fn new(out: W, options: TraceInjectOptions) -> Result<Self, TraceInjectError> {
        let sampler = BranchSampler::new(options.sampler)?;
        let events = vec![EventDesc {
            attr: attr(options.sampler.period),
            name: "instructions:u".to_owned(),
            ids: Vec::new(),
        }];
        let mut writer = PerfDataWriter::new(out, events)?;
        write_process(&mut writer, options.pid, &options.comm, &options.mappings)?;
        writer.write_finished_round()?;
        Ok(Self {
            writer,
            sampler,
            pid: options.pid,
            tid: options.pid,
            mappings: options.mappings,
            gaps: 0,
            earlier: SamplerTotals::default(),
            processes: vec![options.pid],
            entries: Vec::new(),
        })
    }

    /// The elements from here on are another thread's (`tid` of process `pid`, named
    /// `comm`, with `mappings`): a process not seen yet gets its COMM and mappings
    /// written, and the samples' branch stacks start empty.
    pub fn begin_thread(
        &mut self,
        pid: u32,
        tid: u32,
        comm: &str,
        mappings: Vec<ElfMapping>,
    ) -> Result<(), TraceInjectError> {
        if !self.processes.contains(&pid) {
            write_process(&mut self.writer, pid, comm, &mappings)?;
            self.writer.write_finished_round()?;
            self.processes.push(pid);
        }
        let options = self.sampler.options();
        let finished = std::mem::replace(&mut self.sampler, BranchSampler::new(options)?);
        let statistics = finished.statistics();
        self.earlier.samples += statistics.samples;
        self.earlier.instructions += statistics.instructions;
        self.earlier.unplaced_samples += statistics.unplaced_samples;
        self.earlier.harts = self.earlier.harts.max(finished.harts());
        self.pid = pid;
        self.tid = tid;
        for mapping in mappings {
            if !self.mappings.contains(&mapping) {
                self.mappings.push(mapping);
            }
        }
        Ok(())
    }

    /// Takes the next element of the trace (in the trace's order) and writes the
    /// samples it completes. `instruction_address(start, index)` gives the address of
    /// instruction `index` of the range from `start` that `element` is (see
    /// [`BranchSampler::add`]).
    pub fn add(
        &mut self,
        element: &TraceElement,
        instruction_address: impl FnMut(u64, u32) -> Option<u64>,
    ) -> Result<(), TraceInjectError> {
        if matches!(element.kind, ElementKind::Gap { .. }) {
            self.gaps += 1;
        }
        let Self {
            writer,
            sampler,
            pid,
            tid,
            entries,
            ..
        } = self;
        let period = sampler.options().period;
        let task = Task {
            pid: *pid,
            tid: *tid,
        };
        sampler.add(element, instruction_address, |sample| {
            write_sample(writer, entries, task, period, sample)
        })
    }

    /// Writes the feature sections (`metadata`, with the number of harts as the CPU
    /// counts and a HEADER_BUILD_ID entry per mapped file with a build id) and the
    /// final header; returns the writer at the end of the file and what was written.
    pub fn finish(self, mut metadata: Metadata) -> Result<(W, TraceInjected), TraceInjectError> {
        let statistics = self.sampler.statistics();
        let harts = self.sampler.harts().max(self.earlier.harts);
        let cpus = u32::try_from(harts.max(1)).unwrap_or(u32::MAX);
        metadata.nr_cpus_available = cpus;
        metadata.nr_cpus_online = cpus;
        for mapping in &self.mappings {
            let Some(build_id) = &mapping.build_id else {
                continue;
            };
            if metadata
                .build_ids
                .iter()
                .any(|entry| entry.filename == mapping.path)
            {
                continue;
            }
            metadata.build_ids.push(BuildIdEntry {
                // perf's HOST_KERNEL_ID: the build ids of the host machine's files.
                pid: -1,
                misc: MISC_USER,
                build_id: build_id.clone(),
                filename: mapping.path.clone(),
            });
        }
        let out = self.writer.finish(&metadata)?;
        Ok((
            out,
            TraceInjected {
                samples: statistics.samples + self.earlier.samples,
                instructions: statistics.instructions + self.earlier.instructions,
                unplaced_samples: statistics.unplaced_samples + self.earlier.unplaced_samples,
                gaps: self.gaps,
                harts,
            },
        ))
    }
}

/// A process's COMM and the MMAP2 of each of its mappings.
fn write_process<W: Write + Seek>(
    writer: &mut PerfDataWriter<W>,
    pid: u32,
    comm: &str,
    mappings: &[ElfMapping],
) -> Result<(), TraceInjectError> {
    let sample_id = SampleId {
        pid: Some(pid),
        tid: Some(pid),
        time: Some(0),
        cpu: Some(0),
        ..SampleId::default()
    };
    writer.write_comm(
        0,
        &CommRecord {
            pid,
            tid: pid,
            comm: comm.as_bytes(),
            exec: true,
            sample_id,
        },
    )?;
    for mapping in mappings {
        let file_id = match &mapping.build_id {
            Some(build_id) => Mmap2FileId::BuildId(build_id),
            None => Mmap2FileId::Inode {
                maj: 0,
                min: 0,
                ino: 0,
                ino_generation: 0,
            },
        };
        writer.write_mmap2(
            0,
            MISC_USER,
            &Mmap2Record {
                pid,
                tid: pid,
                addr: mapping.start,
                len: mapping.length,
                pgoff: mapping.file_offset,
                file_id,
                prot: (libc_prot::READ | libc_prot::EXEC),
                flags: libc_prot::MAP_PRIVATE,
                filename: mapping.path.as_bytes(),
                sample_id,
            },
        )?;
    }
    Ok(())
}

/// `PROT_*` and `MAP_*` of the mappings, as Linux defines them on every architecture.
mod libc_prot {
    pub const READ: u32 = 1;
    pub const EXEC: u32 = 4;
    pub const MAP_PRIVATE: u32 = 2;
}

/// The one event: retired user instructions every `period`, with branch stacks of
/// every kind of user branch, its samples carrying the fields perf's LBR tools read.
fn attr(period: u64) -> perf_event_attr {
    let sample_type = [
        abi::PERF_SAMPLE_IP,
        abi::PERF_SAMPLE_TID,
        abi::PERF_SAMPLE_TIME,
        abi::PERF_SAMPLE_CPU,
        abi::PERF_SAMPLE_PERIOD,
        abi::PERF_SAMPLE_BRANCH_STACK,
    ]
    .into_iter()
    .fold(0, |bits, bit| bits | u64::from(bit));
    let mut attr = perf_event_attr {
        type_: abi::PERF_TYPE_HARDWARE,
        size: abi::PERF_ATTR_SIZE_VER7,
        config: u64::from(abi::PERF_COUNT_HW_INSTRUCTIONS),
        sample_type,
        branch_sample_type: u64::from(abi::PERF_SAMPLE_BRANCH_ANY)
            | u64::from(abi::PERF_SAMPLE_BRANCH_USER),
        ..Default::default()
    };
    attr.sample_period = period;
    // What `perf record -e instructions:u` sets: user code only, with the side band
    // perf needs to name the samples' code.
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_sample_id_all(1);
    attr
}

fn write_sample<W: Write + Seek>(
    writer: &mut PerfDataWriter<W>,
    entries: &mut Vec<u8>,
    task: Task,
    period: u64,
    sample: &BranchSample<'_>,
) -> Result<(), TraceInjectError> {
    entries.clear();
    for branch in sample.stack {
        // A trace knows nothing of prediction or cycles: the flags stay 0.
        let entry = BranchEntry {
            from: branch.from,
            to: branch.to,
            ..BranchEntry::default()
        };
        entries.extend_from_slice(&entry.to_bytes());
    }
    let branch_stack = BranchStack::from_bytes(None, entries);
    writer.write_sample(
        0,
        &Sample {
            misc: MISC_USER,
            ip: Some(sample.address),
            pid: Some(task.pid),
            tid: Some(task.tid),
            time: Some(sample.time.unwrap_or(0)),
            cpu: Some(u32::from(sample.hart)),
            period: Some(period),
            branch_stack,
            ..Sample::default()
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use perf_data::PerfDataReader;
    use trace_elements::RangeEnd;

    use super::*;

    fn range(start: u64, instructions: u32, end: RangeEnd, next: u64) -> TraceElement {
        TraceElement {
            hart: 0,
            offset: 0,
            kind: ElementKind::InstructionRange {
                start,
                last: start + 4 * (u64::from(instructions) - 1),
                instructions,
                end,
                next: Some(next),
            },
        }
    }

    fn mapping() -> ElfMapping {
        ElfMapping {
            path: "/bin/program".to_owned(),
            start: 0x10000,
            length: 0x2000,
            file_offset: 0,
            build_id: Some(vec![0xab; 20]),
        }
    }

    #[test]
    fn samples_follow_the_side_band_with_their_stacks() {
        let options = TraceInjectOptions::new(
            SamplerOptions::new(5, 16),
            42,
            "program".to_owned(),
            vec![mapping()],
        );
        let mut injector = TraceInjector::new(Cursor::new(Vec::new()), options).unwrap();
        for element in [
            range(0x10000, 3, RangeEnd::Call, 0x10100),
            range(0x10100, 4, RangeEnd::Return, 0x1000c),
            range(0x1000c, 4, RangeEnd::Sequential, 0x1001c),
        ] {
            injector
                .add(&element, |start, index| Some(start + 4 * u64::from(index)))
                .unwrap();
        }
        let (out, injected) = injector
            .finish(Metadata::from_host("rvperf", Vec::new()))
            .unwrap();
        assert_eq!(
            injected,
            TraceInjected {
                samples: 2,
                instructions: 11,
                unplaced_samples: 0,
                gaps: 0,
                harts: 1,
            }
        );
        let bytes = out.into_inner();
        let reader = PerfDataReader::from_bytes(&bytes, "injected").unwrap();
        let mut types = Vec::new();
        let mut samples = Vec::new();
        for record in reader.records() {
            let record = record.unwrap();
            types.push(record.record_type);
            if record.record_type == abi::PERF_RECORD_SAMPLE {
                let sample = reader.parse_sample(&record).unwrap();
                let stack: Vec<(u64, u64)> = sample
                    .branch_stack
                    .unwrap()
                    .iter()
                    .map(|entry| (entry.from, entry.to))
                    .collect();
                assert_eq!((sample.pid, sample.tid), (Some(42), Some(42)));
                assert_eq!(sample.period, Some(5));
                samples.push((sample.ip.unwrap(), stack));
            }
        }
        assert_eq!(types[..2], [abi::PERF_RECORD_COMM, abi::PERF_RECORD_MMAP2]);
        assert_eq!(
            samples,
            [
                (0x10104, vec![(0x10008, 0x10100)]),
                (0x10014, vec![(0x1010c, 0x1000c), (0x10008, 0x10100)]),
            ]
        );
        let build_ids = &reader.info().build_ids;
        assert_eq!(build_ids.len(), 1);
        assert_eq!(build_ids[0].filename, "/bin/program");
    }

    #[test]
    fn bad_sampler_options_are_refused() {
        let options = TraceInjectOptions::new(
            SamplerOptions::new(5, 8),
            42,
            "program".to_owned(),
            vec![mapping()],
        );
        let error = TraceInjector::new(Cursor::new(Vec::new()), options).unwrap_err();
        assert!(matches!(
            error,
            TraceInjectError::Sampler(SamplerOptionsError::Depth { depth: 8 })
        ));
    }
}
