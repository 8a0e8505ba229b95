//! Arbitrary bytes as an ELF file: loading must fail cleanly or succeed, never panic.
#![no_main]

use code_image::{load_elf, CodeImage, SymbolTable};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut image = CodeImage::new();
    let mut symbols = SymbolTable::default();
    let _ = load_elf(&mut image, &mut symbols, "fuzz", data, Some(0x1000));
    let _ = load_elf(&mut image, &mut symbols, "fuzz", data, None);
});
