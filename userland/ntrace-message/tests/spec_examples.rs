//! The worked examples of the N-Trace 1.0 spec, decoded and re-encoded byte for byte.

mod common;

use common::decode_ok;
use ntrace_message::{
    AddressWidth, Body, BranchType, CorrelationEvent, MessageDecoder, MessageEncoder,
    MessageOptions, Process, ProcessFormat, SyncReason,
};

fn encode(options: MessageOptions, src: u16, body: &Body, timestamp: Option<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    MessageEncoder::new(options)
        .encode(src, body, timestamp, &mut out)
        .expect("encodable");
    out
}

/// Spec 3.5, Table 6.
#[test]
fn table6_indirect_branch_hist() {
    let bytes = [0xFF, 0x70, 0xD0, 0x1D, 0x1D, 0xF8, 0xFF, 0xFF];
    let options = MessageOptions::default();
    let mut decoder = MessageDecoder::new(&bytes, options);
    let message = decoder.next_message().unwrap().unwrap();
    let expected = Body::IndirectBranchHist {
        btype: BranchType::Indirect,
        icnt: 0x7D,
        uaddr: 0x7 << 1,
        hist: 0xFFE,
    };
    assert_eq!(message.body, expected);
    assert_eq!(
        (
            message.offset,
            message.length,
            message.src,
            message.timestamp
        ),
        (1, 6, 0, None)
    );
    assert_eq!(decoder.next_message(), Ok(None));
    assert_eq!(decoder.idle_bytes(), 2);
    assert_eq!(decoder.skipped_bytes(), 0);

    let mut out = Vec::new();
    let encoder = MessageEncoder::new(options);
    encoder.encode_idle(1, &mut out);
    encoder.encode(0, &expected, None, &mut out).unwrap();
    encoder.encode_idle(1, &mut out);
    assert_eq!(out, bytes);
}

/// Table 6 note "Here we could have TSTAMP field": the HIST byte becomes MSEO=01.
#[test]
fn table6_with_timestamp() {
    let body = Body::IndirectBranchHist {
        btype: BranchType::Indirect,
        icnt: 0x7D,
        uaddr: 0xE,
        hist: 0xFFE,
    };
    let bytes = encode(MessageOptions::default(), 0, &body, Some(5));
    assert_eq!(bytes, [0x70, 0xD0, 0x1D, 0x1D, 0xF8, 0xFD, 0x17]);
    let messages = decode_ok(&bytes, MessageOptions::default());
    assert_eq!(messages[0].timestamp, Some(5));
    assert_eq!(messages[0].body, body);
}

/// Table 6 note "Here we could have an SRC field (it would shift the start of B-TYPE)".
#[test]
fn src_field_shifts_the_layout() {
    let body = Body::IndirectBranchHist {
        btype: BranchType::Exception,
        icnt: 0x7D,
        uaddr: 0xE,
        hist: 0xFFE,
    };
    let options = MessageOptions::default().with_src_bits(4);
    let bytes = encode(options, 5, &body, None);
    // SRC (4 bits) and B-TYPE (2 bits) fill the second byte, so I-CNT starts byte-aligned.
    assert_eq!(
        bytes,
        [
            0x70,
            (5 | 2 << 4) << 2,
            0x3D << 2,
            0x01 << 2 | 1,
            0x1D,
            0xF8,
            0xFF
        ]
    );
    let messages = decode_ok(&bytes, options);
    assert_eq!((messages[0].src, messages[0].body), (5, body));
    // Read without SRC, the same bytes mean something else entirely.
    let misread = decode_ok(&bytes, MessageOptions::default());
    assert_ne!(misread[0].body, body);

    // A 12-bit SRC pushes B-TYPE into the third byte.
    let options = MessageOptions::default().with_src_bits(12);
    let bytes = encode(options, 0xABC, &body, None);
    assert_eq!(bytes[1], ((0xABCu16 & 0x3F) << 2) as u8);
    assert_eq!(bytes[2], ((0xABCu16 >> 6) << 2) as u8);
    assert_eq!(bytes[3] >> 2 & 3, 2);
    let messages = decode_ok(&bytes, options);
    assert_eq!((messages[0].src, messages[0].body), (0xABC, body));
}

