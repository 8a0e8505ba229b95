//! Per-header decoding, fill rules, synchronisation-point padding, units, wrapped buffers.

use debug4_message::{
    detect, dump_sequence, BufferMode, CustomHeader, Debug4Error, EncodeError, Half, Header,
    InterruptEnable, LocatedSequence, OutgoingSequence, PcGranularity, Privilege, PrivilegeCause,
    Sequence, SequenceDecoder, SequenceEncoder, SequenceEncoderOptions, StreamOptions, Value,
};

/// Packs packets into bytes, first packet in the low half.
fn pack(packets: &[u8]) -> Vec<u8> {
    packets
        .chunks(2)
        .map(|pair| pair[0] | pair.get(1).map_or(0, |high| high << 4))
        .collect()
}

fn decode_all(bytes: &[u8], options: StreamOptions) -> Vec<Result<LocatedSequence, Debug4Error>> {
    let mut decoder = SequenceDecoder::new(bytes, options);
    let mut out = Vec::new();
    loop {
        match decoder.next_sequence() {
            Ok(None) => return out,
            Ok(Some(located)) => out.push(Ok(located)),
            Err(error) => out.push(Err(error)),
        }
        assert!(out.len() < 10_000);
    }
}

fn sequences(bytes: &[u8], options: StreamOptions) -> Vec<Sequence> {
    decode_all(bytes, options)
        .into_iter()
        .map(|result| result.expect("decodes").sequence)
        .filter(|sequence| !matches!(sequence, Sequence::Nops { .. }))
        .collect()
}

#[test]
fn every_header_decodes() {
    let packets = [
        0, 0, // Nops
        1, 0, 0x8, // PC, 1 packet: partial (no last PC)
        2, 3, // branches
        4, 0, // Trace Enabled
        5, // Trace Disabled
        6, 0b1011, // Privilege: interrupt, PRV 1, IE
        7, 0, 3, // Change Hart 3
        8, 0, 1, 9, 0, 2, // addresses, partial
        10, 0, 0xf, 11, 1, 0x0, 0x8, // data: -1, -128
        12, 0, 5, // Timestamp, partial
        14, 0, 9, 15, 1, 1, 2, // custom
    ];
    let decoded = sequences(&pack(&packets), StreamOptions::default());
    assert_eq!(
        decoded,
        vec![
            Sequence::Pc(Value::Partial {
                low_bits: 0x10,
                known_bits: 5
            }),
            Sequence::BranchTaken,
            Sequence::BranchNotTaken,
            Sequence::TraceEnabled { version: 0 },
            Sequence::TraceDisabled,
            Sequence::Privilege(Privilege {
                cause: PrivilegeCause::Interrupt,
                level: 1,
                interrupts: InterruptEnable::Enabled
            }),
            Sequence::ChangeHart { hart: 3 },
            Sequence::LoadAddress(Value::Partial {
                low_bits: 1,
                known_bits: 4
            }),
            Sequence::StoreAddress(Value::Partial {
                low_bits: 2,
                known_bits: 4
            }),
            Sequence::LoadData { value: u64::MAX },
            Sequence::StoreData {
                value: (-128i64) as u64
            },
            Sequence::Timestamp(Value::Partial {
                low_bits: 5,
                known_bits: 4
            }),
            Sequence::Custom {
                header: CustomHeader::Custom14,
                value: 9
            },
            Sequence::Custom {
                header: CustomHeader::Custom15,
                value: 0x21
            },
        ]
    );
}

#[test]
fn offsets_and_halves_name_the_header_packet() {
    let decoded = decode_all(&pack(&[0, 2, 3, 5]), StreamOptions::default());
    let positions: Vec<(u64, Half)> = decoded
        .iter()
        .map(|result| {
            let located = result.as_ref().unwrap();
            (located.offset, located.half)
        })
        .collect();
    assert_eq!(
        positions,
        vec![
            (0, Half::Low),
            (0, Half::High),
            (1, Half::Low),
            (1, Half::High)
        ]
    );
}

