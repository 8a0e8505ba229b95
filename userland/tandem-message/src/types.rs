//! Records of the tandem-verification trace protocol and the parameters that size them.

pub use trace_elements::{MemoryOperation, Register};

/// Opcode bytes of chapter 2's table.
pub mod opcode {
    pub const BEGIN_GROUP: u8 = 1;
    pub const END_GROUP: u8 = 2;
    pub const INCREMENT_PC: u8 = 3;
    pub const FULL_REGISTER: u8 = 4;
    pub const INCREMENTAL_ADD: u8 = 5;
    pub const INCREMENTAL_OR: u8 = 6;
    pub const ADDITIONAL_STATE: u8 = 7;
    pub const MEMORY_REQUEST: u8 = 8;
    pub const MEMORY_RESPONSE: u8 = 9;
    pub const HART_RESET: u8 = 10;
    pub const STATE_INITIALIZATION: u8 = 11;
    pub const INSTRUCTION_16: u8 = 16;
    pub const INSTRUCTION_32: u8 = 17;
}

/// Additional-state identifiers (opcode 7), as appendix C's examples write them.
pub mod identifier {
    pub const PRIVILEGE: u8 = 1;
    pub const PHYSICAL_ADDRESS: u8 = 2;
    pub const EFFECTIVE_ADDRESS: u8 = 3;
    pub const STORE_DATA_8: u8 = 4;
    pub const STORE_DATA_16: u8 = 5;
    pub const STORE_DATA_32: u8 = 6;
    pub const STORE_DATA_64: u8 = 7;
    pub const MTIME: u8 = 8;
    pub const PC_PHYSICAL_ADDRESS: u8 = 9;
    /// The pc as the examples C.2, C.7 and C.8 write it (byte 0x10); see
    /// docs/tandem-protocol-choices.md.
    pub const PROGRAM_COUNTER: u8 = 0x10;
    /// The pc as chapter 2's table reads when its "10" is taken as decimal; accepted by the
    /// decoder with a [`crate::Note`].
    pub const PROGRAM_COUNTER_DECIMAL: u8 = 10;
}

/// Width of integer registers and CSRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Xlen {
    Bits32,
    Bits64,
}

impl Xlen {
    /// Bytes of a full integer register or pc field.
    #[must_use]
    pub const fn bytes(self) -> u8 {
        match self {
            Xlen::Bits32 => 4,
            Xlen::Bits64 => 8,
        }
    }
}

/// Width of floating-point registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flen {
    /// No F or D extension: a full floating-point register record is an error.
    None,
    Bits32,
    Bits64,
}

impl Flen {
    /// Bytes of a full floating-point register field, `None` without floating point.
    #[must_use]
    pub const fn bytes(self) -> Option<u8> {
        match self {
            Flen::None => None,
            Flen::Bits32 => Some(4),
            Flen::Bits64 => Some(8),
        }
    }
}

/// MLEN rounded up to whole bytes, as address fields are (chapter 3: "MLEN width payload
/// fields are rounded up to a multiple of 8 bits"). RV32 with Sv32 has MLEN 34: 40 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressWidth {
    Bits32,
    Bits40,
    Bits48,
    Bits56,
    Bits64,
}

impl AddressWidth {
    /// Bytes of an address field.
    #[must_use]
    pub const fn bytes(self) -> u8 {
        match self {
            AddressWidth::Bits32 => 4,
            AddressWidth::Bits40 => 5,
            AddressWidth::Bits48 => 6,
            AddressWidth::Bits56 => 7,
            AddressWidth::Bits64 => 8,
        }
    }
}

/// What the encoder and decoder agree on out of band (chapter 3: negotiation is outside
/// the protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Parameters {
    pub xlen: Xlen,
    pub flen: Flen,
    pub address_width: AddressWidth,
}

impl Default for Parameters {
    /// Appendix C's hart: RV64GC with Sv48, so XLEN=64, FLEN=64, MLEN=64.
    fn default() -> Self {
        Parameters {
            xlen: Xlen::Bits64,
            flen: Flen::Bits64,
            address_width: AddressWidth::Bits64,
        }
    }
}

impl Parameters {
    /// Parameters with the given widths.
    #[must_use]
    pub const fn new(xlen: Xlen, flen: Flen, address_width: AddressWidth) -> Self {
        Parameters {
            xlen,
            flen,
            address_width,
        }
    }

