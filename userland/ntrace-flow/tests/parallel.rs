//! The parallel decoder gives exactly the serial decoder's output, and both give exactly
//! what walking every message's walk gives (`WalkReplay::Off`): the same elements
//! (hart, offset, kind, and the instructions of each range), the same errors, statistics,
//! block profile and skipped bytes, for the bundled fixtures and for traces the encoder
//! model makes of a real program's run (tests/fixtures/ntrace/interp) with every option
//! that puts state across a seam: implicit returns past synchronisations that keep the
//! stack (HTM I-CNT overflow, SYNC=4), repeated history and RepeatBranch, two harts
//! interleaved, timestamps, a wrapped start, corrupt bytes; each with chunks so small
//! that nearly every synchronisation is a seam.

use std::sync::OnceLock;

use code_image::{load_elf, CodeImage};
use ntrace_flow::{
    BranchMode, Decoded, DecoderOptions, EncoderOptions, FileDecodeInfo, FlowDecoder,
    FlowStatistics, ParallelDecoder, ParallelOptions, ParallelSummary, Recovery, TraceEncoder,
    WalkReplay,
};
use ntrace_message::{MessageDecoder, MessageOptions};
use proptest::prelude::*;
use trace_elements::{ElementKind, GapReason, TraceElement};

static INTERP: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/interp/program");
static INTERP_TRACE: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/interp/trace.nt");
static TINY_BTM: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-btm/program");
static TINY_BTM_TRACE: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-btm/trace.nt");
static TINY_HTM: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-htm/program");
static TINY_HTM_TRACE: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-htm/trace.nt");

struct Code {
    image: CodeImage,
    files: Vec<FileDecodeInfo>,
}

fn code(program: &'static [u8]) -> Code {
    let mut image = CodeImage::new();
    load_elf(&mut image, "program", program, None).unwrap();
    let files = image.file_decode_infos();
    Code { image, files }
}

fn interp() -> &'static Code {
    static CODE: OnceLock<Code> = OnceLock::new();
    CODE.get_or_init(|| code(INTERP))
}

/// One output of a decoder: an element with its range's instructions and the text of
/// the error behind a decode-error gap, or a returned error.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Element(TraceElement, Vec<u64>, Option<String>),
    Error(String),
}

#[derive(Debug, PartialEq, Eq)]
struct Output {
    items: Vec<Item>,
    statistics: FlowStatistics,
    idle_bytes: u64,
    skipped_bytes: u64,
    profile: Vec<(u64, u64, u64)>,
}

fn range_pcs(
    element: &TraceElement,
    visit: impl FnOnce(u64, u32, &mut Vec<u64>) -> bool,
) -> Vec<u64> {
    let mut pcs = Vec::new();
    if let ElementKind::InstructionRange {
        start,
        instructions,
        ..
    } = element.kind
    {
        assert!(
            visit(start, instructions, &mut pcs),
            "range {element:?} not walkable"
        );
    }
    pcs
}

fn serial(trace: &[u8], code: &Code, options: DecoderOptions) -> Output {
    let mut decoder = FlowDecoder::new(trace, &code.image, code.files.clone(), options);
    let mut items = Vec::new();
    loop {
        match decoder.next_element() {
            Ok(Some(element)) => {
                let pcs = range_pcs(&element, |start, count, pcs| {
                    decoder.for_each_instruction(start, count, |pc| pcs.push(pc))
                });
                let error = match element.kind {
                    ElementKind::Gap {
                        reason: GapReason::DecodeError { .. },
                    } => decoder.last_recovered_error().map(ToString::to_string),
                    _ => None,
                };
                items.push(Item::Element(element, pcs, error));
            }
            Ok(None) => break,
            Err(error) => items.push(Item::Error(error.to_string())),
        }
    }
    let mut profile: Vec<_> = decoder
        .block_profile()
        .map(|block| (block.start, block.last, block.instructions))
        .collect();
    profile.sort_unstable();
    Output {
        items,
        statistics: decoder.statistics(),
        idle_bytes: decoder.idle_bytes(),
        skipped_bytes: decoder.skipped_bytes(),
        profile,
    }
}

