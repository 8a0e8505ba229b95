//! Recovery on a real trace (tests/fixtures/ntrace/tiny-btm: one hart with SRC 3,
//! timestamps, a periodic synchronisation every 8 messages): a corrupt message or an
//! inconsistent one in the middle becomes a gap at its byte offset, and what follows the
//! next synchronisation decodes exactly as the clean trace does from there.

use code_image::{load_elf, CodeImage};
use ntrace_flow::{DecoderOptions, FileDecodeInfo, FlowDecoder, Recovery};
use ntrace_message::{Body, Message, MessageDecoder, MessageEncoder, MessageOptions};
use trace_elements::{DecodeFailure, ElementKind, GapReason, TraceElement, TraceOnReason};

static PROGRAM: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-btm/program");
static TRACE: &[u8] = include_bytes!("../../../tests/fixtures/ntrace/tiny-btm/trace.nt");

fn image() -> (CodeImage, Vec<FileDecodeInfo>) {
    let mut image = CodeImage::new();
    load_elf(&mut image, "tiny", PROGRAM, None).unwrap();
    let files = image.file_decode_infos();
    (image, files)
}

/// The fixture's decode flags: `--src-bits 4 --timestamps --addr-ext --max-stack 8`.
fn message_options() -> MessageOptions {
    MessageOptions::default()
        .with_src_bits(4)
        .with_timestamps(true)
        .with_address_msb_extension(true)
}

fn options(recovery: Recovery) -> DecoderOptions {
    DecoderOptions::default()
        .with_message(message_options())
        .with_return_stack_depth(8)
        .with_recovery(recovery)
}

/// An element, or an error's offset and text, with the PCs of a range.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Element(TraceElement, Vec<u64>),
    Error(u64, String),
}

fn decode(trace: &[u8], recovery: Recovery) -> Vec<Item> {
    let (image, files) = image();
    let mut decoder = FlowDecoder::new(trace, &image, files, options(recovery));
    let mut items = Vec::new();
    for _ in 0..100_000 {
        match decoder.next_element() {
            Ok(Some(element)) => {
                let mut pcs = Vec::new();
                if let ElementKind::InstructionRange {
                    start,
                    instructions,
                    ..
                } = element.kind
                {
                    assert!(decoder.for_each_instruction(start, instructions, |pc| pcs.push(pc)));
                }
                if let ElementKind::Gap {
                    reason: GapReason::DecodeError { .. },
                } = element.kind
                {
                    let error = decoder.last_recovered_error().expect("the gap's error");
                    assert_eq!(error.offset(), element.offset);
                }
                items.push(Item::Element(element, pcs));
            }
            Ok(None) => return items,
            Err(error) => items.push(Item::Error(error.offset(), error.to_string())),
        }
    }
    panic!("the decoder did not finish");
}

fn pcs(items: &[Item]) -> Vec<u64> {
    items
        .iter()
        .flat_map(|item| match item {
            Item::Element(_, pcs) => pcs.clone(),
            Item::Error(..) => Vec::new(),
        })
        .collect()
}

fn messages(trace: &[u8]) -> Vec<Message> {
    let mut decoder = MessageDecoder::new(trace, message_options());
    std::iter::from_fn(|| decoder.next_message().unwrap()).collect()
}

/// A non-synchronisation message halfway between the second and third synchronisation,
/// and the offset of the third.
fn middle_message(trace: &[u8]) -> (Message, u64) {
    let messages = messages(trace);
    let syncs: Vec<usize> = (0..messages.len())
        .filter(|&index| messages[index].is_sync())
        .collect();
    assert!(syncs.len() >= 3, "the fixture has periodic synchronisation");
    let middle = (syncs[1] + syncs[2]) / 2;
    assert!(!messages[middle].is_sync());
    (messages[middle], messages[syncs[2]].offset)
}

/// What decoding must give from the synchronisation at `sync` on: the clean trace decoded
/// from that byte, its offsets moved back, its start a restart.
fn decoded_from(trace: &[u8], sync: u64) -> Vec<Item> {
    decode(&trace[sync as usize..], Recovery::ReturnError)
        .into_iter()
        .map(|item| match item {
            Item::Element(mut element, pcs) => {
                element.offset += sync;
                if let ElementKind::TraceOn { reason, .. } = &mut element.kind {
                    if *reason == TraceOnReason::Start {
                        *reason = TraceOnReason::Restart;
                    }
                }
                Item::Element(element, pcs)
            }
            error => error,
        })
        .collect()
}

/// Checks a decode that recovered from one error at `offset`: the items before it are
/// the clean decode's, the gap names the offset and `cause`, and everything after it is
/// the clean decode from the next synchronisation at `sync`.
fn assert_recovered(
    clean: &[Item],
    recovered: &[Item],
    offset: u64,
    cause: DecodeFailure,
    sync: u64,
) {
    let gap = recovered
        .iter()
        .position(|item| {
            matches!(
                item,
                Item::Element(
                    TraceElement {
                        kind: ElementKind::Gap { .. },
                        ..
                    },
                    _
                )
            )
        })
        .expect("a gap");
    assert_eq!(
        recovered[gap],
        Item::Element(
            TraceElement {
                hart: 3,
                offset,
                kind: ElementKind::Gap {
                    reason: GapReason::DecodeError { cause }
                },
            },
            Vec::new()
        )
    );
    let before = pcs(&recovered[..gap]);
    assert!(!before.is_empty());
    assert_eq!(
        before,
        pcs(clean)[..before.len()],
        "the flow up to the error"
    );
    let after = &recovered[gap + 1..];
    assert_eq!(
        after,
        decoded_from(TRACE, sync),
        "the flow after the next sync"
    );
    let clean_pcs = pcs(clean);
    assert!(clean_pcs.ends_with(&pcs(after)));
    assert!(!pcs(after).is_empty());
}