    /// Bytes of a full-register value of `register`: FLEN for floating-point registers,
    /// XLEN for the rest. Registers outside the GPR, FPR and CSR ranges (vector or
    /// implementation-defined ones) are taken as XLEN wide, the only width the protocol
    /// knows. `None` for a floating-point register without FLEN.
    #[must_use]
    pub const fn register_bytes(&self, register: Register) -> Option<u8> {
        match register {
            Register::Float(_) => self.flen.bytes(),
            Register::Csr(_) | Register::Integer(_) | Register::Other(_) => Some(self.xlen.bytes()),
        }
    }
}

/// Size field of memory requests and responses (and of store data): 2^size bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessSize {
    Bits8,
    Bits16,
    Bits32,
    Bits64,
}

impl AccessSize {
    /// The 4-bit field value.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            AccessSize::Bits8 => 0,
            AccessSize::Bits16 => 1,
            AccessSize::Bits32 => 2,
            AccessSize::Bits64 => 3,
        }
    }

    /// The size of a field value; `None` for the undefined values 4..15.
    #[must_use]
    pub const fn from_code(code: u8) -> Option<AccessSize> {
        match code {
            0 => Some(AccessSize::Bits8),
            1 => Some(AccessSize::Bits16),
            2 => Some(AccessSize::Bits32),
            3 => Some(AccessSize::Bits64),
            _ => None,
        }
    }

    /// Bytes accessed.
    #[must_use]
    pub const fn bytes(self) -> u8 {
        1 << self.code()
    }

    /// The size of an access of `bytes` bytes, `None` unless 1, 2, 4 or 8.
    #[must_use]
    pub const fn from_bytes(bytes: u8) -> Option<AccessSize> {
        match bytes {
            1 => Some(AccessSize::Bits8),
            2 => Some(AccessSize::Bits16),
            4 => Some(AccessSize::Bits32),
            8 => Some(AccessSize::Bits64),
            _ => None,
        }
    }
}

/// Result field of a memory response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryResult {
    Success,
    Failure,
}

/// The 4-bit operation field of a memory request.
#[must_use]
pub const fn operation_code(operation: MemoryOperation) -> u8 {
    match operation {
        MemoryOperation::Load => 0,
        MemoryOperation::Store => 1,
        MemoryOperation::LoadReserved => 2,
        MemoryOperation::StoreConditional => 3,
        MemoryOperation::AtomicSwap => 4,
        MemoryOperation::AtomicAdd => 5,
        MemoryOperation::AtomicXor => 6,
        MemoryOperation::AtomicAnd => 7,
        MemoryOperation::AtomicOr => 8,
        MemoryOperation::AtomicMin => 9,
        MemoryOperation::AtomicMax => 10,
        MemoryOperation::AtomicMinUnsigned => 11,
        MemoryOperation::AtomicMaxUnsigned => 12,
        MemoryOperation::InstructionFetch => 13,
    }
}

/// The operation a 4-bit field value names; `None` for 14 and 15.
#[must_use]
pub const fn operation_from_code(code: u8) -> Option<MemoryOperation> {
    Some(match code {
        0 => MemoryOperation::Load,
        1 => MemoryOperation::Store,
        2 => MemoryOperation::LoadReserved,
        3 => MemoryOperation::StoreConditional,
        4 => MemoryOperation::AtomicSwap,
        5 => MemoryOperation::AtomicAdd,
        6 => MemoryOperation::AtomicXor,
        7 => MemoryOperation::AtomicAnd,
        8 => MemoryOperation::AtomicOr,
        9 => MemoryOperation::AtomicMin,
        10 => MemoryOperation::AtomicMax,
        11 => MemoryOperation::AtomicMinUnsigned,
        12 => MemoryOperation::AtomicMaxUnsigned,
        13 => MemoryOperation::InstructionFetch,
        _ => return None,
    })
}

/// Whether a memory request of `operation` carries data: stores, SC and AMOs write it.
#[must_use]
pub const fn request_carries_data(operation: MemoryOperation) -> bool {
    !matches!(
        operation,
        MemoryOperation::Load | MemoryOperation::LoadReserved | MemoryOperation::InstructionFetch
    )
}

/// Whether the response to a request of `operation` carries data: loads, LR, AMOs and
/// instruction fetches read it; a store's or SC's response is only its result
/// (docs/tandem-protocol-choices.md).
#[must_use]
pub const fn response_carries_data(operation: MemoryOperation) -> bool {
    !matches!(
        operation,
        MemoryOperation::Store | MemoryOperation::StoreConditional
    )
}

/// Which instruction opcode carries an encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstructionLength {
    /// Opcode 16: a 16-bit (compressed) encoding.
    Bits16,
    /// Opcode 17: a 32-bit encoding.
    Bits32,
}

impl InstructionLength {
    /// Bytes the instruction occupies, what `increment pc` adds.
    #[must_use]
    pub const fn bytes(self) -> u8 {
        match self {
            InstructionLength::Bits16 => 2,
            InstructionLength::Bits32 => 4,
        }
    }
}

