//! Arbitrary text as a kallsyms file: parsed or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symbolize::KernelSymbols;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(symbols) = KernelSymbols::parse("fuzz", &text) {
        for address in [0u64, 0xffff_ffff_8000_0000, u64::MAX] {
            let _ = symbols.function(address);
            let _ = symbols.module(address);
        }
    }
});
