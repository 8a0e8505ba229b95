//! Behaviour tests on real encodings. 32-bit and C encodings come from GNU as 2.40
//! (`tests/data/encodings-*.txt`); Zcmp/Zcmt ones, which binutils 2.40 cannot assemble, are
//! hand-encoded from the Zc specification and agree with the encodings in LLVM's MC tests.

use riscv_insn::{
    decode, instruction_length, is_link_register, ControlFlow, DecodeError, DecodeOptions,
    Instruction, InstructionLength, Itype, Mnemonic, Xlen,
};

const RV64: DecodeOptions = DecodeOptions {
    xlen: Xlen::Rv64,
    zcmp: false,
    zcmt: false,
};
const RV32: DecodeOptions = DecodeOptions {
    xlen: Xlen::Rv32,
    zcmp: false,
    zcmt: false,
};
const RV32_ZCMP_ZCMT: DecodeOptions = DecodeOptions {
    xlen: Xlen::Rv32,
    zcmp: true,
    zcmt: true,
};
const RV64_ZCMP_ZCMT: DecodeOptions = DecodeOptions {
    xlen: Xlen::Rv64,
    zcmp: true,
    zcmt: true,
};

fn decoded(raw: u32, options: DecodeOptions) -> Instruction {
    decode(raw, options).unwrap_or_else(|error| panic!("{raw:#x}: {error}"))
}

fn itype(raw: u32, options: DecodeOptions) -> Itype {
    decoded(raw, options).itype(false)
}

// Length encoding.

#[test]
fn length_encoding_16_bit_for_every_quadrant_below_3() {
    for halfword in [0x0000, 0x0001, 0x0002, 0x8082, 0xfffd, 0xfffe, 0x4001] {
        assert_eq!(
            instruction_length(halfword),
            InstructionLength::Bits16,
            "{halfword:#x}"
        );
    }
}

#[test]
fn length_encoding_32_bit_unless_bits_4_to_2_are_all_set() {
    for halfword in [0x0003, 0x0013, 0x8067, 0x006f, 0x0073, 0x001b, 0xfffb] {
        assert_eq!(
            instruction_length(halfword),
            InstructionLength::Bits32,
            "{halfword:#x}"
        );
    }
}

#[test]
fn length_encoding_48_64_and_reserved() {
    assert_eq!(instruction_length(0x001f), InstructionLength::Bits48);
    assert_eq!(instruction_length(0xffdf), InstructionLength::Bits48);
    assert_eq!(instruction_length(0x003f), InstructionLength::Bits64);
    assert_eq!(instruction_length(0xffbf), InstructionLength::Bits64);
    // 80-bit (nnn = 000) up to 176-bit (nnn = 110) and the >= 192-bit escape (nnn = 111).
    for nnn in 0..8u16 {
        assert_eq!(
            instruction_length(0x007f | (nnn << 12)),
            InstructionLength::Reserved
        );
    }
    assert_eq!(instruction_length(0xffff), InstructionLength::Reserved);
}

#[test]
fn length_in_bytes() {
    assert_eq!(InstructionLength::Bits16.bytes(), Some(2));
    assert_eq!(InstructionLength::Bits32.bytes(), Some(4));
    assert_eq!(InstructionLength::Bits48.bytes(), Some(6));
    assert_eq!(InstructionLength::Bits64.bytes(), Some(8));
    assert_eq!(InstructionLength::Reserved.bytes(), None);
}

#[test]
fn long_instructions_keep_their_length_and_are_sequential() {
    let instruction = decoded(0x1234_001f, RV64);
    assert_eq!((instruction.length, instruction.raw), (6, 0x1234_001f));
    assert_eq!(instruction.control_flow, ControlFlow::Sequential);
    assert_eq!(instruction.mnemonic, Mnemonic::Unknown);
    assert_eq!(decoded(0x0000_003f, RV32).length, 8);
}

#[test]
fn reserved_lengths_are_errors() {
    assert_eq!(decode(0x0000_007f, RV64), Err(DecodeError::ReservedLength));
    assert_eq!(decode(0xffff_ffff, RV32), Err(DecodeError::ReservedLength));
}

#[test]
fn all_zero_halfword_is_illegal_but_has_a_length() {
    // The upper half must not matter.
    let instruction = decoded(0xdead_0000, RV64);
    assert_eq!(instruction.mnemonic, Mnemonic::Illegal);
    assert_eq!(instruction.length, 2);
    assert_eq!(instruction.raw, 0);
    assert_eq!(instruction.control_flow, ControlFlow::Sequential);
}

