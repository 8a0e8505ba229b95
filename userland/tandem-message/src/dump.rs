//! One line of text per record, for `rvperf decode --output messages`.

use core::fmt::{self, Write};

use riscv_insn::{decode, float_register_name, integer_register_name, DecodeOptions};

use crate::types::{
    AdditionalState, InstructionLength, LocatedRecord, MemoryOperation, MemoryResult, Note,
    Parameters, Record, Register, Xlen,
};

/// Names of the CSRs a tandem trace commonly carries; others print as `csr 0x...`.
#[must_use]
pub fn csr_name(address: u16) -> Option<&'static str> {
    Some(match address {
        0x001 => "fflags",
        0x002 => "frm",
        0x003 => "fcsr",
        0xc00 => "cycle",
        0xc01 => "time",
        0xc02 => "instret",
        0x100 => "sstatus",
        0x104 => "sie",
        0x105 => "stvec",
        0x106 => "scounteren",
        0x140 => "sscratch",
        0x141 => "sepc",
        0x142 => "scause",
        0x143 => "stval",
        0x144 => "sip",
        0x180 => "satp",
        0x300 => "mstatus",
        0x301 => "misa",
        0x302 => "medeleg",
        0x303 => "mideleg",
        0x304 => "mie",
        0x305 => "mtvec",
        0x306 => "mcounteren",
        0x340 => "mscratch",
        0x341 => "mepc",
        0x342 => "mcause",
        0x343 => "mtval",
        0x344 => "mip",
        0x7b0 => "dcsr",
        0x7b1 => "dpc",
        0xb00 => "mcycle",
        0xb02 => "minstret",
        0xf11 => "mvendorid",
        0xf12 => "marchid",
        0xf13 => "mimpid",
        0xf14 => "mhartid",
        _ => return None,
    })
}

/// A register by its ABI or CSR name.
#[derive(Clone, Copy, Debug)]
pub struct RegisterName(pub Register);

impl fmt::Display for RegisterName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Register::Integer(index) => formatter.write_str(integer_register_name(index)),
            Register::Float(index) => formatter.write_str(float_register_name(index)),
            Register::Csr(address) => match csr_name(address) {
                Some(name) => formatter.write_str(name),
                None => write!(formatter, "csr {address:#05x}"),
            },
            Register::Other(number) => write!(formatter, "register {number:#06x}"),
        }
    }
}

fn operation_name(operation: MemoryOperation) -> &'static str {
    match operation {
        MemoryOperation::Load => "load",
        MemoryOperation::Store => "store",
        MemoryOperation::LoadReserved => "lr",
        MemoryOperation::StoreConditional => "sc",
        MemoryOperation::AtomicSwap => "amoswap",
        MemoryOperation::AtomicAdd => "amoadd",
        MemoryOperation::AtomicXor => "amoxor",
        MemoryOperation::AtomicAnd => "amoand",
        MemoryOperation::AtomicOr => "amoor",
        MemoryOperation::AtomicMin => "amomin",
        MemoryOperation::AtomicMax => "amomax",
        MemoryOperation::AtomicMinUnsigned => "amominu",
        MemoryOperation::AtomicMaxUnsigned => "amomaxu",
        MemoryOperation::InstructionFetch => "fetch",
    }
}

/// Writes one line (without the newline) describing `record`: offset, opcode name and
/// payload, with registers by name and instructions disassembled.
///
/// # Errors
///
/// Only those of `out`.
pub fn dump_record(
    record: &LocatedRecord,
    parameters: Parameters,
    out: &mut impl Write,
) -> fmt::Result {
    write!(out, "{:#010x}: ", record.offset)?;
    match record.record {
        Record::BeginGroup => out.write_str("begin group")?,
        Record::EndGroup => out.write_str("end group")?,
        Record::IncrementPc => out.write_str("increment pc")?,
        Record::HartReset => out.write_str("hart reset")?,
        Record::StateInitialization => out.write_str("state initialization")?,
        Record::FullRegister { register, value } => {
            write!(out, "full register {} = {value:#x}", RegisterName(register))?;
        }
        Record::IncrementalAdd { register, offset } => {
            write!(
                out,
                "incremental register {} += {offset}",
                RegisterName(register)
            )?;
        }
        Record::IncrementalOr { register, mask } => {
            write!(
                out,
                "incremental register {} |= {mask:#04x}",
                RegisterName(register)
            )?;
        }
        Record::AdditionalState(state) => match state {
            AdditionalState::Privilege(mode) => write!(out, "privilege {mode}")?,
            AdditionalState::PhysicalAddress(address) => {
                write!(out, "physical address {address:#x}")?;
            }
            AdditionalState::EffectiveAddress(address) => {
                write!(out, "effective address {address:#x}")?;
            }
            AdditionalState::StoreData { size, value } => {
                write!(out, "store data {}B {value:#x}", size.bytes())?;
            }
            AdditionalState::Mtime(time) => write!(out, "mtime {time}")?,
            AdditionalState::PcPhysicalAddress(address) => {
                write!(out, "pc physical address {address:#x}")?;
            }
            AdditionalState::ProgramCounter(pc) => write!(out, "pc {pc:#x}")?,
        },
        Record::MemoryRequest {
            address,
            operation,
            size,
            data,
        } => {
            write!(
                out,
                "memory request {} {}B at {address:#x}",
                operation_name(operation),
                size.bytes()
            )?;
            if let Some(data) = data {
                write!(out, " data {data:#x}")?;
            }
        }
        Record::MemoryResponse { size, result, data } => {
            let result = match result {
                MemoryResult::Success => "success",
                MemoryResult::Failure => "failure",
            };
            write!(out, "memory response {result} {}B", size.bytes())?;
            if let Some(data) = data {
                write!(out, " data {data:#x}")?;
            }
        }
        Record::Instruction(bits) => {
            let xlen = match parameters.xlen {
                Xlen::Bits32 => riscv_insn::Xlen::Rv32,
                Xlen::Bits64 => riscv_insn::Xlen::Rv64,
            };
            match bits.length {
                InstructionLength::Bits16 => write!(out, "instruction 16 {:04x}", bits.raw)?,
                InstructionLength::Bits32 => write!(out, "instruction 32 {:08x}", bits.raw)?,
            }
            if let Ok(instruction) = decode(bits.raw, DecodeOptions::new(xlen)) {
                write!(out, " {instruction}")?;
            }
        }
    }
    match record.note {
        Some(Note::ThirtyTwoBitInstructionUnderOpcode16) => {
            out.write_str(" (note: 32-bit instruction under opcode 16)")
        }
        Some(Note::DecimalProgramCounterIdentifier) => {
            out.write_str(" (note: pc under identifier 0x0a)")
        }
        None => Ok(()),
    }
}
