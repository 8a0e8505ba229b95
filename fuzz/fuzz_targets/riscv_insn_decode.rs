//! Feeds arbitrary bytes to `riscv_insn::decode` the way a trace decoder walks a code image:
//! instruction after instruction, advancing by each decoded length, under fuzzer-chosen options.
//! Any panic, or a length that disagrees with `instruction_length`, is a bug.

#![no_main]

use libfuzzer_sys::fuzz_target;
use riscv_insn::{decode, instruction_length, DecodeOptions, Xlen};
use std::fmt::Write;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, code)) = data.split_first() else { return };
    let options = DecodeOptions {
        xlen: if flags & 1 == 0 { Xlen::Rv32 } else { Xlen::Rv64 },
        zcmp: flags & 2 != 0,
        zcmt: flags & 4 != 0,
    };
    let mut offset = 0usize;
    let mut text = String::new();
    while offset + 2 <= code.len() {
        let mut window = [0u8; 4];
        let available = (code.len() - offset).min(4);
        window[..available].copy_from_slice(&code[offset..offset + available]);
        let raw = u32::from_le_bytes(window);
        let Ok(instruction) = decode(raw, options) else {
            assert_eq!(instruction_length(raw as u16).bytes(), None);
            break;
        };
        assert_eq!(Some(instruction.length), instruction_length(raw as u16).bytes());
        let pc = offset as u64;
        let _ = instruction.direct_target(pc, options.xlen);
        let _ = instruction.constant_load(pc, options.xlen);
        let _ = (instruction.itype(true), instruction.itype_3bit(false), instruction.links());
        text.clear();
        let _ = write!(text, "{instruction}");
        assert!(!text.is_empty());
        offset += usize::from(instruction.length);
    }
});
