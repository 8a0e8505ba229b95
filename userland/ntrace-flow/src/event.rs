//! The event layer (libipt's query layer): one hart's reading of its messages, with no
//! knowledge of the code.
//!
//! [`HartEvents::apply`] turns each message into an [`Event`] and keeps what the message
//! stream alone determines: synchronisation, the U-ADDR reference address (spec 8.1), the
//! timestamp (8.7), the HIST bits queue (8.3, 9.3), the I-CNT units not yet walked, how the
//! armed walk must end, and RepeatBranch (7.11). The block walk then asks this layer the
//! questions the code raises, as libipt's block decoder queries its query decoder: was
//! this conditional branch taken ([`HartEvents::branch_taken`]), where does this indirect
//! jump go ([`HartEvents::indirect_target`], which owns the implicit-return stack of 9.2),
//! and, once the I-CNT is used up, does the walk agree with the message that armed it
//! ([`HartEvents::end_walk`]). Every method is small and inlinable: the walk calls them
//! once per block.

use ntrace_message::{
    Body, BranchType, CorrelationEvent, Message, ProcessFormat, ResourceFull, SyncReason,
};
use trace_elements::{Context, ElementKind, RangeEnd, TraceOffReason, TraceOnReason, TrapKind};

use crate::block::IndirectKind;
use crate::decoder::SeamStart;
use crate::history::HistoryQueue;
use crate::memo::ReplayableEnd;
use crate::return_stack::{ReturnStack, ReturnStackModel, StackBase, StackOp};
use crate::FlowError;

/// What a message did to its hart, for the layer above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The hart is not synchronised and this is no synchronisation message: skipped.
    BeforeSync,
    /// Decoding (re)starts at `address`.
    TraceOn { address: u64, reason: TraceOnReason },
    /// The encoder lost trace (an Error message); the hart waits for its next
    /// synchronisation. `lost_units`: the I-CNT units the hart had not placed yet.
    Lost {
        error_type: u8,
        error_code: u64,
        lost_units: u64,
    },
    /// A synchronised hart's restart after a FIFO overrun (SYNC=7) without the Error
    /// message that should have come first: trace was lost before it (`lost_units` the
    /// units not placed, its own among them), and decoding restarts at `address`.
    RestartAfterLoss { address: u64, lost_units: u64 },
    /// A message this layer does not interpret (vendor-defined or reserved), by TCODE.
    Unhandled { code: u8 },
    /// Privilege mode or context changed.
    ContextChange {
        privilege: u8,
        virtualized: bool,
        context: Option<Context>,
    },
    /// The message added I-CNT units or HIST bits, or said how the walk ends: walk now.
    Walk,
    /// The message changed nothing the walk needs (RepeatBranch with a count of zero).
    Nothing,
}

/// How the walk armed by a message ends once its I-CNT is used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkEnd {
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
    Stop { evcode: CorrelationEvent },
}

/// A branch message kept for RepeatBranch (spec 7.11: "repeat handling of previous
/// branch message B-CNT times").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RepeatableWalk {
    icnt: u64,
    hist: Option<u64>,
    end: WalkEnd,
}

/// The last instruction the current walk placed, which its end is checked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LastInstruction {
    pub(crate) address: u64,
    /// How control left it; `None` before the walk placed any instruction.
    pub(crate) end: Option<RangeEnd>,
}

/// Whether the hart can be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncState {
    /// No synchronisation message seen yet.
    NeverSynced,
    Synced,
    /// Synchronised once, then lost (error, trace stopped): the next one is a restart.
    Lost,
}

/// An indirect jump met by the walk, described without the code image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndirectJump {
    /// Address of the jump instruction.
    pub(crate) address: u64,
    /// Address of the instruction after it: the return address when it links.
    pub(crate) return_address: u64,
    pub(crate) kind: IndirectKind,
    /// A target the code gives after all (a constant loaded just before).
    pub(crate) inferred_target: Option<u64>,
    /// The jump writes a link register.
    pub(crate) links: bool,
}

/// The answer of [`HartEvents::branch_taken`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolution<T> {
    Known(T),
    /// Only the next message can tell: pause the walk before this instruction.
    WaitForMessage,
}

/// The answer of [`HartEvents::indirect_target`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndirectTarget {
    /// Execution continues there; `None` when the walk ends at the jump and its target
    /// is not needed.
    Known(Option<u64>),
    /// Only the next message can tell: pause the walk before this jump.
    WaitForMessage,
    /// The message says the walk ends at a taken conditional branch, and this is a jump.
    NotABranch,
    /// Neither the message, the code nor the return stack gives the target, and the walk
    /// goes on past the jump.
    Unknown,
}

/// Where execution continues after a walk ended as its message said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// Where the walk stopped (a taken branch's target, the next instruction).
    WhereTheWalkStopped,
    /// At the address the message gave (indirect target, trap handler).
    At(u64),
    /// Trace stopped: nowhere until the next synchronisation.
    Nowhere,
}

/// What [`HartEvents::end_walk`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WalkEnded {
    pub(crate) resume: Resume,
    /// Whether a RepeatBranch armed the same walk again.
    pub(crate) next: NextWalk,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NextWalk {
    /// The message is repeated: walk again.
    Repeat,
    /// Wait for the next message.
    Idle,
}

/// The return-stack operations of the walk being recorded for replay.
#[derive(Clone, Debug, Default)]
struct StackLog {
    recording: bool,
    ops: Vec<StackOp>,
    /// An implicit return found no entry: the walk cannot be replayed.
    read: bool,
}

/// One hart's event state.
#[derive(Clone, Debug)]
pub(crate) struct HartEvents {
    /// The hart's SRC.
    pub(crate) src: u16,
    sync: SyncState,
    /// Reference for U-ADDR (spec 8.1): the last address sent or computed from a message.
    last_address: u64,
    /// Current time (spec 8.7), in timestamp units.
    time: u64,
    /// The time of the message being applied, reported once its walk ends.
    pending_time: Option<u64>,
    history: HistoryQueue,
    stack: ReturnStack,
    /// I-CNT units received but not yet walked.
    pending_units: u64,
    /// Set when the armed walk is a message's own (not only ResourceFull I-CNT).
    end: Option<WalkEnd>,
    /// Offset of the message that armed the walk, for its elements and errors.
    walk_offset: u64,
    last: LastInstruction,
    /// The last branch message, for RepeatBranch.
    repeat: Option<RepeatableWalk>,
    repeats_left: u64,
    stack_log: StackLog,
}

/// SYNC reasons after which the hart continues as before (markers and periodic
/// synchronisation); every other reason reports that trace restarted.
fn is_restart(sync: SyncReason) -> bool {
    !matches!(
        sync,
        SyncReason::EXTERNAL_TRIGGER
            | SyncReason::PERIODIC
            | SyncReason::SEQUENTIAL_INSTRUCTION_COUNTER
            | SyncReason::TRACE_EVENT
    )
}

/// Passes an error through a cold call, so that the per-message paths that can fail are
/// laid out (and their registers allocated) for the success case.
#[cold]
#[inline(never)]
fn cold_error(error: FlowError) -> FlowError {
    error
}

