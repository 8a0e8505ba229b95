//! The flow decoder: N-Trace messages in, protocol-free trace elements out.
//!
//! Layers, as libipt stacks its decoders: the message decoder (packets) is owned here;
//! each message becomes an event on its hart's state (address reconstruction, HIST queue,
//! pending I-CNT, return stack, timestamps); events arm a *walk* over the code image; the
//! walk advances one cached block per call and yields one instruction range per block.
//! Nothing is buffered beyond one message's side elements, so memory does not grow with
//! the trace, and the caller pulls at its own pace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use code_image::CodeImage;
use ntrace_message::{Body, BranchType, Message, MessageDecoder, ResourceFull, SyncReason};
use trace_elements::{
    Context, ElementKind, GapReason, RangeEnd, TraceElement, TraceOffReason, TraceOnReason,
    TrapKind,
};

use crate::block::{BlockCache, BlockError, FileDecodeInfo, IndirectKind, Terminator, NO_BLOCK};
use crate::history::HistoryQueue;
use crate::return_stack::ReturnStack;
use crate::{DecoderOptions, FlowError};

/// How the walk armed by a message ends once its I-CNT is used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalkEnd {
    /// DirectBranch(Sync): the last instruction is a taken conditional branch. The sync
    /// variant also carries the target, which must agree.
    TakenBranch {
        target: Option<u64>,
        sync: Option<SyncReason>,
    },
    /// The next instruction is at `target`: an indirect jump's target when `btype` is
    /// Indirect, a trap handler otherwise; sync messages say where execution continues.
    Address {
        target: u64,
        btype: BranchType,
        sync: Option<SyncReason>,
    },
    /// ProgTraceCorrelation: trace stopped after the walked instructions.
    Stop { evcode: u8 },
}

/// A branch message kept for RepeatBranch (spec 7.11: "repeat handling of previous
/// branch message B-CNT times").
#[derive(Clone, Copy, Debug)]
struct RepeatableWalk {
    icnt: u64,
    hist: Option<u64>,
    end: WalkEnd,
}

#[derive(Clone, Copy, Debug, Default)]
struct LastInstruction {
    address: u64,
    end: Option<RangeEnd>,
}

#[derive(Debug)]
struct Hart {
    src: u16,
    synced: bool,
    ever_synced: bool,
    pc: Option<u64>,
    /// The cached block starting at `pc`, when the previous block's link gave it.
    pc_block: u32,
    /// The (block, successor slot) whose link should point at the block found at `pc`.
    link_from: (u32, u8),
    /// Reference for U-ADDR (spec 8.1): the last address sent or computed from a message.
    last_address: u64,
    stack: ReturnStack,
    history: HistoryQueue,
    /// I-CNT units received but not yet walked.
    pending_units: u64,
    /// Set when the armed walk is a message's own (not only ResourceFull I-CNT).
    end: Option<WalkEnd>,
    walk_offset: u64,
    last: LastInstruction,
    time: u64,
    pending_time: Option<u64>,
    repeat: Option<RepeatableWalk>,
    repeats_left: u64,
}

impl Hart {
    fn new(src: u16, stack_depth: usize) -> Self {
        Self {
            src,
            synced: false,
            ever_synced: false,
            pc: None,
            pc_block: NO_BLOCK,
            link_from: (NO_BLOCK, 0),
            last_address: 0,
            stack: ReturnStack::new(stack_depth),
            history: HistoryQueue::default(),
            pending_units: 0,
            end: None,
            walk_offset: 0,
            last: LastInstruction::default(),
            time: 0,
            pending_time: None,
            repeat: None,
            repeats_left: 0,
        }
    }

    /// Moves to an address the code alone does not give (trace address, return stack).
    fn jump_to(&mut self, pc: Option<u64>) {
        self.pc = pc;
        self.pc_block = NO_BLOCK;
        self.link_from = (NO_BLOCK, 0);
    }

    fn unsync(&mut self) {
        self.synced = false;
        self.jump_to(None);
        self.pending_units = 0;
        self.end = None;
        self.history.clear();
        self.stack.clear();
        self.repeat = None;
        self.repeats_left = 0;
    }
}

