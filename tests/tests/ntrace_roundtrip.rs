//! Real programs, real traces: every test program runs under `qemu-riscv64` with one
//! instruction per translation block, its exact retired-PC sequence is encoded with
//! rvperf's encoder model under every combination of BTM/HTM, return stack 0/8/32,
//! repeated history, timestamps, SRC and MSB extension (with RepeatBranch, periodic
//! sync, sequential jumps, small I-CNT/HIST counters, ownership and ecall reported the
//! reference encoder's way rotating through them) and decoded again: the decoded
//! sequence must be identical. So must the traces of an encoder that reports every
//! direct jump and call as a taken branch (trTeInstEnAllJumps) under BTM and HTM, with
//! and without the return stack, repeated history and periodic synchronisation, decoded
//! with `all_jumps`; decoded without it they must fail.

mod common;

use common::{assert_same_pcs, decode_elements, decode_pcs, encode, load, retired_pcs};
use ntrace_flow::{BranchMode, DecoderOptions, EncoderOptions, EncoderStatistics, TraceEncoder};
use ntrace_message::{AddressWidth, MessageDecoder, MessageOptions};
use riscv_insn::{DecodeOptions, Xlen};
use trace_elements::ElementKind;

/// Every combination of the six main options (2 modes x 3 stack depths x repeated
/// history x timestamps x SRC x MSB extension = 96), each with a rotating choice of the
/// secondary ones, and the decoder options that match.
const CONFIGURATIONS: usize = 96;

fn configuration(index: usize) -> (EncoderOptions, DecoderOptions) {
    let mut options = EncoderOptions::default();
    options.mode = if index & 1 == 0 {
        BranchMode::Htm
    } else {
        BranchMode::Btm
    };
    options.return_stack_depth = [0, 8, 32][(index >> 1) % 3];
    let rest = index / 6;
    options.repeated_history = rest & 1 != 0;
    let timestamps = rest & 2 != 0;
    let src_bits = if rest & 4 != 0 { 5 } else { 0 };
    let extension = rest & 8 != 0;
    // Secondary options rotate so that each meets many main combinations.
    options.repeat_branch = index % 3 != 0;
    options.sequential_jumps = index % 4 == 1;
    options.periodic_sync = [0, 64, 16, 200, 0][index % 5];
    options.icnt_bits = [22, 10, 16, 8, 12, 22, 14][index % 7];
    options.hist_bits = [32, 32, 8, 16, 5, 31][index % 6];
    options.context = (index % 11 == 3).then_some(42);
    // The reference encoder's way of reporting ecall (an uninferable call).
    options.environment_call_as_jump = index % 5 == 2;
    options.src = if src_bits > 0 { 17 } else { 0 };
    options.message = MessageOptions::default()
        .with_src_bits(src_bits)
        .with_timestamps(timestamps)
        .with_address_msb_extension(extension)
        .with_address_width(AddressWidth::Bits64);
    // Half the decoders assume the spec's maximum depth, half the encoder's own.
    let depth = if index % 2 == 0 {
        32
    } else {
        options.return_stack_depth
    };
    let decoder = DecoderOptions::default()
        .with_message(options.message)
        .with_return_stack_depth(depth);
    (options, decoder)
}

/// The all-jumps configurations: BTM/HTM x return stack 0/32 x repeated history x
/// periodic synchronisation (every 16 messages) or none, each with a rotating choice of
/// the secondary options.
const ALL_JUMPS_CONFIGURATIONS: usize = 16;