/// I-CNT units a message carries (spec 8.4), for counting what skipped messages held.
pub(crate) fn units_of(body: &Body) -> u64 {
    match *body {
        Body::DirectBranch { icnt }
        | Body::IndirectBranch { icnt, .. }
        | Body::IndirectBranchHist { icnt, .. }
        | Body::ProgTraceSync { icnt, .. }
        | Body::DirectBranchSync { icnt, .. }
        | Body::IndirectBranchSync { icnt, .. }
        | Body::IndirectBranchHistSync { icnt, .. }
        | Body::ProgTraceCorrelation { icnt, .. }
        | Body::ResourceFull(ResourceFull::IcntOverflow { icnt }) => icnt,
        _ => 0,
    }
}

/// The F-ADDR of a synchronisation message (where decoding can start).
pub(crate) fn sync_address(body: &Body) -> Option<u64> {
    match *body {
        Body::ProgTraceSync { faddr, .. }
        | Body::DirectBranchSync { faddr, .. }
        | Body::IndirectBranchSync { faddr, .. }
        | Body::IndirectBranchHistSync { faddr, .. } => Some(faddr),
        _ => None,
    }
}

impl HartEvents {
    pub(crate) fn new(src: u16, return_stack_depth: usize, model: ReturnStackModel) -> Self {
        Self {
            src,
            sync: SyncState::NeverSynced,
            last_address: 0,
            time: 0,
            pending_time: None,
            history: HistoryQueue::default(),
            stack: ReturnStack::with_model(return_stack_depth, model),
            pending_units: 0,
            end: None,
            walk_offset: 0,
            last: LastInstruction::default(),
            repeat: None,
            repeats_left: 0,
            stack_log: StackLog::default(),
        }
    }

    /// A hart a speculative decode starts at a seam (see `seam`): synchronised, with the
    /// U-ADDR reference address and time the messages before it gave, nothing pending,
    /// and the return-stack entries from before unknown.
    pub(crate) fn at_seam(
        seam: SeamStart,
        return_stack_depth: usize,
        model: ReturnStackModel,
    ) -> Self {
        let mut hart = Self::new(seam.src, return_stack_depth, model);
        hart.sync = SyncState::Synced;
        hart.last_address = seam.address;
        hart.time = seam.time;
        hart.stack.forget_base();
        hart
    }

    /// A speculative decode's way past a walk it could not follow (a return to an
    /// unknown stack entry): the flow is dropped, but not the message-level state
    /// (synchronised, the reference address, the time), so that the hart can go on at
    /// the next address a message gives ([`Self::skip_walk`]) instead of waiting for a
    /// synchronisation message. The join never takes what the decode made in between.
    pub(crate) fn lose_walk(&mut self) {
        self.pending_units = 0;
        self.pending_time = None;
        self.end = None;
        self.history.clear();
        self.repeats_left = 0;
        self.stack.clear();
        self.stack.forget_base();
    }

    /// For a hart whose walk was lost ([`Self::lose_walk`]): drops the walk the message
    /// just applied armed, and says where the hart is after it when the message gives
    /// the address (an indirect branch, a trap, a synchronisation).
    pub(crate) fn skip_walk(&mut self) -> Option<u64> {
        let end = self.end;
        self.lose_walk();
        match end {
            Some(WalkEnd::Address { target, .. }) => Some(target),
            Some(WalkEnd::TakenBranch {
                target: Some(target),
                ..
            }) => Some(target),
            Some(WalkEnd::Stop { .. }) => {
                self.unsync();
                None
            }
            Some(WalkEnd::TakenBranch { target: None, .. }) | None => None,
        }
    }

    /// Forgets the flow: the hart waits for its next synchronisation message.
    pub(crate) fn unsync(&mut self) {
        if self.sync == SyncState::Synced {
            self.sync = SyncState::Lost;
        }
        self.pending_units = 0;
        self.end = None;
        self.history.clear();
        self.stack.clear();
        self.repeat = None;
        self.repeats_left = 0;
    }

    pub(crate) fn is_synced(&self) -> bool {
        self.sync == SyncState::Synced
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.history.footprint() + self.stack.footprint()
    }

    pub(crate) fn stack(&self) -> &ReturnStack {
        &self.stack
    }

    pub(crate) fn stack_mut(&mut self) -> &mut ReturnStack {
        &mut self.stack
    }

    /// Whether a speculative decode (`parallel`) whose state for this hart is
    /// `speculative` goes on exactly as this, the true state, would. Ignored: what is
    /// always rewritten before it is read (the walk's offset, its last instruction while
    /// no walk end is armed). Unknowns of the speculative side match anything, as long
    /// as it never reads them (a RepeatBranch without its branch is an error there, and
    /// a pop below its known stack entries is counted): an absent RepeatBranch message,
    /// the stack entries below its own when its base is unknown.
    pub(crate) fn continues_as(&self, speculative: &HartEvents) -> bool {
        let stack = match speculative.stack.base() {
            StackBase::Empty => self.stack.entries().eq(speculative.stack.entries()),
            StackBase::Unknown => {
                let skip = self
                    .stack
                    .entries()
                    .len()
                    .checked_sub(speculative.stack.entries().len());
                skip.is_some_and(|skip| {
                    self.stack
                        .entries()
                        .skip(skip)
                        .eq(speculative.stack.entries())
                })
            }
        };
        stack
            && self.src == speculative.src
            && self.sync == speculative.sync
            && self.last_address == speculative.last_address
            && self.time == speculative.time
            && self.pending_time == speculative.pending_time
            && self.history.is_empty()
            && speculative.history.is_empty()
            && self.pending_units == speculative.pending_units
            && self.end == speculative.end
            && (self.end.is_none() || self.last == speculative.last)
            && (speculative.repeat.is_none() || self.repeat == speculative.repeat)
            && self.repeats_left == speculative.repeats_left
    }

    /// Whether this hart is as a decoder that never saw it has it (never synchronised,
    /// so at time zero, nothing pending).
    pub(crate) fn is_untouched(&self) -> bool {
        self.sync == SyncState::NeverSynced
            && self.pending_units == 0
            && self.history.is_empty()
            && self.end.is_none()
            && self.repeats_left == 0
            && self.pending_time.is_none()
    }

