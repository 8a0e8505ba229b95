//! The flow decoder: sequences → walks through the code → trace elements.

use std::collections::{BTreeMap, VecDeque};

use code_image::CodeImage;
use debug4_message::{
    Debug4Error, LocatedSequence, PrivilegeCause, Sequence, SequenceDecoder, StreamOptions, Value,
};
use trace_elements::{
    AddressKind, DecodeFailure, ElementKind, ElementSource, GapReason, RangeEnd, Register,
    TraceElement, TraceOffReason, TraceOnReason, TrapKind,
};

use crate::code::{accepts, Access, DataSide, FetchCache, Fetched, Flow};
use crate::BranchReporting;

/// The decoder's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DecoderOptions {
    /// Buffer size (synchronisation points), PC granularity, wrap offset.
    pub stream: StreamOptions,
    pub branch_reporting: BranchReporting,
    /// Instructions one walk may cover without a packet before the decoder gives up (a
    /// loop of direct jumps never reaches one).
    pub walk_limit: u64,
}

impl DecoderOptions {
    #[must_use]
    pub fn new(stream: StreamOptions, branch_reporting: BranchReporting) -> Self {
        Self {
            stream,
            branch_reporting,
            walk_limit: DEFAULT_WALK_LIMIT,
        }
    }

    #[must_use]
    pub fn with_walk_limit(mut self, walk_limit: u64) -> Self {
        self.walk_limit = walk_limit;
        self
    }
}

/// Enough for any straight-line code; small enough that corrupt data fails quickly.
const DEFAULT_WALK_LIMIT: u64 = 1 << 22;

/// Why the decoder could not follow the trace. Each is reported as a decode-error gap
/// (see [`ElementSource::gap_cause`]); decoding resumes at the next PC it can start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    #[error(transparent)]
    Message(#[from] Debug4Error),
    /// The walk reached an address where the image has no instruction.
    #[error("at byte offset {offset:#x}: no instruction in the code image at {address:#x}")]
    NoCode { offset: u64, address: u64 },
    /// The walk met a conditional branch before what the sequence at `offset` needs,
    /// and no branch packet came for it.
    #[error("at byte offset {offset:#x}: the branch at {address:#x} has no packet")]
    BranchWithoutPacket { offset: u64, address: u64 },
    /// The walk met an uninferable transfer with no PC sent for it.
    #[error("at byte offset {offset:#x}: the transfer at {address:#x} has no destination PC")]
    TransferWithoutPc { offset: u64, address: u64 },
    /// In PC-pair mode the walk met a direct jump with no pair sent for it.
    #[error("at byte offset {offset:#x}: the jump at {address:#x} has no PC pair")]
    JumpWithoutPair { offset: u64, address: u64 },
    /// The walk went round a loop of direct jumps, or ran past the walk limit.
    #[error(
        "at byte offset {offset:#x}: the walk from {address:#x} never reaches what the trace says"
    )]
    EndlessWalk { offset: u64, address: u64 },
    /// Trace Enabled is not followed by a PC whose value is known.
    #[error("at byte offset {offset:#x}: Trace Enabled without a start PC")]
    MissingStartPc { offset: u64 },
    /// A PC that must come with another (a PC pair, an interrupt's handler) comes alone.
    #[error("at byte offset {offset:#x}: PC without the PC that must follow it")]
    UnpairedPc { offset: u64 },
    /// A compressed PC whose high bits are unknown while following the code.
    #[error("at byte offset {offset:#x}: compressed PC with unknown high bits")]
    PartialPc { offset: u64 },
    /// A Change Hart to a hart beyond what trace elements can name.
    #[error("at byte offset {offset:#x}: hart {hart} is beyond 65535")]
    HartOutOfRange { offset: u64, hart: u64 },
}

impl FlowError {
    /// What every protocol's consumer can know of the error.
    pub fn failure(&self) -> DecodeFailure {
        match *self {
            FlowError::Message(_) => DecodeFailure::CorruptData,
            FlowError::NoCode { address, .. } => DecodeFailure::NoCode { address },
            _ => DecodeFailure::Inconsistent,
        }
    }
}

