//! An N-Trace recording (`rvperf trace record`'s perf.data) read back: the encoder
//! configuration of its AUXTRACE_INFO (`perf_abi::ntrace`), the trace of its AUXTRACE
//! chunks as contiguous pieces (a gap between two pieces where the sink overwrote
//! bytes before they were read), and the executable file mappings of its side-band
//! (MMAP2, the ones synthesized at the start included). No I/O: the caller has the
//! file in a [`PerfDataReader`].

use perf_abi::ntrace::{NtraceInfo, NtraceInfoError, RVPERF_AUXTRACE_NTRACE};
use perf_abi::{Mmap2FileId, Record};
use perf_data::{PerfDataReader, ReadError, PERF_RECORD_AUXTRACE, PERF_RECORD_AUXTRACE_INFO};

use crate::aux::auxtrace_type;

/// `PROT_EXEC` (the same on every Linux architecture).
const PROT_EXEC: u32 = 4;

/// A run of the trace with no bytes missing inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePiece {
    /// Position of the first byte in everything the sink wrote.
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// An executable file mapping of the recording's side-band.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutableMapping {
    /// When it was made, in perf time (0: it existed when the recording started).
    pub time: u64,
    pub pid: u32,
    pub filename: String,
    pub start: u64,
    pub length: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub build_id: Option<Vec<u8>>,
}

/// A thread: its process id and its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
}

/// A context switch on a CPU (PERF_RECORD_SWITCH_CPU_WIDE): from `time` on, `next`
/// runs there instead of `previous`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSwitch {
    pub time: u64,
    pub cpu: u32,
    pub previous: Option<Task>,
    pub next: Option<Task>,
}

/// A command name given (PERF_RECORD_COMM): at `time`, or by `exec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandName {
    pub time: u64,
    pub task: Task,
    pub comm: String,
    /// The name came with an exec: the process runs another program from `time` on.
    pub exec: bool,
}

/// A fork (PERF_RECORD_FORK): `child` started at `time` as a copy of `parent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskFork {
    pub time: u64,
    pub parent: Task,
    pub child: Task,
}

/// Where bytes are missing in [`NtraceRecording::joined_trace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinedGap {
    /// The position in the joined trace of the first byte after the gap.
    pub position: u64,
    /// Bytes the sink wrote there that were not read.
    pub lost: u64,
}

#[derive(Debug)]
pub struct NtraceRecording {
    pub info: NtraceInfo,
    /// The kernel's mapping, for a trace that follows the kernel.
    pub kernel: Option<KernelMapping>,
    pub pieces: Vec<TracePiece>,
    /// Bytes missing between the pieces.
    pub lost_bytes: u64,
    pub mappings: Vec<ExecutableMapping>,
    /// The side-band that says which task ran where and when, in file order.
    pub switches: Vec<TaskSwitch>,
    pub comms: Vec<CommandName>,
    pub forks: Vec<TaskFork>,
}

/// The kernel's mapping as perf records it (`[kernel.kallsyms]_text`): which kernel ran,
/// and where, for its vmlinux to be found and moved to where it ran (KASLR).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMapping {
    /// The symbol whose run-time address `address` is (`_text`).
    pub symbol: String,
    pub address: u64,
    pub build_id: Option<Vec<u8>>,
}

#[derive(Debug, thiserror::Error)]
pub enum NtraceRecordingError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("no N-Trace in this perf.data (no PERF_RECORD_AUXTRACE_INFO of rvperf trace record)")]
    NotATrace,
    #[error("PERF_RECORD_AUXTRACE_INFO at file offset {offset:#x}: {source}")]
    Info {
        offset: u64,
        #[source]
        source: NtraceInfoError,
    },
    #[error("PERF_RECORD_AUXTRACE at file offset {offset:#x}: {what}")]
    Chunk { offset: u64, what: &'static str },
}

/// The AUXTRACE record's fields after the header: size, offset, reference, idx, tid,
/// cpu, reserved.
const AUXTRACE_BODY: usize = 40;

/// A task of a record's pid and tid fields, when it has both.
/// The task a record names; `None` without one, and for perf's -1 (a task that was
/// exiting when the record was written has no pid left to give).
fn task_of(pid: Option<u32>, tid: Option<u32>) -> Option<Task> {
    const NO_TASK: u32 = u32::MAX;
    let (pid, tid) = (pid?, tid?);
    (pid != NO_TASK && tid != NO_TASK).then_some(Task { pid, tid })
}