/// Counters for `summary` output and for reporting what was skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowStatistics {
    /// Instructions walked (retired instructions placed by the trace).
    pub instructions: u64,
    pub messages: u64,
    pub sync_messages: u64,
    /// Messages seen by a hart before its first synchronisation (or after a gap), which
    /// cannot be decoded and are skipped.
    pub messages_before_sync: u64,
    pub gaps: u64,
    pub vendor_or_reserved_messages: u64,
    /// I-CNT units still unresolved when the stream ended (trace cut after a ResourceFull).
    pub unresolved_units_at_end: u64,
    pub blocks_decoded: u64,
}

/// Decodes an N-Trace byte stream against a code image.
#[derive(Debug)]
pub struct FlowDecoder<'a> {
    messages: MessageDecoder<'a>,
    image: &'a CodeImage,
    files: Vec<FileDecodeInfo>,
    options: DecoderOptions,
    cache: BlockCache,
    harts: Vec<Hart>,
    active: Option<usize>,
    /// Elements produced but not yet returned, with the block each range came from
    /// (`NO_BLOCK` otherwise). Producing a batch per refill keeps the walk in a tight loop.
    ready: Vec<(TraceElement, u32)>,
    ready_index: usize,
    /// Block of the element returned last, for `for_each_instruction`.
    last_block: u32,
    /// An error met while producing the current batch, returned after its elements.
    pending_error: Option<FlowError>,
    statistics: FlowStatistics,
    finished: bool,
    /// Trace bytes consumed, published for other threads (progress display, releasing
    /// pages of a mapped trace) without borrowing the decoder.
    progress: Arc<AtomicU64>,
}

/// Elements produced per refill.
const BATCH: usize = 64;

fn is_restart(sync: SyncReason) -> bool {
    !matches!(sync.0, 0 | 2 | 4 | 6)
}

impl<'a> FlowDecoder<'a> {
    /// `files` gives the decoding options of each file of `image`, by file index.
    pub fn new(
        trace: &'a [u8],
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        options: DecoderOptions,
    ) -> Self {
        Self {
            messages: MessageDecoder::new(trace, options.message),
            image,
            files,
            options,
            cache: BlockCache::default(),
            harts: Vec::new(),
            active: None,
            ready: Vec::with_capacity(BATCH),
            ready_index: 0,
            last_block: NO_BLOCK,
            pending_error: None,
            statistics: FlowStatistics::default(),
            finished: false,
            progress: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A shared counter of the trace bytes consumed so far, updated every few thousand
    /// messages and at the end: another thread may read it while this one decodes (a
    /// summary decode can run through a whole trace within one call). It is advisory:
    /// relaxed stores, no ordering with anything else.
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.progress)
    }

    pub fn statistics(&self) -> FlowStatistics {
        let mut statistics = self.statistics;
        statistics.blocks_decoded = self.cache.len() as u64;
        statistics
    }

    /// Instructions executed per code block so far: (block start, address of the block's
    /// last instruction, instructions executed starting at that block start). A cheap
    /// instruction-count profile: it costs one add per block walked.
    pub fn block_profile(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.cache.executed()
    }

    /// Approximate heap bytes the decoder holds: the block cache (bounded by the code
    /// image), queued history (bounded by the trace bytes carrying it) and buffers.
    pub fn memory_footprint(&self) -> usize {
        self.cache.footprint()
            + self.ready.capacity() * std::mem::size_of::<(TraceElement, u32)>()
            + self
                .harts
                .iter()
                .map(|hart| hart.history.footprint() + hart.stack.footprint())
                .sum::<usize>()
            + self.harts.capacity() * std::mem::size_of::<Hart>()
    }