#[test]
fn only_the_low_halfword_of_a_compressed_instruction_is_used() {
    assert_eq!(decoded(0xffff_8082, RV64), decoded(0x0000_8082, RV64));
}

#[test]
fn unknown_encodings_are_sequential() {
    // custom-0, a Zbb instruction (clz a0,a0), the Zcb c.lbu space, c.jr x0.
    for raw in [0x0000_000b, 0x6005_1513, 0x8000, 0x8002] {
        let instruction = decoded(raw, RV64);
        assert_eq!(instruction.mnemonic, Mnemonic::Unknown, "{raw:#x}");
        assert_eq!(
            instruction.control_flow,
            ControlFlow::Sequential,
            "{raw:#x}"
        );
        assert_eq!(instruction.itype(true), Itype::None);
    }
}

// Table "Generating itype for different instructions" (N-Trace), one test per row.

#[test]
fn itype_ecall_ebreak_c_ebreak_are_exceptions() {
    assert_eq!(itype(0x0000_0073, RV64), Itype::Exception); // ecall
    assert_eq!(itype(0x0010_0073, RV64), Itype::Exception); // ebreak
    assert_eq!(itype(0x9002, RV64), Itype::Exception); // c.ebreak
}

#[test]
fn itype_mret_sret_are_trap_returns() {
    assert_eq!(itype(0x3020_0073, RV64), Itype::TrapReturn);
    assert_eq!(itype(0x1020_0073, RV64), Itype::TrapReturn);
    assert_eq!(itype(0x7020_0073, RV64), Itype::TrapReturn); // mnret
    assert_eq!(itype(0x7b20_0073, RV64), Itype::TrapReturn); // dret
    assert_eq!(itype(0x0020_0073, RV64), Itype::TrapReturn); // uret
}

#[test]
fn itype_conditional_branch_not_taken() {
    assert_eq!(
        decoded(0xfab5_06e3, RV64).itype(false),
        Itype::NotTakenBranch
    ); // beq a0,a1
    assert_eq!(decoded(0xd569, RV64).itype(false), Itype::NotTakenBranch); // c.beqz
}

#[test]
fn itype_conditional_branch_taken() {
    assert_eq!(decoded(0xfab5_06e3, RV64).itype(true), Itype::TakenBranch);
    assert_eq!(decoded(0xf4e1, RV64).itype(true), Itype::TakenBranch); // c.bnez
}

#[test]
fn itype_any_other_instruction_is_none() {
    for raw in [
        0xffb5_8513,
        0x0808,
        0x1050_0073,
        0x1234_5537,
        0x30200073 ^ 0x1000_0000,
    ] {
        // addi, c.addi4spn, wfi, lui, and 0x2020_0073 (not a trap return)
        assert_eq!(decoded(raw, RV64).itype(true), Itype::None, "{raw:#x}");
    }
}

#[test]
fn itype_jal_rd_link_is_direct_call() {
    assert_eq!(itype(0xfedf_f0ef, RV64), Itype::InferableCall); // jal ra
    assert_eq!(itype(0xfe5f_f2ef, RV64), Itype::InferableCall); // jal t0
}

#[test]
fn itype_jal_rd_x0_is_other_inferable_jump() {
    assert_eq!(itype(0x31c0_006f, RV64), Itype::OtherInferableJump); // jal zero (Table 2: rd!=link)
}

#[test]
fn itype_jal_rd_other_is_other_direct_jump() {
    assert_eq!(itype(0x3140_066f, RV64), Itype::OtherInferableJump); // jal a2
}

#[test]
fn itype_jalr_rd_link_rs_not_link_is_indirect_call() {
    assert_eq!(itype(0xff87_80e7, RV64), Itype::UninferableCall); // jalr ra,-8(a5)
    assert_eq!(itype(0x0006_82e7, RV64), Itype::UninferableCall); // jalr t0,0(a3)
}

#[test]
fn itype_jalr_rd_link_rs_link_same_is_indirect_call() {
    assert_eq!(itype(0x0000_80e7, RV64), Itype::UninferableCall); // jalr ra,0(ra)
    assert_eq!(itype(0x0002_82e7, RV64), Itype::UninferableCall); // jalr t0,0(t0)
}