    /// Applies one message of this hart. An error leaves the hart for the caller to
    /// [`unsync`](Self::unsync).
    #[inline(always)]
    pub(crate) fn apply(&mut self, message: Message) -> Result<Event, FlowError> {
        // The helpers take fields, not the message: a message kept whole in memory costs
        // a store-forwarding stall per message on x86.
        let offset = message.offset;
        match message.body {
            Body::Error { etype, ecode } => {
                let lost_units = self.pending_units;
                self.unsync();
                return Ok(Event::Lost {
                    error_type: etype,
                    error_code: ecode,
                    lost_units,
                });
            }
            Body::Other { tcode } => return Ok(Event::Unhandled { code: tcode }),
            _ => {}
        }
        if self.sync != SyncState::Synced {
            return Ok(self.synchronize(sync_address(&message.body), message.timestamp));
        }
        if message.body.sync_reason() == Some(SyncReason::RESTART_FROM_FIFO_OVERRUN) {
            return Ok(self.restart_after_overrun(&message.body, message.timestamp));
        }
        self.pending_time = self.time_of(offset, message.timestamp, message.is_sync())?;
        match message.body {
            Body::Ownership { process } => {
                let context = match process.format {
                    ProcessFormat::Scontext => Some(Context::Process(process.context)),
                    ProcessFormat::Hcontext => Some(Context::VirtualMachine(process.context)),
                    ProcessFormat::PrivilegeChange | ProcessFormat::Reserved => None,
                };
                Ok(Event::ContextChange {
                    privilege: process.privilege,
                    virtualized: process.virtualized,
                    context,
                })
            }
            Body::DirectBranch { icnt } => {
                let end = WalkEnd::TakenBranch {
                    target: None,
                    sync: None,
                };
                self.arm_branch(offset, icnt, None, end)
            }
            Body::IndirectBranch { btype, icnt, uaddr } => {
                let end = WalkEnd::Address {
                    target: self.unique_address(uaddr),
                    btype,
                    sync: None,
                };
                self.arm_branch(offset, icnt, None, end)
            }
            Body::IndirectBranchHist {
                btype,
                icnt,
                uaddr,
                hist,
            } => {
                let end = WalkEnd::Address {
                    target: self.unique_address(uaddr),
                    btype,
                    sync: None,
                };
                self.arm_branch(offset, icnt, Some(hist), end)
            }
            Body::ProgTraceSync { sync, icnt, faddr } => {
                self.last_address = faddr;
                let end = WalkEnd::Address {
                    target: faddr,
                    btype: BranchType::Indirect,
                    sync: Some(sync),
                };
                // Not a branch message: RepeatBranch does not repeat it.
                self.arm(offset, icnt, None, Some(end))
            }
            Body::DirectBranchSync { sync, icnt, faddr } => {
                self.last_address = faddr;
                let end = WalkEnd::TakenBranch {
                    target: Some(faddr),
                    sync: Some(sync),
                };
                self.arm_branch(offset, icnt, None, end)
            }
            Body::IndirectBranchSync {
                sync,
                btype,
                icnt,
                faddr,
            } => {
                self.last_address = faddr;
                let end = WalkEnd::Address {
                    target: faddr,
                    btype,
                    sync: Some(sync),
                };
                self.arm_branch(offset, icnt, None, end)
            }
            Body::IndirectBranchHistSync {
                sync,
                btype,
                icnt,
                faddr,
                hist,
            } => {
                self.last_address = faddr;
                let end = WalkEnd::Address {
                    target: faddr,
                    btype,
                    sync: Some(sync),
                };
                self.arm_branch(offset, icnt, Some(hist), end)
            }
            Body::ResourceFull(resource) => self.resource_full(offset, resource),
            Body::RepeatBranch { bcnt } => self.repeat_branch(offset, bcnt),
            Body::ProgTraceCorrelation {
                evcode,
                cdf: _,
                icnt,
                hist,
            } => self.arm(offset, icnt, hist, Some(WalkEnd::Stop { evcode })),
            // Error and Other were handled before the synchronisation check; `Body` is
            // non-exhaustive, and a message kind this layer does not know changes nothing.
            _ => Ok(Event::Nothing),
        }
    }

    /// A message while not synchronised: only a synchronisation message starts decoding
    /// (its I-CNT and HIST cover instructions before its address, which are unknown).
    fn synchronize(&mut self, address: Option<u64>, timestamp: Option<u64>) -> Event {
        let Some(address) = address else {
            return Event::BeforeSync;
        };
        self.unsync();
        let reason = match self.sync {
            SyncState::NeverSynced => TraceOnReason::Start,
            SyncState::Synced | SyncState::Lost => TraceOnReason::Restart,
        };
        self.sync = SyncState::Synced;
        self.last_address = address;
        // A synchronisation message's timestamp is absolute: it cannot overflow.
        self.pending_time = timestamp;
        if let Some(time) = timestamp {
            self.time = time;
        }
        Event::TraceOn { address, reason }
    }

    /// SYNC=7 (restart from FIFO overrun: "some trace messages before this
    /// synchronization message were lost") while synchronised: the Error message that
    /// must come "immediately prior" is missing (lost itself, or corrupt). What the hart
    /// had not placed and the message's own I-CNT and HIST cannot be placed from where
    /// the flow stood (messages in between were lost), so they are dropped and decoding
    /// restarts at its address, as after an Error message.
    #[cold]
    #[inline(never)]
    fn restart_after_overrun(&mut self, body: &Body, timestamp: Option<u64>) -> Event {
        let lost_units = self.pending_units.saturating_add(units_of(body));
        self.unsync();
        match self.synchronize(sync_address(body), timestamp) {
            Event::TraceOn { address, .. } => Event::RestartAfterLoss {
                address,
                lost_units,
            },
            other => other,
        }
    }

    /// The time of a message of a synchronised hart: absolute in synchronisation
    /// messages, relative to the previous message otherwise (spec 8.7).
    fn time_of(
        &mut self,
        offset: u64,
        timestamp: Option<u64>,
        is_sync: bool,
    ) -> Result<Option<u64>, FlowError> {
        let Some(stamp) = timestamp else {
            return Ok(None);
        };
        self.time = if is_sync {
            stamp
        } else {
            self.time
                .checked_add(stamp)
                .ok_or_else(|| cold_error(FlowError::TimestampOverflow { offset }))?
        };
        Ok(Some(self.time))
    }

    /// U-ADDR (spec 8.1): the changed low bits, XORed into the previous address.
    fn unique_address(&mut self, uaddr: u64) -> u64 {
        self.last_address ^= uaddr;
        self.last_address
    }

    fn resource_full(&mut self, offset: u64, resource: ResourceFull) -> Result<Event, FlowError> {
        match resource {
            ResourceFull::IcntOverflow { icnt } => self.arm(offset, icnt, None, None),
            ResourceFull::HistOverflow { hist } => self.arm(offset, 0, Some(hist), None),
            ResourceFull::RepeatedHist { hist, repeat } => {
                self.history
                    .push(hist, repeat)
                    .map_err(|_| FlowError::MissingStopBit { offset })?;
                self.arm(offset, 0, None, None)
            }
            // Reserved or vendor RCODE: surfaced under its TCODE, flow unchanged.
            ResourceFull::Other { .. } => Ok(Event::Unhandled {
                code: ntrace_message::tcode::RESOURCE_FULL,
            }),
        }
    }

    fn repeat_branch(&mut self, offset: u64, bcnt: u64) -> Result<Event, FlowError> {
        let Some(repeat) = self.repeat else {
            return Err(FlowError::RepeatWithoutBranch { offset });
        };
        let Some(more) = bcnt.checked_sub(1) else {
            return Ok(Event::Nothing);
        };
        self.repeats_left = more;
        self.arm(offset, repeat.icnt, repeat.hist, Some(repeat.end))
    }

    #[inline(always)]
    fn arm_branch(
        &mut self,
        offset: u64,
        icnt: u64,
        hist: Option<u64>,
        end: WalkEnd,
    ) -> Result<Event, FlowError> {
        self.repeat = Some(RepeatableWalk { icnt, hist, end });
        self.arm(offset, icnt, hist, Some(end))
    }

