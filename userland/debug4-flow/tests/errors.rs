//! Each decode error becomes a gap with its cause, and decoding goes on; arbitrary bytes
//! never panic.

mod support;

use debug4_flow::{BranchReporting, Debug4Decoder, DecoderOptions, FlowError, StreamOptions};
use debug4_message::{Debug4Error, OutgoingSequence, SequenceEncoder, SequenceEncoderOptions};
use proptest::prelude::*;
use support::*;
use trace_elements::{DecodeFailure, ElementKind, ElementSource, GapReason, TraceOnReason};

fn stream(units: &[&[OutgoingSequence]]) -> Vec<u8> {
    let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
    for unit in units {
        encoder.write_unit(0, unit).unwrap();
    }
    encoder.finish().bytes
}

fn decode(
    bytes: &[u8],
    mode: BranchReporting,
) -> Vec<(trace_elements::TraceElement, Option<FlowError>)> {
    let image = program();
    let mut decoder = Debug4Decoder::new(
        bytes,
        &image,
        DecoderOptions::new(StreamOptions::default(), mode),
    );
    elements(&mut decoder)
}

fn causes(elements: &[(trace_elements::TraceElement, Option<FlowError>)]) -> Vec<FlowError> {
    elements
        .iter()
        .filter(|(element, _)| {
            matches!(
                element.kind,
                ElementKind::Gap {
                    reason: GapReason::DecodeError { .. }
                }
            )
        })
        .map(|(_, cause)| cause.expect("decode-error gaps keep their cause"))
        .collect()
}

use OutgoingSequence::{BranchNotTaken, BranchTaken, Pc, TraceEnabled};

#[test]
fn no_code_at_the_start_pc() {
    let bytes = stream(&[&[TraceEnabled, Pc { address: 0x9000 }], &[BranchTaken]]);
    let elements = decode(&bytes, BranchReporting::TakenNotTaken);
    let found = causes(&elements);
    assert!(
        matches!(
            found[..],
            [FlowError::NoCode {
                address: 0x9000,
                ..
            }]
        ),
        "{found:?}"
    );
    let gap = elements
        .iter()
        .find(|(element, _)| matches!(element.kind, ElementKind::Gap { .. }))
        .unwrap();
    assert_eq!(
        gap.0.kind,
        ElementKind::Gap {
            reason: GapReason::DecodeError {
                cause: DecodeFailure::NoCode { address: 0x9000 }
            }
        }
    );
}

#[test]
fn a_pc_where_a_branch_packet_is_needed() {
    // From 0x1100 the walk meets the branch at 0x1102 before any uninferable transfer.
    let bytes = stream(&[
        &[TraceEnabled, Pc { address: 0x1100 }],
        &[Pc { address: 0x1000 }],
        &[BranchNotTaken],
    ]);
    let elements = decode(&bytes, BranchReporting::TakenNotTaken);
    assert!(matches!(
        causes(&elements)[..],
        [FlowError::BranchWithoutPacket {
            address: 0x1102,
            ..
        }]
    ));
    // Decoding resumes at the next PC... which was the failing one; the branch after it
    // is then skipped as the hart is lost; nothing else fails.
    assert_eq!(
        elements
            .iter()
            .filter(|(element, _)| matches!(element.kind, ElementKind::TraceOn { .. }))
            .count(),
        1
    );
}

#[test]
fn a_branch_packet_where_a_pc_is_needed() {
    // From 0x1016 the walk meets the jalr at 0x101a before any branch.
    let bytes = stream(&[
        &[TraceEnabled, Pc { address: 0x1016 }],
        &[BranchTaken],
        &[Pc { address: 0x1000 }],
        &[BranchTaken],
    ]);
    let elements = decode(&bytes, BranchReporting::TakenNotTaken);
    assert!(matches!(
        causes(&elements)[..],
        [FlowError::TransferWithoutPc {
            address: 0x101a,
            ..
        }]
    ));
    // The next PC restarts the hart.
    assert!(elements.iter().any(|(element, _)| element.kind
        == ElementKind::TraceOn {
            address: 0x1000,
            reason: TraceOnReason::Restart
        }));
}

#[test]
fn a_jump_without_a_pair() {
    let bytes = stream(&[
        &[TraceEnabled, Pc { address: 0x1000 }],
        &[Pc { address: 0x1016 }, Pc { address: 0x1000 }],
    ]);
    let elements = decode(&bytes, BranchReporting::PcPairs);
    assert!(
        matches!(
            causes(&elements)[..],
            [FlowError::JumpWithoutPair {
                address: 0x100e,
                ..
            }]
        ),
        "{elements:?}"
    );
}