/// Spec 8.1, Table 24: F-ADDR then two U-ADDR XOR updates.
#[test]
fn table24_address_xor_compression() {
    let options = MessageOptions::default();
    let addresses = [0x3FC04u64, 0x3F368, 0x3E100];
    let mut stream = Vec::new();
    let encoder = MessageEncoder::new(options);
    encoder
        .encode(
            0,
            &Body::ProgTraceSync {
                sync: SyncReason::EXIT_FROM_DEBUG,
                icnt: 0,
                faddr: addresses[0],
            },
            None,
            &mut stream,
        )
        .unwrap();
    for pair in addresses.windows(2) {
        let body = Body::IndirectBranch {
            btype: BranchType::Indirect,
            icnt: 3,
            uaddr: pair[0] ^ pair[1],
        };
        encoder.encode(0, &body, None, &mut stream).unwrap();
    }
    let messages = decode_ok(&stream, options);
    let Body::ProgTraceSync { faddr, .. } = messages[0].body else {
        panic!("{:?}", messages[0])
    };
    assert_eq!(faddr >> 1, 0x1FE02, "F-ADDR field value");
    // F-ADDR=0x1FE02 is 17 bits: three bytes 0x02, 0x38 (0x1FE02>>6 & 0x3F), 0x1F.
    assert_eq!(&stream[2..5], [0x02 << 2, 0x38 << 2, 0x1F << 2 | 3]);

    let mut reference = faddr;
    let mut fields = Vec::new();
    for message in &messages[1..] {
        let Body::IndirectBranch { uaddr, .. } = message.body else {
            panic!("{message:?}")
        };
        fields.push(uaddr >> 1);
        reference ^= uaddr;
        assert!(addresses.contains(&reference));
    }
    assert_eq!(fields, [0x7B6, 0x934]);
    assert_eq!(reference, 0x3E100);
    // U-ADDR=0x7B6 (11 bits) is two bytes after TCODE, B-TYPE+I-CNT.
    let second = messages[1].bytes(&stream);
    assert_eq!(&second[2..], [0x36 << 2, 0x1E << 2 | 3]);
}

/// The F-ADDR example bytes of spec 8.2.1, wrapped in an IndirectBranchHistSync so that
/// the address field ends with MSEO=01 as printed in the spec.
fn hist_sync_with_address_field(field: &[u8]) -> Vec<u8> {
    let mut bytes = vec![29 << 2, (2 | 1 << 4) << 2, 0x01];
    bytes.extend_from_slice(field);
    bytes.push(0x07);
    bytes
}

const EXTENDED_EXAMPLE: [u8; 6] = [0xFC, 0xFC, 0xFC, 0xFC, 0x7C, 0xF1];
const FULL_64_BIT_EXAMPLE: [u8; 11] = [
    0xFC, 0xFC, 0xFC, 0xFC, 0xFC, 0xFC, 0xFC, 0xFC, 0xFC, 0xFC, 0x15,
];

fn faddr_of(bytes: &[u8], options: MessageOptions) -> u64 {
    match decode_ok(bytes, options)[0].body {
        Body::IndirectBranchHistSync { faddr, .. } => faddr,
        other => panic!("{other:?}"),
    }
}

fn sync_body(faddr: u64) -> Body {
    Body::IndirectBranchHistSync {
        sync: SyncReason::PERIODIC,
        btype: BranchType::ExceptionOrInterrupt,
        icnt: 0,
        faddr,
        hist: 1,
    }
}

