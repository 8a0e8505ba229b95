//! Decoding throughput over a synthetic stream of instruction groups shaped like appendix
//! C's (increment pc, instruction, one full register; a load with memory records every
//! eighth instruction).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tandem_message::{
    AccessSize, AdditionalState, InstructionBits, MemoryOperation, MemoryResult, Parameters,
    Record, RecordDecoder, RecordEncoder, Register,
};

fn synthetic_stream(groups: u64) -> Vec<u8> {
    let mut encoder = RecordEncoder::new(Parameters::default());
    let mut out = Vec::new();
    for index in 0..groups {
        let mut records = vec![
            Record::BeginGroup,
            Record::IncrementPc,
            Record::Instruction(InstructionBits::bits32(0x0062_81b3)),
            Record::FullRegister {
                register: Register::Integer((index % 31 + 1) as u8),
                value: index.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            },
        ];
        if index % 8 == 0 {
            records.extend([
                Record::AdditionalState(AdditionalState::EffectiveAddress(0x8000_0000 + index)),
                Record::MemoryRequest {
                    address: 0x8000_0000 + index,
                    operation: MemoryOperation::Load,
                    size: AccessSize::Bits64,
                    data: None,
                },
                Record::MemoryResponse {
                    size: AccessSize::Bits64,
                    result: MemoryResult::Success,
                    data: Some(index),
                },
            ]);
        }
        records.push(Record::EndGroup);
        encoder
            .encode_all(&records, &mut out)
            .expect("synthetic records encode");
    }
    out
}

fn decode(criterion: &mut Criterion) {
    let bytes = synthetic_stream(100_000);
    let mut group = criterion.benchmark_group("tandem_message");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode", |bencher| {
        bencher.iter(|| {
            let mut decoder = RecordDecoder::new(black_box(&bytes), Parameters::default());
            let mut count = 0u64;
            while let Ok(Some(record)) = decoder.next_record() {
                count += u64::from(record.length);
            }
            count
        });
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
