//! Branch stack entries (`struct perf_branch_entry`) and `perf script -F brstack` formatting.

use std::fmt::Write as _;

/// One `struct perf_branch_entry`: from, to and the packed flags word.
///
/// The flags word is kept raw so that writing and reading round-trip bit-exactly; the
/// accessors decode the little-endian bitfield layout of include/uapi/linux/perf_event.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BranchEntry {
    pub from: u64,
    pub to: u64,
    pub flags: u64,
}

/// The branch stack of one sample.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BranchStack {
    /// Present iff the attr's branch_sample_type has `PERF_SAMPLE_BRANCH_HW_INDEX`.
    pub hw_idx: Option<u64>,
    pub entries: Vec<BranchEntry>,
}

/// Decoded `perf_branch_entry` flag fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BranchFlags {
    pub mispred: bool,
    pub predicted: bool,
    pub in_tx: bool,
    pub abort: bool,
    pub cycles: u16,
    /// `PERF_BR_*`; 4 bits wide in the ABI, higher bits are dropped as the kernel would.
    pub type_: u8,
    /// `PERF_BR_NEW_*` (4 bits), meaningful when `type_` is `PERF_BR_EXTEND_ABI` (15).
    pub new_type: u8,
}

impl BranchFlags {
    /// Packs into the little-endian bitfield word of include/uapi/linux/perf_event.h.
    pub fn to_bits(&self) -> u64 {
        u64::from(self.mispred)
            | u64::from(self.predicted) << 1
            | u64::from(self.in_tx) << 2
            | u64::from(self.abort) << 3
            | u64::from(self.cycles) << 4
            | u64::from(self.type_ & 0xf) << 20
            | u64::from(self.new_type & 0xf) << 26
    }
}

impl BranchEntry {
    /// Builds an entry from decoded flags.
    pub fn new(from: u64, to: u64, flags: BranchFlags) -> Self {
        Self {
            from,
            to,
            flags: flags.to_bits(),
        }
    }
    pub fn mispred(&self) -> bool {
        self.flags & 1 != 0
    }
    pub fn predicted(&self) -> bool {
        self.flags & 2 != 0
    }
    pub fn in_tx(&self) -> bool {
        self.flags & 4 != 0
    }
    pub fn abort(&self) -> bool {
        self.flags & 8 != 0
    }
    pub fn cycles(&self) -> u16 {
        ((self.flags >> 4) & 0xffff) as u16
    }
    /// `PERF_BR_*` type (4 bits).
    pub fn branch_type(&self) -> u8 {
        ((self.flags >> 20) & 0xf) as u8
    }
    /// `PERF_BR_NEW_*` type (4 bits at bit 26, after the 2-bit `spec` field).
    pub fn new_type(&self) -> u8 {
        ((self.flags >> 26) & 0xf) as u8
    }
}

/// `branch_type_name()` of tools/perf/util/branch.c (perf 6.1); index 15 is
/// PERF_BR_EXTEND_ABI, resolved through [`NEW_TYPE_NAMES`] instead.
const TYPE_NAMES: [&str; 16] = [
    "N/A",
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
/// `branch_new_type_name()` of perf 6.1.
const NEW_TYPE_NAMES: [&str; 8] = [
    "FAULT_ALGN",
    "FAULT_DATA",
    "FAULT_INST",
    "ARCH_1",
    "ARCH_2",
    "ARCH_3",
    "ARCH_4",
    "ARCH_5",
];

/// The type text perf 6.1's `get_branch_type()` prints: empty for PERF_BR_UNKNOWN.
fn type_name(e: &BranchEntry) -> &'static str {
    match e.branch_type() {
        0 => "",
        15 => NEW_TYPE_NAMES
            .get(usize::from(e.new_type()))
            .copied()
            .unwrap_or(""),
        t => TYPE_NAMES[usize::from(t)],
    }
}

/// Formats entries exactly as `perf script -F brstack` of perf 6.1 prints them after the
/// ip field: each entry is ` 0xFROM/0xTO/P|M|-/X|-/A|-/CYCLES/TYPE ` (note the spaces on
/// both sides, so entries are separated by two). `P` wins over `M` when both bits are set,
/// as in perf's `mispred_str()`.
pub fn format_brstack(entries: &[BranchEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        let mp = if e.predicted() {
            'P'
        } else if e.mispred() {
            'M'
        } else {
            '-'
        };
        let _ = write!(
            s,
            " 0x{:x}/0x{:x}/{}/{}/{}/{}/{} ",
            e.from,
            e.to,
            mp,
            if e.in_tx() { 'X' } else { '-' },
            if e.abort() { 'A' } else { '-' },
            e.cycles(),
            type_name(e)
        );
    }
    s
}
