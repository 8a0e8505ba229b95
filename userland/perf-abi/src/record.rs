//! Records as the kernel writes them (`struct perf_event_header` + body).
//!
//! The parser borrows from the body: strings, callchains, raw data and branch
//! stacks are views into it. Bodies need not be 8-byte aligned (perf.data
//! pages, copied split records), so u64 arrays are exposed as [`U64Slice`]
//! rather than `&[u64]`.

use perf_event_open_sys::bindings::{self as b, perf_branch_entry, perf_event_attr};

/// `sizeof(struct perf_event_header)`: type u32, misc u16, size u16.
pub const RECORD_HEADER_SIZE: usize = 8;

/// What the parser must know about the attr that produced a record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleFormat {
    pub sample_type: u64,
    pub read_format: u64,
    /// Only PERF_SAMPLE_BRANCH_HW_INDEX changes the layout.
    pub branch_sample_type: u64,
    pub sample_id_all: bool,
    pub sample_regs_user: u64,
    pub sample_regs_intr: u64,
}

impl SampleFormat {
    pub fn from_attr(attr: &perf_event_attr) -> Self {
        Self {
            sample_type: attr.sample_type,
            read_format: attr.read_format,
            branch_sample_type: attr.branch_sample_type,
            sample_id_all: attr.sample_id_all() != 0,
            sample_regs_user: attr.sample_regs_user,
            sample_regs_intr: attr.sample_regs_intr,
        }
    }

    fn has(&self, bit: u32) -> bool {
        self.sample_type & u64::from(bit) != 0
    }

    /// The event id of a kernel record without parsing it, where perf looks for it
    /// (`evsel->id_pos` for samples, `evsel->is_pos` from the end of the
    /// `sample_id_all` trailer for the rest): PERF_SAMPLE_IDENTIFIER when the format
    /// has it, else PERF_SAMPLE_ID. `None` when the format records no id or the body
    /// is too short.
    pub fn record_id(&self, record_type: u32, body: &[u8]) -> Option<u64> {
        if record_type == b::PERF_RECORD_SAMPLE {
            let before: &[u32] = if self.has(b::PERF_SAMPLE_IDENTIFIER) {
                &[]
            } else if self.has(b::PERF_SAMPLE_ID) {
                &[
                    b::PERF_SAMPLE_IP,
                    b::PERF_SAMPLE_TID,
                    b::PERF_SAMPLE_TIME,
                    b::PERF_SAMPLE_ADDR,
                ]
            } else {
                return None;
            };
            self.word_from_start(body, before)
        } else if self.has(b::PERF_SAMPLE_IDENTIFIER) {
            self.trailer_word(body, &[b::PERF_SAMPLE_IDENTIFIER])
        } else if self.has(b::PERF_SAMPLE_ID) {
            self.trailer_word(
                body,
                &[
                    b::PERF_SAMPLE_ID,
                    b::PERF_SAMPLE_STREAM_ID,
                    b::PERF_SAMPLE_CPU,
                ],
            )
        } else {
            None
        }
    }

    /// The time of a kernel record without parsing it: a sample's PERF_SAMPLE_TIME, or
    /// the time in the `sample_id_all` trailer of any other record. `None` when the
    /// format records no time there or the body is too short.
    pub fn record_time(&self, record_type: u32, body: &[u8]) -> Option<u64> {
        if !self.has(b::PERF_SAMPLE_TIME) {
            return None;
        }
        if record_type == b::PERF_RECORD_SAMPLE {
            self.word_from_start(
                body,
                &[
                    b::PERF_SAMPLE_IDENTIFIER,
                    b::PERF_SAMPLE_IP,
                    b::PERF_SAMPLE_TID,
                ],
            )
        } else {
            self.trailer_word(
                body,
                &[
                    b::PERF_SAMPLE_TIME,
                    b::PERF_SAMPLE_ID,
                    b::PERF_SAMPLE_STREAM_ID,
                    b::PERF_SAMPLE_CPU,
                    b::PERF_SAMPLE_IDENTIFIER,
                ],
            )
        }
    }

    /// The u64 of a sample body after the fixed-size fields `before` the format has.
    fn word_from_start(&self, body: &[u8], before: &[u32]) -> Option<u64> {
        let at = 8 * before.iter().filter(|&&bit| self.has(bit)).count();
        word_at(body, at)
    }

    /// The u64 of the `sample_id_all` trailer that starts as many words from the end
    /// as the format has of `from_here_on` (the word's own field and those after it).
    fn trailer_word(&self, body: &[u8], from_here_on: &[u32]) -> Option<u64> {
        if !self.sample_id_all {
            return None;
        }
        let from_end = 8 * from_here_on.iter().filter(|&&bit| self.has(bit)).count();
        word_at(body, body.len().checked_sub(from_end)?)
    }
}

fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let word = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_ne_bytes(word.try_into().ok()?))
}

/// A record that does not fit its declared format. `offset` is the byte
/// offset within the record body (after the 8-byte header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record type {record_type} truncated at body offset {offset}: {field} needs {needed} bytes, {available} left")]
    Truncated {
        record_type: u32,
        offset: usize,
        field: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("record type {record_type}: {field} count {count} at body offset {offset} overflows the record")]
    BadCount {
        record_type: u32,
        offset: usize,
        field: &'static str,
        count: u64,
    },
}

/// A u64 array borrowed from a record, read in native byte order.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct U64Slice<'a> {
    bytes: &'a [u8],
}

impl<'a> U64Slice<'a> {
    /// A view of `bytes` as u64s in native byte order; `None` unless its length is a
    /// multiple of 8 (for writers that build records from owned values).
    pub fn from_bytes(bytes: &'a [u8]) -> Option<Self> {
        (bytes.len() % 8 == 0).then_some(Self { bytes })
    }

    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<u64> {
        let chunk = self.bytes.get(index * 8..index * 8 + 8)?;
        Some(u64::from_ne_bytes(chunk.try_into().ok()?))
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.bytes
            .chunks_exact(8)
            .map(|chunk| u64::from_ne_bytes(chunk.try_into().unwrap_or([0; 8])))
    }

    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }
}

impl std::fmt::Debug for U64Slice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The `sample_id_all` trailer of non-sample records; fields are present as
/// the sample_type asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadGroupEntry {
    pub value: u64,
    pub id: Option<u64>,
    pub lost: Option<u64>,
}

/// PERF_SAMPLE_READ contents; a non-group read has exactly one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadValues {
    pub time_enabled: Option<u64>,
    pub time_running: Option<u64>,
    pub values: Vec<ReadGroupEntry>,
}

/// The decoded flags word of `struct perf_branch_entry`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BranchFlags {
    pub mispred: bool,
    pub predicted: bool,
    pub in_tx: bool,
    pub abort: bool,
    pub cycles: u16,
    /// PERF_BR_* (4 bits).
    pub branch_type: u8,
    /// PERF_BR_SPEC_* (2 bits).
    pub spec: u8,
    /// PERF_BR_NEW_* (4 bits), meaningful when branch_type is PERF_BR_EXTEND_ABI.
    pub new_type: u8,
    /// PERF_BR_PRIV_* (3 bits).
    pub privilege: u8,
}

impl BranchFlags {
    /// Decodes the word through the kernel struct's own bitfield accessors so
    /// the bit positions are the ABI's, not ours.
    pub fn from_word(word: u64) -> Self {
        let entry = perf_branch_entry {
            from: 0,
            to: 0,
            _bitfield_align_1: [],
            _bitfield_1: b::__BindgenBitfieldUnit::new(word.to_ne_bytes()),
        };
        Self {
            mispred: entry.mispred() != 0,
            predicted: entry.predicted() != 0,
            in_tx: entry.in_tx() != 0,
            abort: entry.abort() != 0,
            cycles: entry.cycles() as u16,
            branch_type: entry.type_() as u8,
            spec: entry.spec() as u8,
            new_type: entry.new_type() as u8,
            privilege: entry.priv_() as u8,
        }
    }

