//! Fuzzes the debug trace module flow decoder over a small fixed program: any bytes,
//! options from the first byte. Checks that it never panics and always terminates.
#![no_main]

use code_image::CodeImage;
use debug4_flow::{BranchReporting, Debug4Decoder, DecoderOptions, StreamOptions};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use trace_elements::ElementSource;

/// A loop with a branch, a call, a return, an indirect jump, a load, a store, a CSR
/// read, an ecall and a jump to itself (a loop no packet ever ends).
fn program() -> &'static CodeImage {
    static IMAGE: OnceLock<CodeImage> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let words: [u32; 10] = [
            0x0010_8093, // 0x1000 addi x1,x1,1
            0x0001_2283, // 0x1004 lw x5,0(x2)
            0x0051_2023, // 0x1008 sw x5,0(x2)
            0x0080_00ef, // 0x100c jal ra,0x1014
            0xfe30_98e3, // 0x1010 bne x1,x3,0x1000
            0x0000_8067, // 0x1014 jalr x0,0(ra)
            0xc000_22f3, // 0x1018 csrrs x5,cycle,x0
            0x0000_0073, // 0x101c ecall
            0x0003_0067, // 0x1020 jalr x0,0(x6)
            0x0000_006f, // 0x1024 jal x0,0x1024
        ];
        let mut image = CodeImage::new();
        let file = image.add_file("fuzz");
        let bytes = words.iter().flat_map(|word| word.to_le_bytes()).collect();
        image
            .add_segment(0x1000, bytes, true, file)
            .expect("one segment");
        image
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((&config, trace)) = input.split_first() else {
        return;
    };
    let reporting = if config & 1 != 0 {
        BranchReporting::PcPairs
    } else {
        BranchReporting::TakenNotTaken
    };
    let buffer_bytes = match (config >> 1) & 0x7 {
        0 => None,
        units => Some(u64::from(units) * 32),
    };
    let wrap = match config >> 4 {
        0 => None,
        sixteenths => Some(trace.len() as u64 * u64::from(sixteenths) / 16),
    };
    let stream = StreamOptions::default()
        .with_buffer_bytes(buffer_bytes)
        .with_wrap_offset(wrap);
    let options = DecoderOptions::new(stream, reporting).with_walk_limit(1 << 12);
    let mut decoder = Debug4Decoder::new(trace, program(), options);
    let mut elements = 0u64;
    while let Ok(Some(element)) = decoder.next_element() {
        assert!(element.offset <= trace.len() as u64);
        elements += 1;
        // Every sequence gives a bounded number of elements (walks are capped).
        assert!(
            elements <= (trace.len() as u64 + 2) * 2 * (1 << 12),
            "does not terminate"
        );
    }
});