    /// Adds a message's I-CNT and HIST to what the walk has to place.
    #[inline(always)]
    fn arm(
        &mut self,
        offset: u64,
        icnt: u64,
        hist: Option<u64>,
        end: Option<WalkEnd>,
    ) -> Result<Event, FlowError> {
        self.pending_units = self
            .pending_units
            .checked_add(icnt)
            .ok_or_else(|| cold_error(FlowError::IcntOverflow { offset }))?;
        if let Some(hist) = hist {
            self.history
                .push_once(hist)
                .map_err(|_| cold_error(FlowError::MissingStopBit { offset }))?;
        }
        if end.is_some() {
            self.last = LastInstruction::default();
        }
        self.end = end;
        self.walk_offset = offset;
        Ok(Event::Walk)
    }

    /// The time of the message just applied, once: reported after the elements of its
    /// walk.
    #[inline]
    pub(crate) fn take_time(&mut self) -> Option<u64> {
        self.pending_time.take()
    }

    /// Offset of the message whose walk is armed.
    #[inline]
    pub(crate) fn walk_offset(&self) -> u64 {
        self.walk_offset
    }

    /// I-CNT units not walked yet.
    #[inline]
    pub(crate) fn pending_units(&self) -> u64 {
        self.pending_units
    }

    /// Whether the armed walk has an end (a message's own I-CNT, not only ResourceFull's).
    #[cfg(test)]
    fn has_end(&self) -> bool {
        self.end.is_some()
    }

    /// The walk placed instructions up to `last`, leaving `remaining` units.
    #[inline]
    pub(crate) fn placed(&mut self, remaining: u64, last: u64, end: RangeEnd) {
        self.pending_units = remaining;
        self.last = LastInstruction {
            address: last,
            end: Some(end),
        };
    }

    /// Whether the conditional branch the walk reached, with `remaining` units after it,
    /// was taken: the next HIST bit, or, with no HIST (BTM, spec 8.4), whether the
    /// message that armed the walk is a direct branch message ending exactly there.
    #[inline]
    pub(crate) fn branch_taken(&mut self, remaining: u64) -> Resolution<bool> {
        if let Some(taken) = self.history.next() {
            return Resolution::Known(taken);
        }
        match self.end {
            // HIST for this branch has not arrived yet (or this is BTM and a later
            // message says whether it was taken).
            None => Resolution::WaitForMessage,
            Some(end) => {
                Resolution::Known(remaining == 0 && matches!(end, WalkEnd::TakenBranch { .. }))
            }
        }
    }

    /// A direct call: the encoder pushes its return address (spec 9.2).
    #[inline]
    pub(crate) fn direct_call(&mut self, return_address: u64) {
        self.push_return(return_address);
    }

    /// `ecall`/`ebreak` with `remaining` units after it. An encoder that reports it as an
    /// indirect call (B-TYPE 0, as the reference encoder does) also pushed its return
    /// address: mirror it.
    #[inline]
    pub(crate) fn environment_call(&mut self, return_address: u64, remaining: u64) {
        if remaining == 0
            && matches!(
                self.end,
                Some(WalkEnd::Address {
                    btype: BranchType::Indirect,
                    ..
                })
            )
        {
            self.push_return(return_address);
        }
    }

    /// Where the indirect jump the walk reached goes, with `remaining` units after it:
    /// the message's address when the message reports this very jump, else a
    /// constant-load inference or the return stack. The answer is a small value, not a
    /// `Result`, so that the per-block walk stays in registers; [`Self::jump_error`]
    /// makes the error of the failures.
    #[inline]
    pub(crate) fn indirect_target(&mut self, jump: IndirectJump, remaining: u64) -> IndirectTarget {
        if remaining == 0 {
            match self.end {
                // Whether this jump's target comes in the next message or was implicit
                // is only known from that message.
                None => return IndirectTarget::WaitForMessage,
                Some(WalkEnd::Address {
                    target,
                    btype: BranchType::Indirect,
                    ..
                }) => {
                    self.reported_jump(jump);
                    return IndirectTarget::Known(Some(target));
                }
                Some(WalkEnd::TakenBranch { .. }) => return IndirectTarget::NotABranch,
                Some(WalkEnd::Address { .. } | WalkEnd::Stop { .. }) => {}
            }
        }
        if let Some(target) = jump.inferred_target {
            if jump.links {
                self.push_return(jump.return_address);
            }
            return IndirectTarget::Known(Some(target));
        }
        let popped = self.implicit_return(jump);
        if popped.is_none() && remaining > 0 {
            return IndirectTarget::Unknown;
        }
        IndirectTarget::Known(popped)
    }

    /// The error of an [`IndirectTarget::NotABranch`] or [`IndirectTarget::Unknown`]
    /// answer about `jump`, at the offset of the message being walked.
    #[cold]
    pub(crate) fn jump_error(&self, jump: IndirectJump, answer: IndirectTarget) -> FlowError {
        let offset = self.walk_offset;
        let address = jump.address;
        match answer {
            IndirectTarget::NotABranch => FlowError::NotABranch { offset, address },
            IndirectTarget::Unknown | IndirectTarget::Known(_) | IndirectTarget::WaitForMessage => {
                FlowError::UnknownTarget { offset, address }
            }
        }
    }

    /// The error of a direct jump at `address` the trace should have reported as a taken
    /// branch (trTeInstEnAllJumps) and does not, at the offset of the message being
    /// walked.
    #[cold]
    pub(crate) fn jump_not_reported(&self, address: u64) -> FlowError {
        FlowError::JumpNotReported {
            offset: self.walk_offset,
            address,
        }
    }

    /// An explicitly reported jump: the encoder still popped or pushed its stack (see
    /// docs/ntrace-errata.md), so the decoder does the same.
    fn reported_jump(&mut self, jump: IndirectJump) {
        match jump.kind {
            IndirectKind::Return => self.discard_return(),
            IndirectKind::CoroutineSwap => {
                self.discard_return();
                self.push_return(jump.return_address);
            }
            IndirectKind::Call => self.push_return(jump.return_address),
            IndirectKind::Other | IndirectKind::TrapReturn => {}
        }
    }

    /// An unreported return (spec 9.2): its target is the top of the return stack.
    fn implicit_return(&mut self, jump: IndirectJump) -> Option<u64> {
        let popped = match jump.kind {
            IndirectKind::Return => self.stack.pop(),
            IndirectKind::CoroutineSwap => {
                let popped = self.stack.pop();
                if popped.is_some() {
                    self.stack.push(jump.return_address);
                }
                popped
            }
            IndirectKind::Call | IndirectKind::Other | IndirectKind::TrapReturn => None,
        };
        if self.stack_log.recording {
            // Where the walk goes now is the popped entry: a replay must find the same
            // one there (`ReturnStack::replay`).
            match popped {
                Some(address) => {
                    self.stack_log.ops.push(StackOp::Pop(address));
                    if jump.kind == IndirectKind::CoroutineSwap {
                        self.stack_log.ops.push(StackOp::Push(jump.return_address));
                    }
                }
                None => self.stack_log.read = true,
            }
        }
        popped
    }

    /// Pushes a return address the walk met (a call).
    #[inline]
    fn push_return(&mut self, return_address: u64) {
        self.stack.push(return_address);
        if self.stack_log.recording {
            self.stack_log.ops.push(StackOp::Push(return_address));
        }
    }

