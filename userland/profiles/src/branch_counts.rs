//! Branch stacks to execution counts by the LBR method (AutoFDO's and llvm-profgen's):
//! two consecutive records of a stack bracket a stretch of straight-line code that ran
//! between them, so every stack contributes one fall-through range per adjacent pair and
//! one count per branch. Ranges become per-instruction counts over the code's
//! instruction boundaries, which the caller supplies (it knows the ISA and the image).
//!
//! Nothing is dropped for its instruction class: a range that ends at a call or a
//! return (`jal`, `jalr`, `c.jr` on RISC-V) ran like any other. Only ranges that cannot
//! be straight-line code are refused, and they are counted.

use rustc_hash::FxHashMap;

/// One branch of a stack: where it was taken and where it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Branch {
    pub from: u64,
    pub to: u64,
}

/// A stretch of straight-line code: the addresses of its first and last instructions
/// (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AddressRange {
    pub first: u64,
    pub last: u64,
}

/// Per-instruction execution counts ([`BranchCounts::instruction_counts`]).
#[derive(Debug, Clone, Default)]
pub struct InstructionCounts {
    /// Instruction address -> times it ran.
    pub counts: FxHashMap<u64, u64>,
    /// Ranges that ran into an address without code (their rest was skipped).
    pub broken_ranges: u64,
}

/// Options of [`BranchCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchCountOptions {
    /// Longest plausible fall-through range in bytes; a longer one means the stack
    /// missed a branch (a trap, a filtered record) and is refused.
    pub max_range_bytes: u64,
}

impl Default for BranchCountOptions {
    fn default() -> Self {
        // A basic block of 16 KiB is far beyond what compilers emit; the kernel's
        // and llvm-profgen's sanity limits are of the same order.
        Self {
            max_range_bytes: 16 << 10,
        }
    }
}

/// Why ranges were refused, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RefusedRanges {
    /// The range would run backwards (its end precedes its start).
    pub backwards: u64,
    /// Longer than [`BranchCountOptions::max_range_bytes`].
    pub too_long: u64,
}

/// Ranges and branches of many stacks, aggregated.
#[derive(Debug, Clone, Default)]
pub struct BranchCounts {
    options: BranchCountOptions,
    /// Straight-line code -> times it ran.
    pub ranges: FxHashMap<AddressRange, u64>,
    pub branches: FxHashMap<Branch, u64>,
    pub stacks: u64,
    pub refused: RefusedRanges,
}

impl BranchCounts {
    pub fn new(options: BranchCountOptions) -> Self {
        Self {
            options,
            ..Self::default()
        }
    }

    /// Adds one stack, newest branch first (perf's PERF_SAMPLE_BRANCH_STACK order).
    pub fn add_stack(&mut self, stack: impl IntoIterator<Item = Branch>) {
        self.stacks += 1;
        let mut newer: Option<Branch> = None;
        for branch in stack {
            *self.branches.entry(branch).or_default() += 1;
            if let Some(newer) = newer {
                // The older branch landed at `branch.to`; execution then ran straight to
                // the newer branch's source.
                self.add_range(
                    AddressRange {
                        first: branch.to,
                        last: newer.from,
                    },
                    1,
                );
            }
            newer = Some(branch);
        }
    }

    /// Adds `count` executions of the straight-line code `range`, as a trace reports
    /// it (an instruction range of every protocol); refused like a stack's ranges when
    /// it cannot be straight-line code.
    pub fn add_range(&mut self, range: AddressRange, count: u64) {
        match range.last.checked_sub(range.first) {
            None => self.refused.backwards += 1,
            Some(length) if length > self.options.max_range_bytes => self.refused.too_long += 1,
            Some(_) => {
                let total = self.ranges.entry(range).or_default();
                *total = total.saturating_add(count);
            }
        }
    }

