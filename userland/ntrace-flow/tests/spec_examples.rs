//! The worked examples of the N-Trace specification, chapter 8.4, decoded exactly.

mod support;

use code_image::CodeImage;
use ntrace_flow::{DecoderOptions, FlowDecoder, FlowError};
use ntrace_message::{Body, BranchType, CorrelationEvent, SyncReason};
use trace_elements::{ElementKind, RangeEnd};

use support::{decode_pcs, encode, files};

/// Spec 8.4.1's program (encodings from riscv64-linux-gnu-as):
/// 0x100 c.add; 0x102 beq ->0x200; 0x106 add; 0x10a beq ->0x300; 0x10e c.add; 0x110 add;
/// 0x114 c.ebreak; 0x200 c.add; 0x202 c.ebreak; 0x300 add; 0x304 c.ebreak.
fn section_8_4_1_image() -> CodeImage {
    let mut image = CodeImage::new();
    let file = image.add_file("spec-8.4.1");
    let words: &[(u64, &[u8])] = &[
        (
            0x100,
            &[
                0x2e, 0x95, 0x63, 0x0f, 0xb5, 0x0e, 0x33, 0x05, 0xb5, 0x00, 0x63, 0x0b, 0xb5, 0x1e,
                0x2e, 0x95, 0x33, 0x05, 0xb5, 0x00, 0x02, 0x90,
            ],
        ),
        (0x200, &[0x2e, 0x95, 0x02, 0x90]),
        (0x300, &[0x33, 0x05, 0xb5, 0x00, 0x02, 0x90]),
    ];
    for (address, bytes) in words {
        image
            .add_segment(*address, bytes.to_vec(), true, file)
            .unwrap();
    }
    image
}

/// Spec 8.4.4's program: 0x100 c.add; 0x102 beq ->0x200 (not taken); 0x106 c.add;
/// 0x108..0x118 five 32-bit adds; 0x11c c.ebreak.
fn section_8_4_4_image() -> CodeImage {
    let mut image = CodeImage::new();
    let file = image.add_file("spec-8.4.4");
    let mut bytes = vec![0x2e, 0x95, 0x63, 0x0f, 0xb5, 0x0e, 0x2e, 0x95];
    for _ in 0..5 {
        bytes.extend_from_slice(&[0x33, 0x05, 0xb5, 0x00]);
    }
    bytes.extend_from_slice(&[0x02, 0x90]);
    image.add_segment(0x100, bytes, true, file).unwrap();
    image
}

fn decode(image: &CodeImage, messages: &[Body]) -> Result<Vec<u64>, FlowError> {
    decode_pcs(&encode(messages), image, DecoderOptions::default())
}

fn start() -> Body {
    Body::ProgTraceSync {
        sync: SyncReason(3),
        icnt: 0,
        faddr: 0x100,
    }
}

fn stop(icnt: u64, hist: Option<u64>) -> Body {
    Body::ProgTraceCorrelation {
        evcode: CorrelationEvent(0),
        cdf: u8::from(hist.is_some()),
        icnt,
        hist,
    }
}

#[test]
fn btm_first_branch_taken() {
    let image = section_8_4_1_image();
    let pcs = decode(
        &image,
        &[start(), Body::DirectBranch { icnt: 3 }, stop(1, None)],
    )
    .unwrap();
    assert_eq!(pcs, [0x100, 0x102, 0x200]);
}

#[test]
fn btm_second_branch_taken() {
    let image = section_8_4_1_image();
    let pcs = decode(
        &image,
        &[start(), Body::DirectBranch { icnt: 7 }, stop(2, None)],
    )
    .unwrap();
    assert_eq!(pcs, [0x100, 0x102, 0x106, 0x10a, 0x300]);
}

#[test]
fn btm_no_branch_taken() {
    let image = section_8_4_1_image();
    let pcs = decode(&image, &[start(), stop(10, None)]).unwrap();
    assert_eq!(pcs, [0x100, 0x102, 0x106, 0x10a, 0x10e, 0x110]);
}