#[test]
fn unpaired_pcs_and_missing_start_pcs() {
    let bytes = stream(&[
        &[TraceEnabled, Pc { address: 0x1000 }],
        &[Pc { address: 0x100e }],
        &[BranchTaken],
    ]);
    assert!(matches!(
        causes(&decode(&bytes, BranchReporting::PcPairs))[..],
        [FlowError::UnpairedPc { .. }]
    ));
    let bytes = stream(&[&[TraceEnabled], &[BranchTaken]]);
    assert!(matches!(
        causes(&decode(&bytes, BranchReporting::TakenNotTaken))[..],
        [FlowError::MissingStartPc { .. }]
    ));
}

#[test]
fn endless_walks_are_cut() {
    let mut image = code_image::CodeImage::new();
    let file = image.add_file("loop");
    // j . : a loop no packet ends.
    assemble(&mut image, file, 0x2000, &[Word::Full(jal(0, 0))]);
    let bytes = stream(&[&[TraceEnabled, Pc { address: 0x2000 }], &[BranchTaken]]);
    let mut decoder = Debug4Decoder::new(
        &bytes,
        &image,
        DecoderOptions::new(StreamOptions::default(), BranchReporting::TakenNotTaken),
    );
    let elements = elements(&mut decoder);
    assert!(matches!(
        causes(&elements)[..],
        [FlowError::EndlessWalk {
            address: 0x2000,
            ..
        }]
    ));
}

#[test]
fn corrupt_data_and_huge_harts() {
    // A reserved header after the start.
    let mut bytes = stream(&[&[TraceEnabled, Pc { address: 0x1000 }]]);
    bytes.extend([0x0d, 0, 0, 0]);
    let elements = decode(&bytes, BranchReporting::TakenNotTaken);
    assert!(matches!(
        causes(&elements)[..],
        [FlowError::Message(Debug4Error::ReservedHeader { .. })]
    ));
    let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
    encoder
        .write_unit(1 << 20, &[TraceEnabled, Pc { address: 0x1000 }])
        .unwrap();
    let bytes = encoder.finish().bytes;
    let elements = decode(&bytes, BranchReporting::TakenNotTaken);
    assert!(matches!(
        causes(&elements)[..],
        [FlowError::HartOutOfRange {
            hart: 0x10_0000,
            ..
        }]
    ));
}

#[test]
fn custom_headers_are_unhandled_elements() {
    let bytes = stream(&[
        &[TraceEnabled, Pc { address: 0x1000 }],
        &[OutgoingSequence::Custom {
            header: debug4_message::CustomHeader::Custom15,
            value: 3,
        }],
    ]);
    let elements = decode(&bytes, BranchReporting::TakenNotTaken);
    assert!(elements
        .iter()
        .any(|(element, _)| element.kind == ElementKind::Unhandled { code: 15 }));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), pairs in any::<bool>(), buffer in prop::option::of(1u64..8), wrap in prop::option::of(0u64..400)) {
        let image = program();
        let mode = if pairs { BranchReporting::PcPairs } else { BranchReporting::TakenNotTaken };
        let stream = StreamOptions::default().with_buffer_bytes(buffer.map(|units| units * 32)).with_wrap_offset(wrap);
        let mut decoder = Debug4Decoder::new(&bytes, &image, DecoderOptions::new(stream, mode).with_walk_limit(1 << 10));
        let mut count = 0u64;
        while let Some(element) = decoder.next_element().unwrap() {
            prop_assert!(element.offset <= bytes.len() as u64);
            count += 1;
            prop_assert!(count < 1 << 22);
        }
    }
}

/// After Trace Disabled a compressed PC is filled from values sent before the stop (or,
/// in a ring read without its write pointer, from unrelated newer data): the hart
/// starts again only at Trace Enabled or a PC sent in full.
#[test]
fn after_a_stop_only_trace_enabled_or_a_full_pc_restarts() {
    let bytes = stream(&[
        &[
            OutgoingSequence::TraceEnabled,
            OutgoingSequence::Pc { address: 0x1000 },
        ],
        &[
            OutgoingSequence::Pc { address: 0x1000 },
            OutgoingSequence::TraceDisabled,
        ],
        &[OutgoingSequence::Pc { address: 0x1100 }],
        &[
            OutgoingSequence::TraceEnabled,
            OutgoingSequence::Pc { address: 0x1200 },
        ],
    ]);
    let starts: Vec<(u64, TraceOnReason)> = decode(&bytes, BranchReporting::TakenNotTaken)
        .into_iter()
        .filter_map(|(element, _)| match element.kind {
            ElementKind::TraceOn { address, reason } => Some((address, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            (0x1000, TraceOnReason::Start),
            (0x1200, TraceOnReason::Restart)
        ]
    );
}
