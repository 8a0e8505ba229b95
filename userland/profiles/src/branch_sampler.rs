//! LBR-style sampling of a complete trace: what a branch-stack sampler such as Intel's
//! LBR or RISC-V's CTR would have recorded had it run alongside the traced harts, so
//! that an exact trace can be compared with (and consumed as) a sampled recording.
//!
//! Per hart, a ring of the last `depth` taken control transfers (taken branches, jumps,
//! calls, returns, indirect jumps, trap returns, and traps from the trapping
//! instruction to the handler; never not-taken branches): from is the last
//! instruction of the range that ended in the transfer, to where execution went. Every
//! `period` retired instructions of a hart (the instruction counter's overflow) is a
//! sample: the address of the instruction at which the period expired, the hart, its
//! latest timestamp, and the ring newest first (perf's PERF_SAMPLE_BRANCH_STACK order,
//! what [`BranchCounts::add_stack`](crate::BranchCounts::add_stack) takes).
//!
//! A sample taken at an instruction that is itself a taken branch does not hold that
//! branch, as perf's instruction samples synthesized from Intel PT do not: the newest
//! entry's target and the sampled address then bracket straight-line code, like every
//! pair of adjacent entries.
//!
//! A gap, trace off or trace restart empties the hart's ring: what comes after is not
//! contiguous with what came before, and a stack spanning it would invent a fall-through
//! range.

use trace_elements::{ElementKind, TraceElement, TraceOnReason};

use crate::Branch;

/// Options of [`BranchSampler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SamplerOptions {
    /// Retired instructions per sample (per hart).
    pub period: u64,
    /// Entries of the branch stack (16..=64, as LBR and CTR implementations have).
    pub depth: usize,
}

impl SamplerOptions {
    /// The smallest and largest stack depths accepted.
    pub const DEPTHS: std::ops::RangeInclusive<usize> = 16..=64;

    pub fn new(period: u64, depth: usize) -> Self {
        Self { period, depth }
    }
}

impl Default for SamplerOptions {
    fn default() -> Self {
        // One sample per 100,003 instructions (a prime, so that samples do not lock
        // onto a loop's period, as `perf record -c` users pick) with 32 entries, the
        // depth of current LBR and of the CTR implementations rvperf tests with.
        Self {
            period: 100_003,
            depth: 32,
        }
    }
}

/// Options a [`BranchSampler`] cannot work with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SamplerOptionsError {
    #[error("the sample period must be at least 1 instruction")]
    ZeroPeriod,
    #[error("branch stack depth {depth} is outside 16..=64")]
    Depth { depth: usize },
}

/// One sample: where a hart's period expired, and its branch stack then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchSample<'a> {
    pub hart: u16,
    /// The instruction at which the period expired (it retired).
    pub address: u64,
    /// The hart's latest timestamp, in trace units; `None` before its first.
    pub time: Option<u64>,
    /// Byte offset in the trace of the element the sample fell in.
    pub offset: u64,
    /// The last taken transfers, newest first.
    pub stack: &'a [Branch],
}

/// What a [`BranchSampler`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerStatistics {
    /// Retired instructions of every hart.
    pub instructions: u64,
    /// Samples given to the caller.
    pub samples: u64,
    /// Samples not taken because the caller could not give the address of the
    /// instruction where the period expired.
    pub unplaced_samples: u64,
    /// Taken transfers pushed into the rings.
    pub branches: u64,
    /// Rings emptied by a gap, trace off or trace restart.
    pub discontinuities: u64,
}

/// A hart's sampling state.
#[derive(Debug, Clone)]
struct HartState {
    /// The ring: `depth` slots, `newest` the index of the newest entry, `entries` of
    /// them valid.
    ring: Vec<Branch>,
    newest: usize,
    entries: usize,
    /// Instructions still to retire before the next sample (1..=period).
    until_sample: u64,
    time: Option<u64>,
    /// Where the hart goes next after its latest range: a trap element without its
    /// source address trapped there.
    next: Option<u64>,
}

impl HartState {
    fn new(options: &SamplerOptions) -> Self {
        Self {
            ring: vec![Branch { from: 0, to: 0 }; options.depth],
            newest: 0,
            entries: 0,
            until_sample: options.period,
            time: None,
            next: None,
        }
    }

    fn push(&mut self, branch: Branch) {
        self.newest = (self.newest + 1) % self.ring.len();
        self.ring[self.newest] = branch;
        self.entries = (self.entries + 1).min(self.ring.len());
    }

    fn clear(&mut self) {
        self.entries = 0;
        self.next = None;
    }

    /// The ring newest first into `stack`.
    fn stack_into(&self, stack: &mut Vec<Branch>) {
        stack.clear();
        let depth = self.ring.len();
        stack.extend((0..self.entries).map(|age| self.ring[(self.newest + depth - age) % depth]));
    }
}

