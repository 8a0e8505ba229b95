//! The block walk (libipt's block decoder): follows a hart's armed I-CNT through cached
//! basic blocks, one block per call, and asks the hart's event layer at each control
//! transfer the code cannot resolve alone (branch outcome, indirect target).

use code_image::CodeImage;
use trace_elements::{ElementKind, RangeEnd, TraceElement};

use crate::block::{
    visit_range, Block, BlockCache, BlockError, FileDecodeInfo, IndirectKind, Terminator, NO_BLOCK,
};
use crate::decoder::SeamStart;
use crate::event::{HartEvents, IndirectJump, IndirectTarget, Resolution};
use crate::memo::{WalkKey, WalkMemo};
use crate::{FlowError, ReturnStackModel};

/// A produced element with the block its range came from (`NO_BLOCK` otherwise).
pub(crate) type ReadyElement = (TraceElement, BlockRef);

/// A block of one of the walk's codes (see [`BlockWalk::select`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockRef {
    /// Which code's cache holds it.
    pub(crate) code: u32,
    pub(crate) block: u32,
}

impl BlockRef {
    /// No block: an element that is no instruction range.
    pub(crate) const NONE: Self = Self {
        code: 0,
        block: NO_BLOCK,
    };
}

/// A code the walk is not in now, with what it learnt about it.
#[derive(Debug)]
struct ParkedCode<'a> {
    image: &'a CodeImage,
    files: Vec<FileDecodeInfo>,
    cache: BlockCache,
}

/// Which static successor of a block a step took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Successor {
    /// The next instruction (fall-through, branch not taken, `ecall`).
    Next = 0,
    /// The branch or jump target.
    Target = 1,
}

/// A block whose successor link should point at the block found at the hart's pc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link {
    block: u32,
    successor: Successor,
}

/// Where a hart's walk stands in the code.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Position {
    pc: Option<u64>,
    /// The cached block starting at `pc`, when the previous block's link gave it.
    block: u32,
    /// The link to fill in once the block at `pc` is found.
    link: Option<Link>,
}

impl Position {
    /// Moves to an address the code alone does not give (trace address, return stack).
    pub(crate) fn jump_to(&mut self, pc: Option<u64>) {
        self.pc = pc;
        self.block = NO_BLOCK;
        self.link = None;
    }

    pub(crate) fn pc(&self) -> Option<u64> {
        self.pc
    }
}

/// A hart: its event state, where its walk stands and in which code.
#[derive(Clone, Debug)]
pub(crate) struct Hart {
    pub(crate) events: HartEvents,
    pub(crate) position: Position,
    /// The code it runs (see [`BlockWalk::select`]): 0 but where Ownership messages
    /// choose another.
    pub(crate) code: u32,
}

impl Hart {
    pub(crate) fn new(src: u16, return_stack_depth: usize, model: ReturnStackModel) -> Self {
        Self {
            events: HartEvents::new(src, return_stack_depth, model),
            position: Position {
                pc: None,
                block: NO_BLOCK,
                link: None,
            },
            code: 0,
        }
    }

    /// A hart a speculative decode starts at a seam, at `address` (see `seam`).
    pub(crate) fn at_seam(
        seam: SeamStart,
        return_stack_depth: usize,
        model: ReturnStackModel,
    ) -> Self {
        Self {
            events: HartEvents::at_seam(seam, return_stack_depth, model),
            position: Position {
                pc: Some(seam.address),
                block: NO_BLOCK,
                link: None,
            },
            code: 0,
        }
    }

    /// Drops the walk but keeps the message-level state (a speculative decode only; see
    /// `HartEvents::lose_walk`).
    pub(crate) fn lose_walk(&mut self) {
        self.events.lose_walk();
        self.position.jump_to(None);
    }

    /// Runs `code` from now on: where the walk stands is kept, what it had linked in the
    /// previous code's cache is not.
    pub(crate) fn switch_code(&mut self, code: u32) {
        if code != self.code {
            self.code = code;
            self.position.jump_to(self.position.pc);
        }
    }

    /// Forgets the flow until the next synchronisation message.
    pub(crate) fn unsync(&mut self) {
        self.events.unsync();
        self.position.jump_to(None);
    }
}

