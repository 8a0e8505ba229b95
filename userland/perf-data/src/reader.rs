//! Reader for perf.data in file mode and in pipe mode (`perf record -o -`). The header,
//! attrs and feature sections are read here, following tools/perf/util/header.c; records
//! are parsed by `perf_abi`'s parser, the one rvperf reads ring buffers with, borrowing
//! from the mapped file.
//!
//! The data section is walked in file order: callers need each record's offset (for
//! error reports) and the raw order (perf's ordered-events rules are theirs to apply).
//! Every offset, size and count read from the file is checked against the buffer before
//! it is used, with checked arithmetic: a corrupt file gives a [`ReadError`] naming the
//! file and the offset, never a panic or an allocation sized by the file.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::{
    attr_from_bytes, parse_record, Record, RecordError, Sample, SampleFormat, RECORD_HEADER_SIZE,
};

use crate::format::*;

/// Errors from [`PerfDataReader`]: every variant names the file and, for bad data, the
/// byte offset where the problem was found.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{file}: cannot read file")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: offset {offset:#x}: {what}")]
    Malformed {
        file: String,
        offset: u64,
        what: String,
    },
    /// A record whose body does not hold what its event's format says; `offset` is
    /// the file offset of its header, the source says where in the body.
    #[error("{file}: offset {offset:#x}: bad record body")]
    Record {
        file: String,
        offset: u64,
        #[source]
        source: RecordError,
    },
}

/// One `HEADER_BUILD_ID` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    pub pid: i32,
    pub misc: u16,
    pub build_id: Vec<u8>,
    pub filename: String,
}

/// Header metadata; strings are `None` when their feature is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderInfo {
    /// Feature bit numbers present (`HEADER_*`).
    pub features: Vec<u32>,
    pub hostname: Option<String>,
    pub os_release: Option<String>,
    pub perf_version: Option<String>,
    pub arch: Option<String>,
    pub cpu_desc: Option<String>,
    pub cmdline: Option<Vec<String>>,
    pub build_ids: Vec<BuildIdEntry>,
}

/// One event of the file.
#[derive(Debug, Clone)]
pub struct AttrInfo {
    /// The attr the event was opened with (the fields this build knows; see `bytes`).
    pub attr: perf_event_attr,
    pub name: Option<String>,
    pub ids: Vec<u64>,
    /// The `struct perf_event_attr` as the file holds it (its own `size` bytes), for
    /// tools that copy it into another file (`rvperf inject`).
    pub bytes: Vec<u8>,
}

/// A record of the data section, located and unparsed: [`PerfDataReader::parse_record`]
/// and [`PerfDataReader::parse_sample`] parse it with its event's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Index into [`PerfDataReader::attrs`]; `None` for records synthesized by the perf
    /// tool (type >= 64), which belong to no event.
    pub attr_index: Option<usize>,
    pub record_type: u32,
    pub misc: u16,
    /// The body after the 8-byte perf_event_header.
    pub body: &'a [u8],
    /// The trace data that follows a PERF_RECORD_AUXTRACE (empty for other records).
    pub aux_data: &'a [u8],
    /// File offset of the record's perf_event_header.
    pub offset: u64,
}

/// A parsed perf.data file held in memory.
#[derive(Debug)]
pub struct PerfDataReader<'a> {
    data: Bytes<'a>,
    file: String,
    info: HeaderInfo,
    attrs: Vec<AttrInfo>,
    /// The record layout of each event, by attr index.
    formats: Vec<SampleFormat>,
    id_to_attr: HashMap<u64, usize>,
    /// Where the records are in `data`.
    records: Range<usize>,
    /// Feature bit -> where its section is in `data`.
    sections: HashMap<u32, Range<usize>>,
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        bytes.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// A file offset for an error report (`usize` is never wider than `u64` here).
fn offset_u64(offset: usize) -> u64 {
    u64::try_from(offset).unwrap_or(u64::MAX)
}

