//! MSEO framing: idle, vendor/reserved messages, errors and resynchronisation.

mod common;

use common::{decode_all, decode_ok};
use ntrace_message::{
    Body, BranchType, CorrelationEvent, EncodeError, MessageDecoder, MessageEncoder, MessageError,
    MessageOptions, Process, ProcessFormat, ResourceFull, SyncReason,
};

const TABLE6: [u8; 6] = [0x70, 0xD0, 0x1D, 0x1D, 0xF8, 0xFF];
const DIRECT_BRANCH_5: [u8; 2] = [0x0C, 5 << 2 | 3];

#[test]
fn idle_runs_between_messages() {
    let mut stream = vec![0xFF; 5];
    stream.extend_from_slice(&TABLE6);
    stream.extend_from_slice(&[0xFF, 0xFF, 0xFF]);
    stream.extend_from_slice(&DIRECT_BRANCH_5);
    // Back to back, no idle.
    stream.extend_from_slice(&DIRECT_BRANCH_5);
    // Any MSEO=11 byte after a message end is idle, not only 0xFF (Table 5 "more 11s").
    stream.extend_from_slice(&[0x03, 0x7B]);
    stream.extend_from_slice(&TABLE6);
    stream.extend_from_slice(&[0xFF; 4]);
    let mut decoder = MessageDecoder::new(&stream, MessageOptions::default());
    let offsets: Vec<(u64, u8)> = decoder
        .by_ref()
        .map(|m| m.unwrap())
        .map(|m| (m.offset, m.tcode()))
        .collect();
    assert_eq!(offsets, [(5, 28), (14, 3), (16, 3), (20, 28)]);
    assert_eq!(decoder.idle_bytes(), 5 + 3 + 2 + 4);
    assert_eq!(decoder.skipped_bytes(), 0);
    assert_eq!(decoder.position(), stream.len() as u64);
    assert_eq!(decoder.next_message(), Ok(None));
}

#[test]
fn only_idle_and_empty() {
    assert!(decode_all(&[], MessageOptions::default()).is_empty());
    let mut decoder = MessageDecoder::new(&[0xFF; 100], MessageOptions::default());
    assert_eq!(decoder.next_message(), Ok(None));
    assert_eq!(decoder.idle_bytes(), 100);
}

#[test]
fn base_offset_applies_to_messages_and_errors() {
    let mut stream = TABLE6.to_vec();
    stream.extend_from_slice(&[0x0C, 0x00]);
    let base = 0x1000;
    let mut decoder =
        MessageDecoder::new(&stream, MessageOptions::default()).with_base_offset(base);
    let message = decoder.next_message().unwrap().unwrap();
    assert_eq!(message.offset, base);
    assert_eq!(message.bytes_at(&stream, base), TABLE6);
    assert!(
        message.bytes(&stream).is_empty(),
        "offset 0x1000 is not inside the chunk"
    );
    assert_eq!(
        decoder.next_message(),
        Err(MessageError::Truncated { offset: base + 6 })
    );
    assert_eq!(decoder.position(), base + 8);
}

#[test]
fn vendor_and_reserved_tcodes_are_surfaced() {
    let options = MessageOptions::default().with_src_bits(3);
    let vendor = [56 << 2, (5 | 1 << 3) << 2, 0x01 << 2 | 1, 0x02 << 2 | 3];
    let reserved_zero = [0x00, 0x00, 0x00, 0x03];
    let reserved_top = [63 << 2, 0x07];
    let mut stream = Vec::new();
    for part in [&vendor[..], &[0xFF], &reserved_zero, &TABLE6, &reserved_top] {
        stream.extend_from_slice(part);
    }
    // TABLE6 under a 3-bit SRC is a different (still valid) IndirectBranchHist layout;
    // re-encode it for these options instead.
    let table6_body = Body::IndirectBranchHist {
        btype: BranchType::Indirect,
        icnt: 0x7D,
        uaddr: 0xE,
        hist: 0xFFE,
    };
    let mut table6 = Vec::new();
    MessageEncoder::new(options)
        .encode(6, &table6_body, None, &mut table6)
        .unwrap();
    let start = vendor.len() + 1 + reserved_zero.len();
    stream.splice(start..start + TABLE6.len(), table6.iter().copied());

    let messages = decode_ok(&stream, options);
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0].body, Body::Other { tcode: 56 });
    assert_eq!(messages[0].src, 5);
    assert_eq!(messages[0].timestamp, None);
    assert_eq!(messages[0].bytes(&stream), vendor);
    assert_eq!(messages[1].body, Body::Other { tcode: 0 });
    assert_eq!((messages[1].offset, messages[1].length), (5, 4));
    assert_eq!(messages[1].bytes(&stream), reserved_zero);
    assert_eq!((messages[2].src, messages[2].body), (6, table6_body));
    assert_eq!(messages[3].body, Body::Other { tcode: 63 });
    assert_eq!(messages[3].bytes(&stream), reserved_top);
    for tcode in [
        0u8, 1, 5, 6, 7, 10, 13, 20, 26, 31, 32, 34, 40, 55, 56, 60, 62, 63,
    ] {
        let bytes = [tcode << 2, 0x03];
        let messages = decode_ok(&bytes, MessageOptions::default());
        assert_eq!(messages[0].body, Body::Other { tcode }, "TCODE {tcode}");
    }
}

