//! One test per error kind, with the offset of the offending record; the decoder stops.

use tandem_message::{
    detect, dump_record, AccessSize, AddressWidth, EncodeError, Flen, InstructionBits,
    MemoryOperation, Parameters, Record, RecordDecoder, RecordEncoder, Register, TandemErrorKind,
    Xlen,
};

/// Decodes until the error, which must be `kind` at `offset`, then checks the decoder stops.
fn error_at(bytes: &[u8], parameters: Parameters, offset: u64, kind: TandemErrorKind) {
    let mut decoder = RecordDecoder::new(bytes, parameters);
    loop {
        match decoder.next_record() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("no error in {bytes:02x?}"),
            Err(error) => {
                assert_eq!((error.offset, error.kind), (offset, kind));
                assert!(error.to_string().contains(&format!("{offset:#x}")));
                break;
            }
        }
    }
    assert_eq!(decoder.next_record(), Ok(None), "stops after an error");
}

#[test]
fn unknown_opcode() {
    for opcode in [0u8, 12, 15, 18, 0xff] {
        error_at(
            &[0x01, 0x02, opcode],
            Parameters::default(),
            2,
            TandemErrorKind::UnknownOpcode { opcode },
        );
    }
}

#[test]
fn truncated_payloads() {
    let p = Parameters::default();
    let truncated = |opcode, needed, available| TandemErrorKind::Truncated {
        opcode,
        needed,
        available,
    };
    error_at(&[0x01, 0x04, 0x03], p, 1, truncated(4, 2, 1));
    error_at(&[0x01, 0x04, 0x03, 0x10, 1, 2], p, 1, truncated(4, 10, 4));
    error_at(&[0x05, 0x03, 0x10], p, 0, truncated(5, 3, 2));
    error_at(&[0x06], p, 0, truncated(6, 3, 0));
    error_at(&[0x07], p, 0, truncated(7, 1, 0));
    error_at(&[0x07, 0x10, 1, 2, 3], p, 0, truncated(7, 9, 4));
    error_at(
        &[0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0x31, 1],
        p,
        0,
        truncated(8, 17, 10),
    );
    error_at(&[0x10, 0x0d], p, 0, truncated(16, 2, 1));
    // The C.5 erratum needs the whole 32-bit encoding.
    error_at(&[0x10, 0x03, 0xa2, 0x82], p, 0, truncated(16, 4, 3));
    error_at(&[0x11, 1, 2, 3], p, 0, truncated(17, 4, 3));
}

#[test]
fn unknown_additional_state() {
    for identifier in [0u8, 11, 0x0f, 0x11, 0xff] {
        error_at(
            &[0x01, 0x07, identifier, 0, 0, 0, 0, 0, 0, 0, 0],
            Parameters::default(),
            1,
            TandemErrorKind::UnknownAdditionalState { identifier },
        );
    }
}

