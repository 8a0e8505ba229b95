//! Bit-field extraction for the standard and compressed formats.
//!
//! Everything is `const fn` on plain integers so the decoder compiles down to shifts and masks;
//! immediates come back sign- or zero-extended exactly as the specification scatters them.

#[inline]
pub(crate) const fn bits(raw: u32, low: u32, count: u32) -> u32 {
    (raw >> low) & ((1 << count) - 1)
}

/// Sign-extends the low `width` bits of `value`.
#[inline]
pub(crate) const fn sign_extend(value: u32, width: u32) -> i32 {
    let shift = 32 - width;
    ((value << shift) as i32) >> shift
}

// Standard 32-bit formats.

#[inline]
pub(crate) const fn rd(raw: u32) -> u8 {
    bits(raw, 7, 5) as u8
}

#[inline]
pub(crate) const fn rs1(raw: u32) -> u8 {
    bits(raw, 15, 5) as u8
}

#[inline]
pub(crate) const fn rs2(raw: u32) -> u8 {
    bits(raw, 20, 5) as u8
}

#[inline]
pub(crate) const fn rs3(raw: u32) -> u8 {
    bits(raw, 27, 5) as u8
}

#[inline]
pub(crate) const fn funct3(raw: u32) -> u32 {
    bits(raw, 12, 3)
}

#[inline]
pub(crate) const fn funct7(raw: u32) -> u32 {
    raw >> 25
}

#[inline]
pub(crate) const fn i_immediate(raw: u32) -> i32 {
    (raw as i32) >> 20
}

#[inline]
pub(crate) const fn s_immediate(raw: u32) -> i32 {
    (((raw as i32) >> 25) << 5) | bits(raw, 7, 5) as i32
}

#[inline]
pub(crate) const fn b_immediate(raw: u32) -> i32 {
    (((raw as i32) >> 31) << 12)
        | (bits(raw, 7, 1) << 11) as i32
        | (bits(raw, 25, 6) << 5) as i32
        | (bits(raw, 8, 4) << 1) as i32
}

#[inline]
pub(crate) const fn u_immediate(raw: u32) -> i32 {
    (raw & 0xffff_f000) as i32
}

#[inline]
pub(crate) const fn j_immediate(raw: u32) -> i32 {
    (((raw as i32) >> 31) << 20)
        | (raw & 0x000f_f000) as i32
        | (bits(raw, 20, 1) << 11) as i32
        | (bits(raw, 21, 10) << 1) as i32
}

// Compressed formats. `raw` is the zero-extended halfword.

/// Full 5-bit rd/rs1 field of the CR/CI/CSS formats.
#[inline]
pub(crate) const fn c_rd(raw: u32) -> u8 {
    bits(raw, 7, 5) as u8
}

/// Full 5-bit rs2 field of the CR/CSS formats.
#[inline]
pub(crate) const fn c_rs2(raw: u32) -> u8 {
    bits(raw, 2, 5) as u8
}

/// 3-bit register field at bits \[9:7\], mapped onto x8..x15.
#[inline]
pub(crate) const fn c_rs1_prime(raw: u32) -> u8 {
    8 + bits(raw, 7, 3) as u8
}

/// 3-bit register field at bits \[4:2\], mapped onto x8..x15.
#[inline]
pub(crate) const fn c_rs2_prime(raw: u32) -> u8 {
    8 + bits(raw, 2, 3) as u8
}

/// 6-bit signed immediate of c.addi, c.li, c.andi, c.addiw.
#[inline]
pub(crate) const fn c_i_immediate(raw: u32) -> i32 {
    sign_extend((bits(raw, 12, 1) << 5) | bits(raw, 2, 5), 6)
}

/// Shift amount of c.slli, c.srli, c.srai.
#[inline]
pub(crate) const fn c_shift_amount(raw: u32) -> u32 {
    (bits(raw, 12, 1) << 5) | bits(raw, 2, 5)
}

/// c.lui immediate, already shifted into bits \[17:12\] and sign-extended.
#[inline]
pub(crate) const fn c_lui_immediate(raw: u32) -> i32 {
    sign_extend((bits(raw, 12, 1) << 17) | (bits(raw, 2, 5) << 12), 18)
}

#[inline]
pub(crate) const fn c_addi16sp_immediate(raw: u32) -> i32 {
    sign_extend(
        (bits(raw, 12, 1) << 9)
            | (bits(raw, 3, 2) << 7)
            | (bits(raw, 5, 1) << 6)
            | (bits(raw, 2, 1) << 5)
            | (bits(raw, 6, 1) << 4),
        10,
    )
}

#[inline]
pub(crate) const fn c_addi4spn_immediate(raw: u32) -> u32 {
    (bits(raw, 7, 4) << 6)
        | (bits(raw, 11, 2) << 4)
        | (bits(raw, 5, 1) << 3)
        | (bits(raw, 6, 1) << 2)
}

/// Offset of c.j / c.jal.
#[inline]
pub(crate) const fn c_j_offset(raw: u32) -> i32 {
    sign_extend(
        (bits(raw, 12, 1) << 11)
            | (bits(raw, 8, 1) << 10)
            | (bits(raw, 9, 2) << 8)
            | (bits(raw, 6, 1) << 7)
            | (bits(raw, 7, 1) << 6)
            | (bits(raw, 2, 1) << 5)
            | (bits(raw, 11, 1) << 4)
            | (bits(raw, 3, 3) << 1),
        12,
    )
}