/// Samples trace elements the way an LBR/CTR sampler would (see the module doc).
#[derive(Debug, Clone)]
pub struct BranchSampler {
    options: SamplerOptions,
    /// By hart number.
    harts: Vec<Option<HartState>>,
    /// The stack of the sample being given, reused.
    stack: Vec<Branch>,
    statistics: SamplerStatistics,
}

impl BranchSampler {
    pub fn new(options: SamplerOptions) -> Result<Self, SamplerOptionsError> {
        if options.period == 0 {
            return Err(SamplerOptionsError::ZeroPeriod);
        }
        if !SamplerOptions::DEPTHS.contains(&options.depth) {
            return Err(SamplerOptionsError::Depth {
                depth: options.depth,
            });
        }
        Ok(Self {
            options,
            harts: Vec::new(),
            stack: Vec::with_capacity(options.depth),
            statistics: SamplerStatistics::default(),
        })
    }

    pub fn options(&self) -> SamplerOptions {
        self.options
    }

    pub fn statistics(&self) -> SamplerStatistics {
        self.statistics
    }

    /// The harts seen so far (the highest hart number + 1).
    pub fn harts(&self) -> usize {
        self.harts.len()
    }

    /// Takes in the next element of the trace, in the trace's order. For an instruction
    /// range in which a period expires, `instruction_address(start, index)` must give
    /// the address of the instruction `index` (0 for the first) of the range from
    /// `start` (the caller has the code); `None` loses that sample (counted). Each
    /// sample is given to `sample` before the element's own transfer enters the ring;
    /// an error of `sample` stops the element there and is returned.
    pub fn add<E>(
        &mut self,
        element: &TraceElement,
        mut instruction_address: impl FnMut(u64, u32) -> Option<u64>,
        mut sample: impl FnMut(&BranchSample<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let period = self.options.period;
        let hart = hart_state(&mut self.harts, &self.options, element.hart);
        match element.kind {
            ElementKind::InstructionRange {
                start,
                last,
                instructions,
                end,
                next,
            } => {
                self.statistics.instructions = self
                    .statistics
                    .instructions
                    .saturating_add(u64::from(instructions));
                let length = u64::from(instructions);
                // Instructions of the range counted so far.
                let mut counted: u64 = 0;
                while length - counted >= hart.until_sample {
                    // The period expires at instruction `index` of the range (below
                    // `length`, so it fits the u32 of `instructions`).
                    let index = counted + hart.until_sample - 1;
                    counted = index + 1;
                    hart.until_sample = period;
                    let address = if index + 1 == length {
                        Some(last)
                    } else if index == 0 {
                        Some(start)
                    } else {
                        u32::try_from(index)
                            .ok()
                            .and_then(|index| instruction_address(start, index))
                    };
                    let Some(address) = address else {
                        self.statistics.unplaced_samples += 1;
                        continue;
                    };
                    hart.stack_into(&mut self.stack);
                    self.statistics.samples += 1;
                    sample(&BranchSample {
                        hart: element.hart,
                        address,
                        time: hart.time,
                        offset: element.offset,
                        stack: &self.stack,
                    })?;
                }
                hart.until_sample -= length - counted;
                hart.next = next;
                if let Some(to) = next.filter(|_| end.is_taken_transfer()) {
                    hart.push(Branch { from: last, to });
                    self.statistics.branches += 1;
                }
            }
            ElementKind::Trap { from, handler, .. } => {
                // An `ecall` retired and names itself; another trap's instruction did
                // not retire, and is where the hart was going next.
                if let Some(from) = from.or(hart.next) {
                    hart.push(Branch { from, to: handler });
                    self.statistics.branches += 1;
                }
                hart.next = Some(handler);
            }
            ElementKind::Timestamp { time } => hart.time = Some(time),
            ElementKind::Gap { .. }
            | ElementKind::TraceOff { .. }
            | ElementKind::TraceOn {
                reason: TraceOnReason::Restart,
                ..
            } => {
                if hart.entries > 0 {
                    self.statistics.discontinuities += 1;
                }
                hart.clear();
            }
            ElementKind::TraceOn { .. }
            | ElementKind::ContextChange { .. }
            | ElementKind::RegisterWrite { .. }
            | ElementKind::MemoryAccess { .. }
            | ElementKind::Unhandled { .. } => {}
        }
        Ok(())
    }
}

/// The state of hart number `hart`, made on first use.
fn hart_state<'h>(
    harts: &'h mut Vec<Option<HartState>>,
    options: &SamplerOptions,
    hart: u16,
) -> &'h mut HartState {
    let index = usize::from(hart);
    if harts.len() <= index {
        harts.resize(index + 1, None);
    }
    harts[index].get_or_insert_with(|| HartState::new(options))
}