#[test]
fn msb_extension_example_decodes_and_encodes() {
    let bytes = hist_sync_with_address_field(&EXTENDED_EXAMPLE);
    let extended = MessageOptions::default().with_address_msb_extension(true);
    assert_eq!(faddr_of(&bytes, extended), 0xFFFF_FFFE_3FFF_FFFE);
    // Without the extension the field is just 0xF_1FFF_FFFF.
    assert_eq!(
        faddr_of(&bytes, MessageOptions::default()),
        0xF_1FFF_FFFF << 1
    );
    assert_eq!(
        encode(extended, 0, &sync_body(0xFFFF_FFFE_3FFF_FFFE), None),
        bytes
    );
    // Without the extension the same address takes all 11 bytes.
    assert_eq!(
        encode(
            MessageOptions::default(),
            0,
            &sync_body(0xFFFF_FFFE_3FFF_FFFE),
            None
        )
        .len(),
        3 + 11 + 1
    );
}

/// The spec prints this example's values with four hex digits missing ("F-ADDR
/// field=0x5FFF_FFFF_FFFF, Encoded address=0xBFFF_FFFF_FFFE"); ten all-ones MDOs and 000101
/// are 0x5FFF_FFFF_FFFF_FFFF, a full 64-bit address as the example's title says.
#[test]
fn full_64_bit_address_example() {
    let bytes = hist_sync_with_address_field(&FULL_64_BIT_EXAMPLE);
    for extension in [false, true] {
        let options = MessageOptions::default().with_address_msb_extension(extension);
        assert_eq!(faddr_of(&bytes, options), 0xBFFF_FFFF_FFFF_FFFE);
        assert_eq!(
            encode(options, 0, &sync_body(0xBFFF_FFFF_FFFF_FFFE), None),
            bytes
        );
    }
}

#[test]
fn extra_zero_mdo_prevents_extension() {
    let extended = MessageOptions::default().with_address_msb_extension(true);
    // 0xF_1FFF_FFFF has MSB 1 in its last MDO, so the encoder must add an all-zero MDO.
    let address = 0xF_1FFF_FFFFu64 << 1;
    let bytes = encode(extended, 0, &sync_body(address), None);
    assert_eq!(
        bytes,
        hist_sync_with_address_field(&[0xFC, 0xFC, 0xFC, 0xFC, 0x7C, 0xF0, 0x01])
    );
    assert_eq!(faddr_of(&bytes, extended), address);
    // Without extension the top MDO is not special and the shorter form is used.
    let plain = encode(MessageOptions::default(), 0, &sync_body(address), None);
    assert_eq!(
        plain,
        hist_sync_with_address_field(&[0xFC, 0xFC, 0xFC, 0xFC, 0x7C, 0xF1])
    );
}

/// Spec 8.2: the Linux kernel address 0xFFFF_FFFF_8000_31F4 needs 11 bytes without the
/// extension and far fewer with it, on RV64; on RV32 extension stops at bit 31.
#[test]
fn msb_extension_shortens_kernel_addresses() {
    let address = 0xFFFF_FFFF_8000_31F4;
    let plain = encode(MessageOptions::default(), 0, &sync_body(address), None);
    assert_eq!(plain.len(), 3 + 11 + 1);
    let extended = MessageOptions::default().with_address_msb_extension(true);
    let short = encode(extended, 0, &sync_body(address), None);
    assert_eq!(short.len(), 3 + 6 + 1);
    assert_eq!(faddr_of(&short, extended), address);

    let rv32 = extended.with_address_width(AddressWidth::Bits32);
    let short32 = encode(rv32, 0, &sync_body(0xFFFF_F1F4), None);
    assert_eq!(short32.len(), 3 + 2 + 1);
    assert_eq!(faddr_of(&short32, rv32), 0xFFFF_F1F4);
    // Read as RV64, the same bytes extend to bit 63 instead.
    assert_eq!(faddr_of(&short32, extended), 0xFFFF_FFFF_FFFF_F1F4);
    // 0x8000_31F4 has zeros below bit 31, so RV32 gains nothing from the extension.
    assert_eq!(
        encode(rv32, 0, &sync_body(0x8000_31F4), None).len(),
        3 + 6 + 1
    );
    let all_ones = encode(rv32, 0, &sync_body(0xFFFF_FFFE), None);
    assert_eq!(all_ones.len(), 3 + 1 + 1);
    assert_eq!(faddr_of(&all_ones, rv32), 0xFFFF_FFFE);
}