#[test]
fn other_cannot_be_encoded() {
    let mut out = vec![0xAA];
    let result = MessageEncoder::new(MessageOptions::default()).encode(
        0,
        &Body::Other { tcode: 56 },
        None,
        &mut out,
    );
    assert_eq!(result, Err(EncodeError::UnknownLayout { tcode: 56 }));
    assert_eq!(out, [0xAA], "nothing appended on error");
}

#[test]
fn garbage_then_resynchronisation() {
    let mut stream = TABLE6.to_vec();
    // Garbage: a byte with MSEO=01 where a message should start, more junk, then an end.
    let garbage = [0x01, 0x22, 0x45, 0x13];
    stream.extend_from_slice(&garbage);
    stream.extend_from_slice(&DIRECT_BRANCH_5);
    stream.extend_from_slice(&TABLE6);
    let results = decode_all(&stream, MessageOptions::default());
    assert_eq!(results.len(), 4);
    assert!(results[0].is_ok());
    let error = results[1].unwrap_err();
    assert_eq!(error, MessageError::InvalidMessageStart { offset: 6 });
    assert_eq!(error.offset(), 6);
    assert_eq!(
        error.to_string(),
        "at byte offset 0x6: message starts with an end-of-field byte (MSEO=01)"
    );
    assert_eq!(results[2].unwrap().offset, 10);
    assert_eq!(results[3].unwrap().offset, 12);

    let mut decoder = MessageDecoder::new(&stream, MessageOptions::default());
    while decoder.next().is_some() {}
    assert_eq!(decoder.skipped_bytes(), garbage.len() as u64);
}

#[test]
fn garbage_swallowing_a_message_costs_only_that_message() {
    // Garbage ending in MSEO=00 runs into the next message: both are lost together, the
    // one after decodes again.
    let mut stream = vec![0x24, 0x02 << 2 | 2];
    stream.extend_from_slice(&DIRECT_BRANCH_5);
    stream.extend_from_slice(&TABLE6);
    let results = decode_all(&stream, MessageOptions::default());
    assert_eq!(
        results[0],
        Err(MessageError::ReservedMseo {
            offset: 0,
            byte_offset: 1
        })
    );
    assert_eq!(results[1].unwrap().offset, 4);
    assert_eq!(results.len(), 2);
}

#[test]
fn truncated_stream() {
    let mut stream = TABLE6.to_vec();
    stream.extend_from_slice(&TABLE6[..4]);
    let results = decode_all(&stream, MessageOptions::default());
    assert_eq!(results.len(), 2);
    let error = results[1].unwrap_err();
    assert_eq!(error, MessageError::Truncated { offset: 6 });
    assert_eq!(
        error.to_string(),
        "at byte offset 0x6: stream ended inside a message"
    );
    // Truncated inside the fixed-length header and inside a vendor message too.
    assert_eq!(
        decode_all(&[29 << 2], MessageOptions::default())[0],
        Err(MessageError::Truncated { offset: 0 })
    );
    assert_eq!(
        decode_all(&[56 << 2, 0x00], MessageOptions::default())[0],
        Err(MessageError::Truncated { offset: 0 })
    );
}

