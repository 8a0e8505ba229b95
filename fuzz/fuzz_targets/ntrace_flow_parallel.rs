//! Arbitrary bytes as an N-Trace stream, decoded against a real program (the bundled
//! tiny fixture) by the parallel decoder with tiny chunks: it must never panic and must
//! give exactly the serial decoder's output (elements with their instructions, errors,
//! statistics, block profile), under both recovery policies.
#![no_main]

use code_image::{load_elf, CodeImage};
use libfuzzer_sys::fuzz_target;
use ntrace_flow::{
    Decoded, DecoderOptions, FileDecodeInfo, FlowDecoder, ParallelDecoder, ParallelOptions,
    Recovery,
};
use ntrace_message::MessageOptions;
use trace_elements::{ElementKind, TraceElement};

static PROGRAM: &[u8] = include_bytes!("../../tests/fixtures/ntrace/tiny-htm/program");

/// An element with its range's instructions, or a returned error's text.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Element(TraceElement, Vec<u64>),
    Error(String),
}

fn pcs(element: &TraceElement, visit: impl FnOnce(u64, u32, &mut Vec<u64>) -> bool) -> Vec<u64> {
    let mut pcs = Vec::new();
    if let ElementKind::InstructionRange {
        start,
        instructions,
        ..
    } = element.kind
    {
        assert!(visit(start, instructions, &mut pcs));
    }
    pcs
}

fn serial(
    trace: &[u8],
    image: &CodeImage,
    files: &[FileDecodeInfo],
    options: DecoderOptions,
) -> (Vec<Item>, String) {
    let mut decoder = FlowDecoder::new(trace, image, files.to_vec(), options);
    let mut items = Vec::new();
    loop {
        match decoder.next_element() {
            Ok(Some(element)) => {
                let pcs = pcs(&element, |start, count, pcs| {
                    decoder.for_each_instruction(start, count, |pc| pcs.push(pc))
                });
                items.push(Item::Element(element, pcs));
            }
            Ok(None) => break,
            Err(error) => items.push(Item::Error(error.to_string())),
        }
    }
    let mut profile: Vec<_> = decoder
        .block_profile()
        .map(|block| (block.start, block.instructions))
        .collect();
    profile.sort_unstable();
    (items, format!("{:?} {profile:?}", decoder.statistics()))
}

fn parallel(
    trace: &[u8],
    image: &CodeImage,
    files: &[FileDecodeInfo],
    options: DecoderOptions,
    chunk_bytes: usize,
) -> (Vec<Item>, String) {
    let parallel = ParallelOptions::default()
        .with_jobs(2)
        .with_chunk_bytes(chunk_bytes);
    let decoder = ParallelDecoder::new(trace, image, files.to_vec(), options, parallel);
    let mut items = Vec::new();
    let summary = decoder
        .run(|decoded| -> Result<(), ()> {
            match decoded {
                Decoded::Element(decoded) => {
                    let element = decoded.element;
                    let pcs = pcs(&element, |start, count, pcs| {
                        decoded.for_each_instruction(start, count, |pc| pcs.push(pc))
                    });
                    items.push(Item::Element(element, pcs));
                }
                Decoded::Error(error) => items.push(Item::Error(error.to_string())),
            }
            Ok(())
        })
        .expect("the parallel decode runs");
    let mut profile: Vec<_> = summary
        .block_profile
        .iter()
        .map(|block| (block.start, block.instructions))
        .collect();
    profile.sort_unstable();
    (items, format!("{:?} {profile:?}", summary.statistics))
}

fuzz_target!(|data: &[u8]| {
    let Some((&[flags, chunk], trace)) = data.split_first_chunk() else {
        return;
    };
    let mut image = CodeImage::new();
    load_elf(&mut image, "tiny", PROGRAM, None).expect("fixture loads");
    let files = image.file_decode_infos();
    let message = MessageOptions::default()
        .with_src_bits(flags & 3)
        .with_timestamps(flags & 4 != 0)
        .with_address_msb_extension(flags & 8 != 0);
    let recovery = if flags & 16 != 0 {
        Recovery::Resync
    } else {
        Recovery::ReturnError
    };
    let options = DecoderOptions::default()
        .with_message(message)
        .with_return_stack_depth(usize::from(flags >> 5) * 2)
        .with_instruction_ranges(chunk & 128 == 0)
        .with_all_jumps(chunk & 64 != 0)
        .with_recovery(recovery);
    let chunk_bytes = usize::from(chunk & 63) + 1;
    assert_eq!(
        serial(trace, &image, &files, options),
        parallel(trace, &image, &files, options, chunk_bytes)
    );
});