/// Where a hart's decoding stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Following {
    /// Not synchronised: waiting for Trace Enabled or a PC to start from.
    Lost,
    /// The next instruction to execute is at `pc`.
    At { pc: u64 },
}

/// Whether a hart's trace has started before, for [`TraceOnReason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum History {
    NeverStarted,
    StartedBefore,
}

/// What a lost hart may start again from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Restart {
    /// Any PC whose value is known: the message layer's last values are this stream's.
    AnyPc,
    /// After Trace Disabled: Trace Enabled, or a PC sent in full. A compressed PC is
    /// filled from values sent before the stop, and a buffer read without its write
    /// pointer continues after the stop with older data of unknown values (the encoder
    /// sends every PC in full after a synchronisation point, so the older data's first
    /// point still starts the hart).
    TraceEnabledOrFullPc,
}

/// How many packets carried a PC's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PcWidth {
    /// All 64 bits: the value needs nothing sent before it.
    Full,
    /// Fewer: the high bits were filled from the last PC.
    Compressed,
}

/// Whether a lost hart may start at a PC ([`Restart`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    Allowed,
    Refused,
}

/// Packets of a PC sequence that carries all 64 bits: header, size, 16 value packets.
const FULL_PC_PACKETS: u64 = 18;

/// Instructions walked but not yet reported.
#[derive(Clone, Copy, Debug)]
struct OpenRange {
    start: u64,
    last: u64,
    instructions: u32,
}

/// An address sequence waiting for the data sequence of the same instruction.
#[derive(Clone, Copy, Debug)]
struct PendingAccess {
    side: DataSide,
    access: Access,
    address: Option<u64>,
    offset: u64,
}

#[derive(Clone, Copy, Debug)]
struct HartFlow {
    following: Following,
    history: History,
    range: Option<OpenRange>,
    /// The last instruction walked since the hart started at its last PC.
    last_walked: Option<u64>,
    access: Option<PendingAccess>,
    restart: Restart,
}

impl HartFlow {
    const fn new() -> Self {
        Self {
            following: Following::Lost,
            history: History::NeverStarted,
            range: None,
            last_walked: None,
            access: None,
            restart: Restart::AnyPc,
        }
    }
}

/// What a walk looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Goal {
    /// The next conditional branch (a branch packet).
    Branch,
    /// The next uninferable transfer (a destination PC).
    Uninferable,
    /// The next instruction a data sequence can belong to.
    Data { side: DataSide, with_address: bool },
    /// The instruction at this address, whatever it is (the last one before an
    /// interrupt or the end of the trace, the "from" of a PC pair).
    Through(u64),
}

/// Decodes debug trace module data over a code image into trace elements.
#[derive(Debug)]
pub struct Debug4Decoder<'a> {
    sequences: SequenceDecoder<'a>,
    code: FetchCache<'a>,
    options: DecoderOptions,
    peeked: Option<Result<Option<LocatedSequence>, Debug4Error>>,
    ready: VecDeque<TraceElement>,
    harts: BTreeMap<u16, HartFlow>,
    /// The hart the stream's sequences belong to now, `None` after a Change Hart to a
    /// hart elements cannot name.
    hart: Option<u16>,
    /// The sequence being handled: elements carry its offset.
    offset: u64,
    error: Option<FlowError>,
    skipped_bytes: u64,
    finished: bool,
}

impl<'a> Debug4Decoder<'a> {
    pub fn new(trace: &'a [u8], code: &'a CodeImage, options: DecoderOptions) -> Self {
        Self {
            sequences: SequenceDecoder::new(trace, options.stream),
            code: FetchCache::new(code),
            options,
            peeked: None,
            ready: VecDeque::new(),
            harts: BTreeMap::new(),
            hart: Some(0),
            offset: 0,
            error: None,
            skipped_bytes: 0,
            finished: false,
        }
    }