#[test]
fn unknown_memory_fields() {
    let p = Parameters::default();
    let address = [0x08, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut bytes = address.to_vec();
    bytes.push(0x0e);
    error_at(
        &bytes,
        p,
        0,
        TandemErrorKind::UnknownMemoryOperation { operation: 14 },
    );
    let mut bytes = address.to_vec();
    bytes.push(0x40);
    error_at(&bytes, p, 0, TandemErrorKind::UnknownAccessSize { size: 4 });
    let mut bytes = address.to_vec();
    bytes.extend_from_slice(&[0x30, 0x09, 0x23]);
    error_at(
        &bytes,
        p,
        10,
        TandemErrorKind::UnknownMemoryResult { result: 2 },
    );
}

#[test]
fn response_without_request() {
    error_at(
        &[0x01, 0x09, 0x00],
        Parameters::default(),
        1,
        TandemErrorKind::ResponseWithoutRequest,
    );
    // A response after a response is not "immediately after a request" either.
    let mut bytes = vec![0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xaa];
    bytes.extend_from_slice(&[0x09, 0x00, 0x09, 0x00]);
    error_at(
        &bytes,
        Parameters::default(),
        13,
        TandemErrorKind::ResponseWithoutRequest,
    );
}

#[test]
fn float_register_without_flen() {
    let parameters = Parameters::new(Xlen::Bits64, Flen::None, AddressWidth::Bits64);
    error_at(
        &[0x04, 0x20, 0x10, 0, 0, 0, 0, 0, 0, 0, 0],
        parameters,
        0,
        TandemErrorKind::FloatRegisterWithoutFlen {
            register: Register::Float(0),
        },
    );
}

#[test]
fn rv32_widths() {
    // RV32 with Sv32: XLEN 32, FLEN 32, MLEN 34 rounded to 40 bits.
    let parameters = Parameters::new(Xlen::Bits32, Flen::Bits32, AddressWidth::Bits40);
    let bytes = [
        0x04, 0x01, 0x10, 1, 2, 3, 4, // ra
        0x04, 0x21, 0x10, 5, 6, 7, 8, // ft1
        0x07, 0x10, 0, 0x10, 0, 0, // pc
        0x08, 1, 2, 3, 4, 5, 0x21, 9, 9, 9, 9, // sw
        0x09, 0x02, // store response: no data
    ];
    let mut decoder = RecordDecoder::new(&bytes, parameters);
    let mut records = Vec::new();
    while let Some(located) = decoder.next_record().unwrap() {
        records.push(located.record);
    }
    assert_eq!(
        records[3],
        Record::MemoryRequest {
            address: 0x05_0403_0201,
            operation: MemoryOperation::Store,
            size: AccessSize::Bits32,
            data: Some(0x0909_0909)
        }
    );
    assert_eq!(records.len(), 5);
    let mut out = Vec::new();
    RecordEncoder::new(parameters)
        .encode_all(&records, &mut out)
        .unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn encoder_refusals() {
    let mut rv32 = RecordEncoder::new(Parameters::new(
        Xlen::Bits32,
        Flen::None,
        AddressWidth::Bits32,
    ));
    let mut out = Vec::new();
    assert!(matches!(
        rv32.encode(
            &Record::FullRegister {
                register: Register::Integer(1),
                value: 1 << 32
            },
            &mut out
        ),
        Err(EncodeError::ValueTooWide { .. })
    ));
    assert!(matches!(
        rv32.encode(
            &Record::FullRegister {
                register: Register::Float(1),
                value: 0
            },
            &mut out
        ),
        Err(EncodeError::FloatRegisterWithoutFlen { .. })
    ));
    assert!(matches!(
        rv32.encode(
            &Record::Instruction(InstructionBits {
                raw: 0x0003,
                length: tandem_message::InstructionLength::Bits16
            }),
            &mut out
        ),
        Err(EncodeError::NotSixteenBitEncoding { raw: 3 })
    ));
    assert!(matches!(
        rv32.encode(
            &Record::MemoryRequest {
                address: 0,
                operation: MemoryOperation::Store,
                size: AccessSize::Bits8,
                data: None
            },
            &mut out
        ),
        Err(EncodeError::DataPresence { .. })
    ));
    assert!(matches!(
        rv32.encode(
            &Record::MemoryResponse {
                size: AccessSize::Bits8,
                result: tandem_message::MemoryResult::Success,
                data: None
            },
            &mut out
        ),
        Err(EncodeError::ResponseWithoutRequest)
    ));
    assert!(out.is_empty(), "refused records write nothing");
}

#[test]
fn detection() {
    assert!(detect(&[0x01, 0x03, 0x11, 0xb3, 0x81, 0x62, 0x00, 0x02]));
    // A prefix cut inside a record is still recognised.
    assert!(detect(&[0x01, 0x03, 0x11, 0xb3]));
    assert!(!detect(&[]));
    assert!(!detect(&[0x01]));
    assert!(!detect(&[0x04, 0x03, 0x10]));
    assert!(!detect(&[0xff, 0x70, 0xd0]));
    assert!(!detect(&[0x01, 0x0c]));
}

#[test]
fn dump_lines() {
    let bytes = [
        0x01, 0x03, 0x11, 0xb3, 0x81, 0x62, 0x00, 0x04, 0x03, 0x10, 0x34, 0x12, 0, 0, 0, 0, 0, 0,
        0x06, 0x03, 0x00, 0x01, 0x02,
    ];
    let mut decoder = RecordDecoder::new(&bytes, Parameters::default());
    let mut lines = Vec::new();
    while let Some(record) = decoder.next_record().unwrap() {
        let mut line = String::new();
        dump_record(&record, Parameters::default(), &mut line).unwrap();
        lines.push(line);
    }
    assert_eq!(
        lines,
        [
            "0x00000000: begin group",
            "0x00000001: increment pc",
            "0x00000002: instruction 32 006281b3 add gp,t0,t1",
            "0x00000007: full register gp = 0x1234",
            "0x00000012: incremental register fcsr |= 0x01",
            "0x00000016: end group",
        ]
    );
}
