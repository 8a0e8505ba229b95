//! Message-level events of the flow decoder, one behaviour per test: address
//! reconstruction, timestamps, ownership, errors as gaps, vendor messages, every SYNC
//! reason, repeat messages, the return stack across synchronisations.

mod support;

use code_image::CodeImage;
use ntrace_flow::{DecoderOptions, FlowDecoder, FlowError};
use ntrace_message::{
    Body, BranchType, CorrelationEvent, MessageOptions, Process, ResourceFull, SyncReason,
};
use trace_elements::{Context, ElementKind, GapReason, RangeEnd, TraceOnReason, TrapKind};

use support::{encode_with, files, image_of_halves};

/// `c.nop` (0x0001) at each address, in 2-byte segments.
fn nops(addresses: &[u64]) -> CodeImage {
    let segments: Vec<(u64, &[u16])> = addresses
        .iter()
        .map(|&address| (address, &[0x0001u16][..]))
        .collect();
    image_of_halves("nops", &segments)
}

fn elements(
    image: &CodeImage,
    options: DecoderOptions,
    bytes: &[u8],
) -> Vec<Result<ElementKind, String>> {
    let mut decoder = FlowDecoder::new(bytes, image, files(), options);
    let mut out = Vec::new();
    for _ in 0..10_000 {
        match decoder.next_element() {
            Ok(Some(element)) => out.push(Ok(element.kind)),
            Ok(None) => return out,
            Err(error) => out.push(Err(error.to_string())),
        }
    }
    panic!("decoder did not finish");
}

fn starts(kinds: &[Result<ElementKind, String>]) -> Vec<u64> {
    kinds
        .iter()
        .filter_map(|kind| match kind {
            Ok(ElementKind::InstructionRange { start, .. }) => Some(*start),
            _ => None,
        })
        .collect()
}

/// Ranges that end with a taken branch.
fn taken_branches(kinds: &[Result<ElementKind, String>]) -> usize {
    kinds
        .iter()
        .filter(|kind| {
            matches!(
                kind,
                Ok(ElementKind::InstructionRange {
                    end: RangeEnd::BranchTaken,
                    ..
                })
            )
        })
        .count()
}

/// 0x100 c.nop; 0x102 c.bnez a0, 0x100; 0x104 c.nop: a loop of two instructions.
fn loop_image() -> CodeImage {
    let mut image = CodeImage::new();
    let file = image.add_file("loop");
    image
        .add_segment(0x100, vec![0x01, 0x00, 0x7d, 0xfd, 0x01, 0x00], true, file)
        .unwrap();
    image
}

fn sync(address: u64) -> Body {
    Body::ProgTraceSync {
        sync: SyncReason(3),
        icnt: 0,
        faddr: address,
    }
}

fn stop(icnt: u64) -> Body {
    Body::ProgTraceCorrelation {
        evcode: CorrelationEvent(0),
        cdf: 0,
        icnt,
        hist: None,
    }
}

#[test]
fn u_addr_is_xored_with_the_previous_address() {
    // Spec Table 24: 0x3FC04 (F-ADDR), then U-ADDR 0x7B6 -> 0x3F368, U-ADDR 0x934 -> 0x3E100.
    let image = nops(&[0x3fc04, 0x3f368, 0x3e100]);
    let jump = |uaddr: u64| Body::IndirectBranch {
        btype: BranchType::Indirect,
        icnt: 1,
        uaddr: uaddr << 1,
    };
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(0x3fc04), None),
            (jump(0x7b6), None),
            (jump(0x934), None),
            (stop(1), None),
        ],
    );
    assert_eq!(
        starts(&elements(&image, DecoderOptions::default(), &bytes)),
        [0x3fc04, 0x3f368, 0x3e100]
    );
}