#[test]
fn itype_jalr_rd_link_rs_other_link_is_coroutine_swap() {
    assert_eq!(itype(0x0002_80e7, RV64), Itype::CoroutineSwap); // jalr ra,0(t0)
    assert_eq!(itype(0x0000_82e7, RV64), Itype::CoroutineSwap); // jalr t0,0(ra)
}

#[test]
fn itype_jalr_rd_not_link_rs_link_is_return() {
    assert_eq!(itype(0x0000_8067, RV64), Itype::Return); // jalr zero,0(ra)
    assert_eq!(itype(0x0002_8067, RV64), Itype::Return); // jalr zero,0(t0)
    assert_eq!(itype(0x0040_8567, RV64), Itype::Return); // jalr a0,4(ra)
    assert_eq!(itype(0x0042_8567, RV64), Itype::Return); // jalr a0,4(t0)
}

#[test]
fn itype_jalr_rd_x0_rs_not_link_is_other_uninferable_jump() {
    assert_eq!(itype(0x0107_8067, RV64), Itype::OtherUninferableJump); // jalr zero,16(a5)
}

#[test]
fn itype_jalr_rd_other_rs_not_link_is_other_indirect_jump() {
    assert_eq!(itype(0x0045_8567, RV64), Itype::OtherUninferableJump); // jalr a0,4(a1)
}

#[test]
fn itype_c_jal_is_direct_call() {
    assert_eq!(itype(0x3f61, RV32), Itype::InferableCall);
}

#[test]
fn itype_c_jalr_x5_is_coroutine_swap() {
    assert_eq!(itype(0x9282, RV64), Itype::CoroutineSwap);
}

#[test]
fn itype_c_jalr_other_is_indirect_call() {
    assert_eq!(itype(0x9082, RV64), Itype::UninferableCall); // c.jalr ra
    assert_eq!(itype(0x9782, RV64), Itype::UninferableCall); // c.jalr a5
}

#[test]
fn itype_c_jr_link_is_return() {
    assert_eq!(itype(0x8082, RV64), Itype::Return); // c.jr ra
    assert_eq!(itype(0x8282, RV64), Itype::Return); // c.jr t0
}

#[test]
fn itype_c_jr_other_is_other_uninferable_jump() {
    assert_eq!(itype(0x8782, RV64), Itype::OtherUninferableJump); // c.jr a5
}

#[test]
fn itype_c_j_is_other_inferable_jump() {
    assert_eq!(itype(0xb969, RV64), Itype::OtherInferableJump);
}

#[test]
fn itype_cm_jt_has_no_special_type() {
    assert_eq!(itype(0xa006, RV32_ZCMP_ZCMT), Itype::None); // cm.jt 1 (Table 2: 0)
}

#[test]
fn itype_cm_jalt_is_direct_call() {
    assert_eq!(itype(0xa082, RV32_ZCMP_ZCMT), Itype::InferableCall); // cm.jalt 32
}

#[test]
fn itype_cm_popret_and_popretz_are_returns() {
    assert_eq!(itype(0xbe42, RV32_ZCMP_ZCMT), Itype::Return); // cm.popret {ra},16
    assert_eq!(itype(0xbcfe, RV32_ZCMP_ZCMT), Itype::Return); // cm.popretz {ra,s0-s11},112
}

#[test]
fn itype_3bit_rows() {
    let none = [0xfedf_f0ef, 0x31c0_006f, 0xb969, 0xffb5_8513];
    for raw in none {
        assert_eq!(decoded(raw, RV64).itype_3bit(true), Itype::None, "{raw:#x}");
    }
    assert_eq!(decoded(0x3f61, RV32).itype_3bit(true), Itype::None); // c.jal
    assert_eq!(
        decoded(0xa006, RV32_ZCMP_ZCMT).itype_3bit(true),
        Itype::None
    ); // cm.jt
    assert_eq!(
        decoded(0xa082, RV32_ZCMP_ZCMT).itype_3bit(true),
        Itype::None
    ); // cm.jalt
    let indirect = [
        0x0000_8067,
        0xff87_80e7,
        0x0002_80e7,
        0x0045_8567,
        0x8082,
        0x8782,
        0x9282,
    ];
    for raw in indirect {
        assert_eq!(
            decoded(raw, RV64).itype_3bit(false),
            Itype::UninferableJump,
            "{raw:#x}"
        );
    }
    assert_eq!(
        decoded(0xbe42, RV32_ZCMP_ZCMT).itype_3bit(false),
        Itype::UninferableJump
    );
    assert_eq!(
        decoded(0xfab5_06e3, RV64).itype_3bit(true),
        Itype::TakenBranch
    );
    assert_eq!(
        decoded(0xfab5_06e3, RV64).itype_3bit(false),
        Itype::NotTakenBranch
    );
    assert_eq!(
        decoded(0x0000_0073, RV64).itype_3bit(false),
        Itype::Exception
    );
    assert_eq!(
        decoded(0x3020_0073, RV64).itype_3bit(false),
        Itype::TrapReturn
    );
}

