//! Decoding throughput on a generated stream: mostly branch packets, a PC every few, load
//! addresses and data, a timestamp now and then, in a wrapped 64 KiB ring.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use debug4_message::{
    BufferMode, OutgoingSequence, PcGranularity, SequenceDecoder, SequenceEncoder,
    SequenceEncoderOptions,
};

/// Deterministic xorshift so every run measures the same stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn generated(buffer: BufferMode, units: usize) -> (Vec<u8>, debug4_message::StreamOptions) {
    let options = SequenceEncoderOptions::default().with_buffer(buffer);
    let mut encoder = SequenceEncoder::new(options).expect("valid buffer");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for index in 0..units {
        let roll = rng.next() % 100;
        let sequence = match roll {
            0..=59 => OutgoingSequence::BranchTaken,
            60..=74 => OutgoingSequence::BranchNotTaken,
            75..=89 => OutgoingSequence::Pc {
                address: 0x8000_0000 + ((rng.next() % (1 << 20)) << 1),
            },
            90..=94 => OutgoingSequence::LoadAddress {
                address: 0x7fff_0000 + (rng.next() % 4096) * 8,
            },
            95..=98 => OutgoingSequence::LoadData {
                value: rng.next() >> (rng.next() % 64),
            },
            _ => OutgoingSequence::Timestamp { time: index as u64 },
        };
        encoder.write_unit(0, &[sequence]).expect("encodable");
    }
    let trace = encoder.finish();
    let stream = trace.stream_options(buffer, PcGranularity::Halfword);
    (trace.bytes, stream)
}

fn decode(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("debug4_message");
    for (name, buffer) in [
        ("linear", BufferMode::Linear),
        ("ring_64k", BufferMode::Ring { bytes: 64 * 1024 }),
    ] {
        let (bytes, options) = generated(buffer, 400_000);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name, |bencher| {
            bencher.iter(|| {
                let mut decoder = SequenceDecoder::new(black_box(&bytes), options);
                let mut count = 0u64;
                while let Ok(Some(located)) = decoder.next_sequence() {
                    count += located.packets;
                }
                count
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
