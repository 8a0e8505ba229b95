//! Writer for file-mode perf.data, laid out like `perf_session__write_header()` in
//! tools/perf/util/header.c: header, per-attr id arrays, the attr section, the streamed data
//! section, then the feature section table and the feature sections.

use std::io::{self, Seek, SeekFrom, Write};
use std::mem::offset_of;

use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::{
    CommRecord, LostRecord, Mmap2FileId, Mmap2Record, Sample, SampleId, TaskRecord, ThrottleRecord,
    RECORD_HEADER_SIZE,
};

use crate::format::*;
use crate::reader::BuildIdEntry;

/// Errors from [`PerfDataWriter`].
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("I/O error writing perf.data at offset {offset:#x}")]
    Io {
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error("record of {len} bytes is invalid: {why}")]
    BadRecord { len: usize, why: &'static str },
    #[error("attr index {0} out of range")]
    NoSuchAttr(usize),
    #[error("sample_type bits {0:#x} are not supported by the sample builder")]
    UnsupportedSampleType(u64),
    #[error(
        "branch stack given for attr without PERF_SAMPLE_BRANCH_STACK, or missing for one with it"
    )]
    BranchStackMismatch,
    #[error("at least one event attr is required")]
    NoAttrs,
    /// A count, length or offset too large for the field perf.data holds it in.
    #[error("{what} ({value}) does not fit its field in perf.data")]
    TooLarge { what: &'static str, value: u64 },
    /// The event's attr sets a field that perf.data readers such as perf 6.1 cannot
    /// read (they refuse attrs larger than their own struct).
    #[error(
        "event {event:?}: its perf_event_attr sets {field} (byte {offset}), past the \
         {PERF_ATTR_SIZE} bytes perf.data holds"
    )]
    AttrTooNew {
        event: String,
        field: &'static str,
        offset: usize,
    },
}

/// The fields of `perf_event_attr` past PERF_ATTR_SIZE, by offset: what an attr
/// this writer refuses sets.
const FIELDS_PAST_FILE_ATTR: [(usize, &str); 2] = [
    (offset_of!(perf_event_attr, config3), "config3"),
    (offset_of!(perf_event_attr, config4), "config4"),
];

// The table above covers every byte of the struct past PERF_ATTR_SIZE: a binding that
// grows the struct must name its new fields there.
const _: () = assert!(
    FIELDS_PAST_FILE_ATTR[0].0 == PERF_ATTR_SIZE
        && FIELDS_PAST_FILE_ATTR[1].0 + 8 == perf_abi::ATTR_SIZE
);

/// The attr as this writer puts it into perf.data: its first PERF_ATTR_SIZE bytes,
/// `size` saying so. perf refuses an attr larger than the struct it was built with,
/// so a larger one would shut out perf 6.1; an attr that sets anything past those
/// bytes is refused rather than written without it.
fn file_attr(event: &EventDesc) -> Result<[u8; PERF_ATTR_SIZE], WriteError> {
    let mut attr = event.attr;
    attr.size = abi::PERF_ATTR_SIZE_VER7;
    let bytes = perf_abi::attr_bytes(&attr);
    if let Some(at) = bytes[PERF_ATTR_SIZE..].iter().position(|&byte| byte != 0) {
        let offset = PERF_ATTR_SIZE + at;
        let field = FIELDS_PAST_FILE_ATTR
            .iter()
            .rev()
            .find(|(start, _)| *start <= offset)
            .map_or("a field past PERF_ATTR_SIZE", |(_, name)| name);
        return Err(WriteError::AttrTooNew {
            event: event.name.clone(),
            field,
            offset,
        });
    }
    let mut file = [0; PERF_ATTR_SIZE];
    // The struct's own byte order: the little-endian file this writer makes on the
    // little-endian machines rvperf records on (riscv64, x86_64).
    file.copy_from_slice(&bytes[..PERF_ATTR_SIZE]);
    Ok(file)
}

/// One event: its attr, its name (for HEADER_EVENT_DESC) and the sample ids that map
/// records to it.
#[derive(Debug, Clone, Default)]
pub struct EventDesc {
    /// The attr the event was opened with, written as it is (but for `size`).
    pub attr: perf_event_attr,
    pub name: String,
    pub ids: Vec<u64>,
}

