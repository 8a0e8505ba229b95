//! Writer for file-mode perf.data, laid out like `perf_session__write_header()` in
//! tools/perf/util/header.c: header, per-attr id arrays, the attr section, the streamed data
//! section, then the feature section table and the feature sections.

use std::io::{self, Seek, SeekFrom, Write};
use std::mem::offset_of;

use perf_abi::sys::bindings::perf_event_attr;

use crate::abi::*;
use crate::brstack::BranchStack;

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
    attr.size = PERF_ATTR_SIZE as u32;
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

/// The `sample_id` trailer of non-SAMPLE records (used only when the attr has sample_id_all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleId {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub id: u64,
    pub stream_id: u64,
    pub cpu: u32,
}

/// Fields of a SAMPLE record; only those selected by the attr's sample_type are written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SampleData {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub id: u64,
    pub stream_id: u64,
    pub cpu: u32,
    pub period: u64,
    pub callchain: Vec<u64>,
    pub branch_stack: Option<BranchStack>,
    /// `header.misc`, e.g. `PERF_RECORD_MISC_USER`.
    pub misc: u16,
}

/// How an MMAP2 record identifies its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mmap2FileId {
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
    },
    /// Up to 20 bytes; sets `PERF_RECORD_MISC_MMAP_BUILD_ID`.
    BuildId(Vec<u8>),
}

/// A `PERF_RECORD_MMAP2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmap2 {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub file_id: Mmap2FileId,
    pub prot: u32,
    pub flags: u32,
    pub filename: String,
    /// `header.misc` cpumode, e.g. `PERF_RECORD_MISC_USER`.
    pub cpumode: u16,
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
    /// HEADER_BUILD_ID entries: (pid, build id, filename, cpumode misc). perf itself writes
    /// pid -1 (HOST_KERNEL_ID) for host files.
    pub build_ids: Vec<(i32, Vec<u8>, String, u16)>,
}

impl Metadata {
    /// Fills hostname, OS release, arch and CPU counts from this host.
    pub fn from_host(perf_version: &str, cmdline: Vec<String>) -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
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

fn align(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// `do_write_string()`: u32 padded length, then the NUL-terminated, zero-padded string.
fn push_string(out: &mut Vec<u8>, s: &str) {
    let len = align(s.len() + 1, NAME_ALIGN);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + len - s.len(), 0);
}

/// Streams a perf.data file. The header written by [`PerfDataWriter::new`] claims an empty
/// data section and no features; only [`PerfDataWriter::finish`] rewrites it, after all
/// data and feature sections are on disk, so a crash never leaves a header pointing at
/// missing bytes.
#[derive(Debug)]
pub struct PerfDataWriter<W: Write + Seek> {
    w: W,
    events: Vec<EventDesc>,
    /// Each event's attr as written ([`file_attr`]), for HEADER_EVENT_DESC too.
    file_attrs: Vec<[u8; PERF_ATTR_SIZE]>,
    attr_offset: u64,
    data_offset: u64,
    data_size: u64,
    /// (file offset, size) of every PERF_RECORD_AUXTRACE, for HEADER_AUXTRACE.
    auxtrace_index: Vec<(u64, u64)>,
}

impl<W: Write + Seek> PerfDataWriter<W> {
    /// Writes the header, id arrays and attr section at the start of `w`.
    pub fn new(mut w: W, events: Vec<EventDesc>) -> Result<Self, WriteError> {
        if events.is_empty() {
            return Err(WriteError::NoAttrs);
        }
        let file_attrs = events
            .iter()
            .map(file_attr)
            .collect::<Result<Vec<_>, _>>()?;
        let io = |offset: u64| move |source| WriteError::Io { offset, source };
        let mut buf = vec![0u8; PERF_FILE_HEADER_SIZE];
        // Like perf, the id arrays come first and the perf_file_attr entries point at them.
        let mut id_offsets = Vec::new();
        for e in &events {
            id_offsets.push(buf.len() as u64);
            for id in &e.ids {
                buf.extend_from_slice(&id.to_le_bytes());
            }
        }
        let attr_offset = buf.len() as u64;
        for ((e, off), attr) in events.iter().zip(&id_offsets).zip(&file_attrs) {
            buf.extend_from_slice(attr);
            buf.extend_from_slice(&off.to_le_bytes());
            buf.extend_from_slice(&((e.ids.len() * 8) as u64).to_le_bytes());
        }
        let data_offset = buf.len() as u64;
        w.seek(SeekFrom::Start(0)).map_err(io(0))?;
        // The all-zero placeholder header has no magic; the real one follows once the
        // sections it points at exist.
        w.write_all(&buf).map_err(io(0))?;
        let mut this = Self {
            w,
            events,
            file_attrs,
            attr_offset,
            data_offset,
            data_size: 0,
            auxtrace_index: Vec::new(),
        };
        this.write_header(0)?;
        this.w
            .seek(SeekFrom::Start(data_offset))
            .map_err(io(data_offset))?;
        Ok(this)
    }

