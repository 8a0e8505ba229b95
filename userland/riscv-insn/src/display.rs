//! Assembler-style text for decoded instructions.
//!
//! The syntax follows GNU objdump's `-M no-aliases` output (ABI register names, no spaces after
//! commas, hex shift amounts and upper immediates) so that it can be diffed against objdump.
//! The one difference is forced by the missing PC: branch and jump targets are printed relative
//! to the instruction as `.+offset`, which GNU as also accepts.

use core::fmt::{self, Display, Formatter, Write};

use crate::fields::{
    self, b_immediate, bits, c_addi16sp_immediate, c_addi4spn_immediate, c_b_offset,
    c_doubleword_offset, c_i_immediate, c_j_offset, c_ldsp_offset, c_lui_immediate, c_lwsp_offset,
    c_rd, c_rs1_prime, c_rs2, c_rs2_prime, c_sdsp_offset, c_shift_amount, c_swsp_offset,
    c_word_offset, i_immediate, j_immediate, rd, rs1, rs2, rs3, s_immediate, u_immediate,
    zcmp_register_list, zcmp_saved_register, zcmp_stack_adjustment,
};
use crate::{Instruction, Mnemonic};

const INTEGER_REGISTER_NAMES: [&str; 32] = [
    "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4",
    "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4",
    "t5", "t6",
];

const FLOAT_REGISTER_NAMES: [&str; 32] = [
    "ft0", "ft1", "ft2", "ft3", "ft4", "ft5", "ft6", "ft7", "fs0", "fs1", "fa0", "fa1", "fa2",
    "fa3", "fa4", "fa5", "fa6", "fa7", "fs2", "fs3", "fs4", "fs5", "fs6", "fs7", "fs8", "fs9",
    "fs10", "fs11", "ft8", "ft9", "ft10", "ft11",
];

/// ABI name of integer register `register` (only the low five bits are used).
#[must_use]
pub fn integer_register_name(register: u8) -> &'static str {
    INTEGER_REGISTER_NAMES[usize::from(register & 31)]
}

/// ABI name of floating-point register `register` (only the low five bits are used).
#[must_use]
pub fn float_register_name(register: u8) -> &'static str {
    FLOAT_REGISTER_NAMES[usize::from(register & 31)]
}

/// Which rounding mode an instruction prints silently: GNU as omits the mode it assembles by
/// default, which is `dyn` except for conversions that are always exact.
#[derive(Clone, Copy)]
enum Rounding {
    None,
    DefaultDynamic,
    DefaultNearestEven,
}

#[derive(Clone, Copy)]
enum Operands {
    None,
    Upper,
    Jump,
    JumpRegister,
    Branch,
    Load,
    FloatLoad,
    Store,
    FloatStore,
    Immediate,
    Shift,
    Register,
    Fence,
    Csr,
    CsrImmediate,
    LoadReserved,
    Atomic,
    FloatTernary,
    FloatBinary(Rounding),
    FloatUnary(Rounding),
    FloatToInteger(Rounding),
    IntegerToFloat(Rounding),
    FloatCompare,
    TwoSources,
    HypervisorLoad,
    HypervisorStore,
    CompressedNop,
    CompressedAddi4spn,
    CompressedLoad { float: bool, doubleword: bool },
    CompressedStore { float: bool, doubleword: bool },
    CompressedImmediate,
    CompressedAddi16sp,
    CompressedLui,
    CompressedShift,
    CompressedRightShift,
    CompressedAndi,
    CompressedRegister,
    CompressedJump,
    CompressedBranch,
    CompressedStackLoad { float: bool, doubleword: bool },
    CompressedStackStore { float: bool, doubleword: bool },
    CompressedJumpRegister,
    CompressedMove,
    PushPop { push: bool },
    SavedRegisterMove,
    TableJump,
}

