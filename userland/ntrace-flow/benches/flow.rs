//! Flow decoding and encoding throughput on the bundled trace of a real program
//! (tests/fixtures/ntrace/interp: a bytecode interpreter, 143k instructions).

use std::path::Path;

use code_image::{load_elf, CodeImage};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ntrace_flow::{
    DecoderOptions, EncoderOptions, FileDecodeInfo, FlowDecoder, ParallelDecoder, ParallelOptions,
    TraceEncoder,
};
use trace_elements::ElementKind;

fn fixture() -> (CodeImage, Vec<FileDecodeInfo>, Vec<u8>) {
    let directory =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/ntrace/interp");
    let elf = std::fs::read(directory.join("program")).expect("fixture program");
    let trace = std::fs::read(directory.join("trace.nt")).expect("fixture trace");
    let mut image = CodeImage::new();
    load_elf(&mut image, "interp", &elf, None).unwrap();
    let files = image.file_decode_infos();
    (image, files, trace)
}

fn decode_all(image: &CodeImage, files: &[FileDecodeInfo], trace: &[u8], pcs: bool) -> (u64, u64) {
    let mut decoder = FlowDecoder::new(trace, image, files.to_vec(), DecoderOptions::default());
    let (mut instructions, mut checksum) = (0u64, 0u64);
    while let Some(element) = decoder.next_element().unwrap() {
        if let ElementKind::InstructionRange {
            start,
            instructions: count,
            ..
        } = element.kind
        {
            instructions += u64::from(count);
            if pcs {
                decoder
                    .for_each_instruction(start, count, |pc| checksum = checksum.wrapping_add(pc));
            }
        }
    }
    (instructions, checksum)
}

fn benchmarks(criterion: &mut Criterion) {
    let (image, files, trace) = fixture();
    let (instructions, _) = decode_all(&image, &files, &trace, false);
    let mut group = criterion.benchmark_group("ntrace-flow");
    group.throughput(Throughput::Elements(instructions));
    group.bench_function("decode ranges (summary)", |bench| {
        bench.iter(|| decode_all(&image, &files, &trace, false))
    });
    group.bench_function("decode every pc", |bench| {
        bench.iter(|| decode_all(&image, &files, &trace, true))
    });
    // The fixture has one synchronisation message: its chunks start at seams. Small
    // chunks, as the fixture is small (the scans, replays and joins of each show).
    group.bench_function("parallel decode, 2 jobs, 4 KiB chunks (summary)", |bench| {
        bench.iter(|| {
            let options = DecoderOptions::default().with_instruction_ranges(false);
            let parallel = ParallelOptions::default()
                .with_jobs(2)
                .with_chunk_bytes(4 << 10);
            ParallelDecoder::new(&trace, &image, files.clone(), options, parallel)
                .run(|_| Ok::<(), ()>(()))
                .unwrap()
                .statistics
                .instructions
        })
    });

    // The encoder model, fed the decoded PCs back.
    let mut decoder = FlowDecoder::new(&trace, &image, files.clone(), DecoderOptions::default());
    let mut pcs = Vec::new();
    while let Some(element) = decoder.next_element().unwrap() {
        if let ElementKind::InstructionRange {
            start,
            instructions,
            ..
        } = element.kind
        {
            decoder.for_each_instruction(start, instructions, |pc| pcs.push(pc));
        }
    }
    group.bench_function("encode", |bench| {
        bench.iter(|| {
            let mut encoder =
                TraceEncoder::new(&image, files.clone(), EncoderOptions::default()).unwrap();
            for &pc in &pcs {
                encoder.retire(pc).unwrap();
            }
            encoder.finish().unwrap().0.len()
        })
    });
    group.finish();
}

criterion_group!(benches, benchmarks);
criterion_main!(benches);