fn parallel(
    trace: &[u8],
    code: &Code,
    options: DecoderOptions,
    jobs: usize,
    chunk_bytes: usize,
) -> Output {
    let decoder = ParallelDecoder::new(
        trace,
        &code.image,
        code.files.clone(),
        options,
        ParallelOptions::default()
            .with_jobs(jobs)
            .with_chunk_bytes(chunk_bytes),
    );
    let mut items = Vec::new();
    let summary = decoder
        .run(|decoded| -> Result<(), ()> {
            match decoded {
                Decoded::Element(decoded) => {
                    let element = decoded.element;
                    let pcs = range_pcs(&element, |start, count, pcs| {
                        decoded.for_each_instruction(start, count, |pc| pcs.push(pc))
                    });
                    let error = match element.kind {
                        ElementKind::Gap {
                            reason: GapReason::DecodeError { .. },
                        } => decoded.recovered_error().map(ToString::to_string),
                        _ => None,
                    };
                    items.push(Item::Element(element, pcs, error));
                }
                Decoded::Error(error) => items.push(Item::Error(error.to_string())),
            }
            Ok(())
        })
        .unwrap();
    let mut profile: Vec<_> = summary
        .block_profile
        .iter()
        .map(|block| (block.start, block.last, block.instructions))
        .collect();
    profile.sort_unstable();
    Output {
        items,
        statistics: summary.statistics,
        idle_bytes: summary.idle_bytes,
        skipped_bytes: summary.skipped_bytes,
        profile,
    }
}

/// Decodes `trace` serially walking every walk, serially replaying walks that come
/// again (the default, `WalkReplay::Replay`), and in parallel (`jobs` threads, chunks of
/// `chunk_bytes`): all three must give the same output; panics at the first difference.
fn assert_same(
    trace: &[u8],
    code: &Code,
    options: DecoderOptions,
    jobs: usize,
    chunk_bytes: usize,
) {
    let expected = serial(trace, code, options.with_walk_replay(WalkReplay::Off));
    let replayed = serial(trace, code, options.with_walk_replay(WalkReplay::Replay));
    assert_equal_outputs(&expected, &replayed, "serial, walks replayed");
    assert_eq!(
        visited(trace, code, options),
        expected
            .items
            .iter()
            .map(|item| match item {
                Item::Element(element, _, cause) => Visited::Element(*element, cause.clone()),
                Item::Error(error) => Visited::Error(error.clone()),
            })
            .collect::<Vec<_>>(),
        "for_each_element against next_element"
    );
    let actual = parallel(trace, code, options, jobs, chunk_bytes);
    assert_equal_outputs(
        &expected,
        &actual,
        &format!("jobs {jobs}, chunks of {chunk_bytes} bytes"),
    );
}

fn assert_equal_outputs(expected: &Output, actual: &Output, context: &str) {
    if let Some(index) = expected
        .items
        .iter()
        .zip(&actual.items)
        .position(|(a, b)| a != b)
    {
        panic!(
            "{context}: item {index} differs\n  serial:   {:?}\n  other:    {:?}",
            expected.items[index], actual.items[index]
        );
    }
    assert_eq!(
        expected.items.len(),
        actual.items.len(),
        "{context}: item count"
    );
    assert_eq!(expected.statistics, actual.statistics, "{context}");
    assert_eq!(expected.profile, actual.profile, "{context}: block profile");
    assert_eq!(
        (expected.idle_bytes, expected.skipped_bytes),
        (actual.idle_bytes, actual.skipped_bytes),
        "{context}: idle and skipped bytes"
    );
}

