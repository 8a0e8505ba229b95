//! What an instruction does to memory and which register it writes, from its encoding alone.
//!
//! A tandem-verification trace encoder that only sees architectural state before and after
//! each instruction (an emulator log) needs both: the destination register so that a write
//! of an unchanged value is still reported, and the memory access so that its address and
//! data can be traced. Both are derived from the operand fields, as `display.rs` prints them.

use crate::fields::{
    c_doubleword_offset, c_ldsp_offset, c_lwsp_offset, c_rd, c_rs1_prime, c_rs2, c_rs2_prime,
    c_sdsp_offset, c_swsp_offset, c_word_offset, i_immediate, rd, rs1, rs2, s_immediate,
};
use crate::{Instruction, Mnemonic};

/// A register an instruction names as an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegisterOperand {
    /// `x0`..`x31`.
    Integer(u8),
    /// `f0`..`f31`.
    Float(u8),
}

/// The read-modify-write an atomic memory operation performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AmoOperation {
    Swap,
    Add,
    Xor,
    And,
    Or,
    Min,
    Max,
    MinUnsigned,
    MaxUnsigned,
}

/// What an instruction asks of memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessOperation {
    Load,
    Store,
    /// `lr.w`/`lr.d`.
    LoadReserved,
    /// `sc.w`/`sc.d`: a store that may fail, writing 0 (success) or non-zero to rd.
    StoreConditional,
    /// `amo*.w`/`amo*.d`: load, combine with rs2, store.
    Amo(AmoOperation),
}

/// How loaded bytes fill the rest of the destination register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extension {
    /// Sign-extended to XLEN (`lb`, `lh`, `lw` on RV64, LR/AMO words on RV64).
    Sign,
    /// Zero-extended (`lbu`, `lhu`, `lwu`), or the access fills the register (`ld`, `fld`),
    /// or nothing is loaded (stores).
    Zero,
    /// A single-precision value NaN-boxed into a wider floating-point register (`flw`).
    NanBox,
}

/// The one memory access of a load, store, LR, SC or AMO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryAccessShape {
    pub operation: AccessOperation,
    /// Bytes accessed: 1, 2, 4 or 8.
    pub size_bytes: u8,
    /// The integer register holding the base address (rs1; `sp` for the stack-relative
    /// compressed forms).
    pub base: u8,
    /// Added to the base register's value to form the effective address.
    pub offset: i32,
    /// The register whose value is stored (stores, SC, AMOs: rs2).
    pub data: Option<RegisterOperand>,
    /// The register that receives the loaded value (loads, LR, AMOs) or the SC result;
    /// `None` when it is `x0`.
    pub destination: Option<RegisterOperand>,
    pub extension: Extension,
}

/// An integer destination, `None` for `x0` (writes to it are discarded).
const fn integer(register: u8) -> Option<RegisterOperand> {
    if register == 0 {
        None
    } else {
        Some(RegisterOperand::Integer(register))
    }
}

const fn float(register: u8) -> Option<RegisterOperand> {
    Some(RegisterOperand::Float(register))
}

/// Shape of the standard I-type loads (`lb`..`ld`, `fld`, hypervisor loads use 0 offset).
fn load(
    raw: u32,
    size_bytes: u8,
    extension: Extension,
    float_destination: bool,
) -> MemoryAccessShape {
    MemoryAccessShape {
        operation: AccessOperation::Load,
        size_bytes,
        base: rs1(raw),
        offset: i_immediate(raw),
        data: None,
        destination: if float_destination {
            float(rd(raw))
        } else {
            integer(rd(raw))
        },
        extension,
    }
}

fn store(raw: u32, size_bytes: u8, float_data: bool) -> MemoryAccessShape {
    MemoryAccessShape {
        operation: AccessOperation::Store,
        size_bytes,
        base: rs1(raw),
        offset: s_immediate(raw),
        data: Some(if float_data {
            RegisterOperand::Float(rs2(raw))
        } else {
            RegisterOperand::Integer(rs2(raw))
        }),
        destination: None,
        extension: Extension::Zero,
    }
}

/// LR, SC and AMOs: no offset, sign-extended words on RV64.
fn atomic(raw: u32, operation: AccessOperation, size_bytes: u8) -> MemoryAccessShape {
    MemoryAccessShape {
        operation,
        size_bytes,
        base: rs1(raw),
        offset: 0,
        data: match operation {
            AccessOperation::LoadReserved => None,
            _ => Some(RegisterOperand::Integer(rs2(raw))),
        },
        destination: integer(rd(raw)),
        extension: Extension::Sign,
    }
}