fn operands(mnemonic: Mnemonic) -> Operands {
    use Mnemonic as M;
    use Operands as O;
    match mnemonic {
        M::Unknown
        | M::Illegal
        | M::FenceTso
        | M::FenceI
        | M::Ecall
        | M::Ebreak
        | M::Mret
        | M::Sret
        | M::Uret
        | M::Mnret
        | M::Dret
        | M::Wfi
        | M::SfenceWInval
        | M::SfenceInvalIr
        | M::CEbreak => O::None,
        M::CNop => O::CompressedNop,
        M::Lui | M::Auipc => O::Upper,
        M::Jal => O::Jump,
        M::Jalr => O::JumpRegister,
        M::Beq | M::Bne | M::Blt | M::Bge | M::Bltu | M::Bgeu => O::Branch,
        M::Lb | M::Lh | M::Lw | M::Ld | M::Lbu | M::Lhu | M::Lwu => O::Load,
        M::Flw | M::Fld => O::FloatLoad,
        M::Sb | M::Sh | M::Sw | M::Sd => O::Store,
        M::Fsw | M::Fsd => O::FloatStore,
        M::Addi | M::Slti | M::Sltiu | M::Xori | M::Ori | M::Andi | M::Addiw => O::Immediate,
        M::Slli | M::Srli | M::Srai | M::Slliw | M::Srliw | M::Sraiw => O::Shift,
        M::Add
        | M::Sub
        | M::Sll
        | M::Slt
        | M::Sltu
        | M::Xor
        | M::Srl
        | M::Sra
        | M::Or
        | M::And
        | M::Addw
        | M::Subw
        | M::Sllw
        | M::Srlw
        | M::Sraw
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
        | M::Remuw => O::Register,
        M::Fence => O::Fence,
        M::Csrrw | M::Csrrs | M::Csrrc => O::Csr,
        M::Csrrwi | M::Csrrsi | M::Csrrci => O::CsrImmediate,
        M::LrW | M::LrD => O::LoadReserved,
        M::ScW
        | M::AmoswapW
        | M::AmoaddW
        | M::AmoxorW
        | M::AmoandW
        | M::AmoorW
        | M::AmominW
        | M::AmomaxW
        | M::AmominuW
        | M::AmomaxuW
        | M::ScD
        | M::AmoswapD
        | M::AmoaddD
        | M::AmoxorD
        | M::AmoandD
        | M::AmoorD
        | M::AmominD
        | M::AmomaxD
        | M::AmominuD
        | M::AmomaxuD => O::Atomic,
        M::FmaddS
        | M::FmsubS
        | M::FnmsubS
        | M::FnmaddS
        | M::FmaddD
        | M::FmsubD
        | M::FnmsubD
        | M::FnmaddD => O::FloatTernary,
        M::FaddS | M::FsubS | M::FmulS | M::FdivS | M::FaddD | M::FsubD | M::FmulD | M::FdivD => {
            O::FloatBinary(Rounding::DefaultDynamic)
        }
        M::FsgnjS
        | M::FsgnjnS
        | M::FsgnjxS
        | M::FminS
        | M::FmaxS
        | M::FsgnjD
        | M::FsgnjnD
        | M::FsgnjxD
        | M::FminD
        | M::FmaxD => O::FloatBinary(Rounding::None),
        M::FsqrtS | M::FsqrtD | M::FcvtSD => O::FloatUnary(Rounding::DefaultDynamic),
        M::FcvtDS => O::FloatUnary(Rounding::DefaultNearestEven),
        M::FcvtWS
        | M::FcvtWuS
        | M::FcvtLS
        | M::FcvtLuS
        | M::FcvtWD
        | M::FcvtWuD
        | M::FcvtLD
        | M::FcvtLuD => O::FloatToInteger(Rounding::DefaultDynamic),
        M::FmvXW | M::FclassS | M::FmvXD | M::FclassD => O::FloatToInteger(Rounding::None),
        M::FcvtSW | M::FcvtSWu | M::FcvtSL | M::FcvtSLu | M::FcvtDL | M::FcvtDLu => {
            O::IntegerToFloat(Rounding::DefaultDynamic)
        }
        M::FcvtDW | M::FcvtDWu => O::IntegerToFloat(Rounding::DefaultNearestEven),
        M::FmvWX | M::FmvDX => O::IntegerToFloat(Rounding::None),
        M::FeqS | M::FltS | M::FleS | M::FeqD | M::FltD | M::FleD => O::FloatCompare,
        M::SfenceVma
        | M::SinvalVma
        | M::HfenceVvma
        | M::HfenceGvma
        | M::HinvalVvma
        | M::HinvalGvma => O::TwoSources,
        M::HlvB
        | M::HlvBu
        | M::HlvH
        | M::HlvHu
        | M::HlvxHu
        | M::HlvW
        | M::HlvxWu
        | M::HlvWu
        | M::HlvD => O::HypervisorLoad,
        M::HsvB | M::HsvH | M::HsvW | M::HsvD => O::HypervisorStore,
        M::CAddi4spn => O::CompressedAddi4spn,
        M::CLw => O::CompressedLoad {
            float: false,
            doubleword: false,
        },
        M::CLd => O::CompressedLoad {
            float: false,
            doubleword: true,
        },
        M::CFlw => O::CompressedLoad {
            float: true,
            doubleword: false,
        },
        M::CFld => O::CompressedLoad {
            float: true,
            doubleword: true,
        },
        M::CSw => O::CompressedStore {
            float: false,
            doubleword: false,
        },
        M::CSd => O::CompressedStore {
            float: false,
            doubleword: true,
        },
        M::CFsw => O::CompressedStore {
            float: true,
            doubleword: false,
        },
        M::CFsd => O::CompressedStore {
            float: true,
            doubleword: true,
        },
        M::CAddi | M::CAddiw | M::CLi => O::CompressedImmediate,
        M::CAddi16sp => O::CompressedAddi16sp,
        M::CLui => O::CompressedLui,
        M::CSlli => O::CompressedShift,
        M::CSrli | M::CSrai => O::CompressedRightShift,
        M::CAndi => O::CompressedAndi,
        M::CSub | M::CXor | M::COr | M::CAnd | M::CSubw | M::CAddw => O::CompressedRegister,
        M::CJ | M::CJal => O::CompressedJump,
        M::CBeqz | M::CBnez => O::CompressedBranch,
        M::CLwsp => O::CompressedStackLoad {
            float: false,
            doubleword: false,
        },
        M::CLdsp => O::CompressedStackLoad {
            float: false,
            doubleword: true,
        },
        M::CFlwsp => O::CompressedStackLoad {
            float: true,
            doubleword: false,
        },
        M::CFldsp => O::CompressedStackLoad {
            float: true,
            doubleword: true,
        },
        M::CSwsp => O::CompressedStackStore {
            float: false,
            doubleword: false,
        },
        M::CSdsp => O::CompressedStackStore {
            float: false,
            doubleword: true,
        },
        M::CFswsp => O::CompressedStackStore {
            float: true,
            doubleword: false,
        },
        M::CFsdsp => O::CompressedStackStore {
            float: true,
            doubleword: true,
        },
        M::CJr | M::CJalr => O::CompressedJumpRegister,
        M::CMv | M::CAdd => O::CompressedMove,
        M::CmPush => O::PushPop { push: true },
        M::CmPop | M::CmPopret | M::CmPopretz => O::PushPop { push: false },
        M::CmMva01s | M::CmMvsa01 => O::SavedRegisterMove,
        M::CmJt | M::CmJalt => O::TableJump,
    }
}

