//! Every example of the specification's appendix C (tables C.1-C.8), bytes copied from the
//! tables, decoded to the expected records and re-encoded byte for byte.

use tandem_message::{
    AdditionalState, InstructionBits, Note, Parameters, Record, RecordDecoder, RecordEncoder,
    Register,
};

fn decode(bytes: &[u8]) -> (Vec<Record>, Vec<Option<Note>>) {
    let mut decoder = RecordDecoder::new(bytes, Parameters::default());
    let mut records = Vec::new();
    let mut notes = Vec::new();
    while let Some(located) = decoder.next_record().expect("example decodes") {
        records.push(located.record);
        notes.push(located.note);
    }
    assert_eq!(decoder.position(), bytes.len() as u64);
    (records, notes)
}

fn encode(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    RecordEncoder::new(Parameters::default())
        .encode_all(records, &mut out)
        .expect("example encodes");
    out
}

fn check(bytes: &[u8], expected: &[Record]) {
    let (records, notes) = decode(bytes);
    assert_eq!(records, expected);
    assert!(notes.iter().all(Option::is_none));
    assert_eq!(encode(&records), bytes);
}

fn full(register: Register, value: u64) -> Record {
    Record::FullRegister { register, value }
}

const MEPC: Register = Register::Csr(0x341);
const MCAUSE: Register = Register::Csr(0x342);
const MSTATUS: Register = Register::Csr(0x300);
const MTVAL: Register = Register::Csr(0x343);

#[test]
fn c1_add() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x03,
        0x11, 0xb3, 0x81, 0x62, 0x00,
        0x04, 0x03, 0x10, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::IncrementPc,
            Record::Instruction(InstructionBits::bits32(0x0062_81b3)),
            full(Register::Integer(3), 0x1234),
            Record::EndGroup,
        ],
    );
}

#[test]
fn c2_jr() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x07, 0x10, 0x00, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00,
        0x11, 0x67, 0x00, 0x01, 0x10,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::AdditionalState(AdditionalState::ProgramCounter(0x0c00_0100)),
            Record::Instruction(InstructionBits::bits32(0x1001_0067)),
            Record::EndGroup,
        ],
    );
}

#[test]
fn c3_fadd_s() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x03,
        0x11, 0xd3, 0xf3, 0x16, 0x01,
        0x04, 0x27, 0x10, 0xf9, 0xf4, 0xfe, 0x66, 0xff, 0xff, 0xff, 0xff,
        0x06, 0x03, 0x00, 0x01,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::IncrementPc,
            Record::Instruction(InstructionBits::bits32(0x0116_f3d3)),
            full(Register::Float(7), 0xffff_ffff_66fe_f4f9),
            Record::IncrementalOr {
                register: Register::Csr(0x003),
                mask: 0x01,
            },
            Record::EndGroup,
        ],
    );
}

#[test]
fn c4_c_sub() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x03,
        0x10, 0x0d, 0x8d,
        0x04, 0x10, 0x10, 0x78, 0x56, 0x34, 0x12, 0xff, 0xff, 0xff, 0xff,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::IncrementPc,
            Record::Instruction(InstructionBits::bits16(0x8d0d)),
            // The table says "a0 (x10)" but writes `10 10`, which is 0x1010 = x16 (a6): the
            // register number is written as decimal digits. The bytes are decoded as they
            // are (docs/tandem-protocol-choices.md).
            full(Register::Integer(16), 0xffff_ffff_1234_5678),
            Record::EndGroup,
        ],
    );
}

/// C.5 as the spec writes it, with opcode 0x10 before a 32-bit encoding.
#[rustfmt::skip]
const C5_AS_PRINTED: [u8; 29] = [
    0x01,
    0x03,
    0x10, 0x03, 0xa2, 0x82, 0x00,
    0x04, 0x04, 0x10, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55,
    0x07, 0x02, 0x08, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x02,
];

fn c5_records() -> Vec<Record> {
    vec![
        Record::BeginGroup,
        Record::IncrementPc,
        Record::Instruction(InstructionBits::bits32(0x0082_a203)),
        full(Register::Integer(4), 0x55aa_55aa_55aa_55aa),
        Record::AdditionalState(AdditionalState::PhysicalAddress(0x0100_0008)),
        Record::EndGroup,
    ]
}