fn u64_at(body: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?))
}

/// Whether `reader`'s recording is an N-Trace recording: its AUXTRACE_INFO comes before
/// any sample, so a sampled recording is told apart at its first sample.
pub fn is_ntrace_recording(reader: &PerfDataReader<'_>) -> Result<bool, ReadError> {
    let mut records = reader.records();
    while let Some(record) = records.next_record()? {
        match record.record_type {
            PERF_RECORD_AUXTRACE_INFO => {
                return Ok(auxtrace_type(&record) == RVPERF_AUXTRACE_NTRACE)
            }
            perf_abi::sys::bindings::PERF_RECORD_SAMPLE => return Ok(false),
            _ => {}
        }
    }
    Ok(false)
}

pub fn read_ntrace_recording(
    reader: &PerfDataReader<'_>,
) -> Result<NtraceRecording, NtraceRecordingError> {
    let mut info = None;
    let mut pieces: Vec<TracePiece> = Vec::new();
    let mut lost_bytes = 0u64;
    let mut mappings: Vec<ExecutableMapping> = Vec::new();
    let mut switches = Vec::new();
    let mut comms = Vec::new();
    let mut forks = Vec::new();
    let mut kernel = None;
    let mut records = reader.records();
    while let Some(record) = records.next_record()? {
        match record.record_type {
            PERF_RECORD_AUXTRACE_INFO if auxtrace_type(&record) == RVPERF_AUXTRACE_NTRACE => {
                let words: Vec<u64> = record
                    .body
                    .get(8..)
                    .unwrap_or_default()
                    .chunks_exact(8)
                    .filter_map(|word| Some(u64::from_le_bytes(word.try_into().ok()?)))
                    .collect();
                info = Some(NtraceInfo::from_words(&words).map_err(|source| {
                    NtraceRecordingError::Info {
                        offset: record.offset,
                        source,
                    }
                })?);
            }
            PERF_RECORD_AUXTRACE if info.is_some() => {
                let bad = |what| NtraceRecordingError::Chunk {
                    offset: record.offset,
                    what,
                };
                if record.body.len() < AUXTRACE_BODY {
                    return Err(bad("record shorter than its fields"));
                }
                let (Some(offset), Some(reference)) =
                    (u64_at(record.body, 8), u64_at(record.body, 16))
                else {
                    return Err(bad("record shorter than its fields"));
                };
                let length = usize::try_from(reference)
                    .ok()
                    .filter(|&length| length <= record.aux_data.len())
                    .ok_or_else(|| bad("more trace bytes than the chunk holds"))?;
                let bytes = &record.aux_data[..length];
                match pieces.last_mut() {
                    Some(last) => {
                        let end = last.offset + last.bytes.len() as u64;
                        if offset < end {
                            return Err(bad("chunk overlaps the one before"));
                        }
                        if offset == end {
                            last.bytes.extend_from_slice(bytes);
                        } else {
                            lost_bytes += offset - end;
                            pieces.push(TracePiece {
                                offset,
                                bytes: bytes.to_vec(),
                            });
                        }
                    }
                    None => {
                        lost_bytes += offset;
                        pieces.push(TracePiece {
                            offset,
                            bytes: bytes.to_vec(),
                        });
                    }
                }
            }
            _ => match reader.parse_record(&record) {
                Ok(Record::Mmap2(mmap))
                    if mmap.filename.starts_with(symbolize::KERNEL_DSO.as_bytes()) =>
                {
                    kernel = Some(KernelMapping {
                        symbol: String::from_utf8_lossy(
                            &mmap.filename[symbolize::KERNEL_DSO.len()..],
                        )
                        .into_owned(),
                        // perf puts the named symbol's run-time address in pgoff.
                        address: mmap.pgoff,
                        build_id: match mmap.file_id {
                            Mmap2FileId::BuildId(id) if !id.is_empty() => Some(id.to_vec()),
                            _ => None,
                        },
                    });
                }
                Ok(Record::Mmap2(mmap)) => {
                    // Files, and the vDSO (no file: its copy is found by build id).
                    let named = mmap.filename.starts_with(b"/")
                        || mmap.filename == symbolize::VDSO_NAME.as_bytes();
                    if mmap.prot & PROT_EXEC == 0 || !named {
                        continue;
                    }
                    let build_id = match mmap.file_id {
                        // A mapping of no file (the vDSO) has an empty one.
                        Mmap2FileId::BuildId(id) if !id.is_empty() => Some(id.to_vec()),
                        _ => None,
                    };
                    let mapping = ExecutableMapping {
                        time: mmap.sample_id.time.unwrap_or(0),
                        pid: mmap.pid,
                        filename: String::from_utf8_lossy(mmap.filename).into_owned(),
                        start: mmap.addr,
                        length: mmap.len,
                        offset: mmap.pgoff,
                        build_id,
                    };
                    if !mappings.contains(&mapping) {
                        mappings.push(mapping);
                    }
                }
                Ok(Record::SwitchCpuWide(switch)) => {
                    let (Some(time), Some(cpu)) = (switch.sample_id.time, switch.sample_id.cpu)
                    else {
                        continue;
                    };
                    let this = task_of(switch.sample_id.pid, switch.sample_id.tid);
                    let other = task_of(switch.next_prev_pid, switch.next_prev_tid);
                    let (previous, next) = if switch.out {
                        (this, other)
                    } else {
                        (other, this)
                    };
                    switches.push(TaskSwitch {
                        time,
                        cpu,
                        previous,
                        next,
                    });
                }
                Ok(Record::Comm(comm)) => comms.push(CommandName {
                    time: comm.sample_id.time.unwrap_or(0),
                    task: Task {
                        pid: comm.pid,
                        tid: comm.tid,
                    },
                    comm: String::from_utf8_lossy(comm.comm).into_owned(),
                    exec: comm.exec,
                }),
                Ok(Record::Fork(fork)) => forks.push(TaskFork {
                    time: fork.time,
                    parent: Task {
                        pid: fork.ppid,
                        tid: fork.ptid,
                    },
                    child: Task {
                        pid: fork.pid,
                        tid: fork.tid,
                    },
                }),
                _ => {}
            },
        }
    }
    let info = info.ok_or(NtraceRecordingError::NotATrace)?;
    // The build ids of the header (HEADER_BUILD_ID, read by the recorder from the files
    // themselves) for mappings whose record carried none.
    for mapping in &mut mappings {
        if mapping.build_id.is_none() {
            mapping.build_id = reader
                .info()
                .build_ids
                .iter()
                .find(|entry| entry.filename == mapping.filename)
                .map(|entry| entry.build_id.clone());
        }
    }
    Ok(NtraceRecording {
        info,
        kernel,
        pieces,
        lost_bytes,
        mappings,
        switches,
        comms,
        forks,
    })
}