    /// Trace bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.messages.position()
    }

    pub fn idle_bytes(&self) -> u64 {
        self.messages.idle_bytes()
    }

    pub fn skipped_bytes(&self) -> u64 {
        self.messages.skipped_bytes()
    }

    /// Skips to the first message boundary after the next end of message: for buffers
    /// that start in the middle of a message (a wrapped trace buffer).
    pub fn sync_forward(&mut self) -> Option<u64> {
        self.harts.iter_mut().for_each(Hart::unsync);
        self.active = None;
        self.messages.sync_forward()
    }

    /// Calls `visit` with the address of each of `instructions` instructions from `start`,
    /// which must be the start of an [`ElementKind::InstructionRange`] this decoder
    /// produced. Returns false if `start` is not such an address.
    #[inline]
    pub fn for_each_instruction(
        &self,
        start: u64,
        instructions: u32,
        mut visit: impl FnMut(u64),
    ) -> bool {
        let mut block = match self.cache.blocks.get(self.last_block as usize) {
            Some(block) if block.start == start => block,
            _ => match self.cache.cached(start) {
                Some(block) => block,
                None => return false,
            },
        };
        // A range may run on through several blocks that follow each other in memory.
        let mut left = instructions;
        let mut address = start;
        loop {
            let here = left.min(block.instructions);
            for index in 0..here {
                visit(address);
                address = address.wrapping_add(block.length_of(index));
            }
            left -= here;
            if left == 0 {
                return true;
            }
            block = match self.cache.cached(address) {
                Some(next) => next,
                None => return false,
            };
        }
    }

    /// The next trace element; `Ok(None)` at the end of the trace. After an error the
    /// affected hart waits for its next synchronisation message, so calling again resumes.
    #[inline]
    pub fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        if let Some(&(element, block)) = self.ready.get(self.ready_index) {
            self.ready_index += 1;
            self.last_block = block;
            return Ok(Some(element));
        }
        self.refill()
    }

    /// Produces the next batch of elements and returns its first.
    fn refill(&mut self) -> Result<Option<TraceElement>, FlowError> {
        self.ready.clear();
        self.ready_index = 0;
        if let Some(error) = self.pending_error.take() {
            return Err(error);
        }
        // A batch also waits for its last range to be complete, so that how far ranges
        // extend does not depend on where batches happen to end.
        while self.ready.len() < BATCH || self.last_range_may_grow() {
            if let Some(hart) = self.active {
                if let Err(error) = self.step(hart) {
                    self.active = None;
                    self.harts[hart].unsync();
                    self.pending_error = Some(error);
                    break;
                }
                continue;
            }
            if self.finished {
                break;
            }
            match self.messages.next_message() {
                Ok(Some(message)) => {
                    if self.statistics.messages % 4096 == 0 {
                        self.progress
                            .store(self.messages.position(), Ordering::Relaxed);
                    }
                    if let Err(error) = self.apply(message) {
                        self.active = None;
                        if let Some(hart) =
                            self.harts.iter_mut().find(|hart| hart.src == message.src)
                        {
                            hart.unsync();
                        }
                        self.pending_error = Some(error);
                        break;
                    }
                }
                Ok(None) => {
                    self.finished = true;
                    self.progress
                        .store(self.messages.position(), Ordering::Relaxed);
                    self.statistics.unresolved_units_at_end =
                        self.harts.iter().map(|hart| hart.pending_units).sum();
                }
                Err(error) => {
                    // The lost message may have belonged to any hart.
                    self.harts.iter_mut().for_each(Hart::unsync);
                    self.active = None;
                    self.pending_error = Some(FlowError::Message(error));
                    break;
                }
            }
        }
        match self.ready.first() {
            Some(&(element, block)) => {
                self.ready_index = 1;
                self.last_block = block;
                Ok(Some(element))
            }
            None => self.pending_error.take().map_or(Ok(None), Err),
        }
    }

    /// Whether the newest range could still be extended by the walk (it ended without a
    /// control transfer) before the stream ends.
    fn last_range_may_grow(&self) -> bool {
        !self.finished
            && self.ready.last().is_some_and(|(element, _)| {
                matches!(
                    element.kind,
                    ElementKind::InstructionRange {
                        end: RangeEnd::BranchNotTaken | RangeEnd::Sequential,
                        ..
                    }
                )
            })
    }

    fn hart_index(&mut self, src: u16) -> usize {
        if let Some(index) = self.harts.iter().position(|hart| hart.src == src) {
            return index;
        }
        self.harts
            .push(Hart::new(src, self.options.return_stack_depth));
        self.harts.len() - 1
    }

    fn queue(&mut self, hart: usize, offset: u64, kind: ElementKind) {
        let hart = self.harts[hart].src;
        self.ready
            .push((TraceElement { hart, offset, kind }, NO_BLOCK));
    }

    fn apply(&mut self, message: Message) -> Result<(), FlowError> {
        self.statistics.messages += 1;
        let h = self.hart_index(message.src);
        let offset = message.offset;
        let is_sync = message.is_sync();
        if is_sync {
            self.statistics.sync_messages += 1;
        }
        // Timestamps: absolute in sync messages, relative to the previous one otherwise (8.7).
        let time = message.timestamp.map(|stamp| {
            let hart = &mut self.harts[h];
            hart.time = if is_sync {
                stamp
            } else {
                hart.time.wrapping_add(stamp)
            };
            hart.time
        });
        match message.body {
            Body::Error { etype, ecode } => {
                self.statistics.gaps += 1;
                self.harts[h].unsync();
                self.queue(
                    h,
                    offset,
                    ElementKind::Gap {
                        reason: GapReason::EncoderOverflow {
                            error_type: etype,
                            error_code: ecode,
                        },
                    },
                );
                return Ok(());
            }
            Body::Other { tcode } => {
                self.statistics.vendor_or_reserved_messages += 1;
                self.queue(h, offset, ElementKind::Unhandled { code: tcode });
                return Ok(());
            }
            _ => {}
        }
        let hart = &mut self.harts[h];
        if !hart.synced {
            let Some(faddr) = sync_address(&message.body) else {
                self.statistics.messages_before_sync += 1;
                return Ok(());
            };
            hart.unsync();
            hart.synced = true;
            hart.jump_to(Some(faddr));
            hart.last_address = faddr;
            let reason = if hart.ever_synced {
                TraceOnReason::Restart
            } else {
                TraceOnReason::Start
            };
            hart.ever_synced = true;
            self.queue(
                h,
                offset,
                ElementKind::TraceOn {
                    address: faddr,
                    reason,
                },
            );
            if let Some(time) = time {
                self.queue(h, offset, ElementKind::Timestamp { time });
            }
            return Ok(());
        }
        hart.pending_time = time;
        match message.body {
            Body::Ownership { process } => {
                // PROCESS FORMAT (spec Table 12): 2 carries scontext, 3 hcontext.
                let context = match process.format {
                    2 => Some(Context::Process(process.context)),
                    3 => Some(Context::VirtualMachine(process.context)),
                    _ => None,
                };
                self.queue(
                    h,
                    offset,
                    ElementKind::ContextChange {
                        privilege: process.privilege,
                        virtualized: process.virtualized,
                        context,
                    },
                );
            }
            Body::DirectBranch { icnt } => {
                let end = WalkEnd::TakenBranch {
                    target: None,
                    sync: None,
                };
                self.arm_branch(h, offset, icnt, None, end)?;
            }
            Body::IndirectBranch { btype, icnt, uaddr } => {
                let target = hart.last_address ^ uaddr;
                hart.last_address = target;
                self.arm_branch(
                    h,
                    offset,
                    icnt,
                    None,
                    WalkEnd::Address {
                        target,
                        btype,
                        sync: None,
                    },
                )?;
            }
            Body::IndirectBranchHist {
                btype,
                icnt,
                uaddr,
                hist,
            } => {
                let target = hart.last_address ^ uaddr;
                hart.last_address = target;
                let end = WalkEnd::Address {
                    target,
                    btype,
                    sync: None,
                };
                self.arm_branch(h, offset, icnt, Some(hist), end)?;
            }
            Body::ProgTraceSync { sync, icnt, faddr } => {
                hart.last_address = faddr;
                let end = WalkEnd::Address {
                    target: faddr,
                    btype: BranchType::Indirect,
                    sync: Some(sync),
                };
                self.arm(h, offset, icnt, None, Some(end))?;
            }
            Body::DirectBranchSync { sync, icnt, faddr } => {
                hart.last_address = faddr;
                let end = WalkEnd::TakenBranch {
                    target: Some(faddr),
                    sync: Some(sync),
                };
                self.arm_branch(h, offset, icnt, None, end)?;
            }
            Body::IndirectBranchSync {
                sync,
                btype,
                icnt,
                faddr,
            } => {
                hart.last_address = faddr;
                let end = WalkEnd::Address {
                    target: faddr,
                    btype,
                    sync: Some(sync),
                };
                self.arm_branch(h, offset, icnt, None, end)?;
            }
            Body::IndirectBranchHistSync {
                sync,
                btype,
                icnt,
                faddr,
                hist,
            } => {
                hart.last_address = faddr;
                let end = WalkEnd::Address {
                    target: faddr,
                    btype,
                    sync: Some(sync),
                };
                self.arm_branch(h, offset, icnt, Some(hist), end)?;
            }
            Body::ResourceFull(resource) => match resource {
                ResourceFull::IcntOverflow { icnt } => self.arm(h, offset, icnt, None, None)?,
                ResourceFull::HistOverflow { hist } => self.arm(h, offset, 0, Some(hist), None)?,
                ResourceFull::RepeatedHist { hist, repeat } => {
                    self.harts[h]
                        .history
                        .push(hist, repeat)
                        .map_err(|_| FlowError::MissingStopBit { offset })?;
                    self.arm(h, offset, 0, None, None)?;
                }
                ResourceFull::Other { .. } => {
                    // Reserved or vendor RCODE: surfaced under its TCODE, flow unchanged.
                    self.statistics.vendor_or_reserved_messages += 1;
                    self.queue(
                        h,
                        offset,
                        ElementKind::Unhandled {
                            code: message.tcode(),
                        },
                    );
                }
            },
            Body::RepeatBranch { bcnt } => {
                let hart = &mut self.harts[h];
                let Some(repeat) = hart.repeat else {
                    return Err(FlowError::RepeatWithoutBranch { offset });
                };
                if bcnt > 0 {
                    hart.repeats_left = bcnt - 1;
                    self.arm(h, offset, repeat.icnt, repeat.hist, Some(repeat.end))?;
                }
            }
            Body::ProgTraceCorrelation {
                evcode,
                cdf: _,
                icnt,
                hist,
            } => {
                self.arm(h, offset, icnt, hist, Some(WalkEnd::Stop { evcode }))?;
            }
            // Error and Other were handled before the synchronisation check.
            _ => {}
        }
        if self.active != Some(h) {
            // Nothing to walk: the message's timestamp applies now.
            self.flush_time(h, offset);
        }
        Ok(())
    }

    fn arm_branch(
        &mut self,
        h: usize,
        offset: u64,
        icnt: u64,
        hist: Option<u64>,
        end: WalkEnd,
    ) -> Result<(), FlowError> {
        self.harts[h].repeat = Some(RepeatableWalk { icnt, hist, end });
        self.arm(h, offset, icnt, hist, Some(end))
    }

    fn arm(
        &mut self,
        h: usize,
        offset: u64,
        icnt: u64,
        hist: Option<u64>,
        end: Option<WalkEnd>,
    ) -> Result<(), FlowError> {
        let hart = &mut self.harts[h];
        hart.pending_units = hart
            .pending_units
            .checked_add(icnt)
            .ok_or(FlowError::IcntOverflow { offset })?;
        if let Some(hist) = hist {
            hart.history
                .push(hist, 1)
                .map_err(|_| FlowError::MissingStopBit { offset })?;
        }
        if end.is_some() {
            hart.last = LastInstruction::default();
        }
        hart.end = end;
        hart.walk_offset = offset;
        self.active = Some(h);
        Ok(())
    }

    fn flush_time(&mut self, h: usize, offset: u64) {
        if let Some(time) = self.harts[h].pending_time.take() {
            self.queue(h, offset, ElementKind::Timestamp { time });
        }
    }

    /// Ends the walk (complete or paused waiting for history or an address).
    fn stop_walk(&mut self, h: usize) {
        self.active = None;
        let offset = self.harts[h].walk_offset;
        self.flush_time(h, offset);
    }

    /// Advances the active walk by one block.
    #[inline]
    fn step(&mut self, h: usize) -> Result<(), FlowError> {
        match self.walk_block(h)? {
            Stepped::Element => {}
            Stepped::Pause => self.stop_walk(h),
            Stepped::Done => match self.harts[h].end.take() {
                Some(end) => self.finish(h, end)?,
                None => self.stop_walk(h),
            },
        }
        Ok(())
    }

    /// The hot path: one cached block per call, borrowing the cache and the hart apart.
    #[inline(always)]
    fn walk_block(&mut self, h: usize) -> Result<Stepped, FlowError> {
        let cache = &mut self.cache;
        let ready = &mut self.ready;
        let hart = &mut self.harts[h];
        let offset = hart.walk_offset;
        if hart.pending_units == 0 {
            return Ok(Stepped::Done);
        }
        let Some(pc) = hart.pc else {
            return Err(FlowError::UnknownAddress { offset });
        };
        let index = if hart.pc_block != NO_BLOCK {
            hart.pc_block as usize
        } else {
            let index = cache
                .lookup(self.image, &self.files, pc)
                .map_err(|error| match error {
                    BlockError::Unmapped => FlowError::Unmapped {
                        offset,
                        address: pc,
                    },
                    BlockError::Undecodable => FlowError::Undecodable {
                        offset,
                        address: pc,
                    },
                    BlockError::Misaligned => FlowError::Misaligned {
                        offset,
                        address: pc,
                    },
                })?;
            let (from, slot) = hart.link_from;
            if from != NO_BLOCK {
                cache.blocks[from as usize].successors[usize::from(slot)] = index;
            }
            index as usize
        };
        hart.pc_block = NO_BLOCK;
        hart.link_from = (NO_BLOCK, 0);
        let block = &cache.blocks[index];
        let final_walk = hart.end.is_some();

        if u64::from(block.units) > hart.pending_units {
            // The walk ends inside this block, before its last instruction completes.
            let Some((count, last, next)) = block.prefix(hart.pending_units) else {
                return Err(FlowError::IcntInsideInstruction {
                    offset,
                    block_start: pc,
                });
            };
            hart.pending_units = 0;
            hart.jump_to(Some(next));
            cache.executed[index] += u64::from(count);
            hart.last = LastInstruction {
                address: last,
                end: Some(RangeEnd::Sequential),
            };
            self.statistics.instructions += u64::from(count);
            if self.options.instruction_ranges {
                push_range(
                    ready,
                    hart.src,
                    offset,
                    (pc, last, count, RangeEnd::Sequential, Some(next)),
                    index as u32,
                );
            }
            return Ok(Stepped::Element);
        }

        let remaining = hart.pending_units - u64::from(block.units);
        // Which static successor (0: next instruction, 1: target) the step takes, if any.
        let mut slot = None;
        let (next, end) = match block.terminator {
            Terminator::Fallthrough => {
                slot = Some(0);
                (Some(block.next), RangeEnd::Sequential)
            }
            Terminator::Branch { target } => {
                let taken = if let Some(taken) = hart.history.next() {
                    taken
                } else if !final_walk {
                    // HIST for this branch has not arrived yet (or this is BTM and a later
                    // message says whether it was taken): wait for the next message.
                    return Ok(Stepped::Pause);
                } else {
                    remaining == 0 && matches!(hart.end, Some(WalkEnd::TakenBranch { .. }))
                };
                slot = Some(usize::from(taken));
                if taken {
                    (Some(target), RangeEnd::BranchTaken)
                } else {
                    (Some(block.next), RangeEnd::BranchNotTaken)
                }
            }
            Terminator::Jump { target, links } => {
                if links {
                    hart.stack.push(block.next);
                }
                slot = Some(1);
                (
                    Some(target),
                    if links {
                        RangeEnd::Call
                    } else {
                        RangeEnd::Jump
                    },
                )
            }
            Terminator::EnvironmentCall => {
                // An encoder that reports ecall as an indirect call (B-TYPE 0, as the
                // reference encoder does) also pushed its return address: mirror it.
                if remaining == 0
                    && matches!(
                        hart.end,
                        Some(WalkEnd::Address {
                            btype: BranchType::Indirect,
                            ..
                        })
                    )
                {
                    hart.stack.push(block.next);
                }
                slot = Some(0);
                (Some(block.next), RangeEnd::EnvironmentCall)
            }
            Terminator::Indirect {
                kind,
                inferred_target,
                links,
            } => {
                if remaining == 0 && !final_walk {
                    // Whether this jump's target comes in the next message or was implicit
                    // is only known from that message.
                    return Ok(Stepped::Pause);
                }
                let next =
                    indirect_target(hart, block, kind, inferred_target, links, remaining, offset)?;
                (next, indirect_end(kind))
            }
        };
        hart.pending_units = remaining;
        hart.pc = next;
        if let Some(slot) = slot {
            let successor = block.successors[slot];
            if successor != NO_BLOCK {
                hart.pc_block = successor;
            } else {
                hart.link_from = (index as u32, slot as u8);
            }
        }
        hart.last = LastInstruction {
            address: block.last,
            end: Some(end),
        };
        cache.executed[index] += u64::from(block.instructions);
        self.statistics.instructions += u64::from(block.instructions);
        if self.options.instruction_ranges {
            push_range(
                ready,
                hart.src,
                offset,
                (block.start, block.last, block.instructions, end, next),
                index as u32,
            );
        }
        Ok(Stepped::Element)
    }

    fn finish(&mut self, h: usize, end: WalkEnd) -> Result<(), FlowError> {
        let hart = &mut self.harts[h];
        let offset = hart.walk_offset;
        if !hart.history.is_empty() {
            return Err(FlowError::HistoryLeft {
                offset,
                bits: hart.history.len(),
            });
        }
        match end {
            WalkEnd::TakenBranch { target, sync } => {
                if hart.last.end != Some(RangeEnd::BranchTaken) {
                    return Err(FlowError::NotABranch {
                        offset,
                        address: hart.last.address,
                    });
                }
                if let Some(target) = target {
                    if hart.pc != Some(target) {
                        return Err(FlowError::AddressMismatch {
                            offset,
                            computed: hart.pc.unwrap_or(0),
                            reported: target,
                        });
                    }
                }
                if let Some(sync) = sync {
                    self.after_sync(h, sync, target.unwrap_or(0));
                }
            }
            WalkEnd::Address {
                target,
                btype,
                sync,
            } => {
                if btype != BranchType::Indirect {
                    let from = if hart.last.end == Some(RangeEnd::EnvironmentCall) {
                        Some(hart.last.address)
                    } else {
                        hart.pc
                    };
                    let kind = match btype {
                        BranchType::Exception => TrapKind::Exception,
                        BranchType::Interrupt => TrapKind::Interrupt,
                        _ => TrapKind::ExceptionOrInterrupt,
                    };
                    self.queue(
                        h,
                        offset,
                        ElementKind::Trap {
                            from,
                            handler: target,
                            kind,
                        },
                    );
                }
                self.harts[h].jump_to(Some(target));
                if let Some(sync) = sync {
                    self.after_sync(h, sync, target);
                }
            }
            WalkEnd::Stop { evcode } => {
                let last_address = hart.last.end.map(|_| hart.last.address);
                let reason = match evcode {
                    0 => TraceOffReason::DebugMode,
                    1 => TraceOffReason::LowPower,
                    4 => TraceOffReason::Disabled,
                    other => TraceOffReason::Other(other),
                };
                hart.unsync();
                self.queue(
                    h,
                    offset,
                    ElementKind::TraceOff {
                        last_address,
                        reason,
                    },
                );
            }
        }
        let hart = &mut self.harts[h];
        if hart.repeats_left > 0 {
            if let Some(repeat) = hart.repeat {
                hart.repeats_left -= 1;
                let pending_time = hart.pending_time.take();
                self.arm(h, offset, repeat.icnt, repeat.hist, Some(repeat.end))?;
                self.harts[h].pending_time = pending_time;
                return Ok(());
            }
        }
        self.stop_walk(h);
        Ok(())
    }

    fn after_sync(&mut self, h: usize, sync: SyncReason, address: u64) {
        let hart = &mut self.harts[h];
        if sync.resets_encoder() {
            hart.stack.clear();
        }
        if is_restart(sync) {
            let offset = hart.walk_offset;
            self.queue(
                h,
                offset,
                ElementKind::TraceOn {
                    address,
                    reason: TraceOnReason::Restart,
                },
            );
        }
    }
}

