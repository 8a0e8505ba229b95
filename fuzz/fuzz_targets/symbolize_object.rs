//! Arbitrary bytes as an ELF with DWARF: the symbolizer never panics, whatever the
//! symbol table, line programs or DIE trees say.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symbolize::ObjectSymbolizer;

fuzz_target!(|data: &[u8]| {
    let Ok(object) = ObjectSymbolizer::new("fuzz", data.to_vec()) else {
        return;
    };
    let _ = object.build_id();
    for offset in [0u64, 0x40, 0x1000, 0x10000] {
        if let Some(vaddr) = object.vaddr_of_offset(offset) {
            let _ = object.frames(vaddr);
            let _ = object.function(vaddr);
        }
    }
});