/// The feature sections written at [`PerfDataWriter::finish`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    pub hostname: String,
    pub os_release: String,
    pub perf_version: String,
    pub arch: String,
    pub nr_cpus_available: u32,
    pub nr_cpus_online: u32,
    pub cpu_desc: Option<String>,
    pub cmdline: Vec<String>,
    /// HEADER_BUILD_ID entries (`misc` is the cpumode; the writer sets
    /// PERF_RECORD_MISC_BUILD_ID_SIZE). perf itself writes pid -1 (HOST_KERNEL_ID) for
    /// host files.
    pub build_ids: Vec<BuildIdEntry>,
}

impl Metadata {
    /// Fills hostname, OS release, arch and CPU counts from this host.
    pub fn from_host(perf_version: &str, cmdline: Vec<String>) -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_string())
                .unwrap_or_default()
        };
        let cpus = std::thread::available_parallelism()
            .map_or(1, |count| u32::try_from(count.get()).unwrap_or(u32::MAX));
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            os_release: read("/proc/sys/kernel/osrelease"),
            perf_version: perf_version.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            nr_cpus_available: cpus,
            nr_cpus_online: cpus,
            cpu_desc: None,
            cmdline,
            build_ids: Vec::new(),
        }
    }
}

/// `NAME_ALIGN` in header.c: strings in feature sections are padded to 64 bytes.
const NAME_ALIGN: usize = 64;

/// The build id bytes a build-id field holds (`BUILD_ID_SIZE`).
const BUILD_ID_SIZE: usize = 20;

/// `len` rounded up to a multiple of `to`; lengths here are of strings and buffers in
/// memory, far from overflowing.
fn align(len: usize, to: usize) -> usize {
    len.div_ceil(to) * to
}

/// `value` as the u64 of a perf.data field (`usize` is never wider).
fn as_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// `value` as the u32 of a perf.data field, or [`WriteError::TooLarge`].
fn to_u32(value: usize, what: &'static str) -> Result<u32, WriteError> {
    u32::try_from(value).map_err(|_| WriteError::TooLarge {
        what,
        value: as_u64(value),
    })
}

/// `value` as the u16 of a perf.data field, or [`WriteError::TooLarge`].
fn to_u16(value: usize, what: &'static str) -> Result<u16, WriteError> {
    u16::try_from(value).map_err(|_| WriteError::TooLarge {
        what,
        value: as_u64(value),
    })
}

/// `do_write_string()`: u32 padded length, then the NUL-terminated, zero-padded string.
fn push_string(out: &mut Vec<u8>, text: &str) -> Result<(), WriteError> {
    let len = align(text.len() + 1, NAME_ALIGN);
    out.extend_from_slice(&to_u32(len, "string length")?.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + len - text.len(), 0);
    Ok(())
}

/// A file offset past `base` by `len` bytes, or [`WriteError::TooLarge`].
fn offset_after(base: u64, len: u64) -> Result<u64, WriteError> {
    base.checked_add(len).ok_or(WriteError::TooLarge {
        what: "file offset",
        value: base,
    })
}

/// Where and how large one PERF_RECORD_AUXTRACE (with its data) is, for HEADER_AUXTRACE.
#[derive(Debug, Clone, Copy)]
struct AuxtraceIndexEntry {
    file_offset: u64,
    size: u64,
}

/// A feature section to write: its bit and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureSection {
    pub feature: u32,
    pub bytes: Vec<u8>,
}

/// Whether a task record says a task began or ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// PERF_RECORD_FORK.
    Fork,
    /// PERF_RECORD_EXIT.
    Exit,
}

/// Streams a perf.data file. The header written by [`PerfDataWriter::new`] claims an empty
/// data section and no features; only [`PerfDataWriter::finish`] rewrites it, after all
/// data and feature sections are on disk, so a crash never leaves a header pointing at
/// missing bytes.
#[derive(Debug)]
pub struct PerfDataWriter<W: Write + Seek> {
    out: W,
    events: Vec<EventDesc>,
    /// Each event's attr as written ([`file_attr`]), for HEADER_EVENT_DESC too.
    file_attrs: Vec<[u8; PERF_ATTR_SIZE]>,
    attr_offset: u64,
    data_offset: u64,
    data_size: u64,
    auxtrace_index: Vec<AuxtraceIndexEntry>,
}

