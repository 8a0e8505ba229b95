//! Arbitrary and corrupted traces: the flow decoder never panics, every call makes
//! progress, and every error names a byte offset inside the input.

use code_image::{load_elf, CodeImage, SymbolTable};
use ntrace_flow::{DecoderOptions, FileDecodeInfo, FlowDecoder};
use ntrace_message::MessageOptions;
use proptest::prelude::*;

static PROGRAM: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-htm/program");
static TRACE: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-htm/trace.nt");

fn image() -> (CodeImage, Vec<FileDecodeInfo>) {
    let mut image = CodeImage::new();
    let mut symbols = SymbolTable::default();
    let info = load_elf(&mut image, &mut symbols, "tiny", PROGRAM, None).unwrap();
    let files = FileDecodeInfo::for_image(&image, std::slice::from_ref(&info));
    (image, files)
}

/// Decodes to the end with a bound on calls; returns (elements, errors).
fn exhaust(trace: &[u8], options: DecoderOptions) -> (usize, usize) {
    let (image, files) = image();
    let mut decoder = FlowDecoder::new(trace, &image, files, options);
    let (mut elements, mut errors) = (0, 0);
    let bound = trace.len() * 4096 + 64;
    for _ in 0..bound {
        match decoder.next_element() {
            Ok(None) => return (elements, errors),
            Ok(Some(_)) => elements += 1,
            Err(error) => {
                assert!(
                    error.offset() <= trace.len() as u64,
                    "{error} is past the end ({} bytes)",
                    trace.len()
                );
                errors += 1;
            }
        }
    }
    panic!("no end after {bound} calls on {} bytes", trace.len());
}

fn options(flags: u8) -> DecoderOptions {
    let message = MessageOptions::default()
        .with_src_bits(flags & 3)
        .with_timestamps(flags & 4 != 0)
        .with_address_msb_extension(flags & 8 != 0);
    DecoderOptions::default()
        .with_message(message)
        .with_return_stack_depth(usize::from(flags >> 4) * 2)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(trace in proptest::collection::vec(any::<u8>(), 0..512), flags in any::<u8>()) {
        exhaust(&trace, options(flags));
    }

    #[test]
    fn corrupted_real_traces_never_panic(
        flips in proptest::collection::vec((0..TRACE.len(), any::<u8>()), 1..8),
        cut in 0..TRACE.len(),
    ) {
        let mut trace = TRACE.to_vec();
        for (position, value) in flips {
            trace[position] ^= value;
        }
        trace.truncate(cut.max(1));
        exhaust(&trace, DecoderOptions::default());
    }
}

#[test]
fn the_unmodified_trace_decodes_without_error() {
    let (elements, errors) = exhaust(TRACE, DecoderOptions::default());
    assert_eq!(errors, 0);
    assert!(elements > 50);
}
