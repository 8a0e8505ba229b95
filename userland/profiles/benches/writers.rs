//! The three AutoFDO writers on a profile the size of a large program's: 10,000
//! functions, each with a dozen body lines, calls and an inlined callee.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use profiles::{
    write_gcc_afdo, write_llvm_extbinary, write_llvm_text, LineLocation, SampleProfile,
};

const FUNCTIONS: u64 = 10_000;

fn large_profile() -> SampleProfile {
    let mut profile = SampleProfile::default();
    for index in 0..FUNCTIONS {
        let name = format!("_ZN7example6module15function_{index:05}17h0123456789abcdefE");
        let callee = format!("_ZN7example6helper{}E", index % 97);
        let function = profile.function(&name);
        function.head_samples = index % 1000 + 1;
        for line in 0..12u32 {
            let count = (index * 31 + u64::from(line) * 7) % 100_000;
            function.add_body(LineLocation::new(line, line % 2), count);
        }
        function.add_call(LineLocation::new(3, 1), &callee, index % 500 + 1);
        function.add_call(LineLocation::new(5, 0), "memcpy", 17);
        let inlined = function.inlined(LineLocation::new(7, 0), &callee);
        for line in 0..4u32 {
            inlined.add_body(LineLocation::new(line, 0), index % 300 + u64::from(line));
        }
        function.recompute_totals();
    }
    profile
}

fn writers(criterion: &mut Criterion) {
    let profile = large_profile();
    let mut group = criterion.benchmark_group("write_10k_functions");
    group.throughput(Throughput::Elements(FUNCTIONS));
    group.bench_function("llvm_text", |bencher| {
        let mut out = Vec::with_capacity(8 << 20);
        bencher.iter(|| {
            out.clear();
            write_llvm_text(black_box(&profile), &mut out).unwrap();
            out.len()
        })
    });
    group.bench_function("llvm_extbinary", |bencher| {
        let mut out = Vec::with_capacity(8 << 20);
        bencher.iter(|| {
            out.clear();
            write_llvm_extbinary(black_box(&profile), &mut out).unwrap();
            out.len()
        })
    });
    group.bench_function("gcc_afdo", |bencher| {
        let mut out = Vec::with_capacity(8 << 20);
        bencher.iter(|| {
            out.clear();
            write_gcc_afdo(black_box(&profile), &mut out).unwrap();
            out.len()
        })
    });
    group.finish();
}

criterion_group!(benches, writers);
criterion_main!(benches);