impl<W: Write + Seek> PerfDataWriter<W> {
    /// Writes the header, id arrays and attr section at the start of `out`.
    pub fn new(mut out: W, events: Vec<EventDesc>) -> Result<Self, WriteError> {
        if events.is_empty() {
            return Err(WriteError::NoAttrs);
        }
        let file_attrs = events
            .iter()
            .map(file_attr)
            .collect::<Result<Vec<_>, _>>()?;
        let io = |offset: u64| move |source| WriteError::Io { offset, source };
        let mut buffer = vec![0u8; PERF_FILE_HEADER_SIZE];
        // Like perf, the id arrays come first and the perf_file_attr entries point at them.
        let mut id_offsets = Vec::new();
        for event in &events {
            id_offsets.push(as_u64(buffer.len()));
            for id in &event.ids {
                buffer.extend_from_slice(&id.to_le_bytes());
            }
        }
        let attr_offset = as_u64(buffer.len());
        for ((event, ids_offset), attr) in events.iter().zip(&id_offsets).zip(&file_attrs) {
            buffer.extend_from_slice(attr);
            buffer.extend_from_slice(&ids_offset.to_le_bytes());
            buffer.extend_from_slice(&as_u64(event.ids.len() * 8).to_le_bytes());
        }
        let data_offset = as_u64(buffer.len());
        out.seek(SeekFrom::Start(0)).map_err(io(0))?;
        // The all-zero placeholder header has no magic; the real one follows once the
        // sections it points at exist.
        out.write_all(&buffer).map_err(io(0))?;
        let mut this = Self {
            out,
            events,
            file_attrs,
            attr_offset,
            data_offset,
            data_size: 0,
            auxtrace_index: Vec::new(),
        };
        this.write_header(0)?;
        this.out
            .seek(SeekFrom::Start(data_offset))
            .map_err(io(data_offset))?;
        Ok(this)
    }