    fn write_header(&mut self, features: u64) -> Result<(), WriteError> {
        let mut h = Vec::with_capacity(PERF_FILE_HEADER_SIZE);
        h.extend_from_slice(b"PERFILE2");
        h.extend_from_slice(&(PERF_FILE_HEADER_SIZE as u64).to_le_bytes());
        let file_attr_size = (PERF_ATTR_SIZE + 16) as u64;
        h.extend_from_slice(&file_attr_size.to_le_bytes());
        h.extend_from_slice(&self.attr_offset.to_le_bytes());
        h.extend_from_slice(&(file_attr_size * self.events.len() as u64).to_le_bytes());
        h.extend_from_slice(&self.data_offset.to_le_bytes());
        h.extend_from_slice(&self.data_size.to_le_bytes());
        // event_types: unused since perf 3.x, always empty.
        h.extend_from_slice(&[0u8; 16]);
        h.extend_from_slice(&features.to_le_bytes());
        h.extend_from_slice(&[0u8; 24]);
        self.w
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.w.write_all(&h))
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
        if record.len() < PERF_EVENT_HEADER_SIZE {
            return Err(bad("shorter than perf_event_header"));
        }
        let size = u16::from_le_bytes([record[6], record[7]]) as usize;
        if size != record.len() {
            return Err(bad("header.size differs from the record length"));
        }
        if size % 8 != 0 {
            return Err(bad("size is not a multiple of 8"));
        }
        let offset = self.data_offset + self.data_size;
        self.w
            .write_all(record)
            .map_err(|source| WriteError::Io { offset, source })?;
        self.data_size += record.len() as u64;
        Ok(())
    }

    fn event(&self, attr_index: usize) -> Result<&EventDesc, WriteError> {
        self.events
            .get(attr_index)
            .ok_or(WriteError::NoSuchAttr(attr_index))
    }

    /// Finishes a record body: prepends the header, appends sample_id if the attr wants it.
    fn emit(
        &mut self,
        type_: u32,
        misc: u16,
        mut body: Vec<u8>,
        attr_index: usize,
        sid: &SampleId,
    ) -> Result<(), WriteError> {
        let attr = self.event(attr_index)?.attr;
        if attr.sample_id_all() != 0 {
            push_sample_id(&mut body, attr.sample_type, sid);
        }
        self.emit_raw(type_, misc, body)
    }

    fn emit_raw(&mut self, type_: u32, misc: u16, body: Vec<u8>) -> Result<(), WriteError> {
        let size = PERF_EVENT_HEADER_SIZE + body.len();
        let size16 = u16::try_from(size).map_err(|_| WriteError::BadRecord {
            len: size,
            why: "record larger than 65535 bytes",
        })?;
        let mut rec = Vec::with_capacity(size);
        rec.extend_from_slice(&type_.to_le_bytes());
        rec.extend_from_slice(&misc.to_le_bytes());
        rec.extend_from_slice(&size16.to_le_bytes());
        rec.extend_from_slice(&body);
        self.write_record(&rec)
    }