fn all_jumps_configuration(index: usize) -> (EncoderOptions, DecoderOptions) {
    let mut options = EncoderOptions::default();
    options.all_jumps = true;
    options.mode = if index & 1 == 0 {
        BranchMode::Htm
    } else {
        BranchMode::Btm
    };
    options.return_stack_depth = if index & 2 == 0 { 0 } else { 32 };
    options.repeated_history = index & 4 != 0;
    options.periodic_sync = if index & 8 == 0 { 0 } else { 16 };
    options.repeat_branch = index % 3 != 0;
    // Sequential jumps only with the full I-CNT counter: the encoder model still infers
    // a jump whose constant load an HTM I-CNT overflow synchronisation (SYNC=4) split
    // into the previous message, which spec 9.1 does not allow (the decoder, resuming
    // at the jump, cannot infer it), whether or not all jumps are reported.
    options.sequential_jumps = index % 3 == 2;
    options.icnt_bits = [10, 8, 22][index % 3];
    options.hist_bits = [32, 8, 5, 16][index % 4];
    options.context = (index % 7 == 3).then_some(42);
    options.environment_call_as_jump = index % 5 == 2;
    options.message = MessageOptions::default()
        .with_timestamps(index % 5 == 1)
        .with_address_width(AddressWidth::Bits64);
    let decoder = DecoderOptions::default()
        .with_message(options.message)
        .with_return_stack_depth(options.return_stack_depth)
        .with_all_jumps(true);
    (options, decoder)
}

fn roundtrip(name: &str) {
    let pcs = retired_pcs(name);
    let code = load(name);
    let mut total = EncoderStatistics::default();
    let configurations = (0..CONFIGURATIONS)
        .map(configuration)
        .chain((0..ALL_JUMPS_CONFIGURATIONS).map(all_jumps_configuration));
    for (index, (options, decoder)) in configurations.enumerate() {
        let (trace, statistics) = encode(&code, &pcs, options);
        let context = format!("{name} configuration {index} ({options:?})");
        let decoded =
            decode_pcs(&trace, &code, decoder).unwrap_or_else(|error| panic!("{context}: {error}"));
        assert_same_pcs(&context, &pcs, &decoded);
        if options.all_jumps {
            // Decoded as a trace without trTeInstEnAllJumps, it must fail, not give
            // other PCs.
            if let Ok(decoded) = decode_pcs(&trace, &code, decoder.with_all_jumps(false)) {
                panic!(
                    "{context}: decoded without all_jumps ({} PCs, {})",
                    decoded.len(),
                    if decoded == pcs { "the same" } else { "others" }
                );
            }
        }
        assert_eq!(statistics.instructions, pcs.len() as u64);
        total.implicit_returns += statistics.implicit_returns;
        total.sequential_jumps += statistics.sequential_jumps;
        total.repeated_branches += statistics.repeated_branches;
        total.repeated_histories += statistics.repeated_histories;
        total.sync_messages += statistics.sync_messages;
    }
    // The matrix must really exercise the optimisations it claims to test.
    assert!(
        total.implicit_returns > 0,
        "{name}: no implicit return in any configuration"
    );
    assert!(
        total.sync_messages > CONFIGURATIONS as u64,
        "{name}: no periodic or overflow synchronisation"
    );
    eprintln!(
        "{name}: {} instructions, matrix totals {total:?}",
        pcs.len()
    );
}

#[test]
fn function_pointers() {
    roundtrip("fnptr");
}

#[test]
fn deep_recursion() {
    roundtrip("recursion");
}

#[test]
fn switch_jump_table() {
    roundtrip("switch");
}

#[test]
fn setjmp_longjmp() {
    roundtrip("longjmp");
}

#[test]
fn tight_loops_with_repeated_history() {
    roundtrip("loops");
    let pcs = retired_pcs("loops");
    let code = load("loops");
    let mut options = EncoderOptions::default();
    options.repeated_history = true;
    let (_, statistics) = encode(&code, &pcs, options);
    assert!(
        statistics.repeated_histories > 0,
        "loops produced no ResourceFull RCODE 2: {statistics:?}"
    );
}

#[test]
fn calls_as_auipc_jalr_pairs_with_sequential_jump_inference() {
    roundtrip("farcalls");
    let pcs = retired_pcs("farcalls");
    let code = load("farcalls");
    let mut options = EncoderOptions::default();
    options.sequential_jumps = true;
    let (trace, statistics) = encode(&code, &pcs, options);
    assert!(
        statistics.sequential_jumps > 1000,
        "auipc+jalr calls were not inferred: {statistics:?}"
    );
    let mut without = options;
    without.sequential_jumps = false;
    let (plain, _) = encode(&code, &pcs, without);
    assert!(trace.len() < plain.len(), "inference saved no trace bytes");
}