/// Why a mapping's file is not part of the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementProblem {
    /// The file could not be read (not on this machine, or not under `--symfs`).
    Unreadable { filename: String, reason: String },
    /// Not an ELF file the code image reads.
    NotElf { filename: String, reason: String },
    /// The file found is not the one that ran: its build id differs from the recorded.
    BuildIdDiffers {
        filename: String,
        recorded: Vec<u8>,
        found: Option<Vec<u8>>,
    },
    /// Its code would overlap code already placed (another process's, at the same
    /// addresses): the trace of one address space is decoded with the first.
    Overlaps {
        filename: String,
        pid: u32,
        start: u64,
    },
}

impl std::fmt::Display for PlacementProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlacementProblem::Unreadable { filename, reason } => write!(f, "{filename}: {reason}"),
            PlacementProblem::NotElf { filename, reason } => {
                write!(f, "{filename}: not an ELF file: {reason}")
            }
            PlacementProblem::BuildIdDiffers {
                filename,
                recorded,
                found,
            } => {
                let hex = |bytes: &[u8]| {
                    bytes
                        .iter()
                        .map(|byte| format!("{byte:02x}"))
                        .collect::<String>()
                };
                write!(
                    f,
                    "{filename}: build id {} is not the recorded {}: not the file that ran, left out",
                    found.as_deref().map_or_else(|| "(none)".to_owned(), hex),
                    hex(recorded)
                )
            }
            PlacementProblem::Overlaps {
                filename,
                pid,
                start,
            } => write!(
                f,
                "{filename} of pid {pid} at {start:#x} overlaps code already placed: left out"
            ),
        }
    }
}