    /// Drops the newest return address (an explicitly reported return).
    #[inline]
    fn discard_return(&mut self) {
        self.stack.discard();
        if self.stack_log.recording {
            self.stack_log.ops.push(StackOp::Discard);
        }
    }

    /// What the walk just armed depends on, when replaying a kept walk of the same
    /// key can stand in for it (see `memo`): the armed walk is a branch message's own,
    /// with no repeat pending, no I-CNT or HIST bits left from an earlier message, and
    /// it ends at a taken branch or an indirect jump without synchronising. Returns the
    /// message's I-CNT, its HIST field (1 without one) and the end.
    #[inline]
    pub(crate) fn replay_key(&self) -> Option<(u64, u64, ReplayableEnd)> {
        if self.repeats_left != 0 {
            return None;
        }
        let end = match self.end? {
            WalkEnd::TakenBranch {
                target: None,
                sync: None,
            } => ReplayableEnd::TakenBranch,
            WalkEnd::Address {
                btype: BranchType::Indirect,
                sync: None,
                ..
            } => ReplayableEnd::IndirectJump,
            _ => return None,
        };
        let armed = self.repeat?;
        let hist = armed.hist.unwrap_or(1);
        if self.pending_units != armed.icnt || !self.history.holds_only(hist) {
            return None;
        }
        Some((armed.icnt, hist, end))
    }

    /// Starts logging the stack operations of the walk being recorded for replay.
    pub(crate) fn start_stack_log(&mut self) {
        self.stack_log.recording = true;
        self.stack_log.read = false;
        self.stack_log.ops.clear();
    }

    /// Stops logging; the operations logged when the walk can be replayed (it placed
    /// every unit and bit it was armed with and read nothing from the stack).
    pub(crate) fn stop_stack_log(&mut self) -> Option<&[StackOp]> {
        let log = &mut self.stack_log;
        let recorded = log.recording;
        log.recording = false;
        let complete = self.pending_units == 0 && self.history.is_empty();
        (recorded && complete && !log.read).then_some(log.ops.as_slice())
    }

    /// Replays a kept walk's stack operations, if the stack holds what its implicit
    /// returns popped; false, with nothing changed, otherwise (the walk then differs).
    #[inline]
    pub(crate) fn replay_stack(&mut self, stack_ops: &[StackOp]) -> bool {
        self.stack.replay(stack_ops)
    }

    /// The walk was replayed (its stack operations by [`Self::replay_stack`]): its other
    /// effects on this layer, as walking it had them.
    #[inline]
    pub(crate) fn replayed(&mut self, last: LastInstruction) {
        self.history.clear();
        self.pending_units = 0;
        self.last = last;
    }

    /// The target of the indirect jump the armed walk ends at, as its message reports it.
    #[inline]
    pub(crate) fn reported_target(&self) -> Option<u64> {
        match self.end {
            Some(WalkEnd::Address {
                target,
                btype: BranchType::Indirect,
                ..
            }) => Some(target),
            _ => None,
        }
    }

    /// The last instruction the walk placed.
    pub(crate) fn last_placed(&self) -> LastInstruction {
        self.last
    }

    /// Called when the armed I-CNT is used up and the walk has an end: checks the walk
    /// against the message (`pc` is where the walk stopped), reports the elements the end
    /// implies to `emit` (trap, restart, trace off), and re-arms a repeated message.
    #[inline(always)]
    pub(crate) fn end_walk(
        &mut self,
        pc: Option<u64>,
        emit: impl FnMut(ElementKind),
    ) -> Result<WalkEnded, FlowError> {
        // The common ends take this path in registers; every other end, and every
        // error, takes the out-of-line path below.
        if let Some(resume) = self.plain_end() {
            self.end = None;
            return Ok(WalkEnded {
                resume,
                next: NextWalk::Idle,
            });
        }
        self.end_walk_rest(pc, emit)
    }

    /// Where execution resumes when the walk just used up ends plainly: at a taken
    /// branch or an indirect jump, not a synchronisation message, with nothing to repeat
    /// or left over. Such an end reports no element and checks nothing else.
    #[inline(always)]
    pub(crate) fn plain_end(&self) -> Option<Resume> {
        if self.repeats_left != 0 || !self.history.is_empty() {
            return None;
        }
        match self.end {
            Some(WalkEnd::TakenBranch {
                target: None,
                sync: None,
            }) if self.last.end == Some(RangeEnd::BranchTaken) => Some(Resume::WhereTheWalkStopped),
            Some(WalkEnd::Address {
                target,
                btype: BranchType::Indirect,
                sync: None,
            }) => Some(Resume::At(target)),
            _ => None,
        }
    }

    /// Whether the hart is where a message's effects can be replayed whole (`memo`):
    /// synchronised, with no walk armed, no I-CNT, HIST bits or repeats pending and no
    /// time waiting to be reported.
    #[inline]
    pub(crate) fn between_messages(&self) -> bool {
        self.sync == SyncState::Synced
            && self.pending_units == 0
            && self.end.is_none()
            && self.repeats_left == 0
            && self.pending_time.is_none()
            && self.history.is_empty()
    }

    /// The U-ADDR reference address.
    #[inline]
    pub(crate) fn last_address(&self) -> u64 {
        self.last_address
    }

    /// The branch message that armed the walk (what a RepeatBranch repeats).
    pub(crate) fn armed_branch(&self) -> Option<RepeatableWalk> {
        self.repeat
    }

    /// A whole message was replayed (`memo`): what applying it and ending its walk
    /// plainly left besides the walk's own effects ([`Self::replayed`]).
    #[inline]
    pub(crate) fn message_replayed(
        &mut self,
        offset: u64,
        last_address: u64,
        armed: RepeatableWalk,
    ) {
        self.last_address = last_address;
        self.repeat = Some(armed);
        self.walk_offset = offset;
        self.end = None;
        self.pending_time = None;
    }

