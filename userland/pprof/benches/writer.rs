//! The pprof writer's hot paths (the README's figures: 100,000 distinct stacks of 16
//! frames over 2,000 functions):
//! * one profile: interning the locations of many distinct stacks, adding the samples
//!   and writing the gzip file;
//! * an interval of a long run (`rvperf daemon`): the same stacks added to a builder
//!   that already knows their locations, taken out as the interval's samples, written
//!   as a profile of what they use, and added to the run's total.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pprof::{
    FunctionSpec, LineSpec, MappingId, MappingSpec, MappingSymbols, ProfileBuilder,
    ProfileMetadata, SampleType,
};

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

/// A builder of the benchmark's sample types and its one mapping.
fn new_builder() -> (ProfileBuilder, MappingId) {
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
    (builder, mapping)
}

/// Adds every stack, interning each address's location on its first use.
fn add_stacks(
    builder: &mut ProfileBuilder,
    mapping: MappingId,
    names: &[String],
    stacks: &[Vec<u64>],
) {
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
}

fn names() -> Vec<String> {
    (0..FUNCTIONS)
        .map(|index| format!("function_{index}"))
        .collect()
}

fn build(stacks: &[Vec<u64>], names: &[String]) -> Vec<u8> {
    let (mut builder, mapping) = new_builder();
    add_stacks(&mut builder, mapping, names, stacks);
    let mut out = Vec::new();
    pprof::write_gzip(&builder.build(), &mut out).expect("a Vec takes every byte");
    out
}

/// One interval of a run whose builder already holds the stacks' locations: what the
/// daemon does each interval.
fn interval(
    builder: &mut ProfileBuilder,
    total: &mut pprof::Samples,
    mapping: MappingId,
    names: &[String],
    stacks: &[Vec<u64>],
) -> Vec<u8> {
    add_stacks(builder, mapping, names, stacks);
    let samples = builder.take_samples();
    let profile = builder
        .encode_profile_of(&samples, &ProfileMetadata::default(), Some(mapping))
        .expect("samples of this builder");
    total.absorb(&samples).expect("samples of this builder");
    let mut out = Vec::new();
    profile
        .write_gzip(&mut out)
        .expect("a Vec takes every byte");
    out
}

fn writer(c: &mut Criterion) {
    let stacks = stacks();
    let names = names();
    let mut group = c.benchmark_group("pprof");
    group.sample_size(10);
    group.throughput(Throughput::Elements(STACKS));
    group.bench_function("100k distinct stacks to .pb.gz", |b| {
        b.iter_batched(|| (), |()| build(&stacks, &names), BatchSize::PerIteration)
    });
    // A run's builder after one interval of these stacks, with its total.
    let (mut warm, mapping) = new_builder();
    add_stacks(&mut warm, mapping, &names, &stacks);
    let mut warm_total = warm.new_samples();
    warm_total
        .absorb(&warm.take_samples())
        .expect("samples of this builder");
    group.bench_function(
        "an interval of 100k known stacks, written and added to the run",
        |b| {
            b.iter_batched(
                || (warm.clone(), warm_total.clone()),
                |(mut builder, mut total)| {
                    interval(&mut builder, &mut total, mapping, &names, &stacks)
                },
                BatchSize::PerIteration,
            )
        },
    );
    group.finish();
}

criterion_group!(benches, writer);
criterion_main!(benches);
