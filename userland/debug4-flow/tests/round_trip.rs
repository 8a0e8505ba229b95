//! Encode synthetic retirement streams over a small program, decode, compare PCs.

mod support;

use debug4_flow::{
    BranchReporting, BufferMode, DataEmission, Debug4Decoder, Debug4Encoder, DecoderOptions,
    EncoderOptions, Retirement,
};
use debug4_message::PcGranularity;
use support::*;
use trace_elements::{
    AddressKind, ElementKind, GapReason, MemoryOperation, Register, TraceOffReason, TraceOnReason,
    TrapKind,
};

/// Runs `harts` harts for `count` retirements, interleaved at random.
fn run(harts: u16, count: usize, seed: u64) -> Vec<Retirement> {
    let mut rng = Rng(seed);
    let mut pcs: Vec<u64> = (0..harts)
        .map(|hart| ENTRY_POINTS[usize::from(hart) % 4])
        .collect();
    let mut out = Vec::new();
    for _ in 0..count {
        let hart = rng.below(u64::from(harts)) as u16;
        let pc = pcs[usize::from(hart)];
        out.push(retirement(hart, pc, &mut rng));
        pcs[usize::from(hart)] = successor(pc, &mut rng);
    }
    out
}

fn encode(retirements: &[Retirement], options: EncoderOptions) -> debug4_flow::EncodedTrace {
    let image = program();
    let mut encoder = Debug4Encoder::new(&image, options).unwrap();
    for retirement in retirements {
        encoder.retire(retirement).unwrap();
    }
    encoder.finish().unwrap()
}

fn decoder_options(trace: &debug4_flow::EncodedTrace, options: EncoderOptions) -> DecoderOptions {
    DecoderOptions::new(
        trace.stream_options(options.buffer, PcGranularity::Halfword),
        options.branch_reporting,
    )
}

fn expected_pcs(retirements: &[Retirement], hart: u16) -> Vec<u64> {
    retirements
        .iter()
        .filter(|retirement| retirement.hart == hart)
        .map(|retirement| retirement.pc)
        .collect()
}

const MODES: [BranchReporting; 2] = [BranchReporting::TakenNotTaken, BranchReporting::PcPairs];

#[test]
fn one_hart_round_trips_exactly_in_both_modes() {
    let image = program();
    for mode in MODES {
        for seed in 1..20 {
            let retirements = run(1, 2000, seed);
            let options = EncoderOptions::default().with_branch_reporting(mode);
            let trace = encode(&retirements, options);
            let mut decoder =
                Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
            let elements = elements(&mut decoder);
            assert!(
                elements
                    .iter()
                    .all(|(element, _)| !matches!(element.kind, ElementKind::Gap { .. })),
                "{mode:?} seed {seed}: {elements:?}"
            );
            assert_eq!(
                pcs_of(&image, &elements, 0),
                expected_pcs(&retirements, 0),
                "{mode:?} seed {seed}"
            );
            assert!(matches!(
                elements.first().unwrap().0.kind,
                ElementKind::TraceOn {
                    reason: TraceOnReason::Start,
                    ..
                }
            ));
            let last = elements.last().unwrap().0.kind;
            assert_eq!(
                last,
                ElementKind::TraceOff {
                    last_address: Some(retirements.last().unwrap().pc),
                    reason: TraceOffReason::Disabled
                }
            );
        }
    }
}

#[test]
fn two_harts_interleaved_round_trip() {
    let image = program();
    for mode in MODES {
        let retirements = run(2, 4000, 7);
        let options = EncoderOptions::default().with_branch_reporting(mode);
        let trace = encode(&retirements, options);
        let mut decoder =
            Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
        let elements = elements(&mut decoder);
        for hart in 0..2 {
            assert_eq!(
                pcs_of(&image, &elements, hart),
                expected_pcs(&retirements, hart),
                "{mode:?} hart {hart}"
            );
        }
    }
}