/// Whether walks are kept and replayed (`memo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalkReplay {
    /// A walk that comes again (same start, same message) is replayed from the first.
    #[default]
    Replay,
    /// Every walk is walked (for comparing, and for measuring what replay saves).
    Off,
}

/// Whether the walk reports instruction ranges or only counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeOutput {
    Report,
    CountOnly,
}

/// What one call of the walk achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stepped {
    /// A block was walked (and its range added to the batch, when ranges are wanted).
    Element,
    /// Waiting for the next message before this block's last instruction can be placed.
    Pause,
    /// The armed I-CNT is used up.
    Done,
}

/// How control leaves a block the walk covered entirely.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    next: Option<u64>,
    end: RangeEnd,
    /// How the event layer checks the block's last instruction against the message:
    /// `end`, except for a direct jump reported as a taken branch (trTeInstEnAllJumps),
    /// which the message reports as one.
    placed: RangeEnd,
    /// The static successor taken, if the code gives it.
    successor: Option<Successor>,
}

/// The code the walk runs over and what it learnt about it.
///
/// A walk may have several codes, one per context a trace's Ownership messages report
/// (the processes of an operating system, each with its own files at the same
/// addresses): `image`, `files` and `cache` are those of code `code`, which the hart
/// being walked runs ([`Self::select`]); the others wait in `parked`. Every block index
/// a hart holds is one of its own code's cache.
#[derive(Debug)]
pub(crate) struct BlockWalk<'a> {
    image: &'a CodeImage,
    files: Vec<FileDecodeInfo>,
    pub(crate) cache: BlockCache,
    code: u32,
    /// By code: `None` for the code in use.
    parked: Vec<Option<ParkedCode<'a>>>,
    ranges: RangeOutput,
    /// Instructions walked so far.
    pub(crate) instructions: u64,
    /// Kept walks, replayed instead of walked (`None`: always walk).
    pub(crate) memo: Option<WalkMemo>,
    /// Walks replayed so far.
    pub(crate) walks_replayed: u64,
}

impl<'a> BlockWalk<'a> {
    pub(crate) fn new(
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        ranges: RangeOutput,
        replay: WalkReplay,
        all_jumps: bool,
    ) -> Self {
        Self {
            image,
            files,
            cache: BlockCache::new(all_jumps),
            code: 0,
            parked: vec![None],
            ranges,
            instructions: 0,
            walks_replayed: 0,
            memo: match replay {
                WalkReplay::Replay => Some(WalkMemo::default()),
                WalkReplay::Off => None,
            },
        }
    }

    /// Adds a code (a context's); returns its number for [`Hart::switch_code`]. Kept
    /// walks are by address and so of one code: a walk of several has none
    /// ([`WalkReplay::Off`]).
    pub(crate) fn add_code(&mut self, image: &'a CodeImage, files: Vec<FileDecodeInfo>) -> u32 {
        self.memo = None;
        self.parked.push(Some(ParkedCode {
            image,
            files,
            cache: self.cache.empty_like(),
        }));
        u32::try_from(self.parked.len() - 1).unwrap_or(u32::MAX)
    }

    /// Whether the walk has more than one code.
    pub(crate) fn has_codes(&self) -> bool {
        self.parked.len() > 1
    }

    /// Makes `code` the one walked (the code of the hart about to be walked).
    #[inline(always)]
    pub(crate) fn select(&mut self, code: u32) {
        if code != self.code {
            self.swap_in(code);
        }
    }

    #[cold]
    fn swap_in(&mut self, code: u32) {
        let Some(incoming) = self.parked.get_mut(code as usize).and_then(Option::take) else {
            return;
        };
        let outgoing = ParkedCode {
            image: std::mem::replace(&mut self.image, incoming.image),
            files: std::mem::replace(&mut self.files, incoming.files),
            cache: std::mem::replace(&mut self.cache, incoming.cache),
        };
        self.parked[self.code as usize] = Some(outgoing);
        self.code = code;
    }

    /// The cache of `code`.
    fn cache_of(&self, code: u32) -> Option<&BlockCache> {
        if code == self.code {
            Some(&self.cache)
        } else {
            self.parked
                .get(code as usize)?
                .as_ref()
                .map(|parked| &parked.cache)
        }
    }