#[test]
fn value_sequences_of_every_width_round_trip() {
    for packets in 1..=16u8 {
        let value = if packets == 16 {
            u64::MAX >> 1
        } else {
            (1u64 << (4 * packets - 1)) | 1
        };
        let mut stream = vec![1, packets - 1];
        stream.extend((0..packets).map(|index| ((value >> (4 * index)) & 0xf) as u8));
        stream.extend([12, packets - 1]);
        stream.extend((0..packets).map(|index| ((value >> (4 * index)) & 0xf) as u8));
        let decoded = sequences(&pack(&stream), StreamOptions::default());
        let expected_pc = if packets == 16 {
            Value::Known(value << 1)
        } else {
            Value::Partial {
                low_bits: value << 1,
                known_bits: 4 * packets + 1,
            }
        };
        let expected_time = if packets == 16 {
            Value::Known(value)
        } else {
            Value::Partial {
                low_bits: value,
                known_bits: 4 * packets,
            }
        };
        assert_eq!(
            decoded,
            vec![
                Sequence::Pc(expected_pc),
                Sequence::Timestamp(expected_time)
            ],
            "{packets} packets"
        );
    }
}

#[test]
fn fill_rules_of_each_kind() {
    let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
    let units: Vec<(u64, OutgoingSequence)> = vec![
        (
            0,
            OutgoingSequence::Pc {
                address: 0x8000_1000,
            },
        ),
        (
            0,
            OutgoingSequence::Pc {
                address: 0x8000_1234,
            },
        ),
        (
            0,
            OutgoingSequence::LoadAddress {
                address: 0x7fff_0000,
            },
        ),
        (
            0,
            OutgoingSequence::LoadAddress {
                address: 0x7fff_0008,
            },
        ),
        (0, OutgoingSequence::StoreAddress { address: 0x1000 }),
        (0, OutgoingSequence::StoreAddress { address: 0x1010 }),
        (
            0,
            OutgoingSequence::LoadData {
                value: (-2i64) as u64,
            },
        ),
        (0, OutgoingSequence::StoreData { value: 0x80 }),
        (0, OutgoingSequence::Timestamp { time: 1000 }),
        (0, OutgoingSequence::Timestamp { time: 1001 }),
        // Hart 1 keeps its own last values: its first PC goes out in full.
        (
            1,
            OutgoingSequence::Pc {
                address: 0x8000_1236,
            },
        ),
        (
            0,
            OutgoingSequence::Pc {
                address: 0x8000_1238,
            },
        ),
    ];
    for (hart, sequence) in &units {
        encoder.write_unit(*hart, &[*sequence]).unwrap();
    }
    let trace = encoder.finish();
    let decoded: Vec<LocatedSequence> = decode_all(&trace.bytes, StreamOptions::default())
        .into_iter()
        .map(Result::unwrap)
        .filter(|located| {
            !matches!(
                located.sequence,
                Sequence::Nops { .. } | Sequence::ChangeHart { .. }
            )
        })
        .collect();
    let packets: Vec<u64> = decoded.iter().map(|located| located.packets).collect();
    // Full PC, then 2 changed low packets (0x91a vs 0x800: value 0x4000091a), ...
    assert_eq!(packets, vec![18, 5, 18, 3, 18, 4, 3, 5, 18, 3, 18, 3]);
    for (located, (hart, sequence)) in decoded.iter().zip(&units) {
        assert_eq!(located.hart, *hart);
        assert_eq!(located.sequence.to_outgoing(), Some(*sequence));
    }
}

#[test]
fn reserved_header_is_reported_and_decoding_resumes_at_the_next_sync_point() {
    // 32-byte buffer: sync points every 4 bytes (8 packets).
    let mut packets = vec![2, 13, 2, 2, 2, 2, 2, 2];
    packets.extend([3, 0, 0, 0, 0, 0, 0, 0]);
    let options = StreamOptions::default().with_buffer_bytes(Some(32));
    let decoded = decode_all(&pack(&packets), options);
    assert_eq!(decoded[0].as_ref().unwrap().sequence, Sequence::BranchTaken);
    assert_eq!(
        decoded[1],
        Err(Debug4Error::ReservedHeader {
            offset: 0,
            half: Half::High
        })
    );
    let located = decoded[2].as_ref().unwrap();
    assert_eq!(
        (located.offset, located.sequence),
        (4, Sequence::BranchNotTaken)
    );
}

#[test]
fn truncated_sequences_and_bad_versions_are_errors() {
    let decoded = decode_all(&pack(&[1, 3, 1, 2]), StreamOptions::default());
    assert_eq!(
        decoded,
        vec![Err(Debug4Error::Truncated {
            offset: 0,
            half: Half::Low,
            header: Header::Pc
        })]
    );
    let decoded = decode_all(&pack(&[4, 1]), StreamOptions::default());
    assert_eq!(
        decoded,
        vec![Err(Debug4Error::BadVersion {
            offset: 0,
            half: Half::Low,
            version: 1
        })]
    );
}

