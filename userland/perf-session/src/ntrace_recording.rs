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
    pub pid: u32,
    pub filename: String,
    pub start: u64,
    pub length: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub build_id: Option<Vec<u8>>,
}

#[derive(Debug)]
pub struct NtraceRecording {
    pub info: NtraceInfo,
    pub pieces: Vec<TracePiece>,
    /// Bytes missing between the pieces.
    pub lost_bytes: u64,
    pub mappings: Vec<ExecutableMapping>,
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

fn u64_at(body: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?))
}

pub fn read_ntrace_recording(
    reader: &PerfDataReader<'_>,
) -> Result<NtraceRecording, NtraceRecordingError> {
    let mut info = None;
    let mut pieces: Vec<TracePiece> = Vec::new();
    let mut lost_bytes = 0u64;
    let mut mappings: Vec<ExecutableMapping> = Vec::new();
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
            _ => {
                if let Ok(Record::Mmap2(mmap)) = reader.parse_record(&record) {
                    if mmap.prot & PROT_EXEC == 0 || !mmap.filename.starts_with(b"/") {
                        continue;
                    }
                    let build_id = match mmap.file_id {
                        Mmap2FileId::BuildId(id) => Some(id.to_vec()),
                        _ => None,
                    };
                    let mapping = ExecutableMapping {
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
            }
        }
    }
    let info = info.ok_or(NtraceRecordingError::NotATrace)?;
    Ok(NtraceRecording {
        info,
        pieces,
        lost_bytes,
        mappings,
    })
}

/// Why a mapping's file is not part of the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementProblem {
    /// The file could not be read (not on this machine, or not under `--symfs`).
    Unreadable { filename: String, reason: String },
    /// Not an ELF file the code image reads.
    NotElf { filename: String, reason: String },
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
    /// The ELF files of the executable mappings, each placed where it was mapped (the
    /// address of its lowest loadable segment, `None` for an executable at its link
    /// addresses), for [`crate::TraceCode::load`]. `read` gives a file's bytes by its
    /// recorded name (the caller's symfs and build-id cache). Mappings made during the
    /// recording come before those synthesized at its start; a file whose code would
    /// overlap code already placed is left out (one address space: attributing the
    /// trace to processes by their context switches is not done yet).
    pub fn placed_files(
        &self,
        read: impl Fn(&str) -> std::io::Result<(std::path::PathBuf, Vec<u8>)>,
    ) -> (Vec<crate::PlacedElf>, Vec<PlacementProblem>) {
        use object::{Object, ObjectKind, ObjectSegment};
        let mut placed = Vec::new();
        let mut problems = Vec::new();
        let mut taken: Vec<(u64, u64)> = Vec::new();
        let mut seen: Vec<(&str, u64)> = Vec::new();
        for mapping in self.mappings.iter().rev() {
            if seen.contains(&(mapping.filename.as_str(), mapping.start)) {
                continue;
            }
            seen.push((mapping.filename.as_str(), mapping.start));
            let (path, bytes) = match read(&mapping.filename) {
                Ok(found) => found,
                Err(error) => {
                    problems.push(PlacementProblem::Unreadable {
                        filename: mapping.filename.clone(),
                        reason: error.to_string(),
                    });
                    continue;
                }
            };
            let file = match object::File::parse(&*bytes) {
                Ok(file) => file,
                Err(error) => {
                    problems.push(PlacementProblem::NotElf {
                        filename: mapping.filename.clone(),
                        reason: error.to_string(),
                    });
                    continue;
                }
            };
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
