//! The records the `rvperf_ctr` kernel PMU (kmod-shim/rvperf_ctr) writes into its
//! AUX area: one per sample, a fixed header and the CTR branch stack as
//! `struct perf_branch_entry`s, newest first. The layout is defined once, in
//! `kmod-shim/include/uapi/rvperf_ctr.h`; the constants here mirror it. The header
//! checks its own layout with `static_assert`s, and `tests/ctr_uapi_layout.rs`
//! compiles a C program with that header and compares its `offsetof`/`sizeof` with
//! [`record_offset`], [`CTR_RECORD_HEADER_SIZE`] and the branch entry size, and its
//! `RVPERF_CTR_RECORD_*` flags with [`CTR_RECORD_FLAGS`], so the two sides cannot
//! drift.

use perf_event_open_sys::bindings::perf_branch_entry;

use crate::record::{BranchFlags, BranchStack};

/// The PMU's name in /sys/bus/event_source/devices.
pub const CTR_PMU_NAME: &str = "rvperf_ctr";
/// "RCTR" in a little-endian dump.
pub const CTR_RECORD_MAGIC: u32 = 0x5254_4352;
pub const CTR_RECORD_VERSION: u8 = 1;
pub const CTR_RECORD_HEADER_SIZE: usize = 48;
/// Size of one entry (`struct perf_branch_entry`).
pub const CTR_ENTRY_SIZE: usize = std::mem::size_of::<perf_branch_entry>();

/// Byte offsets of the fields of `struct rvperf_ctr_record`, which the parser and
/// [`encode_ctr_record`] use.
pub mod record_offset {
    pub const MAGIC: usize = 0;
    pub const SIZE: usize = 4;
    pub const VERSION: usize = 6;
    pub const FLAGS: usize = 7;
    pub const CPU: usize = 8;
    pub const PID: usize = 12;
    pub const TID: usize = 16;
    pub const NR_ENTRIES: usize = 20;
    pub const DEPTH: usize = 22;
    pub const TIME: usize = 24;
    pub const IP: usize = 32;
    pub const PERIOD: usize = 40;
    pub const ENTRIES: usize = 48;

    /// Every field by its C name, for the layout check against the uapi header.
    pub const ALL: &[(&str, usize)] = &[
        ("magic", MAGIC),
        ("size", SIZE),
        ("version", VERSION),
        ("flags", FLAGS),
        ("cpu", CPU),
        ("pid", PID),
        ("tid", TID),
        ("nr_entries", NR_ENTRIES),
        ("depth", DEPTH),
        ("time", TIME),
        ("ip", IP),
        ("period", PERIOD),
        ("entries", ENTRIES),
    ];
}
/// The `auxtrace_type` of PERF_RECORD_AUXTRACE_INFO when rvperf keeps rvperf_ctr's AUX
/// data in perf.data (`rvperf record --keep-aux`); its private words are the rvperf_ctr
/// PMU type, the trigger's perf type and its config. Linux perf knows types 1 to 8
/// (Intel PT .. RISC-V trace) and refuses others, so a value far from its enum ("RVCT")
/// keeps the two from ever meaning different things by the same number.
pub const RVPERF_AUXTRACE_CTR: u32 = 0x5256_4354;
const ENTRY_SIZE: usize = CTR_ENTRY_SIZE;

/// `attr.config1` trigger types (enum rvperf_ctr_trigger_type).
pub const CTR_TRIGGER_HARDWARE: u64 = 0;
pub const CTR_TRIGGER_HW_CACHE: u64 = 1;
pub const CTR_TRIGGER_RAW: u64 = 2;

/// Record flags (`RVPERF_CTR_RECORD_*`).
pub const CTR_RECORD_KERNEL: u8 = 1 << 0;
pub const CTR_RECORD_SOFTWARE_FILTERED: u8 = 1 << 1;
pub const CTR_RECORD_KERNEL_REDACTED: u8 = 1 << 2;
pub const CTR_RECORD_STACK_FULL: u8 = 1 << 3;
/// perf core throttled the trigger at this sample (more interrupts per tick than
/// kernel.perf_event_max_sample_rate allows): no records follow until perf
/// unthrottles it at a later tick, so samples are missing after this one.
pub const CTR_RECORD_THROTTLED: u8 = 1 << 4;

/// Every record flag by its C name without the `RVPERF_CTR_RECORD_` prefix, for the
/// check against the uapi header.
pub const CTR_RECORD_FLAGS: &[(&str, u8)] = &[
    ("KERNEL", CTR_RECORD_KERNEL),
    ("SOFTWARE_FILTERED", CTR_RECORD_SOFTWARE_FILTERED),
    ("KERNEL_REDACTED", CTR_RECORD_KERNEL_REDACTED),
    ("STACK_FULL", CTR_RECORD_STACK_FULL),
    ("THROTTLED", CTR_RECORD_THROTTLED),
];