#[test]
fn reserved_mseo() {
    // In the first byte, in the header, in a variable field, in a vendor message.
    let cases: [(&[u8], u64); 4] = [
        (&[0x72, 0x03], 0),
        (&[29 << 2, 0x02, 0x01, 0x01, 0x03], 1),
        (&[0x70, 0xD0, 0x1D, 0x1E, 0xF8, 0xFF], 3),
        (&[56 << 2, 0x00, 0x06, 0x03], 2),
    ];
    for (bytes, byte_offset) in cases {
        let mut stream = bytes.to_vec();
        stream.extend_from_slice(&TABLE6);
        let results = decode_all(&stream, MessageOptions::default());
        assert_eq!(
            results[0],
            Err(MessageError::ReservedMseo {
                offset: 0,
                byte_offset
            }),
            "{bytes:02x?}"
        );
        assert_eq!(
            results.last().unwrap().unwrap().offset,
            bytes.len() as u64,
            "{bytes:02x?}"
        );
    }
    let text = MessageError::ReservedMseo {
        offset: 0x1c,
        byte_offset: 0x1f,
    }
    .to_string();
    assert_eq!(
        text,
        "at byte offset 0x1c: reserved MSEO value 0b10 in byte at offset 0x1f"
    );
}

#[test]
fn missing_fields() {
    let options = MessageOptions::default();
    // IndirectBranchHist ending after U-ADDR.
    let results = decode_all(&[0x70, 0xD0, 0x1D, 0x1F], options);
    assert_eq!(
        results[0],
        Err(MessageError::MissingField {
            offset: 0,
            tcode: 28,
            field: "HIST"
        })
    );
    assert_eq!(
        results[0].unwrap_err().to_string(),
        "at byte offset 0x0: IndirectBranchHist message (TCODE 28) ended before its HIST field"
    );
    // ProgTraceCorrelation with CDF=1 but no HIST.
    // EVCODE 0, CDF 1, I-CNT 1 and the end.
    let bytes = [33 << 2, (1 << 4) << 2, 0x07];
    assert_eq!(
        decode_all(&bytes, options)[0],
        Err(MessageError::MissingField {
            offset: 0,
            tcode: 33,
            field: "HIST"
        })
    );
    // IndirectBranchSync ending inside its header (SYNC+B-TYPE fill byte 1).
    let bytes = [12 << 2, 0x03];
    assert_eq!(
        decode_all(&bytes, options)[0],
        Err(MessageError::MissingField {
            offset: 0,
            tcode: 12,
            field: "I-CNT"
        })
    );
    // 12-bit SRC: the message ends after half the SRC field.
    let bytes = [3 << 2, 0x03];
    assert_eq!(
        decode_all(&bytes, options.with_src_bits(12))[0],
        Err(MessageError::MissingField {
            offset: 0,
            tcode: 3,
            field: "SRC"
        })
    );
    // ResourceFull with RCODE 2 and no HREPEAT.
    let bytes = [27 << 2, 2 << 2 | 3];
    assert_eq!(
        decode_all(&bytes, options)[0],
        Err(MessageError::MissingField {
            offset: 0,
            tcode: 27,
            field: "HREPEAT"
        })
    );
}

#[test]
fn extra_fields() {
    let options = MessageOptions::default();
    // DirectBranch: I-CNT, TSTAMP, and one more.
    let bytes = [0x0C, 0x05, 0x05, 0x07];
    assert_eq!(
        decode_all(&bytes, options)[0],
        Err(MessageError::ExtraFields {
            offset: 0,
            tcode: 3
        })
    );
    // One extra field is TSTAMP whatever the options say.
    let messages = decode_ok(&[0x0C, 0x05, 0x07], options);
    assert_eq!(
        (messages[0].body, messages[0].timestamp),
        (Body::DirectBranch { icnt: 1 }, Some(1))
    );
}

#[test]
fn unexpected_field_end_in_header() {
    let options = MessageOptions::default();
    let bytes = [12 << 2, 0x01, 0x07];
    assert_eq!(
        decode_all(&bytes, options)[0],
        Err(MessageError::UnexpectedFieldEnd {
            offset: 0,
            byte_offset: 1
        })
    );
}