    /// Packs the fields into the flags word, through the same bitfield accessors.
    pub fn to_word(&self) -> u64 {
        let mut entry = perf_branch_entry {
            from: 0,
            to: 0,
            _bitfield_align_1: [],
            _bitfield_1: b::__BindgenBitfieldUnit::new([0; 8]),
        };
        entry.set_mispred(self.mispred.into());
        entry.set_predicted(self.predicted.into());
        entry.set_in_tx(self.in_tx.into());
        entry.set_abort(self.abort.into());
        entry.set_cycles(self.cycles.into());
        entry.set_type(self.branch_type.into());
        entry.set_spec(self.spec.into());
        entry.set_new_type(self.new_type.into());
        entry.set_priv(self.privilege.into());
        entry._bitfield_1.get(0, 64)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BranchEntry {
    pub from: u64,
    pub to: u64,
    pub flags: BranchFlags,
}

impl BranchEntry {
    /// The entry as `struct perf_branch_entry` holds it, in native byte order: what
    /// [`BranchStack::from_bytes`] reads.
    pub fn to_bytes(&self) -> [u8; BRANCH_ENTRY_SIZE] {
        let mut bytes = [0; BRANCH_ENTRY_SIZE];
        bytes[..8].copy_from_slice(&self.from.to_ne_bytes());
        bytes[8..16].copy_from_slice(&self.to.to_ne_bytes());
        bytes[16..].copy_from_slice(&self.flags.to_word().to_ne_bytes());
        bytes
    }
}

/// PERF_SAMPLE_BRANCH_STACK: entries are decoded on access.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct BranchStack<'a> {
    /// Present when the attr had PERF_SAMPLE_BRANCH_HW_INDEX.
    pub hw_idx: Option<u64>,
    entries: &'a [u8],
}

const BRANCH_ENTRY_SIZE: usize = std::mem::size_of::<perf_branch_entry>();

impl<'a> BranchStack<'a> {
    /// A branch stack over `entries`, `struct perf_branch_entry` after another in native
    /// byte order (as a record or rvperf_ctr's AUX data holds them); `None` unless
    /// their length is a multiple of the entry size.
    pub fn from_bytes(hw_idx: Option<u64>, entries: &'a [u8]) -> Option<Self> {
        (entries.len() % BRANCH_ENTRY_SIZE == 0).then_some(Self { hw_idx, entries })
    }

    /// The entries' bytes, as the record holds them (flag words bit for bit).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len() / BRANCH_ENTRY_SIZE
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = BranchEntry> + 'a {
        self.entries.chunks_exact(BRANCH_ENTRY_SIZE).map(|chunk| {
            let words = U64Slice { bytes: chunk };
            BranchEntry {
                from: words.get(0).unwrap_or(0),
                to: words.get(1).unwrap_or(0),
                flags: BranchFlags::from_word(words.get(2).unwrap_or(0)),
            }
        })
    }
}

impl std::fmt::Debug for BranchStack<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BranchStack")
            .field("hw_idx", &self.hw_idx)
            .field("entries", &self.iter().collect::<Vec<_>>())
            .finish()
    }
}

/// Sampled registers: `abi` is PERF_SAMPLE_REGS_ABI_*; 0 means none were
/// taken (e.g. a kernel thread for user regs) and `values` is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs<'a> {
    pub abi: u64,
    /// One value per set bit of the mask, lowest bit first.
    pub values: U64Slice<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample<'a> {
    /// The record header's `misc`: its `PERF_RECORD_MISC_CPUMODE_MASK` bits say
    /// whether the sample was taken in the kernel or in user mode.
    pub misc: u16,
    pub identifier: Option<u64>,
    pub ip: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub addr: Option<u64>,
    /// PERF_SAMPLE_ID, else PERF_SAMPLE_IDENTIFIER (the same id).
    pub id: Option<u64>,
    pub stream_id: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub read: Option<ReadValues>,
    pub callchain: Option<U64Slice<'a>>,
    pub raw: Option<&'a [u8]>,
    pub branch_stack: Option<BranchStack<'a>>,
    pub regs_user: Option<Regs<'a>>,
    /// The user stack copy, cut to the dynamic size the kernel filled.
    pub stack_user: Option<&'a [u8]>,
    pub weight: Option<u64>,
    pub data_src: Option<u64>,
    pub transaction: Option<u64>,
    pub regs_intr: Option<Regs<'a>>,
    pub phys_addr: Option<u64>,
    pub cgroup: Option<u64>,
    pub data_page_size: Option<u64>,
    pub code_page_size: Option<u64>,
    pub aux: Option<&'a [u8]>,
}

impl Sample<'_> {
    /// The weight perf gives the sample (its `sample->period`): the PERIOD field when
    /// the event records it, else the attr's `sample_period` (a fixed-period
    /// recording, `perf record -c N`, does not record it). As in perf's
    /// `evsel__parse_sample`, which starts from the union `sample_period`/`sample_freq`,
    /// an event in frequency mode without PERIOD gives its frequency, and a counting
    /// event 0.
    pub fn period_or_attr(&self, attr: &perf_event_attr) -> u64 {
        self.period.unwrap_or(attr.sample_period)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmapRecord<'a> {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// Without the NUL padding.
    pub filename: &'a [u8],
    pub sample_id: SampleId,
}