    /// Bytes of a wrapped buffer skipped before its first synchronisation point.
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped_bytes
    }

    fn next_located(&mut self) -> Result<Option<LocatedSequence>, Debug4Error> {
        match self.peeked.take() {
            Some(result) => result,
            None => self.sequences.next_sequence(),
        }
    }

    /// The next sequence that is not Nops, without consuming it.
    fn peek(&mut self) -> Option<Sequence> {
        loop {
            if self.peeked.is_none() {
                self.peeked = Some(self.sequences.next_sequence());
            }
            match self.peeked {
                Some(Ok(Some(LocatedSequence {
                    sequence: Sequence::Nops { .. },
                    ..
                }))) => self.peeked = None,
                Some(Ok(Some(located))) => return Some(located.sequence),
                _ => return None,
            }
        }
    }

    fn push(&mut self, hart: u16, kind: ElementKind) {
        self.ready.push_back(TraceElement {
            hart,
            offset: self.offset,
            kind,
        });
    }

    fn hart_flow(&mut self, hart: u16) -> HartFlow {
        self.harts.get(&hart).copied().unwrap_or(HartFlow::new())
    }

    /// Reports the open range of `flow` (and its pending access), with `end` and `next`.
    fn close_range(&mut self, hart: u16, flow: &mut HartFlow, end: RangeEnd, next: Option<u64>) {
        if let Some(range) = flow.range.take() {
            self.push(
                hart,
                ElementKind::InstructionRange {
                    start: range.start,
                    last: range.last,
                    instructions: range.instructions,
                    end,
                    next,
                },
            );
        }
    }

    /// Reports an address still waiting for its data.
    fn flush_access(&mut self, hart: u16, flow: &mut HartFlow) {
        if let Some(pending) = flow.access.take() {
            let saved = self.offset;
            self.offset = pending.offset;
            self.push_access(hart, pending.access, pending.side, pending.address, None);
            self.offset = saved;
        }
    }

    fn push_access(
        &mut self,
        hart: u16,
        access: Access,
        side: DataSide,
        address: Option<u64>,
        data: Option<u64>,
    ) {
        match access {
            Access::Memory {
                operation, size, ..
            } => self.push(
                hart,
                ElementKind::MemoryAccess {
                    operation,
                    address,
                    address_kind: AddressKind::Effective,
                    size: Some(size),
                    data,
                },
            ),
            // A CSR read leaves its value in the destination register; a CSR write
            // leaves the written value in the CSR.
            Access::Csr { csr, destination } => {
                if let Some(value) = data {
                    let register = match side {
                        DataSide::Store => Register::Csr(csr),
                        DataSide::Load => Register::Integer(destination),
                    };
                    self.push(hart, ElementKind::RegisterWrite { register, value });
                }
            }
        }
    }

    /// A decode error: the gap, every hart's open range closed, the hart lost.
    fn fail(&mut self, hart: u16, flow: &mut HartFlow, error: FlowError) {
        self.flush_access(hart, flow);
        let next = match flow.following {
            Following::At { pc } => Some(pc),
            Following::Lost => None,
        };
        self.close_range(hart, flow, RangeEnd::Sequential, next);
        flow.following = Following::Lost;
        flow.last_walked = None;
        self.error = Some(error);
        self.push(
            hart,
            ElementKind::Gap {
                reason: GapReason::DecodeError {
                    cause: error.failure(),
                },
            },
        );
    }

    /// Starts `flow` at `address` after it was lost or disabled.
    fn start(&mut self, hart: u16, flow: &mut HartFlow, address: u64) {
        let reason = match flow.history {
            History::NeverStarted => TraceOnReason::Start,
            History::StartedBefore => TraceOnReason::Restart,
        };
        flow.history = History::StartedBefore;
        flow.following = Following::At { pc: address };
        flow.last_walked = None;
        self.push(hart, ElementKind::TraceOn { address, reason });
    }

    fn include(&mut self, hart: u16, flow: &mut HartFlow, pc: u64) {
        match &mut flow.range {
            Some(range) if range.instructions < u32::MAX => {
                range.last = pc;
                range.instructions += 1;
            }
            Some(_) => {
                // A range's count is 32 bits: report this one and start another.
                self.close_range(hart, flow, RangeEnd::Sequential, Some(pc));
                flow.range = Some(OpenRange {
                    start: pc,
                    last: pc,
                    instructions: 1,
                });
            }
            None => {
                flow.range = Some(OpenRange {
                    start: pc,
                    last: pc,
                    instructions: 1,
                })
            }
        }
        flow.last_walked = Some(pc);
    }

    /// Walks from the hart's position to `goal`: returns the instruction there (walked,
    /// the position still at it) or the error that stops the walk.
    fn walk(
        &mut self,
        hart: u16,
        flow: &mut HartFlow,
        goal: Goal,
    ) -> Result<(u64, Fetched), FlowError> {
        let offset = self.offset;
        let Following::At { mut pc } = flow.following else {
            // Callers only walk a hart that follows the code.
            return Err(FlowError::EndlessWalk { offset, address: 0 });
        };
        let reporting = self.options.branch_reporting;
        let start = pc;
        let mut jump_targets: Vec<u64> = Vec::new();
        let mut steps = 0u64;
        loop {
            steps += 1;
            if steps > self.options.walk_limit {
                return Err(FlowError::EndlessWalk {
                    offset,
                    address: start,
                });
            }
            let fetched = self.code.fetch(pc).ok_or(FlowError::NoCode {
                offset,
                address: pc,
            })?;
            let arrived = match goal {
                Goal::Through(address) => pc == address,
                Goal::Branch => matches!(fetched.flow, Flow::Branch { .. }),
                Goal::Uninferable => matches!(fetched.flow, Flow::Uninferable { .. }),
                Goal::Data { side, with_address } => accepts(fetched.access, side, with_address),
            };
            if arrived {
                self.include(hart, flow, pc);
                flow.following = Following::At { pc };
                return Ok((pc, fetched));
            }
            match fetched.flow {
                Flow::Sequential => {
                    self.include(hart, flow, pc);
                    pc = fetched.next;
                }
                Flow::Branch { .. } => match reporting {
                    BranchReporting::TakenNotTaken => {
                        return Err(FlowError::BranchWithoutPacket {
                            offset,
                            address: pc,
                        })
                    }
                    // Without a pair the branch was not taken.
                    BranchReporting::PcPairs => {
                        self.include(hart, flow, pc);
                        self.close_range(hart, flow, RangeEnd::BranchNotTaken, Some(fetched.next));
                        pc = fetched.next;
                    }
                },
                Flow::DirectJump { target, end } => match reporting {
                    BranchReporting::TakenNotTaken => {
                        if jump_targets.contains(&target) || jump_targets.len() > 4096 {
                            return Err(FlowError::EndlessWalk {
                                offset,
                                address: start,
                            });
                        }
                        jump_targets.push(target);
                        self.include(hart, flow, pc);
                        self.close_range(hart, flow, end, Some(target));
                        pc = target;
                    }
                    BranchReporting::PcPairs => {
                        return Err(FlowError::JumpWithoutPair {
                            offset,
                            address: pc,
                        })
                    }
                },
                Flow::Uninferable { .. } => {
                    return Err(FlowError::TransferWithoutPc {
                        offset,
                        address: pc,
                    })
                }
            }
            flow.following = Following::At { pc };
        }
    }

    /// Handles one sequence of the stream.
    fn handle(&mut self, located: LocatedSequence) {
        self.offset = located.offset;
        let sequence = located.sequence;
        match sequence {
            Sequence::Nops { .. } => return,
            Sequence::Skipped { bytes } => {
                self.skipped_bytes = self.skipped_bytes.saturating_add(bytes);
                return;
            }
            Sequence::ChangeHart { hart } => {
                match u16::try_from(hart) {
                    Ok(hart) => self.hart = Some(hart),
                    Err(_) => {
                        self.hart = None;
                        self.error = Some(FlowError::HartOutOfRange {
                            offset: located.offset,
                            hart,
                        });
                        self.push(
                            0,
                            ElementKind::Gap {
                                reason: GapReason::DecodeError {
                                    cause: DecodeFailure::Inconsistent,
                                },
                            },
                        );
                    }
                }
                return;
            }
            _ => {}
        }
        // Sequences of a hart elements cannot name are skipped up to the next Change Hart.
        let Some(hart) = self.hart else {
            return;
        };
        let mut flow = self.hart_flow(hart);
        let pairs_with_access = match (sequence, flow.access) {
            (Sequence::LoadData { .. }, Some(pending)) => pending.side == DataSide::Load,
            (Sequence::StoreData { .. }, Some(pending)) => pending.side == DataSide::Store,
            _ => false,
        };
        if !pairs_with_access {
            self.flush_access(hart, &mut flow);
        }
        if let Err(error) = self.handle_for(hart, &mut flow, located) {
            self.fail(hart, &mut flow, error);
        }
        self.harts.insert(hart, flow);
    }

    fn handle_for(
        &mut self,
        hart: u16,
        flow: &mut HartFlow,
        located: LocatedSequence,
    ) -> Result<(), FlowError> {
        let offset = located.offset;
        match located.sequence {
            Sequence::Nops { .. } | Sequence::Skipped { .. } | Sequence::ChangeHart { .. } => {}
            Sequence::TraceEnabled { .. } => {
                let next = self.peek();
                let Some(Sequence::Pc(Value::Known(address))) = next else {
                    flow.following = Following::Lost;
                    return Err(FlowError::MissingStartPc { offset });
                };
                self.peeked = None;
                self.close_range(hart, flow, RangeEnd::Sequential, None);
                flow.restart = Restart::AnyPc;
                self.start(hart, flow, address);
            }
            Sequence::TraceDisabled => {
                // Without the PC of the last instruction before it, Trace Disabled means
                // data was dropped (what rvperf's encoder sends it alone for).
                let next = match flow.following {
                    Following::At { pc } => Some(pc),
                    Following::Lost => None,
                };
                self.close_range(hart, flow, RangeEnd::Sequential, next);
                flow.following = Following::Lost;
                flow.restart = Restart::TraceEnabledOrFullPc;
                self.push(
                    hart,
                    ElementKind::Gap {
                        reason: GapReason::EncoderOverflow {
                            error_type: 0,
                            error_code: 0,
                        },
                    },
                );
            }
            Sequence::Privilege(privilege) => self.push(
                hart,
                ElementKind::ContextChange {
                    privilege: privilege.level,
                    virtualized: false,
                    context: None,
                },
            ),
            Sequence::BranchTaken | Sequence::BranchNotTaken => {
                if flow.following == Following::Lost {
                    return Ok(());
                }
                let (_, fetched) = self.walk(hart, flow, Goal::Branch)?;
                let Flow::Branch { target } = fetched.flow else {
                    return Ok(());
                };
                let (end, next) = match located.sequence {
                    Sequence::BranchTaken => (RangeEnd::BranchTaken, target),
                    _ => (RangeEnd::BranchNotTaken, fetched.next),
                };
                self.close_range(hart, flow, end, Some(next));
                flow.following = Following::At { pc: next };
            }
            Sequence::Pc(value) => {
                let width = match located.packets {
                    FULL_PC_PACKETS.. => PcWidth::Full,
                    _ => PcWidth::Compressed,
                };
                self.handle_pc(hart, flow, offset, value, width)?
            }
            Sequence::LoadAddress(value) | Sequence::StoreAddress(value) => {
                if flow.following == Following::Lost {
                    return Ok(());
                }
                let side = match located.sequence {
                    Sequence::LoadAddress(_) => DataSide::Load,
                    _ => DataSide::Store,
                };
                let (_, fetched) = self.walk(
                    hart,
                    flow,
                    Goal::Data {
                        side,
                        with_address: true,
                    },
                )?;
                self.close_range(hart, flow, RangeEnd::Sequential, Some(fetched.next));
                flow.following = Following::At { pc: fetched.next };
                if let Some(access) = fetched.access {
                    flow.access = Some(PendingAccess {
                        side,
                        access,
                        address: value.known(),
                        offset,
                    });
                }
            }
            Sequence::LoadData { value } | Sequence::StoreData { value } => {
                let side = match located.sequence {
                    Sequence::LoadData { .. } => DataSide::Load,
                    _ => DataSide::Store,
                };
                if let Some(pending) = flow.access.take() {
                    // `handle` kept the address only for data of the same side.
                    self.push_access(hart, pending.access, side, pending.address, Some(value));
                    return Ok(());
                }
                if flow.following == Following::Lost {
                    return Ok(());
                }
                let (_, fetched) = self.walk(
                    hart,
                    flow,
                    Goal::Data {
                        side,
                        with_address: false,
                    },
                )?;
                self.close_range(hart, flow, RangeEnd::Sequential, Some(fetched.next));
                flow.following = Following::At { pc: fetched.next };
                if let Some(access) = fetched.access {
                    self.push_access(hart, access, side, None, Some(value));
                }
            }
            Sequence::Timestamp(value) => {
                if let Value::Known(time) = value {
                    self.push(hart, ElementKind::Timestamp { time });
                }
            }
            Sequence::Custom { header, .. } => self.push(
                hart,
                ElementKind::Unhandled {
                    code: header.packet(),
                },
            ),
        }
        Ok(())
    }

    fn handle_pc(
        &mut self,
        hart: u16,
        flow: &mut HartFlow,
        offset: u64,
        value: Value,
        width: PcWidth,
    ) -> Result<(), FlowError> {
        let following = flow.following;
        // A lost hart starts from this PC or the one it comes with: after a stop, only
        // when this one's value stands alone.
        let start = match (following, flow.restart, width) {
            (Following::Lost, Restart::TraceEnabledOrFullPc, PcWidth::Compressed) => Start::Refused,
            _ => Start::Allowed,
        };
        let address = match (value, following) {
            (Value::Known(address), _) => Some(address),
            (Value::Partial { .. }, Following::Lost) => None,
            (Value::Partial { .. }, Following::At { .. }) => {
                return Err(FlowError::PartialPc { offset })
            }
        };
        match self.peek() {
            Some(Sequence::TraceDisabled) => {
                self.peeked = None;
                let Some(last) = address else {
                    return Ok(());
                };
                let mut last_address = Some(last);
                if let Following::At { .. } = following {
                    self.walk_through(hart, flow, last)?;
                } else {
                    last_address = None;
                }
                self.close_range(hart, flow, RangeEnd::Sequential, None);
                flow.following = Following::Lost;
                flow.restart = Restart::TraceEnabledOrFullPc;
                self.push(
                    hart,
                    ElementKind::TraceOff {
                        last_address,
                        reason: TraceOffReason::Disabled,
                    },
                );
            }
            Some(Sequence::Privilege(privilege))
                if privilege.cause == PrivilegeCause::Interrupt =>
            {
                self.peeked = None;
                let handler = match self.peek() {
                    Some(Sequence::Pc(Value::Known(handler))) => {
                        self.peeked = None;
                        handler
                    }
                    _ => return Err(FlowError::UnpairedPc { offset }),
                };
                match (following, address) {
                    (Following::At { .. }, Some(last)) => {
                        self.walk_through(hart, flow, last)?;
                        let from = match flow.following {
                            Following::At { pc } => Some(pc),
                            Following::Lost => None,
                        };
                        self.close_range(hart, flow, RangeEnd::Sequential, Some(handler));
                        self.push(
                            hart,
                            ElementKind::Trap {
                                from,
                                handler,
                                kind: TrapKind::Interrupt,
                            },
                        );
                        flow.following = Following::At { pc: handler };
                        flow.last_walked = None;
                    }
                    _ if start == Start::Allowed => self.start(hart, flow, handler),
                    _ => {}
                }
                self.push(
                    hart,
                    ElementKind::ContextChange {
                        privilege: privilege.level,
                        virtualized: false,
                        context: None,
                    },
                );
            }
            _ => match self.options.branch_reporting {
                BranchReporting::TakenNotTaken => {
                    let Some(destination) = address else {
                        return Ok(());
                    };
                    if following == Following::Lost {
                        if start == Start::Allowed {
                            self.start(hart, flow, destination);
                        }
                        return Ok(());
                    }
                    let (pc, fetched) = self.walk(hart, flow, Goal::Uninferable)?;
                    self.transfer(hart, flow, pc, fetched, destination);
                }
                BranchReporting::PcPairs => {
                    let destination = match self.peek() {
                        Some(Sequence::Pc(Value::Known(destination))) => {
                            self.peeked = None;
                            destination
                        }
                        Some(Sequence::Pc(Value::Partial { .. }))
                            if following == Following::Lost =>
                        {
                            self.peeked = None;
                            return Ok(());
                        }
                        _ => return Err(FlowError::UnpairedPc { offset }),
                    };
                    match (following, address) {
                        (Following::At { .. }, Some(from)) => {
                            let (pc, fetched) = self.walk(hart, flow, Goal::Through(from))?;
                            self.transfer(hart, flow, pc, fetched, destination);
                        }
                        _ if start == Start::Allowed => self.start(hart, flow, destination),
                        _ => {}
                    }
                }
            },
        }
        Ok(())
    }

    /// Walks up to and including the instruction at `last`, unless it is the one walked
    /// last (its packets already moved the walk on: a branch, an uninferable transfer).
    fn walk_through(&mut self, hart: u16, flow: &mut HartFlow, last: u64) -> Result<(), FlowError> {
        if flow.last_walked == Some(last) && flow.following != (Following::At { pc: last }) {
            return Ok(());
        }
        let (_, fetched) = self.walk(hart, flow, Goal::Through(last))?;
        flow.following = Following::At { pc: fetched.next };
        Ok(())
    }

    /// The instruction at `pc` handed control to `destination`.
    fn transfer(
        &mut self,
        hart: u16,
        flow: &mut HartFlow,
        pc: u64,
        fetched: Fetched,
        destination: u64,
    ) {
        let end = match fetched.flow {
            Flow::Sequential => RangeEnd::Sequential,
            Flow::Branch { .. } => RangeEnd::BranchTaken,
            Flow::DirectJump { end, .. } | Flow::Uninferable { end } => end,
        };
        self.close_range(hart, flow, end, Some(destination));
        if end == RangeEnd::EnvironmentCall {
            self.push(
                hart,
                ElementKind::Trap {
                    from: Some(pc),
                    handler: destination,
                    kind: TrapKind::Exception,
                },
            );
        }
        flow.following = Following::At { pc: destination };
    }

    /// Reports every hart's walked instructions (its pending access first), then
    /// applies `then` to the hart.
    fn close_every_range(&mut self, then: fn(&mut HartFlow)) {
        let harts: Vec<(u16, HartFlow)> = self
            .harts
            .iter()
            .map(|(&hart, &flow)| (hart, flow))
            .collect();
        for (hart, mut flow) in harts {
            self.flush_access(hart, &mut flow);
            let next = match flow.following {
                Following::At { pc } => Some(pc),
                Following::Lost => None,
            };
            self.close_range(hart, &mut flow, RangeEnd::Sequential, next);
            then(&mut flow);
            self.harts.insert(hart, flow);
        }
    }

    /// The end of the data: every hart's walked instructions are reported.
    fn finish(&mut self) {
        self.close_every_range(|_| {});
        self.finished = true;
    }
}

impl ElementSource for Debug4Decoder<'_> {
    type Error = FlowError;

    fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        loop {
            if let Some(element) = self.ready.pop_front() {
                return Ok(Some(element));
            }
            if self.finished {
                return Ok(None);
            }
            match self.next_located() {
                Ok(Some(located)) => self.handle(located),
                Ok(None) => self.finish(),
                Err(error) => {
                    // The message layer resumes at the next synchronisation point, where
                    // no hart's position is known.
                    self.offset = error.offset();
                    self.close_every_range(|flow| flow.following = Following::Lost);
                    self.hart = Some(0);
                    self.error = Some(FlowError::Message(error));
                    self.push(
                        0,
                        ElementKind::Gap {
                            reason: GapReason::DecodeError {
                                cause: DecodeFailure::CorruptData,
                            },
                        },
                    );
                }
            }
        }
    }

    fn gap_cause(&self) -> Option<&FlowError> {
        self.error.as_ref()
    }
}
