//! Reader for perf.data in file mode and in pipe mode (`perf record -o -`), built on `linux-perf-data` for the metadata and
//! `linux-perf-event-reader` for record parsing.
//!
//! The data section is walked here, in file order, instead of through
//! `linux_perf_data::PerfRecordIter`: that iterator re-sorts records by time and does not
//! report file offsets, and callers need both the offset (for error reports) and the raw
//! order. Every offset and length read from the file is checked against the buffer before
//! the wrapped crates see it, because they allocate by declared sizes.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::Path;

use linux_perf_data::{Feature, PerfFileReader};
use linux_perf_event_reader::{
    get_record_id, get_record_identifier, get_record_timestamp, AttrFlags, BranchSampleFormat,
    Endianness, PerfEventAttr, RawData, RecordParseInfo, RecordType, SampleFormat, SampleRecord,
    SamplingPolicy,
};

use crate::abi::*;
use crate::brstack::{BranchEntry, BranchStack};

type Le = byteorder::LittleEndian;

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
    #[error("{file}: offset {offset:#x}: bad perf.data metadata")]
    Metadata {
        file: String,
        offset: u64,
        #[source]
        source: linux_perf_data::Error,
    },
    #[error("{file}: offset {offset:#x}: bad record body")]
    Record {
        file: String,
        offset: u64,
        #[source]
        source: std::io::Error,
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
    pub attr: PerfEventAttr,
    pub name: Option<String>,
    pub ids: Vec<u64>,
    /// The `struct perf_event_attr` as the file holds it (its own `size` bytes), for
    /// tools that copy it into another file (`rvperf inject`).
    pub bytes: Vec<u8>,
}

/// A record of the data section, unparsed.
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

/// SAMPLE fields needed by a `perf script`-like printer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    /// The record header's `misc`: its `PERF_RECORD_MISC_CPUMODE_MASK` bits say
    /// whether the sample was taken in the kernel or in user mode.
    pub misc: u16,
    pub ip: Option<u64>,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub time: Option<u64>,
    pub cpu: Option<u32>,
    /// The weight perf gives the sample (its `sample->period`): the PERIOD field when
    /// the event records it, else the event's own `sample_period` (a fixed-period
    /// recording, `perf record -c N`, does not record it). As in perf, an event in
    /// frequency mode without PERIOD would give its frequency, and a counting event 0.
    pub period: u64,
    pub id: Option<u64>,
    pub callchain: Vec<u64>,
    pub branch_stack: Option<BranchStack>,
}

/// A parsed perf.data file held in memory.
#[derive(Debug)]
pub struct PerfDataReader<'a> {
    data: Bytes<'a>,
    file: String,
    info: HeaderInfo,
    attrs: Vec<AttrInfo>,
    parse_infos: Vec<RecordParseInfo>,
    id_to_attr: HashMap<u64, usize>,
    data_start: u64,
    data_end: u64,
    /// Feature bit -> (offset, size) of its section in `data`.
    sections: HashMap<u32, (u64, u64)>,
}

fn rd_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}
fn rd_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn rd_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
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