/// Mmap2 identifies the file either by device/inode or, with
/// PERF_RECORD_MISC_MMAP_BUILD_ID, by build id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mmap2FileId<'a> {
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        ino_generation: u64,
    },
    BuildId(&'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap2Record<'a> {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub file_id: Mmap2FileId<'a>,
    pub prot: u32,
    pub flags: u32,
    pub filename: &'a [u8],
    pub sample_id: SampleId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommRecord<'a> {
    pub pid: u32,
    pub tid: u32,
    pub comm: &'a [u8],
    /// PERF_RECORD_MISC_COMM_EXEC: the name changed because of exec.
    pub exec: bool,
    pub sample_id: SampleId,
}

/// Fork and exit share one layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskRecord {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
    pub sample_id: SampleId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostRecord {
    pub id: u64,
    pub lost: u64,
    pub sample_id: SampleId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleRecord {
    pub time: u64,
    pub id: u64,
    pub stream_id: u64,
    pub sample_id: SampleId,
}

/// A context switch; for the CPU-wide form `next_prev` is the task switched
/// to (on `out`) or from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchRecord {
    pub out: bool,
    pub preempt: bool,
    pub next_prev_pid: Option<u32>,
    pub next_prev_tid: Option<u32>,
    pub sample_id: SampleId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxRecord {
    pub aux_offset: u64,
    pub aux_size: u64,
    /// PERF_AUX_FLAG_* bits.
    pub flags: u64,
    pub sample_id: SampleId,
}

impl AuxRecord {
    pub fn truncated(&self) -> bool {
        self.flags & u64::from(b::PERF_AUX_FLAG_TRUNCATED) != 0
    }
    pub fn overwrite(&self) -> bool {
        self.flags & u64::from(b::PERF_AUX_FLAG_OVERWRITE) != 0
    }
    pub fn partial(&self) -> bool {
        self.flags & u64::from(b::PERF_AUX_FLAG_PARTIAL) != 0
    }
    pub fn collision(&self) -> bool {
        self.flags & u64::from(b::PERF_AUX_FLAG_COLLISION) != 0
    }
}

#[expect(
    clippy::large_enum_variant,
    reason = "samples are by far the most frequent records; boxing them to shrink the \
              side-band variants would cost an allocation per sample"
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    Mmap(MmapRecord<'a>),
    Mmap2(Mmap2Record<'a>),
    Comm(CommRecord<'a>),
    Fork(TaskRecord),
    Exit(TaskRecord),
    Lost(LostRecord),
    LostSamples {
        lost: u64,
        sample_id: SampleId,
    },
    Throttle(ThrottleRecord),
    Unthrottle(ThrottleRecord),
    Switch(SwitchRecord),
    SwitchCpuWide(SwitchRecord),
    Aux(AuxRecord),
    ItraceStart {
        pid: u32,
        tid: u32,
        sample_id: SampleId,
    },
    /// Any type this parser does not decode, kept whole.
    Other {
        record_type: u32,
        misc: u16,
        body: &'a [u8],
    },
}

struct Cursor<'a> {
    record_type: u32,
    body: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, needed: usize, field: &'static str) -> Result<&'a [u8], RecordError> {
        let available = self.body.len() - self.pos;
        if needed > available {
            return Err(RecordError::Truncated {
                record_type: self.record_type,
                offset: self.pos,
                field,
                needed,
                available,
            });
        }
        let bytes = &self.body[self.pos..self.pos + needed];
        self.pos += needed;
        Ok(bytes)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, RecordError> {
        let bytes = self.take(8, field)?;
        Ok(u64::from_ne_bytes(bytes.try_into().unwrap_or([0; 8])))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, RecordError> {
        let bytes = self.take(4, field)?;
        Ok(u32::from_ne_bytes(bytes.try_into().unwrap_or([0; 4])))
    }

    /// `count` elements of `element_size` bytes, refusing counts that would
    /// overflow rather than trusting the record.
    fn array(
        &mut self,
        count: u64,
        element_size: usize,
        field: &'static str,
    ) -> Result<&'a [u8], RecordError> {
        let bad_count = RecordError::BadCount {
            record_type: self.record_type,
            offset: self.pos,
            field,
            count,
        };
        let needed = usize::try_from(count)
            .ok()
            .and_then(|count| count.checked_mul(element_size))
            .ok_or(bad_count.clone())?;
        if needed > self.body.len() - self.pos {
            return Err(bad_count);
        }
        self.take(needed, field)
    }

    fn regs(&mut self, mask: u64, field: &'static str) -> Result<Regs<'a>, RecordError> {
        let abi = self.u64(field)?;
        let count = if abi == 0 {
            0
        } else {
            u64::from(mask.count_ones())
        };
        let bytes = self.array(count, 8, field)?;
        Ok(Regs {
            abi,
            values: U64Slice { bytes },
        })
    }

    fn rest(&mut self) -> &'a [u8] {
        let bytes = &self.body[self.pos..];
        self.pos = self.body.len();
        bytes
    }
}

fn sample_id_size(format: &SampleFormat) -> usize {
    [
        b::PERF_SAMPLE_TID,
        b::PERF_SAMPLE_TIME,
        b::PERF_SAMPLE_ID,
        b::PERF_SAMPLE_STREAM_ID,
        b::PERF_SAMPLE_CPU,
        b::PERF_SAMPLE_IDENTIFIER,
    ]
    .iter()
    .filter(|&&bit| format.has(bit))
    .count()
        * 8
}

/// Splits off and decodes the sample_id_all trailer; returns the body
/// without it.
fn split_sample_id<'a>(
    record_type: u32,
    body: &'a [u8],
    format: &SampleFormat,
) -> Result<(&'a [u8], SampleId), RecordError> {
    if !format.sample_id_all {
        return Ok((body, SampleId::default()));
    }
    let size = sample_id_size(format);
    if size > body.len() {
        return Err(RecordError::Truncated {
            record_type,
            offset: 0,
            field: "sample_id trailer",
            needed: size,
            available: body.len(),
        });
    }
    let start = body.len() - size;
    let mut cursor = Cursor {
        record_type,
        body,
        pos: start,
    };
    let mut id = SampleId::default();
    if format.has(b::PERF_SAMPLE_TID) {
        id.pid = Some(cursor.u32("sample_id.pid")?);
        id.tid = Some(cursor.u32("sample_id.tid")?);
    }
    if format.has(b::PERF_SAMPLE_TIME) {
        id.time = Some(cursor.u64("sample_id.time")?);
    }
    if format.has(b::PERF_SAMPLE_ID) {
        id.id = Some(cursor.u64("sample_id.id")?);
    }
    if format.has(b::PERF_SAMPLE_STREAM_ID) {
        id.stream_id = Some(cursor.u64("sample_id.stream_id")?);
    }
    if format.has(b::PERF_SAMPLE_CPU) {
        id.cpu = Some(cursor.u32("sample_id.cpu")?);
        cursor.u32("sample_id.res")?;
    }
    if format.has(b::PERF_SAMPLE_IDENTIFIER) {
        // The identifier duplicates the id for streams that lack
        // PERF_SAMPLE_ID; keep whichever is present.
        let identifier = cursor.u64("sample_id.identifier")?;
        id.id.get_or_insert(identifier);
    }
    Ok((&body[..start], id))
}

fn c_string(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// Parses one record body (the bytes after the 8-byte header).
pub fn parse_record<'a>(
    record_type: u32,
    misc: u16,
    body: &'a [u8],
    format: &SampleFormat,
) -> Result<Record<'a>, RecordError> {
    let misc32 = u32::from(misc);
    if record_type == b::PERF_RECORD_SAMPLE {
        return parse_sample(misc, body, format).map(Record::Sample);
    }
    let known = matches!(
        record_type,
        b::PERF_RECORD_MMAP
            | b::PERF_RECORD_MMAP2
            | b::PERF_RECORD_COMM
            | b::PERF_RECORD_FORK
            | b::PERF_RECORD_EXIT
            | b::PERF_RECORD_LOST
            | b::PERF_RECORD_LOST_SAMPLES
            | b::PERF_RECORD_THROTTLE
            | b::PERF_RECORD_UNTHROTTLE
            | b::PERF_RECORD_SWITCH
            | b::PERF_RECORD_SWITCH_CPU_WIDE
            | b::PERF_RECORD_AUX
            | b::PERF_RECORD_ITRACE_START
    );
    if !known {
        return Ok(Record::Other {
            record_type,
            misc,
            body,
        });
    }
    let (fields, sample_id) = split_sample_id(record_type, body, format)?;
    let mut c = Cursor {
        record_type,
        body: fields,
        pos: 0,
    };
    let record = match record_type {
        b::PERF_RECORD_MMAP => Record::Mmap(MmapRecord {
            pid: c.u32("pid")?,
            tid: c.u32("tid")?,
            addr: c.u64("addr")?,
            len: c.u64("len")?,
            pgoff: c.u64("pgoff")?,
            filename: c_string(c.rest()),
            sample_id,
        }),
        b::PERF_RECORD_MMAP2 => {
            let (pid, tid) = (c.u32("pid")?, c.u32("tid")?);
            let (addr, len, pgoff) = (c.u64("addr")?, c.u64("len")?, c.u64("pgoff")?);
            let file_id = if misc32 & b::PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
                let id_field = c.take(24, "build_id")?;
                // build_id_size, 3 reserved bytes, then up to 20 id bytes.
                let size = usize::from(id_field[0]).min(20);
                Mmap2FileId::BuildId(&id_field[4..4 + size])
            } else {
                Mmap2FileId::Inode {
                    maj: c.u32("maj")?,
                    min: c.u32("min")?,
                    ino: c.u64("ino")?,
                    ino_generation: c.u64("ino_generation")?,
                }
            };
            Record::Mmap2(Mmap2Record {
                pid,
                tid,
                addr,
                len,
                pgoff,
                file_id,
                prot: c.u32("prot")?,
                flags: c.u32("flags")?,
                filename: c_string(c.rest()),
                sample_id,
            })
        }
        b::PERF_RECORD_COMM => Record::Comm(CommRecord {
            pid: c.u32("pid")?,
            tid: c.u32("tid")?,
            comm: c_string(c.rest()),
            exec: misc32 & b::PERF_RECORD_MISC_COMM_EXEC != 0,
            sample_id,
        }),
        b::PERF_RECORD_FORK | b::PERF_RECORD_EXIT => {
            let task = TaskRecord {
                pid: c.u32("pid")?,
                ppid: c.u32("ppid")?,
                tid: c.u32("tid")?,
                ptid: c.u32("ptid")?,
                time: c.u64("time")?,
                sample_id,
            };
            if record_type == b::PERF_RECORD_FORK {
                Record::Fork(task)
            } else {
                Record::Exit(task)
            }
        }
        b::PERF_RECORD_LOST => Record::Lost(LostRecord {
            id: c.u64("id")?,
            lost: c.u64("lost")?,
            sample_id,
        }),
        b::PERF_RECORD_LOST_SAMPLES => Record::LostSamples {
            lost: c.u64("lost")?,
            sample_id,
        },
        b::PERF_RECORD_THROTTLE | b::PERF_RECORD_UNTHROTTLE => {
            let throttle = ThrottleRecord {
                time: c.u64("time")?,
                id: c.u64("id")?,
                stream_id: c.u64("stream_id")?,
                sample_id,
            };
            if record_type == b::PERF_RECORD_THROTTLE {
                Record::Throttle(throttle)
            } else {
                Record::Unthrottle(throttle)
            }
        }
        b::PERF_RECORD_SWITCH | b::PERF_RECORD_SWITCH_CPU_WIDE => {
            let cpu_wide = record_type == b::PERF_RECORD_SWITCH_CPU_WIDE;
            let (next_prev_pid, next_prev_tid) = if cpu_wide {
                (Some(c.u32("next_prev_pid")?), Some(c.u32("next_prev_tid")?))
            } else {
                (None, None)
            };
            let out = misc32 & b::PERF_RECORD_MISC_SWITCH_OUT != 0;
            let switch = SwitchRecord {
                out,
                preempt: out && misc32 & b::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0,
                next_prev_pid,
                next_prev_tid,
                sample_id,
            };
            if cpu_wide {
                Record::SwitchCpuWide(switch)
            } else {
                Record::Switch(switch)
            }
        }
        b::PERF_RECORD_AUX => Record::Aux(AuxRecord {
            aux_offset: c.u64("aux_offset")?,
            aux_size: c.u64("aux_size")?,
            flags: c.u64("flags")?,
            sample_id,
        }),
        _ => Record::ItraceStart {
            pid: c.u32("pid")?,
            tid: c.u32("tid")?,
            sample_id,
        },
    };
    Ok(record)
}

fn parse_sample<'a>(
    misc: u16,
    body: &'a [u8],
    format: &SampleFormat,
) -> Result<Sample<'a>, RecordError> {
    let mut c = Cursor {
        record_type: b::PERF_RECORD_SAMPLE,
        body,
        pos: 0,
    };
    let f = format;
    let mut s = Sample {
        misc,
        ..Sample::default()
    };
    if f.has(b::PERF_SAMPLE_IDENTIFIER) {
        s.identifier = Some(c.u64("identifier")?);
    }
    if f.has(b::PERF_SAMPLE_IP) {
        s.ip = Some(c.u64("ip")?);
    }
    if f.has(b::PERF_SAMPLE_TID) {
        s.pid = Some(c.u32("pid")?);
        s.tid = Some(c.u32("tid")?);
    }
    if f.has(b::PERF_SAMPLE_TIME) {
        s.time = Some(c.u64("time")?);
    }
    if f.has(b::PERF_SAMPLE_ADDR) {
        s.addr = Some(c.u64("addr")?);
    }
    if f.has(b::PERF_SAMPLE_ID) {
        s.id = Some(c.u64("id")?);
    } else {
        // The identifier is the id for streams without PERF_SAMPLE_ID, as in the
        // sample_id trailer.
        s.id = s.identifier;
    }
    if f.has(b::PERF_SAMPLE_STREAM_ID) {
        s.stream_id = Some(c.u64("stream_id")?);
    }
    if f.has(b::PERF_SAMPLE_CPU) {
        s.cpu = Some(c.u32("cpu")?);
        c.u32("cpu.res")?;
    }
    if f.has(b::PERF_SAMPLE_PERIOD) {
        s.period = Some(c.u64("period")?);
    }
    if f.has(b::PERF_SAMPLE_READ) {
        s.read = Some(parse_read(&mut c, f.read_format)?);
    }
    if f.has(b::PERF_SAMPLE_CALLCHAIN) {
        let nr = c.u64("callchain.nr")?;
        s.callchain = Some(U64Slice {
            bytes: c.array(nr, 8, "callchain.ips")?,
        });
    }
    if f.has(b::PERF_SAMPLE_RAW) {
        let size = c.u32("raw.size")?;
        s.raw = Some(c.array(u64::from(size), 1, "raw.data")?);
    }
    if f.has(b::PERF_SAMPLE_BRANCH_STACK) {
        let nr = c.u64("branch_stack.nr")?;
        let hw_idx = if f.branch_sample_type & u64::from(b::PERF_SAMPLE_BRANCH_HW_INDEX) != 0 {
            Some(c.u64("branch_stack.hw_idx")?)
        } else {
            None
        };
        s.branch_stack = Some(BranchStack {
            hw_idx,
            entries: c.array(nr, BRANCH_ENTRY_SIZE, "branch_stack.entries")?,
        });
    }
    if f.has(b::PERF_SAMPLE_REGS_USER) {
        s.regs_user = Some(c.regs(f.sample_regs_user, "regs_user")?);
    }
    if f.has(b::PERF_SAMPLE_STACK_USER) {
        let size = c.u64("stack_user.size")?;
        let data = c.array(size, 1, "stack_user.data")?;
        // dyn_size only follows a non-empty copy.
        s.stack_user = Some(if size == 0 {
            data
        } else {
            let dyn_size = c.u64("stack_user.dyn_size")?;
            &data[..usize::try_from(dyn_size)
                .unwrap_or(usize::MAX)
                .min(data.len())]
        });
    }
    if f.has(b::PERF_SAMPLE_WEIGHT) || f.has(b::PERF_SAMPLE_WEIGHT_STRUCT) {
        s.weight = Some(c.u64("weight")?);
    }
    if f.has(b::PERF_SAMPLE_DATA_SRC) {
        s.data_src = Some(c.u64("data_src")?);
    }
    if f.has(b::PERF_SAMPLE_TRANSACTION) {
        s.transaction = Some(c.u64("transaction")?);
    }
    if f.has(b::PERF_SAMPLE_REGS_INTR) {
        s.regs_intr = Some(c.regs(f.sample_regs_intr, "regs_intr")?);
    }
    if f.has(b::PERF_SAMPLE_PHYS_ADDR) {
        s.phys_addr = Some(c.u64("phys_addr")?);
    }
    if f.has(b::PERF_SAMPLE_CGROUP) {
        s.cgroup = Some(c.u64("cgroup")?);
    }
    if f.has(b::PERF_SAMPLE_DATA_PAGE_SIZE) {
        s.data_page_size = Some(c.u64("data_page_size")?);
    }
    if f.has(b::PERF_SAMPLE_CODE_PAGE_SIZE) {
        s.code_page_size = Some(c.u64("code_page_size")?);
    }
    if f.has(b::PERF_SAMPLE_AUX) {
        let size = c.u64("aux.size")?;
        s.aux = Some(c.array(size, 1, "aux.data")?);
    }
    Ok(s)
}

