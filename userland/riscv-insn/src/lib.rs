//! RISC-V instruction decoding for trace reconstruction.
//!
//! A trace decoder (N-Trace, E-Trace) only receives messages at discontinuities, so it has to
//! walk the program image and decode every instruction in between to learn where control can
//! leave the straight line. This crate answers exactly that for one instruction at a time:
//! its length, its [`ControlFlow`] class (with the PC-relative offset when there is one), its
//! [`Mnemonic`] and the ingress-port [`Itype`] it would be reported with.
//!
//! [`decode`] is on the decoder's hot path: it does no allocation, cannot panic, and is a couple
//! of table-like `match`es on the opcode bits.
//!
//! ```
//! use riscv_insn::{decode, ControlFlow, DecodeOptions, Itype, Mnemonic, Xlen};
//!
//! // `jal ra, -16` at 0x8000_0010
//! let instruction = decode(0xff1f_f0ef, DecodeOptions::default()).unwrap();
//! assert_eq!(instruction.mnemonic, Mnemonic::Jal);
//! assert_eq!(instruction.length, 4);
//! assert_eq!(instruction.control_flow, ControlFlow::Jump { rd: 1, offset: -16 });
//! assert_eq!(instruction.itype(false), Itype::InferableCall);
//! assert_eq!(instruction.direct_target(0x8000_0010, Xlen::Rv64), Some(0x8000_0000));
//! assert_eq!(instruction.to_string(), "jal ra,.-16");
//! ```

#![forbid(unsafe_code)]
#![no_std]

#[cfg(test)]
extern crate std;

mod decode16;
mod decode32;
mod display;
mod fields;
mod memory;
mod mnemonic;

pub use display::{float_register_name, integer_register_name};
pub use memory::{AccessOperation, AmoOperation, Extension, MemoryAccessShape, RegisterOperand};

/// Compiles and runs the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;
pub use mnemonic::Mnemonic;

/// Base integer register width, which changes the meaning of several compressed encodings
/// (`c.jal`/`c.addiw`, `c.flw`/`c.ld`, ...) and the validity of RV64-only instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Xlen {
    Rv32,
    Rv64,
}

impl Xlen {
    /// Truncates an address to this register width.
    #[inline]
    #[must_use]
    pub const fn truncate(self, address: u64) -> u64 {
        match self {
            Xlen::Rv32 => address & 0xffff_ffff,
            Xlen::Rv64 => address,
        }
    }
}

/// Which optional encodings are enabled. Zcmp/Zcmt reuse the encoding space of c.fsdsp/c.fldsp (Zcd),
/// so they must be chosen explicitly (from the ELF's arch attribute by the caller).
///
/// When either `zcmp` or `zcmt` is set the Zcd encodings (`c.fld`, `c.fsd`, `c.fldsp`,
/// `c.fsdsp`) decode as [`Mnemonic::Unknown`], because the specification makes the extensions
/// mutually exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeOptions {
    pub xlen: Xlen,
    pub zcmp: bool,
    pub zcmt: bool,
}

impl Default for DecodeOptions {
    /// RV64 with the standard C extension (Zcd), i.e. what `rv64gc` code needs.
    fn default() -> Self {
        DecodeOptions {
            xlen: Xlen::Rv64,
            zcmp: false,
            zcmt: false,
        }
    }
}

impl DecodeOptions {
    /// Options for the given XLEN without Zcmp/Zcmt.
    #[must_use]
    pub const fn new(xlen: Xlen) -> Self {
        DecodeOptions {
            xlen,
            zcmp: false,
            zcmt: false,
        }
    }
}

/// Instruction length as given by the standard variable-length encoding scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstructionLength {
    Bits16,
    Bits32,
    Bits48,
    Bits64,
    /// 80-bit and longer encodings; the specification leaves their layout unratified, so a
    /// decoder cannot know where the next instruction starts.
    Reserved,
}

