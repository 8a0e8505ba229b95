//! Fuzzes the debug trace module sequence decoder: any bytes, options from the first
//! byte. Checks that decoding never panics, always makes progress, reports offsets inside
//! the input, and that every sequence whose value is known re-encodes to one that decodes
//! the same.
#![no_main]

use debug4_message::{
    dump_sequence, PcGranularity, SequenceDecoder, SequenceEncoder, SequenceEncoderOptions,
    StreamOptions,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&config, stream)) = input.split_first() else {
        return;
    };
    // Bits 0..3: buffer size in 32-byte units (0: none); bit 4: word granularity;
    // bits 5..7: wrap offset in eighths of the input.
    let buffer_bytes = match config & 0xf {
        0 => None,
        units => Some(u64::from(units) * 32),
    };
    let granularity = if config & 0x10 != 0 {
        PcGranularity::Word
    } else {
        PcGranularity::Halfword
    };
    let wrap = match config >> 5 {
        0 => None,
        eighths => Some(stream.len() as u64 * u64::from(eighths) / 8),
    };
    let options = StreamOptions::default()
        .with_buffer_bytes(buffer_bytes)
        .with_pc_granularity(granularity)
        .with_wrap_offset(wrap);
    let length = stream.len() as u64;
    let mut decoder = SequenceDecoder::new(stream, options);
    let mut calls = 0u64;
    let mut line = String::new();
    loop {
        calls += 1;
        assert!(calls <= 2 * length + 4, "decoder made no progress");
        match decoder.next_sequence() {
            Ok(None) => break,
            Ok(Some(located)) => {
                assert!(located.offset <= length);
                line.clear();
                dump_sequence(&located, &mut line).expect("formatting into a String");
                let Some(outgoing) = located.sequence.to_outgoing() else {
                    continue;
                };
                let mut encoder = SequenceEncoder::new(
                    SequenceEncoderOptions::default().with_pc_granularity(granularity),
                )
                .expect("linear buffers always work");
                if encoder.write_unit(located.hart, &[outgoing]).is_err() {
                    continue;
                }
                let again = encoder.finish();
                let mut redecoder = SequenceDecoder::new(
                    &again.bytes,
                    StreamOptions::default().with_pc_granularity(granularity),
                );
                let mut same = None;
                while let Ok(Some(other)) = redecoder.next_sequence() {
                    if other.sequence.to_outgoing().is_some() {
                        same = Some(other);
                        break;
                    }
                }
                let same = same.expect("the re-encoded sequence decodes");
                assert_eq!(same.sequence, located.sequence);
                assert_eq!(same.hart, located.hart);
            }
            Err(error) => assert!(error.offset() < length),
        }
    }
});
