//! Properties that must hold for every possible input, since the trace decoder feeds this crate
//! whatever bytes sit in the program image.

use proptest::prelude::*;
use riscv_insn::{
    decode, instruction_length, ControlFlow, DecodeError, DecodeOptions, InstructionLength, Itype,
    Mnemonic, Xlen,
};

fn any_options() -> impl Strategy<Value = DecodeOptions> {
    (
        prop_oneof![Just(Xlen::Rv32), Just(Xlen::Rv64)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(xlen, zcmp, zcmt)| DecodeOptions { xlen, zcmp, zcmt })
}

proptest! {
    // No regression files: failures are reproduced by the printed minimal input instead.
    #![proptest_config(ProptestConfig { cases: 20_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn decode_never_panics_and_agrees_with_instruction_length(raw in any::<u32>(), options in any_options()) {
        let result = decode(raw, options);
        match instruction_length(raw as u16) {
            InstructionLength::Reserved => prop_assert_eq!(result, Err(DecodeError::ReservedLength)),
            length => {
                let instruction = result.expect("non-reserved lengths always decode");
                prop_assert_eq!(Some(instruction.length), length.bytes());
                prop_assert_eq!(instruction.xlen, options.xlen);
                if instruction.length == 2 {
                    prop_assert_eq!(instruction.raw, raw & 0xffff);
                } else {
                    prop_assert_eq!(instruction.raw, raw);
                }
                // Everything else must not panic either, for any PC.
                let text = instruction.to_string();
                prop_assert!(!text.is_empty());
                for pc in [0, 0xffff_fffe, u64::MAX - 1] {
                    let _ = instruction.direct_target(pc, options.xlen);
                    let _ = instruction.constant_load(pc, options.xlen);
                    let _ = instruction.next_pc(pc, options.xlen);
                }
                let _ = (instruction.itype(true), instruction.itype_3bit(false), instruction.links());
            }
        }
    }

    #[test]
    fn classification_is_self_consistent(raw in any::<u32>(), options in any_options(), taken in any::<bool>()) {
        let Ok(instruction) = decode(raw, options) else { return Ok(()) };
        if instruction.mnemonic == Mnemonic::Unknown || instruction.mnemonic == Mnemonic::Illegal {
            prop_assert_eq!(instruction.control_flow, ControlFlow::Sequential);
        }
        let has_target = matches!(instruction.control_flow, ControlFlow::Branch { .. } | ControlFlow::Jump { .. });
        prop_assert_eq!(instruction.direct_target(0x8000_0000, options.xlen).is_some(), has_target);
        if let Some(target) = instruction.direct_target(0x8000_0000, Xlen::Rv32) {
            prop_assert!(target <= u64::from(u32::MAX));
            prop_assert_eq!(target % 2, 0, "targets are halfword aligned");
        }
        let itype = instruction.itype(taken);
        prop_assert!(itype != Itype::UninferableJump && itype != Itype::Interrupt);
        let itype_3bit = instruction.itype_3bit(taken) as u8;
        prop_assert!(itype_3bit <= 6);
        // A call must link, and everything that links is a call or a co-routine swap.
        let is_call = matches!(itype, Itype::InferableCall | Itype::UninferableCall | Itype::CoroutineSwap);
        prop_assert_eq!(instruction.links(), is_call);
    }

    #[test]
    fn the_upper_halfword_never_changes_a_compressed_instruction(
        low in (any::<u16>(), 0u16..3).prop_map(|(bits, quadrant)| (bits & !0b11) | quadrant),
        high in any::<u16>(),
        options in any_options(),
    ) {
        let with_zero = decode(u32::from(low), options);
        let with_garbage = decode(u32::from(low) | (u32::from(high) << 16), options);
        prop_assert_eq!(with_zero, with_garbage);
    }
}

/// The 16-bit space is small enough to walk completely, for every option combination.
#[test]
fn every_compressed_encoding_decodes_for_every_option_combination() {
    for xlen in [Xlen::Rv32, Xlen::Rv64] {
        for (zcmp, zcmt) in [(false, false), (true, false), (false, true), (true, true)] {
            let options = DecodeOptions { xlen, zcmp, zcmt };
            for halfword in (0..=u16::MAX).filter(|halfword| halfword & 0b11 != 0b11) {
                let instruction =
                    decode(u32::from(halfword), options).expect("16-bit always decodes");
                assert_eq!(instruction.length, 2);
                let is_unknown = instruction.mnemonic == Mnemonic::Unknown;
                assert!(!instruction.to_string().is_empty());
                assert!(!is_unknown || instruction.control_flow == ControlFlow::Sequential);
            }
        }
    }
}