#[test]
fn exceptions_may_end_the_count_at_any_instruction_boundary() {
    // I-CNT=1, 5 and 0 are valid (an exception after 0x100, before 0x10a, before 0x100).
    let image = section_8_4_1_image();
    for (icnt, expected) in [
        (1u64, &[0x100u64][..]),
        (5, &[0x100, 0x102, 0x106]),
        (0, &[]),
    ] {
        let trap = Body::IndirectBranch {
            btype: BranchType::Exception,
            icnt,
            uaddr: 0x100 ^ 0x300,
        };
        let pcs = decode(&image, &[start(), trap, stop(2, None)]).unwrap();
        let mut want = expected.to_vec();
        want.push(0x300);
        assert_eq!(pcs, want, "I-CNT={icnt}");
    }
}

#[test]
fn icnt_ending_inside_a_32_bit_instruction_is_reported() {
    // Spec: "I-CNT=4 or 6 or 9 are INCORRECT values" and decoders must report them.
    let image = section_8_4_1_image();
    for icnt in [4, 6, 9] {
        let error = decode(&image, &[start(), stop(icnt, None)]).unwrap_err();
        assert!(
            matches!(error, FlowError::IcntInsideInstruction { .. }),
            "I-CNT={icnt}: {error}"
        );
    }
}

#[test]
fn htm_history_examples() {
    let image = section_8_4_1_image();
    let cases: [(u64, u64, &[u64]); 3] = [
        (4, 0b1_1, &[0x100, 0x102, 0x200]),
        (9, 0b1_01, &[0x100, 0x102, 0x106, 0x10a, 0x300]),
        (10, 0b1_00, &[0x100, 0x102, 0x106, 0x10a, 0x10e, 0x110]),
    ];
    for (icnt, hist, expected) in cases {
        let pcs = decode(&image, &[start(), stop(icnt, Some(hist))]).unwrap();
        assert_eq!(pcs, expected, "I-CNT={icnt} HIST={hist:#b}");
    }
}

#[test]
fn sequential_instruction_counter_sync_continues_the_flow() {
    // Spec 8.4.4: ProgTraceSync, IndirectBranchHistSync SYNC=4 I-CNT=8 HIST=0x2
    // F-ADDR 0x110, ProgTraceCorrelation I-CNT=6 HIST=0x1.
    let image = section_8_4_4_image();
    let overflow = Body::IndirectBranchHistSync {
        sync: SyncReason(4),
        btype: BranchType::Indirect,
        icnt: 8,
        faddr: 0x110,
        hist: 0x2,
    };
    let pcs = decode(&image, &[start(), overflow, stop(6, Some(0x1))]).unwrap();
    assert_eq!(
        pcs,
        [0x100, 0x102, 0x106, 0x108, 0x10c, 0x110, 0x114, 0x118]
    );
}

#[test]
fn a_disagreeing_sync_address_is_an_error() {
    let image = section_8_4_1_image();
    let wrong = Body::DirectBranchSync {
        sync: SyncReason(2),
        icnt: 3,
        faddr: 0x300,
    };
    let error = decode(&image, &[start(), wrong]).unwrap_err();
    assert!(
        matches!(
            error,
            FlowError::AddressMismatch {
                computed: 0x200,
                reported: 0x300,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn ranges_say_how_they_end() {
    let image = section_8_4_1_image();
    let bytes = encode(&[start(), stop(9, Some(0b1_01))]);
    let mut decoder = FlowDecoder::new(&bytes, &image, files(), DecoderOptions::default());
    let mut ends = Vec::new();
    while let Some(element) = decoder.next_element().unwrap() {
        if let ElementKind::InstructionRange {
            start,
            instructions,
            end,
            ..
        } = element.kind
        {
            ends.push((start, instructions, end));
        }
    }
    // The not-taken branch at 0x102 does not end a range: 0x100..0x10a is contiguous.
    assert_eq!(
        ends,
        [
            (0x100, 4, RangeEnd::BranchTaken),
            (0x300, 1, RangeEnd::Sequential)
        ]
    );
}