/// What read(2) of an event's file descriptor returns, laid out by the event's
/// `read_format` (the values PERF_RECORD_READ and PERF_SAMPLE_READ carry too).
/// Errors name PERF_RECORD_READ as the record type and the offset in `bytes`.
pub fn parse_read_values(bytes: &[u8], read_format: u64) -> Result<ReadValues, RecordError> {
    let mut cursor = Cursor {
        record_type: b::PERF_RECORD_READ,
        body: bytes,
        pos: 0,
    };
    parse_read(&mut cursor, read_format)
}

fn parse_read(c: &mut Cursor<'_>, read_format: u64) -> Result<ReadValues, RecordError> {
    let has = |bit: u32| read_format & u64::from(bit) != 0;
    let entry = |c: &mut Cursor<'_>| -> Result<ReadGroupEntry, RecordError> {
        Ok(ReadGroupEntry {
            value: c.u64("read.value")?,
            id: if has(b::PERF_FORMAT_ID) {
                Some(c.u64("read.id")?)
            } else {
                None
            },
            lost: if has(b::PERF_FORMAT_LOST) {
                Some(c.u64("read.lost")?)
            } else {
                None
            },
        })
    };
    let time = |c: &mut Cursor<'_>, bit, field| -> Result<Option<u64>, RecordError> {
        if has(bit) {
            c.u64(field).map(Some)
        } else {
            Ok(None)
        }
    };
    if has(b::PERF_FORMAT_GROUP) {
        let nr = c.u64("read.nr")?;
        let time_enabled = time(c, b::PERF_FORMAT_TOTAL_TIME_ENABLED, "read.time_enabled")?;
        let time_running = time(c, b::PERF_FORMAT_TOTAL_TIME_RUNNING, "read.time_running")?;
        let entry_size =
            8 * (1 + usize::from(has(b::PERF_FORMAT_ID)) + usize::from(has(b::PERF_FORMAT_LOST)));
        // Validate the count against the bytes present before allocating.
        let entries_start = c.pos;
        c.array(nr, entry_size, "read.values")?;
        c.pos = entries_start;
        let values = (0..nr).map(|_| entry(c)).collect::<Result<_, _>>()?;
        Ok(ReadValues {
            time_enabled,
            time_running,
            values,
        })
    } else {
        let value = c.u64("read.value")?;
        let time_enabled = time(c, b::PERF_FORMAT_TOTAL_TIME_ENABLED, "read.time_enabled")?;
        let time_running = time(c, b::PERF_FORMAT_TOTAL_TIME_RUNNING, "read.time_running")?;
        let id = if has(b::PERF_FORMAT_ID) {
            Some(c.u64("read.id")?)
        } else {
            None
        };
        let lost = if has(b::PERF_FORMAT_LOST) {
            Some(c.u64("read.lost")?)
        } else {
            None
        };
        Ok(ReadValues {
            time_enabled,
            time_running,
            values: vec![ReadGroupEntry { value, id, lost }],
        })
    }
}