impl InstructionLength {
    /// Length in bytes, `None` for [`InstructionLength::Reserved`].
    #[inline]
    #[must_use]
    pub const fn bytes(self) -> Option<u8> {
        match self {
            InstructionLength::Bits16 => Some(2),
            InstructionLength::Bits32 => Some(4),
            InstructionLength::Bits48 => Some(6),
            InstructionLength::Bits64 => Some(8),
            InstructionLength::Reserved => None,
        }
    }
}

/// Length of the instruction whose first (lowest-addressed) halfword is `first_halfword`.
///
/// Looks at bits \[1:0\], \[4:2\], \[6:5\] and \[14:12\] as the unprivileged spec's
/// "Expanded Instruction-Length Encoding" figure describes; everything of 80 bits or more is
/// [`InstructionLength::Reserved`].
#[inline]
#[must_use]
pub const fn instruction_length(first_halfword: u16) -> InstructionLength {
    if first_halfword & 0b11 != 0b11 {
        InstructionLength::Bits16
    } else if first_halfword & 0b1_1100 != 0b1_1100 {
        InstructionLength::Bits32
    } else if first_halfword & 0b10_0000 == 0 {
        InstructionLength::Bits48
    } else if first_halfword & 0b100_0000 == 0 {
        InstructionLength::Bits64
    } else {
        InstructionLength::Reserved
    }
}

/// Only control-flow behaviour matters to trace decoding; everything else is Sequential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlFlow {
    Sequential,
    /// beq..bgeu, c.beqz, c.bnez (conditional, PC-relative)
    Branch {
        offset: i32,
    },
    /// jal, c.j (rd=0), c.jal (RV32 only, rd=1)
    Jump {
        rd: u8,
        offset: i32,
    },
    /// jalr, c.jr (rd=0), c.jalr (rd=1)
    JumpRegister {
        rd: u8,
        rs1: u8,
        offset: i32,
    },
    /// Zcmt cm.jt (index<32) / cm.jalt (index>=32, links ra)
    TableJump {
        index: u8,
    },
    /// Zcmp cm.popret / cm.popretz: return through ra
    PopReturn,
    /// ecall, ebreak, c.ebreak
    EnvironmentTrap,
    /// mret, sret, mnret, dret, uret
    TrapReturn,
}

/// The 4-bit itype of the N-Trace/E-Trace ingress port (N-Trace spec Table 2), values are the spec's numbers.
///
/// Variant names follow the E-Trace specification; the N-Trace names are given in each
/// variant's documentation.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Itype {
    /// "No special type".
    None = 0,
    Exception = 1,
    Interrupt = 2,
    /// "Trap return" (exception or interrupt return).
    TrapReturn = 3,
    NotTakenBranch = 4,
    TakenBranch = 5,
    /// "Indirect jump (with or without linkage)": only produced by a 3-bit itype port.
    UninferableJump = 6,
    /// "Indirect call".
    UninferableCall = 8,
    /// "Direct call".
    InferableCall = 9,
    /// "Indirect jump (without linkage)".
    UninferableTailCall = 10,
    /// "Direct jump (without linkage)".
    InferableTailCall = 11,
    /// "Co-routine swap".
    CoroutineSwap = 12,
    /// "Function return".
    Return = 13,
    /// "Other indirect jump (with linkage)".
    OtherUninferableJump = 14,
    /// "Other direct jump (with linkage)".
    OtherInferableJump = 15,
}

