//! One million samples over a few thousand distinct addresses through the
//! caching Symbolizer, as `rvperf report` sees a recording: a fresh
//! Symbolizer each time (file read, DWARF parsed, every distinct address
//! looked up once) and a warm one (cache hits only).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use criterion::{criterion_group, criterion_main, Criterion};
use symbolize::{ObjectSymbolizer, Symbolizer, SymbolizerOptions};

const SAMPLES: usize = 1_000_000;
const FUNCTIONS: usize = 200;
const PID: u32 = 1;
const BASE: u64 = 0x5555_5555_4000;

/// A program of `FUNCTIONS` functions, each with an inlined helper.
fn program_source() -> String {
    let mut source = String::from("#include <stdio.h>\n");
    for index in 0..FUNCTIONS {
        writeln!(
            source,
            "static inline __attribute__((always_inline)) int helper{index}(int v) {{\n\
             \tint r = v * {index} + 1;\n\
             \tfor (int i = 0; i < v; i++)\n\t\tr ^= r << (i & 7);\n\
             \treturn r;\n}}\n\
             __attribute__((noinline)) int function{index}(int v) {{\n\
             \tint total = helper{index}(v);\n\
             \tif (total & 1)\n\t\ttotal += helper{index}(v + 3);\n\
             \treturn total;\n}}"
        )
        .unwrap();
    }
    source.push_str("int main(int argc, char **argv) {\n\tint sum = 0;\n");
    for index in 0..FUNCTIONS {
        writeln!(source, "\tsum += function{index}(argc);").unwrap();
    }
    source.push_str("\tprintf(\"%d\\n\", sum);\n\treturn 0;\n}\n");
    source
}

fn compile(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("many.c");
    std::fs::write(&source, program_source()).unwrap();
    let elf = dir.join("many");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&elf)
        .arg(&source)
        .status()
        .expect("run cc");
    assert!(status.success());
    elf
}

/// Executable segment of `elf` as (file offset, link address, size).
fn text_segment(elf: &Path) -> (u64, u64, u64) {
    let output = Command::new("readelf")
        .arg("-lW")
        .arg(elf)
        .output()
        .unwrap();
    let headers = String::from_utf8(output.stdout).unwrap();
    headers
        .lines()
        .filter(|line| line.trim_start().starts_with("LOAD"))
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|fields| fields[6..].iter().any(|flags| flags.contains('E')))
        .map(|fields| {
            let number =
                |text: &str| u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap();
            (number(fields[1]), number(fields[2]), number(fields[4]))
        })
        .expect("an executable segment")
}

fn new_symbolizer(elf: &Path, segment: (u64, u64, u64)) -> Symbolizer {
    let (offset, vaddr, size) = segment;
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        build_id_dirs: Vec::new(),
        debug_dirs: Vec::new(),
        ..SymbolizerOptions::default()
    });
    let page_offset = vaddr & 0xfff;
    symbolizer.add_mapping(
        PID,
        BASE + vaddr - page_offset,
        size + page_offset,
        offset - page_offset,
        &elf.display().to_string(),
        None,
    );
    symbolizer
}

fn bench(criterion: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let elf = compile(dir.path());
    let segment = text_segment(&elf);
    let object = ObjectSymbolizer::new("many", std::fs::read(&elf).unwrap()).unwrap();

    // Every byte of every generated function: the distinct addresses.
    let mut distinct = Vec::new();
    for index in 0..FUNCTIONS {
        let symbol = (segment.1..segment.1 + segment.2)
            .find_map(|address| {
                object
                    .function(address)
                    .filter(|symbol| symbol.name == format!("function{index}"))
            })
            .expect("generated function");
        distinct.extend((symbol.address..symbol.address + symbol.size).map(|vaddr| BASE + vaddr));
        if distinct.len() >= 4000 {
            break;
        }
    }
    // Samples in a fixed pseudo-random order, as a profile's are.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let samples: Vec<u64> = (0..SAMPLES)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            distinct[(state % distinct.len() as u64) as usize]
        })
        .collect();
    let frames = |symbolizer: &mut Symbolizer| {
        let mut count = 0usize;
        for address in &samples {
            count += symbolizer.symbolize(PID, *address).frames.len();
        }
        count
    };

    let mut group = criterion.benchmark_group(format!(
        "symbolize {SAMPLES} samples over {} addresses",
        distinct.len()
    ));
    group.sample_size(10);
    group.bench_function("fresh symbolizer", |bencher| {
        bencher.iter(|| frames(&mut new_symbolizer(&elf, segment)));
    });
    let mut warm = new_symbolizer(&elf, segment);
    frames(&mut warm);
    group.bench_function("warm cache", |bencher| bencher.iter(|| frames(&mut warm)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