/// An instruction encoding as the trace carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InstructionBits {
    /// The encoding, a 16-bit one zero-extended.
    pub raw: u32,
    pub length: InstructionLength,
}

impl InstructionBits {
    /// A 32-bit encoding.
    #[must_use]
    pub const fn bits32(raw: u32) -> Self {
        InstructionBits {
            raw,
            length: InstructionLength::Bits32,
        }
    }

    /// A 16-bit encoding.
    #[must_use]
    pub const fn bits16(raw: u16) -> Self {
        InstructionBits {
            raw: raw as u32,
            length: InstructionLength::Bits16,
        }
    }
}

/// Additional state (opcode 7), by identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdditionalState {
    /// 1: privilege mode (0 U, 1 S, 3 M; the byte as traced).
    Privilege(u8),
    /// 2: physical address of the instruction's memory access.
    PhysicalAddress(u64),
    /// 3: effective address of the instruction's memory access.
    EffectiveAddress(u64),
    /// 4-7: the data the instruction stores, `size` wide.
    StoreData { size: AccessSize, value: u64 },
    /// 8: the machine timer.
    Mtime(u64),
    /// 9: physical address of the pc.
    PcPhysicalAddress(u64),
    /// 0x10: the pc after the group (docs/tandem-protocol-choices.md).
    ProgramCounter(u64),
}

/// One record: an opcode and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Record {
    BeginGroup,
    EndGroup,
    /// Add the group's instruction length to the pc.
    IncrementPc,
    FullRegister {
        register: Register,
        value: u64,
    },
    /// Add a signed offset to the register's value.
    IncrementalAdd {
        register: Register,
        offset: i8,
    },
    /// OR a mask into the register's value.
    IncrementalOr {
        register: Register,
        mask: u8,
    },
    AdditionalState(AdditionalState),
    MemoryRequest {
        address: u64,
        operation: MemoryOperation,
        size: AccessSize,
        /// Present exactly for operations that write ([`request_carries_data`]).
        data: Option<u64>,
    },
    MemoryResponse {
        size: AccessSize,
        result: MemoryResult,
        /// Present exactly when the preceding request reads ([`response_carries_data`]).
        data: Option<u64>,
    },
    HartReset,
    StateInitialization,
    Instruction(InstructionBits),
}

impl Record {
    /// The record's opcode byte (16 or 17 for instructions, by their length).
    #[must_use]
    pub const fn opcode(&self) -> u8 {
        match self {
            Record::BeginGroup => opcode::BEGIN_GROUP,
            Record::EndGroup => opcode::END_GROUP,
            Record::IncrementPc => opcode::INCREMENT_PC,
            Record::FullRegister { .. } => opcode::FULL_REGISTER,
            Record::IncrementalAdd { .. } => opcode::INCREMENTAL_ADD,
            Record::IncrementalOr { .. } => opcode::INCREMENTAL_OR,
            Record::AdditionalState(_) => opcode::ADDITIONAL_STATE,
            Record::MemoryRequest { .. } => opcode::MEMORY_REQUEST,
            Record::MemoryResponse { .. } => opcode::MEMORY_RESPONSE,
            Record::HartReset => opcode::HART_RESET,
            Record::StateInitialization => opcode::STATE_INITIALIZATION,
            Record::Instruction(InstructionBits {
                length: InstructionLength::Bits16,
                ..
            }) => opcode::INSTRUCTION_16,
            Record::Instruction(InstructionBits {
                length: InstructionLength::Bits32,
                ..
            }) => opcode::INSTRUCTION_32,
        }
    }
}

/// Something the decoder accepted that the protocol's own text does not allow; reported so
/// that nothing is taken silently (docs/tandem-protocol-choices.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Note {
    /// Opcode 16 whose halfword starts a 32-bit encoding (low bits 0b11), read as the 32-bit
    /// instruction: appendix C.5's erratum.
    ThirtyTwoBitInstructionUnderOpcode16,
    /// Additional-state identifier 10 (0x0a) read as the pc: chapter 2's table taken as
    /// decimal.
    DecimalProgramCounterIdentifier,
}

/// A decoded record and where it lies in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocatedRecord {
    /// Byte offset of the opcode.
    pub offset: u64,
    /// Bytes of opcode and payload.
    pub length: u8,
    pub record: Record,
    /// Set when the record was read through one of the decoder's tolerances.
    pub note: Option<Note>,
}

impl LocatedRecord {
    /// Offset just past the record.
    #[must_use]
    pub fn end_offset(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.length))
    }
}
