//! 16-bit (compressed) encodings: C (Zca, Zcf, Zcd), Zcmp and Zcmt.

use crate::fields::{
    bits, c_addi16sp_immediate, c_b_offset, c_j_offset, c_rd, c_rs2, known_if, zcmp_register_list,
};
use crate::{ControlFlow, DecodeOptions, Instruction, Mnemonic, Xlen};

#[inline]
pub(crate) fn decode_compressed(halfword: u16, options: DecodeOptions) -> Instruction {
    let raw = u32::from(halfword);
    let rv64 = matches!(options.xlen, Xlen::Rv64);
    // Zcmp and Zcmt take over the Zcd encoding space, so no Zcd instruction exists then.
    let zcd = !(options.zcmp || options.zcmt);
    let table = &FAST_TABLES[usize::from(rv64) << 1 | usize::from(zcd)];
    // Most compressed instructions are settled by one table load; the rest (control flow,
    // immediates that make an encoding reserved, Zcmp/Zcmt) take the full decoder.
    let (mnemonic, control_flow) = match table[fast_index(raw)] {
        Some(mnemonic) => (mnemonic, SEQUENTIAL),
        None => classify(raw, options),
    };
    Instruction {
        raw,
        length: 2,
        control_flow,
        mnemonic,
        xlen: options.xlen,
    }
}

/// Sequential mnemonics by quadrant, funct3, bit 12 and whether the rd/rs1 and rs2 fields are
/// zero; `None` where [`classify`] has to look at more. One table per (RV64, Zcd) pair.
type FastTable = [Option<Mnemonic>; 256];

static FAST_TABLES: [FastTable; 4] = [
    fast_table(false, false),
    fast_table(false, true),
    fast_table(true, false),
    fast_table(true, true),
];

#[inline]
const fn fast_index(raw: u32) -> usize {
    let rd_is_zero = (raw >> 7) & 0x1f == 0;
    let rs2_is_zero = (raw >> 2) & 0x1f == 0;
    ((raw & 0b11) << 6 | (raw >> 13) << 3 | bits(raw, 12, 1) << 2) as usize
        | (rd_is_zero as usize) << 1
        | rs2_is_zero as usize
}

const fn fast_table(rv64: bool, zcd: bool) -> FastTable {
    let mut table = [None; 256];
    let mut index = 0;
    while index < 256 {
        let quadrant_and_funct3 = index >> 3;
        let bit12 = index & 0b100 != 0;
        let rd_is_zero = index & 0b10 != 0;
        let rs2_is_zero = index & 0b1 != 0;
        table[index] = match quadrant_and_funct3 {
            0o01 => Some(known_if(zcd, Mnemonic::CFld)),
            0o02 => Some(Mnemonic::CLw),
            0o03 => Some(rv32_or_rv64(rv64, Mnemonic::CFlw, Mnemonic::CLd)),
            0o04 => Some(Mnemonic::Unknown),
            0o05 => Some(known_if(zcd, Mnemonic::CFsd)),
            0o06 => Some(Mnemonic::CSw),
            0o07 => Some(rv32_or_rv64(rv64, Mnemonic::CFsw, Mnemonic::CSd)),
            0o10 => Some(if rd_is_zero {
                Mnemonic::CNop
            } else {
                Mnemonic::CAddi
            }),
            0o11 if rv64 => Some(known_if(!rd_is_zero, Mnemonic::CAddiw)),
            0o12 => Some(Mnemonic::CLi),
            0o20 => Some(known_if(rv64 || !bit12, Mnemonic::CSlli)),
            0o21 => Some(known_if(zcd, Mnemonic::CFldsp)),
            0o22 => Some(known_if(!rd_is_zero, Mnemonic::CLwsp)),
            0o23 if rv64 => Some(known_if(!rd_is_zero, Mnemonic::CLdsp)),
            0o23 => Some(Mnemonic::CFlwsp),
            0o24 if !rs2_is_zero => Some(if bit12 { Mnemonic::CAdd } else { Mnemonic::CMv }),
            0o25 if zcd => Some(Mnemonic::CFsdsp),
            0o26 => Some(Mnemonic::CSwsp),
            0o27 => Some(rv32_or_rv64(rv64, Mnemonic::CFswsp, Mnemonic::CSdsp)),
            _ => None,
        };
        index += 1;
    }
    table
}

const SEQUENTIAL: ControlFlow = ControlFlow::Sequential;

/// The complete decoder; the fast table must agree with it (checked exhaustively in the tests).
fn classify(raw: u32, options: DecodeOptions) -> (Mnemonic, ControlFlow) {
    let rv64 = matches!(options.xlen, Xlen::Rv64);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_table_agrees_with_the_full_decoder_for_every_encoding() {
        for xlen in [Xlen::Rv32, Xlen::Rv64] {
            for (zcmp, zcmt) in [(false, false), (true, false), (false, true), (true, true)] {
                let options = DecodeOptions { xlen, zcmp, zcmt };
                for halfword in (0..=u16::MAX).filter(|halfword| halfword & 0b11 != 0b11) {
                    let fast = decode_compressed(halfword, options);
                    let full = classify(u32::from(halfword), options);
                    assert_eq!(
                        (fast.mnemonic, fast.control_flow),
                        full,
                        "{halfword:#06x} {options:?}"
                    );
                }
            }
        }
    }
}