/// An HTM I-CNT overflow reported as a synchronisation (SYNC=4) that falls between an
/// `auipc` and its `jalr` ends the inference: the decoder starts afresh at the jump, so
/// the encoder must report it (spec 9.1). Small I-CNT counters make it happen often.
#[test]
fn sequential_jumps_are_not_inferred_across_an_icnt_overflow_synchronisation() {
    let pcs = retired_pcs("farcalls");
    let code = load("farcalls");
    for icnt_bits in [6, 8, 10] {
        let mut options = EncoderOptions::default();
        options.mode = BranchMode::Htm;
        options.sequential_jumps = true;
        options.icnt_bits = icnt_bits;
        let (trace, statistics) = encode(&code, &pcs, options);
        assert!(statistics.sequential_jumps > 1000, "{statistics:?}");
        let decoder = DecoderOptions::default().with_message(options.message);
        let context = format!("farcalls, HTM, sequential jumps, {icnt_bits}-bit I-CNT");
        let decoded =
            decode_pcs(&trace, &code, decoder).unwrap_or_else(|error| panic!("{context}: {error}"));
        assert_same_pcs(&context, &pcs, &decoded);
    }
}

/// Tracing that stops between an `auipc` and its `jalr` and starts again at the `jalr`
/// (a filter on privilege: an interrupt taken between the two, whose handler is not
/// traced; QEMU takes interrupts between translation blocks, and splits a block before
/// an instruction that crosses a page) ends the inference as a synchronisation does:
/// the decoder starts afresh at the jump, so the encoder must report its target. Found
/// by the guest tier: rvperf's own `auipc ra; jalr ra` call of `waitpid` straddled a
/// page, and the decode of its trace failed there.
#[test]
fn sequential_jumps_are_not_inferred_across_a_stop_and_start() {
    let pcs = retired_pcs("farcalls");
    let code = load("farcalls");
    let mut options = EncoderOptions::default();
    options.sequential_jumps = true;
    let mut encoder = TraceEncoder::new(&code.image, code.files.clone(), options).unwrap();
    let mut gaps = 0u64;
    for &pc in &pcs {
        encoder.retire(pc).unwrap();
        let mut bytes = [0u8; 4];
        code.image.read(pc, &mut bytes);
        let loads_a_constant =
            riscv_insn::decode(u32::from_le_bytes(bytes), DecodeOptions::default())
                .ok()
                .and_then(|instruction| instruction.constant_load(pc, Xlen::Rv64))
                .is_some();
        if loads_a_constant {
            encoder.stop(None).unwrap();
            encoder.start();
            gaps += 1;
        }
    }
    let (trace, _) = encoder.finish().unwrap();
    assert!(gaps > 1000, "{gaps} constant loads");
    let decoded = decode_pcs(
        &trace,
        &code,
        DecoderOptions::default().with_message(options.message),
    )
    .unwrap_or_else(|error| panic!("farcalls, stopped after every constant load: {error}"));
    assert_same_pcs(
        "farcalls, stopped after every constant load",
        &pcs,
        &decoded,
    );
}

#[test]
fn system_calls() {
    roundtrip("syscalls");
}

#[test]
fn bytecode_interpreter() {
    roundtrip("interp");
}

#[test]
fn qsort_and_strings() {
    roundtrip("mixed");
}

#[test]
fn return_stack_overflow_falls_back_to_explicit_returns() {
    // Depth-200 recursion overflows a stack of 8: returns beyond it must be reported.
    let pcs = retired_pcs("recursion");
    let code = load("recursion");
    let mut shallow = EncoderOptions::default();
    shallow.return_stack_depth = 8;
    let mut deep = shallow;
    deep.return_stack_depth = 32;
    let (shallow_trace, shallow_statistics) = encode(&code, &pcs, shallow);
    let (_, deep_statistics) = encode(&code, &pcs, deep);
    assert!(shallow_statistics.implicit_returns < deep_statistics.implicit_returns);
    for depth in [8, 32] {
        let decoded = decode_pcs(
            &shallow_trace,
            &code,
            DecoderOptions::default().with_return_stack_depth(depth),
        )
        .unwrap();
        assert_same_pcs(
            &format!("encoder depth 8, decoder depth {depth}"),
            &pcs,
            &decoded,
        );
    }
    // A decoder without a stack cannot follow implicit returns and must say so.
    let error = decode_pcs(
        &shallow_trace,
        &code,
        DecoderOptions::default().with_return_stack_depth(0),
    )
    .unwrap_err();
    assert!(error.to_string().contains("return stack"), "{error}");
}

