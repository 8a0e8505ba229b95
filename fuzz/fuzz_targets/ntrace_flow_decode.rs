//! Arbitrary bytes as an N-Trace stream, decoded against a real program (the bundled
//! tiny fixture): the flow decoder must never panic, each call must make progress, and
//! the two recovery policies must agree: resynchronising with gaps gives the elements
//! that returning each error and calling again gives, each gap at an offset in the input.
#![no_main]

use code_image::{load_elf, CodeImage};
use libfuzzer_sys::fuzz_target;
use ntrace_flow::{DecoderOptions, FileDecodeInfo, FlowDecoder, Recovery};
use ntrace_message::MessageOptions;
use trace_elements::{ElementKind, GapReason, TraceElement};

static PROGRAM: &[u8] = include_bytes!("../../tests/fixtures/ntrace/tiny-htm/program");

/// The elements other than decode-error gaps, or `None` if the call bound ran out.
fn decode(
    trace: &[u8],
    image: &CodeImage,
    files: &[FileDecodeInfo],
    options: DecoderOptions,
) -> Option<Vec<TraceElement>> {
    let mut decoder = FlowDecoder::new(trace, image, files.to_vec(), options);
    let mut elements = Vec::new();
    // Each call returns an element, an error or the end; bound the calls, not the time.
    for _ in 0..(trace.len() * 64 + 64) {
        match decoder.next_element() {
            Ok(None) => return Some(elements),
            Ok(Some(element)) => match element.kind {
                ElementKind::Gap {
                    reason: GapReason::DecodeError { .. },
                } => {
                    assert_eq!(options.recovery, Recovery::Resync);
                    assert!(element.offset <= trace.len() as u64);
                    let error = decoder.last_recovered_error().expect("the gap's error");
                    assert_eq!(error.offset(), element.offset);
                }
                _ => elements.push(element),
            },
            Err(error) => {
                assert_eq!(options.recovery, Recovery::ReturnError);
                assert!(error.offset() <= trace.len() as u64);
            }
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, trace)) = data.split_first() else { return };
    let mut image = CodeImage::new();
    load_elf(&mut image, "tiny", PROGRAM, None).expect("fixture loads");
    let files = image.file_decode_infos();
    let message = MessageOptions::default()
        .with_src_bits(flags & 3)
        .with_timestamps(flags & 4 != 0)
        .with_address_msb_extension(flags & 8 != 0);
    let options = DecoderOptions::default()
        .with_message(message)
        .with_return_stack_depth(usize::from((flags >> 4) & 7) * 2)
        .with_all_jumps(flags & 128 != 0);
    let returned = decode(trace, &image, &files, options.with_recovery(Recovery::ReturnError));
    let resynchronised = decode(trace, &image, &files, options.with_recovery(Recovery::Resync));
    if let (Some(returned), Some(resynchronised)) = (returned, resynchronised) {
        assert_eq!(returned, resynchronised);
    }
});