/// The bytes of a perf.data image: mapped from its file, read into memory, or
/// borrowed from the caller.
enum Bytes<'a> {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map) => map,
            Bytes::Owned(bytes) => bytes,
            Bytes::Borrowed(bytes) => bytes,
        }
    }
}

/// The length, not megabytes of bytes.
impl std::fmt::Debug for Bytes<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} bytes", self.len())
    }
}

/// The recording's file in a perf.data directory (perf's `data`; beside it
/// [`DIRECTORY_KCORE`]).
pub const DIRECTORY_DATA: &str = "data";

/// The kernel's code as it ran, in a perf.data directory: perf's `kcore_dir`, here holding
/// [`DIRECTORY_KCORE_ELF`].
pub const DIRECTORY_KCORE: &str = "kcore_dir";

/// The file of [`DIRECTORY_KCORE`] with the kernel's code (perf's name: `kcore`).
pub const DIRECTORY_KCORE_ELF: &str = "kcore";

/// Makes the [`ReadError::Malformed`] of one file.
type BadData<'f> = &'f dyn Fn(u64, &str) -> ReadError;

impl PerfDataReader<'static> {
    /// Maps and parses the file at `path` (reads it when it cannot be mapped, as
    /// a FIFO cannot). A directory is perf's directory format (`perf record --kcore`):
    /// its [`DIRECTORY_DATA`] file is the recording.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let directory_data;
        let mut path = path.as_ref();
        if path.is_dir() {
            directory_data = path.join(DIRECTORY_DATA);
            path = &directory_data;
        }
        let file = path.display().to_string();
        let io_error = |source| ReadError::Io {
            file: file.clone(),
            source,
        };
        let opened = std::fs::File::open(path).map_err(io_error)?;
        let regular = opened.metadata().map_err(io_error)?.is_file();
        if regular {
            // SAFETY: the map is read-only and private to this reader. perf.data
            // files are written once and read afterwards; one truncated by another
            // process while it is read ends this one with SIGBUS, as it does perf
            // report, which maps them too. Reading instead would copy the whole file.
            if let Ok(map) = unsafe { memmap2::Mmap::map(&opened) } {
                return Self::parse(Bytes::Mapped(map), file);
            }
        }
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut &opened, &mut data).map_err(io_error)?;
        Self::parse(Bytes::Owned(data), file)
    }

    /// Parses a perf.data image already read into memory, such as a pipe-mode stream
    /// read from standard input; `file` names it in errors.
    pub fn from_vec(data: Vec<u8>, file: &str) -> Result<Self, ReadError> {
        Self::parse(Bytes::Owned(data), file.to_string())
    }
}

impl<'a> PerfDataReader<'a> {
    /// Parses an in-memory perf.data image; `file` names it in errors.
    pub fn from_bytes(data: &'a [u8], file: &str) -> Result<Self, ReadError> {
        Self::parse(Bytes::Borrowed(data), file.to_string())
    }