/// Writes a PC-relative target the way GNU as spells "this instruction plus offset".
struct Relative(i32);

impl Display for Relative {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            write!(formatter, ".{}", self.0)
        } else {
            write!(formatter, ".+{}", self.0)
        }
    }
}

fn write_rounding(formatter: &mut Formatter<'_>, raw: u32, rounding: Rounding) -> fmt::Result {
    let mode = fields::funct3(raw);
    let silent = match rounding {
        Rounding::None => return Ok(()),
        Rounding::DefaultDynamic => 0b111,
        Rounding::DefaultNearestEven => 0b000,
    };
    if mode == silent {
        return Ok(());
    }
    match mode {
        0 => formatter.write_str(",rne"),
        1 => formatter.write_str(",rtz"),
        2 => formatter.write_str(",rdn"),
        3 => formatter.write_str(",rup"),
        4 => formatter.write_str(",rmm"),
        7 => formatter.write_str(",dyn"),
        reserved => write!(formatter, ",{reserved}"),
    }
}

fn write_fence_set(formatter: &mut Formatter<'_>, set: u32) -> fmt::Result {
    if set == 0 {
        return formatter.write_char('0');
    }
    for (bit, letter) in [(8, 'i'), (4, 'o'), (2, 'r'), (1, 'w')] {
        if set & bit != 0 {
            formatter.write_char(letter)?;
        }
    }
    Ok(())
}

fn write_register_list(formatter: &mut Formatter<'_>, register_list: u32) -> fmt::Result {
    match register_list {
        4 => formatter.write_str("{ra}"),
        5 => formatter.write_str("{ra,s0}"),
        15 => formatter.write_str("{ra,s0-s11}"),
        _ => write!(formatter, "{{ra,s0-s{}}}", register_list.saturating_sub(5)),
    }
}