    fn write_header(&mut self, features: u64) -> Result<(), WriteError> {
        let file_attr_size = as_u64(PERF_ATTR_SIZE + PERF_FILE_SECTION_SIZE);
        let mut header = Vec::with_capacity(PERF_FILE_HEADER_SIZE);
        header.extend_from_slice(b"PERFILE2");
        header.extend_from_slice(&as_u64(PERF_FILE_HEADER_SIZE).to_le_bytes());
        header.extend_from_slice(&file_attr_size.to_le_bytes());
        header.extend_from_slice(&self.attr_offset.to_le_bytes());
        header.extend_from_slice(&(file_attr_size * as_u64(self.events.len())).to_le_bytes());
        header.extend_from_slice(&self.data_offset.to_le_bytes());
        header.extend_from_slice(&self.data_size.to_le_bytes());
        // event_types: unused since perf 3.x, always empty.
        header.extend_from_slice(&[0u8; PERF_FILE_SECTION_SIZE]);
        header.extend_from_slice(&features.to_le_bytes());
        header.extend_from_slice(&[0u8; 24]);
        self.out
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.out.write_all(&header))
            .map_err(|source| WriteError::Io { offset: 0, source })
    }

    /// Bytes of records written so far.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Appends one complete raw record (perf_event_header included).
    pub fn write_record(&mut self, record: &[u8]) -> Result<(), WriteError> {
        let bad = |why| WriteError::BadRecord {
            len: record.len(),
            why,
        };
        if record.len() < RECORD_HEADER_SIZE {
            return Err(bad("shorter than perf_event_header"));
        }
        let size = usize::from(u16::from_le_bytes([record[6], record[7]]));
        if size != record.len() {
            return Err(bad("header.size differs from the record length"));
        }
        if size % 8 != 0 {
            return Err(bad("size is not a multiple of 8"));
        }
        let offset = offset_after(self.data_offset, self.data_size)?;
        self.out
            .write_all(record)
            .map_err(|source| WriteError::Io { offset, source })?;
        self.data_size = offset_after(self.data_size, as_u64(record.len()))?;
        Ok(())
    }

    fn event(&self, attr_index: usize) -> Result<&EventDesc, WriteError> {
        self.events
            .get(attr_index)
            .ok_or(WriteError::NoSuchAttr(attr_index))
    }

    /// Finishes a record body: prepends the header, appends the `sample_id` trailer if
    /// the attr has sample_id_all.
    fn emit(
        &mut self,
        record_type: u32,
        misc: u16,
        mut body: Vec<u8>,
        attr_index: usize,
        sample_id: &SampleId,
    ) -> Result<(), WriteError> {
        let attr = self.event(attr_index)?.attr;
        if attr.sample_id_all() != 0 {
            push_sample_id(&mut body, attr.sample_type, sample_id);
        }
        self.emit_raw(record_type, misc, body)
    }

    fn emit_raw(&mut self, record_type: u32, misc: u16, body: Vec<u8>) -> Result<(), WriteError> {
        let size = RECORD_HEADER_SIZE + body.len();
        let size16 = u16::try_from(size).map_err(|_| WriteError::BadRecord {
            len: size,
            why: "record larger than 65535 bytes",
        })?;
        let mut record = Vec::with_capacity(size);
        record.extend_from_slice(&record_type.to_le_bytes());
        record.extend_from_slice(&misc.to_le_bytes());
        record.extend_from_slice(&size16.to_le_bytes());
        record.extend_from_slice(&body);
        self.write_record(&record)
    }

    /// Writes a SAMPLE for event `attr_index`, laid out per its sample_type: the fields
    /// it selects, 0 for those the sample lacks (PERF_SAMPLE_IDENTIFIER and
    /// PERF_SAMPLE_ID both hold the id: whichever of `identifier` and `id` is given),
    /// with the sample's `misc` as the header's.
    pub fn write_sample(
        &mut self,
        attr_index: usize,
        sample: &Sample<'_>,
    ) -> Result<(), WriteError> {
        let attr = self.event(attr_index)?.attr;
        let sample_type = attr.sample_type;
        let supported = [
            abi::PERF_SAMPLE_IDENTIFIER,
            abi::PERF_SAMPLE_IP,
            abi::PERF_SAMPLE_TID,
            abi::PERF_SAMPLE_TIME,
            abi::PERF_SAMPLE_ADDR,
            abi::PERF_SAMPLE_ID,
            abi::PERF_SAMPLE_STREAM_ID,
            abi::PERF_SAMPLE_CPU,
            abi::PERF_SAMPLE_PERIOD,
            abi::PERF_SAMPLE_CALLCHAIN,
            abi::PERF_SAMPLE_BRANCH_STACK,
        ]
        .into_iter()
        .fold(0, |bits, bit| bits | u64::from(bit));
        if sample_type & !supported != 0 {
            return Err(WriteError::UnsupportedSampleType(sample_type & !supported));
        }
        let has = |bit: u32| sample_type & u64::from(bit) != 0;
        if has(abi::PERF_SAMPLE_BRANCH_STACK) != sample.branch_stack.is_some() {
            return Err(WriteError::BranchStackMismatch);
        }
        let id = sample.id.or(sample.identifier).unwrap_or(0);
        let mut body = Vec::new();
        let mut word = |bit: u32, value: u64| {
            if has(bit) {
                body.extend_from_slice(&value.to_le_bytes());
            }
        };
        // Field order of struct perf_record_sample in perf_event.h.
        word(
            abi::PERF_SAMPLE_IDENTIFIER,
            sample.identifier.or(sample.id).unwrap_or(0),
        );
        word(abi::PERF_SAMPLE_IP, sample.ip.unwrap_or(0));
        word(
            abi::PERF_SAMPLE_TID,
            u64::from(sample.pid.unwrap_or(0)) | u64::from(sample.tid.unwrap_or(0)) << 32,
        );
        word(abi::PERF_SAMPLE_TIME, sample.time.unwrap_or(0));
        word(abi::PERF_SAMPLE_ADDR, sample.addr.unwrap_or(0));
        word(abi::PERF_SAMPLE_ID, id);
        word(abi::PERF_SAMPLE_STREAM_ID, sample.stream_id.unwrap_or(0));
        word(abi::PERF_SAMPLE_CPU, u64::from(sample.cpu.unwrap_or(0)));
        word(abi::PERF_SAMPLE_PERIOD, sample.period.unwrap_or(0));
        if has(abi::PERF_SAMPLE_CALLCHAIN) {
            let addresses = sample.callchain.map_or(0, |callchain| callchain.len());
            body.extend_from_slice(&as_u64(addresses).to_le_bytes());
            for address in sample
                .callchain
                .iter()
                .flat_map(|callchain| callchain.iter())
            {
                body.extend_from_slice(&address.to_le_bytes());
            }
        }
        if let Some(stack) = &sample.branch_stack {
            body.extend_from_slice(&as_u64(stack.len()).to_le_bytes());
            // hw_idx is present exactly when the attr asks for it; perf reads it blindly.
            if attr.branch_sample_type & u64::from(abi::PERF_SAMPLE_BRANCH_HW_INDEX) != 0 {
                body.extend_from_slice(&stack.hw_idx.unwrap_or(u64::MAX).to_le_bytes());
            }
            // The entries as the sample holds them: flag words bit for bit.
            body.extend_from_slice(stack.as_bytes());
        }
        self.emit_raw(abi::PERF_RECORD_SAMPLE, sample.misc, body)
    }

    /// Writes a `PERF_RECORD_COMM` (PERF_RECORD_MISC_COMM_EXEC when `comm.exec`).
    pub fn write_comm(
        &mut self,
        attr_index: usize,
        comm: &CommRecord<'_>,
    ) -> Result<(), WriteError> {
        let mut body = Vec::new();
        body.extend_from_slice(&comm.pid.to_le_bytes());
        body.extend_from_slice(&comm.tid.to_le_bytes());
        push_padded_cstr(&mut body, comm.comm);
        let misc = if comm.exec { MISC_COMM_EXEC } else { 0 };
        self.emit(
            abi::PERF_RECORD_COMM,
            misc,
            body,
            attr_index,
            &comm.sample_id,
        )
    }

    /// Writes a `PERF_RECORD_MMAP2` (inode or build-id form), `cpumode` its header's
    /// misc (such as PERF_RECORD_MISC_USER).
    pub fn write_mmap2(
        &mut self,
        attr_index: usize,
        cpumode: u16,
        mmap: &Mmap2Record<'_>,
    ) -> Result<(), WriteError> {
        let mut body = Vec::new();
        body.extend_from_slice(&mmap.pid.to_le_bytes());
        body.extend_from_slice(&mmap.tid.to_le_bytes());
        body.extend_from_slice(&mmap.addr.to_le_bytes());
        body.extend_from_slice(&mmap.len.to_le_bytes());
        body.extend_from_slice(&mmap.pgoff.to_le_bytes());
        let mut misc = cpumode;
        match mmap.file_id {
            Mmap2FileId::Inode {
                maj,
                min,
                ino,
                ino_generation,
            } => {
                body.extend_from_slice(&maj.to_le_bytes());
                body.extend_from_slice(&min.to_le_bytes());
                body.extend_from_slice(&ino.to_le_bytes());
                body.extend_from_slice(&ino_generation.to_le_bytes());
            }
            Mmap2FileId::BuildId(id) => {
                // build_id_size, 3 reserved bytes, then the id in 20 bytes.
                let len = id.len().min(BUILD_ID_SIZE);
                body.push(u8::try_from(len).unwrap_or(u8::MAX));
                body.extend_from_slice(&[0, 0, 0]);
                let mut build_id = [0u8; BUILD_ID_SIZE];
                build_id[..len].copy_from_slice(&id[..len]);
                body.extend_from_slice(&build_id);
                misc |= MISC_MMAP_BUILD_ID;
            }
        }
        body.extend_from_slice(&mmap.prot.to_le_bytes());
        body.extend_from_slice(&mmap.flags.to_le_bytes());
        push_padded_cstr(&mut body, mmap.filename);
        self.emit(
            abi::PERF_RECORD_MMAP2,
            misc,
            body,
            attr_index,
            &mmap.sample_id,
        )
    }

    /// Writes a `PERF_RECORD_FORK` or `PERF_RECORD_EXIT`.
    pub fn write_task(
        &mut self,
        attr_index: usize,
        event: TaskEvent,
        task: &TaskRecord,
    ) -> Result<(), WriteError> {
        let mut body = Vec::new();
        for value in [task.pid, task.ppid, task.tid, task.ptid] {
            body.extend_from_slice(&value.to_le_bytes());
        }
        body.extend_from_slice(&task.time.to_le_bytes());
        let record_type = match event {
            TaskEvent::Fork => abi::PERF_RECORD_FORK,
            TaskEvent::Exit => abi::PERF_RECORD_EXIT,
        };
        self.emit(record_type, 0, body, attr_index, &task.sample_id)
    }

    /// Writes a `PERF_RECORD_LOST`.
    pub fn write_lost(&mut self, attr_index: usize, lost: &LostRecord) -> Result<(), WriteError> {
        let mut body = Vec::new();
        body.extend_from_slice(&lost.id.to_le_bytes());
        body.extend_from_slice(&lost.lost.to_le_bytes());
        self.emit(abi::PERF_RECORD_LOST, 0, body, attr_index, &lost.sample_id)
    }

    /// Writes a `PERF_RECORD_THROTTLE`: the event `id` (`stream_id`, the id of the
    /// event that counted, is the same for an event that is not inherited) was
    /// throttled at `time` for having sampled more often than
    /// kernel.perf_event_max_sample_rate allows, and samples nothing until it is
    /// unthrottled (`perf script --show-throttle-events` shows both).
    pub fn write_throttle(
        &mut self,
        attr_index: usize,
        throttle: &ThrottleRecord,
    ) -> Result<(), WriteError> {
        let mut body = Vec::with_capacity(24);
        for value in [throttle.time, throttle.id, throttle.stream_id] {
            body.extend_from_slice(&value.to_le_bytes());
        }
        self.emit(
            abi::PERF_RECORD_THROTTLE,
            0,
            body,
            attr_index,
            &throttle.sample_id,
        )
    }

    /// Writes a `PERF_RECORD_FINISHED_ROUND`: everything before it may be time-sorted by
    /// readers before anything after it is read.
    pub fn write_finished_round(&mut self) -> Result<(), WriteError> {
        self.emit_raw(PERF_RECORD_FINISHED_ROUND, 0, Vec::new())
    }

    /// Writes PERF_RECORD_AUXTRACE_INFO, which tells a reader which decoder the
    /// AUXTRACE data needs: `auxtrace_type` and its private words.
    pub fn write_auxtrace_info(
        &mut self,
        auxtrace_type: u32,
        private: &[u64],
    ) -> Result<(), WriteError> {
        let mut body = Vec::with_capacity(8 + 8 * private.len());
        body.extend_from_slice(&auxtrace_type.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        for word in private {
            body.extend_from_slice(&word.to_le_bytes());
        }
        self.emit_raw(PERF_RECORD_AUXTRACE_INFO, 0, body)
    }

    /// Writes a PERF_RECORD_AUXTRACE followed by `data`, a chunk of one AUX area
    /// (`offset` is its position in that area's byte stream, `idx` the area's index),
    /// padded to 8 bytes, and indexes it for HEADER_AUXTRACE as perf does.
    pub fn write_auxtrace(&mut self, chunk: &AuxtraceChunk<'_>) -> Result<(), WriteError> {
        let padded = align(chunk.data.len(), 8);
        let mut record = Vec::with_capacity(usize::from(AUXTRACE_SIZE));
        record.extend_from_slice(&PERF_RECORD_AUXTRACE.to_le_bytes());
        record.extend_from_slice(&0u16.to_le_bytes());
        record.extend_from_slice(&AUXTRACE_SIZE.to_le_bytes());
        record.extend_from_slice(&as_u64(padded).to_le_bytes());
        record.extend_from_slice(&chunk.offset.to_le_bytes());
        record.extend_from_slice(&chunk.reference.to_le_bytes());
        record.extend_from_slice(&chunk.idx.to_le_bytes());
        record.extend_from_slice(&chunk.tid.to_le_bytes());
        record.extend_from_slice(&chunk.cpu.to_le_bytes());
        record.extend_from_slice(&0u32.to_le_bytes());
        let file_offset = offset_after(self.data_offset, self.data_size)?;
        self.out
            .write_all(&record)
            .and_then(|_| self.out.write_all(chunk.data))
            .and_then(|_| self.out.write_all(&[0u8; 8][..padded - chunk.data.len()]))
            .map_err(|source| WriteError::Io {
                offset: file_offset,
                source,
            })?;
        let size = offset_after(AUXTRACE_RECORD_SIZE, as_u64(padded))?;
        self.auxtrace_index
            .push(AuxtraceIndexEntry { file_offset, size });
        self.data_size = offset_after(self.data_size, size)?;
        Ok(())
    }

    /// Writes the feature sections, then the final header; returns the inner writer
    /// positioned at the end of the file.
    pub fn finish(self, meta: &Metadata) -> Result<W, WriteError> {
        let mut sections = Vec::new();
        if !meta.build_ids.is_empty() {
            let mut bytes = Vec::new();
            for entry in &meta.build_ids {
                // struct perf_record_header_build_id: header, pid, build_id[24] (20 data
                // bytes, size byte, 3 reserved), filename padded to NAME_ALIGN.
                let name_len = align(entry.filename.len() + 1, NAME_ALIGN);
                let size = to_u16(8 + 4 + 24 + name_len, "HEADER_BUILD_ID entry")?;
                bytes.extend_from_slice(&0u32.to_le_bytes());
                bytes.extend_from_slice(
                    &(entry.misc | PERF_RECORD_MISC_BUILD_ID_SIZE).to_le_bytes(),
                );
                bytes.extend_from_slice(&size.to_le_bytes());
                bytes.extend_from_slice(&entry.pid.to_le_bytes());
                let len = entry.build_id.len().min(BUILD_ID_SIZE);
                let mut build_id = [0u8; 24];
                build_id[..len].copy_from_slice(&entry.build_id[..len]);
                build_id[BUILD_ID_SIZE] = u8::try_from(len).unwrap_or(u8::MAX);
                bytes.extend_from_slice(&build_id);
                bytes.extend_from_slice(entry.filename.as_bytes());
                bytes.resize(bytes.len() + name_len - entry.filename.len(), 0);
            }
            sections.push(FeatureSection {
                feature: HEADER_BUILD_ID,
                bytes,
            });
        }
        for (feature, text) in [
            (HEADER_HOSTNAME, &meta.hostname),
            (HEADER_OSRELEASE, &meta.os_release),
            (HEADER_VERSION, &meta.perf_version),
            (HEADER_ARCH, &meta.arch),
        ] {
            let mut bytes = Vec::new();
            push_string(&mut bytes, text)?;
            sections.push(FeatureSection { feature, bytes });
        }
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&meta.nr_cpus_available.to_le_bytes());
        bytes.extend_from_slice(&meta.nr_cpus_online.to_le_bytes());
        sections.push(FeatureSection {
            feature: HEADER_NRCPUS,
            bytes,
        });
        if let Some(description) = &meta.cpu_desc {
            let mut bytes = Vec::new();
            push_string(&mut bytes, description)?;
            sections.push(FeatureSection {
                feature: HEADER_CPUDESC,
                bytes,
            });
        }
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&to_u32(meta.cmdline.len(), "HEADER_CMDLINE count")?.to_le_bytes());
        for argument in &meta.cmdline {
            push_string(&mut bytes, argument)?;
        }
        sections.push(FeatureSection {
            feature: HEADER_CMDLINE,
            bytes,
        });
        self.finish_with_sections(sections)
    }

    /// Writes `sections` (another file's features as perf.data holds them, copied as
    /// `perf inject` copies them) with the ones this writer makes from what it wrote
    /// (EVENT_DESC, BRANCH_STACK, AUXTRACE; given ones of those bits are ignored, as
    /// are bits past 63, which no perf defines), then the final header; returns the
    /// inner writer positioned at the end of the file.
    pub fn finish_with_sections(
        mut self,
        mut sections: Vec<FeatureSection>,
    ) -> Result<W, WriteError> {
        sections.retain(|section| {
            section.feature < 64
                && ![HEADER_EVENT_DESC, HEADER_BRANCH_STACK, HEADER_AUXTRACE]
                    .contains(&section.feature)
        });
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&to_u32(self.events.len(), "event count")?.to_le_bytes());
        bytes.extend_from_slice(&to_u32(PERF_ATTR_SIZE, "attr size")?.to_le_bytes());
        for (event, attr) in self.events.iter().zip(&self.file_attrs) {
            bytes.extend_from_slice(attr);
            bytes.extend_from_slice(&to_u32(event.ids.len(), "id count")?.to_le_bytes());
            push_string(&mut bytes, &event.name)?;
            for id in &event.ids {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
        }
        sections.push(FeatureSection {
            feature: HEADER_EVENT_DESC,
            bytes,
        });
        let branch_stack = u64::from(abi::PERF_SAMPLE_BRANCH_STACK);
        if self
            .events
            .iter()
            .any(|event| event.attr.sample_type & branch_stack != 0)
        {
            // write_branch_stack() writes nothing: the bit alone is the information.
            sections.push(FeatureSection {
                feature: HEADER_BRANCH_STACK,
                bytes: Vec::new(),
            });
        }
        if !self.auxtrace_index.is_empty() {
            // auxtrace_index__write(): the count, then (file_offset, sz) per record.
            let mut bytes = Vec::with_capacity(8 + 16 * self.auxtrace_index.len());
            bytes.extend_from_slice(&as_u64(self.auxtrace_index.len()).to_le_bytes());
            for entry in &self.auxtrace_index {
                bytes.extend_from_slice(&entry.file_offset.to_le_bytes());
                bytes.extend_from_slice(&entry.size.to_le_bytes());
            }
            sections.push(FeatureSection {
                feature: HEADER_AUXTRACE,
                bytes,
            });
        }
        sections.sort_by_key(|section| section.feature);

        // perf_header__adds_write(): table of perf_file_section in feature-bit order right
        // after the data, then the sections themselves.
        let table_offset = offset_after(self.data_offset, self.data_size)?;
        let mut table = Vec::new();
        let mut contents = Vec::new();
        let mut features = 0u64;
        let table_size = as_u64(PERF_FILE_SECTION_SIZE * sections.len());
        let mut position = offset_after(table_offset, table_size)?;
        for section in &sections {
            features |= 1 << section.feature;
            table.extend_from_slice(&position.to_le_bytes());
            table.extend_from_slice(&as_u64(section.bytes.len()).to_le_bytes());
            contents.extend_from_slice(&section.bytes);
            position = offset_after(position, as_u64(section.bytes.len()))?;
        }
        table.extend_from_slice(&contents);
        let io = |offset: u64| move |source| WriteError::Io { offset, source };
        self.out
            .seek(SeekFrom::Start(table_offset))
            .and_then(|_| self.out.write_all(&table))
            .and_then(|_| self.out.flush())
            .map_err(io(table_offset))?;
        self.write_header(features)?;
        self.out
            .seek(SeekFrom::Start(position))
            .and_then(|_| self.out.flush())
            .map_err(io(position))?;
        Ok(self.out)
    }
}