/// Compressed loads and stores through x8..x15 and through `sp`.
#[derive(Clone, Copy)]
enum CompressedForm {
    RegisterLoad,
    RegisterStore,
    StackLoad,
    StackStore,
}

fn compressed(
    raw: u32,
    form: CompressedForm,
    size_bytes: u8,
    float_data: bool,
    extension: Extension,
) -> MemoryAccessShape {
    let doubleword = size_bytes == 8;
    let operand = |register: u8| {
        if float_data {
            RegisterOperand::Float(register)
        } else {
            RegisterOperand::Integer(register)
        }
    };
    // The offsets are unsigned and at most 9 bits wide, so they always fit an i32.
    let (operation, base, offset, data, destination) = match form {
        CompressedForm::RegisterLoad => (
            AccessOperation::Load,
            c_rs1_prime(raw),
            if doubleword {
                c_doubleword_offset(raw)
            } else {
                c_word_offset(raw)
            },
            None,
            Some(operand(c_rs2_prime(raw))),
        ),
        CompressedForm::RegisterStore => (
            AccessOperation::Store,
            c_rs1_prime(raw),
            if doubleword {
                c_doubleword_offset(raw)
            } else {
                c_word_offset(raw)
            },
            Some(operand(c_rs2_prime(raw))),
            None,
        ),
        CompressedForm::StackLoad => (
            AccessOperation::Load,
            2,
            if doubleword {
                c_ldsp_offset(raw)
            } else {
                c_lwsp_offset(raw)
            },
            None,
            // c.lwsp/c.ldsp with rd=0 are reserved and decode as Unknown; keep x0 out anyway.
            match operand(c_rd(raw)) {
                RegisterOperand::Integer(0) => None,
                other => Some(other),
            },
        ),
        CompressedForm::StackStore => (
            AccessOperation::Store,
            2,
            if doubleword {
                c_sdsp_offset(raw)
            } else {
                c_swsp_offset(raw)
            },
            Some(operand(c_rs2(raw))),
            None,
        ),
    };
    MemoryAccessShape {
        operation,
        size_bytes,
        base,
        offset: i32::try_from(offset).unwrap_or(i32::MAX),
        data,
        destination,
        extension,
    }
}

/// Hypervisor virtual-machine loads and stores: rs1 alone is the address.
fn hypervisor_load(raw: u32, size_bytes: u8, extension: Extension) -> MemoryAccessShape {
    MemoryAccessShape {
        offset: 0,
        ..load(raw, size_bytes, extension, false)
    }
}

fn hypervisor_store(raw: u32, size_bytes: u8) -> MemoryAccessShape {
    MemoryAccessShape {
        offset: 0,
        ..store(raw, size_bytes, false)
    }
}