    /// Every code's cache.
    pub(crate) fn caches(&self) -> impl Iterator<Item = &BlockCache> {
        std::iter::once(&self.cache).chain(self.parked.iter().flatten().map(|parked| &parked.cache))
    }

    /// The key of the walk `hart` just armed, when a kept walk may stand in for it.
    #[inline]
    pub(crate) fn replay_key(&self, hart: &Hart) -> Option<WalkKey> {
        self.memo.as_ref()?;
        let pc = hart.position.pc?;
        let (units, hist, end) = hart.events.replay_key()?;
        Some(WalkKey {
            pc,
            units,
            hist,
            end,
        })
    }

    /// Replays the kept walk of `key` on `hart`, if there is one: the same ranges,
    /// counts and state as walking it. Otherwise the walk about to start is recorded.
    #[inline]
    pub(crate) fn replay(
        &mut self,
        hart: &mut Hart,
        key: WalkKey,
        ready: &mut Vec<ReadyElement>,
    ) -> bool {
        let Some(memo) = &mut self.memo else {
            return false;
        };
        if memo.find(key) {
            let offset = hart.events.walk_offset();
            let target = hart.events.reported_target();
            if self.replay_kept(hart, key, key.slot(), offset, target, ready) {
                return true;
            }
        }
        // Not kept, or kept with pops the stack does not hold now (a function returning
        // to another caller): this walk replaces it.
        if let Some(memo) = &mut self.memo {
            if memo.start(key) {
                hart.events.start_stack_log();
            }
        }
        false
    }

    /// Replays the kept walk of `key` (in table slot `slot`) for the message at
    /// `offset`, whose indirect jump (if it ends at one) goes to `target`; false, with
    /// nothing changed, when there is none.
    #[inline]
    pub(crate) fn replay_kept(
        &mut self,
        hart: &mut Hart,
        key: WalkKey,
        slot: usize,
        offset: u64,
        target: Option<u64>,
        ready: &mut Vec<ReadyElement>,
    ) -> bool {
        let Some(memo) = &mut self.memo else {
            return false;
        };
        let Some(kept) = memo.get_at(slot, key) else {
            return false;
        };
        if !hart.events.replay_stack(&kept.stack_ops) {
            return false;
        }
        self.walks_replayed += 1;
        hart.events.replayed(kept.last);
        let mut position = kept.position;
        // The block after the walk may have been linked since the walk was kept.
        if let (NO_BLOCK, Some(link)) = (position.block, position.link) {
            let linked = self.cache.blocks[link.block as usize].successors[link.successor as usize];
            if linked != NO_BLOCK {
                position.block = linked;
                position.link = None;
            }
        }
        hart.position = position;
        self.instructions += kept.instructions;
        for step in &kept.steps {
            self.cache.executed[step.block as usize] += u64::from(step.range.instructions);
        }
        if self.ranges == RangeOutput::Report {
            let src = hart.events.src;
            let code = self.code;
            // The walk's ranges, merged among themselves when kept: only the first may
            // still extend the range before the walk.
            let last_index = kept.ranges.len().saturating_sub(1);
            for (index, step) in kept.ranges.iter().enumerate() {
                let mut range = step.range;
                // A walk that ends at the indirect jump its message reports goes to the
                // message's target, which is not part of the key.
                if index == last_index && is_indirect(range.end) {
                    if let Some(target) = target {
                        range.next = Some(target);
                    }
                }
                let block = BlockRef {
                    code,
                    block: step.block,
                };
                if index == 0 {
                    push_range(ready, src, offset, range, block);
                } else {
                    ready.push((range_element(src, offset, range), block));
                }
            }
        }
        true
    }

    /// The walk ended (`Stepped::Done`): keeps it if it was being recorded and can be
    /// replayed.
    pub(crate) fn walk_done(&mut self, hart: &mut Hart) {
        let Some(memo) = &mut self.memo else {
            return;
        };
        if !memo.is_recording() {
            return;
        }
        let last = hart.events.last_placed();
        match hart.events.stop_stack_log() {
            Some(stack_ops) => memo.keep(stack_ops, last, hart.position),
            None => memo.abandon(),
        }
    }

