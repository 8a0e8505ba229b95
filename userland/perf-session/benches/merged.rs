//! A long run's merged profile (`rvperf daemon`'s `merged.pb.gz` and `merged.folded`,
//! rewritten every few intervals), from a run's builder holding 25,000 distinct kernel
//! stacks of 30 frames over 5,000 functions and 8,000 call sites, as a machine whose
//! processes come and go gathers (the README's figures):
//! * the profile of the run's samples, and its gzip file;
//! * their folded stacks, read from the builder ([`StackProfile::folded_of`]): the
//!   run's first folding, and a later one that finds each location's frames folded;
//! * the folded stacks kept for the run printed, as the daemon's rewrite now does.

use std::collections::HashMap;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use perf_session::{
    sample_labels, Processes, SampleLabels, StackFrame, StackProfile, SymbolOptions,
};
use pprof::{MappingSymbols, ProfileMetadata, SampleType, Samples};

const STACKS: u64 = 25_000;
const DEPTH: u64 = 30;
const FUNCTIONS: u64 = 5_000;
const CALL_SITES: u64 = 8_000;
const PROCESSES: i32 = 50;
const KERNEL: u64 = 0xffff_ffff_8000_0000;

/// A run's builder with every stack added, and the run's samples.
fn run() -> (StackProfile, Samples) {
    let kallsyms = std::env::temp_dir().join(format!(
        "rvperf-merged-bench-{}.kallsyms",
        std::process::id()
    ));
    let symbols: String = (0..FUNCTIONS)
        .map(|index| format!("{:x} T kernel_function_{index}\n", KERNEL + index * 64))
        .collect();
    std::fs::write(&kallsyms, symbols).expect("a temporary file");
    let mut processes = Processes::new(SymbolOptions {
        kallsyms: Some(kallsyms.clone()),
        ..SymbolOptions::default()
    });
    for pid in 1..=PROCESSES {
        processes.name_thread(pid, pid, &format!("process-{pid}"));
    }
    let types = [
        SampleType {
            kind: "samples",
            unit: "count",
        },
        SampleType {
            kind: "cpu",
            unit: "nanoseconds",
        },
    ];
    let mut profile = StackProfile::new(&types, None, HashMap::new(), MappingSymbols::Functions);
    // A deterministic walk (a linear congruential generator) over the call sites.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut frames = Vec::with_capacity(DEPTH as usize);
    for index in 0..STACKS {
        frames.clear();
        frames.push(StackFrame::Instruction(
            KERNEL + (index * 4) % (FUNCTIONS * 64),
        ));
        for _ in 1..DEPTH {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            frames.push(StackFrame::ReturnAddress(
                KERNEL + ((state >> 33) % CALL_SITES) * 40,
            ));
        }
        let pid = (index % PROCESSES as u64) as i32 + 1;
        let comm = processes.comm(pid, pid).to_owned();
        let labels = sample_labels(SampleLabels::Process, pid, pid, &comm);
        profile
            .add_stack(
                &mut processes,
                pid as u32,
                frames.iter().copied(),
                &[1, 1_000_000],
                &labels,
            )
            .expect("the builder's own ids");
    }
    let interval = profile
        .take_interval(&ProfileMetadata::default())
        .expect("the builder's own samples");
    let mut total = profile.new_samples();
    total
        .absorb(&interval.samples)
        .expect("the builder's own samples");
    let _ = std::fs::remove_file(kallsyms);
    (profile, total)
}

fn merged(c: &mut Criterion) {
    let (mut profile, total) = run();
    let mut group = c.benchmark_group("merged profile");
    group.sample_size(10);
    group.throughput(Throughput::Elements(STACKS));
    group.bench_function("25k stacks: profile and .pb.gz", |b| {
        b.iter(|| {
            let written = profile
                .encode_profile_of(&total, &ProfileMetadata::default())
                .expect("the builder's own samples");
            let mut out = Vec::new();
            written
                .write_gzip(&mut out)
                .expect("a Vec takes every byte");
            out
        })
    });
    // The run's first folding folds every location; later ones (the next rewrite, an
    // interval's stacks) find the pieces kept.
    group.bench_function("25k stacks: folded text, the run's first", |b| {
        b.iter_batched(
            run,
            |(mut profile, total)| {
                profile
                    .folded_of(&total, 0)
                    .expect("the builder's own samples")
                    .to_text()
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("25k stacks: folded text, a later folding", |b| {
        b.iter(|| {
            profile
                .folded_of(&total, 0)
                .expect("the builder's own samples")
                .to_text()
        })
    });
    // What `rvperf daemon` now does at a rewrite of merged.folded: the run's folded
    // stacks are kept as intervals come, and only printed.
    let folded = profile
        .folded_of(&total, 0)
        .expect("the builder's own samples");
    group.bench_function("25k stacks: kept folded stacks printed", |b| {
        b.iter(|| {
            let mut out = Vec::new();
            folded.write_text(&mut out).expect("a Vec takes every byte");
            out
        })
    });
    group.finish();
}

criterion_group!(benches, merged);
criterion_main!(benches);