/// A stream of records that does not parse. `offset` counts from the start of
/// the bytes given to [`CtrRecords::new`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtrRecordError {
    #[error("rvperf_ctr record at AUX offset {offset}: bad magic {found:#010x}")]
    BadMagic { offset: usize, found: u32 },
    #[error("rvperf_ctr record at AUX offset {offset}: version {found}, this rvperf reads {CTR_RECORD_VERSION}")]
    BadVersion { offset: usize, found: u8 },
    #[error(
        "rvperf_ctr record at AUX offset {offset}: size {size} does not hold {entries} entries"
    )]
    BadSize {
        offset: usize,
        size: usize,
        entries: usize,
    },
    #[error("rvperf_ctr record at AUX offset {offset}: {needed} bytes, only {available} left")]
    Truncated {
        offset: usize,
        needed: usize,
        available: usize,
    },
}

/// The fixed fields of a record (`struct rvperf_ctr_record` without its entries).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtrRecordHeader {
    /// `CTR_RECORD_*` bits.
    pub flags: u8,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    /// CTR depth the hardware used (16..256).
    pub depth: u16,
    /// Perf clock, as PERF_SAMPLE_TIME.
    pub time: u64,
    /// The trigger's interrupted pc.
    pub ip: u64,
    pub period: u64,
}

/// One record, borrowed from the AUX bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtrRecord<'a> {
    pub header: CtrRecordHeader,
    entries: &'a [u8],
}

/// One branch of a record, as perf's PERF_SAMPLE_BRANCH_STACK entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtrBranch {
    pub from: u64,
    pub to: u64,
    /// The raw perf_branch_entry flag word.
    pub flags_word: u64,
}

impl CtrBranch {
    pub fn flags(&self) -> BranchFlags {
        BranchFlags::from_word(self.flags_word)
    }
}

impl<'a> CtrRecord<'a> {
    pub fn is_kernel(&self) -> bool {
        self.header.flags & CTR_RECORD_KERNEL != 0
    }

    /// Whether perf throttled the trigger at this sample: the samples of the time
    /// until it is unthrottled are missing.
    pub fn is_throttled(&self) -> bool {
        self.header.flags & CTR_RECORD_THROTTLED != 0
    }

    pub fn len(&self) -> usize {
        self.entries.len() / ENTRY_SIZE
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The branches as perf's PERF_SAMPLE_BRANCH_STACK (newest first, no hw_idx),
    /// borrowed: the module writes `struct perf_branch_entry` as the kernel does.
    pub fn branch_stack(&self) -> BranchStack<'a> {
        // Whole entries: `next_record` checked the size against the entry count.
        BranchStack::from_bytes(None, self.entries).unwrap_or_default()
    }

    /// The branches, newest first.
    pub fn branches(&self) -> impl ExactSizeIterator<Item = CtrBranch> + 'a {
        self.entries
            .chunks_exact(ENTRY_SIZE)
            .map(|entry| CtrBranch {
                from: u64_at(entry, 0),
                to: u64_at(entry, 8),
                flags_word: u64_at(entry, 16),
            })
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(word)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_ne_bytes(word)
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([bytes[at], bytes[at + 1]])
}

/// Pull parser over AUX bytes holding whole records (the module commits each
/// record with one `perf_aux_output_end`, so AUX data never ends mid-record).
#[derive(Debug, Clone)]
pub struct CtrRecords<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> CtrRecords<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, offset: 0 }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The next record; `Ok(None)` at the end of the bytes.
    pub fn next_record(&mut self) -> Result<Option<CtrRecord<'a>>, CtrRecordError> {
        let offset = self.offset;
        let rest = &self.bytes[offset..];
        if rest.is_empty() {
            return Ok(None);
        }
        if rest.len() < CTR_RECORD_HEADER_SIZE {
            return Err(CtrRecordError::Truncated {
                offset,
                needed: CTR_RECORD_HEADER_SIZE,
                available: rest.len(),
            });
        }
        let magic = u32_at(rest, record_offset::MAGIC);
        if magic != CTR_RECORD_MAGIC {
            return Err(CtrRecordError::BadMagic {
                offset,
                found: magic,
            });
        }
        let version = rest[record_offset::VERSION];
        if version != CTR_RECORD_VERSION {
            return Err(CtrRecordError::BadVersion {
                offset,
                found: version,
            });
        }
        let size = usize::from(u16_at(rest, record_offset::SIZE));
        let entries = usize::from(u16_at(rest, record_offset::NR_ENTRIES));
        if size != CTR_RECORD_HEADER_SIZE + entries * ENTRY_SIZE {
            return Err(CtrRecordError::BadSize {
                offset,
                size,
                entries,
            });
        }
        if rest.len() < size {
            return Err(CtrRecordError::Truncated {
                offset,
                needed: size,
                available: rest.len(),
            });
        }
        self.offset += size;
        Ok(Some(CtrRecord {
            header: CtrRecordHeader {
                flags: rest[record_offset::FLAGS],
                cpu: u32_at(rest, record_offset::CPU),
                pid: u32_at(rest, record_offset::PID),
                tid: u32_at(rest, record_offset::TID),
                depth: u16_at(rest, record_offset::DEPTH),
                time: u64_at(rest, record_offset::TIME),
                ip: u64_at(rest, record_offset::IP),
                period: u64_at(rest, record_offset::PERIOD),
            },
            entries: &rest[record_offset::ENTRIES..size],
        }))
    }
}