impl NtraceRecording {
    /// The pieces one after the other (a raw trace), and where bytes are missing
    /// between them (before the first piece too, when the sink overwrote its start).
    pub fn joined_trace(&self) -> (Vec<u8>, Vec<JoinedGap>) {
        let mut bytes = Vec::new();
        let mut gaps = Vec::new();
        let mut end = 0;
        for piece in &self.pieces {
            if piece.offset > end {
                gaps.push(JoinedGap {
                    position: bytes.len() as u64,
                    lost: piece.offset - end,
                });
            }
            bytes.extend_from_slice(&piece.bytes);
            end = piece.offset + piece.bytes.len() as u64;
        }
        (bytes, gaps)
    }

    /// The ELF files of every executable mapping of the recording, as
    /// [`place_files`] places them (one address space for all: for a trace attributed
    /// to its processes, each process's own, `crate::ntrace_attribution`).
    pub fn placed_files<B: AsRef<[u8]>>(
        &self,
        read: impl Fn(&str, Option<&[u8]>) -> std::io::Result<(std::path::PathBuf, B)>,
    ) -> (Vec<crate::PlacedElf>, Vec<PlacementProblem>) {
        let mappings: Vec<&ExecutableMapping> = self.mappings.iter().collect();
        place_files(&mappings, read)
    }
}

/// Why no vmlinux stands in for the kernel's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmlinuxProblem {
    #[error("the recording does not say where the kernel ran (no [kernel.kallsyms] mapping)")]
    NotPlaced,
    #[error("the recording has no build id of the kernel")]
    NoBuildId,
    #[error("no vmlinux with the kernel's build id {build_id} was found (looked for {looked_at})")]
    NotFound { build_id: String, looked_at: String },
    #[error("{}: no symbol {symbol} to place it by", path.display())]
    NoSymbol {
        path: std::path::PathBuf,
        symbol: String,
    },
    #[error("{}: no loadable segment", path.display())]
    NoSegments { path: std::path::PathBuf },
    #[error("{}: moved by {offset:#x} it leaves the address space", path.display())]
    BadOffset {
        path: std::path::PathBuf,
        offset: u64,
    },
}