/// `sizeof(struct perf_record_auxtrace)`, as its header's u16 size.
const AUXTRACE_SIZE: u16 = 48;
const _: () = assert!(AUXTRACE_SIZE as u64 == AUXTRACE_RECORD_SIZE);

/// A `perf_event_header.misc` bit of the bindings, which declare them u32 (the
/// field is a u16: the assertion, evaluated at compile time, keeps the cast whole).
const fn misc_bit(bit: u32) -> u16 {
    assert!(bit <= u16::MAX as u32);
    bit as u16
}
const MISC_COMM_EXEC: u16 = misc_bit(abi::PERF_RECORD_MISC_COMM_EXEC);
const MISC_MMAP_BUILD_ID: u16 = misc_bit(abi::PERF_RECORD_MISC_MMAP_BUILD_ID);

/// One chunk of AUX-area data for [`PerfDataWriter::write_auxtrace`], with the fields
/// of `struct perf_record_auxtrace` that place it.
#[derive(Debug, Clone, Copy)]
pub struct AuxtraceChunk<'a> {
    /// Position of `data` in its AUX area's stream of bytes (aux_tail when read).
    pub offset: u64,
    /// An opaque value the decoder may use to order chunks (perf uses a timestamp).
    pub reference: u64,
    /// Which AUX area: perf numbers the mmaps, one per CPU or per task.
    pub idx: u32,
    pub tid: u32,
    pub cpu: u32,
    pub data: &'a [u8],
}