#[test]
fn a_pc_wider_than_the_address_space_is_an_error() {
    let mut packets = vec![1, 15];
    packets.extend([0xf; 16]);
    let decoded = decode_all(&pack(&packets), StreamOptions::default());
    assert!(matches!(
        decoded[0],
        Err(Debug4Error::ValueTooWide {
            header: Header::Pc,
            ..
        })
    ));
    // Without the C extension the value is shifted by two: 63 bits fit, 64 do not.
    let options = StreamOptions::default().with_pc_granularity(PcGranularity::Word);
    let mut packets = vec![1, 15];
    packets.extend([0xf; 15]);
    packets.push(0x3);
    let decoded = decode_all(&pack(&packets), options);
    assert_eq!(
        decoded[0].as_ref().unwrap().sequence,
        Sequence::Pc(Value::Known(0xffff_ffff_ffff_fffc))
    );
}

#[test]
fn trailing_zeros_are_nops() {
    let decoded = decode_all(&[0x02, 0, 0, 0], StreamOptions::default());
    assert_eq!(decoded.len(), 2);
    assert_eq!(
        decoded[1].as_ref().unwrap().sequence,
        Sequence::Nops { count: 7 }
    );
}

fn ring(bytes: u64) -> SequenceEncoderOptions {
    SequenceEncoderOptions::default().with_buffer(BufferMode::Ring { bytes })
}

#[test]
fn units_never_straddle_a_sync_point_and_values_go_out_in_full_after_one() {
    let mut encoder = SequenceEncoder::new(ring(256)).unwrap();
    let spacing = 64u64;
    let unit = [
        OutgoingSequence::Pc { address: 0x1000 },
        OutgoingSequence::Privilege(Privilege {
            cause: PrivilegeCause::Interrupt,
            level: 3,
            interrupts: InterruptEnable::Disabled,
        }),
        OutgoingSequence::Pc {
            address: 0x8000_0000,
        },
    ];
    let mut starts = Vec::new();
    for round in 0..8u64 {
        encoder
            .write_unit(0, &[OutgoingSequence::BranchTaken])
            .unwrap();
        starts.push(encoder.packets_written());
        encoder.write_unit(0, &unit).unwrap();
        let end = encoder.packets_written();
        let start = starts[round as usize];
        let length = end - start;
        // Either the unit lies inside one interval, or Nops padded it to the next point.
        let real_start =
            end - length.min(end % spacing + if end % spacing == 0 { spacing } else { 0 });
        assert!(
            start / spacing == (end - 1) / spacing || (end - 1) / spacing == real_start / spacing,
            "round {round}"
        );
    }
    let trace = encoder.finish();
    let options = StreamOptions::default().with_buffer_bytes(Some(256));
    // Every sync point holds a header of a non-Nop sequence or Nops, never a value packet:
    // decoding from any sync point gives the same sequences as decoding from the start.
    let whole: Vec<LocatedSequence> = decode_all(&trace.bytes, options)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let headers: Vec<u64> = whole
        .iter()
        .map(|located| located.offset * 2 + u64::from(located.half == Half::High))
        .collect();
    for point in (0..trace.bytes.len() as u64 * 2).step_by(spacing as usize) {
        assert!(headers.contains(&point), "no header at packet {point}");
    }
    // After a sync point, PCs are sent in full: 18 packets.
    for located in &whole {
        if let Sequence::Pc(Value::Known(_)) = located.sequence {
            let packet = located.offset * 2 + u64::from(located.half == Half::High);
            let previous_sync = packet / spacing * spacing;
            let first_after_sync = !whole.iter().any(|other| {
                let other_packet = other.offset * 2 + u64::from(other.half == Half::High);
                matches!(other.sequence, Sequence::Pc(_))
                    && other_packet >= previous_sync
                    && other_packet < packet
            });
            if first_after_sync {
                assert_eq!(located.packets, 18);
            }
        }
    }
}

