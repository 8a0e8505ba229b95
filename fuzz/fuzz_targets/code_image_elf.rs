//! Arbitrary bytes as an ELF file: loading must fail cleanly or succeed, never panic;
//! so must walking the loaded code with its instruction set.
#![no_main]

use code_image::{load_any_elf, load_elf, CodeImage, InstructionSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut image = CodeImage::new();
    let _ = load_elf(&mut image, "fuzz", data, Some(0x1000));
    let _ = load_elf(&mut image, "fuzz", data, None);
    let mut any = CodeImage::new();
    if let Ok(elf) = load_any_elf(&mut any, "fuzz", data, Some(u64::MAX - 0xffff)) {
        let _ = elf.link_address(elf.entry.unwrap_or(0));
        for segment in any.segments().iter().filter(|segment| segment.executable) {
            let end = segment.end.min(segment.start.saturating_add(256));
            for address in elf.machine.instruction_addresses(&any, segment.start..end) {
                let _ = any.instruction_at(address);
            }
        }
    }
});
