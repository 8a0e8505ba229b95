//! Fuzzes the N-Trace message decoder: any bytes, any options. Checks that decoding never
//! panics, always makes progress, reports offsets inside the input, accounts for every byte,
//! agrees with the byte-wise parser, that every decoded message re-encodes to bytes that
//! decode to the same message, and that `peek_short` names a readable short message's
//! exact bytes and length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ntrace_message::{
    dump_message, AddressWidth, Body, MessageDecoder, MessageEncoder, MessageOptions,
};

fuzz_target!(|input: &[u8]| {
    let Some((&config, stream)) = input.split_first() else {
        return;
    };
    // The first byte picks the options: bits 0..4 SRC width (0..=16), then extension, RV32.
    let options = MessageOptions::default()
        .with_src_bits((config & 0x1f) % 17)
        .with_address_msb_extension(config & 0x20 != 0)
        .with_address_width(if config & 0x40 != 0 { AddressWidth::Bits32 } else { AddressWidth::Bits64 });

    let mut decoder = MessageDecoder::new(stream, options);
    let mut byte_path = MessageDecoder::new(stream, options).byte_path_only();
    let encoder = MessageEncoder::new(options);
    let len = stream.len() as u64;
    let mut accounted = 0u64;
    let mut calls = 0u64;
    let mut line = String::new();
    loop {
        calls += 1;
        assert!(calls <= len + 1, "decoder made no progress");
        let before = decoder.position();
        let peeked = decoder.peek_short();
        let result = decoder.next_message();
        assert_eq!(result, byte_path.next_message(), "fast and byte-wise parsers disagree");
        match result {
            Ok(None) => break,
            Ok(Some(message)) => {
                assert!(message.offset >= before && message.offset < len);
                assert_eq!(message.bytes(stream).len() as u64, u64::from(message.length));
                accounted += u64::from(message.length);
                if let Some(short) = peeked {
                    assert_eq!(message.offset, before, "peeked a message that is not next");
                    assert_eq!(short.len() as u64, u64::from(message.length));
                    let mut bytes = [0u8; 8];
                    bytes[..short.len()].copy_from_slice(message.bytes(stream));
                    assert_eq!(short.bytes(), u64::from_le_bytes(bytes));
                }
                line.clear();
                dump_message(&message, stream, &mut line).expect("formatting into a String");
                if matches!(message.body, Body::Other { .. }) {
                    continue;
                }
                let mut encoded = Vec::new();
                // Refusals are fine (e.g. an RV32 address wider than 32 bits, SRC width > 12);
                // whatever is encoded must decode back to the same message.
                if encoder.encode_message(&message, &mut encoded).is_ok() {
                    let again = MessageDecoder::new(&encoded, options)
                        .next_message()
                        .expect("re-encoded message decodes")
                        .expect("re-encoded message present");
                    assert_eq!((again.src, again.body, again.timestamp), (message.src, message.body, message.timestamp));
                }
            }
            Err(error) => {
                assert!(error.offset() >= before && error.offset() < len, "{error}");
                assert!(!error.to_string().contains('\n'));
            }
        }
        assert!(decoder.position() > before);
    }
    assert_eq!(accounted + decoder.idle_bytes() + decoder.skipped_bytes(), len);
});