#[test]
fn after_a_change_hart_every_sync_point_names_the_hart() {
    let mut encoder = SequenceEncoder::new(ring(256)).unwrap();
    encoder
        .write_unit(
            2,
            &[
                OutgoingSequence::TraceEnabled,
                OutgoingSequence::Pc { address: 0x100 },
            ],
        )
        .unwrap();
    for _ in 0..200 {
        encoder
            .write_unit(2, &[OutgoingSequence::BranchTaken])
            .unwrap();
    }
    let trace = encoder.finish();
    assert_eq!(trace.wrap_offset, None);
    assert!(detect(&trace.bytes));
    let options = StreamOptions::default().with_buffer_bytes(Some(256));
    let decoded: Vec<LocatedSequence> = decode_all(&trace.bytes, options)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for located in &decoded {
        if located.offset % 32 == 0 && located.half == Half::Low {
            assert_eq!(
                located.sequence,
                Sequence::ChangeHart { hart: 2 },
                "at {:#x}",
                located.offset
            );
        }
        if !matches!(located.sequence, Sequence::Nops { .. }) {
            assert_eq!(located.hart, 2);
        }
    }
}

#[test]
fn a_wrapped_ring_decodes_from_the_first_sync_point_after_the_write_pointer() {
    let mut encoder = SequenceEncoder::new(ring(256)).unwrap();
    let mut sent = Vec::new();
    for index in 0..400u64 {
        let sequence = OutgoingSequence::Timestamp { time: index * 1000 };
        encoder.write_unit(0, &[sequence]).unwrap();
        sent.push(sequence);
    }
    let trace = encoder.finish();
    let wrap = trace.wrap_offset.expect("wrapped");
    assert_eq!(trace.bytes.len(), 256);
    let options = trace.stream_options(BufferMode::Ring { bytes: 256 }, PcGranularity::Halfword);
    let decoded: Vec<LocatedSequence> = decode_all(&trace.bytes, options)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    match decoded[0].sequence {
        Sequence::Skipped { bytes } => {
            assert_eq!(decoded[0].offset, wrap);
            assert!((wrap + bytes) % 32 == 0);
        }
        ref other => assert_eq!(wrap % 32, 0, "{other:?}"),
    }
    let got: Vec<OutgoingSequence> = decoded
        .iter()
        .filter_map(|located| located.sequence.to_outgoing())
        .collect();
    assert!(got.len() > 20);
    assert!(
        sent.ends_with(&got),
        "decoded is not the tail of what was sent"
    );
}

#[test]
fn encoder_refusals() {
    assert!(matches!(
        SequenceEncoder::new(ring(100)),
        Err(EncodeError::BadRingSize { .. })
    ));
    assert!(matches!(
        SequenceEncoder::new(ring(224)),
        Err(EncodeError::BadRingSize { .. })
    ));
    let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
    assert_eq!(
        encoder.write_unit(0, &[OutgoingSequence::Pc { address: 0x1001 }]),
        Err(EncodeError::MisalignedPc { address: 0x1001 })
    );
    let privilege = Privilege {
        cause: PrivilegeCause::Other,
        level: 4,
        interrupts: InterruptEnable::Disabled,
    };
    assert_eq!(
        encoder.write_unit(0, &[OutgoingSequence::Privilege(privilege)]),
        Err(EncodeError::BadPrivilege { level: 4 })
    );
    let mut ring_encoder = SequenceEncoder::new(ring(256)).unwrap();
    let long = [OutgoingSequence::Timestamp { time: 1 }; 3];
    assert!(matches!(
        ring_encoder.write_unit(0, &long),
        Err(EncodeError::UnitTooLong { .. })
    ));
}

#[test]
fn detect_and_dump() {
    let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
    encoder
        .write_unit(
            0,
            &[
                OutgoingSequence::TraceEnabled,
                OutgoingSequence::Pc {
                    address: 0x8000_0000,
                },
            ],
        )
        .unwrap();
    let trace = encoder.finish();
    assert!(detect(&trace.bytes));
    assert!(!detect(&[0x21, 0x00]));
    assert!(!detect(&[]));
    let decoded = decode_all(&trace.bytes, StreamOptions::default());
    let mut line = String::new();
    dump_sequence(decoded[1].as_ref().unwrap(), &mut line).unwrap();
    assert_eq!(line, "0x00000001.0  hart 0  PC 0x80000000  [18 packets]");
    line.clear();
    dump_sequence(decoded[2].as_ref().unwrap(), &mut line).unwrap();
    assert_eq!(line, "0x0000000a.0  hart 0  Nop x4");
}
