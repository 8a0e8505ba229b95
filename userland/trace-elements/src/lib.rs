//! Protocol-free trace elements.
//!
//! Every rvperf trace decoder (N-Trace today, CTR branch records and other formats later)
//! reports what the traced hart did with these types, so flame graphs, AutoFDO writers and
//! the CLI never need to know which protocol the data came from. The design follows
//! OpenCSD's generic trace elements: an instruction range is the unit both profilers want.

#![forbid(unsafe_code)]

/// How control left the last instruction of an [`InstructionRange`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RangeEnd {
    /// The range stopped without a control transfer: the trace said so (an exception before
    /// the next instruction, trace off, a sync point) or the block reached its size limit.
    Sequential,
    /// A conditional branch that was taken.
    BranchTaken,
    /// A conditional branch that was not taken; execution continued at the next instruction.
    BranchNotTaken,
    /// A direct jump (`jal`, `c.j`) that does not link.
    Jump,
    /// A direct call (`jal ra`, `c.jal`, `cm.jalt`).
    Call,
    /// An indirect call (`jalr ra, rs1`, `c.jalr`).
    IndirectCall,
    /// A function return (`ret`, `c.jr ra`, `cm.popret`).
    Return,
    /// A co-routine swap (`jalr x1, x5` style), both a return and a call.
    CoroutineSwap,
    /// Any other indirect jump (switch tables, tail calls through registers, `cm.jt`).
    IndirectJump,
    /// `mret`/`sret` and similar returns from a trap handler.
    TrapReturn,
    /// `ecall`/`ebreak`: the instruction retired and a trap followed.
    EnvironmentCall,
}

impl RangeEnd {
    /// Whether the range left its last instruction by a taken control transfer of its
    /// own: what a branch-stack sampler records and a profile counts as a branch. Not a
    /// fall-through, and not `ecall`: the trap it raises is its own element (in a trace
    /// of user code alone, execution just goes on after it).
    pub fn is_taken_transfer(self) -> bool {
        match self {
            RangeEnd::BranchTaken
            | RangeEnd::Jump
            | RangeEnd::Call
            | RangeEnd::IndirectCall
            | RangeEnd::Return
            | RangeEnd::CoroutineSwap
            | RangeEnd::IndirectJump
            | RangeEnd::TrapReturn => true,
            RangeEnd::Sequential | RangeEnd::BranchNotTaken | RangeEnd::EnvironmentCall => false,
        }
    }
}

/// Why the trace (re)started at a known address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceOnReason {
    /// First synchronisation point seen in the stream (decoding starts here).
    Start,
    /// Trace restarted after a gap (overflow, trace disabled, debug mode, reset...).
    Restart,
    /// A protocol-specific synchronisation code, for reporting.
    Other(u8),
}

/// Why the trace stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceOffReason {
    DebugMode,
    LowPower,
    Disabled,
    Other(u8),
}

/// What kind of trap moved execution to a handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrapKind {
    Exception,
    Interrupt,
    /// The trace does not tell exceptions from interrupts.
    ExceptionOrInterrupt,
}

/// Which execution context an id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    /// The OS's id of the running process (RISC-V `scontext`).
    Process(u64),
    /// The hypervisor's id of the running virtual machine (RISC-V `hcontext`).
    VirtualMachine(u64),
}

/// Why some execution is missing from the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GapReason {
    /// The encoder reported lost messages (N-Trace Error message: ETYPE and ECODE).
    EncoderOverflow { error_type: u8, error_code: u64 },
    /// The decoder could not follow the trace at the element's offset and skipped to the
    /// next synchronisation point.
    DecodeError { cause: DecodeFailure },
}

/// Why a decoder could not follow the trace, in terms every protocol shares (the decoder's
/// own error type says more).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeFailure {
    /// The bytes at the offset are not a valid message: corrupt, or cut short.
    CorruptData,
    /// The trace leads to `address`, where the code gives no instruction (outside every
    /// file, undecodable, or misaligned).
    NoCode { address: u64 },
    /// The trace disagrees with the code or with itself: instruction counts, branch
    /// outcomes, reported addresses, the return stack, counters that overflow.
    Inconsistent,
}

/// A register as the RISC-V debug specification numbers them (its "Abstract Command"
/// register numbers), the one space the tandem-verification protocol also uses: CSRs at
/// 0x0000-0x0fff, integer registers at 0x1000-0x101f, floating-point registers at
/// 0x1020-0x103f.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Register {
    /// A control and status register, by its 12-bit CSR address.
    Csr(u16),
    /// `x0`..`x31`.
    Integer(u8),
    /// `f0`..`f31`.
    Float(u8),
    /// Any other number of the debug specification's space (vector registers,
    /// implementation-defined ones).
    Other(u16),
}

impl Register {
    /// The register the debug specification's number names.
    #[must_use]
    pub const fn from_debug_number(number: u16) -> Register {
        match number {
            0x0000..=0x0fff => Register::Csr(number),
            0x1000..=0x101f => Register::Integer((number - 0x1000) as u8),
            0x1020..=0x103f => Register::Float((number - 0x1020) as u8),
            _ => Register::Other(number),
        }
    }