/// What `FlowDecoder::for_each_element` hands over: each element with the error behind
/// a decode-error gap, and each error it returns.
#[derive(Debug, PartialEq, Eq)]
enum Visited {
    Element(TraceElement, Option<String>),
    Error(String),
}

/// Decodes `trace` serially through `for_each_element`, resuming after each error as a
/// loop over `next_element` does.
fn visited(trace: &[u8], code: &Code, options: DecoderOptions) -> Vec<Visited> {
    let mut decoder = FlowDecoder::new(trace, &code.image, code.files.clone(), options);
    let mut items = Vec::new();
    loop {
        let result = decoder.for_each_element(|element, cause| {
            items.push(Visited::Element(*element, cause.map(ToString::to_string)));
        });
        match result {
            Ok(()) => return items,
            Err(error) => items.push(Visited::Error(error.to_string())),
        }
    }
}

fn with_ranges(options: DecoderOptions) -> [DecoderOptions; 2] {
    [
        options.with_instruction_ranges(true),
        options.with_instruction_ranges(false),
    ]
}

/// The interp fixture's run: its retired PCs, as the serial decoder gives them (the
/// golden test holds them equal to QEMU's).
fn interp_pcs() -> &'static [u64] {
    static PCS: OnceLock<Vec<u64>> = OnceLock::new();
    PCS.get_or_init(|| {
        serial(INTERP_TRACE, interp(), DecoderOptions::default())
            .items
            .into_iter()
            .flat_map(|item| match item {
                Item::Element(_, pcs, _) => pcs,
                Item::Error(error) => panic!("{error}"),
            })
            .collect()
    })
}

fn encode(options: EncoderOptions) -> Vec<u8> {
    let code = interp();
    let mut encoder = TraceEncoder::new(&code.image, code.files.clone(), options).unwrap();
    for &pc in interp_pcs() {
        encoder.retire(pc).unwrap();
    }
    encoder.finish().unwrap().0
}

fn decoder_options(encoder: &EncoderOptions) -> DecoderOptions {
    DecoderOptions::default()
        .with_message(encoder.message)
        .with_return_stack_depth(encoder.return_stack_depth)
        .with_all_jumps(encoder.all_jumps)
}

/// Encoder settings that carry state across synchronisation messages.
fn encoder_variants() -> Vec<EncoderOptions> {
    let mut variants = Vec::new();
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        for (periodic_sync, icnt_bits, return_stack_depth) in [
            (16, 22, 32),
            (64, 8, 32),
            (0, 6, 32),
            (24, 22, 4),
            (40, 10, 0),
        ] {
            let mut options = EncoderOptions::default();
            options.mode = mode;
            options.periodic_sync = periodic_sync;
            options.icnt_bits = icnt_bits;
            options.return_stack_depth = return_stack_depth;
            variants.push(options);
        }
    }
    let mut stamped = EncoderOptions::default();
    stamped.periodic_sync = 20;
    stamped.icnt_bits = 9;
    stamped.repeated_history = false;
    stamped.context = Some(7);
    stamped.message = MessageOptions::default()
        .with_timestamps(true)
        .with_address_msb_extension(true);
    variants.push(stamped);
    variants
}

fn encoded_traces() -> &'static [(EncoderOptions, Vec<u8>)] {
    static TRACES: OnceLock<Vec<(EncoderOptions, Vec<u8>)>> = OnceLock::new();
    TRACES.get_or_init(|| {
        encoder_variants()
            .into_iter()
            .map(|options| (options, encode(options)))
            .collect()
    })
}