    /// The walk paused or failed: it is not kept.
    pub(crate) fn walk_abandoned(&mut self, hart: &mut Hart) {
        if let Some(memo) = &mut self.memo {
            if memo.is_recording() {
                memo.abandon();
                let _ = hart.events.stop_stack_log();
            }
        }
    }

    /// The hot path: walks one cached block of `hart`'s armed I-CNT, adding its range to
    /// `ready`.
    #[inline(always)]
    pub(crate) fn step(
        &mut self,
        hart: &mut Hart,
        ready: &mut Vec<ReadyElement>,
    ) -> Result<Stepped, FlowError> {
        let units = hart.events.pending_units();
        if units == 0 {
            return Ok(Stepped::Done);
        }
        let offset = hart.events.walk_offset();
        let Some(pc) = hart.position.pc else {
            return Err(FlowError::UnknownAddress { offset });
        };
        let index = match self.block_at(&mut hart.position, pc) {
            Ok(index) => index,
            Err(error) => return Err(block_error(error, offset, pc)),
        };
        let block = &self.cache.blocks[index as usize];
        let Some(remaining) = units.checked_sub(u64::from(block.units)) else {
            return self.walk_inside(hart, index, units, ready);
        };
        let transfer = match leave(&mut hart.events, block, remaining) {
            Exit::Transfer(transfer) => transfer,
            Exit::WaitForMessage => return Ok(Stepped::Pause),
            Exit::Failed(jump, answer) => return Err(hart.events.jump_error(jump, answer)),
            Exit::JumpNotReported => return Err(hart.events.jump_not_reported(block.last)),
        };
        let position = &mut hart.position;
        position.pc = transfer.next;
        if let Some(successor) = transfer.successor {
            let linked = block.successors[successor as usize];
            if linked != NO_BLOCK {
                position.block = linked;
            } else {
                position.link = Some(Link {
                    block: index,
                    successor,
                });
            }
        }
        hart.events.placed(remaining, block.last, transfer.placed);
        self.cache.executed[index as usize] += u64::from(block.instructions);
        self.instructions += u64::from(block.instructions);
        let range = Range {
            start: block.start,
            last: block.last,
            instructions: block.instructions,
            end: transfer.end,
            next: transfer.next,
        };
        if self.ranges == RangeOutput::Report {
            push_range(ready, hart.events.src, offset, range, self.block_ref(index));
        }
        if let Some(memo) = &mut self.memo {
            if memo.is_recording() {
                memo.record(index, range);
            }
        }
        Ok(Stepped::Element)
    }

    /// Block `block` of the code in use.
    #[inline(always)]
    fn block_ref(&self, block: u32) -> BlockRef {
        BlockRef {
            code: self.code,
            block,
        }
    }

    /// The block starting at the hart's pc: from the previous block's link, or looked up
    /// (and then linked from the previous block).
    #[inline(always)]
    fn block_at(&mut self, position: &mut Position, pc: u64) -> Result<u32, BlockError> {
        let linked = position.block;
        position.block = NO_BLOCK;
        let link = position.link.take();
        if linked != NO_BLOCK {
            return Ok(linked);
        }
        let index = self.cache.lookup(self.image, &self.files, pc)?;
        if let Some(link) = link {
            self.cache.blocks[link.block as usize].successors[link.successor as usize] = index;
        }
        Ok(index)
    }

    /// The walk ends inside block `index`, before its last instruction completes (an
    /// exception, trace stopped, a ResourceFull I-CNT): ends on the instruction
    /// boundary `units` gives, which is not a control transfer.
    #[cold]
    fn walk_inside(
        &mut self,
        hart: &mut Hart,
        index: u32,
        units: u64,
        ready: &mut Vec<ReadyElement>,
    ) -> Result<Stepped, FlowError> {
        let block = &self.cache.blocks[index as usize];
        let offset = hart.events.walk_offset();
        let Some((count, last, next)) = block.prefix(units) else {
            return Err(FlowError::IcntInsideInstruction {
                offset,
                block_start: block.start,
            });
        };
        let start = block.start;
        hart.events.placed(0, last, RangeEnd::Sequential);
        hart.position.jump_to(Some(next));
        self.cache.executed[index as usize] += u64::from(count);
        self.instructions += u64::from(count);
        let range = Range {
            start,
            last,
            instructions: count,
            end: RangeEnd::Sequential,
            next: Some(next),
        };
        if self.ranges == RangeOutput::Report {
            push_range(ready, hart.events.src, offset, range, self.block_ref(index));
        }
        if let Some(memo) = &mut self.memo {
            if memo.is_recording() {
                memo.record(index, range);
            }
        }
        Ok(Stepped::Element)
    }