    fn parse(data: Bytes<'a>, file: String) -> Result<Self, ReadError> {
        let bad = |offset: u64, what: &str| ReadError::Malformed {
            file: file.clone(),
            offset,
            what: what.to_string(),
        };
        let bytes: &[u8] = &data;
        if bytes.len() < PERF_PIPE_HEADER_SIZE {
            return Err(bad(
                offset_u64(bytes.len()),
                "file shorter than the 16-byte perf.data pipe header",
            ));
        }
        if cfg!(target_endian = "big") || &bytes[0..8] != b"PERFILE2" {
            // perf_abi parses records in this machine's byte order; big-endian files,
            // and hosts, are not among those rvperf serves.
            return Err(bad(0, "not a little-endian perf.data (magic PERFILE2)"));
        }
        let layout = if read_u64(bytes, 8) == Some(offset_u64(PERF_PIPE_HEADER_SIZE)) {
            pipe_layout(bytes, &bad)?
        } else {
            file_layout(bytes, &bad)?
        };
        let Layout {
            attrs,
            sections,
            features,
            records,
        } = layout;
        let section = |feature: u32| {
            sections
                .get(&feature)
                .map(|range| (range.start, &bytes[range.clone()]))
        };
        let string = |feature: u32| section(feature).and_then(|(_, text)| header_string(text));
        let cmdline = section(HEADER_CMDLINE).map(|(_, cmdline)| parse_cmdline(cmdline));
        let build_ids = match section(HEADER_BUILD_ID) {
            Some((start, entries)) => parse_build_ids(entries, start)
                .map_err(|at| bad(offset_u64(at), "bad HEADER_BUILD_ID entry"))?,
            None => Vec::new(),
        };
        let info = HeaderInfo {
            features,
            hostname: string(HEADER_HOSTNAME),
            os_release: string(HEADER_OSRELEASE),
            perf_version: string(HEADER_VERSION),
            arch: string(HEADER_ARCH),
            cpu_desc: string(HEADER_CPUDESC),
            cmdline,
            build_ids,
        };
        let formats = attrs
            .iter()
            .map(|attr| SampleFormat::from_attr(&attr.attr))
            .collect();
        let mut id_to_attr = HashMap::new();
        for (index, attr) in attrs.iter().enumerate() {
            for &id in &attr.ids {
                id_to_attr.insert(id, index);
            }
        }
        Ok(Self {
            data,
            file,
            info,
            attrs,
            formats,
            id_to_attr,
            records,
            sections,
        })
    }

    /// Header metadata.
    pub fn info(&self) -> &HeaderInfo {
        &self.info
    }

    /// The bytes of a header feature section (`HEADER_*`) as the file holds them, in
    /// file mode or from a pipe-mode HEADER_FEATURE record: for tools that copy a
    /// file's features into another (`rvperf inject`).
    pub fn feature_section(&self, feature: u32) -> Option<&[u8]> {
        self.data.get(self.sections.get(&feature)?.clone())
    }

    /// The events, in attr-section order; [`RawRecord::attr_index`] indexes this.
    pub fn attrs(&self) -> &[AttrInfo] {
        &self.attrs
    }

    /// Event names from HEADER_EVENT_DESC (empty string when absent).
    pub fn event_names(&self) -> Vec<String> {
        self.attrs
            .iter()
            .map(|attr| attr.name.clone().unwrap_or_default())
            .collect()
    }

    /// Iterates the data section in file order.
    pub fn records(&self) -> Records<'_> {
        Records {
            reader: self,
            position: self.records.start,
            failed: false,
        }
    }

    /// The event a kernel record belongs to, found by its id as perf finds it.
    fn attr_of(&self, record_type: u32, body: &[u8]) -> Option<usize> {
        if record_type >= PERF_RECORD_USER_TYPE_START {
            return None;
        }
        let first = match self.formats.as_slice() {
            [] | [_] => return Some(0),
            [first, ..] => first,
        };
        // Records without a usable id go to the first event, as perf does.
        Some(
            first
                .record_id(record_type, body)
                .and_then(|id| self.id_to_attr.get(&id).copied())
                .unwrap_or(0),
        )
    }

    /// The record layout of `record`'s event (the default, which reads no trailer,
    /// for records of no event).
    fn format_of(&self, record: &RawRecord<'_>) -> SampleFormat {
        record
            .attr_index
            .and_then(|index| self.formats.get(index))
            .copied()
            .unwrap_or_default()
    }

    /// The time of a kernel record without parsing it: a sample's `time` field, or
    /// the `sample_id_all` trailer of a side-band record (MMAP, COMM, FORK, ...).
    /// `None` when the event records no time, or for records synthesized by
    /// the perf tool.
    pub fn record_time(&self, record: &RawRecord<'_>) -> Option<u64> {
        self.formats
            .get(record.attr_index?)?
            .record_time(record.record_type, record.body)
    }

    /// Parses a record with its event's format; records of the perf tool and kernel
    /// records perf_abi does not decode come back as [`Record::Other`].
    pub fn parse_record<'r>(&self, record: &RawRecord<'r>) -> Result<Record<'r>, ReadError> {
        parse_record(
            record.record_type,
            record.misc,
            record.body,
            &self.format_of(record),
        )
        .map_err(|source| ReadError::Record {
            file: self.file.clone(),
            offset: record.offset,
            source,
        })
    }

    /// Parses a SAMPLE record. Its weight, as perf gives it, is
    /// [`Sample::period_or_attr`] with its event's attr.
    pub fn parse_sample<'r>(&self, record: &RawRecord<'r>) -> Result<Sample<'r>, ReadError> {
        let bad = |what: &str| ReadError::Malformed {
            file: self.file.clone(),
            offset: record.offset,
            what: what.to_string(),
        };
        if record.record_type != abi::PERF_RECORD_SAMPLE {
            return Err(bad("not a SAMPLE record"));
        }
        let index = record
            .attr_index
            .ok_or_else(|| bad("SAMPLE without an event"))?;
        // A file without attrs still gives its records to event 0.
        if index >= self.formats.len() {
            return Err(bad("SAMPLE of a file without events"));
        }
        match self.parse_record(record)? {
            Record::Sample(sample) => Ok(sample),
            _ => Err(bad("not a SAMPLE record")),
        }
    }
}