#[test]
fn a_first_hart_other_than_zero_starts_with_change_hart() {
    let image = program();
    let retirements: Vec<Retirement> = run(1, 100, 3)
        .into_iter()
        .map(|retirement| Retirement {
            hart: 5,
            ..retirement
        })
        .collect();
    let options = EncoderOptions::default();
    let trace = encode(&retirements, options);
    assert!(debug4_message::detect(&trace.bytes));
    assert_eq!(trace.bytes[0] & 0xf, 7);
    let mut decoder = Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
    let elements = elements(&mut decoder);
    assert!(elements.iter().all(|(element, _)| element.hart == 5));
    assert_eq!(pcs_of(&image, &elements, 5), expected_pcs(&retirements, 5));
}

#[test]
fn wrapped_rings_decode_to_the_tail_of_the_input() {
    let image = program();
    for mode in MODES {
        for harts in 1..=2u16 {
            for seed in 1..6 {
                let retirements = run(harts, 6000, seed);
                let options = EncoderOptions::default()
                    .with_branch_reporting(mode)
                    .with_buffer(BufferMode::Ring { bytes: 512 });
                let trace = encode(&retirements, options);
                assert!(trace.wrap_offset.is_some(), "the ring wraps several times");
                let mut decoder =
                    Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
                let elements = elements(&mut decoder);
                assert!(
                    elements
                        .iter()
                        .all(|(element, _)| !matches!(element.kind, ElementKind::Gap { .. })),
                    "{mode:?}: {elements:?}"
                );
                assert!(matches!(
                    elements.first().unwrap().0.kind,
                    ElementKind::TraceOn {
                        reason: TraceOnReason::Start,
                        ..
                    }
                ));
                for hart in 0..harts {
                    let decoded = pcs_of(&image, &elements, hart);
                    let expected = expected_pcs(&retirements, hart);
                    assert!(!decoded.is_empty(), "{mode:?} hart {hart} seed {seed}");
                    assert!(
                        expected.ends_with(&decoded),
                        "{mode:?} hart {hart} seed {seed}: not a tail"
                    );
                }
            }
        }
    }
}

#[test]
fn data_sequences_become_memory_accesses_and_register_writes() {
    let image = program();
    for mode in MODES {
        let retirements = run(1, 3000, 11);
        let options = EncoderOptions::default()
            .with_branch_reporting(mode)
            .with_data(DataEmission::all())
            .with_timestamp_interval(100);
        let trace = encode(&retirements, options);
        let mut decoder =
            Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
        let elements = elements(&mut decoder);
        assert_eq!(
            pcs_of(&image, &elements, 0),
            expected_pcs(&retirements, 0),
            "{mode:?}"
        );
        let mut expected = Vec::new();
        for retirement in &retirements {
            if let Some(access) = retirement.data {
                let kind = match access.kind {
                    debug4_flow::AccessKind::Load => ElementKind::MemoryAccess {
                        operation: MemoryOperation::Load,
                        address: access.address,
                        address_kind: AddressKind::Effective,
                        size: Some(4),
                        data: access.value,
                    },
                    debug4_flow::AccessKind::Store => ElementKind::MemoryAccess {
                        operation: MemoryOperation::Store,
                        address: access.address,
                        address_kind: AddressKind::Effective,
                        size: Some(4),
                        data: access.value,
                    },
                    debug4_flow::AccessKind::CsrRead => ElementKind::RegisterWrite {
                        register: Register::Integer(5),
                        value: access.value.unwrap(),
                    },
                    debug4_flow::AccessKind::CsrWrite => ElementKind::RegisterWrite {
                        register: Register::Csr(0x340),
                        value: access.value.unwrap(),
                    },
                };
                expected.push((retirement.pc, kind));
            }
        }
        // Each access follows the range that ends at its instruction.
        let mut got = Vec::new();
        let mut last = None;
        let mut timestamps = 0;
        for (element, _) in &elements {
            match element.kind {
                ElementKind::InstructionRange { last: address, .. } => last = Some(address),
                ElementKind::MemoryAccess { .. } | ElementKind::RegisterWrite { .. } => {
                    got.push((last.unwrap(), element.kind))
                }
                ElementKind::Timestamp { time } => {
                    timestamps += 1;
                    assert_eq!(time, timestamps * 100);
                }
                _ => {}
            }
        }
        assert_eq!(got, expected, "{mode:?}");
        assert_eq!(timestamps, 30);
    }
}