impl Display for Instruction {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        let raw = self.raw;
        let x = integer_register_name;
        let f = float_register_name;
        match self.mnemonic {
            Mnemonic::Unknown => {
                return match self.length {
                    2 => write!(formatter, ".2byte 0x{raw:04x}"),
                    4 => write!(formatter, ".4byte 0x{raw:08x}"),
                    // Only the first 32 bits of longer instructions are kept.
                    length => write!(formatter, "unknown {length}-byte 0x{raw:08x}..."),
                };
            }
            Mnemonic::Illegal => return formatter.write_str("illegal"),
            mnemonic => formatter.write_str(mnemonic.as_str())?,
        }
        let operands = operands(self.mnemonic);
        if let Operands::Atomic | Operands::LoadReserved = operands {
            // Ordering suffix, spelled the way assemblers accept it.
            match bits(raw, 25, 2) {
                0b10 => formatter.write_str(".aq")?,
                0b01 => formatter.write_str(".rl")?,
                0b11 => formatter.write_str(".aqrl")?,
                _ => {}
            }
        }
        // A c.nop with a non-zero immediate is a HINT; it only has an operand then.
        let nop_without_operand =
            matches!(operands, Operands::CompressedNop) && c_i_immediate(raw) == 0;
        if !matches!(operands, Operands::None) && !nop_without_operand {
            formatter.write_char(' ')?;
        }
        match operands {
            Operands::None => Ok(()),
            Operands::Upper => {
                write!(
                    formatter,
                    "{},0x{:x}",
                    x(rd(raw)),
                    (u_immediate(raw) as u32) >> 12
                )
            }
            Operands::Jump => {
                write!(formatter, "{},{}", x(rd(raw)), Relative(j_immediate(raw)))
            }
            Operands::JumpRegister | Operands::Load => {
                write!(
                    formatter,
                    "{},{}({})",
                    x(rd(raw)),
                    i_immediate(raw),
                    x(rs1(raw))
                )
            }
            Operands::Branch => write!(
                formatter,
                "{},{},{}",
                x(rs1(raw)),
                x(rs2(raw)),
                Relative(b_immediate(raw))
            ),
            Operands::FloatLoad => {
                write!(
                    formatter,
                    "{},{}({})",
                    f(rd(raw)),
                    i_immediate(raw),
                    x(rs1(raw))
                )
            }
            Operands::Store => {
                write!(
                    formatter,
                    "{},{}({})",
                    x(rs2(raw)),
                    s_immediate(raw),
                    x(rs1(raw))
                )
            }
            Operands::FloatStore => {
                write!(
                    formatter,
                    "{},{}({})",
                    f(rs2(raw)),
                    s_immediate(raw),
                    x(rs1(raw))
                )
            }
            Operands::Immediate => {
                write!(
                    formatter,
                    "{},{},{}",
                    x(rd(raw)),
                    x(rs1(raw)),
                    i_immediate(raw)
                )
            }
            Operands::Shift => {
                write!(
                    formatter,
                    "{},{},0x{:x}",
                    x(rd(raw)),
                    x(rs1(raw)),
                    bits(raw, 20, 6)
                )
            }
            Operands::Register => {
                write!(formatter, "{},{},{}", x(rd(raw)), x(rs1(raw)), x(rs2(raw)))
            }
            Operands::Fence => {
                write_fence_set(formatter, bits(raw, 24, 4))?;
                formatter.write_char(',')?;
                write_fence_set(formatter, bits(raw, 20, 4))
            }
            Operands::Csr => {
                write!(
                    formatter,
                    "{},{},{}",
                    x(rd(raw)),
                    CsrName(raw >> 20),
                    x(rs1(raw))
                )
            }
            Operands::CsrImmediate => {
                write!(
                    formatter,
                    "{},{},{}",
                    x(rd(raw)),
                    CsrName(raw >> 20),
                    rs1(raw)
                )
            }
            Operands::LoadReserved | Operands::HypervisorLoad => {
                write!(formatter, "{},({})", x(rd(raw)), x(rs1(raw)))
            }
            Operands::HypervisorStore => write!(formatter, "{},({})", x(rs2(raw)), x(rs1(raw))),
            Operands::Atomic => {
                write!(
                    formatter,
                    "{},{},({})",
                    x(rd(raw)),
                    x(rs2(raw)),
                    x(rs1(raw))
                )
            }
            Operands::FloatTernary => {
                write!(
                    formatter,
                    "{},{},{},{}",
                    f(rd(raw)),
                    f(rs1(raw)),
                    f(rs2(raw)),
                    f(rs3(raw))
                )?;
                write_rounding(formatter, raw, Rounding::DefaultDynamic)
            }
            Operands::FloatBinary(rounding) => {
                write!(formatter, "{},{},{}", f(rd(raw)), f(rs1(raw)), f(rs2(raw)))?;
                write_rounding(formatter, raw, rounding)
            }
            Operands::FloatUnary(rounding) => {
                write!(formatter, "{},{}", f(rd(raw)), f(rs1(raw)))?;
                write_rounding(formatter, raw, rounding)
            }
            Operands::FloatToInteger(rounding) => {
                write!(formatter, "{},{}", x(rd(raw)), f(rs1(raw)))?;
                write_rounding(formatter, raw, rounding)
            }
            Operands::IntegerToFloat(rounding) => {
                write!(formatter, "{},{}", f(rd(raw)), x(rs1(raw)))?;
                write_rounding(formatter, raw, rounding)
            }
            Operands::FloatCompare => {
                write!(formatter, "{},{},{}", x(rd(raw)), f(rs1(raw)), f(rs2(raw)))
            }
            Operands::TwoSources => write!(formatter, "{},{}", x(rs1(raw)), x(rs2(raw))),
            Operands::CompressedNop => {
                if nop_without_operand {
                    Ok(())
                } else {
                    write!(formatter, "{}", c_i_immediate(raw))
                }
            }
            Operands::CompressedAddi4spn => {
                write!(
                    formatter,
                    "{},sp,{}",
                    x(c_rs2_prime(raw)),
                    c_addi4spn_immediate(raw)
                )
            }
            Operands::CompressedLoad { float, doubleword }
            | Operands::CompressedStore { float, doubleword } => {
                let offset = if doubleword {
                    c_doubleword_offset(raw)
                } else {
                    c_word_offset(raw)
                };
                let data = c_rs2_prime(raw);
                let data_name = if float { f(data) } else { x(data) };
                write!(
                    formatter,
                    "{},{}({})",
                    data_name,
                    offset,
                    x(c_rs1_prime(raw))
                )
            }
            Operands::CompressedImmediate => {
                write!(formatter, "{},{}", x(c_rd(raw)), c_i_immediate(raw))
            }
            Operands::CompressedAddi16sp => write!(formatter, "sp,{}", c_addi16sp_immediate(raw)),
            Operands::CompressedLui => {
                let upper = ((c_lui_immediate(raw) as u32) >> 12) & 0xfffff;
                write!(formatter, "{},0x{:x}", x(c_rd(raw)), upper)
            }
            Operands::CompressedShift => {
                write!(formatter, "{},0x{:x}", x(c_rd(raw)), c_shift_amount(raw))
            }
            Operands::CompressedRightShift => {
                write!(
                    formatter,
                    "{},0x{:x}",
                    x(c_rs1_prime(raw)),
                    c_shift_amount(raw)
                )
            }
            Operands::CompressedAndi => {
                write!(formatter, "{},{}", x(c_rs1_prime(raw)), c_i_immediate(raw))
            }
            Operands::CompressedRegister => {
                write!(formatter, "{},{}", x(c_rs1_prime(raw)), x(c_rs2_prime(raw)))
            }
            Operands::CompressedJump => write!(formatter, "{}", Relative(c_j_offset(raw))),
            Operands::CompressedBranch => {
                write!(
                    formatter,
                    "{},{}",
                    x(c_rs1_prime(raw)),
                    Relative(c_b_offset(raw))
                )
            }
            Operands::CompressedStackLoad { float, doubleword } => {
                let offset = if doubleword {
                    c_ldsp_offset(raw)
                } else {
                    c_lwsp_offset(raw)
                };
                let name = if float { f(c_rd(raw)) } else { x(c_rd(raw)) };
                write!(formatter, "{name},{offset}(sp)")
            }
            Operands::CompressedStackStore { float, doubleword } => {
                let offset = if doubleword {
                    c_sdsp_offset(raw)
                } else {
                    c_swsp_offset(raw)
                };
                let name = if float { f(c_rs2(raw)) } else { x(c_rs2(raw)) };
                write!(formatter, "{name},{offset}(sp)")
            }
            Operands::CompressedJumpRegister => formatter.write_str(x(c_rd(raw))),
            Operands::CompressedMove => write!(formatter, "{},{}", x(c_rd(raw)), x(c_rs2(raw))),
            Operands::PushPop { push } => {
                write_register_list(formatter, zcmp_register_list(raw))?;
                let adjustment = zcmp_stack_adjustment(raw, self.xlen);
                if push {
                    write!(formatter, ",-{adjustment}")
                } else {
                    write!(formatter, ",{adjustment}")
                }
            }
            Operands::SavedRegisterMove => write!(
                formatter,
                "{},{}",
                x(zcmp_saved_register(bits(raw, 7, 3))),
                x(zcmp_saved_register(bits(raw, 2, 3)))
            ),
            Operands::TableJump => write!(formatter, "{}", bits(raw, 2, 8)),
        }
    }
}