#[test]
fn field_too_wide() {
    let options = MessageOptions::default();
    // Eleven full MDOs (66 bits) then one more: bits beyond 63 are set.
    let mut bytes = vec![0x0C];
    bytes.extend([0xFC; 11]);
    bytes.push(0x07);
    bytes.extend_from_slice(&TABLE6);
    let results = decode_all(&bytes, options);
    assert_eq!(
        results[0],
        Err(MessageError::FieldTooWide {
            offset: 0,
            field: "I-CNT"
        })
    );
    assert_eq!(results[1].unwrap().offset, 13);
    // Exactly 64 bits is fine.
    let mut bytes = vec![0x0C];
    bytes.extend([0xFC; 10]);
    bytes.push(0x0F << 2 | 3);
    assert_eq!(
        decode_ok(&bytes, options)[0].body,
        Body::DirectBranch { icnt: u64::MAX }
    );
    // An address field with bit 63 set would be address bit 64.
    let mut bytes = vec![9 << 2, 0x01];
    bytes.extend([0xFC; 10]);
    bytes.push(0x0F << 2 | 3);
    assert_eq!(
        decode_all(&bytes, options)[0],
        Err(MessageError::FieldTooWide {
            offset: 0,
            field: "F-ADDR"
        })
    );
}

#[test]
fn long_all_zero_field_is_accepted() {
    let mut bytes = vec![0x0C];
    bytes.resize(1 + 4_000_000, 0x00);
    bytes.push(0x03);
    let messages = decode_ok(&bytes, MessageOptions::default());
    assert_eq!(messages[0].body, Body::DirectBranch { icnt: 0 });
    assert_eq!(messages[0].length, 4_000_002);
    // A trace of nothing but zero bytes is one long reserved-TCODE message, not an error.
    let zeros = vec![0u8; 1_000_000];
    let mut with_end = zeros.clone();
    with_end.push(0x03);
    assert_eq!(
        decode_ok(&with_end, MessageOptions::default())[0].body,
        Body::Other { tcode: 0 }
    );
    assert_eq!(
        decode_all(&zeros, MessageOptions::default())[0],
        Err(MessageError::Truncated { offset: 0 })
    );
}

#[test]
fn sync_forward_skips_a_partial_message() {
    let mut stream = TABLE6[2..].to_vec();
    stream.extend_from_slice(&[0xFF, 0xFF]);
    stream.extend_from_slice(&DIRECT_BRANCH_5);
    let mut decoder = MessageDecoder::new(&stream, MessageOptions::default()).with_base_offset(100);
    assert_eq!(decoder.sync_forward(), Some(106));
    assert_eq!(decoder.skipped_bytes(), 4);
    assert_eq!(decoder.idle_bytes(), 2);
    assert_eq!(
        decoder.next_message().unwrap().unwrap().body,
        Body::DirectBranch { icnt: 5 }
    );
    assert_eq!(decoder.sync_forward(), None);
    let mut decoder = MessageDecoder::new(&[0x00, 0x00], MessageOptions::default());
    assert_eq!(decoder.sync_forward(), None);
    assert_eq!(decoder.skipped_bytes(), 2);
    assert_eq!(decoder.next_message(), Ok(None));
}

#[test]
fn message_accessors() {
    let options = MessageOptions::default();
    let mut stream = Vec::new();
    let encoder = MessageEncoder::new(options);
    let sync = Body::IndirectBranchSync {
        sync: SyncReason::TRACE_EVENT,
        btype: BranchType::Interrupt,
        icnt: 2,
        faddr: 0x80,
    };
    encoder.encode(0, &sync, Some(77), &mut stream).unwrap();
    encoder
        .encode(
            0,
            &Body::Ownership {
                process: Process::from_field(0xC),
            },
            None,
            &mut stream,
        )
        .unwrap();
    let messages = decode_ok(&stream, options);
    assert!(messages[0].is_sync());
    assert_eq!(messages[0].sync_reason(), Some(SyncReason::TRACE_EVENT));
    assert!(!SyncReason::TRACE_EVENT.resets_encoder());
    assert_eq!(messages[0].timestamp, Some(77));
    assert!(!messages[1].is_sync());
    assert_eq!(messages[1].sync_reason(), None);
    assert_eq!(messages[1].tcode(), 2);
}

