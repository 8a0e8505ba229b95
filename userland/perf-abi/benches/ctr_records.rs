//! Parsing rvperf_ctr AUX records: what `rvperf record -b` does for every sample on
//! RISC-V before writing it to perf.data. 2,000 records of 32 entries (the module's
//! default depth) as one AUX chunk.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use perf_abi::ctr::{encode_ctr_record, CtrBranch, CtrRecordHeader, CtrRecords};

fn aux_chunk(records: u64, entries: u64) -> Vec<u8> {
    let branches: Vec<CtrBranch> = (0..entries)
        .map(|entry| CtrBranch {
            from: 0x1_0000 + entry * 16,
            to: 0x2_0000 + entry * 32,
            flags_word: entry & 3,
        })
        .collect();
    (0..records)
        .flat_map(|index| {
            let header = CtrRecordHeader {
                cpu: 0,
                pid: 100,
                tid: 100,
                depth: 32,
                time: index * 1000,
                ip: 0x1_0000 + index,
                period: 20_000,
                ..CtrRecordHeader::default()
            };
            encode_ctr_record(&header, &branches)
        })
        .collect()
}

fn parse(criterion: &mut Criterion) {
    let chunk = aux_chunk(2000, 32);
    let mut group = criterion.benchmark_group("ctr_records");
    group.throughput(Throughput::Bytes(chunk.len() as u64));
    group.bench_function("parse_2000x32", |bencher| {
        bencher.iter(|| {
            let mut records = CtrRecords::new(black_box(&chunk));
            let mut sum = 0u64;
            while let Ok(Some(record)) = records.next_record() {
                for branch in record.branches() {
                    sum = sum.wrapping_add(branch.from ^ branch.to);
                }
            }
            sum
        })
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