/// Offset of c.beqz / c.bnez.
#[inline]
pub(crate) const fn c_b_offset(raw: u32) -> i32 {
    sign_extend(
        (bits(raw, 12, 1) << 8)
            | (bits(raw, 5, 2) << 6)
            | (bits(raw, 2, 1) << 5)
            | (bits(raw, 10, 2) << 3)
            | (bits(raw, 3, 2) << 1),
        9,
    )
}

/// Offset of the word-sized register-based loads and stores (c.lw, c.sw, c.flw, c.fsw).
#[inline]
pub(crate) const fn c_word_offset(raw: u32) -> u32 {
    (bits(raw, 5, 1) << 6) | (bits(raw, 10, 3) << 3) | (bits(raw, 6, 1) << 2)
}

/// Offset of the doubleword-sized register-based loads and stores (c.ld, c.sd, c.fld, c.fsd).
#[inline]
pub(crate) const fn c_doubleword_offset(raw: u32) -> u32 {
    (bits(raw, 5, 2) << 6) | (bits(raw, 10, 3) << 3)
}

/// Offset of c.lwsp / c.flwsp.
#[inline]
pub(crate) const fn c_lwsp_offset(raw: u32) -> u32 {
    (bits(raw, 2, 2) << 6) | (bits(raw, 12, 1) << 5) | (bits(raw, 4, 3) << 2)
}

/// Offset of c.ldsp / c.fldsp.
#[inline]
pub(crate) const fn c_ldsp_offset(raw: u32) -> u32 {
    (bits(raw, 2, 3) << 6) | (bits(raw, 12, 1) << 5) | (bits(raw, 5, 2) << 3)
}

/// Offset of c.swsp / c.fswsp.
#[inline]
pub(crate) const fn c_swsp_offset(raw: u32) -> u32 {
    (bits(raw, 7, 2) << 6) | (bits(raw, 9, 4) << 2)
}

/// Offset of c.sdsp / c.fsdsp.
#[inline]
pub(crate) const fn c_sdsp_offset(raw: u32) -> u32 {
    (bits(raw, 7, 3) << 6) | (bits(raw, 10, 3) << 3)
}

/// Zcmp register-list field (`urlist`).
#[inline]
pub(crate) const fn zcmp_register_list(raw: u32) -> u32 {
    bits(raw, 4, 4)
}

/// Zcmp stack adjustment in bytes: the space the saved registers need, rounded up to 16, plus
/// `spimm` extra 16-byte units.
#[inline]
pub(crate) const fn zcmp_stack_adjustment(raw: u32, xlen: crate::Xlen) -> u32 {
    let register_list = zcmp_register_list(raw);
    // rlist 15 saves s10 and s11 together, i.e. 13 registers; otherwise rlist - 3 registers.
    let register_count = if register_list == 15 {
        13
    } else {
        register_list.saturating_sub(3)
    };
    let register_bytes = match xlen {
        crate::Xlen::Rv32 => 4,
        crate::Xlen::Rv64 => 8,
    };
    let base = (register_count * register_bytes).div_ceil(16) * 16;
    base + bits(raw, 2, 2) * 16
}

/// Zcmp `s` register specifier (r1s', r2s') mapped onto s0-s1 (x8-x9) and s2-s7 (x18-x23).
#[inline]
pub(crate) const fn zcmp_saved_register(specifier: u32) -> u8 {
    if specifier < 2 {
        8 + specifier as u8
    } else {
        16 + specifier as u8
    }
}

/// `mnemonic` when the encoding's extra constraints hold, else `Unknown`.
#[inline]
pub(crate) const fn known_if(valid: bool, mnemonic: crate::Mnemonic) -> crate::Mnemonic {
    if valid {
        mnemonic
    } else {
        crate::Mnemonic::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Xlen;

    #[test]
    fn stack_adjustment_matches_spec_tables() {
        // (rlist, RV32 base, RV64 base) from the cm.push encoding pages.
        let bases = [
            (4, 16, 16),
            (5, 16, 16),
            (6, 16, 32),
            (7, 16, 32),
            (8, 32, 48),
            (9, 32, 48),
            (10, 32, 64),
            (11, 32, 64),
            (12, 48, 80),
            (13, 48, 80),
            (14, 48, 96),
            (15, 64, 112),
        ];
        for (register_list, rv32_base, rv64_base) in bases {
            for spimm in 0..4 {
                let raw = 0xb802 | (register_list << 4) | (spimm << 2);
                assert_eq!(
                    zcmp_stack_adjustment(raw, Xlen::Rv32),
                    rv32_base + spimm * 16
                );
                assert_eq!(
                    zcmp_stack_adjustment(raw, Xlen::Rv64),
                    rv64_base + spimm * 16
                );
            }
        }
    }

    #[test]
    fn saved_register_mapping() {
        let expected = [8, 9, 18, 19, 20, 21, 22, 23];
        for (specifier, register) in expected.into_iter().enumerate() {
            assert_eq!(zcmp_saved_register(specifier as u32), register);
        }
    }
}