    /// Calls `visit` with the address of each of `instructions` instructions from `start`,
    /// beginning in block `hint` when it starts there. Returns false if `start` is not the
    /// start of a walked block.
    #[inline]
    pub(crate) fn for_each_instruction(
        &self,
        hint: BlockRef,
        start: u64,
        instructions: u32,
        visit: impl FnMut(u64),
    ) -> bool {
        let Some(cache) = self.cache_of(hint.code) else {
            return false;
        };
        let block = match cache.blocks.get(hint.block as usize) {
            Some(block) if block.start == start => block,
            _ => match cache.cached(start) {
                Some(block) => block,
                None => return false,
            },
        };
        visit_range(
            block,
            start,
            instructions,
            |address| cache.cached(address),
            visit,
        )
    }
}

#[cold]
fn block_error(error: BlockError, offset: u64, address: u64) -> FlowError {
    match error {
        BlockError::Unmapped => FlowError::Unmapped { offset, address },
        BlockError::Undecodable => FlowError::Undecodable { offset, address },
        BlockError::Misaligned => FlowError::Misaligned { offset, address },
    }
}

/// How control leaves a block: a small value, so that the per-block walk keeps it in
/// registers (a `Result` carrying a `FlowError` would not be).
#[derive(Clone, Copy, Debug)]
enum Exit {
    Transfer(Transfer),
    /// Only the next message can tell.
    WaitForMessage,
    /// The block ends with an indirect jump the event layer could not resolve.
    Failed(IndirectJump, IndirectTarget),
    /// The block ends with a direct jump that trTeInstEnAllJumps should have reported as
    /// a taken branch, and the trace does not.
    JumpNotReported,
}

/// How control leaves `block` when the walk covers it entirely, with `remaining` units
/// after it.
#[inline(always)]
fn leave(events: &mut HartEvents, block: &Block, remaining: u64) -> Exit {
    let transfer = match block.terminator {
        Terminator::Fallthrough => Transfer::to(
            Some(block.next),
            RangeEnd::Sequential,
            Some(Successor::Next),
        ),
        Terminator::Branch { target } => match events.branch_taken(remaining) {
            Resolution::WaitForMessage => return Exit::WaitForMessage,
            Resolution::Known(true) => {
                Transfer::to(Some(target), RangeEnd::BranchTaken, Some(Successor::Target))
            }
            Resolution::Known(false) => Transfer::to(
                Some(block.next),
                RangeEnd::BranchNotTaken,
                Some(Successor::Next),
            ),
        },
        Terminator::Jump { target, links } => {
            if links {
                events.direct_call(block.next);
            }
            Transfer::to(Some(target), jump_end(links), Some(Successor::Target))
        }
        // trTeInstEnAllJumps: the trace has the jump as a taken branch (a HIST bit, or a
        // DirectBranch message ending here). The return address is pushed once it is
        // confirmed, before any synchronisation of the same message resets the stack,
        // as the encoder does.
        Terminator::ReportedJump { target, links } => match events.branch_taken(remaining) {
            Resolution::WaitForMessage => return Exit::WaitForMessage,
            Resolution::Known(true) => {
                if links {
                    events.direct_call(block.next);
                }
                Transfer {
                    placed: RangeEnd::BranchTaken,
                    ..Transfer::to(Some(target), jump_end(links), Some(Successor::Target))
                }
            }
            Resolution::Known(false) => return Exit::JumpNotReported,
        },
        Terminator::EnvironmentCall => {
            events.environment_call(block.next, remaining);
            Transfer::to(
                Some(block.next),
                RangeEnd::EnvironmentCall,
                Some(Successor::Next),
            )
        }
        Terminator::Indirect {
            kind,
            inferred_target,
            links,
        } => {
            let jump = IndirectJump {
                address: block.last,
                return_address: block.next,
                kind,
                inferred_target,
                links,
            };
            match events.indirect_target(jump, remaining) {
                IndirectTarget::Known(next) => Transfer::to(next, indirect_end(kind), None),
                IndirectTarget::WaitForMessage => return Exit::WaitForMessage,
                failed @ (IndirectTarget::NotABranch | IndirectTarget::Unknown) => {
                    return Exit::Failed(jump, failed)
                }
            }
        }
    };
    Exit::Transfer(transfer)
}

