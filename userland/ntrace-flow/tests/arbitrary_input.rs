//! Arbitrary and corrupted traces: the flow decoder never panics, every call makes
//! progress, and every error names a byte offset inside the input.

use code_image::{load_elf, CodeImage};
use ntrace_flow::{ContextCode, DecoderOptions, FileDecodeInfo, FlowDecoder, ProgramCode};
use ntrace_message::{CorrelationEvent, MessageOptions};
use proptest::prelude::*;

static PROGRAM: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-htm/program");
static TRACE: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-htm/trace.nt");

fn image() -> (CodeImage, Vec<FileDecodeInfo>) {
    let mut image = CodeImage::new();
    load_elf(&mut image, "tiny", PROGRAM, None).unwrap();
    let files = image.file_decode_infos();
    (image, files)
}

/// Decodes to the end with a bound on calls; returns (elements, errors).
fn exhaust(trace: &[u8], options: DecoderOptions) -> (usize, usize) {
    let (image, files) = image();
    exhaust_decoder(FlowDecoder::new(trace, &image, files, options), trace)
}

/// The same with a code per context: the tiny program for small even contexts, no code
/// for odd ones, so that Ownership messages in arbitrary bytes switch codes often.
fn exhaust_with_contexts(trace: &[u8], options: DecoderOptions) -> (usize, usize) {
    let (image, files) = image();
    let empty = CodeImage::new();
    let program = |image| ProgramCode {
        image,
        files: files.clone(),
    };
    let code = ContextCode {
        shared: program(&empty),
        contexts: (0..16)
            .map(|context| {
                let image = if context % 2 == 0 { &image } else { &empty };
                (context, program(image))
            })
            .collect(),
    };
    exhaust_decoder(FlowDecoder::with_contexts(trace, code, options), trace)
}

fn exhaust_decoder(mut decoder: FlowDecoder<'_>, trace: &[u8]) -> (usize, usize) {
    let (mut elements, mut errors) = (0, 0);
    let bound = trace.len() * 4096 + 64;
    for _ in 0..bound {
        // Memory is bounded by the code image and the input, never by how long the
        // decoder runs: the block cache can hold at most the tiny program's blocks.
        assert!(
            decoder.memory_footprint() <= 256 * 1024 + 64 * trace.len(),
            "{} bytes held for a {}-byte trace",
            decoder.memory_footprint(),
            trace.len()
        );
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
        .with_return_stack_depth(usize::from((flags >> 4) & 7) * 2)
        .with_all_jumps(flags & 128 != 0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(trace in proptest::collection::vec(any::<u8>(), 0..512), flags in any::<u8>()) {
        exhaust(&trace, options(flags));
    }

    #[test]
    fn arbitrary_bytes_with_contexts_never_panic(trace in proptest::collection::vec(any::<u8>(), 0..512), flags in any::<u8>()) {
        exhaust_with_contexts(&trace, options(flags));
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
fn garbage_addresses_do_not_grow_the_block_cache() {
    // Thousands of synchronisations to distinct unmapped pages: each is an error, and
    // none may leave a page table behind.
    let (image, files) = image();
    let encoder = ntrace_message::MessageEncoder::new(MessageOptions::default());
    let mut trace = Vec::new();
    for page in 0..4000u64 {
        let sync = ntrace_message::Body::ProgTraceSync {
            sync: ntrace_message::SyncReason(3),
            icnt: 0,
            faddr: 0x4000_0000 + (page << 12),
        };
        encoder.encode(0, &sync, None, &mut trace).unwrap();
        let stop = ntrace_message::Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 0,
            icnt: 2,
            hist: None,
        };
        encoder.encode(0, &stop, None, &mut trace).unwrap();
    }
    let mut decoder = FlowDecoder::new(&trace, &image, files, DecoderOptions::default());
    let mut errors = 0;
    loop {
        match decoder.next_element() {
            Ok(None) => break,
            Ok(Some(_)) => {}
            Err(error) => {
                assert!(error.to_string().contains("outside every ELF"), "{error}");
                errors += 1;
            }
        }
    }
    assert_eq!(errors, 4000);
    assert!(
        decoder.memory_footprint() < 64 * 1024,
        "{} bytes",
        decoder.memory_footprint()
    );
}

#[test]
fn long_repeated_history_keeps_memory_constant() {
    // A loop of a million identical HIST overflows before the I-CNT that consumes them
    // (the reference encoder sends I-CNT only with the next indirect jump): one entry.
    let (image, files) = image();
    let encoder = ntrace_message::MessageEncoder::new(MessageOptions::default());
    let mut trace = Vec::new();
    let entry = 0x101d2; // _start of the tiny program
    encoder
        .encode(
            0,
            &ntrace_message::Body::ProgTraceSync {
                sync: ntrace_message::SyncReason(3),
                icnt: 0,
                faddr: entry,
            },
            None,
            &mut trace,
        )
        .unwrap();
    let full = ntrace_message::Body::ResourceFull(ntrace_message::ResourceFull::HistOverflow {
        hist: 0b1_0101_0101,
    });
    for _ in 0..100_000 {
        encoder.encode(0, &full, None, &mut trace).unwrap();
    }
    let mut decoder = FlowDecoder::new(&trace, &image, files, DecoderOptions::default());
    while let Ok(Some(_)) = decoder.next_element() {}
    assert!(
        decoder.memory_footprint() < 64 * 1024,
        "{} bytes",
        decoder.memory_footprint()
    );
}

#[test]
fn the_unmodified_trace_decodes_without_error() {
    let (elements, errors) = exhaust(TRACE, DecoderOptions::default());
    assert_eq!(errors, 0);
    assert!(elements > 50);
}
