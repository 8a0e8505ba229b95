//! Property tests: every encodable message round-trips, and arbitrary bytes never break the
//! decoder.

mod common;

use common::{arb_body, arb_options, decode_all, timestamp_allowed};
use ntrace_message::{
    dump_message, AddressWidth, Body, MessageDecoder, MessageEncoder, MessageOptions,
};
use proptest::prelude::*;

/// One message to encode: SRC, body, TSTAMP, idle bytes before it.
type Planned = (u16, Body, Option<u64>, usize);

fn arb_case() -> impl Strategy<Value = (MessageOptions, Vec<Planned>)> {
    arb_options().prop_flat_map(|options| {
        let src_max = (1u32 << options.src_bits) - 1;
        let message = (
            0..=src_max,
            arb_body(options.address_width),
            prop_oneof![
                Just(None),
                any::<u64>().prop_map(Some),
                (0u64..64).prop_map(Some)
            ],
            prop_oneof![4 => Just(0usize), 1 => 1usize..4],
        )
            .prop_map(move |(src, body, timestamp, idle)| {
                let timestamp = if options.timestamps && timestamp_allowed(&body) {
                    timestamp
                } else {
                    None
                };
                (src as u16, body, timestamp, idle)
            });
        (Just(options), prop::collection::vec(message, 1..16))
    })
}