#[test]
fn timestamps_are_absolute_in_syncs_and_relative_elsewhere() {
    let image = nops(&[0x100, 0x200]);
    let options = MessageOptions::default().with_timestamps(true);
    let jump = Body::IndirectBranch {
        btype: BranchType::Indirect,
        icnt: 1,
        uaddr: 0x100 ^ 0x200,
    };
    let bytes = encode_with(
        options,
        &[
            (sync(0x100), Some(1000)),
            (jump, Some(25)),
            (stop(1), Some(5)),
        ],
    );
    let times: Vec<u64> = elements(
        &image,
        DecoderOptions::default().with_message(options),
        &bytes,
    )
    .into_iter()
    .filter_map(|kind| match kind {
        Ok(ElementKind::Timestamp { time }) => Some(time),
        _ => None,
    })
    .collect();
    assert_eq!(times, [1000, 1025, 1030]);
}

#[test]
fn ownership_becomes_a_context_change() {
    let image = nops(&[0x100]);
    let process = Process::from_field(0x3b2); // spec 7.1: scontext=0x1D, VU-mode
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(0x100), None),
            (Body::Ownership { process }, None),
            (stop(1), None),
        ],
    );
    let kinds = elements(&image, DecoderOptions::default(), &bytes);
    assert!(
        kinds.contains(&Ok(ElementKind::ContextChange {
            privilege: 0,
            virtualized: true,
            context: Some(Context::Process(0x1d))
        })),
        "{kinds:?}"
    );
}

#[test]
fn error_messages_are_gaps_and_decoding_resumes_at_the_next_sync() {
    let image = nops(&[0x100, 0x200]);
    let lost = Body::Error {
        etype: 0,
        ecode: 0b100,
    };
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(0x100), None),
            (lost, None),
            (stop(1), None),
            (sync(0x200), None),
            (stop(1), None),
        ],
    );
    let kinds = elements(&image, DecoderOptions::default(), &bytes);
    let gap = kinds.iter().position(|kind| {
        matches!(
            kind,
            Ok(ElementKind::Gap {
                reason: GapReason::EncoderOverflow {
                    error_type: 0,
                    error_code: 0b100
                }
            })
        )
    });
    let restart = kinds.iter().position(|kind| {
        matches!(
            kind,
            Ok(ElementKind::TraceOn {
                address: 0x200,
                reason: TraceOnReason::Restart
            })
        )
    });
    assert!(gap.is_some() && restart > gap, "{kinds:?}");
    // The correlation right after the error cannot be placed and is skipped; the one after
    // the new sync decodes.
    assert_eq!(starts(&kinds), [0x200]);
}

#[test]
fn vendor_and_reserved_messages_are_surfaced() {
    let image = nops(&[0x100]);
    let mut bytes = encode_with(MessageOptions::default(), &[(sync(0x100), None)]);
    bytes.extend_from_slice(&[56 << 2, 0b101 << 2 | 3]); // vendor TCODE 56, one payload byte
    bytes.extend_from_slice(&[10 << 2, 3]); // reserved TCODE 10 (a message has at least two bytes)
    bytes.extend(encode_with(MessageOptions::default(), &[(stop(1), None)]));
    let kinds = elements(&image, DecoderOptions::default(), &bytes);
    assert!(
        kinds.contains(&Ok(ElementKind::Unhandled { code: 56 })),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&Ok(ElementKind::Unhandled { code: 10 })),
        "{kinds:?}"
    );
    assert_eq!(starts(&kinds), [0x100]);
}

#[test]
fn every_sync_reason_starts_decoding() {
    let image = nops(&[0x100]);
    for reason in 0..16 {
        let bytes = encode_with(
            MessageOptions::default(),
            &[
                (
                    Body::ProgTraceSync {
                        sync: SyncReason(reason),
                        icnt: 5,
                        faddr: 0x100,
                    },
                    None,
                ),
                (stop(1), None),
            ],
        );
        let kinds = elements(&image, DecoderOptions::default(), &bytes);
        assert_eq!(
            kinds.first(),
            Some(&Ok(ElementKind::TraceOn {
                address: 0x100,
                reason: TraceOnReason::Start
            })),
            "SYNC={reason}"
        );
        assert_eq!(
            starts(&kinds),
            [0x100],
            "SYNC={reason}: the first sync's I-CNT is not walked"
        );
    }
}

