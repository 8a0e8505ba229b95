//! trTeInstEnAllJumps: direct jumps and calls reported as taken branches (a HIST bit in
//! HTM, a DirectBranch message in BTM). The walk over a small hand-made program, message
//! by message, and the encoder model's traces of it under many settings decoded back to
//! the exact PC sequence; decoded without the option they fail, never silently.

mod support;

use code_image::CodeImage;
use ntrace_flow::{
    BranchMode, DecoderOptions, EncoderOptions, FlowError, InstructionDecoder, InstructionStep,
    TraceEncoder, WalkReplay,
};
use ntrace_message::{Body, CorrelationEvent, SyncReason};
use trace_elements::{ElementKind, RangeEnd, TraceOffReason, TraceOnReason};

use support::{decode_pcs, element_kinds, encode, files, image_of_halves, range};

/// The program (riscv64-linux-gnu-as, linked at 0x100):
///
/// ```text
/// 0x100 c.nop
/// 0x102 jal ra, 0x200      call
/// 0x106 c.nop
/// 0x108 c.nop
/// 0x10a c.jr a5            to 0x300 (an indirect jump: an address message)
/// 0x200 c.bnez a0, 0x206
/// 0x202 c.j 0x206
/// 0x204 c.nop
/// 0x206 c.jr ra            return
/// 0x300 c.nop
/// 0x302 c.j 0x100
/// ```
fn image() -> CodeImage {
    image_of_halves(
        "all-jumps",
        &[
            (0x100, &[0x0001, 0x00ef, 0x0fe0, 0x0001, 0x0001, 0x8782]),
            (0x200, &[0xe119, 0xa011, 0x0001, 0x8082]),
            (0x300, &[0x0001, 0xbbfd]),
        ],
    )
}

/// Every element kind, or the first error.
fn elements(bytes: &[u8], options: DecoderOptions) -> Result<Vec<ElementKind>, FlowError> {
    element_kinds(bytes, &image(), options)
}

fn start_at(address: u64) -> Body {
    Body::ProgTraceSync {
        sync: SyncReason::EXIT_FROM_DEBUG,
        icnt: 0,
        faddr: address,
    }
}

fn stop(icnt: u64, hist: Option<u64>) -> Body {
    Body::ProgTraceCorrelation {
        evcode: CorrelationEvent::ENTRY_INTO_DEBUG,
        cdf: u8::from(hist.is_some()),
        icnt,
        hist,
    }
}

/// 0x100 to 0x108 with a0 = 0: the call, the not-taken branch and the jump, the implicit
/// return, two more instructions: 8 I-CNT units.
fn expected_walk() -> Vec<ElementKind> {
    vec![
        ElementKind::TraceOn {
            address: 0x100,
            reason: TraceOnReason::Start,
        },
        range(0x100, 0x102, 2, RangeEnd::Call, 0x200),
        range(0x200, 0x202, 2, RangeEnd::Jump, 0x206),
        range(0x206, 0x206, 1, RangeEnd::Return, 0x106),
        range(0x106, 0x108, 2, RangeEnd::Sequential, 0x10a),
        ElementKind::TraceOff {
            last_address: Some(0x108),
            reason: TraceOffReason::DebugMode,
        },
    ]
}

fn all_jumps() -> DecoderOptions {
    DecoderOptions::default().with_all_jumps(true)
}

#[test]
fn htm_jumps_and_calls_take_a_hist_bit_each() {
    // HIST: jal taken (1), c.bnez not taken (0), c.j taken (1), under the stop bit.
    let bytes = encode(&[start_at(0x100), stop(8, Some(0b1101))]);
    for replay in [WalkReplay::Replay, WalkReplay::Off] {
        let decoded = elements(&bytes, all_jumps().with_walk_replay(replay)).unwrap();
        assert_eq!(decoded, expected_walk(), "{replay:?}");
    }
    // The same bits read as conditional branches only: c.bnez takes the jal's bit.
    let error = elements(&bytes, DecoderOptions::default()).unwrap_err();
    assert!(matches!(error, FlowError::HistoryLeft { .. }), "{error}");
    // A jump's bit must be 1.
    let error = elements(
        &encode(&[start_at(0x100), stop(8, Some(0b1001))]),
        all_jumps(),
    )
    .unwrap_err();
    assert!(
        matches!(error, FlowError::JumpNotReported { address: 0x102, .. }),
        "{error}"
    );
}

#[test]
fn htm_walk_waits_at_a_jump_for_its_bit() {
    // The I-CNT arrives before the HIST that covers the jal: a ResourceFull I-CNT, then
    // the bits with the correlation.
    let bytes = encode(&[
        start_at(0x100),
        Body::ResourceFull(ntrace_message::ResourceFull::IcntOverflow { icnt: 8 }),
        stop(0, Some(0b1101)),
    ]);
    assert_eq!(elements(&bytes, all_jumps()).unwrap(), expected_walk());
}

