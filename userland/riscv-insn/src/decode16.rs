//! 16-bit (compressed) encodings: C (Zca, Zcf, Zcd), Zcmp and Zcmt.

use crate::fields::{
    bits, c_addi16sp_immediate, c_b_offset, c_j_offset, c_rd, c_rs2, zcmp_register_list,
};
use crate::{ControlFlow, DecodeOptions, Instruction, Mnemonic, Xlen};

#[inline]
pub(crate) fn decode_compressed(halfword: u16, options: DecodeOptions) -> Instruction {
    let raw = u32::from(halfword);
    let (mnemonic, control_flow) = classify(raw, options);
    Instruction {
        raw,
        length: 2,
        control_flow,
        mnemonic,
        xlen: options.xlen,
    }
}

const SEQUENTIAL: ControlFlow = ControlFlow::Sequential;

#[inline]
fn classify(raw: u32, options: DecodeOptions) -> (Mnemonic, ControlFlow) {
    let rv64 = options.xlen == Xlen::Rv64;
    // Zcmp and Zcmt take over the Zcd encoding space, so no Zcd instruction exists then.
    let zcd = !(options.zcmp || options.zcmt);
    let quadrant_and_funct3 = ((raw & 0b11) << 3) | (raw >> 13);
    let mnemonic = match quadrant_and_funct3 {
        // Quadrant 0
        0o00 => {
            if raw == 0 {
                Mnemonic::Illegal
            } else if bits(raw, 5, 8) == 0 {
                // nzuimm = 0 is reserved
                Mnemonic::Unknown
            } else {
                Mnemonic::CAddi4spn
            }
        }
        0o01 => known_if(zcd, Mnemonic::CFld),
        0o02 => Mnemonic::CLw,
        0o03 => rv32_or_rv64(rv64, Mnemonic::CFlw, Mnemonic::CLd),
        0o05 => known_if(zcd, Mnemonic::CFsd),
        0o06 => Mnemonic::CSw,
        0o07 => rv32_or_rv64(rv64, Mnemonic::CFsw, Mnemonic::CSd),

        // Quadrant 1
        0o10 => {
            if c_rd(raw) == 0 {
                Mnemonic::CNop
            } else {
                Mnemonic::CAddi
            }
        }
        0o11 => {
            if rv64 {
                known_if(c_rd(raw) != 0, Mnemonic::CAddiw)
            } else {
                return (
                    Mnemonic::CJal,
                    ControlFlow::Jump {
                        rd: 1,
                        offset: c_j_offset(raw),
                    },
                );
            }
        }
        0o12 => Mnemonic::CLi,
        0o13 => {
            if c_rd(raw) == 2 {
                known_if(c_addi16sp_immediate(raw) != 0, Mnemonic::CAddi16sp)
            } else {
                // nzimm = 0 is reserved
                known_if(bits(raw, 12, 1) | bits(raw, 2, 5) != 0, Mnemonic::CLui)
            }
        }
        0o14 => arithmetic(raw, rv64),
        0o15 => {
            return (
                Mnemonic::CJ,
                ControlFlow::Jump {
                    rd: 0,
                    offset: c_j_offset(raw),
                },
            )
        }
        0o16 => {
            return (
                Mnemonic::CBeqz,
                ControlFlow::Branch {
                    offset: c_b_offset(raw),
                },
            )
        }
        0o17 => {
            return (
                Mnemonic::CBnez,
                ControlFlow::Branch {
                    offset: c_b_offset(raw),
                },
            )
        }

        // Quadrant 2
        // On RV32, shift amounts with bit 5 set are reserved for custom use.
        0o20 => known_if(rv64 || bits(raw, 12, 1) == 0, Mnemonic::CSlli),
        0o21 => known_if(zcd, Mnemonic::CFldsp),
        0o22 => known_if(c_rd(raw) != 0, Mnemonic::CLwsp),
        0o23 => {
            if rv64 {
                known_if(c_rd(raw) != 0, Mnemonic::CLdsp)
            } else {
                Mnemonic::CFlwsp
            }
        }
        0o24 => return register_jump_or_move(raw),
        0o25 => {
            if zcd {
                Mnemonic::CFsdsp
            } else {
                return push_pop_or_table_jump(raw, options);
            }
        }
        0o26 => Mnemonic::CSwsp,
        0o27 => rv32_or_rv64(rv64, Mnemonic::CFswsp, Mnemonic::CSdsp),

        // 0o04 is reserved (Zcb lives there); quadrant 3 never reaches this function.
        _ => Mnemonic::Unknown,
    };
    (mnemonic, SEQUENTIAL)
}