impl Instruction {
    /// The memory access of a load, store, floating-point load or store, LR, SC, AMO or
    /// hypervisor load/store, including every compressed form. `None` for everything else,
    /// including Zcmp `cm.push`/`cm.pop*` (several accesses) and fences.
    ///
    /// Word-sized loads are [`Extension::Sign`] on both XLENs (on RV32 the extension is a
    /// no-op); `flw` and the single-precision compressed loads are [`Extension::NanBox`].
    #[must_use]
    pub fn memory_access(&self) -> Option<MemoryAccessShape> {
        use AccessOperation as A;
        use CompressedForm as C;
        use Extension::{NanBox, Sign, Zero};
        let raw = self.raw;
        let amo = |operation: AmoOperation, size: u8| atomic(raw, A::Amo(operation), size);
        Some(match self.mnemonic {
            Mnemonic::Lb => load(raw, 1, Sign, false),
            Mnemonic::Lh => load(raw, 2, Sign, false),
            Mnemonic::Lw => load(raw, 4, Sign, false),
            Mnemonic::Ld => load(raw, 8, Zero, false),
            Mnemonic::Lbu => load(raw, 1, Zero, false),
            Mnemonic::Lhu => load(raw, 2, Zero, false),
            Mnemonic::Lwu => load(raw, 4, Zero, false),
            Mnemonic::Flw => load(raw, 4, NanBox, true),
            Mnemonic::Fld => load(raw, 8, Zero, true),
            Mnemonic::Sb => store(raw, 1, false),
            Mnemonic::Sh => store(raw, 2, false),
            Mnemonic::Sw => store(raw, 4, false),
            Mnemonic::Sd => store(raw, 8, false),
            Mnemonic::Fsw => store(raw, 4, true),
            Mnemonic::Fsd => store(raw, 8, true),
            Mnemonic::LrW => atomic(raw, A::LoadReserved, 4),
            Mnemonic::LrD => atomic(raw, A::LoadReserved, 8),
            Mnemonic::ScW => atomic(raw, A::StoreConditional, 4),
            Mnemonic::ScD => atomic(raw, A::StoreConditional, 8),
            Mnemonic::AmoswapW => amo(AmoOperation::Swap, 4),
            Mnemonic::AmoaddW => amo(AmoOperation::Add, 4),
            Mnemonic::AmoxorW => amo(AmoOperation::Xor, 4),
            Mnemonic::AmoandW => amo(AmoOperation::And, 4),
            Mnemonic::AmoorW => amo(AmoOperation::Or, 4),
            Mnemonic::AmominW => amo(AmoOperation::Min, 4),
            Mnemonic::AmomaxW => amo(AmoOperation::Max, 4),
            Mnemonic::AmominuW => amo(AmoOperation::MinUnsigned, 4),
            Mnemonic::AmomaxuW => amo(AmoOperation::MaxUnsigned, 4),
            Mnemonic::AmoswapD => amo(AmoOperation::Swap, 8),
            Mnemonic::AmoaddD => amo(AmoOperation::Add, 8),
            Mnemonic::AmoxorD => amo(AmoOperation::Xor, 8),
            Mnemonic::AmoandD => amo(AmoOperation::And, 8),
            Mnemonic::AmoorD => amo(AmoOperation::Or, 8),
            Mnemonic::AmominD => amo(AmoOperation::Min, 8),
            Mnemonic::AmomaxD => amo(AmoOperation::Max, 8),
            Mnemonic::AmominuD => amo(AmoOperation::MinUnsigned, 8),
            Mnemonic::AmomaxuD => amo(AmoOperation::MaxUnsigned, 8),
            Mnemonic::CLw => compressed(raw, C::RegisterLoad, 4, false, Sign),
            Mnemonic::CLd => compressed(raw, C::RegisterLoad, 8, false, Zero),
            Mnemonic::CFlw => compressed(raw, C::RegisterLoad, 4, true, NanBox),
            Mnemonic::CFld => compressed(raw, C::RegisterLoad, 8, true, Zero),
            Mnemonic::CSw => compressed(raw, C::RegisterStore, 4, false, Zero),
            Mnemonic::CSd => compressed(raw, C::RegisterStore, 8, false, Zero),
            Mnemonic::CFsw => compressed(raw, C::RegisterStore, 4, true, Zero),
            Mnemonic::CFsd => compressed(raw, C::RegisterStore, 8, true, Zero),
            Mnemonic::CLwsp => compressed(raw, C::StackLoad, 4, false, Sign),
            Mnemonic::CLdsp => compressed(raw, C::StackLoad, 8, false, Zero),
            Mnemonic::CFlwsp => compressed(raw, C::StackLoad, 4, true, NanBox),
            Mnemonic::CFldsp => compressed(raw, C::StackLoad, 8, true, Zero),
            Mnemonic::CSwsp => compressed(raw, C::StackStore, 4, false, Zero),
            Mnemonic::CSdsp => compressed(raw, C::StackStore, 8, false, Zero),
            Mnemonic::CFswsp => compressed(raw, C::StackStore, 4, true, Zero),
            Mnemonic::CFsdsp => compressed(raw, C::StackStore, 8, true, Zero),
            Mnemonic::HlvB => hypervisor_load(raw, 1, Sign),
            Mnemonic::HlvBu => hypervisor_load(raw, 1, Zero),
            Mnemonic::HlvH => hypervisor_load(raw, 2, Sign),
            Mnemonic::HlvHu | Mnemonic::HlvxHu => hypervisor_load(raw, 2, Zero),
            Mnemonic::HlvW => hypervisor_load(raw, 4, Sign),
            Mnemonic::HlvWu | Mnemonic::HlvxWu => hypervisor_load(raw, 4, Zero),
            Mnemonic::HlvD => hypervisor_load(raw, 8, Zero),
            Mnemonic::HsvB => hypervisor_store(raw, 1),
            Mnemonic::HsvH => hypervisor_store(raw, 2),
            Mnemonic::HsvW => hypervisor_store(raw, 4),
            Mnemonic::HsvD => hypervisor_store(raw, 8),
            _ => return None,
        })
    }

