//! A small hand-assembled program, an interpreter that makes retirement streams over it,
//! and the expansion of decoded instruction ranges back to PCs.
#![allow(dead_code)]

use code_image::CodeImage;
use debug4_flow::{AccessKind, DataAccess, Debug4Decoder, FlowError, Retirement};
use trace_elements::{ElementKind, ElementSource, TraceElement};

pub fn branch(funct3: u32, rs1: u32, rs2: u32, offset: i32) -> u32 {
    let imm = offset as u32;
    ((imm >> 12) & 1) << 31
        | ((imm >> 5) & 0x3f) << 25
        | rs2 << 20
        | rs1 << 15
        | funct3 << 12
        | ((imm >> 1) & 0xf) << 8
        | ((imm >> 11) & 1) << 7
        | 0x63
}

pub fn jal(rd: u32, offset: i32) -> u32 {
    let imm = offset as u32;
    ((imm >> 20) & 1) << 31
        | ((imm >> 1) & 0x3ff) << 21
        | ((imm >> 11) & 1) << 20
        | ((imm >> 12) & 0xff) << 12
        | rd << 7
        | 0x6f
}

pub fn jalr(rd: u32, rs1: u32) -> u32 {
    rs1 << 15 | rd << 7 | 0x67
}

pub fn lw(rd: u32, rs1: u32) -> u32 {
    rs1 << 15 | 2 << 12 | rd << 7 | 0x03
}

pub fn sw(rs2: u32, rs1: u32) -> u32 {
    rs2 << 20 | rs1 << 15 | 2 << 12 | 0x23
}

pub fn csr(funct3: u32, rd: u32, rs1: u32, csr: u32) -> u32 {
    csr << 20 | rs1 << 15 | funct3 << 12 | rd << 7 | 0x73
}

pub const ADDI: u32 = 0x0010_8093; // addi x1, x1, 1
pub const ECALL: u32 = 0x0000_0073;
pub const C_ADDI: u16 = 0x0085; // c.addi x1, 1
pub const C_NOP: u16 = 0x0001;
pub const C_RET: u16 = 0x8082;

pub enum Word {
    Full(u32),
    Half(u16),
}

/// Assembles `words` at `start` into `image`; returns the address of each.
pub fn assemble(image: &mut CodeImage, file: usize, start: u64, words: &[Word]) -> Vec<u64> {
    let mut bytes = Vec::new();
    let mut addresses = Vec::new();
    for word in words {
        addresses.push(start + bytes.len() as u64);
        match word {
            Word::Full(value) => bytes.extend(value.to_le_bytes()),
            Word::Half(value) => bytes.extend(value.to_le_bytes()),
        }
    }
    image.add_segment(start, bytes, true, file).unwrap();
    addresses
}

/// The test program:
///
/// ```text
/// 0x1000 addi x1,x1,1
/// 0x1004 c.addi x1,1          loop:
/// 0x1006 lw x5,0(x2)
/// 0x100a sw x5,0(x2)
/// 0x100e jal ra,0x1100
/// 0x1012 bne x1,x3,0x1004
/// 0x1016 csrrs x5,cycle,x0
/// 0x101a jalr x0,0(x6)        -> one of the entry points
/// 0x1100 c.nop                function
/// 0x1102 beq x1,x4,0x1108
/// 0x1106 c.nop
/// 0x1108 c.jr ra
/// 0x1200 ecall
/// 0x1204 csrrw x0,mscratch,x5
/// 0x1208 jal x0,0x1000
/// ```
pub fn program() -> CodeImage {
    let mut image = CodeImage::new();
    let file = image.add_file("test");
    assemble(
        &mut image,
        file,
        0x1000,
        &[
            Word::Full(ADDI),
            Word::Half(C_ADDI),
            Word::Full(lw(5, 2)),
            Word::Full(sw(5, 2)),
            Word::Full(jal(1, 0x1100 - 0x100e)),
            Word::Full(branch(1, 1, 3, 0x1004 - 0x1012)),
            Word::Full(csr(2, 5, 0, 0xc00)),
            Word::Full(jalr(0, 6)),
        ],
    );
    assemble(
        &mut image,
        file,
        0x1100,
        &[
            Word::Half(C_NOP),
            Word::Full(branch(0, 1, 4, 6)),
            Word::Half(C_NOP),
            Word::Half(C_RET),
        ],
    );
    assemble(
        &mut image,
        file,
        0x1200,
        &[
            Word::Full(ECALL),
            Word::Full(csr(1, 0, 5, 0x340)),
            Word::Full(jal(0, 0x1000 - 0x1208)),
        ],
    );
    image
}