/// Builds one record's bytes, as the module lays it out (for tests, benches and
/// fixtures: the fake at the hardware boundary is the module's own format).
pub fn encode_ctr_record(record: &CtrRecordHeader, branches: &[CtrBranch]) -> Vec<u8> {
    use record_offset as at;
    let size = CTR_RECORD_HEADER_SIZE + branches.len() * ENTRY_SIZE;
    let mut out = vec![0u8; CTR_RECORD_HEADER_SIZE];
    let mut put = |offset: usize, bytes: &[u8]| {
        out[offset..offset + bytes.len()].copy_from_slice(bytes);
    };
    put(at::MAGIC, &CTR_RECORD_MAGIC.to_ne_bytes());
    put(at::SIZE, &(size as u16).to_ne_bytes());
    put(at::VERSION, &[CTR_RECORD_VERSION]);
    put(at::FLAGS, &[record.flags]);
    put(at::CPU, &record.cpu.to_ne_bytes());
    put(at::PID, &record.pid.to_ne_bytes());
    put(at::TID, &record.tid.to_ne_bytes());
    put(at::NR_ENTRIES, &(branches.len() as u16).to_ne_bytes());
    put(at::DEPTH, &record.depth.to_ne_bytes());
    put(at::TIME, &record.time.to_ne_bytes());
    put(at::IP, &record.ip.to_ne_bytes());
    put(at::PERIOD, &record.period.to_ne_bytes());
    out.reserve(size - CTR_RECORD_HEADER_SIZE);
    for branch in branches {
        out.extend_from_slice(&branch.from.to_ne_bytes());
        out.extend_from_slice(&branch.to.to_ne_bytes());
        out.extend_from_slice(&branch.flags_word.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pid: u32) -> CtrRecordHeader {
        CtrRecordHeader {
            flags: CTR_RECORD_STACK_FULL,
            cpu: 1,
            pid,
            tid: pid + 1,
            depth: 16,
            time: 123_456,
            ip: 0x1_0000,
            period: 20_000,
        }
    }

    #[test]
    fn records_round_trip() {
        let branches = [
            CtrBranch {
                from: 0x1000,
                to: 0x2000,
                flags_word: 0x5,
            },
            CtrBranch {
                from: 0x3000,
                to: 0x4000,
                flags_word: 0,
            },
        ];
        let mut bytes = encode_ctr_record(&record(7), &branches);
        bytes.extend(encode_ctr_record(&record(9), &[]));
        let mut records = CtrRecords::new(&bytes);
        let first = records.next_record().unwrap().unwrap();
        let header = first.header;
        assert_eq!((header.pid, header.tid, header.cpu), (7, 8, 1));
        assert_eq!(
            (header.time, header.ip, header.period),
            (123_456, 0x1_0000, 20_000)
        );
        assert_eq!((header.depth, header.flags), (16, CTR_RECORD_STACK_FULL));
        assert_eq!(header, record(7));
        assert_eq!(first.branches().collect::<Vec<_>>(), branches);
        let second = records.next_record().unwrap().unwrap();
        assert_eq!((second.header, second.len()), (record(9), 0));
        assert_eq!(records.next_record(), Ok(None));
        assert_eq!(records.offset(), bytes.len());
    }

    #[test]
    fn flag_accessors_read_their_bits() {
        let flagged = |flags| {
            let header = CtrRecordHeader { flags, ..record(1) };
            encode_ctr_record(&header, &[])
        };
        let throttled = flagged(CTR_RECORD_THROTTLED | CTR_RECORD_KERNEL);
        let record = CtrRecords::new(&throttled).next_record().unwrap().unwrap();
        assert!(record.is_throttled() && record.is_kernel());
        let plain = flagged(CTR_RECORD_STACK_FULL);
        let record = CtrRecords::new(&plain).next_record().unwrap().unwrap();
        assert!(!record.is_throttled() && !record.is_kernel());
    }

    #[test]
    fn bad_input_names_its_offset() {
        let good = encode_ctr_record(&record(1), &[]);
        let mut bytes = good.clone();
        bytes.extend_from_slice(&[0u8; 48]);
        let mut records = CtrRecords::new(&bytes);
        records.next_record().unwrap();
        assert_eq!(
            records.next_record(),
            Err(CtrRecordError::BadMagic {
                offset: 48,
                found: 0
            })
        );
        let mut short = good.clone();
        short.truncate(40);
        assert!(matches!(
            CtrRecords::new(&short).next_record(),
            Err(CtrRecordError::Truncated { offset: 0, .. })
        ));
        let mut lying = good;
        lying[20] = 3; // three entries claimed, none present
        assert!(matches!(
            CtrRecords::new(&lying).next_record(),
            Err(CtrRecordError::BadSize { offset: 0, .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let mut records = CtrRecords::new(&bytes);
            while let Ok(Some(_)) = records.next_record() {}
        }
    }
}