    /// Adds everything `other` counted.
    pub fn merge(&mut self, other: &BranchCounts) {
        for (range, count) in &other.ranges {
            let total = self.ranges.entry(*range).or_default();
            *total = total.saturating_add(*count);
        }
        for (branch, count) in &other.branches {
            self.add_branch(*branch, *count);
        }
        self.stacks = self.stacks.saturating_add(other.stacks);
        self.refused.backwards = self
            .refused
            .backwards
            .saturating_add(other.refused.backwards);
        self.refused.too_long = self.refused.too_long.saturating_add(other.refused.too_long);
    }

    /// Adds `count` executions of the taken control transfer `branch`.
    pub fn add_branch(&mut self, branch: Branch, count: u64) {
        let total = self.branches.entry(branch).or_default();
        *total = total.saturating_add(count);
    }

    /// Per-instruction execution counts: each range's count added to every instruction
    /// from its start through its end. `instruction_length(address)` gives the length of
    /// the instruction there, or `None` where there is no code (the rest of that range
    /// is then skipped, and counted in the returned number of broken ranges).
    pub fn instruction_counts(
        &self,
        mut instruction_length: impl FnMut(u64) -> Option<u64>,
    ) -> InstructionCounts {
        let mut result = InstructionCounts::default();
        for (range, &count) in &self.ranges {
            let mut address = range.first;
            while address <= range.last {
                let total = result.counts.entry(address).or_default();
                *total = total.saturating_add(count);
                // A range that runs off the end of the address space is as broken as
                // one that runs into data.
                match instruction_length(address).filter(|&length| length > 0) {
                    Some(length) if address.checked_add(length).is_some() => address += length,
                    _ => {
                        result.broken_ranges += 1;
                        break;
                    }
                }
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branch(from: u64, to: u64) -> Branch {
        Branch { from, to }
    }

    #[test]
    fn adjacent_records_bracket_the_code_between_them() {
        let mut counts = BranchCounts::default();
        // Newest first: 0x11e->0x200 happened after 0x40->0x100.
        counts.add_stack([branch(0x11e, 0x200), branch(0x40, 0x100)]);
        counts.add_stack([branch(0x11e, 0x200), branch(0x40, 0x100)]);
        assert_eq!(
            counts.ranges.get(&AddressRange {
                first: 0x100,
                last: 0x11e
            }),
            Some(&2)
        );
        assert_eq!(counts.branches.get(&branch(0x40, 0x100)), Some(&2));
        let InstructionCounts {
            counts: per_instruction,
            broken_ranges: broken,
        } = counts.instruction_counts(|address| {
            // 4-byte instructions, except a 2-byte one at 0x104.
            Some(if address == 0x104 { 2 } else { 4 })
        });
        assert_eq!(broken, 0);
        let mut addresses: Vec<_> = per_instruction.keys().copied().collect();
        addresses.sort_unstable();
        assert_eq!(
            addresses,
            [0x100, 0x104, 0x106, 0x10a, 0x10e, 0x112, 0x116, 0x11a, 0x11e]
        );
        assert!(per_instruction.values().all(|&count| count == 2));
    }

    #[test]
    fn implausible_ranges_are_counted_not_used() {
        let mut counts = BranchCounts::default();
        counts.add_stack([branch(0x100, 0x0), branch(0x50, 0x200)]);
        counts.add_stack([branch(0x10_0000, 0x0), branch(0x50, 0x200)]);
        assert!(counts.ranges.is_empty());
        assert_eq!(counts.refused.backwards, 1);
        assert_eq!(counts.refused.too_long, 1);
    }

    #[test]
    fn ranges_ending_at_calls_and_returns_are_kept() {
        // A range whose last instruction is a call (the newer record's source) counts
        // that call instruction too: it executed.
        let mut counts = BranchCounts::default();
        counts.add_stack([branch(0x108, 0x400), branch(0x500, 0x100)]);
        let per_instruction = counts.instruction_counts(|_| Some(4)).counts;
        assert_eq!(per_instruction.get(&0x108), Some(&1));
    }
}
