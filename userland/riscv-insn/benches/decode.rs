//! Decoding throughput on the instruction mix of a real rv64gc static binary (the golden
//! objdump sample), which is what the N-Trace flow decoder feeds the crate.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use riscv_insn::{decode, DecodeOptions, Itype};

/// Encodings of every instruction line of the checked-in objdump sample, in program order.
fn sample_encodings() -> Vec<u32> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/objdump-sample.txt");
    let contents = std::fs::read_to_string(path).expect("objdump sample is checked in");
    contents
        .lines()
        .filter_map(|line| {
            let mut columns = line.split('\t');
            columns.next()?.trim().strip_suffix(':')?;
            u32::from_str_radix(columns.next()?.trim(), 16).ok()
        })
        .collect()
}

fn decode_sample(criterion: &mut Criterion) {
    let encodings = sample_encodings();
    let options = DecodeOptions::default();
    let mut group = criterion.benchmark_group("decode");
    group.throughput(Throughput::Elements(encodings.len() as u64));
    group.bench_function("rv64gc_static_binary_mix", |bencher| {
        bencher.iter(|| {
            let mut non_sequential = 0u32;
            for &raw in black_box(&encodings) {
                if let Ok(instruction) = decode(raw, options) {
                    non_sequential += u32::from(instruction.itype(true) != Itype::None);
                }
            }
            non_sequential
        });
    });
    group.finish();

    // Text is for reports, not the hot path; measured on a slice to keep the run short.
    let display_sample = &encodings[..encodings.len().min(512)];
    let mut group = criterion.benchmark_group("display");
    group.throughput(Throughput::Elements(display_sample.len() as u64));
    group.bench_function("rv64gc_static_binary_mix", |bencher| {
        let mut text = String::with_capacity(64);
        bencher.iter(|| {
            use std::fmt::Write;
            for &raw in black_box(display_sample) {
                text.clear();
                if let Ok(instruction) = decode(raw, options) {
                    let _ = write!(text, "{instruction}");
                }
            }
            text.len()
        });
    });
    group.finish();
}

criterion_group!(benches, decode_sample);
criterion_main!(benches);