#[test]
fn itype_numbers_are_the_specs() {
    let expected = [
        (Itype::None, 0),
        (Itype::Exception, 1),
        (Itype::Interrupt, 2),
        (Itype::TrapReturn, 3),
        (Itype::NotTakenBranch, 4),
        (Itype::TakenBranch, 5),
        (Itype::UninferableJump, 6),
        (Itype::UninferableCall, 8),
        (Itype::InferableCall, 9),
        (Itype::UninferableTailCall, 10),
        (Itype::InferableTailCall, 11),
        (Itype::CoroutineSwap, 12),
        (Itype::Return, 13),
        (Itype::OtherUninferableJump, 14),
        (Itype::OtherInferableJump, 15),
    ];
    for (itype, number) in expected {
        assert_eq!(itype as u8, number);
        assert_eq!(Itype::from_u8(number), Some(itype));
    }
    assert_eq!(Itype::from_u8(7), None);
    assert_eq!(Itype::from_u8(16), None);
}

#[test]
fn link_registers() {
    assert!(is_link_register(1));
    assert!(is_link_register(5));
    for register in (0..32).filter(|&register| register != 1 && register != 5) {
        assert!(!is_link_register(register), "x{register}");
    }
}

#[test]
fn links_is_true_only_for_calls() {
    let calls = [
        0xfedf_f0ef,
        0xfe5f_f2ef,
        0xff87_80e7,
        0x0002_80e7,
        0x9082,
        0x9282,
    ];
    for raw in calls {
        assert!(decoded(raw, RV64).links(), "{raw:#x}");
    }
    assert!(decoded(0x3f61, RV32).links()); // c.jal
    assert!(decoded(0xa082, RV32_ZCMP_ZCMT).links()); // cm.jalt
    let not_calls = [
        0x31c0_006f,
        0x3140_066f,
        0x0000_8067,
        0x0045_8567,
        0x8082,
        0xb969,
        0xfab5_06e3,
    ];
    for raw in not_calls {
        assert!(!decoded(raw, RV64).links(), "{raw:#x}");
    }
    assert!(!decoded(0xa006, RV32_ZCMP_ZCMT).links()); // cm.jt
    assert!(!decoded(0xbe42, RV32_ZCMP_ZCMT).links()); // cm.popret
}

// Control flow details.

#[test]
fn jump_register_fields() {
    assert_eq!(
        decoded(0xff87_80e7, RV64).control_flow,
        ControlFlow::JumpRegister {
            rd: 1,
            rs1: 15,
            offset: -8
        }
    );
    assert_eq!(
        decoded(0x8782, RV64).control_flow,
        ControlFlow::JumpRegister {
            rd: 0,
            rs1: 15,
            offset: 0
        }
    );
    assert_eq!(
        decoded(0x9282, RV64).control_flow,
        ControlFlow::JumpRegister {
            rd: 1,
            rs1: 5,
            offset: 0
        }
    );
}

#[test]
fn direct_targets_forward_and_backward() {
    // From encodings-rv64.txt: `54: beq a0,a1,0`, `58: bne a0,zero,334`, `366: c.j 0`,
    // `36a: c.beqz a0,334`, `18: jal zero,334`.
    let cases = [
        (0xfab5_06e3, 0x54, 0x0),
        (0x2c05_1e63, 0x58, 0x334),
        (0xb969, 0x366, 0x0),
        (0xd569, 0x36a, 0x334),
        (0x31c0_006f, 0x18, 0x334),
    ];
    for (raw, pc, target) in cases {
        assert_eq!(
            decoded(raw, RV64).direct_target(pc, Xlen::Rv64),
            Some(target),
            "{raw:#x}"
        );
    }
    assert_eq!(
        decoded(0xfab5_06e3, RV64).control_flow,
        ControlFlow::Branch { offset: -0x54 }
    );
}