    /// Writes a SAMPLE for event `attr_index`, laid out per its sample_type.
    pub fn write_sample(&mut self, attr_index: usize, s: &SampleData) -> Result<(), WriteError> {
        let attr = self.event(attr_index)?.attr;
        let st = attr.sample_type;
        let supported = PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_ADDR
            | PERF_SAMPLE_ID
            | PERF_SAMPLE_STREAM_ID
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD
            | PERF_SAMPLE_CALLCHAIN
            | PERF_SAMPLE_BRANCH_STACK;
        if st & !supported != 0 {
            return Err(WriteError::UnsupportedSampleType(st & !supported));
        }
        if (st & PERF_SAMPLE_BRANCH_STACK != 0) != s.branch_stack.is_some() {
            return Err(WriteError::BranchStackMismatch);
        }
        let mut b = Vec::new();
        let u64s = |b: &mut Vec<u8>, bit: u64, v: u64| {
            if st & bit != 0 {
                b.extend_from_slice(&v.to_le_bytes());
            }
        };
        // Field order of struct perf_record_sample in perf_event.h.
        u64s(&mut b, PERF_SAMPLE_IDENTIFIER, s.id);
        u64s(&mut b, PERF_SAMPLE_IP, s.ip);
        u64s(
            &mut b,
            PERF_SAMPLE_TID,
            u64::from(s.pid) | u64::from(s.tid) << 32,
        );
        u64s(&mut b, PERF_SAMPLE_TIME, s.time);
        u64s(&mut b, PERF_SAMPLE_ADDR, s.addr);
        u64s(&mut b, PERF_SAMPLE_ID, s.id);
        u64s(&mut b, PERF_SAMPLE_STREAM_ID, s.stream_id);
        u64s(&mut b, PERF_SAMPLE_CPU, u64::from(s.cpu));
        u64s(&mut b, PERF_SAMPLE_PERIOD, s.period);
        if st & PERF_SAMPLE_CALLCHAIN != 0 {
            b.extend_from_slice(&(s.callchain.len() as u64).to_le_bytes());
            for ip in &s.callchain {
                b.extend_from_slice(&ip.to_le_bytes());
            }
        }
        if let Some(bs) = &s.branch_stack {
            b.extend_from_slice(&(bs.entries.len() as u64).to_le_bytes());
            // hw_idx is present exactly when the attr asks for it; perf reads it blindly.
            if attr.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX != 0 {
                b.extend_from_slice(&bs.hw_idx.unwrap_or(u64::MAX).to_le_bytes());
            }
            for e in &bs.entries {
                b.extend_from_slice(&e.from.to_le_bytes());
                b.extend_from_slice(&e.to.to_le_bytes());
                b.extend_from_slice(&e.flags.to_le_bytes());
            }
        }
        self.emit_raw(PERF_RECORD_SAMPLE, s.misc, b)
    }