/// Raw bytes with extra weight on idle, all-zero, all-ones-MDO and end-of-field bytes, so
/// long fields, idle runs and framing errors are common.
fn biased_bytes(words: Vec<u16>) -> Vec<u8> {
    words
        .into_iter()
        .map(|w| {
            let b = w as u8;
            match w >> 13 {
                0 => 0xFF,
                1 => 0x00,
                2 => 0xFC,
                3 => b | 1,
                _ => b,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_message_round_trips((options, messages) in arb_case()) {
        let encoder = MessageEncoder::new(options);
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for (src, body, timestamp, idle) in &messages {
            encoder.encode_idle(*idle, &mut stream);
            let offset = stream.len() as u64;
            encoder.encode(*src, body, *timestamp, &mut stream).expect("encodable");
            expected.push((offset, stream.len() as u64 - offset, *src, *body, *timestamp));
        }
        let decoded = decode_all(&stream, options);
        prop_assert_eq!(decoded.len(), expected.len());
        for (got, (offset, length, src, body, timestamp)) in decoded.iter().zip(&expected) {
            let got = got.as_ref().expect("decodes");
            prop_assert_eq!(got.offset, *offset);
            prop_assert_eq!(u64::from(got.length), *length);
            prop_assert_eq!(got.src, *src);
            prop_assert_eq!(got.body, *body);
            prop_assert_eq!(got.timestamp, *timestamp);
            let mut again = Vec::new();
            encoder.encode_message(got, &mut again).expect("re-encodable");
            prop_assert_eq!(&again[..], got.bytes(&stream));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_always_progress(
        bytes in prop::collection::vec(any::<u16>(), 0..512).prop_map(biased_bytes),
        src_bits in 0u8..=16,
        ext in any::<bool>(),
        x32 in any::<bool>(),
        base in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let options = MessageOptions::default()
            .with_src_bits(src_bits)
            .with_address_msb_extension(ext)
            .with_address_width(if x32 { AddressWidth::Bits32 } else { AddressWidth::Bits64 });
        let mut decoder = MessageDecoder::new(&bytes, options).with_base_offset(base);
        let len = bytes.len() as u64;
        let mut calls = 0u64;
        let mut accounted = 0u64;
        loop {
            calls += 1;
            prop_assert!(calls <= len + 1, "decoder did not make progress");
            let before = decoder.position();
            match decoder.next_message() {
                Ok(None) => break,
                Ok(Some(message)) => {
                    prop_assert!(message.offset.wrapping_sub(base) < len);
                    prop_assert_eq!(message.bytes_at(&bytes, base).len() as u64, u64::from(message.length));
                    accounted += u64::from(message.length);
                    let mut line = String::new();
                    dump_message(&message, &bytes, &mut line).expect("fmt to String");
                    // Whatever decodes re-encodes (minimally) to bytes that decode the same,
                    // unless the encoder refuses the values (RV32 address above 4 GiB, SRC
                    // wider than 12 bits) or the layout is unknown.
                    let mut again = Vec::new();
                    if MessageEncoder::new(options).encode_message(&message, &mut again).is_ok() {
                        let redecoded = MessageDecoder::new(&again, options).next_message();
                        let redecoded = redecoded.expect("re-encoded decodes").expect("present");
                        prop_assert_eq!(
                            (redecoded.src, redecoded.body, redecoded.timestamp),
                            (message.src, message.body, message.timestamp)
                        );
                    } else {
                        prop_assert!(
                            matches!(message.body, Body::Other { .. }) || x32 || src_bits > 12,
                            "refused to re-encode {:?}", message
                        );
                    }
                }
                Err(error) => {
                    prop_assert!(error.offset().wrapping_sub(base) < len, "{error}");
                    prop_assert!(error.offset() >= before);
                    let text = error.to_string();
                    prop_assert!(text.starts_with("at byte offset 0x"));
                    prop_assert!(!text.contains('\n'));
                }
            }
            prop_assert!(decoder.position() > before || decoder.position().wrapping_sub(base) == len);
        }
        // Every byte is a message byte, idle, or skipped by resynchronisation.
        prop_assert_eq!(accounted + decoder.idle_bytes() + decoder.skipped_bytes(), len);
    }

    /// The word-at-a-time fast path and the byte-wise parser agree on everything, for
    /// valid streams and garbage alike.
    #[test]
    fn fast_path_matches_byte_path(
        (options, messages) in arb_case(),
        noise in prop::collection::vec(any::<u16>(), 0..64).prop_map(biased_bytes),
        noise_at in any::<prop::sample::Index>(),
    ) {
        let encoder = MessageEncoder::new(options);
        let mut stream = Vec::new();
        for (src, body, timestamp, idle) in &messages {
            encoder.encode_idle(*idle, &mut stream);
            encoder.encode(*src, body, *timestamp, &mut stream).expect("encodable");
        }
        let at = noise_at.index(stream.len() + 1);
        stream.splice(at..at, noise);
        let mut fast_decoder = MessageDecoder::new(&stream, options);
        let fast: Vec<_> = fast_decoder.by_ref().collect();
        let mut slow_decoder = MessageDecoder::new(&stream, options).byte_path_only();
        let slow: Vec<_> = slow_decoder.by_ref().collect();
        prop_assert_eq!(fast, slow);
        prop_assert_eq!(fast_decoder.idle_bytes(), slow_decoder.idle_bytes());
        prop_assert_eq!(fast_decoder.skipped_bytes(), slow_decoder.skipped_bytes());
    }

    /// The same on garbage alone, with any SRC width the decoder honours.
    #[test]
    fn fast_path_matches_byte_path_on_garbage(
        bytes in prop::collection::vec(any::<u16>(), 0..256).prop_map(biased_bytes),
        src_bits in 0u8..=16,
        ext in any::<bool>(),
        x32 in any::<bool>(),
    ) {
        let options = MessageOptions::default()
            .with_src_bits(src_bits)
            .with_address_msb_extension(ext)
            .with_address_width(if x32 { AddressWidth::Bits32 } else { AddressWidth::Bits64 });
        let mut fast_decoder = MessageDecoder::new(&bytes, options);
        let fast: Vec<_> = fast_decoder.by_ref().collect();
        let mut slow_decoder = MessageDecoder::new(&bytes, options).byte_path_only();
        let slow: Vec<_> = slow_decoder.by_ref().collect();
        prop_assert_eq!(fast, slow);
        prop_assert_eq!(fast_decoder.idle_bytes(), slow_decoder.idle_bytes());
        prop_assert_eq!(fast_decoder.skipped_bytes(), slow_decoder.skipped_bytes());
    }

    #[test]
    fn sync_forward_lands_on_a_message_start(
        prefix in prop::collection::vec(any::<u8>(), 0..32),
        body in arb_body(AddressWidth::Bits64),
    ) {
        let options = MessageOptions::default();
        let mut stream = prefix.iter().map(|b| b & !3).collect::<Vec<u8>>();
        stream.push(0x03);
        let start = stream.len() as u64;
        MessageEncoder::new(options).encode(0, &body, None, &mut stream).expect("encodable");
        let mut decoder = MessageDecoder::new(&stream, options);
        prop_assert_eq!(decoder.sync_forward(), Some(start));
        prop_assert_eq!(decoder.skipped_bytes(), start);
        let message = decoder.next_message().expect("decodes").expect("one message");
        prop_assert_eq!(message.body, body);
    }
}