#[test]
fn direct_target_extremes() {
    // jal zero,-1 MiB and jal zero,+1 MiB - 2; beq with -4096 and +4094.
    assert_eq!(
        decoded(0x8000_006f, RV64).control_flow,
        ControlFlow::Jump {
            rd: 0,
            offset: -(1 << 20)
        }
    );
    assert_eq!(
        decoded(0x7fff_f06f, RV64).control_flow,
        ControlFlow::Jump {
            rd: 0,
            offset: (1 << 20) - 2
        }
    );
    assert_eq!(
        decoded(0x8000_0063, RV64).control_flow,
        ControlFlow::Branch { offset: -4096 }
    );
    assert_eq!(
        decoded(0x7e00_0fe3, RV64).control_flow,
        ControlFlow::Branch { offset: 4094 }
    );
    // c.j -2048 and +2046, c.beqz -256 and +254.
    assert_eq!(
        decoded(0xb001, RV64).control_flow,
        ControlFlow::Jump {
            rd: 0,
            offset: -2048
        }
    );
    assert_eq!(
        decoded(0xaffd, RV64).control_flow,
        ControlFlow::Jump {
            rd: 0,
            offset: 2046
        }
    );
    assert_eq!(
        decoded(0xd001, RV64).control_flow,
        ControlFlow::Branch { offset: -256 }
    );
    assert_eq!(
        decoded(0xcc7d, RV64).control_flow,
        ControlFlow::Branch { offset: 254 }
    );
}

#[test]
fn direct_target_wraps_and_truncates_on_rv32() {
    let jump_back = decoded(0xfedf_f0ef, RV32); // jal ra,.-20
    assert_eq!(jump_back.direct_target(0x10, Xlen::Rv32), Some(0xffff_fffc));
    assert_eq!(
        jump_back.direct_target(0x10, Xlen::Rv64),
        Some(0xffff_ffff_ffff_fffc)
    );
    let jump_forward = decoded(0x31c0_006f, RV32); // jal zero,.+796
    assert_eq!(
        jump_forward.direct_target(0xffff_fff0, Xlen::Rv32),
        Some(0x30c)
    );
    assert_eq!(
        jump_forward.direct_target(0xffff_fff0, Xlen::Rv64),
        Some(0x1_0000_030c)
    );
    assert_eq!(jump_forward.next_pc(0xffff_fffc, Xlen::Rv32), 0);
}

#[test]
fn no_direct_target_for_indirect_or_sequential() {
    for raw in [0x0000_8067, 0x8082, 0xffb5_8513, 0x0000_0073] {
        assert_eq!(
            decoded(raw, RV64).direct_target(0x1000, Xlen::Rv64),
            None,
            "{raw:#x}"
        );
    }
    assert_eq!(
        decoded(0xa006, RV32_ZCMP_ZCMT).direct_target(0x1000, Xlen::Rv32),
        None
    );
}

#[test]
fn jalr_with_nonzero_funct3_is_unknown() {
    assert_eq!(decoded(0x0000_9067, RV64).mnemonic, Mnemonic::Unknown);
    assert_eq!(
        decoded(0x0000_9067, RV64).control_flow,
        ControlFlow::Sequential
    );
}

// constant_load

#[test]
fn constant_load_lui_sign_extends_on_rv64_only() {
    let lui = decoded(0x8000_04b7, RV64); // lui s1,0x80000
    assert_eq!(
        lui.constant_load(0, Xlen::Rv64),
        Some((9, 0xffff_ffff_8000_0000))
    );
    assert_eq!(lui.constant_load(0, Xlen::Rv32), Some((9, 0x8000_0000)));
    let positive = decoded(0x1234_5537, RV64); // lui a0,0x12345
    assert_eq!(
        positive.constant_load(0x4000, Xlen::Rv64),
        Some((10, 0x1234_5000))
    );
}