#[test]
fn traps_carry_their_kind() {
    let image = nops(&[0x100, 0x200]);
    for (btype, kind) in [
        (BranchType::Exception, TrapKind::Exception),
        (BranchType::Interrupt, TrapKind::Interrupt),
        (
            BranchType::ExceptionOrInterrupt,
            TrapKind::ExceptionOrInterrupt,
        ),
    ] {
        let trap = Body::IndirectBranch {
            btype,
            icnt: 1,
            uaddr: 0x100 ^ 0x200,
        };
        let bytes = encode_with(
            MessageOptions::default(),
            &[(sync(0x100), None), (trap, None), (stop(1), None)],
        );
        let kinds = elements(&image, DecoderOptions::default(), &bytes);
        assert!(
            kinds.contains(&Ok(ElementKind::Trap {
                from: Some(0x102),
                handler: 0x200,
                kind
            })),
            "{kinds:?}"
        );
    }
}

#[test]
fn repeat_branch_replays_the_previous_branch_message() {
    // A loop: 0x100 c.nop, 0x102 c.bnez a0, -2 (0xfd75 = c.bnez a0,0x100). In BTM every
    // iteration is DirectBranch(I-CNT=2); RepeatBranch(B-CNT=4) stands for 4 more.
    let image = loop_image();
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(0x100), None),
            (Body::DirectBranch { icnt: 2 }, None),
            (Body::RepeatBranch { bcnt: 4 }, None),
            (stop(3), None),
        ],
    );
    let kinds = elements(&image, DecoderOptions::default(), &bytes);
    let taken = taken_branches(&kinds);
    assert_eq!(taken, 5, "{kinds:?}");
    // The final correlation falls out of the loop: one range through the not-taken
    // branch into the next instruction.
    let last_range = kinds.iter().rev().find_map(|kind| match kind {
        Ok(ElementKind::InstructionRange {
            start,
            instructions,
            end,
            ..
        }) => Some((*start, *instructions, *end)),
        _ => None,
    });
    assert_eq!(last_range, Some((0x100, 3, RangeEnd::Sequential)));
}

#[test]
fn repeated_history_plays_its_pattern_hrepeat_times() {
    // Same loop in HTM: ResourceFull RCODE 2 with pattern "1" x 30 and HREPEAT 3 is
    // 90 taken branches, then the correlation's HIST 0b10 leaves the loop.
    let image = loop_image();
    let pattern = (1u64 << 31) - 1; // stop bit + 30 ones
    let repeated = Body::ResourceFull(ResourceFull::RepeatedHist {
        hist: (1 << 30) | pattern,
        repeat: 3,
    });
    let last = Body::ProgTraceCorrelation {
        evcode: CorrelationEvent(0),
        cdf: 1,
        icnt: 91 * 2 + 1,
        hist: Some(0b10),
    };
    let bytes = encode_with(
        MessageOptions::default(),
        &[(sync(0x100), None), (repeated, None), (last, None)],
    );
    let kinds = elements(&image, DecoderOptions::default(), &bytes);
    let taken = taken_branches(&kinds);
    assert_eq!(taken, 90, "{:?}", kinds.last());
    assert!(kinds.iter().all(Result::is_ok), "{kinds:?}");
}

#[test]
fn a_return_without_a_stack_entry_is_an_error_not_a_guess() {
    // 0x100: c.jr ra (0x8082) inside a longer I-CNT with an empty return stack.
    let mut image = CodeImage::new();
    let file = image.add_file("ret");
    image
        .add_segment(0x100, vec![0x82, 0x80, 0x01, 0x00], true, file)
        .unwrap();
    let bytes = encode_with(
        MessageOptions::default(),
        &[(sync(0x100), None), (stop(2), None)],
    );
    let kinds = elements(&image, DecoderOptions::default(), &bytes);
    assert!(
        kinds
            .iter()
            .any(|kind| matches!(kind, Err(text) if text.contains("return stack"))),
        "{kinds:?}"
    );
    let _ = FlowError::UnknownAddress { offset: 0 };
}