/// Where the indirect jump and interrupts may go.
pub const ENTRY_POINTS: [u64; 4] = [0x1000, 0x1004, 0x1100, 0x1200];

/// Deterministic xorshift.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One hart running the program: the PC after `pc`, chosen where the code leaves it open.
pub fn successor(pc: u64, rng: &mut Rng) -> u64 {
    match pc {
        0x1000 => 0x1004,
        0x1004 => 0x1006,
        0x1006 => 0x100a,
        0x100a => 0x100e,
        0x100e => 0x1100,
        0x1012 => {
            if rng.below(4) != 0 {
                0x1004
            } else {
                0x1016
            }
        }
        0x1016 => 0x101a,
        0x101a => ENTRY_POINTS[rng.below(4) as usize],
        0x1100 => 0x1102,
        0x1102 => {
            if rng.below(2) == 0 {
                0x1108
            } else {
                0x1106
            }
        }
        0x1106 => 0x1108,
        // The return goes back after the call, or anywhere (a longjmp).
        0x1108 => {
            if rng.below(8) != 0 {
                0x1012
            } else {
                ENTRY_POINTS[rng.below(4) as usize]
            }
        }
        0x1200 => 0x1204,
        0x1204 => 0x1208,
        _ => 0x1000,
    }
}

/// The data access the instruction at `pc` makes.
pub fn data_of(pc: u64, rng: &mut Rng) -> Option<DataAccess> {
    let (kind, address) = match pc {
        0x1006 => (AccessKind::Load, Some(0x8000_0000 + rng.below(64) * 8)),
        0x100a => (AccessKind::Store, Some(0x8000_0000 + rng.below(64) * 8)),
        0x1016 => (AccessKind::CsrRead, None),
        0x1204 => (AccessKind::CsrWrite, None),
        _ => return None,
    };
    Some(DataAccess {
        kind,
        address,
        value: Some(rng.next() >> rng.below(64)),
    })
}

pub fn retirement(hart: u16, pc: u64, rng: &mut Rng) -> Retirement {
    Retirement {
        data: data_of(pc, rng),
        ..Retirement::at(hart, pc)
    }
}

/// Every element to the end, with the gap causes.
pub fn elements(decoder: &mut Debug4Decoder<'_>) -> Vec<(TraceElement, Option<FlowError>)> {
    let mut out = Vec::new();
    decoder
        .for_each_element(|element, cause| out.push((*element, cause.copied())))
        .unwrap();
    out
}

/// The PCs the ranges of `hart` cover, in order.
pub fn pcs_of(
    image: &CodeImage,
    elements: &[(TraceElement, Option<FlowError>)],
    hart: u16,
) -> Vec<u64> {
    let mut pcs = Vec::new();
    for (element, _) in elements {
        if element.hart != hart {
            continue;
        }
        if let ElementKind::InstructionRange {
            start,
            last,
            instructions,
            ..
        } = element.kind
        {
            let mut pc = start;
            for index in 0..instructions {
                pcs.push(pc);
                if index + 1 < instructions {
                    let mut bytes = [0u8; 4];
                    image.read(pc, &mut bytes);
                    let length = if bytes[0] & 3 == 3 { 4 } else { 2 };
                    pc += length;
                }
            }
            assert_eq!(pc, last, "range {start:#x}..{last:#x} is not sequential");
        }
    }
    pcs
}