/// Iterator over the data section; see [`Records::next_record`].
#[derive(Debug)]
pub struct Records<'r> {
    reader: &'r PerfDataReader<'r>,
    position: usize,
    failed: bool,
}

impl<'r> Records<'r> {
    /// The next record; `Ok(None)` at the end of the data section.
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'r>>, ReadError> {
        let reader = self.reader;
        let end = reader.records.end;
        if self.position >= end {
            return Ok(None);
        }
        let bytes: &'r [u8] = &reader.data;
        let bad = |offset: u64, what: &str| ReadError::Malformed {
            file: reader.file.clone(),
            offset,
            what: what.to_string(),
        };
        let at = self.position;
        let extent = record_extent(bytes, at, end, &bad)?;
        // record_extent checked that the record and its trailing data end by `end`.
        let body = &bytes[at + RECORD_HEADER_SIZE..extent.end_of_record];
        let aux_data = &bytes[extent.end_of_record..extent.end];
        self.position = extent.end;
        Ok(Some(RawRecord {
            attr_index: reader.attr_of(extent.record_type, body),
            record_type: extent.record_type,
            misc: extent.misc,
            body,
            aux_data,
            offset: offset_u64(at),
        }))
    }
}

impl<'r> Iterator for Records<'r> {
    type Item = Result<RawRecord<'r>, ReadError>;

    /// Yields one error at most, then stops: after a bad header there is no way to resync.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let next = self.next_record().transpose();
        self.failed = matches!(next, Some(Err(_)));
        next
    }
}

/// `struct perf_header_string`: u32 len, then a NUL-padded string.
fn header_string(bytes: &[u8]) -> Option<String> {
    let len = usize::try_from(read_u32(bytes, 0)?).ok()?;
    let raw = bytes.get(4..4usize.checked_add(len)?)?;
    Some(c_string(raw))
}