#[test]
fn constant_load_auipc_adds_the_pc() {
    let auipc = decoded(0x0000_1597, RV64); // auipc a1,0x1
    assert_eq!(
        auipc.constant_load(0x1_0000, Xlen::Rv64),
        Some((11, 0x1_1000))
    );
    let negative = decoded(0xffff_f097, RV64); // auipc ra,0xfffff
    assert_eq!(
        negative.constant_load(0x1_0010, Xlen::Rv64),
        Some((1, 0x0_f010))
    );
    assert_eq!(
        negative.constant_load(0x10, Xlen::Rv32),
        Some((1, 0xffff_f010))
    );
    assert_eq!(
        negative.constant_load(0x10, Xlen::Rv64),
        Some((1, 0xffff_ffff_ffff_f010))
    );
}

#[test]
fn constant_load_c_lui() {
    assert_eq!(
        decoded(0x66fd, RV64).constant_load(0, Xlen::Rv64),
        Some((13, 0x1f000))
    ); // c.lui a3,0x1f
    assert_eq!(
        decoded(0x7701, RV64).constant_load(0, Xlen::Rv64),
        Some((14, 0xffff_ffff_fffe_0000))
    ); // c.lui a4,0xfffe0
    assert_eq!(
        decoded(0x7701, RV32).constant_load(0, Xlen::Rv32),
        Some((14, 0xfffe_0000))
    );
}

#[test]
fn constant_load_ignores_x0_and_other_instructions() {
    assert_eq!(
        decoded(0x0000_1017, RV64).constant_load(0, Xlen::Rv64),
        None
    ); // auipc zero,0x1
    assert_eq!(
        decoded(0x0000_1037, RV64).constant_load(0, Xlen::Rv64),
        None
    ); // lui zero,0x1
    assert_eq!(decoded(0x6005, RV64).constant_load(0, Xlen::Rv64), None); // c.lui zero,1 (hint)
    assert_eq!(decoded(0x7139, RV64).constant_load(0, Xlen::Rv64), None); // c.addi16sp
    assert_eq!(
        decoded(0xffb5_8513, RV64).constant_load(0, Xlen::Rv64),
        None
    ); // addi
}

// RV32 / RV64 differences.

#[test]
fn compressed_encodings_that_depend_on_xlen() {
    let pairs = [
        (0x2595, Mnemonic::CJal, Mnemonic::CAddiw),
        (0x6b98, Mnemonic::CFlw, Mnemonic::CLd),
        (0xeb98, Mnemonic::CFsw, Mnemonic::CSd),
        (0x6622, Mnemonic::CFlwsp, Mnemonic::CLdsp),
        (0xe432, Mnemonic::CFswsp, Mnemonic::CSdsp),
        (0x9d0d, Mnemonic::Unknown, Mnemonic::CSubw),
        (0x9d2d, Mnemonic::Unknown, Mnemonic::CAddw),
        // Shift amounts >= 32 are reserved on RV32.
        (0x95fd, Mnemonic::Unknown, Mnemonic::CSrai),
        (0x1502, Mnemonic::Unknown, Mnemonic::CSlli),
    ];
    for (raw, rv32, rv64) in pairs {
        assert_eq!(decoded(raw, RV32).mnemonic, rv32, "{raw:#x} on RV32");
        assert_eq!(decoded(raw, RV64).mnemonic, rv64, "{raw:#x} on RV64");
    }
    assert_eq!(
        decoded(0x2595, RV32).control_flow,
        ControlFlow::Jump {
            rd: 1,
            offset: 0x664
        }
    );
    assert_eq!(decoded(0x2595, RV64).control_flow, ControlFlow::Sequential);
}

#[test]
fn rv64_only_standard_encodings_are_unknown_on_rv32() {
    let rv64_only = [
        (0x0007_b503, Mnemonic::Ld),
        (0x0087_e803, Mnemonic::Lwu),
        (0x7ed6_3fa3, Mnemonic::Sd),
        (0x00c5_853b, Mnemonic::Addw),
        (0xffd5_851b, Mnemonic::Addiw),
        (0x0215_d513, Mnemonic::Srli), // shamt 33
        (0x03f5_9513, Mnemonic::Slli), // shamt 63
        (0x1405_b52f, Mnemonic::LrD),
        (0xc025_f553, Mnemonic::FcvtLS),
        (0xe205_8553, Mnemonic::FmvXD),
        (0xf205_8553, Mnemonic::FmvDX),
    ];
    for (raw, mnemonic) in rv64_only {
        assert_eq!(decoded(raw, RV64).mnemonic, mnemonic, "{raw:#x}");
        assert_eq!(decoded(raw, RV32).mnemonic, Mnemonic::Unknown, "{raw:#x}");
    }
}