/// perf 6.1 names for PERF_BR_* (index = type); 0 prints as "".
const BRANCH_TYPE_NAMES: [&str; 16] = [
    "",
    "COND",
    "UNCOND",
    "IND",
    "CALL",
    "IND_CALL",
    "RET",
    "SYSCALL",
    "SYSRET",
    "COND_CALL",
    "COND_RET",
    "ERET",
    "IRQ",
    "SERROR",
    "NO_TX",
    "",
];
const BRANCH_NEW_TYPE_NAMES: [&str; 8] = [
    "FAULT_ALGN",
    "FAULT_DATA",
    "FAULT_INST",
    "ARCH_1",
    "ARCH_2",
    "ARCH_3",
    "ARCH_4",
    "ARCH_5",
];

/// One entry as `perf script -F brstack` (perf 6.1) prints it, without the
/// separating space: `0xFROM/0xTO/M|P|-/X|-/A|-/CYCLES/TYPE`.
///
/// perf 6.1's `print_bstack_flags` is `"/%c/%c/%c/%d/%s "`: the prediction
/// column is `P` if predicted, else `M` if mispredicted, else `-`; TYPE is
/// empty for PERF_BR_UNKNOWN, the PERF_BR_NEW_* name for PERF_BR_EXTEND_ABI
/// and the PERF_BR_* name otherwise. Later perf versions append a `/SPEC`
/// column; 6.1 does not.
pub fn format_brstack_entry(entry: &BranchEntry) -> String {
    let flags = &entry.flags;
    let prediction = if flags.predicted {
        'P'
    } else if flags.mispred {
        'M'
    } else {
        '-'
    };
    let branch_type = if u32::from(flags.branch_type) == b::PERF_BR_EXTEND_ABI {
        BRANCH_NEW_TYPE_NAMES[usize::from(flags.new_type & 7)]
    } else {
        BRANCH_TYPE_NAMES[usize::from(flags.branch_type & 15)]
    };
    format!(
        "{:#x}/{:#x}/{}/{}/{}/{}/{}",
        entry.from,
        entry.to,
        prediction,
        if flags.in_tx { 'X' } else { '-' },
        if flags.abort { 'A' } else { '-' },
        flags.cycles,
        branch_type
    )
}

#[cfg(test)]
mod tests;