/// The text of a NUL-terminated (or NUL-padded) string.
fn c_string(bytes: &[u8]) -> String {
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// HEADER_CMDLINE: u32 count, then that many `perf_header_string`s; what is there of
/// them (a short section gives fewer).
fn parse_cmdline(section: &[u8]) -> Vec<String> {
    let count = read_u32(section, 0).unwrap_or(0);
    let mut rest = section.get(4..).unwrap_or(&[]);
    let mut arguments = Vec::new();
    while u32::try_from(arguments.len()).is_ok_and(|done| done < count) {
        let Some(argument) = header_string(rest) else {
            break;
        };
        arguments.push(argument);
        let next = read_u32(rest, 0)
            .and_then(|len| usize::try_from(len).ok())
            .and_then(|len| len.checked_add(4));
        rest = next.and_then(|next| rest.get(next..)).unwrap_or(&[]);
    }
    arguments
}

/// HEADER_EVENT_DESC: the event names, in event order; checks every count against
/// the section's length. `Err` holds the offset (in the file; `base` is the section's)
/// of the bad entry.
fn parse_event_desc(section: &[u8], base: usize) -> Result<Vec<String>, usize> {
    let at_file = |at: usize| base.saturating_add(at);
    let count = read_u32(section, 0).ok_or(base)?;
    let attr_size = read_u32(section, 4)
        .and_then(|size| usize::try_from(size).ok())
        .filter(|size| (64..=4096).contains(size))
        .ok_or(at_file(4))?;
    let mut names = Vec::new();
    let mut at = 8usize;
    for _ in 0..count {
        let entry = at_file(at);
        // The attr's own size field must fit the declared attr size.
        let own_size = read_u32(section, at.checked_add(4).ok_or(entry)?).ok_or(entry)?;
        if usize::try_from(own_size).map_or(true, |own| own > attr_size) {
            return Err(entry);
        }
        at = at.checked_add(attr_size).ok_or(entry)?;
        let id_count = read_u32(section, at).ok_or(entry)?;
        let name_at = at.checked_add(4).ok_or(entry)?;
        let name_len = read_u32(section, name_at)
            .and_then(|len| usize::try_from(len).ok())
            .ok_or(entry)?;
        let name = section
            .get(name_at..)
            .and_then(header_string)
            .ok_or(entry)?;
        let ids_len = usize::try_from(id_count)
            .ok()
            .and_then(|count| count.checked_mul(8))
            .ok_or(entry)?;
        at = name_at
            .checked_add(4)
            .and_then(|end| end.checked_add(name_len))
            .and_then(|end| end.checked_add(ids_len))
            .filter(|&end| end <= section.len())
            .ok_or(entry)?;
        names.push(name);
    }
    Ok(names)
}

/// HEADER_BUILD_ID: `struct perf_record_header_build_id` after another. `Err` holds
/// the file offset (`base` is the section's) of the bad entry.
fn parse_build_ids(section: &[u8], base: usize) -> Result<Vec<BuildIdEntry>, usize> {
    /// Header, pid, build_id[24]: where the file name starts.
    const FILENAME_AT: usize = 36;
    let mut entries = Vec::new();
    let mut at = 0usize;
    while at < section.len() {
        let bad = base.saturating_add(at);
        let entry = section.get(at..).ok_or(bad)?;
        let misc = read_u16(entry, 4).ok_or(bad)?;
        let size = usize::from(read_u16(entry, 6).ok_or(bad)?);
        if size < FILENAME_AT || size > entry.len() {
            return Err(bad);
        }
        let pid = i32::from_le_bytes(entry[8..12].try_into().map_err(|_| bad)?);
        let id = &entry[12..32];
        let id_len = if misc & PERF_RECORD_MISC_BUILD_ID_SIZE != 0 {
            usize::from(entry[32]).min(20)
        } else {
            20
        };
        entries.push(BuildIdEntry {
            pid,
            misc,
            build_id: id[..id_len].to_vec(),
            filename: c_string(&entry[FILENAME_AT..size]),
        });
        at += size;
    }
    Ok(entries)
}

/// Where a file's parts are, whichever of perf's two layouts it uses.
struct Layout {
    attrs: Vec<AttrInfo>,
    /// Feature bit -> where its section is in the buffer.
    sections: HashMap<u32, Range<usize>>,
    features: Vec<u32>,
    /// Where the records are in the buffer.
    records: Range<usize>,
}

/// A `struct perf_file_section` of the file header: where one of its parts is.
#[derive(Debug, Clone, Copy)]
struct FileSection {
    offset: u64,
    size: u64,
}

impl FileSection {
    /// The section at `at` of `bytes` (zero where the header is short).
    fn read(bytes: &[u8], at: usize) -> Self {
        Self {
            offset: read_u64(bytes, at).unwrap_or(0),
            size: read_u64(bytes, at.saturating_add(8)).unwrap_or(0),
        }
    }

    /// The section's bytes as a range of `bytes`, if it lies inside.
    fn range_in(self, bytes: &[u8]) -> Option<Range<usize>> {
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.size).ok()?)?;
        (end <= bytes.len()).then_some(start..end)
    }
}