    /// The debug specification's number of the register.
    #[must_use]
    pub const fn debug_number(self) -> u16 {
        match self {
            Register::Csr(address) => address & 0x0fff,
            Register::Integer(index) => 0x1000 + (index & 31) as u16,
            Register::Float(index) => 0x1020 + (index & 31) as u16,
            Register::Other(number) => number,
        }
    }
}

/// What a memory access did, as the tandem protocol's memory request names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryOperation {
    Load,
    Store,
    LoadReserved,
    StoreConditional,
    AtomicSwap,
    AtomicAdd,
    AtomicXor,
    AtomicAnd,
    AtomicOr,
    AtomicMin,
    AtomicMax,
    AtomicMinUnsigned,
    AtomicMaxUnsigned,
    InstructionFetch,
}

/// Which address a memory access element carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressKind {
    /// The address the instruction computed (virtual when translation is on).
    Effective,
    /// The address on the system bus.
    Physical,
}

/// One thing the traced hart did, in execution order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementKind {
    /// Decoding is synchronised: execution continues at `address`.
    TraceOn { address: u64, reason: TraceOnReason },
    /// `instructions` retired instructions from `start` to `last` (the address of the last
    /// one) with no control transfer in between except possibly at `last`; the next
    /// instruction executed is at `next` (unknown only when the trace stops there).
    InstructionRange {
        start: u64,
        last: u64,
        instructions: u32,
        end: RangeEnd,
        next: Option<u64>,
    },
    /// A trap: the instruction at `from` did not retire (or, for `ecall`, it retired and
    /// trapped); execution continues at `handler`.
    Trap {
        from: Option<u64>,
        handler: u64,
        kind: TrapKind,
    },
    /// Privilege mode or context (process/VM id) changed.
    ContextChange {
        /// Privilege level as the ISA encodes it: 0 U, 1 S, 3 M.
        privilege: u8,
        /// Running in a virtual machine (VU/VS).
        virtualized: bool,
        context: Option<Context>,
    },
    /// The time of the preceding elements, in trace timestamp units.
    Timestamp { time: u64 },
    /// Trace stopped after `last_address` (if known).
    TraceOff {
        last_address: Option<u64>,
        reason: TraceOffReason,
    },
    /// Execution between the previous and the next element is missing.
    Gap { reason: GapReason },
    /// The last instruction of the preceding [`ElementKind::InstructionRange`] left
    /// `value` in `register` (formats that trace data: the tandem protocol). Decoders
    /// that report these end a range at every instruction that writes state, so the
    /// element always belongs to the range's last instruction.
    RegisterWrite { register: Register, value: u64 },
    /// The last instruction of the preceding [`ElementKind::InstructionRange`] accessed
    /// memory: what the trace says of it (the debug trace module's load and store
    /// sequences, the tandem protocol's memory records).
    MemoryAccess {
        operation: MemoryOperation,
        address: Option<u64>,
        address_kind: AddressKind,
        /// Bytes accessed, when the trace says.
        size: Option<u8>,
        /// The data loaded or stored, when the trace says.
        data: Option<u64>,
    },
    /// A message the decoder does not interpret (vendor-defined or reserved); surfaced, not dropped.
    Unhandled {
        /// The protocol's message code (for N-Trace, the TCODE).
        code: u8,
    },
}

/// A trace element with where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceElement {
    /// Hardware thread (N-Trace SRC) the element belongs to.
    pub hart: u16,
    /// Byte offset in the trace of the message that produced the element.
    pub offset: u64,
    pub kind: ElementKind,
}

/// A decoder as its consumers see it: elements in execution order, pulled one at a
/// time; `Ok(None)` at the end of the trace. Profiles are built over this, so any
/// protocol's decoder (serial or parallel) feeds them.
pub trait ElementSource {
    type Error: std::error::Error + Send + Sync + 'static;

    fn next_element(&mut self) -> Result<Option<TraceElement>, Self::Error>;

    /// The error behind the [`GapReason::DecodeError`] gap [`Self::next_element`]
    /// returned last, when the source keeps it.
    fn gap_cause(&self) -> Option<&Self::Error> {
        None
    }

    /// Calls `visit` with every element to the end of the trace, in order, and with the
    /// error behind each decode-error gap ([`Self::gap_cause`]); stops at the first
    /// error [`Self::next_element`] would return. The same as a loop over
    /// `next_element`, which is what it does unless the source hands over the elements
    /// it produced in batches in place (a consumer of every element then pays no copy
    /// per element through `next_element`'s return value).
    fn for_each_element<F>(&mut self, mut visit: F) -> Result<(), Self::Error>
    where
        Self: Sized,
        F: FnMut(&TraceElement, Option<&Self::Error>),
    {
        while let Some(element) = self.next_element()? {
            let cause = match element.kind {
                ElementKind::Gap {
                    reason: GapReason::DecodeError { .. },
                } => self.gap_cause(),
                _ => None,
            };
            visit(&element, cause);
        }
        Ok(())
    }
}
