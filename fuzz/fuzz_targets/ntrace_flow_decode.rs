//! Arbitrary bytes as an N-Trace stream, decoded against a real program (the bundled
//! tiny fixture): the flow decoder must never panic, and each call must make progress.
#![no_main]

use code_image::{load_elf, CodeImage};
use libfuzzer_sys::fuzz_target;
use ntrace_flow::{DecoderOptions, FlowDecoder};
use ntrace_message::MessageOptions;

static PROGRAM: &[u8] = include_bytes!("../../tests/fixtures/ntrace/tiny-htm/program");

fuzz_target!(|data: &[u8]| {
    let Some((&flags, trace)) = data.split_first() else { return };
    let mut image = CodeImage::new();
    load_elf(&mut image, "tiny", PROGRAM, None).expect("fixture loads");
    let files = image.file_decode_infos();
    let message = MessageOptions::default()
        .with_src_bits(flags & 3)
        .with_timestamps(flags & 4 != 0)
        .with_address_msb_extension(flags & 8 != 0);
    let options = DecoderOptions::default().with_message(message).with_return_stack_depth(usize::from(flags >> 4) * 2);
    let mut decoder = FlowDecoder::new(trace, &image, files, options);
    // Each call returns an element, an error or the end; bound the calls, not the time.
    for _ in 0..(trace.len() * 64 + 64) {
        match decoder.next_element() {
            Ok(None) => break,
            Ok(Some(_)) | Err(_) => {}
        }
    }
});