impl Transfer {
    /// Control goes to `next`, the range ending with `end`, which the event layer
    /// checks as such.
    #[inline(always)]
    fn to(next: Option<u64>, end: RangeEnd, successor: Option<Successor>) -> Self {
        Self {
            next,
            end,
            placed: end,
            successor,
        }
    }
}

/// The range end of a direct jump (a call when it links).
#[inline(always)]
fn jump_end(links: bool) -> RangeEnd {
    if links {
        RangeEnd::Call
    } else {
        RangeEnd::Jump
    }
}

/// Whether a range ends at an indirect jump (the ends of [`indirect_end`]).
fn is_indirect(end: RangeEnd) -> bool {
    matches!(
        end,
        RangeEnd::IndirectCall
            | RangeEnd::Return
            | RangeEnd::CoroutineSwap
            | RangeEnd::IndirectJump
            | RangeEnd::TrapReturn
    )
}

fn indirect_end(kind: IndirectKind) -> RangeEnd {
    match kind {
        IndirectKind::Call => RangeEnd::IndirectCall,
        IndirectKind::Return => RangeEnd::Return,
        IndirectKind::CoroutineSwap => RangeEnd::CoroutineSwap,
        IndirectKind::Other => RangeEnd::IndirectJump,
        IndirectKind::TrapReturn => RangeEnd::TrapReturn,
    }
}

/// An instruction range before it becomes an element.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    start: u64,
    last: u64,
    pub(crate) instructions: u32,
    end: RangeEnd,
    next: Option<u64>,
}

/// Adds an instruction range to the batch, extending the previous one when execution
/// simply continued into this block (a not-taken branch or a block size limit): fewer,
/// longer ranges are what profilers want, and each costs the consumer a call.
#[inline(always)]
fn push_range(
    ready: &mut Vec<ReadyElement>,
    hart: u16,
    offset: u64,
    range: Range,
    block: BlockRef,
) {
    if let Some((previous, _)) = ready.last_mut() {
        if previous.hart == hart {
            if let ElementKind::InstructionRange {
                last: previous_last,
                instructions: previous_instructions,
                end: previous_end @ (RangeEnd::BranchNotTaken | RangeEnd::Sequential),
                next: previous_next,
                ..
            } = &mut previous.kind
            {
                let total = previous_instructions.checked_add(range.instructions);
                if let (true, Some(total)) = (*previous_next == Some(range.start), total) {
                    *previous_last = range.last;
                    *previous_instructions = total;
                    *previous_end = range.end;
                    *previous_next = range.next;
                    return;
                }
            }
        }
    }
    ready.push((range_element(hart, offset, range), block));
}

/// The element of `range`.
#[inline(always)]
fn range_element(hart: u16, offset: u64, range: Range) -> TraceElement {
    TraceElement {
        hart,
        offset,
        kind: ElementKind::InstructionRange {
            start: range.start,
            last: range.last,
            instructions: range.instructions,
            end: range.end,
            next: range.next,
        },
    }
}

/// `range` extended by `after`, when `push_range` would merge them.
pub(crate) fn merged(range: Range, after: Range) -> Option<Range> {
    if !matches!(range.end, RangeEnd::BranchNotTaken | RangeEnd::Sequential)
        || range.next != Some(after.start)
    {
        return None;
    }
    Some(Range {
        last: after.last,
        instructions: range.instructions.checked_add(after.instructions)?,
        end: after.end,
        next: after.next,
        ..range
    })
}