#[test]
fn wrapped_buffer_decodes_from_its_first_sync() {
    let pcs = retired_pcs("switch");
    let code = load("switch");
    let mut options = EncoderOptions::default();
    options.periodic_sync = 16;
    let (trace, _) = encode(&code, &pcs, options);
    for cut in [1, 7, 1000, trace.len() / 3, trace.len() / 2 + 5] {
        let tail = &trace[cut..];
        let mut decoder = ntrace_flow::FlowDecoder::new(
            tail,
            &code.image,
            code.files.clone(),
            DecoderOptions::default(),
        );
        decoder.sync_forward();
        let mut decoded = Vec::new();
        while let Some(element) = decoder
            .next_element()
            .unwrap_or_else(|error| panic!("cut {cut}: {error}"))
        {
            if let ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } = element.kind
            {
                decoder.for_each_instruction(start, instructions, |pc| decoded.push(pc));
            }
        }
        assert!(
            decoded.len() > pcs.len() / 3,
            "cut {cut}: only {} PCs",
            decoded.len()
        );
        assert_same_pcs(
            &format!("buffer cut at byte {cut}"),
            &pcs[pcs.len() - decoded.len()..],
            &decoded,
        );
    }
}

#[test]
fn multi_hart_stream_splits_by_src() {
    // Two harts run the same static program (so one image serves both) from different
    // points: hart 2's trace starts a third of the way into the run.
    let code = load("fnptr");
    let full = retired_pcs("fnptr");
    let runs = [full.clone(), full[full.len() / 3..].to_vec()];
    let message_options = MessageOptions::default().with_src_bits(3);
    // Encode each hart separately, then interleave whole messages as a funnel would.
    let mut streams = Vec::new();
    for (hart, pcs) in runs.iter().enumerate() {
        let mut options = EncoderOptions::default();
        options.message = message_options;
        options.src = hart as u16 + 2;
        let (trace, _) = encode(&code, pcs, options);
        let mut messages = Vec::new();
        let mut decoder = MessageDecoder::new(&trace, message_options);
        while let Some(message) = decoder.next_message().unwrap() {
            messages.push(message.bytes(&trace).to_vec());
        }
        streams.push(messages.into_iter());
    }
    let mut merged = Vec::new();
    let mut turn = 0usize;
    loop {
        let mut any = false;
        for (hart, stream) in streams.iter_mut().enumerate() {
            for _ in 0..(1 + (turn + hart) % 3) {
                if let Some(message) = stream.next() {
                    merged.extend(message);
                    any = true;
                }
            }
        }
        turn += 1;
        if !any {
            break;
        }
    }
    let elements = decode_elements(
        &merged,
        &code,
        DecoderOptions::default().with_message(message_options),
    )
    .expect("decode merged stream");
    for (hart, pcs) in runs.iter().enumerate() {
        let src = hart as u16 + 2;
        let decoded: Vec<u64> = elements
            .iter()
            .filter(|(element, _)| element.hart == src)
            .flat_map(|(_, pcs)| pcs.clone())
            .collect();
        assert_same_pcs(&format!("hart {src}"), pcs, &decoded);
    }
}

#[test]
fn timestamps_are_reconstructed() {
    let pcs = retired_pcs("syscalls");
    let code = load("syscalls");
    let mut options = EncoderOptions::default();
    options.message = MessageOptions::default().with_timestamps(true);
    let (trace, _) = encode(&code, &pcs, options);
    let elements = decode_elements(
        &trace,
        &code,
        DecoderOptions::default().with_message(options.message),
    )
    .unwrap();
    let times: Vec<u64> = elements
        .iter()
        .filter_map(|(element, _)| match element.kind {
            ElementKind::Timestamp { time } => Some(time),
            _ => None,
        })
        .collect();
    assert!(times.len() > 100);
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "timestamps go backwards"
    );
    // The encoder stamps messages with the number of instructions retired so far.
    assert_eq!(*times.last().unwrap(), pcs.len() as u64);
}