/// Two harts (SRC 1 and 2) running the same program under different encoder settings,
/// their messages interleaved in runs of `pattern` lengths.
fn two_harts(pattern: &[usize]) -> (Vec<u8>, DecoderOptions) {
    let message = MessageOptions::default().with_src_bits(2);
    let mut first = EncoderOptions::default();
    first.message = message;
    first.src = 1;
    first.periodic_sync = 12;
    first.icnt_bits = 9;
    let mut second = first;
    second.src = 2;
    second.mode = BranchMode::Btm;
    second.periodic_sync = 30;
    let streams = [encode(first), encode(second)];
    let mut decoders: Vec<_> = streams
        .iter()
        .map(|stream| MessageDecoder::new(stream, message))
        .collect();
    let mut trace = Vec::new();
    let mut turn = 0;
    let mut done = [false, false];
    while !done.iter().all(|&done| done) {
        let hart = turn % 2;
        for _ in 0..pattern[turn % pattern.len()] {
            match decoders[hart].next_message().unwrap() {
                Some(message) => trace.extend_from_slice(message.bytes(&streams[hart])),
                None => {
                    done[hart] = true;
                    break;
                }
            }
        }
        turn += 1;
    }
    (trace, DecoderOptions::default().with_message(message))
}

#[test]
fn fixtures_decode_identically_with_any_chunking() {
    let tiny_btm_options = DecoderOptions::default()
        .with_message(
            MessageOptions::default()
                .with_src_bits(4)
                .with_timestamps(true)
                .with_address_msb_extension(true),
        )
        .with_return_stack_depth(8);
    let cases = [
        (code(TINY_BTM), TINY_BTM_TRACE, tiny_btm_options),
        (code(TINY_HTM), TINY_HTM_TRACE, DecoderOptions::default()),
    ];
    for (code, trace, options) in &cases {
        for options in with_ranges(*options) {
            for chunk_bytes in [1, 7, 16, 64, 1 << 20] {
                assert_same(trace, code, options, 2, chunk_bytes);
            }
        }
    }
    for options in with_ranges(DecoderOptions::default()) {
        for chunk_bytes in [1, 100, 1000, 4096, 1 << 20] {
            assert_same(INTERP_TRACE, interp(), options, 2, chunk_bytes);
        }
    }
}

#[test]
fn encoded_traces_decode_identically() {
    for (encoder, trace) in encoded_traces() {
        for options in with_ranges(decoder_options(encoder)) {
            for (jobs, chunk_bytes) in [(2, 64), (3, 333), (1, 2048)] {
                assert_same(trace, interp(), options, jobs, chunk_bytes);
            }
        }
    }
}

#[test]
fn two_harts_decode_identically() {
    for pattern in [&[1][..], &[3, 1, 7], &[40, 2]] {
        let (trace, options) = two_harts(pattern);
        for options in with_ranges(options) {
            for chunk_bytes in [50, 700] {
                assert_same(&trace, interp(), options, 2, chunk_bytes);
            }
        }
    }
}

