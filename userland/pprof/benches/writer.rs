//! The pprof writer's hot path: interning the locations of many distinct stacks,
//! adding the samples and writing the gzip file (the README's figure: 100,000
//! distinct stacks of 16 frames over 2,000 functions).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pprof::{FunctionSpec, LineSpec, MappingSpec, MappingSymbols, ProfileBuilder, SampleType};

const STACKS: u64 = 100_000;
const DEPTH: u64 = 16;
const FUNCTIONS: u64 = 2_000;

/// Distinct stacks of addresses, deterministic (a linear congruential walk).
fn stacks() -> Vec<Vec<u64>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..STACKS)
        .map(|index| {
            let mut stack = vec![0x10_000 + index * 4];
            for _ in 1..DEPTH {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                stack.push(0x10_000 + (state >> 33) % (FUNCTIONS * 64));
            }
            stack
        })
        .collect()
}

fn build(stacks: &[Vec<u64>]) -> Vec<u8> {
    let mut builder = ProfileBuilder::new(&[
        SampleType {
            kind: "samples",
            unit: "count",
        },
        SampleType {
            kind: "cpu",
            unit: "nanoseconds",
        },
    ]);
    let mapping = builder.mapping(&MappingSpec {
        start: 0x10_000,
        limit: 0x10_000 + FUNCTIONS * 64 + STACKS * 4,
        file_offset: 0,
        filename: "/usr/bin/program",
        build_id: Some(&[0xab; 20]),
        symbols: MappingSymbols::Functions,
    });
    let names: Vec<String> = (0..FUNCTIONS)
        .map(|index| format!("function_{index}"))
        .collect();
    let mut locations = Vec::with_capacity(DEPTH as usize);
    for stack in stacks {
        locations.clear();
        for &address in stack {
            let location = match builder.address_location(Some(mapping), address) {
                Some(location) => location,
                None => {
                    let name = &names[((address / 64) % FUNCTIONS) as usize];
                    let function = builder.function(&FunctionSpec {
                        name,
                        system_name: name,
                        filename: None,
                        start_line: None,
                    });
                    let line = LineSpec {
                        function,
                        line: None,
                        column: None,
                    };
                    builder
                        .add_address_location(Some(mapping), address, &[line])
                        .expect("ids of this builder")
                }
            };
            locations.push(location);
        }
        builder
            .add_sample(&locations, &[1, 10_000_000], &[])
            .expect("two values");
    }
    let mut out = Vec::new();
    pprof::write_gzip(&builder.build(), &mut out).expect("a Vec takes every byte");
    out
}

fn writer(c: &mut Criterion) {
    let stacks = stacks();
    let mut group = c.benchmark_group("pprof");
    group.sample_size(10);
    group.throughput(Throughput::Elements(STACKS));
    group.bench_function("100k distinct stacks to .pb.gz", |b| {
        b.iter_batched(|| (), |()| build(&stacks), BatchSize::PerIteration)
    });
    group.finish();
}

criterion_group!(benches, writer);
criterion_main!(benches);