/// Trace disabled (EVCODE=4) and enabled again elsewhere (SYNC=5), then messages lost to
/// a FIFO overrun (an Error message, SYNC=7), Ownership after every synchronisation: the
/// stop ends the flow after exactly the instructions before it, the restarts start at
/// the run's next traced instruction, the overrun is a gap the decode resumes after.
#[test]
fn trace_stopped_started_and_lost_decodes_around_the_gaps() {
    use ntrace_flow::FlowDecoder;
    use trace_elements::{Context, GapReason, TraceOffReason, TraceOnReason};
    let pcs = retired_pcs("fnptr");
    let code = load("fnptr");
    let (trace, stop, start) = common::stop_start_and_overrun_trace(&code, &pcs, 1000);
    let elements = decode_elements(&trace, &code, DecoderOptions::default()).unwrap();
    // The PCs between the events, and the events.
    let mut segments = vec![Vec::new()];
    let mut events = Vec::new();
    for (element, range) in &elements {
        match element.kind {
            ElementKind::InstructionRange { .. } => segments.last_mut().unwrap().extend(range),
            ElementKind::TraceOn { .. }
            | ElementKind::Gap { .. }
            | ElementKind::TraceOff { .. } => {
                events.push(element.kind);
                segments.push(Vec::new());
            }
            ElementKind::ContextChange { context, .. } => {
                assert_eq!(context, Some(Context::Process(42)));
                assert!(
                    matches!(events.last(), Some(ElementKind::TraceOn { .. })),
                    "an Ownership message not after a synchronisation: {events:?}"
                );
            }
            // System calls.
            ElementKind::Trap { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let restart_address = match events.get(4) {
        Some(&ElementKind::TraceOn { address, .. }) => address,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        events,
        [
            ElementKind::TraceOn {
                address: pcs[0],
                reason: TraceOnReason::Start
            },
            ElementKind::TraceOff {
                last_address: Some(pcs[stop - 1]),
                reason: TraceOffReason::Disabled
            },
            ElementKind::TraceOn {
                address: pcs[start],
                reason: TraceOnReason::Restart
            },
            ElementKind::Gap {
                reason: GapReason::EncoderOverflow {
                    error_type: 0,
                    error_code: 0b100
                }
            },
            ElementKind::TraceOn {
                address: restart_address,
                reason: TraceOnReason::Restart
            },
            ElementKind::TraceOff {
                last_address: pcs.last().copied(),
                reason: TraceOffReason::DebugMode
            },
        ]
    );
    // segments: before the start, before the stop, before the restart, before the gap,
    // before the restart after it, before the end, after it.
    assert!(segments[0].is_empty() && segments[2].is_empty() && segments[4].is_empty());
    assert_same_pcs("up to the stop", &pcs[..stop], &segments[1]);
    let (before_gap, after_gap) = (&segments[3], &segments[5]);
    assert!(before_gap.len() > 1000 && after_gap.len() > 1000);
    assert_same_pcs(
        "from the start to the gap",
        &pcs[start..start + before_gap.len()],
        before_gap,
    );
    assert_same_pcs(
        "from the restart after the gap",
        &pcs[pcs.len() - after_gap.len()..],
        after_gap,
    );
    assert_eq!(after_gap.first(), Some(&restart_address));
    assert!(segments[6].is_empty());
    let mut decoder = FlowDecoder::new(
        &trace,
        &code.image,
        code.files.clone(),
        DecoderOptions::default(),
    );
    while decoder.next_element().unwrap().is_some() {}
    let statistics = decoder.statistics();
    assert_eq!(
        (statistics.gaps, statistics.trace_stops, statistics.restarts),
        (1, 2, 2)
    );
    assert!(statistics.skipped_units > 0, "the overrun's lost I-CNT");
    assert_eq!(
        statistics.instructions as usize,
        stop + before_gap.len() + after_gap.len()
    );
}
