//! Flow decoding speed on a synthetic trace: a hand-assembled program (the tests'
//! `support::program`, straight-line code, branches, a call and return, an indirect
//! jump, an `ecall`) run for a million retirements of one hart, encoded in each
//! reporting mode and decoded to elements. Throughput is in retired instructions.

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use debug4_flow::{
    BranchReporting, Debug4Decoder, Debug4Encoder, DecoderOptions, EncoderOptions, Retirement,
};
use debug4_message::PcGranularity;
use support::{program, successor, Rng, ENTRY_POINTS};
use trace_elements::ElementSource;

const RETIREMENTS: u64 = 1_000_000;

fn decode(criterion: &mut Criterion) {
    let image = program();
    let mut rng = Rng(0x5eed);
    let mut pc = ENTRY_POINTS[0];
    let mut pcs = Vec::new();
    for _ in 0..RETIREMENTS {
        pcs.push(pc);
        pc = successor(pc, &mut rng);
    }
    let mut group = criterion.benchmark_group("debug4_flow");
    group.throughput(Throughput::Elements(RETIREMENTS));
    group.sample_size(10);
    for mode in [BranchReporting::TakenNotTaken, BranchReporting::PcPairs] {
        let options = EncoderOptions::default().with_branch_reporting(mode);
        let mut encoder = Debug4Encoder::new(&image, options).expect("options");
        for &pc in &pcs {
            encoder.retire(&Retirement::at(0, pc)).expect("encode");
        }
        let trace = encoder.finish().expect("finish");
        let decoder_options = DecoderOptions::new(
            trace.stream_options(options.buffer, PcGranularity::Halfword),
            mode,
        );
        group.bench_function(format!("decode {mode:?}"), |bencher| {
            bencher.iter(|| {
                let mut decoder =
                    Debug4Decoder::new(black_box(&trace.bytes), &image, decoder_options);
                let mut elements = 0u64;
                while let Ok(Some(element)) = decoder.next_element() {
                    black_box(element);
                    elements += 1;
                }
                elements
            });
        });
        group.bench_function(format!("encode {mode:?}"), |bencher| {
            bencher.iter(|| {
                let mut encoder = Debug4Encoder::new(&image, options).expect("options");
                for &pc in black_box(&pcs) {
                    encoder.retire(&Retirement::at(0, pc)).expect("encode");
                }
                encoder.finish().expect("finish").bytes.len()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