#[test]
fn the_fixture_decodes_cleanly() {
    let clean = decode(TRACE, Recovery::Resync);
    assert!(clean
        .iter()
        .all(|item| matches!(item, Item::Element(element, _)
            if !matches!(element.kind, ElementKind::Gap { .. }))));
    assert_eq!(clean, decode(TRACE, Recovery::ReturnError));
}

#[test]
fn a_corrupt_message_becomes_a_gap_and_decoding_resumes_at_the_next_sync() {
    let (message, sync) = middle_message(TRACE);
    let mut corrupt = TRACE.to_vec();
    // MSEO=10 is reserved: the message's first byte can never be read.
    let byte = &mut corrupt[message.offset as usize];
    *byte = (*byte & !3) | 0b10;
    let clean = decode(TRACE, Recovery::ReturnError);
    let recovered = decode(&corrupt, Recovery::Resync);
    assert_recovered(
        &clean,
        &recovered,
        message.offset,
        DecodeFailure::CorruptData,
        sync,
    );

    // Returning the error instead recovers the same way.
    let returned = decode(&corrupt, Recovery::ReturnError);
    let errors: Vec<&Item> = returned
        .iter()
        .filter(|item| matches!(item, Item::Error(..)))
        .collect();
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0], Item::Error(offset, _) if *offset == message.offset));
    let without_gap: Vec<&Item> = recovered
        .iter()
        .filter(|item| {
            !matches!(item, Item::Element(element, _)
                if matches!(element.kind, ElementKind::Gap { .. }))
        })
        .collect();
    let without_error: Vec<&Item> = returned
        .iter()
        .filter(|item| !matches!(item, Item::Error(..)))
        .collect();
    assert_eq!(without_gap, without_error);
}

#[test]
fn an_inconsistent_message_becomes_a_gap_and_decoding_resumes_at_the_next_sync() {
    // The same trace with one DirectBranch's I-CNT one instruction short: the walk ends
    // on an instruction that is not a taken branch.
    let messages = messages(TRACE);
    let (target, _) = middle_message(TRACE);
    let encoder = MessageEncoder::new(message_options());
    let mut trace = Vec::new();
    let mut changed = None;
    for message in &messages {
        let mut message = *message;
        if changed.is_none() && message.offset >= target.offset {
            if let Body::DirectBranch { icnt } = &mut message.body {
                *icnt -= 1;
                changed = Some(trace.len() as u64);
            }
        }
        encoder
            .encode(message.src, &message.body, message.timestamp, &mut trace)
            .unwrap();
    }
    let offset = changed.expect("a DirectBranch before the next sync");
    let (_, sync) = middle_message(&trace);
    assert!(offset < sync);
    let clean = decode(TRACE, Recovery::ReturnError);
    let recovered = decode(&trace, Recovery::Resync);
    assert_recovered(
        &clean,
        &recovered,
        offset,
        DecodeFailure::Inconsistent,
        sync,
    );
    let returned = decode(&trace, Recovery::ReturnError);
    let error = returned
        .iter()
        .find_map(|item| match item {
            Item::Error(at, text) => Some((*at, text.as_str())),
            Item::Element(..) => None,
        })
        .expect("an error");
    assert_eq!(error.0, offset);
    assert!(
        error.1.contains("not a taken conditional branch")
            || error.1.contains("inside an instruction"),
        "{}",
        error.1
    );
}

#[test]
fn garbage_before_the_first_sync_is_a_gap_for_the_first_hart() {
    // A byte that cannot start a message (MSEO=10) before the trace: no hart is known
    // yet; the message decoder skips to the next message boundary and the next
    // synchronisation starts decoding.
    let mut trace = vec![0b10];
    trace.extend_from_slice(TRACE);
    let items = decode(&trace, Recovery::Resync);
    assert_eq!(
        items[0],
        Item::Element(
            TraceElement {
                hart: 0,
                offset: 0,
                kind: ElementKind::Gap {
                    reason: GapReason::DecodeError {
                        cause: DecodeFailure::CorruptData
                    }
                },
            },
            Vec::new()
        )
    );
    let Item::Element(second, _) = &items[1] else {
        panic!("{:?}", items[1]);
    };
    assert!(
        matches!(
            second.kind,
            ElementKind::TraceOn {
                reason: TraceOnReason::Start,
                ..
            }
        ),
        "{second:?}"
    );
}

/// The elements other than decode-error gaps (errors dropped), checking every gap and
/// error names an offset inside the trace.
fn elements_apart_from_errors(trace: &[u8], recovery: Recovery) -> Vec<TraceElement> {
    decode(trace, recovery)
        .into_iter()
        .filter_map(|item| match item {
            Item::Element(element, _) => match element.kind {
                ElementKind::Gap {
                    reason: GapReason::DecodeError { .. },
                } => {
                    assert!(element.offset <= trace.len() as u64);
                    None
                }
                _ => Some(element),
            },
            Item::Error(offset, _) => {
                assert!(offset <= trace.len() as u64);
                None
            }
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, .. Default::default() })]

    /// Resynchronising with gaps and returning each error recover the same way.
    #[test]
    fn both_policies_recover_the_same_elements(
        flips in proptest::collection::vec((0..TRACE.len(), proptest::prelude::any::<u8>()), 1..6),
    ) {
        let mut trace = TRACE.to_vec();
        for (position, value) in flips {
            trace[position] ^= value;
        }
        proptest::prop_assert_eq!(
            elements_apart_from_errors(&trace, Recovery::ReturnError),
            elements_apart_from_errors(&trace, Recovery::Resync)
        );
    }
}