/// Offsets in `struct perf_file_header`.
mod file_header {
    pub const SIZE: usize = 8;
    pub const ATTR_SIZE: usize = 16;
    pub const ATTRS: usize = 24;
    pub const DATA: usize = 40;
    pub const EVENT_TYPES: usize = 56;
    pub const FEATURES: usize = 72;
}

/// Events in one file at most: a bound on what a corrupt attr section can make this
/// reader allocate.
const MAX_EVENTS: usize = 4096;

/// File mode: the header points at the attrs, the data and (after the data) the table of
/// feature sections. Every offset and size is checked against the file before use.
fn file_layout(bytes: &[u8], bad: BadData<'_>) -> Result<Layout, ReadError> {
    if bytes.len() < PERF_FILE_HEADER_SIZE {
        return Err(bad(
            offset_u64(bytes.len()),
            "file shorter than the 104-byte perf.data header",
        ));
    }
    let header_word = |at: usize| read_u64(bytes, at).unwrap_or(0);
    if header_word(file_header::SIZE) < offset_u64(PERF_FILE_HEADER_SIZE) {
        return Err(bad(8, "header size field too small"));
    }
    // perf_file_attr: the attr, then the perf_file_section of its ids.
    let file_attr_size = usize::try_from(header_word(file_header::ATTR_SIZE))
        .ok()
        .filter(|size| (64 + PERF_FILE_SECTION_SIZE..=4096).contains(size))
        .ok_or_else(|| bad(16, "implausible perf_file_attr size"))?;
    let attrs_range = FileSection::read(bytes, file_header::ATTRS)
        .range_in(bytes)
        .ok_or_else(|| bad(24, "attr section outside the file"))?;
    let records = FileSection::read(bytes, file_header::DATA)
        .range_in(bytes)
        .ok_or_else(|| bad(40, "data section outside the file"))?;
    let event_types = FileSection::read(bytes, file_header::EVENT_TYPES);
    if event_types.range_in(bytes).is_none() {
        return Err(bad(56, "event_types section outside the file"));
    }
    // A 256-bit map, in four u64 words.
    let features: Vec<u32> = (0..256usize)
        .filter(|bit| header_word(file_header::FEATURES + 8 * (bit / 64)) & 1 << (bit % 64) != 0)
        .filter_map(|bit| u32::try_from(bit).ok())
        .collect();
    // The table of feature sections follows the data, one entry per feature bit.
    let mut sections = HashMap::new();
    for (index, &feature) in features.iter().enumerate() {
        let at = index
            .checked_mul(PERF_FILE_SECTION_SIZE)
            .and_then(|offset| records.end.checked_add(offset))
            .filter(|at| {
                at.checked_add(PERF_FILE_SECTION_SIZE)
                    .is_some_and(|end| end <= bytes.len())
            })
            .ok_or_else(|| bad(offset_u64(records.end), "feature section table truncated"))?;
        let range = FileSection::read(bytes, at)
            .range_in(bytes)
            .ok_or_else(|| bad(offset_u64(at), "feature section outside the file"))?;
        sections.insert(feature, range);
    }
    let names = match sections.get(&HEADER_EVENT_DESC) {
        Some(range) => parse_event_desc(&bytes[range.clone()], range.start)
            .map_err(|at| bad(offset_u64(at), "HEADER_EVENT_DESC is malformed"))?,
        None if event_types.size != 0 => {
            // The pre-2012 event_types layout: rejected rather than validated.
            return Err(bad(56, "legacy event_types section not supported"));
        }
        None => Vec::new(),
    };
    let count = attrs_range.len() / file_attr_size;
    if count > MAX_EVENTS {
        return Err(bad(32, "too many attrs"));
    }
    // As perf_session__read_header: the attrs and their ids from the attr section,
    // the names from HEADER_EVENT_DESC, event by event.
    let mut attrs = Vec::with_capacity(count);
    for index in 0..count {
        // In bounds: `count` entries fit the attr section, which fits the file.
        let at = attrs_range.start + index * file_attr_size;
        let entry = &bytes[at..at + file_attr_size];
        let attr_len = attr_size(entry)
            .map(|size| size.min(file_attr_size - PERF_FILE_SECTION_SIZE))
            .filter(|&len| len >= perf_abi::ATTR_SIZE_VER0)
            .ok_or_else(|| {
                bad(
                    offset_u64(at),
                    "perf_event_attr shorter than its first version",
                )
            })?;
        let attr_bytes = &entry[..attr_len];
        let ids_section = FileSection::read(entry, file_attr_size - PERF_FILE_SECTION_SIZE);
        let ids = ids_section
            .range_in(bytes)
            .map(|range| read_ids(&bytes[range]))
            .ok_or_else(|| bad(offset_u64(at), "attr ids outside the file"))?;
        attrs.push(AttrInfo {
            attr: attr_of_bytes(attr_bytes),
            name: names.get(index).cloned(),
            ids,
            bytes: attr_bytes.to_vec(),
        });
    }
    Ok(Layout {
        attrs,
        sections,
        features,
        records,
    })
}

