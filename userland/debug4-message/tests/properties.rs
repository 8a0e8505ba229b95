//! Encode → decode round trips of random sequences, and arbitrary bytes.

use debug4_message::{
    BufferMode, CustomHeader, InterruptEnable, OutgoingSequence, PcGranularity, Privilege,
    PrivilegeCause, Sequence, SequenceDecoder, SequenceEncoder, SequenceEncoderOptions,
    StreamOptions,
};
use proptest::prelude::*;

fn arb_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..16,
        0x8000_0000u64..0x8000_1000,
        (0u32..64).prop_map(|bit| 1u64 << bit)
    ]
}

fn arb_sequence() -> impl Strategy<Value = OutgoingSequence> {
    prop_oneof![
        arb_value().prop_map(|value| OutgoingSequence::Pc {
            address: (value >> 1) << 1
        }),
        Just(OutgoingSequence::BranchTaken),
        Just(OutgoingSequence::BranchNotTaken),
        Just(OutgoingSequence::TraceEnabled),
        Just(OutgoingSequence::TraceDisabled),
        (0u8..16).prop_map(|packet| OutgoingSequence::Privilege(Privilege::from_packet(packet))),
        arb_value().prop_map(|address| OutgoingSequence::LoadAddress { address }),
        arb_value().prop_map(|address| OutgoingSequence::StoreAddress { address }),
        arb_value().prop_map(|value| OutgoingSequence::LoadData { value }),
        arb_value().prop_map(|value| OutgoingSequence::StoreData { value }),
        arb_value().prop_map(|time| OutgoingSequence::Timestamp { time }),
        (any::<bool>(), arb_value()).prop_map(|(high, value)| OutgoingSequence::Custom {
            header: if high {
                CustomHeader::Custom15
            } else {
                CustomHeader::Custom14
            },
            value,
        }),
    ]
}

fn arb_units() -> impl Strategy<Value = Vec<(u64, Vec<OutgoingSequence>)>> {
    prop::collection::vec(
        (
            prop_oneof![Just(0u64), 0u64..4, any::<u64>()],
            prop::collection::vec(arb_sequence(), 1..3),
        ),
        0..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn linear_streams_round_trip(units in arb_units()) {
        let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
        let mut expected = Vec::new();
        for (hart, sequences) in &units {
            encoder.write_unit(*hart, sequences).unwrap();
            expected.extend(sequences.iter().map(|sequence| (*hart, *sequence)));
        }
        let trace = encoder.finish();
        prop_assert_eq!(trace.bytes.len() % 4, 0);
        let mut decoder = SequenceDecoder::new(&trace.bytes, StreamOptions::default());
        let mut got = Vec::new();
        while let Some(located) = decoder.next_sequence().unwrap() {
            if let Some(sequence) = located.sequence.to_outgoing() {
                got.push((located.hart, sequence));
            }
        }
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn ring_streams_decode_to_a_tail(units in arb_units(), eighths in 4u64..12) {
        let bytes = eighths * 64;
        let options = SequenceEncoderOptions::default().with_buffer(BufferMode::Ring { bytes });
        let mut encoder = SequenceEncoder::new(options).unwrap();
        let mut expected = Vec::new();
        for (hart, sequences) in &units {
            encoder.write_unit(*hart, sequences).unwrap();
            expected.extend(sequences.iter().map(|sequence| (*hart, *sequence)));
        }
        let trace = encoder.finish();
        let stream = trace.stream_options(BufferMode::Ring { bytes }, PcGranularity::Halfword);
        let mut decoder = SequenceDecoder::new(&trace.bytes, stream);
        let mut got = Vec::new();
        while let Some(located) = decoder.next_sequence().unwrap() {
            if let Some(sequence) = located.sequence.to_outgoing() {
                got.push((located.hart, sequence));
            }
        }
        if trace.wrap_offset.is_none() {
            prop_assert_eq!(got, expected);
        } else {
            prop_assert!(expected.ends_with(&got));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_always_progress(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        buffer in prop::option::of(0u64..400),
        wrap in prop::option::of(0u64..400),
    ) {
        let options = StreamOptions::default().with_buffer_bytes(buffer).with_wrap_offset(wrap);
        let mut decoder = SequenceDecoder::new(&bytes, options);
        let mut calls = 0usize;
        loop {
            calls += 1;
            prop_assert!(calls <= 2 * bytes.len() + 4, "no progress");
            match decoder.next_sequence() {
                Ok(None) => break,
                Ok(Some(located)) => {
                    prop_assert!(located.offset <= bytes.len() as u64);
                    let skipped = matches!(located.sequence, Sequence::Skipped { .. });
                    prop_assert!(located.packets >= 1 || skipped);
                }
                Err(error) => prop_assert!(error.offset() < bytes.len() as u64),
            }
        }
    }
}

#[test]
fn privilege_packets_round_trip() {
    for packet in 0..16u8 {
        assert_eq!(Privilege::from_packet(packet).packet(), Some(packet));
    }
    let privilege = Privilege {
        cause: PrivilegeCause::Other,
        level: 3,
        interrupts: InterruptEnable::Enabled,
    };
    assert_eq!(privilege.packet(), Some(0b0111));
}
