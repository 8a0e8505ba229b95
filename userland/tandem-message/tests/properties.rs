//! Random records round-trip through the encoder and decoder; arbitrary bytes never panic.

use proptest::prelude::*;
use tandem_message::{
    dump_record, AccessSize, AdditionalState, AddressWidth, Flen, InstructionBits, MemoryOperation,
    MemoryResult, Parameters, Record, RecordDecoder, RecordEncoder, Register, Xlen,
};

fn register() -> impl Strategy<Value = Register> {
    any::<u16>().prop_map(Register::from_debug_number)
}

fn size() -> impl Strategy<Value = AccessSize> {
    (0u8..4).prop_map(|code| AccessSize::from_code(code).unwrap())
}

fn operation() -> impl Strategy<Value = MemoryOperation> {
    (0u8..14).prop_map(|code| tandem_message::operation_from_code(code).unwrap())
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![
        Just(Record::BeginGroup),
        Just(Record::EndGroup),
        Just(Record::IncrementPc),
        Just(Record::HartReset),
        Just(Record::StateInitialization),
        (register(), any::<u64>())
            .prop_map(|(register, value)| Record::FullRegister { register, value }),
        (register(), any::<i8>())
            .prop_map(|(register, offset)| Record::IncrementalAdd { register, offset }),
        (register(), any::<u8>())
            .prop_map(|(register, mask)| Record::IncrementalOr { register, mask }),
        any::<u8>().prop_map(|mode| Record::AdditionalState(AdditionalState::Privilege(mode))),
        any::<u64>()
            .prop_map(|value| Record::AdditionalState(AdditionalState::PhysicalAddress(value))),
        any::<u64>()
            .prop_map(|value| Record::AdditionalState(AdditionalState::EffectiveAddress(value))),
        (size(), any::<u64>()).prop_map(|(size, value)| Record::AdditionalState(
            AdditionalState::StoreData { size, value }
        )),
        any::<u64>().prop_map(|value| Record::AdditionalState(AdditionalState::Mtime(value))),
        any::<u64>()
            .prop_map(|value| Record::AdditionalState(AdditionalState::PcPhysicalAddress(value))),
        any::<u64>()
            .prop_map(|value| Record::AdditionalState(AdditionalState::ProgramCounter(value))),
        (any::<u64>(), operation(), size(), any::<u64>()).prop_map(
            |(address, operation, size, data)| Record::MemoryRequest {
                address,
                operation,
                size,
                data: tandem_message::request_carries_data(operation).then_some(data),
            }
        ),
        (size(), any::<bool>(), proptest::option::of(any::<u64>())).prop_map(
            |(size, failed, data)| Record::MemoryResponse {
                size,
                result: if failed {
                    MemoryResult::Failure
                } else {
                    MemoryResult::Success
                },
                data,
            }
        ),
        any::<u16>().prop_map(|raw| Record::Instruction(InstructionBits::bits16(raw))),
        any::<u32>().prop_map(|raw| Record::Instruction(InstructionBits::bits32(raw))),
    ]
}

fn parameters() -> impl Strategy<Value = Parameters> {
    (
        prop_oneof![Just(Xlen::Bits32), Just(Xlen::Bits64)],
        prop_oneof![Just(Flen::None), Just(Flen::Bits32), Just(Flen::Bits64)],
        prop_oneof![
            Just(AddressWidth::Bits32),
            Just(AddressWidth::Bits40),
            Just(AddressWidth::Bits64)
        ],
    )
        .prop_map(|(xlen, flen, width)| Parameters::new(xlen, flen, width))
}

proptest! {
    #[test]
    fn encoded_records_decode_back(parameters in parameters(), records in proptest::collection::vec(record(), 0..40)) {
        let mut encoder = RecordEncoder::new(parameters);
        let mut bytes = Vec::new();
        let mut accepted = Vec::new();
        for record in &records {
            // Values too wide for the parameters and misplaced responses are refused; the
            // rest must come back unchanged.
            if encoder.encode(record, &mut bytes).is_ok() {
                accepted.push(*record);
            }
        }
        let mut decoder = RecordDecoder::new(&bytes, parameters);
        let mut decoded = Vec::new();
        while let Some(located) = decoder.next_record().unwrap() {
            prop_assert_eq!(located.note, None);
            decoded.push(located.record);
        }
        prop_assert_eq!(decoded, accepted);
        prop_assert_eq!(decoder.position(), bytes.len() as u64);
    }

    #[test]
    fn arbitrary_bytes_never_panic(parameters in parameters(), bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut decoder = RecordDecoder::new(&bytes, parameters);
        let mut line = String::new();
        let mut previous_end = 0;
        loop {
            match decoder.next_record() {
                Ok(Some(record)) => {
                    prop_assert_eq!(record.offset, previous_end);
                    previous_end = record.end_offset();
                    prop_assert!(previous_end <= bytes.len() as u64);
                    line.clear();
                    dump_record(&record, parameters, &mut line).unwrap();
                }
                Ok(None) => break,
                Err(error) => {
                    prop_assert_eq!(error.offset, previous_end);
                    prop_assert_eq!(decoder.next_record(), Ok(None));
                    break;
                }
            }
        }
        let _ = tandem_message::detect(&bytes);
    }
}