    /// [`end_walk`](Self::end_walk) for the ends that emit elements, repeat, or fail.
    #[cold]
    #[inline(never)]
    fn end_walk_rest(
        &mut self,
        pc: Option<u64>,
        mut emit: impl FnMut(ElementKind),
    ) -> Result<WalkEnded, FlowError> {
        let Some(end) = self.end.take() else {
            return Ok(WalkEnded {
                resume: Resume::WhereTheWalkStopped,
                next: NextWalk::Idle,
            });
        };
        let offset = self.walk_offset;
        if !self.history.is_empty() {
            return Err(FlowError::HistoryLeft {
                offset,
                bits: self.history.len(),
            });
        }
        let resume = match end {
            WalkEnd::TakenBranch { target, sync } => {
                match self.last.end {
                    Some(RangeEnd::BranchTaken) => {}
                    // A direct jump the decoder was not told is reported (the walk places
                    // those it was told of as taken branches).
                    Some(RangeEnd::Jump | RangeEnd::Call) => {
                        return Err(FlowError::JumpReported {
                            offset,
                            address: self.last.address,
                        })
                    }
                    _ => {
                        return Err(FlowError::NotABranch {
                            offset,
                            address: self.last.address,
                        })
                    }
                }
                if let Some(target) = target {
                    if pc != Some(target) {
                        return Err(FlowError::AddressMismatch {
                            offset,
                            computed: pc.unwrap_or(0),
                            reported: target,
                        });
                    }
                }
                if let Some(sync) = sync {
                    self.after_sync(sync, target.unwrap_or(0), &mut emit);
                }
                Resume::WhereTheWalkStopped
            }
            WalkEnd::Address {
                target,
                btype,
                sync,
            } => {
                if btype != BranchType::Indirect {
                    let from = if self.last.end == Some(RangeEnd::EnvironmentCall) {
                        Some(self.last.address)
                    } else {
                        pc
                    };
                    let kind = match btype {
                        BranchType::Exception => TrapKind::Exception,
                        BranchType::Interrupt => TrapKind::Interrupt,
                        BranchType::Indirect | BranchType::ExceptionOrInterrupt => {
                            TrapKind::ExceptionOrInterrupt
                        }
                    };
                    emit(ElementKind::Trap {
                        from,
                        handler: target,
                        kind,
                    });
                }
                if let Some(sync) = sync {
                    self.after_sync(sync, target, &mut emit);
                }
                Resume::At(target)
            }
            WalkEnd::Stop { evcode } => {
                let last_address = self.last.end.map(|_| self.last.address);
                let reason = match evcode {
                    CorrelationEvent::ENTRY_INTO_DEBUG => TraceOffReason::DebugMode,
                    CorrelationEvent::ENTRY_INTO_LOW_POWER => TraceOffReason::LowPower,
                    CorrelationEvent::TRACE_DISABLED => TraceOffReason::Disabled,
                    CorrelationEvent(other) => TraceOffReason::Other(other),
                };
                self.unsync();
                emit(ElementKind::TraceOff {
                    last_address,
                    reason,
                });
                Resume::Nowhere
            }
        };
        let next = self.repeat_again()?;
        Ok(WalkEnded { resume, next })
    }

    /// Re-arms the walk of a RepeatBranch that has repeats left.
    fn repeat_again(&mut self) -> Result<NextWalk, FlowError> {
        let Some(repeat) = self.repeat else {
            return Ok(NextWalk::Idle);
        };
        let Some(left) = self.repeats_left.checked_sub(1) else {
            return Ok(NextWalk::Idle);
        };
        self.repeats_left = left;
        self.arm(self.walk_offset, repeat.icnt, repeat.hist, Some(repeat.end))?;
        Ok(NextWalk::Repeat)
    }

