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

pub use perf_abi::BranchFlags;

impl BranchEntry {
    /// Builds an entry from decoded flags.
    pub fn new(from: u64, to: u64, flags: BranchFlags) -> Self {
        Self {
            from,
            to,
            flags: flags.to_word(),
        }
    }
    /// The flags word decoded (perf-abi owns the bitfield layout and the names).
    pub fn decoded(&self) -> perf_abi::BranchFlags {
        perf_abi::BranchFlags::from_word(self.flags)
    }
}

/// Formats entries exactly as `perf script -F brstack` of perf 6.1 prints them after the
/// ip field: each entry is ` 0xFROM/0xTO/P|M|-/X|-/A|-/CYCLES/TYPE ` (note the spaces on
/// both sides, so entries are separated by two). `P` wins over `M` when both bits are set,
/// as in perf's `mispred_str()`.
pub fn format_brstack(entries: &[BranchEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        let entry = perf_abi::BranchEntry {
            from: e.from,
            to: e.to,
            flags: e.decoded(),
        };
        let _ = write!(s, " {} ", perf_abi::format_brstack_entry(&entry));
    }
    s
}