/// A CSR number, printed by name where the privileged specification gives one.
struct CsrName(u32);

impl Display for CsrName {
    fn fmt(&self, formatter: &mut Formatter<'_>) -> fmt::Result {
        let number = self.0;
        let name = match number {
            0x001 => "fflags",
            0x002 => "frm",
            0x003 => "fcsr",
            0x017 => "jvt",
            0xc00 => "cycle",
            0xc01 => "time",
            0xc02 => "instret",
            0xc80 => "cycleh",
            0xc81 => "timeh",
            0xc82 => "instreth",
            0x100 => "sstatus",
            0x104 => "sie",
            0x105 => "stvec",
            0x106 => "scounteren",
            0x10a => "senvcfg",
            0x140 => "sscratch",
            0x141 => "sepc",
            0x142 => "scause",
            0x143 => "stval",
            0x144 => "sip",
            0x180 => "satp",
            0x200 => "vsstatus",
            0x204 => "vsie",
            0x205 => "vstvec",
            0x240 => "vsscratch",
            0x241 => "vsepc",
            0x242 => "vscause",
            0x243 => "vstval",
            0x244 => "vsip",
            0x280 => "vsatp",
            0x300 => "mstatus",
            0x301 => "misa",
            0x302 => "medeleg",
            0x303 => "mideleg",
            0x304 => "mie",
            0x305 => "mtvec",
            0x306 => "mcounteren",
            0x30a => "menvcfg",
            0x310 => "mstatush",
            0x31a => "menvcfgh",
            0x320 => "mcountinhibit",
            0x340 => "mscratch",
            0x341 => "mepc",
            0x342 => "mcause",
            0x343 => "mtval",
            0x344 => "mip",
            0x34a => "mtinst",
            0x34b => "mtval2",
            0x600 => "hstatus",
            0x602 => "hedeleg",
            0x603 => "hideleg",
            0x604 => "hie",
            0x605 => "htimedelta",
            0x606 => "hcounteren",
            0x607 => "hgeie",
            0x60a => "henvcfg",
            0x615 => "htimedeltah",
            0x61a => "henvcfgh",
            0x643 => "htval",
            0x644 => "hip",
            0x645 => "hvip",
            0x64a => "htinst",
            0x680 => "hgatp",
            0x7a0 => "tselect",
            0x7a1 => "tdata1",
            0x7a2 => "tdata2",
            0x7a3 => "tdata3",
            0x7b0 => "dcsr",
            0x7b1 => "dpc",
            0x7b2 => "dscratch0",
            0x7b3 => "dscratch1",
            0xb00 => "mcycle",
            0xb02 => "minstret",
            0xb80 => "mcycleh",
            0xb82 => "minstreth",
            0xe12 => "hgeip",
            0xf11 => "mvendorid",
            0xf12 => "marchid",
            0xf13 => "mimpid",
            0xf14 => "mhartid",
            0xf15 => "mconfigptr",
            // Numbered families.
            0xc03..=0xc1f => return write!(formatter, "hpmcounter{}", number - 0xc00),
            0xc83..=0xc9f => return write!(formatter, "hpmcounter{}h", number - 0xc80),
            0xb03..=0xb1f => return write!(formatter, "mhpmcounter{}", number - 0xb00),
            0xb83..=0xb9f => return write!(formatter, "mhpmcounter{}h", number - 0xb80),
            0x323..=0x33f => return write!(formatter, "mhpmevent{}", number - 0x320),
            0x3a0..=0x3af => return write!(formatter, "pmpcfg{}", number - 0x3a0),
            0x3b0..=0x3ef => return write!(formatter, "pmpaddr{}", number - 0x3b0),
            _ => return write!(formatter, "0x{number:x}"),
        };
        formatter.write_str(name)
    }
}