#[test]
fn reserved_compressed_encodings() {
    let reserved = [
        0x0004, // c.addi4spn with nzuimm = 0
        0x6101, // c.addi16sp with nzimm = 0
        0x6501, // c.lui a0 with nzimm = 0
        0x4002, // c.lwsp zero
        0x8002, // c.jr zero
        0x9c41, // Zcb space / reserved CA encodings
    ];
    for raw in reserved {
        assert_eq!(decoded(raw, RV64).mnemonic, Mnemonic::Unknown, "{raw:#x}");
    }
    assert_eq!(decoded(0x6002, RV64).mnemonic, Mnemonic::Unknown); // c.ldsp zero
    assert_eq!(decoded(0x2001, RV64).mnemonic, Mnemonic::Unknown); // c.addiw zero
    assert_eq!(decoded(0x2001, RV32).mnemonic, Mnemonic::CJal);
}

// Zcmp / Zcmt.

#[test]
fn zcmp_and_zcmt_replace_zcd_only_when_enabled() {
    let fsdsp_space = [0xa006, 0xbe42, 0xb842, 0xaca2];
    for raw in fsdsp_space {
        assert_eq!(decoded(raw, RV32).mnemonic, Mnemonic::CFsdsp, "{raw:#x}");
        assert_eq!(decoded(raw, RV64).mnemonic, Mnemonic::CFsdsp, "{raw:#x}");
    }
    // With Zcmp or Zcmt the other Zcd encodings do not exist either.
    for raw in [0x2588, 0xa58c, 0x2562, 0xa42a] {
        assert_eq!(
            decoded(raw, RV32_ZCMP_ZCMT).mnemonic,
            Mnemonic::Unknown,
            "{raw:#x}"
        );
    }
    let zcmt_only = DecodeOptions {
        xlen: Xlen::Rv32,
        zcmp: false,
        zcmt: true,
    };
    let zcmp_only = DecodeOptions {
        xlen: Xlen::Rv32,
        zcmp: true,
        zcmt: false,
    };
    assert_eq!(decoded(0xa006, zcmt_only).mnemonic, Mnemonic::CmJt);
    assert_eq!(decoded(0xa006, zcmp_only).mnemonic, Mnemonic::Unknown);
    assert_eq!(decoded(0xbe42, zcmp_only).mnemonic, Mnemonic::CmPopret);
    assert_eq!(decoded(0xbe42, zcmt_only).mnemonic, Mnemonic::Unknown);
}

#[test]
fn zcmt_table_jumps() {
    assert_eq!(
        decoded(0xa006, RV32_ZCMP_ZCMT).control_flow,
        ControlFlow::TableJump { index: 1 }
    );
    let highest_jt = decoded(0xa07e, RV32_ZCMP_ZCMT);
    assert_eq!(
        (highest_jt.mnemonic, highest_jt.control_flow),
        (Mnemonic::CmJt, ControlFlow::TableJump { index: 31 })
    );
    let first_jalt = decoded(0xa082, RV64_ZCMP_ZCMT);
    assert_eq!(
        (first_jalt.mnemonic, first_jalt.control_flow),
        (Mnemonic::CmJalt, ControlFlow::TableJump { index: 32 })
    );
    assert_eq!(
        decoded(0xa3fe, RV32_ZCMP_ZCMT).control_flow,
        ControlFlow::TableJump { index: 255 }
    );
}