impl Itype {
    /// Decodes the numeric value found on an ingress port or in a trace file; 7 and values
    /// above 15 are not itypes.
    #[must_use]
    pub const fn from_u8(value: u8) -> Option<Itype> {
        Some(match value {
            0 => Itype::None,
            1 => Itype::Exception,
            2 => Itype::Interrupt,
            3 => Itype::TrapReturn,
            4 => Itype::NotTakenBranch,
            5 => Itype::TakenBranch,
            6 => Itype::UninferableJump,
            8 => Itype::UninferableCall,
            9 => Itype::InferableCall,
            10 => Itype::UninferableTailCall,
            11 => Itype::InferableTailCall,
            12 => Itype::CoroutineSwap,
            13 => Itype::Return,
            14 => Itype::OtherUninferableJump,
            15 => Itype::OtherInferableJump,
            _ => return None,
        })
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Instruction {
    /// The encoding: 16-bit instructions zero-extended, for 48/64-bit ones only the first 32 bits.
    pub raw: u32,
    /// Length in bytes (2, 4, 6 or 8).
    pub length: u8,
    pub control_flow: ControlFlow,
    pub mnemonic: Mnemonic,
    /// The XLEN the instruction was decoded for; Zcmp stack adjustments depend on it.
    pub xlen: Xlen,
}

/// Why [`decode`] could not determine an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// The length encoding announces an instruction of 80 bits or more, whose format is not
    /// ratified: the decoder cannot know where the next instruction starts.
    ReservedLength,
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::ReservedLength => formatter
                .write_str("instruction uses a reserved (80-bit or longer) length encoding"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// Decodes the instruction whose first bytes are `raw`.
///
/// `raw` holds at least the first 32 bits at the PC (little-endian; for a 16-bit instruction only
/// the low half is looked at). Unknown encodings decode as [`ControlFlow::Sequential`] with
/// [`Mnemonic::Unknown`]; 48/64-bit instructions as Sequential `Unknown` with their length; the
/// all-zero halfword (defined illegal) as [`Mnemonic::Illegal`], Sequential, length 2.
///
/// # Errors
///
/// [`DecodeError::ReservedLength`] for 80-bit and longer length encodings.
#[inline]
pub fn decode(raw: u32, options: DecodeOptions) -> Result<Instruction, DecodeError> {
    if raw & 0b11 != 0b11 {
        return Ok(decode16::decode_compressed(raw as u16, options));
    }
    if raw & 0b1_1100 != 0b1_1100 {
        return Ok(decode32::decode_standard(raw, options.xlen));
    }
    let length = match instruction_length(raw as u16).bytes() {
        Some(length) => length,
        None => return Err(DecodeError::ReservedLength),
    };
    Ok(Instruction {
        raw,
        length,
        control_flow: ControlFlow::Sequential,
        mnemonic: Mnemonic::Unknown,
        xlen: options.xlen,
    })
}

/// Whether `register` is one the ISA designates as a link register (x1/ra or x5/t0), which is
/// what return-address-stack hints and the itype rules are keyed on.
#[inline]
#[must_use]
pub const fn is_link_register(register: u8) -> bool {
    register == 1 || register == 5
}

impl Instruction {
    /// The 4-bit ingress-port itype this instruction is reported with when it ends a block, per the
    /// "Generating itype for different instructions" table of the N-Trace specification
    /// (identical to E-Trace section 4.1.1). `taken` only matters for branches.
    #[must_use]
    pub fn itype(&self, taken: bool) -> Itype {
        match self.control_flow {
            ControlFlow::Sequential => Itype::None,
            ControlFlow::Branch { .. } => branch_itype(taken),
            // N-Trace rc7 Table 2 (the spec rvperf follows) gives `jal x0`/`c.j` 15 and
            // `jr`/`c.jr` through a non-link register 14: a hart cannot tell tail calls
            // (E-Trace's 10/11) from other jumps. See docs/ntrace-errata.md.
            ControlFlow::Jump { rd, .. } => {
                if is_link_register(rd) {
                    Itype::InferableCall
                } else {
                    Itype::OtherInferableJump
                }
            }
            ControlFlow::JumpRegister { rd, rs1, .. } => {
                match (is_link_register(rd), is_link_register(rs1)) {
                    (true, false) => Itype::UninferableCall,
                    // `jalr ra, 0(ra)` pushes what it pops from the same register, so it is a
                    // call; only a swap between the two link registers is a co-routine switch.
                    (true, true) if rd == rs1 => Itype::UninferableCall,
                    (true, true) => Itype::CoroutineSwap,
                    (false, true) => Itype::Return,
                    (false, false) => Itype::OtherUninferableJump,
                }
            }
            // Table 2: cm.jalt is an inferable call, cm.jt has no special type (the
            // decoder reads the jump table, so both are inferable).
            ControlFlow::TableJump { index } => {
                if index >= 32 {
                    Itype::InferableCall
                } else {
                    Itype::None
                }
            }
            ControlFlow::PopReturn => Itype::Return,
            ControlFlow::EnvironmentTrap => Itype::Exception,
            ControlFlow::TrapReturn => Itype::TrapReturn,
        }
    }

    /// The itype a 3-bit ingress port reports, i.e. without implicit-return optimisation:
    /// direct jumps and calls are not special, every indirect one is
    /// [`Itype::UninferableJump`].
    #[must_use]
    pub fn itype_3bit(&self, taken: bool) -> Itype {
        match self.control_flow {
            ControlFlow::Sequential | ControlFlow::Jump { .. } | ControlFlow::TableJump { .. } => {
                Itype::None
            }
            ControlFlow::Branch { .. } => branch_itype(taken),
            ControlFlow::JumpRegister { .. } | ControlFlow::PopReturn => Itype::UninferableJump,
            ControlFlow::EnvironmentTrap => Itype::Exception,
            ControlFlow::TrapReturn => Itype::TrapReturn,
        }
    }

    /// Target of a branch or direct jump at `pc` (wrapping, truncated to 32 bits on RV32);
    /// `None` for everything whose target is not encoded in the instruction.
    #[inline]
    #[must_use]
    pub fn direct_target(&self, pc: u64, xlen: Xlen) -> Option<u64> {
        match self.control_flow {
            ControlFlow::Branch { offset } | ControlFlow::Jump { offset, .. } => {
                Some(xlen.truncate(pc.wrapping_add(offset as i64 as u64)))
            }
            _ => None,
        }
    }

    /// Address of the next instruction in memory (`pc + length`, truncated on RV32).
    #[inline]
    #[must_use]
    pub fn next_pc(&self, pc: u64, xlen: Xlen) -> u64 {
        xlen.truncate(pc.wrapping_add(u64::from(self.length)))
    }

    /// For `lui`, `c.lui` and `auipc` with a destination other than x0: the register and the
    /// value written to it, as needed for N-Trace "sequential jump" inference (an
    /// `auipc`/`lui` followed by a `jalr` through the same register has a known target).
    #[must_use]
    pub fn constant_load(&self, pc: u64, xlen: Xlen) -> Option<(u8, u64)> {
        let (destination, value) = match self.mnemonic {
            Mnemonic::Lui => (
                fields::rd(self.raw),
                fields::u_immediate(self.raw) as i64 as u64,
            ),
            Mnemonic::Auipc => (
                fields::rd(self.raw),
                pc.wrapping_add(fields::u_immediate(self.raw) as i64 as u64),
            ),
            Mnemonic::CLui => (
                fields::rd(self.raw),
                fields::c_lui_immediate(self.raw) as i64 as u64,
            ),
            _ => return None,
        };
        if destination == 0 {
            return None;
        }
        Some((destination, xlen.truncate(value)))
    }

    /// Whether the instruction writes a return address to x1 or x5, i.e. is a call (or a
    /// co-routine swap) that pushes onto a return-address stack.
    #[must_use]
    pub fn links(&self) -> bool {
        match self.control_flow {
            ControlFlow::Jump { rd, .. } | ControlFlow::JumpRegister { rd, .. } => {
                is_link_register(rd)
            }
            ControlFlow::TableJump { index } => index >= 32,
            _ => false,
        }
    }
}

#[inline]
const fn branch_itype(taken: bool) -> Itype {
    if taken {
        Itype::TakenBranch
    } else {
        Itype::NotTakenBranch
    }
}