#[test]
fn interrupts_are_traps_and_the_flow_continues_in_the_handler() {
    let image = program();
    for mode in MODES {
        let mut rng = Rng(5);
        let image_ref = &image;
        let mut encoder = Debug4Encoder::new(
            image_ref,
            EncoderOptions::default().with_branch_reporting(mode),
        )
        .unwrap();
        let mut pc = 0x1000;
        let mut expected = Vec::new();
        let mut interrupts = 0;
        for step in 0..3000 {
            let retirement = Retirement {
                privilege: Some(0),
                ..retirement(0, pc, &mut rng)
            };
            encoder.retire(&retirement).unwrap();
            expected.push(pc);
            pc = successor(pc, &mut rng);
            if step % 97 == 0 {
                encoder.interrupt(0, pc).unwrap();
                pc = 0x1200;
                interrupts += 1;
            }
        }
        let trace = encoder.finish().unwrap();
        let options = EncoderOptions::default().with_branch_reporting(mode);
        let mut decoder =
            Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
        let elements = elements(&mut decoder);
        assert_eq!(pcs_of(&image, &elements, 0), expected, "{mode:?}");
        let traps = elements
            .iter()
            .filter(|(element, _)| {
                matches!(
                    element.kind,
                    ElementKind::Trap {
                        kind: TrapKind::Interrupt,
                        handler: 0x1200,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(traps, interrupts);
    }
}

#[test]
fn unflagged_discontinuities_decode_as_interrupts() {
    let image = program();
    // 0x1000 is sequential, yet 0x1200 follows (a signal handler in a user-mode trace).
    let retirements =
        [0x1000, 0x1200, 0x1204, 0x1208, 0x1000, 0x1004].map(|pc| Retirement::at(0, pc));
    for mode in MODES {
        let options = EncoderOptions::default().with_branch_reporting(mode);
        let trace = encode(&retirements, options);
        let mut decoder =
            Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
        let elements = elements(&mut decoder);
        assert_eq!(
            pcs_of(&image, &elements, 0),
            expected_pcs(&retirements, 0),
            "{mode:?}"
        );
    }
}

#[test]
fn dropped_data_is_a_gap_then_a_restart() {
    let image = program();
    for mode in MODES {
        let retirements = run(1, 600, 9);
        let mut encoder = Debug4Encoder::new(
            &image,
            EncoderOptions::default().with_branch_reporting(mode),
        )
        .unwrap();
        for (index, retirement) in retirements.iter().enumerate() {
            if index == 300 {
                encoder.data_dropped(0).unwrap();
            }
            encoder.retire(retirement).unwrap();
        }
        let trace = encoder.finish().unwrap();
        let options = EncoderOptions::default().with_branch_reporting(mode);
        let mut decoder =
            Debug4Decoder::new(&trace.bytes, &image, decoder_options(&trace, options));
        let elements = elements(&mut decoder);
        let gap = elements
            .iter()
            .position(|(element, _)| {
                element.kind
                    == ElementKind::Gap {
                        reason: GapReason::EncoderOverflow {
                            error_type: 0,
                            error_code: 0,
                        },
                    }
            })
            .expect("a gap");
        assert!(
            matches!(elements[gap + 1].0.kind, ElementKind::TraceOn { reason: TraceOnReason::Restart, address } if address == retirements[300].pc)
        );
        let decoded = pcs_of(&image, &elements, 0);
        // Everything but the instruction whose packets were dropped.
        let mut expected = expected_pcs(&retirements, 0);
        let before = pcs_of(&image, &elements[..gap], 0).len();
        assert!((290..=300).contains(&before), "{before}");
        expected.drain(before..300);
        assert_eq!(decoded, expected, "{mode:?}");
    }
}