/// Spec 7.1 PROCESS examples.
#[test]
fn ownership_process_examples() {
    let process = Process::from_field(0x3B2);
    assert_eq!(
        process,
        Process {
            format: ProcessFormat::Scontext,
            privilege: 0,
            virtualized: true,
            context: 0x1D
        }
    );
    assert_eq!(process.to_field(), 0x3B2);
    let process = Process::from_field(0xC);
    assert_eq!(
        process,
        Process {
            format: ProcessFormat::PrivilegeChange,
            privilege: 3,
            virtualized: false,
            context: 0
        }
    );
    assert_eq!(process.to_field(), 0xC);

    let options = MessageOptions::default();
    for (field, bytes) in [
        (0x3B2, vec![0x08, 0x32 << 2, 0x0E << 2 | 3]),
        (0xC, vec![0x08, 0x0C << 2 | 3]),
    ] {
        let body = Body::Ownership {
            process: Process::from_field(field),
        };
        assert_eq!(encode(options, 0, &body, None), bytes);
        assert_eq!(decode_ok(&bytes, options)[0].body, body);
    }
}

/// Spec 9.3 repeated-history example and 8.4.4 I-CNT overflow sequence.
#[test]
fn repeated_history_and_icnt_overflow_sequence() {
    use ntrace_message::ResourceFull;
    let options = MessageOptions::default();
    let bodies = [
        Body::ResourceFull(ResourceFull::RepeatedHist {
            hist: 0x5555_5555,
            repeat: 10,
        }),
        Body::ResourceFull(ResourceFull::RepeatedHist {
            hist: 0x5,
            repeat: 150,
        }),
        Body::ProgTraceSync {
            sync: SyncReason::EXIT_FROM_DEBUG,
            icnt: 0,
            faddr: 0x100,
        },
        Body::IndirectBranchHistSync {
            sync: SyncReason::SEQUENTIAL_INSTRUCTION_COUNTER,
            btype: BranchType::Indirect,
            icnt: 8,
            faddr: 0x110,
            hist: 0x2,
        },
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 1,
            icnt: 6,
            hist: Some(1),
        },
    ];
    let mut stream = Vec::new();
    for body in &bodies {
        stream.extend(encode(options, 0, body, None));
    }
    let messages = decode_ok(&stream, options);
    let decoded: Vec<Body> = messages.iter().map(|m| m.body).collect();
    assert_eq!(decoded, bodies);
    // SYNC=3 with I-CNT=0 share a byte, then F-ADDR=0x80 (address 0x100, spec 8.4.4).
    assert_eq!(
        messages[2].bytes(&stream),
        [9 << 2, 3 << 2 | 1, 0x00, 0x02 << 2 | 3]
    );
}

#[test]
fn sync_reason_table25() {
    let resets: Vec<u8> = (0..16)
        .filter(|&v| SyncReason(v).resets_encoder())
        .collect();
    assert_eq!(resets, [1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(SyncReason::EXIT_FROM_POWER_DOWN.name(), "ExitFromPowerDown");
    assert_eq!(SyncReason(8).name(), "Reserved");
    assert_eq!(SyncReason(14).name(), "VendorDefined");
}

#[test]
fn tcode_names() {
    use ntrace_message::tcode;
    assert_eq!(
        tcode::name(tcode::INDIRECT_BRANCH_HIST),
        "IndirectBranchHist"
    );
    assert_eq!(tcode::name(56), "VendorDefined");
    assert_eq!(tcode::name(62), "VendorDefined");
    for reserved in [0, 1, 5, 6, 7, 10, 13, 26, 31, 32, 34, 55, 63] {
        assert_eq!(tcode::name(reserved), "Reserved", "{reserved}");
    }
}