/// Adds an instruction range to the batch, extending the previous one when execution
/// simply continued into this block (a not-taken branch or a block size limit): fewer,
/// longer ranges are what profilers want, and each costs the consumer a call.
#[inline(always)]
fn push_range(
    ready: &mut Vec<(TraceElement, u32)>,
    hart: u16,
    offset: u64,
    (start, last, instructions, end, next): (u64, u64, u32, RangeEnd, Option<u64>),
    block: u32,
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
                let total = previous_instructions.checked_add(instructions);
                if let (true, Some(total)) = (*previous_next == Some(start), total) {
                    *previous_last = last;
                    *previous_instructions = total;
                    *previous_end = end;
                    *previous_next = next;
                    return;
                }
            }
        }
    }
    ready.push((
        TraceElement {
            hart,
            offset,
            kind: ElementKind::InstructionRange {
                start,
                last,
                instructions,
                end,
                next,
            },
        },
        block,
    ));
}

/// What one call of the walk achieved.
enum Stepped {
    /// A block was walked (and its range added to the batch, when ranges are wanted).
    Element,
    /// Waiting for the next message before this block's last instruction can be placed.
    Pause,
    /// The armed I-CNT is used up.
    Done,
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

/// Where an indirect jump at the end of `block` goes: the message's address when the
/// message reports this very jump, else a constant-load inference or the return stack.
fn indirect_target(
    hart: &mut Hart,
    block: &crate::block::Block,
    kind: IndirectKind,
    inferred_target: Option<u64>,
    links: bool,
    remaining: u64,
    offset: u64,
) -> Result<Option<u64>, FlowError> {
    let reported = match hart.end {
        Some(WalkEnd::Address {
            target,
            btype: BranchType::Indirect,
            ..
        }) if remaining == 0 => Some(target),
        Some(WalkEnd::TakenBranch { .. }) if remaining == 0 => {
            return Err(FlowError::NotABranch {
                offset,
                address: block.last,
            });
        }
        _ => None,
    };
    if let Some(target) = reported {
        // Explicitly reported: the encoder still popped or pushed its stack (see
        // docs/ntrace-errata.md), so the decoder does the same.
        match kind {
            IndirectKind::Return => {
                hart.stack.pop();
            }
            IndirectKind::CoroutineSwap => {
                hart.stack.pop();
                hart.stack.push(block.next);
            }
            IndirectKind::Call => hart.stack.push(block.next),
            IndirectKind::Other | IndirectKind::TrapReturn => {}
        }
        return Ok(Some(target));
    }
    if let Some(target) = inferred_target {
        if links {
            hart.stack.push(block.next);
        }
        return Ok(Some(target));
    }
    let popped = match kind {
        IndirectKind::Return => hart.stack.pop(),
        IndirectKind::CoroutineSwap => {
            let popped = hart.stack.pop();
            if popped.is_some() {
                hart.stack.push(block.next);
            }
            popped
        }
        _ => None,
    };
    if popped.is_none() && remaining > 0 {
        return Err(FlowError::UnknownTarget {
            offset,
            address: block.last,
        });
    }
    Ok(popped)
}

/// The F-ADDR of a synchronisation message (where decoding can start).
fn sync_address(body: &Body) -> Option<u64> {
    match *body {
        Body::ProgTraceSync { faddr, .. }
        | Body::DirectBranchSync { faddr, .. }
        | Body::IndirectBranchSync { faddr, .. }
        | Body::IndirectBranchHistSync { faddr, .. } => Some(faddr),
        _ => None,
    }
}
