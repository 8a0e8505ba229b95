//! The hot paths between samples and a profile: LBR range counting over branch stacks,
//! ranges to per-instruction counts, placement at source positions, and folding stacks.

use std::collections::HashMap;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use profiles::{
    build_sample_profile, Branch, BranchCounts, FoldedStacks, PlacementOptions, SourceFrame,
};

/// 100,000 stacks of 32 branches over a synthetic program of 4,096 blocks of 16
/// four-byte instructions: like a long CTR recording of a mid-sized program.
fn stacks() -> Vec<Vec<Branch>> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..100_000)
        .map(|_| {
            // Newest first: each branch leaves its block's end for another block's start.
            let mut blocks: Vec<u64> = (0..33).map(|_| next() % 4096).collect();
            blocks.reverse();
            blocks
                .windows(2)
                .map(|pair| Branch {
                    from: 0x10000 + pair[1] * 64 + 60,
                    to: 0x10000 + pair[0] * 64,
                })
                .collect()
        })
        .collect()
}

fn aggregation(criterion: &mut Criterion) {
    let stacks = stacks();
    let mut group = criterion.benchmark_group("aggregation");
    group.sample_size(10);
    group.throughput(Throughput::Elements(stacks.len() as u64));
    group.bench_function("branch counts of 100k stacks", |bencher| {
        bencher.iter(|| {
            let mut counts = BranchCounts::default();
            for stack in &stacks {
                counts.add_stack(stack.iter().copied());
            }
            black_box(counts.ranges.len())
        })
    });
    let mut counts = BranchCounts::default();
    for stack in &stacks {
        counts.add_stack(stack.iter().copied());
    }
    group.bench_function("ranges to instruction counts", |bencher| {
        bencher.iter(|| black_box(counts.instruction_counts(|_| Some(4)).counts.len()))
    });
    let instructions = counts.instruction_counts(|_| Some(4)).counts;
    let frames: HashMap<u64, Vec<SourceFrame>> = instructions
        .keys()
        .map(|&address| {
            let block = (address - 0x10000) / 64;
            let frame = SourceFrame {
                linkage_name: format!("function_{}", block / 8),
                line: 10 + ((address % 64) / 8) as u32,
                discriminator: 0,
                function_start_line: 10,
            };
            (address, vec![frame])
        })
        .collect();
    group.bench_function("placement at source lines", |bencher| {
        bencher.iter(|| {
            let (profile, _) = build_sample_profile(
                &instructions,
                &counts.branches,
                |address| frames.get(&address).cloned().unwrap_or_default(),
                |address| address % 64 == 60,
                &PlacementOptions::default(),
            );
            black_box(profile.functions.len())
        })
    });
    group.bench_function("fold 100k stacks", |bencher| {
        let names: Vec<String> = (0..512).map(|index| format!("function_{index}")).collect();
        bencher.iter(|| {
            let mut folded = FoldedStacks::new();
            for stack in &stacks {
                folded.add(
                    stack
                        .iter()
                        .take(12)
                        .map(|branch| names[((branch.to - 0x10000) / 512) as usize].as_str()),
                    1,
                );
            }
            black_box(folded.len())
        })
    });
    group.finish();
}

criterion_group!(benches, aggregation);
criterion_main!(benches);