#[test]
fn corrupt_and_wrapped_traces_decode_identically() {
    let (_, trace) = &encoded_traces()[1];
    let options = decoder_options(&encoded_traces()[1].0);
    for recovery in [Recovery::Resync, Recovery::ReturnError] {
        let options = options.with_recovery(recovery);
        // A wrapped buffer: the trace starts inside a message.
        let wrapped = &trace[trace.len() / 3 + 1..];
        assert_same(wrapped, interp(), options, 2, 200);
        let mut corrupt = trace.clone();
        for position in [corrupt.len() / 5, corrupt.len() / 2, corrupt.len() / 2 + 9] {
            corrupt[position] ^= 0x5c;
        }
        assert_same(&corrupt, interp(), options, 2, 128);
        // Cut inside the last message.
        assert_same(&trace[..trace.len() - 1], interp(), options, 2, 256);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Chunks cut at random synchronisation messages (a random chunk size picks them),
    /// random traces, starts and damage.
    #[test]
    fn random_cuts_decode_identically(
        variant in 0usize..11,
        chunk_bytes in 1usize..3000,
        jobs in 1usize..4,
        start in 0usize..200,
        damage in proptest::collection::vec((0.0f64..1.0, 1u8..=255), 0..3),
        ranges in any::<bool>(),
        resync in any::<bool>(),
    ) {
        let (encoder, trace) = &encoded_traces()[variant % encoded_traces().len()];
        let mut trace = trace[start.min(trace.len())..].to_vec();
        for (position, mask) in damage {
            let index = ((trace.len() as f64 * position) as usize).min(trace.len().saturating_sub(1));
            if let Some(byte) = trace.get_mut(index) {
                *byte ^= mask;
            }
        }
        let recovery = if resync { Recovery::Resync } else { Recovery::ReturnError };
        let options = decoder_options(encoder)
            .with_instruction_ranges(ranges)
            .with_recovery(recovery);
        assert_same(&trace, interp(), options, jobs, chunk_bytes);
    }
}

fn tiny_htm() -> &'static Code {
    static CODE: OnceLock<Code> = OnceLock::new();
    CODE.get_or_init(|| code(TINY_HTM))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary bytes (and a real trace with arbitrary bytes spliced in): never a
    /// panic, always the serial output.
    #[test]
    fn arbitrary_bytes_decode_identically(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        splice in 0usize..122,
        chunk_bytes in 1usize..64,
        flags in any::<u8>(),
    ) {
        let options = DecoderOptions::default()
            .with_message(
                MessageOptions::default()
                    .with_src_bits(flags & 1)
                    .with_timestamps(flags & 2 != 0),
            )
            .with_instruction_ranges(flags & 4 == 0)
            .with_recovery(if flags & 8 == 0 { Recovery::Resync } else { Recovery::ReturnError });
        assert_same(&bytes, tiny_htm(), options, 2, chunk_bytes);
        let mut spliced = TINY_HTM_TRACE[..splice].to_vec();
        spliced.extend_from_slice(&bytes[..bytes.len().min(8)]);
        spliced.extend_from_slice(&TINY_HTM_TRACE[splice..]);
        assert_same(&spliced, tiny_htm(), options, 2, chunk_bytes);
    }
}

/// What the parallel decode of `trace` did: the chunks, how many started at a seam, and
/// the messages the join decoded itself.
fn parallel_summary(trace: &[u8], options: DecoderOptions, chunk_bytes: usize) -> ParallelSummary {
    let code = interp();
    ParallelDecoder::new(
        trace,
        &code.image,
        code.files.clone(),
        options,
        ParallelOptions::default()
            .with_jobs(2)
            .with_chunk_bytes(chunk_bytes),
    )
    .run(|_| Ok::<(), ()>(()))
    .unwrap()
}

/// A trace with a single synchronisation message (what the reference encoder writes,
/// and most captures hold) is still decoded in parallel: every chunk after the first
/// starts at a seam (after a message that gives the address its walk ends at), with
/// the reference address and time its scan computed, and the join decodes almost
/// nothing itself. Cut only at synchronisation messages, the join decoded all of it.
#[test]
fn a_trace_with_one_synchronisation_is_cut_at_seams() {
    let mut stamped = EncoderOptions::default();
    stamped.message = MessageOptions::default().with_timestamps(true);
    let mut variants = vec![stamped];
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        let mut options = EncoderOptions::default();
        options.mode = mode;
        variants.push(options);
    }
    // A stack of two entries, which deeper calls overflow: those returns are reported
    // and pop the stack too, so chunks drop entries from before them without needing
    // their values (random_cuts_decode_identically catches a join that forgets them).
    let mut small_stack = EncoderOptions::default();
    small_stack.return_stack_depth = 2;
    variants.push(small_stack);
    for mut encoder in variants {
        encoder.periodic_sync = 0;
        let trace = encode(encoder);
        let options = decoder_options(&encoder);
        for ranges in with_ranges(options) {
            assert_same(&trace, interp(), ranges, 2, 2048);
        }
        let summary = parallel_summary(&trace, options, 2048);
        assert_eq!(summary.statistics.sync_messages, 1, "{encoder:?}");
        assert!(
            summary.chunks >= 10,
            "{encoder:?}: {} chunks",
            summary.chunks
        );
        assert_eq!(summary.seam_starts, summary.chunks - 1, "{encoder:?}");
        assert!(
            summary.serial_messages * 20 < summary.statistics.messages,
            "{encoder:?}: the join decoded {} of {} messages",
            summary.serial_messages,
            summary.statistics.messages
        );
    }
}