/// Appends a NUL-terminated string padded with zeros to a multiple of 8 bytes, as the
/// kernel does for COMM and MMAP2 names.
fn push_padded_cstr(out: &mut Vec<u8>, text: &[u8]) {
    out.extend_from_slice(text);
    let len = align(text.len() + 1, 8);
    out.resize(out.len() + len - text.len(), 0);
}

/// `struct sample_id` (perf_event.h): the fields selected by sample_type, in this order
/// (0 for those `sample_id` lacks).
fn push_sample_id(out: &mut Vec<u8>, sample_type: u64, sample_id: &SampleId) {
    let has = |bit: u32| sample_type & u64::from(bit) != 0;
    if has(abi::PERF_SAMPLE_TID) {
        out.extend_from_slice(&sample_id.pid.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&sample_id.tid.unwrap_or(0).to_le_bytes());
    }
    let id = sample_id.id.unwrap_or(0);
    for (bit, value) in [
        (abi::PERF_SAMPLE_TIME, sample_id.time.unwrap_or(0)),
        (abi::PERF_SAMPLE_ID, id),
        (abi::PERF_SAMPLE_STREAM_ID, sample_id.stream_id.unwrap_or(0)),
        (abi::PERF_SAMPLE_CPU, u64::from(sample_id.cpu.unwrap_or(0))),
        (abi::PERF_SAMPLE_IDENTIFIER, id),
    ] {
        if has(bit) {
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}
