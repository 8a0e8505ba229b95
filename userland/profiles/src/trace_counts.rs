//! Exact execution counts from an instruction trace: every range a trace element
//! reports ran once, every taken control transfer is a branch. They go into the same
//! [`BranchCounts`] that sampled branch stacks (CTR, LBR) fill, so the AutoFDO profile
//! built from them is made the same way, only from all of the execution instead of
//! samples of it.

use trace_elements::{ElementKind, GapReason, TraceElement};

use crate::branch_counts::{AddressRange, Branch, BranchCountOptions, BranchCounts};

/// What the trace held besides the counts, for the caller to report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceCountStatistics {
    /// Instructions of every range (retired instructions the trace placed).
    pub instructions: u64,
    pub ranges: u64,
    /// Taken control transfers counted as branches.
    pub branches: u64,
    /// Trace the encoder lost (overflow) and trace the decoder could not follow:
    /// execution there is missing from the counts.
    pub encoder_gaps: u64,
    pub decode_gaps: u64,
}

/// The execution counts of a trace, fed one element at a time.
#[derive(Debug, Clone)]
pub struct TraceCounts {
    pub counts: BranchCounts,
    pub statistics: TraceCountStatistics,
}

impl Default for TraceCounts {
    fn default() -> Self {
        Self::new(BranchCountOptions::default())
    }
}

impl TraceCounts {
    pub fn new(options: BranchCountOptions) -> Self {
        Self {
            counts: BranchCounts::new(options),
            statistics: TraceCountStatistics::default(),
        }
    }

    /// Takes the next element of the trace (any hart: counts are per address).
    pub fn push(&mut self, element: &TraceElement) {
        match element.kind {
            ElementKind::InstructionRange {
                start,
                last,
                instructions,
                end,
                next,
            } => {
                let statistics = &mut self.statistics;
                statistics.instructions = statistics
                    .instructions
                    .saturating_add(u64::from(instructions));
                statistics.ranges += 1;
                self.counts
                    .add_range(AddressRange { first: start, last }, 1);
                if let (true, Some(to)) = (end.is_taken_transfer(), next) {
                    self.statistics.branches += 1;
                    self.counts.add_branch(Branch { from: last, to }, 1);
                }
            }
            ElementKind::Gap {
                reason: GapReason::EncoderOverflow { .. },
            } => self.statistics.encoder_gaps += 1,
            ElementKind::Gap {
                reason: GapReason::DecodeError { .. },
            } => self.statistics.decode_gaps += 1,
            ElementKind::TraceOn { .. }
            | ElementKind::Trap { .. }
            | ElementKind::ContextChange { .. }
            | ElementKind::Timestamp { .. }
            | ElementKind::TraceOff { .. }
            | ElementKind::RegisterWrite { .. }
            | ElementKind::MemoryAccess { .. }
            | ElementKind::Unhandled { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_elements::RangeEnd;

    fn element(kind: ElementKind) -> TraceElement {
        TraceElement {
            hart: 0,
            offset: 0,
            kind,
        }
    }

    #[test]
    fn every_range_counts_once_and_taken_transfers_are_branches() {
        let mut counts = TraceCounts::default();
        for _ in 0..3 {
            counts.push(&element(ElementKind::InstructionRange {
                start: 0x100,
                last: 0x108,
                instructions: 3,
                end: RangeEnd::BranchTaken,
                next: Some(0x100),
            }));
        }
        counts.push(&element(ElementKind::InstructionRange {
            start: 0x100,
            last: 0x108,
            instructions: 3,
            end: RangeEnd::BranchNotTaken,
            next: Some(0x10c),
        }));
        assert_eq!(
            counts.counts.ranges.get(&AddressRange {
                first: 0x100,
                last: 0x108
            }),
            Some(&4)
        );
        assert_eq!(
            counts.counts.branches.get(&Branch {
                from: 0x108,
                to: 0x100
            }),
            Some(&3)
        );
        assert_eq!(counts.counts.branches.len(), 1);
        assert_eq!(counts.statistics.instructions, 12);
        assert_eq!(counts.statistics.branches, 3);
    }
}