#[test]
fn c5_lw_as_printed_is_read_as_the_erratum() {
    let bytes = &C5_AS_PRINTED[..];
    let mut decoder = RecordDecoder::new(bytes, Parameters::default());
    let mut records = Vec::new();
    let mut notes = Vec::new();
    while let Some(located) = decoder.next_record().unwrap() {
        records.push(located.record);
        notes.push(located.note);
    }
    assert_eq!(records, c5_records());
    assert_eq!(
        notes[2],
        Some(Note::ThirtyTwoBitInstructionUnderOpcode16),
        "the erratum is reported, not taken silently"
    );
    assert_eq!(decoder.statistics().thirty_two_bit_under_opcode_16, 1);
    // The encoder writes the corrected opcode 0x11.
    let mut corrected = bytes.to_vec();
    corrected[2] = 0x11;
    assert_eq!(encode(&records), corrected);
}

#[test]
fn c5_lw_corrected() {
    let mut bytes = C5_AS_PRINTED[..].to_vec();
    bytes[2] = 0x11;
    check(&bytes, &c5_records());
}

#[test]
fn c6_csrrc() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x03,
        0x11, 0xf3, 0xb4, 0x45, 0x30,
        0x04, 0x09, 0x10, 0x88, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x04, 0x03, 0x80, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::IncrementPc,
            Record::Instruction(InstructionBits::bits32(0x3045_b4f3)),
            full(Register::Integer(9), 0x888),
            full(Register::Csr(0x304), 0x880),
            Record::EndGroup,
        ],
    );
}

#[test]
fn c7_illegal_instruction() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x07, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x11, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x41, 0x03, 0x34, 0x12, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x42, 0x03, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x00, 0x03, 0xb0, 0x18, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
        0x04, 0x43, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x07, 0x01, 0x03,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::AdditionalState(AdditionalState::ProgramCounter(0x1_0000)),
            Record::Instruction(InstructionBits::bits32(0)),
            full(MEPC, 0x8_1234),
            full(MCAUSE, 2),
            full(MSTATUS, 0x0a_0000_18b0),
            full(MTVAL, 0),
            Record::AdditionalState(AdditionalState::Privilege(3)),
            Record::EndGroup,
        ],
    );
}

#[test]
fn c8_interrupt() {
    #[rustfmt::skip]
    let bytes = [
        0x01,
        0x07, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x41, 0x03, 0x56, 0x12, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x42, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
        0x04, 0x00, 0x03, 0xb0, 0x18, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
        0x04, 0x43, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x07, 0x01, 0x03,
        0x02,
    ];
    check(
        &bytes,
        &[
            Record::BeginGroup,
            Record::AdditionalState(AdditionalState::ProgramCounter(0x1_0000)),
            full(MEPC, 0x8_1256),
            full(MCAUSE, 0x8000_0000_0000_0003),
            full(MSTATUS, 0x0a_0000_18b0),
            full(MTVAL, 0),
            Record::AdditionalState(AdditionalState::Privilege(3)),
            Record::EndGroup,
        ],
    );
}

#[test]
fn decimal_pc_identifier_is_accepted_and_noted() {
    let bytes = [0x01, 0x07, 0x0a, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x02];
    let mut decoder = RecordDecoder::new(&bytes, Parameters::default());
    decoder.next_record().unwrap();
    let pc = decoder.next_record().unwrap().unwrap();
    assert_eq!(
        pc.record,
        Record::AdditionalState(AdditionalState::ProgramCounter(0x1000))
    );
    assert_eq!(pc.note, Some(Note::DecimalProgramCounterIdentifier));
    assert_eq!(decoder.statistics().decimal_pc_identifiers, 1);
    // Re-encoded with the examples' identifier 0x10.
    assert_eq!(
        encode(&[pc.record]),
        [0x07, 0x10, 0x00, 0x10, 0, 0, 0, 0, 0, 0]
    );
}