impl PerfDataReader<'static> {
    /// Maps and parses the file at `path` (reads it when it cannot be mapped, as
    /// a FIFO cannot).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let path = path.as_ref();
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
        let b: &[u8] = &data;
        if b.len() < PERF_PIPE_HEADER_SIZE {
            return Err(bad(
                b.len() as u64,
                "file shorter than the 16-byte perf.data pipe header",
            ));
        }
        if &b[0..8] != b"PERFILE2" {
            // Big-endian files are not produced on the hosts this serves.
            return Err(bad(0, "not a little-endian perf.data (magic PERFILE2)"));
        }
        let layout = if rd_u64(b, 8) == Some(PERF_PIPE_HEADER_SIZE as u64) {
            pipe_layout(b, &bad)?
        } else {
            file_layout(b, &bad, &file)?
        };
        let Layout {
            attrs,
            sections,
            features: feats,
            data_start,
            data_end,
        } = layout;
        let section = |f: u32| {
            sections
                .get(&f)
                .map(|&(off, size)| (off, &b[off as usize..(off + size) as usize]))
        };
        let string = |f: u32| section(f).and_then(|(_, s)| header_string(s));
        let cmdline = section(HEADER_CMDLINE).map(|(_, s)| {
            let n = rd_u32(s, 0).unwrap_or(0) as usize;
            let mut rest = s.get(4..).unwrap_or(&[]);
            let mut v = Vec::new();
            while v.len() < n && rest.len() >= 4 {
                let l = rd_u32(rest, 0).unwrap_or(0) as usize;
                v.push(header_string(rest).unwrap_or_default());
                rest = rest.get(4 + l..).unwrap_or(&[]);
            }
            v
        });
        let build_ids = match section(HEADER_BUILD_ID) {
            Some((off, s)) => {
                parse_build_ids(s, off).map_err(|at| bad(at, "bad HEADER_BUILD_ID entry"))?
            }
            None => Vec::new(),
        };
        let info = HeaderInfo {
            features: feats,
            hostname: string(HEADER_HOSTNAME),
            os_release: string(HEADER_OSRELEASE),
            perf_version: string(HEADER_VERSION),
            arch: string(HEADER_ARCH),
            cpu_desc: string(HEADER_CPUDESC),
            cmdline,
            build_ids,
        };
        let parse_infos = attrs
            .iter()
            .map(|a| RecordParseInfo::new(&a.attr, Endianness::LittleEndian))
            .collect();
        let mut id_to_attr = HashMap::new();
        for (i, a) in attrs.iter().enumerate() {
            for &id in &a.ids {
                id_to_attr.insert(id, i);
            }
        }
        Ok(Self {
            data,
            file,
            info,
            attrs,
            parse_infos,
            id_to_attr,
            data_start,
            data_end,
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
        let &(offset, size) = self.sections.get(&feature)?;
        self.data.get(offset as usize..(offset + size) as usize)
    }

    /// The events, in attr-section order; [`RawRecord::attr_index`] indexes this.
    pub fn attrs(&self) -> &[AttrInfo] {
        &self.attrs
    }

    /// Event names from HEADER_EVENT_DESC (empty string when absent).
    pub fn event_names(&self) -> Vec<String> {
        self.attrs
            .iter()
            .map(|a| a.name.clone().unwrap_or_default())
            .collect()
    }

    /// Iterates the data section in file order.
    pub fn records(&self) -> Records<'_> {
        Records {
            reader: self,
            pos: self.data_start,
            failed: false,
        }
    }

    fn attr_of(&self, record_type: u32, body: &[u8]) -> Option<usize> {
        let rt = RecordType(record_type);
        if record_type >= PERF_RECORD_USER_TYPE_START {
            return None;
        }
        if self.attrs.len() <= 1 {
            return Some(0);
        }
        let first = &self.attrs[0].attr;
        let data = RawData::from(body);
        let id = if self
            .attrs
            .iter()
            .all(|a| a.attr.sample_format.contains(SampleFormat::IDENTIFIER))
        {
            get_record_identifier::<Le>(rt, data, first.flags.contains(AttrFlags::SAMPLE_ID_ALL))
        } else {
            get_record_id::<Le>(rt, data, &self.parse_infos[0].id_parse_info)
        };
        // Records without a usable id go to the first event, as perf does.
        Some(
            id.and_then(|id| self.id_to_attr.get(&id).copied())
                .unwrap_or(0),
        )
    }

    /// The time of a kernel record: a sample's `time` field, or the
    /// `sample_id_all` trailer of a side-band record (MMAP, COMM, FORK, ...).
    /// `None` when the event records no time, or for records synthesized by
    /// the perf tool.
    pub fn record_time(&self, rec: &RawRecord<'_>) -> Option<u64> {
        let parse_info = self.parse_infos.get(rec.attr_index?)?;
        get_record_timestamp::<Le>(
            RecordType(rec.record_type),
            RawData::from(rec.body),
            parse_info,
        )
    }

    /// Decodes a SAMPLE record.
    pub fn parse_sample(&self, rec: &RawRecord<'_>) -> Result<Sample, ReadError> {
        let bad = |what: &str| ReadError::Malformed {
            file: self.file.clone(),
            offset: rec.offset,
            what: what.to_string(),
        };
        if rec.record_type != PERF_RECORD_SAMPLE {
            return Err(bad("not a SAMPLE record"));
        }
        let idx = rec
            .attr_index
            .ok_or_else(|| bad("SAMPLE without an event"))?;
        // A file without attrs still gives its records to event 0.
        let (Some(pi), Some(attr)) = (self.parse_infos.get(idx), self.attrs.get(idx)) else {
            return Err(bad("SAMPLE of a file without events"));
        };
        // linux-perf-event-reader multiplies the callchain length from the file without an
        // overflow check, so the variable-length fields are bounds-checked here first.
        let variable = SampleFormat::CALLCHAIN | SampleFormat::RAW | SampleFormat::BRANCH_STACK;
        let prefix = if pi.sample_format.intersects(variable) {
            Some(
                branch_stack_offset(rec.body, pi)
                    .ok_or_else(|| bad("SAMPLE too short for its sample_type"))?,
            )
        } else {
            None
        };
        let s =
            SampleRecord::parse::<Le>(RawData::from(rec.body), rec.misc, pi).map_err(|source| {
                ReadError::Record {
                    file: self.file.clone(),
                    offset: rec.offset,
                    source,
                }
            })?;
        let callchain = s
            .callchain
            .map(|c| (0..c.len()).filter_map(|i| c.get(i)).collect())
            .unwrap_or_default();
        let branch_stack = if let (true, Some(at)) = (
            pi.sample_format.contains(SampleFormat::BRANCH_STACK),
            prefix,
        ) {
            Some(
                parse_branch_stack(rec.body, at, pi)
                    .ok_or_else(|| bad("branch stack truncated"))?,
            )
        } else {
            None
        };
        Ok(Sample {
            misc: rec.misc,
            ip: s.ip,
            pid: s.pid,
            tid: s.tid,
            time: s.timestamp,
            cpu: s.cpu,
            period: s.period.unwrap_or_else(|| attr_sample_period(&attr.attr)),
            id: s.id,
            callchain,
            branch_stack,
        })
    }
}