#[inline]
const fn known_if(valid: bool, mnemonic: Mnemonic) -> Mnemonic {
    if valid {
        mnemonic
    } else {
        Mnemonic::Unknown
    }
}

#[inline]
const fn rv32_or_rv64(rv64: bool, rv32_mnemonic: Mnemonic, rv64_mnemonic: Mnemonic) -> Mnemonic {
    if rv64 {
        rv64_mnemonic
    } else {
        rv32_mnemonic
    }
}

/// Quadrant 1, funct3 100: shifts, c.andi and the register-register ALU group.
#[inline]
fn arithmetic(raw: u32, rv64: bool) -> Mnemonic {
    let shift_valid = rv64 || bits(raw, 12, 1) == 0;
    match bits(raw, 10, 2) {
        0b00 => known_if(shift_valid, Mnemonic::CSrli),
        0b01 => known_if(shift_valid, Mnemonic::CSrai),
        0b10 => Mnemonic::CAndi,
        _ => match (bits(raw, 12, 1), bits(raw, 5, 2)) {
            (0, 0b00) => Mnemonic::CSub,
            (0, 0b01) => Mnemonic::CXor,
            (0, 0b10) => Mnemonic::COr,
            (0, 0b11) => Mnemonic::CAnd,
            (1, 0b00) => known_if(rv64, Mnemonic::CSubw),
            (1, 0b01) => known_if(rv64, Mnemonic::CAddw),
            _ => Mnemonic::Unknown,
        },
    }
}

/// Quadrant 2, funct3 100: c.jr, c.mv, c.ebreak, c.jalr, c.add.
#[inline]
fn register_jump_or_move(raw: u32) -> (Mnemonic, ControlFlow) {
    let rs1 = c_rd(raw);
    let rs2 = c_rs2(raw);
    match (bits(raw, 12, 1), rs1, rs2) {
        // c.jr with rs1 = 0 is reserved.
        (0, 0, 0) => (Mnemonic::Unknown, SEQUENTIAL),
        (0, _, 0) => (
            Mnemonic::CJr,
            ControlFlow::JumpRegister {
                rd: 0,
                rs1,
                offset: 0,
            },
        ),
        (0, _, _) => (Mnemonic::CMv, SEQUENTIAL),
        // What would be c.jalr through x0 is c.ebreak.
        (_, 0, 0) => (Mnemonic::CEbreak, ControlFlow::EnvironmentTrap),
        (_, _, 0) => (
            Mnemonic::CJalr,
            ControlFlow::JumpRegister {
                rd: 1,
                rs1,
                offset: 0,
            },
        ),
        _ => (Mnemonic::CAdd, SEQUENTIAL),
    }
}

/// Quadrant 2, funct3 101 when Zcmp and/or Zcmt replace Zcd.
#[inline]
fn push_pop_or_table_jump(raw: u32, options: DecodeOptions) -> (Mnemonic, ControlFlow) {
    match bits(raw, 10, 3) {
        0b000 if options.zcmt => {
            let index = bits(raw, 2, 8) as u8;
            let mnemonic = if index < 32 {
                Mnemonic::CmJt
            } else {
                Mnemonic::CmJalt
            };
            (mnemonic, ControlFlow::TableJump { index })
        }
        0b011 if options.zcmp => {
            let mnemonic = match bits(raw, 5, 2) {
                // Moving a0 and a1 into the same register is reserved.
                0b01 => known_if(bits(raw, 7, 3) != bits(raw, 2, 3), Mnemonic::CmMvsa01),
                0b11 => Mnemonic::CmMva01s,
                _ => Mnemonic::Unknown,
            };
            (mnemonic, SEQUENTIAL)
        }
        // Register lists 0-3 are reserved for a future EABI variant.
        0b110 | 0b111 if options.zcmp && zcmp_register_list(raw) >= 4 => match bits(raw, 8, 5) {
            0b11000 => (Mnemonic::CmPush, SEQUENTIAL),
            0b11010 => (Mnemonic::CmPop, SEQUENTIAL),
            0b11100 => (Mnemonic::CmPopretz, ControlFlow::PopReturn),
            0b11110 => (Mnemonic::CmPopret, ControlFlow::PopReturn),
            _ => (Mnemonic::Unknown, SEQUENTIAL),
        },
        _ => (Mnemonic::Unknown, SEQUENTIAL),
    }
}
