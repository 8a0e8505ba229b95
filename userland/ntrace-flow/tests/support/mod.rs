//! What the tests of hand-made programs share: a code image from half-words, the one
//! file's decode options, messages encoded, ranges named, a trace decoded to PCs or to
//! element kinds.

// Each test file uses a part.
#![allow(dead_code)]

use code_image::CodeImage;
use ntrace_flow::{DecoderOptions, FileDecodeInfo, FlowDecoder, FlowError};
use ntrace_message::{Body, MessageEncoder, MessageOptions};
use riscv_insn::DecodeOptions;
use trace_elements::{ElementKind, RangeEnd};

/// A code image of one file, `name`, whose segments are given as little-endian
/// half-words at their addresses.
pub fn image_of_halves(name: &str, segments: &[(u64, &[u16])]) -> CodeImage {
    let mut image = CodeImage::new();
    let file = image.add_file(name);
    for &(address, halves) in segments {
        let bytes = halves.iter().flat_map(|half| half.to_le_bytes()).collect();
        image.add_segment(address, bytes, true, file).unwrap();
    }
    image
}

/// The decode options of the image's one file.
pub fn files() -> Vec<FileDecodeInfo> {
    vec![FileDecodeInfo {
        options: DecodeOptions::default(),
        jvt_base: None,
    }]
}

/// Messages with the default options and no timestamps, from source 0.
pub fn encode(messages: &[Body]) -> Vec<u8> {
    let timed: Vec<(Body, Option<u64>)> = messages.iter().map(|body| (*body, None)).collect();
    encode_with(MessageOptions::default(), &timed)
}

/// Messages with their timestamps, from source 0.
pub fn encode_with(options: MessageOptions, messages: &[(Body, Option<u64>)]) -> Vec<u8> {
    let encoder = MessageEncoder::new(options);
    let mut bytes = Vec::new();
    for (body, timestamp) in messages {
        encoder.encode(0, body, *timestamp, &mut bytes).unwrap();
    }
    bytes
}

/// An instruction range whose successor is known.
pub fn range(start: u64, last: u64, instructions: u32, end: RangeEnd, next: u64) -> ElementKind {
    ElementKind::InstructionRange {
        start,
        last,
        instructions,
        end,
        next: Some(next),
    }
}

/// Every element's kind, or the first error.
pub fn element_kinds(
    bytes: &[u8],
    image: &CodeImage,
    options: DecoderOptions,
) -> Result<Vec<ElementKind>, FlowError> {
    let mut decoder = FlowDecoder::new(bytes, image, files(), options);
    let mut kinds = Vec::new();
    while let Some(element) = decoder.next_element()? {
        kinds.push(element.kind);
    }
    Ok(kinds)
}

/// Every executed instruction's address, or the first error.
pub fn decode_pcs(
    bytes: &[u8],
    image: &CodeImage,
    options: DecoderOptions,
) -> Result<Vec<u64>, FlowError> {
    let mut decoder = FlowDecoder::new(bytes, image, files(), options);
    let mut pcs = Vec::new();
    while let Some(element) = decoder.next_element()? {
        if let ElementKind::InstructionRange {
            start,
            instructions,
            ..
        } = element.kind
        {
            assert!(decoder.for_each_instruction(start, instructions, |pc| pcs.push(pc)));
        }
    }
    Ok(pcs)
}