/// The kernel's vmlinux, for a trace of the kernel recorded without a copy of its code:
/// the first of `candidates` (`symbolize::kernel_image_candidates`) whose build id is
/// the recorded kernel's, placed where the kernel ran: moved by the difference between
/// the recorded run-time address of the mapping's symbol (`_text`) and vmlinux's
/// (KASLR). `read` gives a candidate's bytes.
pub fn place_vmlinux<B: AsRef<[u8]>>(
    kernel: Option<&KernelMapping>,
    candidates: &[std::path::PathBuf],
    read: impl Fn(&std::path::Path) -> std::io::Result<B>,
) -> Result<crate::PlacedElf, VmlinuxProblem> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let kernel = kernel.ok_or(VmlinuxProblem::NotPlaced)?;
    let build_id = kernel
        .build_id
        .as_deref()
        .ok_or(VmlinuxProblem::NoBuildId)?;
    for path in candidates {
        let Ok(bytes) = read(path) else {
            continue;
        };
        let bytes = bytes.as_ref();
        let Ok(file) = object::File::parse(bytes) else {
            continue;
        };
        if file.build_id().ok().flatten() != Some(build_id) {
            continue;
        }
        let no_symbol = || VmlinuxProblem::NoSymbol {
            path: path.clone(),
            symbol: kernel.symbol.clone(),
        };
        let link = file
            .symbols()
            .find(|symbol| symbol.name() == Ok(kernel.symbol.as_str()))
            .map(|symbol| symbol.address())
            .ok_or_else(no_symbol)?;
        let offset = kernel.address.wrapping_sub(link);
        let load_address = if offset == 0 {
            None
        } else {
            // Where the lowest loadable segment's page goes (`code_image::load_elf`).
            let lowest = file
                .segments()
                .map(|segment| segment.address())
                .min()
                .ok_or_else(|| VmlinuxProblem::NoSegments { path: path.clone() })?;
            let page = lowest & !0xfff;
            let moved = if kernel.address >= link {
                page.checked_add(kernel.address - link)
            } else {
                page.checked_sub(link - kernel.address)
            };
            let moved = moved.ok_or_else(|| VmlinuxProblem::BadOffset {
                path: path.clone(),
                offset,
            })?;
            Some(moved)
        };
        return Ok(crate::PlacedElf {
            path: path.clone(),
            load_address,
        });
    }
    Err(VmlinuxProblem::NotFound {
        build_id: build_id.iter().map(|byte| format!("{byte:02x}")).collect(),
        looked_at: candidates
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The ELF files of `mappings`, each placed where it was mapped (the address of its
/// lowest loadable segment, `None` for an executable at its link addresses), for
/// [`crate::TraceCode::load`]. `read` gives a file's bytes by its recorded name and
/// build id (the caller's build-id cache and symfs); a file whose build id is not the
/// recorded one is left out. Later mappings come first; a file whose code would overlap code already
/// placed is left out.
pub fn place_files<B: AsRef<[u8]>>(
    mappings: &[&ExecutableMapping],
    read: impl Fn(&str, Option<&[u8]>) -> std::io::Result<(std::path::PathBuf, B)>,
) -> (Vec<crate::PlacedElf>, Vec<PlacementProblem>) {
    {
        use object::{Object, ObjectKind, ObjectSegment};
        let mut placed = Vec::new();
        let mut problems = Vec::new();
        let mut taken: Vec<(u64, u64)> = Vec::new();
        let mut seen: Vec<(&str, u64)> = Vec::new();
        for mapping in mappings.iter().rev() {
            if seen.contains(&(mapping.filename.as_str(), mapping.start)) {
                continue;
            }
            seen.push((mapping.filename.as_str(), mapping.start));
            let (path, bytes) = match read(&mapping.filename, mapping.build_id.as_deref()) {
                Ok(found) => found,
                Err(error) => {
                    problems.push(PlacementProblem::Unreadable {
                        filename: mapping.filename.clone(),
                        reason: error.to_string(),
                    });
                    continue;
                }
            };
            let bytes = bytes.as_ref();
            let file = match object::File::parse(bytes) {
                Ok(file) => file,
                Err(error) => {
                    problems.push(PlacementProblem::NotElf {
                        filename: mapping.filename.clone(),
                        reason: error.to_string(),
                    });
                    continue;
                }
            };
            if let Some(recorded) = &mapping.build_id {
                let found = crate::trace::elf_build_id(bytes);
                if found.as_ref() != Some(recorded) {
                    problems.push(PlacementProblem::BuildIdDiffers {
                        filename: mapping.filename.clone(),
                        recorded: recorded.clone(),
                        found,
                    });
                    continue;
                }
            }
            let segments: Vec<(u64, u64, u64, u64)> = file
                .segments()
                .filter_map(|segment| {
                    let (offset, size) = segment.file_range();
                    Some((segment.address(), segment.size(), offset, size))
                        .filter(|_| segment.size() > 0)
                })
                .collect();
            let Some(lowest) = segments.iter().map(|segment| segment.0).min() else {
                continue;
            };
            // The segment holding the mapping's file offset gives the load bias.
            let holder = segments.iter().find(|(_, _, offset, size)| {
                *offset <= mapping.offset
                    && mapping.offset < offset.saturating_add(*size).next_multiple_of(4096)
            });
            let bias = match (file.kind(), holder) {
                (ObjectKind::Executable, _) => 0,
                (_, Some((address, _, offset, _))) => mapping
                    .start
                    .wrapping_add(*offset)
                    .wrapping_sub(*address)
                    .wrapping_sub(mapping.offset),
                (_, None) => mapping.start.wrapping_sub(mapping.offset),
            };
            let span = segments
                .iter()
                .map(|(address, size, _, _)| {
                    (
                        address.wrapping_add(bias),
                        address.wrapping_add(bias).saturating_add(*size),
                    )
                })
                .fold((u64::MAX, 0), |(low, high), (start, end)| {
                    (low.min(start), high.max(end))
                });
            if taken
                .iter()
                .any(|&(start, end)| span.0 < end && start < span.1)
            {
                problems.push(PlacementProblem::Overlaps {
                    filename: mapping.filename.clone(),
                    pid: mapping.pid,
                    start: mapping.start,
                });
                continue;
            }
            taken.push(span);
            placed.push(crate::PlacedElf {
                path,
                load_address: (file.kind() != ObjectKind::Executable)
                    .then(|| lowest.wrapping_add(bias)),
            });
        }
        (placed, problems)
    }
}