/// The `size` of the attr at the start of `entry` (PERF_ATTR_SIZE_VER0 when 0, as perf
/// reads it).
fn attr_size(entry: &[u8]) -> Option<usize> {
    match usize::try_from(read_u32(entry, 4)?).ok()? {
        0 => Some(perf_abi::ATTR_SIZE_VER0),
        size => Some(size),
    }
}

/// The attr of an event from its bytes: the fields this build knows (a newer perf's
/// fields past them do not change the layout of records, which is all a reader needs;
/// `rvperf inject`, which copies attrs, refuses them).
fn attr_of_bytes(bytes: &[u8]) -> perf_event_attr {
    let known = &bytes[..bytes.len().min(perf_abi::ATTR_SIZE)];
    // `known` is at least PERF_ATTR_SIZE_VER0 bytes and has no byte past ATTR_SIZE,
    // which is all attr_from_bytes refuses.
    attr_from_bytes(known).unwrap_or_default()
}

/// An array of u64 ids (a trailing partial one is ignored).
fn read_ids(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|id| u64::from_le_bytes(id.try_into().unwrap_or_default()))
        .collect()
}

/// Pipe mode (`perf record -o -`): a 16-byte header, then one stream of records in which
/// perf synthesizes the metadata a file keeps in its header: HEADER_ATTR for each event
/// (with its ids), HEADER_FEATURE for each feature section, EVENT_UPDATE for names. They
/// may come anywhere in the stream, so the whole stream is scanned once for them; the
/// data walk then skips them like any other tool record.
fn pipe_layout(bytes: &[u8], bad: BadData<'_>) -> Result<Layout, ReadError> {
    let records = PERF_PIPE_HEADER_SIZE..bytes.len();
    let mut attrs: Vec<AttrInfo> = Vec::new();
    let mut sections = HashMap::new();
    let mut features = Vec::new();
    let mut names: Vec<EventName> = Vec::new();
    let mut at = records.start;
    while at < records.end {
        let extent = record_extent(bytes, at, records.end, bad)?;
        let body_at = at + RECORD_HEADER_SIZE;
        let body = &bytes[body_at..extent.end_of_record];
        let body_offset = offset_u64(body_at);
        match extent.record_type {
            PERF_RECORD_HEADER_ATTR => {
                let attr_len = attr_size(body)
                    .filter(|&len| len >= perf_abi::ATTR_SIZE_VER0)
                    .ok_or_else(|| {
                        bad(
                            body_offset,
                            "HEADER_ATTR record with a malformed perf_event_attr",
                        )
                    })?;
                let attr_bytes = body
                    .get(..attr_len)
                    .ok_or_else(|| bad(body_offset, "HEADER_ATTR shorter than its attr"))?;
                let ids = read_ids(&body[attr_bytes.len()..]);
                if attrs.len() == MAX_EVENTS {
                    return Err(bad(body_offset, "too many attrs"));
                }
                attrs.push(AttrInfo {
                    attr: attr_of_bytes(attr_bytes),
                    name: None,
                    ids,
                    bytes: attr_bytes.to_vec(),
                });
            }
            PERF_RECORD_HEADER_FEATURE => {
                let feature = read_u64(body, 0)
                    .ok_or_else(|| bad(body_offset, "HEADER_FEATURE without a feature id"))?;
                let feature = u32::try_from(feature)
                    .ok()
                    .filter(|&feature| feature < 256)
                    .ok_or_else(|| bad(body_offset, "HEADER_FEATURE id out of range"))?;
                if !sections.contains_key(&feature) {
                    features.push(feature);
                }
                // The section is the body after the feature id.
                sections.insert(feature, body_at + 8..extent.end_of_record);
            }
            // struct perf_record_event_update: u64 type, u64 id, then the payload.
            PERF_RECORD_EVENT_UPDATE if read_u64(body, 0) == Some(PERF_EVENT_UPDATE__NAME) => {
                if let (Some(id), Some(name)) = (read_u64(body, 8), body.get(16..)) {
                    names.push(EventName {
                        id,
                        name: c_string(name),
                    });
                }
            }
            _ => {}
        }
        at = extent.end;
    }
    if attrs.is_empty() {
        return Err(bad(
            offset_u64(records.start),
            "pipe-mode stream without a HEADER_ATTR record",
        ));
    }
    for EventName { id, name } in names {
        if let Some(attr) = attrs.iter_mut().find(|attr| attr.ids.contains(&id)) {
            attr.name = Some(name);
        }
    }
    features.sort_unstable();
    Ok(Layout {
        attrs,
        sections,
        features,
        records,
    })
}