    fn after_sync(&mut self, sync: SyncReason, address: u64, emit: &mut impl FnMut(ElementKind)) {
        if sync.resets_encoder() {
            self.stack.clear();
        }
        if is_restart(sync) {
            emit(ElementKind::TraceOn {
                address,
                reason: TraceOnReason::Restart,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    /// Asserts that `result` is an error matching `pattern`, printing it otherwise.
    macro_rules! assert_error {
        ($result:expr, $pattern:pat $(,)?) => {{
            let error = $result.unwrap_err();
            assert!(matches!(error, $pattern), "{error}");
        }};
    }

    use super::*;
    use ntrace_message::{Body, Process};

    const HART: u16 = 0;

    fn message(offset: u64, body: Body) -> Message {
        Message {
            offset,
            length: 1,
            src: HART,
            timestamp: None,
            body,
        }
    }

    fn stamped(offset: u64, body: Body, time: u64) -> Message {
        Message {
            timestamp: Some(time),
            ..message(offset, body)
        }
    }

    fn sync(faddr: u64) -> Body {
        Body::ProgTraceSync {
            sync: SyncReason::EXIT_FROM_DEBUG,
            icnt: 0,
            faddr,
        }
    }

    fn indirect(icnt: u64, uaddr: u64) -> Body {
        Body::IndirectBranch {
            btype: BranchType::Indirect,
            icnt,
            uaddr,
        }
    }

    fn synced_at(address: u64) -> HartEvents {
        let mut hart = HartEvents::new(HART, 4, ReturnStackModel::DropOldest);
        assert_eq!(
            hart.apply(message(0, sync(address))).unwrap(),
            Event::TraceOn {
                address,
                reason: TraceOnReason::Start
            }
        );
        hart
    }

    /// Ends the armed walk as if it stopped at `pc`, collecting the elements.
    fn end(hart: &mut HartEvents, pc: Option<u64>) -> (WalkEnded, Vec<ElementKind>) {
        let mut elements = Vec::new();
        let ended = hart.end_walk(pc, |kind| elements.push(kind)).unwrap();
        (ended, elements)
    }

    fn jump(kind: IndirectKind) -> IndirectJump {
        IndirectJump {
            address: 0x100,
            return_address: 0x104,
            kind,
            inferred_target: None,
            links: false,
        }
    }

    #[test]
    fn messages_before_the_first_sync_are_skipped() {
        let mut hart = HartEvents::new(HART, 4, ReturnStackModel::DropOldest);
        assert_eq!(
            hart.apply(message(0, Body::DirectBranch { icnt: 3 }))
                .unwrap(),
            Event::BeforeSync
        );
        assert_eq!(hart.pending_units(), 0);
        assert!(!hart.is_synced());
    }

    #[test]
    fn the_first_sync_starts_and_later_ones_after_a_loss_restart() {
        let mut hart = synced_at(0x1000);
        assert!(hart.is_synced());
        // Units armed but not placed when the Error comes are lost with the flow.
        let overflow = Body::ResourceFull(ResourceFull::IcntOverflow { icnt: 5 });
        assert_eq!(hart.apply(message(6, overflow)).unwrap(), Event::Walk);
        let lost = Body::Error { etype: 1, ecode: 2 };
        assert_eq!(
            hart.apply(message(9, lost)).unwrap(),
            Event::Lost {
                error_type: 1,
                error_code: 2,
                lost_units: 5,
            }
        );
        assert_eq!(hart.pending_units(), 0);
        assert!(!hart.is_synced());
        assert_eq!(
            hart.apply(message(12, sync(0x2000))).unwrap(),
            Event::TraceOn {
                address: 0x2000,
                reason: TraceOnReason::Restart
            }
        );
    }

    #[test]
    fn u_addr_is_xored_into_the_previous_address() {
        // Spec Table 24: F-ADDR 0x3FC04, U-ADDR 0x7B6 -> 0x3F368, U-ADDR 0x934 -> 0x3E100
        // (U-ADDR counts half-words: the message decoder gives it shifted to bytes).
        let mut hart = synced_at(0x3fc04);
        hart.apply(message(4, indirect(1, 0x7b6 << 1))).unwrap();
        let (ended, _) = end(&mut hart, None);
        assert_eq!(ended.resume, Resume::At(0x3f368));
        hart.apply(message(8, indirect(1, 0x934 << 1))).unwrap();
        let (ended, _) = end(&mut hart, None);
        assert_eq!(ended.resume, Resume::At(0x3e100));
    }

    #[test]
    fn f_addr_of_a_sync_message_replaces_the_reference_address() {
        let mut hart = synced_at(0x1000);
        let resync = Body::IndirectBranchSync {
            sync: SyncReason::PERIODIC,
            btype: BranchType::Indirect,
            icnt: 2,
            faddr: 0x8000,
        };
        assert_eq!(hart.apply(message(4, resync)).unwrap(), Event::Walk);
        end(&mut hart, None);
        hart.apply(message(8, indirect(2, 0x10))).unwrap();
        assert_eq!(end(&mut hart, None).0.resume, Resume::At(0x8010));
    }

    #[test]
    fn timestamps_are_absolute_in_syncs_and_relative_elsewhere() {
        let mut hart = HartEvents::new(HART, 4, ReturnStackModel::DropOldest);
        hart.apply(stamped(0, sync(0x1000), 1000)).unwrap();
        assert_eq!(hart.take_time(), Some(1000));
        assert_eq!(hart.take_time(), None, "reported once");
        hart.apply(stamped(4, Body::DirectBranch { icnt: 2 }, 25))
            .unwrap();
        assert_eq!(hart.take_time(), Some(1025));
        let periodic = Body::ProgTraceSync {
            sync: SyncReason::PERIODIC,
            icnt: 0,
            faddr: 0x1000,
        };
        hart.apply(stamped(8, periodic, 5000)).unwrap();
        assert_eq!(hart.take_time(), Some(5000));
    }

    #[test]
    fn a_relative_timestamp_past_64_bits_is_an_error_with_its_offset() {
        let mut hart = HartEvents::new(HART, 4, ReturnStackModel::DropOldest);
        hart.apply(stamped(0, sync(0x1000), u64::MAX - 1)).unwrap();
        let error = hart
            .apply(stamped(0x21, Body::DirectBranch { icnt: 2 }, 2))
            .unwrap_err();
        assert!(
            matches!(error, FlowError::TimestampOverflow { offset: 0x21 }),
            "{error}"
        );
    }

    #[test]
    fn icnt_accumulates_and_overflow_is_an_error_with_its_offset() {
        let mut hart = synced_at(0x1000);
        let full = |icnt| Body::ResourceFull(ResourceFull::IcntOverflow { icnt });
        assert_eq!(hart.apply(message(4, full(1 << 20))).unwrap(), Event::Walk);
        assert!(
            !hart.has_end(),
            "ResourceFull I-CNT alone does not end a walk"
        );
        hart.apply(message(8, full(5))).unwrap();
        assert_eq!(hart.pending_units(), (1 << 20) + 5);
        let error = hart.apply(message(0x30, full(u64::MAX))).unwrap_err();
        assert!(
            matches!(error, FlowError::IcntOverflow { offset: 0x30 }),
            "{error}"
        );
    }

    #[test]
    fn hist_bits_answer_branches_in_order_then_wait_for_a_message() {
        let mut hart = synced_at(0x1000);
        let overflow = Body::ResourceFull(ResourceFull::HistOverflow { hist: 0b110 });
        hart.apply(message(4, overflow)).unwrap();
        assert_eq!(hart.branch_taken(5), Resolution::Known(true));
        assert_eq!(hart.branch_taken(5), Resolution::Known(false));
        assert_eq!(hart.branch_taken(5), Resolution::WaitForMessage);
    }

    #[test]
    fn repeated_hist_plays_its_pattern_repeat_times() {
        let mut hart = synced_at(0x1000);
        let repeated = Body::ResourceFull(ResourceFull::RepeatedHist {
            hist: 0b101,
            repeat: 3,
        });
        hart.apply(message(4, repeated)).unwrap();
        let outcomes: Vec<_> = (0..7).map(|_| hart.branch_taken(1)).collect();
        let (yes, no) = (Resolution::Known(true), Resolution::Known(false));
        assert_eq!(
            outcomes,
            [no, yes, no, yes, no, yes, Resolution::WaitForMessage]
        );
    }

    #[test]
    fn hist_without_its_stop_bit_is_an_error_with_its_offset() {
        let mut hart = synced_at(0x1000);
        let zero = Body::ResourceFull(ResourceFull::HistOverflow { hist: 0 });
        let error = hart.apply(message(0x44, zero)).unwrap_err();
        assert!(
            matches!(error, FlowError::MissingStopBit { offset: 0x44 }),
            "{error}"
        );
    }

    #[test]
    fn without_hist_only_the_last_branch_of_a_direct_branch_message_is_taken() {
        // BTM (spec 8.4.1): the message ends at the taken branch, the others fell through.
        let mut hart = synced_at(0x1000);
        hart.apply(message(4, Body::DirectBranch { icnt: 6 }))
            .unwrap();
        assert_eq!(hart.branch_taken(4), Resolution::Known(false));
        assert_eq!(hart.branch_taken(0), Resolution::Known(true));
    }

    #[test]
    fn hist_left_over_after_the_walk_is_an_error_with_its_offset() {
        let mut hart = synced_at(0x1000);
        let hist_branch = Body::IndirectBranchHist {
            btype: BranchType::Indirect,
            icnt: 2,
            uaddr: 0x10,
            hist: 0b1011,
        };
        hart.apply(message(0x50, hist_branch)).unwrap();
        hart.branch_taken(1);
        assert_error!(
            hart.end_walk(Some(0x1004), |_| {}),
            FlowError::HistoryLeft {
                offset: 0x50,
                bits: 2
            }
        );
    }

    #[test]
    fn a_direct_branch_message_must_end_at_a_taken_branch() {
        let mut hart = synced_at(0x1000);
        hart.apply(message(0x60, Body::DirectBranch { icnt: 2 }))
            .unwrap();
        hart.placed(0, 0x1002, RangeEnd::Sequential);
        assert_error!(
            hart.end_walk(Some(0x1004), |_| {}),
            FlowError::NotABranch {
                offset: 0x60,
                address: 0x1002
            }
        );
    }

    #[test]
    fn a_direct_branch_sync_target_must_agree_with_the_walk() {
        let mut hart = synced_at(0x1000);
        let branch_sync = Body::DirectBranchSync {
            sync: SyncReason::PERIODIC,
            icnt: 2,
            faddr: 0x2000,
        };
        hart.apply(message(0x70, branch_sync)).unwrap();
        hart.placed(0, 0x1002, RangeEnd::BranchTaken);
        assert_error!(
            hart.end_walk(Some(0x3000), |_| {}),
            FlowError::AddressMismatch {
                offset: 0x70,
                computed: 0x3000,
                reported: 0x2000
            }
        );
    }

    #[test]
    fn traps_name_where_they_happened_and_their_kind() {
        let mut hart = synced_at(0x1000);
        let exception = Body::IndirectBranch {
            btype: BranchType::Exception,
            icnt: 2,
            uaddr: 0x1000 ^ 0x8000,
        };
        hart.apply(message(4, exception)).unwrap();
        hart.placed(0, 0x1000, RangeEnd::Sequential);
        let (ended, elements) = end(&mut hart, Some(0x1002));
        assert_eq!(ended.resume, Resume::At(0x8000));
        assert_eq!(
            elements,
            [ElementKind::Trap {
                from: Some(0x1002),
                handler: 0x8000,
                kind: TrapKind::Exception
            }]
        );
    }

    #[test]
    fn a_restarting_sync_reports_trace_on_and_a_marker_does_not() {
        let mut hart = synced_at(0x1000);
        let restart = Body::ProgTraceSync {
            sync: SyncReason::TRACE_ENABLE,
            icnt: 0,
            faddr: 0x2000,
        };
        hart.apply(message(4, restart)).unwrap();
        assert_eq!(
            end(&mut hart, Some(0x1000)).1,
            [ElementKind::TraceOn {
                address: 0x2000,
                reason: TraceOnReason::Restart
            }]
        );
        let marker = Body::ProgTraceSync {
            sync: SyncReason::SEQUENTIAL_INSTRUCTION_COUNTER,
            icnt: 0,
            faddr: 0x2000,
        };
        hart.apply(message(8, marker)).unwrap();
        assert_eq!(end(&mut hart, Some(0x2000)).1, []);
    }

    #[test]
    fn correlation_stops_trace_after_the_last_instruction() {
        let mut hart = synced_at(0x1000);
        let stop = Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(4),
            cdf: 0,
            icnt: 2,
            hist: None,
        };
        hart.apply(message(4, stop)).unwrap();
        hart.placed(0, 0x1002, RangeEnd::Sequential);
        let (ended, elements) = end(&mut hart, Some(0x1004));
        assert_eq!(ended.resume, Resume::Nowhere);
        assert_eq!(
            elements,
            [ElementKind::TraceOff {
                last_address: Some(0x1002),
                reason: TraceOffReason::Disabled
            }]
        );
        assert!(!hart.is_synced());
    }

    #[test]
    fn repeat_branch_replays_the_previous_branch_message() {
        let mut hart = synced_at(0x1000);
        hart.apply(message(4, indirect(3, 0))).unwrap();
        hart.placed(0, 0x1004, RangeEnd::IndirectJump);
        end(&mut hart, None);
        assert_eq!(
            hart.apply(message(8, Body::RepeatBranch { bcnt: 2 }))
                .unwrap(),
            Event::Walk
        );
        assert_eq!(hart.pending_units(), 3);
        hart.placed(0, 0x1004, RangeEnd::IndirectJump);
        assert_eq!(end(&mut hart, None).0.next, NextWalk::Repeat);
        assert_eq!(hart.pending_units(), 3, "the second play");
        hart.placed(0, 0x1004, RangeEnd::IndirectJump);
        assert_eq!(end(&mut hart, None).0.next, NextWalk::Idle);
        assert_eq!(
            hart.apply(message(12, Body::RepeatBranch { bcnt: 0 }))
                .unwrap(),
            Event::Nothing
        );
    }

    #[test]
    fn repeat_branch_without_a_branch_is_an_error_with_its_offset() {
        let mut hart = synced_at(0x1000);
        let error = hart
            .apply(message(0x80, Body::RepeatBranch { bcnt: 1 }))
            .unwrap_err();
        assert!(
            matches!(error, FlowError::RepeatWithoutBranch { offset: 0x80 }),
            "{error}"
        );
    }

    #[test]
    fn ownership_becomes_a_context_change() {
        let mut hart = synced_at(0x1000);
        let process = Process {
            format: ProcessFormat::Scontext,
            privilege: 0,
            virtualized: false,
            context: 42,
        };
        assert_eq!(
            hart.apply(message(4, Body::Ownership { process })).unwrap(),
            Event::ContextChange {
                privilege: 0,
                virtualized: false,
                context: Some(Context::Process(42))
            }
        );
    }

    #[test]
    fn implicit_returns_pop_what_calls_pushed() {
        let mut hart = synced_at(0x1000);
        hart.apply(message(4, Body::DirectBranch { icnt: 100 }))
            .unwrap();
        hart.direct_call(0x2000);
        hart.indirect_target(
            IndirectJump {
                return_address: 0x3000,
                kind: IndirectKind::Call,
                inferred_target: Some(0x5000),
                links: true,
                ..jump(IndirectKind::Call)
            },
            50,
        );
        let ret = jump(IndirectKind::Return);
        assert_eq!(
            hart.indirect_target(ret, 40),
            IndirectTarget::Known(Some(0x3000))
        );
        assert_eq!(
            hart.indirect_target(ret, 30),
            IndirectTarget::Known(Some(0x2000))
        );
        let answer = hart.indirect_target(ret, 20);
        assert_eq!(answer, IndirectTarget::Unknown);
        let error = hart.jump_error(ret, answer);
        assert!(
            matches!(
                error,
                FlowError::UnknownTarget {
                    offset: 4,
                    address: 0x100
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn a_reported_return_still_pops_the_stack() {
        let mut hart = synced_at(0x1000);
        hart.apply(message(4, indirect(10, 0x1000 ^ 0x7000)))
            .unwrap();
        hart.direct_call(0x2000);
        assert_eq!(
            hart.indirect_target(jump(IndirectKind::Return), 0),
            IndirectTarget::Known(Some(0x7000)),
            "the message's address, not the stack's"
        );
        hart.placed(0, 0x100, RangeEnd::Return);
        end(&mut hart, Some(0x7000));
        hart.apply(message(8, Body::DirectBranch { icnt: 10 }))
            .unwrap();
        assert_eq!(
            hart.indirect_target(jump(IndirectKind::Return), 4),
            IndirectTarget::Unknown
        );
    }

    #[test]
    fn a_direct_branch_message_cannot_end_at_a_jump() {
        let mut hart = synced_at(0x1000);
        hart.apply(message(0x90, Body::DirectBranch { icnt: 4 }))
            .unwrap();
        let other = jump(IndirectKind::Other);
        let answer = hart.indirect_target(other, 0);
        assert_eq!(answer, IndirectTarget::NotABranch);
        let error = hart.jump_error(other, answer);
        assert!(
            matches!(
                error,
                FlowError::NotABranch {
                    offset: 0x90,
                    address: 0x100
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn an_indirect_jump_at_the_end_of_resource_full_icnt_waits_for_the_next_message() {
        let mut hart = synced_at(0x1000);
        let full = Body::ResourceFull(ResourceFull::IcntOverflow { icnt: 4 });
        hart.apply(message(4, full)).unwrap();
        assert_eq!(
            hart.indirect_target(jump(IndirectKind::Other), 0),
            IndirectTarget::WaitForMessage
        );
    }

    #[test]
    fn a_sync_resetting_the_encoder_empties_the_return_stack() {
        let mut hart = synced_at(0x1000);
        hart.apply(message(4, Body::DirectBranch { icnt: 10 }))
            .unwrap();
        hart.direct_call(0x2000);
        hart.placed(0, 0x1000, RangeEnd::BranchTaken);
        end(&mut hart, Some(0x1100));
        let reset = Body::ProgTraceSync {
            sync: SyncReason::EXIT_FROM_RESET,
            icnt: 0,
            faddr: 0x1100,
        };
        hart.apply(message(8, reset)).unwrap();
        end(&mut hart, Some(0x1100));
        hart.apply(message(12, Body::DirectBranch { icnt: 10 }))
            .unwrap();
        assert_eq!(
            hart.indirect_target(jump(IndirectKind::Return), 4),
            IndirectTarget::Unknown
        );
    }

    #[test]
    fn unsync_forgets_the_flow() {
        let mut hart = synced_at(0x1000);
        let hist_branch = Body::IndirectBranchHist {
            btype: BranchType::Indirect,
            icnt: 7,
            uaddr: 0x10,
            hist: 0b1011,
        };
        hart.apply(message(4, hist_branch)).unwrap();
        hart.unsync();
        assert_eq!(hart.pending_units(), 0);
        assert!(!hart.has_end());
        assert_eq!(
            hart.branch_taken(0),
            Resolution::WaitForMessage,
            "HIST dropped"
        );
    }
}