/// `perf_event_attr.sample_period` as the file holds it: the union with
/// `sample_freq`, 0 for a counting event. perf's `evsel__parse_sample` starts every
/// sample's period from it.
fn attr_sample_period(attr: &PerfEventAttr) -> u64 {
    match attr.sampling_policy {
        SamplingPolicy::NoSampling => 0,
        SamplingPolicy::Period(period) => period.get(),
        SamplingPolicy::Frequency(frequency) => frequency,
    }
}

/// Iterator over the data section; see [`Records::next_record`].
#[derive(Debug)]
pub struct Records<'r> {
    reader: &'r PerfDataReader<'r>,
    pos: u64,
    failed: bool,
}

impl<'r> Records<'r> {
    /// The next record; `Ok(None)` at the end of the data section.
    pub fn next_record(&mut self) -> Result<Option<RawRecord<'r>>, ReadError> {
        let r = self.reader;
        if self.pos >= r.data_end {
            return Ok(None);
        }
        let b: &'r [u8] = &r.data;
        let bad = |offset: u64, what: &str| ReadError::Malformed {
            file: r.file.clone(),
            offset,
            what: what.to_string(),
        };
        let at = self.pos;
        let (ty, size, extra) = record_extent(b, at, r.data_end, &bad)?;
        let p = at as usize;
        let misc = rd_u16(b, p + 4).unwrap_or(0);
        let body = &b[p + PERF_EVENT_HEADER_SIZE..p + size as usize];
        let aux_data = &b[p + size as usize..(at + size + extra) as usize];
        self.pos += size + extra;
        Ok(Some(RawRecord {
            attr_index: r.attr_of(ty, body),
            record_type: ty,
            misc,
            body,
            aux_data,
            offset: at,
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
        let r = self.next_record().transpose();
        self.failed = matches!(r, Some(Err(_)));
        r
    }
}

/// Checks HEADER_EVENT_DESC counts against its length; returns the bad offset on failure.
fn check_event_desc(s: &[u8], base: u64) -> Result<(), u64> {
    let nr = rd_u32(s, 0).ok_or(base)? as usize;
    let attr_size = rd_u32(s, 4).ok_or(base + 4)? as usize;
    if !(64..=4096).contains(&attr_size) {
        return Err(base + 4);
    }
    let mut at = 8usize;
    for _ in 0..nr {
        let bad = base + at as u64;
        // The attr's own size field must fit the declared attr size.
        let own = rd_u32(s, at + 4).ok_or(bad)? as usize;
        if own > attr_size {
            return Err(bad);
        }
        at += attr_size;
        let nr_ids = rd_u32(s, at).ok_or(bad)? as usize;
        let str_len = rd_u32(s, at + 4).ok_or(bad)? as usize;
        at = at
            .checked_add(8 + str_len)
            .and_then(|a| a.checked_add(nr_ids.checked_mul(8)?))
            .ok_or(bad)?;
        if at > s.len() {
            return Err(bad);
        }
    }
    Ok(())
}

/// `struct perf_header_string`: u32 len, then a NUL-padded string.
fn header_string(s: &[u8]) -> Option<String> {
    let len = rd_u32(s, 0)? as usize;
    let raw = s.get(4..4usize.checked_add(len)?)?;
    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
    Some(String::from_utf8_lossy(&raw[..end]).into_owned())
}

fn parse_build_ids(s: &[u8], base: u64) -> Result<Vec<BuildIdEntry>, u64> {
    let mut v = Vec::new();
    let mut at = 0usize;
    while at < s.len() {
        let bad = base + at as u64;
        let misc = rd_u16(s, at + 4).ok_or(bad)?;
        let size = rd_u16(s, at + 6).ok_or(bad)? as usize;
        if size < 36 || at + size > s.len() {
            return Err(bad);
        }
        let pid = rd_u32(s, at + 8).ok_or(bad)? as i32;
        let id = &s[at + 12..at + 32];
        let n = if misc & PERF_RECORD_MISC_BUILD_ID_SIZE != 0 {
            usize::from(s[at + 32]).min(20)
        } else {
            20
        };
        let name = &s[at + 36..at + size];
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        v.push(BuildIdEntry {
            pid,
            misc,
            build_id: id[..n].to_vec(),
            filename: String::from_utf8_lossy(&name[..end]).into_owned(),
        });
        at += size;
    }
    Ok(v)
}

/// Offset of the branch stack in a SAMPLE body: the fields before it, in perf_event.h order.
fn branch_stack_offset(b: &[u8], pi: &RecordParseInfo) -> Option<usize> {
    use linux_perf_event_reader::ReadFormat;
    let f = pi.sample_format;
    let mut at = 0usize;
    for bit in [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ] {
        if f.contains(bit) {
            at += 8;
        }
    }
    if f.contains(SampleFormat::READ) {
        let rf = pi.read_format;
        let extra = [
            ReadFormat::TOTAL_TIME_ENABLED,
            ReadFormat::TOTAL_TIME_RUNNING,
        ]
        .iter()
        .filter(|&&x| rf.contains(x))
        .count();
        let per_value = if rf.contains(ReadFormat::ID) { 16 } else { 8 };
        if rf.contains(ReadFormat::GROUP) {
            let nr = usize::try_from(rd_u64(b, at)?).ok()?;
            at = at
                .checked_add(8 + extra * 8)?
                .checked_add(nr.checked_mul(per_value)?)?;
        } else {
            at += 8 + extra * 8 + per_value - 8;
        }
    }
    if f.contains(SampleFormat::CALLCHAIN) {
        let nr = usize::try_from(rd_u64(b, at)?).ok()?;
        at = at.checked_add(8)?.checked_add(nr.checked_mul(8)?)?;
    }
    if f.contains(SampleFormat::RAW) {
        let size = rd_u32(b, at)? as usize;
        at = at.checked_add(4)?.checked_add(size)?;
    }
    (at <= b.len()).then_some(at)
}

fn parse_branch_stack(b: &[u8], mut at: usize, pi: &RecordParseInfo) -> Option<BranchStack> {
    let nr = usize::try_from(rd_u64(b, at)?).ok()?;
    at += 8;
    let hw_idx = if pi
        .branch_sample_format
        .contains(BranchSampleFormat::HW_INDEX)
    {
        at += 8;
        Some(rd_u64(b, at - 8)?)
    } else {
        None
    };
    if nr.checked_mul(24)? > b.len().saturating_sub(at) {
        return None;
    }
    let entries = (0..nr)
        .map(|i| {
            let e = at + i * 24;
            Some(BranchEntry {
                from: rd_u64(b, e)?,
                to: rd_u64(b, e + 8)?,
                flags: rd_u64(b, e + 16)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(BranchStack { hw_idx, entries })
}

#[allow(dead_code)]
fn _feature_consts_match() {
    // Keeps our HEADER_* numbering tied to linux-perf-data's at compile time.
    const _: () = assert!(Feature::EVENT_DESC.0 == HEADER_EVENT_DESC);
    const _: () = assert!(Feature::BUILD_ID.0 == HEADER_BUILD_ID);
}

/// Where a file's parts are, whichever of perf's two layouts it uses.
struct Layout {
    attrs: Vec<AttrInfo>,
    /// Feature bit -> (offset, size) of its section in the buffer.
    sections: HashMap<u32, (u64, u64)>,
    features: Vec<u32>,
    data_start: u64,
    data_end: u64,
}

type BadData<'f> = &'f dyn Fn(u64, &str) -> ReadError;

/// File mode: the header points at the attrs, the data and (after the data) the table of
/// feature sections. Every offset and size is checked before `linux-perf-data` sees it.
fn file_layout(b: &[u8], bad: BadData<'_>, file: &str) -> Result<Layout, ReadError> {
    if b.len() < PERF_FILE_HEADER_SIZE {
        return Err(bad(
            b.len() as u64,
            "file shorter than the 104-byte perf.data header",
        ));
    }
    let hdr = |at: usize| rd_u64(b, at).unwrap_or(0);
    let len = b.len() as u64;
    let in_file = |off: u64, size: u64| off.checked_add(size).is_some_and(|end| end <= len);
    let attr_size = hdr(16);
    let (attrs_off, attrs_size) = (hdr(24), hdr(32));
    let (data_start, data_size) = (hdr(40), hdr(48));
    let (et_off, et_size) = (hdr(56), hdr(64));
    if hdr(8) < PERF_FILE_HEADER_SIZE as u64 {
        return Err(bad(8, "header size field too small"));
    }
    if !(64 + 16..=4096).contains(&attr_size) {
        return Err(bad(16, "implausible perf_file_attr size"));
    }
    if !in_file(attrs_off, attrs_size) {
        return Err(bad(24, "attr section outside the file"));
    }
    if !in_file(data_start, data_size) {
        return Err(bad(40, "data section outside the file"));
    }
    if !in_file(et_off, et_size) {
        return Err(bad(56, "event_types section outside the file"));
    }
    let data_end = data_start + data_size;
    let mut features = Vec::new();
    for word in 0..4 {
        let bits = hdr(72 + word * 8);
        for bit in 0..64 {
            if bits & (1 << bit) != 0 {
                features.push((word * 64 + bit) as u32);
            }
        }
    }
    let mut sections = HashMap::new();
    for (i, &f) in features.iter().enumerate() {
        let at = data_end + 16 * i as u64;
        if !in_file(at, 16) {
            return Err(bad(at, "feature section table truncated"));
        }
        let (off, size) = (hdr(at as usize), hdr(at as usize + 8));
        if !in_file(off, size) {
            return Err(bad(at, "feature section outside the file"));
        }
        sections.insert(f, (off, size));
    }
    let desc = sections.get(&HEADER_EVENT_DESC).copied();
    if let Some((off, size)) = desc {
        check_event_desc(&b[off as usize..(off + size) as usize], off)
            .map_err(|at| bad(at, "HEADER_EVENT_DESC is malformed"))?;
    } else if et_size == 0 && attrs_size / attr_size > 4096 {
        return Err(bad(32, "too many attrs"));
    } else if et_size != 0 {
        // The pre-2012 event_types layout: rejected rather than validated.
        return Err(bad(56, "legacy event_types section not supported"));
    }
    let meta_at = desc.map_or(attrs_off, |(off, _)| off);
    let PerfFileReader { perf_file, .. } =
        PerfFileReader::parse_file(Cursor::new(b)).map_err(|source| ReadError::Metadata {
            file: file.to_string(),
            offset: meta_at,
            source,
        })?;
    // perf_file_attr entries: the attr (attr_size - 16 bytes at most), then its ids section.
    let attr_bytes = |index: u64| {
        let at = attrs_off + index * attr_size;
        let own = rd_u32(b, at as usize + 4).map_or(0, u64::from);
        let end = (at + own.min(attr_size - 16)).min(attrs_off + attrs_size);
        b.get(at as usize..end as usize)
            .unwrap_or_default()
            .to_vec()
    };
    let attrs = perf_file
        .event_attributes()
        .iter()
        .zip(0..)
        .map(|(a, index)| AttrInfo {
            attr: a.attr,
            name: a.name.clone(),
            ids: a.event_ids.clone(),
            bytes: attr_bytes(index),
        })
        .collect();
    Ok(Layout {
        attrs,
        sections,
        features,
        data_start,
        data_end,
    })
}

/// Pipe mode (`perf record -o -`): a 16-byte header, then one stream of records in which
/// perf synthesizes the metadata a file keeps in its header: HEADER_ATTR for each event
/// (with its ids), HEADER_FEATURE for each feature section, EVENT_UPDATE for names. They
/// may come anywhere in the stream, so the whole stream is scanned once for them; the
/// data walk then skips them like any other tool record.
fn pipe_layout(b: &[u8], bad: BadData<'_>) -> Result<Layout, ReadError> {
    let data_start = PERF_PIPE_HEADER_SIZE as u64;
    let data_end = b.len() as u64;
    let mut attrs: Vec<AttrInfo> = Vec::new();
    let mut sections = HashMap::new();
    let mut features = Vec::new();
    let mut names: Vec<(u64, String)> = Vec::new();
    let mut at = data_start;
    while at < data_end {
        let (record_type, size, extra) = record_extent(b, at, data_end, bad)?;
        let body_at = at + PERF_EVENT_HEADER_SIZE as u64;
        let body = &b[body_at as usize..(at + size) as usize];
        match record_type {
            PERF_RECORD_HEADER_ATTR => {
                let (attr, attr_size) =
                    PerfEventAttr::parse::<_, Le>(Cursor::new(body)).map_err(|_| {
                        bad(
                            body_at,
                            "HEADER_ATTR record with a malformed perf_event_attr",
                        )
                    })?;
                let ids_bytes = usize::try_from(attr_size)
                    .ok()
                    .and_then(|attr_size| body.get(attr_size..))
                    .ok_or_else(|| bad(body_at, "HEADER_ATTR shorter than its attr"))?;
                let ids = ids_bytes
                    .chunks_exact(8)
                    .map(|id| u64::from_le_bytes(id.try_into().unwrap_or_default()))
                    .collect();
                attrs.push(AttrInfo {
                    attr,
                    name: None,
                    ids,
                    bytes: body[..body.len() - ids_bytes.len()].to_vec(),
                });
            }
            PERF_RECORD_HEADER_FEATURE => {
                let feature = rd_u64(body, 0)
                    .ok_or_else(|| bad(body_at, "HEADER_FEATURE without a feature id"))?;
                let feature = u32::try_from(feature)
                    .ok()
                    .filter(|&f| f < 256)
                    .ok_or_else(|| bad(body_at, "HEADER_FEATURE id out of range"))?;
                if !sections.contains_key(&feature) {
                    features.push(feature);
                }
                sections.insert(feature, (body_at + 8, size - 16));
            }
            // struct perf_record_event_update: u64 type, u64 id, then the payload.
            PERF_RECORD_EVENT_UPDATE if rd_u64(body, 0) == Some(PERF_EVENT_UPDATE__NAME) => {
                if let (Some(id), Some(name)) = (rd_u64(body, 8), body.get(16..)) {
                    let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
                    names.push((id, String::from_utf8_lossy(&name[..end]).into_owned()));
                }
            }
            _ => {}
        }
        at += size + extra;
    }
    if attrs.is_empty() {
        return Err(bad(
            data_start,
            "pipe-mode stream without a HEADER_ATTR record",
        ));
    }
    for (id, name) in names {
        if let Some(attr) = attrs.iter_mut().find(|a| a.ids.contains(&id)) {
            attr.name = Some(name);
        }
    }
    features.sort_unstable();
    Ok(Layout {
        attrs,
        sections,
        features,
        data_start,
        data_end,
    })
}

/// Type, size and trailing payload length of the record at `at`, checked to lie before
/// `end`. PERF_RECORD_AUXTRACE is the one record whose size does not cover all of it:
/// the trace data it announces follows it, `size` bytes (a multiple of 8).
fn record_extent(
    b: &[u8],
    at: u64,
    end: u64,
    bad: BadData<'_>,
) -> Result<(u32, u64, u64), ReadError> {
    if end - at < PERF_EVENT_HEADER_SIZE as u64 {
        return Err(bad(at, "truncated perf_event_header at end of data"));
    }
    let p = at as usize;
    let (record_type, size) = match (rd_u32(b, p), rd_u16(b, p + 6)) {
        (Some(t), Some(s)) => (t, u64::from(s)),
        _ => return Err(bad(at, "truncated perf_event_header")),
    };
    if size < PERF_EVENT_HEADER_SIZE as u64 {
        return Err(bad(at, "record size smaller than its header"));
    }
    if size > end - at {
        return Err(bad(at, "record extends past the end of the data"));
    }
    let extra = if record_type == PERF_RECORD_AUXTRACE {
        if size < AUXTRACE_RECORD_SIZE {
            return Err(bad(at, "PERF_RECORD_AUXTRACE shorter than 48 bytes"));
        }
        let payload = rd_u64(b, p + 8).unwrap_or(u64::MAX);
        if payload % 8 != 0 || payload > end - at - size {
            return Err(bad(
                at,
                "PERF_RECORD_AUXTRACE data size not a multiple of 8 or past the end",
            ));
        }
        payload
    } else {
        0
    };
    Ok((record_type, size, extra))
}