#[test]
fn zcmp_push_pop_and_moves() {
    let cases = [
        (
            0xb842,
            Mnemonic::CmPush,
            ControlFlow::Sequential,
            "cm.push {ra},-16",
        ),
        (
            0xba66,
            Mnemonic::CmPop,
            ControlFlow::Sequential,
            "cm.pop {ra,s0-s1},32",
        ),
        (
            0xbcfe,
            Mnemonic::CmPopretz,
            ControlFlow::PopReturn,
            "cm.popretz {ra,s0-s11},112",
        ),
        (
            0xbc82,
            Mnemonic::CmPopretz,
            ControlFlow::PopReturn,
            "cm.popretz {ra,s0-s3},32",
        ),
        (
            0xbe42,
            Mnemonic::CmPopret,
            ControlFlow::PopReturn,
            "cm.popret {ra},16",
        ),
        (
            0xaca2,
            Mnemonic::CmMvsa01,
            ControlFlow::Sequential,
            "cm.mvsa01 s1,s0",
        ),
        (
            0xac66,
            Mnemonic::CmMva01s,
            ControlFlow::Sequential,
            "cm.mva01s s0,s1",
        ),
        (
            0xaffe,
            Mnemonic::CmMva01s,
            ControlFlow::Sequential,
            "cm.mva01s s7,s7",
        ),
        (
            0xa006,
            Mnemonic::CmJt,
            ControlFlow::TableJump { index: 1 },
            "cm.jt 1",
        ),
    ];
    for (raw, mnemonic, control_flow, text) in cases {
        let instruction = decoded(raw, RV32_ZCMP_ZCMT);
        assert_eq!(
            (instruction.mnemonic, instruction.control_flow),
            (mnemonic, control_flow),
            "{raw:#x}"
        );
        assert_eq!(instruction.to_string(), text);
    }
    // RV64 stack adjustments are larger for the same register list.
    assert_eq!(
        decoded(0xbcf2, RV64_ZCMP_ZCMT).to_string(),
        "cm.popretz {ra,s0-s11},112"
    );
    assert_eq!(
        decoded(0xba62, RV64_ZCMP_ZCMT).to_string(),
        "cm.pop {ra,s0-s1},32"
    );
}

#[test]
fn zcmp_reserved_encodings() {
    // Register lists 0-3, cm.mvsa01 with equal registers, unassigned move and push/pop
    // encodings, and the other funct3 = 101 sub-spaces.
    for raw in [
        0xb802, 0xb832, 0xac22, 0xac82, 0xbb42, 0xbd42, 0xa402, 0xa802, 0xb002, 0xb402,
    ] {
        assert_eq!(
            decoded(raw, RV32_ZCMP_ZCMT).mnemonic,
            Mnemonic::Unknown,
            "{raw:#x}"
        );
        assert_eq!(
            decoded(raw, RV32_ZCMP_ZCMT).control_flow,
            ControlFlow::Sequential,
            "{raw:#x}"
        );
    }
}

// Text.

#[test]
fn display_of_control_flow_and_constant_loads() {
    let cases = [
        (0xfedf_f0ef, RV64, "jal ra,.-20"),
        (0x31c0_006f, RV64, "jal zero,.+796"),
        (0xff87_80e7, RV64, "jalr ra,-8(a5)"),
        (0xfab5_06e3, RV64, "beq a0,a1,.-84"),
        (0x8082, RV64, "c.jr ra"),
        (0x9282, RV64, "c.jalr t0"),
        (0xb969, RV64, "c.j .-870"),
        (0xd569, RV64, "c.beqz a0,.-54"),
        (0x3f61, RV32, "c.jal .-104"),
        (0x9002, RV64, "c.ebreak"),
        (0x0000_0073, RV64, "ecall"),
        (0x3020_0073, RV64, "mret"),
        (0x1234_5537, RV64, "lui a0,0x12345"),
        (0xffff_f097, RV64, "auipc ra,0xfffff"),
        (0x7701, RV64, "c.lui a4,0xfffe0"),
        (0x0001, RV64, "c.nop"),
        (0x0000, RV64, "illegal"),
        (0x0000_000b, RV64, ".4byte 0x0000000b"),
        (0x8002, RV64, ".2byte 0x8002"),
        (0x1405_b52f, RV64, "lr.d.aq a0,(a1)"),
    ];
    for (raw, options, text) in cases {
        assert_eq!(decoded(raw, options).to_string(), text, "{raw:#x}");
    }
}

#[test]
fn mnemonic_text_is_unique_and_lowercase() {
    let mut seen = std::collections::HashSet::new();
    for mnemonic in Mnemonic::ALL {
        let text = mnemonic.as_str();
        assert!(seen.insert(text), "duplicate {text}");
        assert_eq!(text, text.to_lowercase());
        assert_eq!(mnemonic.to_string(), text);
    }
    assert!(Mnemonic::ALL.len() > 230);
}

#[test]
fn decode_options_default_is_rv64_without_zcmp_or_zcmt() {
    assert_eq!(DecodeOptions::default(), RV64);
    assert_eq!(DecodeOptions::new(Xlen::Rv32), RV32);
}

#[test]
fn decode_error_is_a_std_error() {
    let error: Box<dyn std::error::Error> = Box::new(DecodeError::ReservedLength);
    assert!(error.to_string().contains("reserved"));
}