#[cfg(test)]
mod tests {
    use trace_elements::{GapReason, RangeEnd, TraceOffReason, TrapKind};

    use super::*;

    /// Ranges of 4-byte instructions only.
    fn address_of(start: u64, index: u32) -> Option<u64> {
        Some(start + 4 * u64::from(index))
    }

    fn element(hart: u16, kind: ElementKind) -> TraceElement {
        TraceElement {
            hart,
            offset: 0x10,
            kind,
        }
    }

    /// A range of `instructions` 4-byte instructions from `start` ending in `end` with
    /// `next` after it.
    fn range(hart: u16, start: u64, instructions: u32, end: RangeEnd, next: u64) -> TraceElement {
        element(
            hart,
            ElementKind::InstructionRange {
                start,
                last: start + 4 * (u64::from(instructions) - 1),
                instructions,
                end,
                next: Some(next),
            },
        )
    }

    /// A sample as owned values, for comparisons.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Taken {
        hart: u16,
        address: u64,
        time: Option<u64>,
        stack: Vec<(u64, u64)>,
    }

    fn sample_all(
        options: SamplerOptions,
        elements: &[TraceElement],
    ) -> (Vec<Taken>, SamplerStatistics) {
        let mut sampler = BranchSampler::new(options).unwrap();
        let mut taken = Vec::new();
        for element in elements {
            sampler
                .add(element, address_of, |sample| {
                    taken.push(Taken {
                        hart: sample.hart,
                        address: sample.address,
                        time: sample.time,
                        stack: sample.stack.iter().map(|b| (b.from, b.to)).collect(),
                    });
                    Ok::<(), ()>(())
                })
                .unwrap();
        }
        (taken, sampler.statistics())
    }

    fn options(period: u64) -> SamplerOptions {
        SamplerOptions::new(period, 16)
    }

    #[test]
    fn invalid_options_are_refused() {
        assert_eq!(
            BranchSampler::new(SamplerOptions::new(0, 16)).unwrap_err(),
            SamplerOptionsError::ZeroPeriod
        );
        for depth in [0, 15, 65] {
            assert_eq!(
                BranchSampler::new(SamplerOptions::new(10, depth)).unwrap_err(),
                SamplerOptionsError::Depth { depth }
            );
        }
        assert!(BranchSampler::new(SamplerOptions::default()).is_ok());
    }

    #[test]
    fn a_period_expiring_inside_a_range_samples_that_instruction() {
        let elements = [
            range(0, 0x100, 3, RangeEnd::Jump, 0x200),
            range(0, 0x200, 10, RangeEnd::BranchTaken, 0x100),
        ];
        // 3 + 4: the fourth instruction of the second range, after the jump.
        let (taken, statistics) = sample_all(options(7), &elements);
        assert_eq!(
            taken,
            [Taken {
                hart: 0,
                address: 0x20c,
                time: None,
                stack: vec![(0x108, 0x200)],
            }]
        );
        assert_eq!(statistics.instructions, 13);
        assert_eq!(statistics.branches, 2);
    }

    #[test]
    fn a_period_expiring_at_a_range_end_samples_before_its_branch() {
        let elements = [
            range(0, 0x100, 3, RangeEnd::Call, 0x200),
            range(0, 0x200, 2, RangeEnd::Return, 0x10c),
            range(0, 0x10c, 1, RangeEnd::BranchNotTaken, 0x110),
            range(0, 0x110, 2, RangeEnd::BranchTaken, 0x100),
        ];
        let (taken, _) = sample_all(options(5), &elements);
        // The return at 0x204 is the fifth instruction: not yet in the stack.
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].address, 0x204);
        assert_eq!(taken[0].stack, [(0x108, 0x200)]);
        // Not-taken branches never enter the ring.
        let (taken, _) = sample_all(options(8), &elements);
        assert_eq!(taken[0].address, 0x114);
        assert_eq!(taken[0].stack, [(0x204, 0x10c), (0x108, 0x200)]);
    }

    #[test]
    fn a_long_range_gives_several_samples() {
        let elements = [
            range(0, 0x100, 1, RangeEnd::Jump, 0x1000),
            range(0, 0x1000, 25, RangeEnd::Sequential, 0x1064),
        ];
        let (taken, statistics) = sample_all(options(10), &elements);
        let addresses: Vec<u64> = taken.iter().map(|sample| sample.address).collect();
        // Instructions 10 and 20 overall: the 9th and 19th of the long range.
        assert_eq!(addresses, [0x1020, 0x1048]);
        assert!(taken.iter().all(|sample| sample.stack == [(0x100, 0x1000)]));
        assert_eq!(statistics.samples, 2);
        assert_eq!(statistics.instructions, 26);
        // Period 1: every instruction.
        let (taken, _) = sample_all(options(1), &elements);
        assert_eq!(taken.len(), 26);
        assert_eq!(taken[0].address, 0x100);
        assert!(taken[0].stack.is_empty());
        assert_eq!(taken[25].address, 0x1060);
    }

    #[test]
    fn the_ring_keeps_the_newest_depth_entries_newest_first() {
        let elements: Vec<TraceElement> = (0..40)
            .map(|n| {
                range(
                    0,
                    0x1000 + 0x100 * n,
                    1,
                    RangeEnd::Jump,
                    0x1000 + 0x100 * (n + 1),
                )
            })
            .collect();
        let (taken, _) = sample_all(options(40), &elements);
        let stack = &taken[0].stack;
        assert_eq!(stack.len(), 16);
        // Sampled at the 40th range's instruction, before its own jump.
        assert_eq!(stack[0], (0x1000 + 0x100 * 38, 0x1000 + 0x100 * 39));
        assert_eq!(stack[15], (0x1000 + 0x100 * 23, 0x1000 + 0x100 * 24));
    }

    #[test]
    fn harts_count_and_keep_branches_apart() {
        let elements = [
            range(0, 0x100, 2, RangeEnd::Jump, 0x200),
            element(1, ElementKind::Timestamp { time: 77 }),
            range(1, 0x800, 3, RangeEnd::Call, 0x900),
            range(0, 0x200, 2, RangeEnd::Jump, 0x300),
            range(1, 0x900, 1, RangeEnd::Return, 0x80c),
            range(0, 0x300, 1, RangeEnd::Sequential, 0x304),
        ];
        let (taken, _) = sample_all(options(4), &elements);
        assert_eq!(
            taken,
            [
                Taken {
                    hart: 0,
                    address: 0x204,
                    time: None,
                    stack: vec![(0x104, 0x200)],
                },
                Taken {
                    hart: 1,
                    address: 0x900,
                    time: Some(77),
                    stack: vec![(0x808, 0x900)],
                },
            ]
        );
    }

    #[test]
    fn gaps_and_trace_off_empty_the_ring_but_keep_counting() {
        let gap = element(
            0,
            ElementKind::Gap {
                reason: GapReason::EncoderOverflow {
                    error_type: 0,
                    error_code: 0,
                },
            },
        );
        let off = element(
            0,
            ElementKind::TraceOff {
                last_address: None,
                reason: TraceOffReason::Disabled,
            },
        );
        for discontinuity in [gap, off] {
            let elements = [
                range(0, 0x100, 2, RangeEnd::Jump, 0x200),
                discontinuity,
                range(0, 0x400, 2, RangeEnd::Jump, 0x500),
                range(0, 0x500, 2, RangeEnd::Sequential, 0x508),
            ];
            let (taken, statistics) = sample_all(options(3), &elements);
            let stacks: Vec<_> = taken.iter().map(|sample| sample.stack.clone()).collect();
            assert_eq!(stacks, [vec![], vec![(0x404, 0x500)]]);
            assert_eq!(statistics.discontinuities, 1);
        }
    }

    #[test]
    fn traps_go_from_the_trapping_instruction_to_the_handler() {
        let elements = [
            // An instruction at 0x108 traps before it retires.
            range(0, 0x100, 2, RangeEnd::Sequential, 0x108),
            element(
                0,
                ElementKind::Trap {
                    from: None,
                    handler: 0x8000,
                    kind: TrapKind::Exception,
                },
            ),
            range(0, 0x8000, 2, RangeEnd::TrapReturn, 0x108),
            // An ecall retires and names itself.
            range(0, 0x108, 1, RangeEnd::EnvironmentCall, 0x10c),
            element(
                0,
                ElementKind::Trap {
                    from: Some(0x108),
                    handler: 0x8000,
                    kind: TrapKind::Exception,
                },
            ),
            range(0, 0x8000, 1, RangeEnd::Sequential, 0x8004),
        ];
        let (taken, _) = sample_all(options(6), &elements);
        assert_eq!(
            taken[0].stack,
            [(0x108, 0x8000), (0x8004, 0x108), (0x108, 0x8000)]
        );
    }

    #[test]
    fn an_unplaced_sample_is_counted_and_the_next_one_still_comes() {
        let mut sampler = BranchSampler::new(options(3)).unwrap();
        let mut addresses = Vec::new();
        sampler
            .add(
                &range(0, 0x100, 8, RangeEnd::Sequential, 0x120),
                |_, index| (index != 2).then_some(0),
                |sample| {
                    addresses.push(sample.address);
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
        // Instruction 2 is unknown; instruction 5 is asked (0 here).
        assert_eq!(addresses, [0]);
        assert_eq!(sampler.statistics().unplaced_samples, 1);
        assert_eq!(sampler.statistics().samples, 1);
    }
}