/// The name an EVENT_UPDATE record gives the event of one id.
struct EventName {
    id: u64,
    name: String,
}

/// Where one record is: its type and misc, and where it and what follows it end.
struct Extent {
    record_type: u32,
    misc: u16,
    /// The end of the record (`header.size` bytes from its start).
    end_of_record: usize,
    /// The end of the record and its trailing data (AUXTRACE's trace data).
    end: usize,
}

/// The record at `at`, checked to lie before `end` (which is at most `bytes.len()`).
/// PERF_RECORD_AUXTRACE is the one record whose size does not cover all of it: the
/// trace data it announces follows it, `size` bytes (a multiple of 8).
fn record_extent(
    bytes: &[u8],
    at: usize,
    end: usize,
    bad: BadData<'_>,
) -> Result<Extent, ReadError> {
    let offset = offset_u64(at);
    let left = end.saturating_sub(at);
    if left < RECORD_HEADER_SIZE {
        return Err(bad(offset, "truncated perf_event_header at end of data"));
    }
    let (Some(record_type), Some(misc), Some(size)) = (
        read_u32(bytes, at),
        read_u16(bytes, at + 4),
        read_u16(bytes, at + 6),
    ) else {
        return Err(bad(offset, "truncated perf_event_header"));
    };
    let size = usize::from(size);
    if size < RECORD_HEADER_SIZE {
        return Err(bad(offset, "record size smaller than its header"));
    }
    if size > left {
        return Err(bad(offset, "record extends past the end of the data"));
    }
    let end_of_record = at + size;
    let trailing = if record_type == PERF_RECORD_AUXTRACE {
        if offset_u64(size) < AUXTRACE_RECORD_SIZE {
            return Err(bad(offset, "PERF_RECORD_AUXTRACE shorter than 48 bytes"));
        }
        read_u64(bytes, at + 8)
            .filter(|payload| payload % 8 == 0)
            .and_then(|payload| usize::try_from(payload).ok())
            .filter(|&payload| payload <= left - size)
            .ok_or_else(|| {
                bad(
                    offset,
                    "PERF_RECORD_AUXTRACE data size not a multiple of 8 or past the end",
                )
            })?
    } else {
        0
    };
    Ok(Extent {
        record_type,
        misc,
        end_of_record,
        end: end_of_record + trailing,
    })
}