    /// Writes a `PERF_RECORD_COMM`.
    pub fn write_comm(
        &mut self,
        attr_index: usize,
        pid: u32,
        tid: u32,
        comm: &str,
        exec: bool,
        sid: &SampleId,
    ) -> Result<(), WriteError> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&tid.to_le_bytes());
        push_padded_cstr(&mut b, comm);
        let misc = if exec { PERF_RECORD_MISC_COMM_EXEC } else { 0 };
        self.emit(PERF_RECORD_COMM, misc, b, attr_index, sid)
    }

    /// Writes a `PERF_RECORD_MMAP2` (inode or build-id form).
    pub fn write_mmap2(
        &mut self,
        attr_index: usize,
        m: &Mmap2,
        sid: &SampleId,
    ) -> Result<(), WriteError> {
        let mut b = Vec::new();
        b.extend_from_slice(&m.pid.to_le_bytes());
        b.extend_from_slice(&m.tid.to_le_bytes());
        b.extend_from_slice(&m.addr.to_le_bytes());
        b.extend_from_slice(&m.len.to_le_bytes());
        b.extend_from_slice(&m.pgoff.to_le_bytes());
        let mut misc = m.cpumode;
        match &m.file_id {
            Mmap2FileId::Inode {
                maj,
                min,
                ino,
                ino_generation,
            } => {
                b.extend_from_slice(&maj.to_le_bytes());
                b.extend_from_slice(&min.to_le_bytes());
                b.extend_from_slice(&ino.to_le_bytes());
                b.extend_from_slice(&ino_generation.to_le_bytes());
            }
            Mmap2FileId::BuildId(id) => {
                let n = id.len().min(20);
                b.push(n as u8);
                b.extend_from_slice(&[0, 0, 0]);
                let mut bid = [0u8; 20];
                bid[..n].copy_from_slice(&id[..n]);
                b.extend_from_slice(&bid);
                misc |= PERF_RECORD_MISC_MMAP_BUILD_ID;
            }
        }
        b.extend_from_slice(&m.prot.to_le_bytes());
        b.extend_from_slice(&m.flags.to_le_bytes());
        push_padded_cstr(&mut b, &m.filename);
        self.emit(PERF_RECORD_MMAP2, misc, b, attr_index, sid)
    }

    /// Writes a `PERF_RECORD_FORK` (`exit == false`) or `PERF_RECORD_EXIT`.
    #[allow(clippy::too_many_arguments)]
    pub fn write_fork_exit(
        &mut self,
        attr_index: usize,
        exit: bool,
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
        sid: &SampleId,
    ) -> Result<(), WriteError> {
        let mut b = Vec::new();
        for v in [pid, ppid, tid, ptid] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&time.to_le_bytes());
        let t = if exit {
            PERF_RECORD_EXIT
        } else {
            PERF_RECORD_FORK
        };
        self.emit(t, 0, b, attr_index, sid)
    }

    /// Writes a `PERF_RECORD_LOST`.
    pub fn write_lost(
        &mut self,
        attr_index: usize,
        id: u64,
        lost: u64,
        sid: &SampleId,
    ) -> Result<(), WriteError> {
        let mut b = Vec::new();
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&lost.to_le_bytes());
        self.emit(PERF_RECORD_LOST, 0, b, attr_index, sid)
    }

    /// Writes a `PERF_RECORD_THROTTLE`: the event `id` (`stream_id`, the id of the
    /// event that counted, is the same for an event that is not inherited) was
    /// throttled at `time` for having sampled more often than
    /// kernel.perf_event_max_sample_rate allows, and samples nothing until it is
    /// unthrottled (`perf script --show-throttle-events` shows both).
    pub fn write_throttle(
        &mut self,
        attr_index: usize,
        time: u64,
        id: u64,
        stream_id: u64,
        sid: &SampleId,
    ) -> Result<(), WriteError> {
        let mut b = Vec::with_capacity(24);
        for value in [time, id, stream_id] {
            b.extend_from_slice(&value.to_le_bytes());
        }
        self.emit(PERF_RECORD_THROTTLE, 0, b, attr_index, sid)
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
        let mut record = Vec::with_capacity(AUXTRACE_RECORD_SIZE as usize);
        record.extend_from_slice(&PERF_RECORD_AUXTRACE.to_le_bytes());
        record.extend_from_slice(&0u16.to_le_bytes());
        record.extend_from_slice(&(AUXTRACE_RECORD_SIZE as u16).to_le_bytes());
        record.extend_from_slice(&(padded as u64).to_le_bytes());
        record.extend_from_slice(&chunk.offset.to_le_bytes());
        record.extend_from_slice(&chunk.reference.to_le_bytes());
        record.extend_from_slice(&chunk.idx.to_le_bytes());
        record.extend_from_slice(&chunk.tid.to_le_bytes());
        record.extend_from_slice(&chunk.cpu.to_le_bytes());
        record.extend_from_slice(&0u32.to_le_bytes());
        let at = self.data_offset + self.data_size;
        self.w
            .write_all(&record)
            .and_then(|_| self.w.write_all(chunk.data))
            .and_then(|_| self.w.write_all(&[0u8; 8][..padded - chunk.data.len()]))
            .map_err(|source| WriteError::Io { offset: at, source })?;
        let total = AUXTRACE_RECORD_SIZE + padded as u64;
        self.auxtrace_index.push((at, total));
        self.data_size += total;
        Ok(())
    }

    /// Writes the feature sections, then the final header; returns the inner writer
    /// positioned at the end of the file.
    pub fn finish(self, meta: &Metadata) -> Result<W, WriteError> {
        let mut sections: Vec<(u32, Vec<u8>)> = Vec::new();
        if !meta.build_ids.is_empty() {
            let mut b = Vec::new();
            for (pid, id, name, cpumode) in &meta.build_ids {
                // struct perf_record_header_build_id: header, pid, build_id[24] (20 data
                // bytes, size byte, 3 reserved), filename padded to NAME_ALIGN.
                let name_len = align(name.len() + 1, NAME_ALIGN);
                let size = 8 + 4 + 24 + name_len;
                b.extend_from_slice(&0u32.to_le_bytes());
                b.extend_from_slice(&(cpumode | PERF_RECORD_MISC_BUILD_ID_SIZE).to_le_bytes());
                b.extend_from_slice(&(size as u16).to_le_bytes());
                b.extend_from_slice(&pid.to_le_bytes());
                let n = id.len().min(20);
                let mut bid = [0u8; 24];
                bid[..n].copy_from_slice(&id[..n]);
                bid[20] = n as u8;
                b.extend_from_slice(&bid);
                b.extend_from_slice(name.as_bytes());
                b.resize(b.len() + name_len - name.len(), 0);
            }
            sections.push((HEADER_BUILD_ID, b));
        }
        for (feat, s) in [
            (HEADER_HOSTNAME, &meta.hostname),
            (HEADER_OSRELEASE, &meta.os_release),
            (HEADER_VERSION, &meta.perf_version),
            (HEADER_ARCH, &meta.arch),
        ] {
            let mut b = Vec::new();
            push_string(&mut b, s);
            sections.push((feat, b));
        }
        let mut b = Vec::new();
        b.extend_from_slice(&meta.nr_cpus_available.to_le_bytes());
        b.extend_from_slice(&meta.nr_cpus_online.to_le_bytes());
        sections.push((HEADER_NRCPUS, b));
        if let Some(desc) = &meta.cpu_desc {
            let mut b = Vec::new();
            push_string(&mut b, desc);
            sections.push((HEADER_CPUDESC, b));
        }
        let mut b = Vec::new();
        b.extend_from_slice(&(meta.cmdline.len() as u32).to_le_bytes());
        for arg in &meta.cmdline {
            push_string(&mut b, arg);
        }
        sections.push((HEADER_CMDLINE, b));
        self.finish_with_sections(sections)
    }

    /// Writes `sections` (feature bit, the section's bytes as perf.data holds them:
    /// another file's features, copied as `perf inject` copies them) with the ones this
    /// writer makes from what it wrote (EVENT_DESC, BRANCH_STACK, AUXTRACE; given ones
    /// of those bits are ignored, as are bits past 63, which no perf defines), then the
    /// final header; returns the inner writer positioned at the end of the file.
    pub fn finish_with_sections(
        mut self,
        mut sections: Vec<(u32, Vec<u8>)>,
    ) -> Result<W, WriteError> {
        sections.retain(|(feature, _)| {
            *feature < 64
                && ![HEADER_EVENT_DESC, HEADER_BRANCH_STACK, HEADER_AUXTRACE].contains(feature)
        });
        let mut b = Vec::new();
        b.extend_from_slice(&(self.events.len() as u32).to_le_bytes());
        b.extend_from_slice(&(PERF_ATTR_SIZE as u32).to_le_bytes());
        for (e, attr) in self.events.iter().zip(&self.file_attrs) {
            b.extend_from_slice(attr);
            b.extend_from_slice(&(e.ids.len() as u32).to_le_bytes());
            push_string(&mut b, &e.name);
            for id in &e.ids {
                b.extend_from_slice(&id.to_le_bytes());
            }
        }
        sections.push((HEADER_EVENT_DESC, b));
        if self
            .events
            .iter()
            .any(|e| e.attr.sample_type & PERF_SAMPLE_BRANCH_STACK != 0)
        {
            // write_branch_stack() writes nothing: the bit alone is the information.
            sections.push((HEADER_BRANCH_STACK, Vec::new()));
        }

        if !self.auxtrace_index.is_empty() {
            // auxtrace_index__write(): the count, then (file_offset, sz) per record.
            let mut b = Vec::with_capacity(8 + 16 * self.auxtrace_index.len());
            b.extend_from_slice(&(self.auxtrace_index.len() as u64).to_le_bytes());
            for (offset, size) in &self.auxtrace_index {
                b.extend_from_slice(&offset.to_le_bytes());
                b.extend_from_slice(&size.to_le_bytes());
            }
            sections.push((HEADER_AUXTRACE, b));
        }
        sections.sort_by_key(|(feature, _)| *feature);

        // perf_header__adds_write(): table of perf_file_section in feature-bit order right
        // after the data, then the sections themselves.
        let table_offset = self.data_offset + self.data_size;
        let mut table = Vec::new();
        let mut body = Vec::new();
        let mut features = 0u64;
        let mut pos = table_offset + 16 * sections.len() as u64;
        for (feat, data) in &sections {
            features |= 1 << feat;
            table.extend_from_slice(&pos.to_le_bytes());
            table.extend_from_slice(&(data.len() as u64).to_le_bytes());
            body.extend_from_slice(data);
            pos += data.len() as u64;
        }
        table.extend_from_slice(&body);
        let io = |offset: u64| move |source| WriteError::Io { offset, source };
        self.w
            .seek(SeekFrom::Start(table_offset))
            .and_then(|_| self.w.write_all(&table))
            .and_then(|_| self.w.flush())
            .map_err(io(table_offset))?;
        self.write_header(features)?;
        self.w
            .seek(SeekFrom::Start(pos))
            .and_then(|_| self.w.flush())
            .map_err(io(pos))?;
        Ok(self.w)
    }
}

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
fn push_padded_cstr(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(s.as_bytes());
    let n = align(s.len() + 1, 8);
    b.resize(b.len() + n - s.len(), 0);
}

/// `struct sample_id` (perf_event.h): the fields selected by sample_type, in this order.
fn push_sample_id(b: &mut Vec<u8>, st: u64, sid: &SampleId) {
    if st & PERF_SAMPLE_TID != 0 {
        b.extend_from_slice(&sid.pid.to_le_bytes());
        b.extend_from_slice(&sid.tid.to_le_bytes());
    }
    if st & PERF_SAMPLE_TIME != 0 {
        b.extend_from_slice(&sid.time.to_le_bytes());
    }
    if st & PERF_SAMPLE_ID != 0 {
        b.extend_from_slice(&sid.id.to_le_bytes());
    }
    if st & PERF_SAMPLE_STREAM_ID != 0 {
        b.extend_from_slice(&sid.stream_id.to_le_bytes());
    }
    if st & PERF_SAMPLE_CPU != 0 {
        b.extend_from_slice(&u64::from(sid.cpu).to_le_bytes());
    }
    if st & PERF_SAMPLE_IDENTIFIER != 0 {
        b.extend_from_slice(&sid.id.to_le_bytes());
    }
}