/// Traces whose encoder reports every direct jump and call as a taken branch
/// (trTeInstEnAllJumps), BTM and HTM: the run's exact PCs, and the same output serially
/// with walks replayed or walked, and in parallel, cut at synchronisation messages or,
/// with a single one, at seams; corrupt ones too.
#[test]
fn all_jumps_traces_decode_identically() {
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        for (periodic_sync, icnt_bits, return_stack_depth) in
            [(16, 22, 32), (0, 22, 32), (24, 8, 4), (40, 10, 0)]
        {
            let mut encoder = EncoderOptions::default();
            encoder.mode = mode;
            encoder.all_jumps = true;
            encoder.periodic_sync = periodic_sync;
            encoder.icnt_bits = icnt_bits;
            encoder.return_stack_depth = return_stack_depth;
            let trace = encode(encoder);
            let options = decoder_options(&encoder);
            let pcs: Vec<u64> = serial(&trace, interp(), options)
                .items
                .into_iter()
                .flat_map(|item| match item {
                    Item::Element(_, pcs, _) => pcs,
                    Item::Error(error) => panic!("{encoder:?}: {error}"),
                })
                .collect();
            assert!(pcs == interp_pcs(), "{encoder:?}: other PCs");
            for ranges in with_ranges(options) {
                for (jobs, chunk_bytes) in [(2, 64), (3, 333), (2, 2048)] {
                    assert_same(&trace, interp(), ranges, jobs, chunk_bytes);
                }
            }
            // Not vacuous: walks and whole messages are replayed, and a trace with one
            // synchronisation message is cut at seams.
            let mut decoder =
                FlowDecoder::new(&trace, &interp().image, interp().files.clone(), options);
            while decoder.next_element().unwrap().is_some() {}
            assert!(decoder.walks_replayed() > 0, "{encoder:?}");
            assert!(decoder.messages_replayed() > 0, "{encoder:?}");
            if periodic_sync == 0 {
                let summary = parallel_summary(&trace, options, 2048);
                assert_eq!(summary.statistics.sync_messages, 1, "{encoder:?}");
                assert_eq!(summary.seam_starts, summary.chunks - 1, "{encoder:?}");
                assert!(summary.chunks >= 10, "{encoder:?}: {summary:?}");
            }
            let mut corrupt = trace.clone();
            for position in [corrupt.len() / 5, corrupt.len() / 2] {
                corrupt[position] ^= 0x5c;
            }
            assert_same(
                &corrupt,
                interp(),
                options.with_recovery(Recovery::Resync),
                2,
                128,
            );
        }
    }
}

/// The comparisons above are not vacuous: the interpreter's walks come again and again
/// (its dispatch loop), and most are replayed rather than walked.
#[test]
fn most_walks_of_the_interpreter_are_replayed() {
    let mut decoder = FlowDecoder::new(
        INTERP_TRACE,
        &interp().image,
        interp().files.clone(),
        DecoderOptions::default().with_instruction_ranges(false),
    );
    while decoder.next_element().unwrap().is_some() {}
    let messages = decoder.statistics().messages;
    let replayed = decoder.walks_replayed();
    assert!(
        replayed * 10 > messages * 9,
        "{replayed} of {messages} messages' walks replayed"
    );
    let mut walked = FlowDecoder::new(
        INTERP_TRACE,
        &interp().image,
        interp().files.clone(),
        DecoderOptions::default().with_walk_replay(WalkReplay::Off),
    );
    while walked.next_element().unwrap().is_some() {}
    assert_eq!(walked.walks_replayed(), 0);
}