#[test]
fn btm_jumps_and_calls_end_direct_branch_messages() {
    let bytes = encode(&[
        start_at(0x100),
        Body::DirectBranch { icnt: 3 }, // c.nop, jal
        Body::DirectBranch { icnt: 2 }, // c.bnez (not taken), c.j
        stop(3, None),                  // c.jr ra (implicit), c.nop, c.nop
    ]);
    for replay in [WalkReplay::Replay, WalkReplay::Off] {
        let decoded = elements(&bytes, all_jumps().with_walk_replay(replay)).unwrap();
        assert_eq!(decoded, expected_walk(), "{replay:?}");
    }
    // Decoded without the option, the first DirectBranch ends at a call.
    let error = elements(&bytes, DecoderOptions::default()).unwrap_err();
    assert!(
        matches!(error, FlowError::JumpReported { address: 0x102, .. }),
        "{error}"
    );
    // With it, a walk through a jump its own message does not end at is an error.
    let unreported = encode(&[start_at(0x100), Body::DirectBranch { icnt: 5 }]);
    let error = elements(&unreported, all_jumps()).unwrap_err();
    assert!(
        matches!(error, FlowError::JumpNotReported { address: 0x102, .. }),
        "{error}"
    );
}

#[test]
fn a_direct_branch_sync_at_a_call_checks_the_target_and_resets_the_stack() {
    // Periodic synchronisation due at the jal: DirectBranchSync with the call's target.
    // The encoder pushed the return address, then reset its stack with the sync, so the
    // return is reported explicitly.
    let sync = |faddr| Body::DirectBranchSync {
        sync: SyncReason::PERIODIC,
        icnt: 3,
        faddr,
    };
    let ret = Body::IndirectBranch {
        btype: ntrace_message::BranchType::Indirect,
        icnt: 1,
        uaddr: 0x200 ^ 0x106,
    };
    let bytes = encode(&[
        start_at(0x100),
        sync(0x200),
        Body::DirectBranch { icnt: 2 },
        ret, // c.jr ra, explicit
        stop(2, None),
    ]);
    assert_eq!(elements(&bytes, all_jumps()).unwrap(), expected_walk());
    // The stack was reset: an implicit return has nothing to pop.
    let implicit = encode(&[
        start_at(0x100),
        sync(0x200),
        Body::DirectBranch { icnt: 2 },
        stop(3, None),
    ]);
    let error = elements(&implicit, all_jumps()).unwrap_err();
    assert!(
        matches!(error, FlowError::UnknownTarget { address: 0x206, .. }),
        "{error}"
    );
    let wrong = encode(&[start_at(0x100), sync(0x204)]);
    let error = elements(&wrong, all_jumps()).unwrap_err();
    assert!(
        matches!(
            error,
            FlowError::AddressMismatch {
                computed: 0x200,
                reported: 0x204,
                ..
            }
        ),
        "{error}"
    );
}

/// The retired PCs of `iterations` turns of the program's loop, a0 alternating in a
/// pattern so that c.bnez goes both ways.
fn run(iterations: usize) -> Vec<u64> {
    let mut pcs = Vec::new();
    for iteration in 0..iterations {
        pcs.extend([0x100, 0x102, 0x200]);
        if iteration % 3 != 1 {
            pcs.push(0x202); // a0 = 0: not taken, then c.j
        }
        pcs.extend([0x206, 0x106, 0x108, 0x10a, 0x300, 0x302]);
    }
    pcs.push(0x100);
    pcs
}

#[test]
fn the_encoder_models_traces_decode_back_exactly() {
    let image = image();
    let pcs = run(200);
    let mut configurations = 0;
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        for return_stack_depth in [0, 32] {
            for (periodic_sync, hist_bits, icnt_bits, repeated) in [
                (0, 32, 22, true),
                (1, 32, 22, false),
                (3, 5, 22, true),
                (7, 4, 5, true),
                (0, 3, 4, false),
            ] {
                let mut encoder = EncoderOptions::default();
                encoder.mode = mode;
                encoder.all_jumps = true;
                encoder.return_stack_depth = return_stack_depth;
                encoder.periodic_sync = periodic_sync;
                encoder.hist_bits = hist_bits;
                encoder.icnt_bits = icnt_bits;
                encoder.repeated_history = repeated;
                encoder.repeat_branch = !repeated;
                let mut model = TraceEncoder::new(&image, files(), encoder).unwrap();
                for &pc in &pcs {
                    model.retire(pc).unwrap();
                }
                let (trace, _) = model.finish().unwrap();
                let options = DecoderOptions::default()
                    .with_return_stack_depth(return_stack_depth)
                    .with_all_jumps(true);
                for replay in [WalkReplay::Replay, WalkReplay::Off] {
                    let decoded = decode_pcs(&trace, &image, options.with_walk_replay(replay))
                        .unwrap_or_else(|error| panic!("{encoder:?} {replay:?}: {error}"));
                    assert_eq!(decoded, pcs, "{encoder:?} {replay:?}");
                }
                // Instruction by instruction, too.
                let mut instructions = InstructionDecoder::new(&trace, &image, files(), options);
                let mut stepped = Vec::new();
                while let Some(step) = instructions.next_step().unwrap() {
                    if let InstructionStep::Instruction(instruction) = step {
                        stepped.push(instruction.address);
                    }
                }
                assert_eq!(stepped, pcs, "{encoder:?}: instruction decoder");
                // Without the option the decode must fail, not give other PCs.
                let without = decode_pcs(&trace, &image, options.with_all_jumps(false));
                assert!(without.is_err(), "{encoder:?}: decoded without all-jumps");
                configurations += 1;
            }
        }
    }
    assert_eq!(configurations, 20);
}