#[test]
fn encoder_rejects_out_of_range_values() {
    let encoder = MessageEncoder::new(MessageOptions::default().with_src_bits(4));
    let mut out = Vec::new();
    let direct = Body::DirectBranch { icnt: 1 };
    assert_eq!(
        encoder.encode(16, &direct, None, &mut out),
        Err(EncodeError::SrcOutOfRange {
            src: 16,
            src_bits: 4
        })
    );
    let wide = MessageEncoder::new(MessageOptions::default().with_src_bits(13));
    assert_eq!(
        wide.encode(0, &direct, None, &mut out),
        Err(EncodeError::InvalidSrcBits { src_bits: 13 })
    );
    let bad = [
        Body::ProgTraceSync {
            sync: SyncReason(16),
            icnt: 0,
            faddr: 0,
        },
        Body::ProgTraceSync {
            sync: SyncReason(1),
            icnt: 0,
            faddr: 1,
        },
        Body::Error {
            etype: 16,
            ecode: 0,
        },
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 4,
            icnt: 0,
            hist: Some(1),
        },
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 0,
            icnt: 0,
            hist: Some(1),
        },
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 1,
            icnt: 0,
            hist: None,
        },
        Body::Ownership {
            // A FORMAT out of its two bits is no longer representable; PRV is.
            process: Process {
                format: ProcessFormat::PrivilegeChange,
                privilege: 4,
                virtualized: false,
                context: 0,
            },
        },
        Body::Ownership {
            process: Process {
                format: ProcessFormat::Scontext,
                privilege: 0,
                virtualized: false,
                context: 1 << 59,
            },
        },
        Body::ResourceFull(ResourceFull::Other {
            rcode: 1,
            rdata: [0, 0],
            count: 1,
        }),
        Body::ResourceFull(ResourceFull::Other {
            rcode: 9,
            rdata: [0, 0],
            count: 0,
        }),
        Body::ResourceFull(ResourceFull::Other {
            rcode: 16,
            rdata: [0, 0],
            count: 1,
        }),
        Body::ResourceFull(ResourceFull::Other {
            rcode: 9,
            rdata: [0, 1],
            count: 1,
        }),
    ];
    for body in bad {
        assert!(
            encoder.encode(0, &body, None, &mut out).is_err(),
            "{body:?}"
        );
    }
    let rv32 = MessageEncoder::new(
        MessageOptions::default().with_address_width(ntrace_message::AddressWidth::Bits32),
    );
    let high = Body::ProgTraceSync {
        sync: SyncReason(1),
        icnt: 0,
        faddr: 1 << 32,
    };
    assert!(rv32.encode(0, &high, None, &mut out).is_err());
    // Ambiguous TSTAMP placements.
    let single = Body::ResourceFull(ResourceFull::Other {
        rcode: 9,
        rdata: [3, 0],
        count: 1,
    });
    assert!(encoder.encode(0, &single, Some(1), &mut out).is_err());
    let reserved_cdf = Body::ProgTraceCorrelation {
        evcode: CorrelationEvent(0),
        cdf: 2,
        icnt: 0,
        hist: None,
    };
    assert!(encoder.encode(0, &reserved_cdf, Some(1), &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn reserved_rcode_and_cdf_layouts() {
    let options = MessageOptions::default();
    let encoder = MessageEncoder::new(options);
    let mut stream = Vec::new();
    let two = Body::ResourceFull(ResourceFull::Other {
        rcode: 9,
        rdata: [3, 4],
        count: 2,
    });
    encoder.encode(0, &two, Some(8), &mut stream).unwrap();
    let one = Body::ResourceFull(ResourceFull::Other {
        rcode: 3,
        rdata: [3, 0],
        count: 1,
    });
    encoder.encode(0, &one, None, &mut stream).unwrap();
    let messages = decode_ok(&stream, options);
    assert_eq!((messages[0].body, messages[0].timestamp), (two, Some(8)));
    assert_eq!((messages[1].body, messages[1].timestamp), (one, None));
    // CDF=0 followed by two fields: the second is TSTAMP, not HIST.
    let bytes = [33 << 2, 0x00, 0x01, 0x0B];
    let messages = decode_ok(&bytes, options);
    assert_eq!(
        messages[0].body,
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 0,
            icnt: 0,
            hist: None
        }
    );
    assert_eq!(messages[0].timestamp, Some(2));
}