    /// The integer or floating-point register the instruction writes its result to, `None`
    /// when it writes none (or only `x0`).
    ///
    /// Approximations: only the one architectural destination is named, not side effects
    /// (CSR instructions report rd, not the CSR; `fflags` updates are not reported);
    /// Zcmp `cm.pop*` and `cm.mva01s`, which write several registers, give `None`;
    /// `cm.push` and stack adjustments give `None` for `sp`. Unknown encodings give `None`.
    #[must_use]
    pub fn destination_register(&self) -> Option<RegisterOperand> {
        use Mnemonic as M;
        let raw = self.raw;
        if let Some(shape) = self.memory_access() {
            return shape.destination;
        }
        match self.mnemonic {
            M::Lui
            | M::Auipc
            | M::Jal
            | M::Jalr
            | M::Addi
            | M::Slti
            | M::Sltiu
            | M::Xori
            | M::Ori
            | M::Andi
            | M::Slli
            | M::Srli
            | M::Srai
            | M::Add
            | M::Sub
            | M::Sll
            | M::Slt
            | M::Sltu
            | M::Xor
            | M::Srl
            | M::Sra
            | M::Or
            | M::And
            | M::Addiw
            | M::Slliw
            | M::Srliw
            | M::Sraiw
            | M::Addw
            | M::Subw
            | M::Sllw
            | M::Srlw
            | M::Sraw
            | M::Csrrw
            | M::Csrrs
            | M::Csrrc
            | M::Csrrwi
            | M::Csrrsi
            | M::Csrrci
            | M::Mul
            | M::Mulh
            | M::Mulhsu
            | M::Mulhu
            | M::Div
            | M::Divu
            | M::Rem
            | M::Remu
            | M::Mulw
            | M::Divw
            | M::Divuw
            | M::Remw
            | M::Remuw
            | M::FcvtWS
            | M::FcvtWuS
            | M::FmvXW
            | M::FeqS
            | M::FltS
            | M::FleS
            | M::FclassS
            | M::FcvtLS
            | M::FcvtLuS
            | M::FeqD
            | M::FltD
            | M::FleD
            | M::FclassD
            | M::FcvtWD
            | M::FcvtWuD
            | M::FcvtLD
            | M::FcvtLuD
            | M::FmvXD => integer(rd(raw)),
            M::FmaddS
            | M::FmsubS
            | M::FnmsubS
            | M::FnmaddS
            | M::FaddS
            | M::FsubS
            | M::FmulS
            | M::FdivS
            | M::FsqrtS
            | M::FsgnjS
            | M::FsgnjnS
            | M::FsgnjxS
            | M::FminS
            | M::FmaxS
            | M::FcvtSW
            | M::FcvtSWu
            | M::FmvWX
            | M::FcvtSL
            | M::FcvtSLu
            | M::FmaddD
            | M::FmsubD
            | M::FnmsubD
            | M::FnmaddD
            | M::FaddD
            | M::FsubD
            | M::FmulD
            | M::FdivD
            | M::FsqrtD
            | M::FsgnjD
            | M::FsgnjnD
            | M::FsgnjxD
            | M::FminD
            | M::FmaxD
            | M::FcvtSD
            | M::FcvtDS
            | M::FcvtDW
            | M::FcvtDWu
            | M::FcvtDL
            | M::FcvtDLu
            | M::FmvDX => float(rd(raw)),
            // c.addi4spn writes rd' in the rs2' position.
            M::CAddi4spn => integer(c_rs2_prime(raw)),
            M::CAddi | M::CAddiw | M::CLi | M::CLui | M::CSlli | M::CMv | M::CAdd => {
                integer(c_rd(raw))
            }
            M::CAddi16sp => integer(2),
            M::CSrli
            | M::CSrai
            | M::CAndi
            | M::CSub
            | M::CXor
            | M::COr
            | M::CAnd
            | M::CSubw
            | M::CAddw => integer(c_rs1_prime(raw)),
            M::CJal | M::CJalr | M::CmJalt => integer(1),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, DecodeOptions};

    fn shape(raw: u32) -> Option<MemoryAccessShape> {
        decode(raw, DecodeOptions::default())
            .ok()
            .and_then(|instruction| instruction.memory_access())
    }

    fn destination(raw: u32) -> Option<RegisterOperand> {
        decode(raw, DecodeOptions::default())
            .ok()
            .and_then(|instruction| instruction.destination_register())
    }

    #[test]
    fn standard_loads_and_stores() {
        // lw tp,8(t0): the spec's Table C.5.
        let lw = shape(0x0082_a203).unwrap();
        assert_eq!(lw.operation, AccessOperation::Load);
        assert_eq!((lw.size_bytes, lw.base, lw.offset), (4, 5, 8));
        assert_eq!(lw.destination, Some(RegisterOperand::Integer(4)));
        assert_eq!(lw.extension, Extension::Sign);
        assert_eq!(lw.data, None);
        // lbu a0,-1(a1) = fff5c503
        let lbu = shape(0xfff5_c503).unwrap();
        assert_eq!((lbu.size_bytes, lbu.base, lbu.offset), (1, 11, -1));
        assert_eq!(lbu.extension, Extension::Zero);
        // sd ra,-8(sp) = fe113c23
        let sd = shape(0xfe11_3c23).unwrap();
        assert_eq!(sd.operation, AccessOperation::Store);
        assert_eq!((sd.size_bytes, sd.base, sd.offset), (8, 2, -8));
        assert_eq!(sd.data, Some(RegisterOperand::Integer(1)));
        assert_eq!(sd.destination, None);
        // fld fa0,16(a0) = 01053507
        let fld = shape(0x0105_3507).unwrap();
        assert_eq!(fld.destination, Some(RegisterOperand::Float(10)));
        assert_eq!((fld.size_bytes, fld.offset), (8, 16));
        // fsw fa1,4(a2) = 00b62227
        let fsw = shape(0x00b6_2227).unwrap();
        assert_eq!(fsw.data, Some(RegisterOperand::Float(11)));
        assert_eq!((fsw.size_bytes, fsw.base, fsw.offset), (4, 12, 4));
        // ld zero,0(a0): the load happens, nothing is written.
        let ld_x0 = shape(0x0005_3003).unwrap();
        assert_eq!(ld_x0.destination, None);
    }

    #[test]
    fn atomics() {
        // lr.w a0,(a1) = 1005a52f
        let lr = shape(0x1005_a52f).unwrap();
        assert_eq!(lr.operation, AccessOperation::LoadReserved);
        assert_eq!(
            (lr.size_bytes, lr.base, lr.offset, lr.data),
            (4, 11, 0, None)
        );
        // sc.d a0,a2,(a1) = 18c5b52f
        let sc = shape(0x18c5_b52f).unwrap();
        assert_eq!(sc.operation, AccessOperation::StoreConditional);
        assert_eq!(sc.data, Some(RegisterOperand::Integer(12)));
        assert_eq!(sc.destination, Some(RegisterOperand::Integer(10)));
        assert_eq!(sc.size_bytes, 8);
        // amoadd.w a0,a2,(a1) = 00c5a52f
        let amo = shape(0x00c5_a52f).unwrap();
        assert_eq!(amo.operation, AccessOperation::Amo(AmoOperation::Add));
        // amomaxu.d.aqrl t0,t1,(t2) = e063b2af
        let amo = shape(0xe663_b2af).unwrap();
        assert_eq!(
            amo.operation,
            AccessOperation::Amo(AmoOperation::MaxUnsigned)
        );
        assert_eq!((amo.size_bytes, amo.base), (8, 7));
        assert_eq!(amo.data, Some(RegisterOperand::Integer(6)));
        assert_eq!(amo.destination, Some(RegisterOperand::Integer(5)));
    }

    #[test]
    fn compressed_forms() {
        // c.lw a0,4(a1) = 41c8
        let c_lw = shape(0x41c8).unwrap();
        assert_eq!((c_lw.size_bytes, c_lw.base, c_lw.offset), (4, 11, 4));
        assert_eq!(c_lw.destination, Some(RegisterOperand::Integer(10)));
        // c.ld a2,16(s1) = 6890
        let c_ld = shape(0x6890).unwrap();
        assert_eq!((c_ld.size_bytes, c_ld.base, c_ld.offset), (8, 9, 16));
        assert_eq!(c_ld.destination, Some(RegisterOperand::Integer(12)));
        // c.sw a5,64(a4) = c33c
        let c_sw = shape(0xc33c).unwrap();
        assert_eq!(c_sw.operation, AccessOperation::Store);
        assert_eq!((c_sw.size_bytes, c_sw.base, c_sw.offset), (4, 14, 64));
        assert_eq!(c_sw.data, Some(RegisterOperand::Integer(15)));
        // c.sd s0,8(a0) = e500
        let c_sd = shape(0xe500).unwrap();
        assert_eq!((c_sd.size_bytes, c_sd.base, c_sd.offset), (8, 10, 8));
        assert_eq!(c_sd.data, Some(RegisterOperand::Integer(8)));
        // c.lwsp a0,12(sp) = 4532
        let c_lwsp = shape(0x4532).unwrap();
        assert_eq!((c_lwsp.size_bytes, c_lwsp.base, c_lwsp.offset), (4, 2, 12));
        assert_eq!(c_lwsp.destination, Some(RegisterOperand::Integer(10)));
        // c.ldsp ra,24(sp) = 60e2
        let c_ldsp = shape(0x60e2).unwrap();
        assert_eq!((c_ldsp.size_bytes, c_ldsp.base, c_ldsp.offset), (8, 2, 24));
        assert_eq!(c_ldsp.destination, Some(RegisterOperand::Integer(1)));
        // c.swsp a1,8(sp) = c42e
        let c_swsp = shape(0xc42e).unwrap();
        assert_eq!((c_swsp.size_bytes, c_swsp.offset), (4, 8));
        assert_eq!(c_swsp.data, Some(RegisterOperand::Integer(11)));
        // c.sdsp ra,40(sp) = f406
        let c_sdsp = shape(0xf406).unwrap();
        assert_eq!((c_sdsp.size_bytes, c_sdsp.offset), (8, 40));
        assert_eq!(c_sdsp.data, Some(RegisterOperand::Integer(1)));
        // c.fld fa0,8(a1) = 2588
        let c_fld = shape(0x2588).unwrap();
        assert_eq!((c_fld.size_bytes, c_fld.base, c_fld.offset), (8, 11, 8));
        assert_eq!(c_fld.destination, Some(RegisterOperand::Float(10)));
        // c.fsd fa0,8(a1) = a588
        let c_fsd = shape(0xa588).unwrap();
        assert_eq!(c_fsd.data, Some(RegisterOperand::Float(10)));
        // c.fldsp fs0,16(sp) = 2442
        let c_fldsp = shape(0x2442).unwrap();
        assert_eq!((c_fldsp.base, c_fldsp.offset), (2, 16));
        assert_eq!(c_fldsp.destination, Some(RegisterOperand::Float(8)));
        // c.fsdsp fs0,16(sp) = a822
        let c_fsdsp = shape(0xa822).unwrap();
        assert_eq!((c_fsdsp.base, c_fsdsp.offset), (2, 16));
        assert_eq!(c_fsdsp.data, Some(RegisterOperand::Float(8)));
    }

    #[test]
    fn no_access() {
        for raw in [0x0062_81b3, 0x0000_0073, 0x0ff0_000f, 0x8d0d] {
            assert_eq!(shape(raw), None, "{raw:#x}");
        }
    }

    #[test]
    fn destinations() {
        // add gp,t0,t1 (Table C.1)
        assert_eq!(destination(0x0062_81b3), Some(RegisterOperand::Integer(3)));
        // fadd.s ft7,fa3,fa7 (Table C.3)
        assert_eq!(destination(0x0116_f3d3), Some(RegisterOperand::Float(7)));
        // c.sub a0,a1 (Table C.4)
        assert_eq!(destination(0x8d0d), Some(RegisterOperand::Integer(10)));
        // csrrc s1,mie,a1 (Table C.6)
        assert_eq!(destination(0x3045_b4f3), Some(RegisterOperand::Integer(9)));
        // jr 256(sp) (Table C.2) writes x0
        assert_eq!(destination(0x1001_0067), None);
        // lw tp,8(t0)
        assert_eq!(destination(0x0082_a203), Some(RegisterOperand::Integer(4)));
        // feq.d a0,fa0,fa1 = a2b52553
        assert_eq!(destination(0xa2b5_2553), Some(RegisterOperand::Integer(10)));
        // c.addi16sp sp,-64 = 7139
        assert_eq!(destination(0x7139), Some(RegisterOperand::Integer(2)));
        // c.addi4spn a0,sp,16 = 0808
        assert_eq!(destination(0x0808), Some(RegisterOperand::Integer(10)));
        // c.jalr a0 = 9502 links ra
        assert_eq!(destination(0x9502), Some(RegisterOperand::Integer(1)));
        // sd ra,-8(sp): stores write no register
        assert_eq!(destination(0xfe11_3c23), None);
        // sc.w t0,a1,(a0) = 18b522af writes the result
        assert_eq!(destination(0x18b5_22af), Some(RegisterOperand::Integer(5)));
    }
}
