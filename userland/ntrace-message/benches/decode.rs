//! Decoding throughput on a synthetic HTM-style stream: mostly IndirectBranchHist with
//! ResourceFull (HIST and I-CNT overflows) and a periodic ProgTraceSync/Ownership pair.
//!
//! `RVPERF_BENCH_TRACE=FILE[:FILE...]` also measures each recorded trace file (raw N-Trace
//! bytes, default options: no SRC, no timestamps, RV64), per message.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ntrace_message::{
    Body, BranchType, MessageDecoder, MessageEncoder, MessageOptions, Process, ProcessFormat,
    ResourceFull, SyncReason,
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

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn synthetic_stream(options: MessageOptions, target_len: usize) -> (Vec<u8>, u64) {
    let encoder = MessageEncoder::new(options);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(target_len + 64);
    let mut messages = 0u64;
    let mut address = 0x8000_0000u64;
    while out.len() < target_len {
        let roll = rng.below(100);
        let timestamp = options.timestamps.then(|| rng.below(4096));
        let body = if messages % 500 == 0 {
            address = 0x8000_0000 + (rng.below(1 << 20) << 1);
            encoder
                .encode(
                    0,
                    &Body::Ownership {
                        process: Process {
                            format: ProcessFormat::Scontext,
                            privilege: 1,
                            virtualized: false,
                            context: rng.below(4096),
                        },
                    },
                    None,
                    &mut out,
                )
                .expect("valid Ownership");
            messages += 1;
            Body::ProgTraceSync {
                sync: SyncReason::PERIODIC,
                icnt: 0,
                faddr: address,
            }
        } else if roll < 70 {
            let target = 0x8000_0000 + (rng.below(1 << 16) << 1);
            let uaddr = address ^ target;
            address = target;
            let branches = rng.below(12) as u32;
            Body::IndirectBranchHist {
                btype: BranchType::Indirect,
                icnt: rng.below(200),
                uaddr,
                hist: (1u64 << branches) | rng.below(1 << branches),
            }
        } else if roll < 85 {
            Body::ResourceFull(ResourceFull::HistOverflow {
                hist: (1 << 31) | rng.below(1 << 31),
            })
        } else if roll < 92 {
            Body::ResourceFull(ResourceFull::RepeatedHist {
                hist: 0x5,
                repeat: rng.below(300),
            })
        } else if roll < 96 {
            Body::ResourceFull(ResourceFull::IcntOverflow { icnt: 1 << 21 })
        } else {
            Body::IndirectBranchHistSync {
                sync: SyncReason::SEQUENTIAL_INSTRUCTION_COUNTER,
                btype: BranchType::Indirect,
                icnt: 1 << 21,
                faddr: address,
                hist: 0b1_0110,
            }
        };
        encoder
            .encode(0, &body, timestamp, &mut out)
            .expect("valid synthetic message");
        messages += 1;
        if rng.below(50) == 0 {
            encoder.encode_idle(1 + rng.below(4) as usize, &mut out);
        }
    }
    (out, messages)
}

fn decode_all(stream: &[u8], options: MessageOptions) -> u64 {
    let mut decoder = MessageDecoder::new(stream, options);
    let mut checksum = 0u64;
    while let Ok(Some(message)) = decoder.next_message() {
        checksum = checksum.wrapping_add(u64::from(message.length));
        if let Body::IndirectBranchHist { icnt, .. } = message.body {
            checksum = checksum.wrapping_add(icnt);
        }
    }
    checksum
}

fn bench_decode(c: &mut Criterion) {
    for (label, options) in [
        ("plain", MessageOptions::default()),
        (
            "src4_tstamp_ext",
            MessageOptions::default()
                .with_src_bits(4)
                .with_timestamps(true)
                .with_address_msb_extension(true),
        ),
    ] {
        let (stream, messages) = synthetic_stream(options, 4 << 20);
        let mut group = c.benchmark_group(format!("decode/{label}"));
        group.throughput(Throughput::Bytes(stream.len() as u64));
        group.bench_function("bytes", |b| {
            b.iter(|| decode_all(black_box(&stream), options))
        });
        group.throughput(Throughput::Elements(messages));
        group.bench_function("messages", |b| {
            b.iter(|| decode_all(black_box(&stream), options))
        });
        group.finish();
    }
}

/// Whole recorded traces named by `RVPERF_BENCH_TRACE`; nothing when it is unset.
fn bench_trace_files(c: &mut Criterion) {
    let Some(paths) = std::env::var_os("RVPERF_BENCH_TRACE") else {
        return;
    };
    let options = MessageOptions::default();
    for path in std::env::split_paths(&paths) {
        let stream = std::fs::read(&path)
            .unwrap_or_else(|error| panic!("RVPERF_BENCH_TRACE {}: {error}", path.display()));
        let messages = MessageDecoder::new(&stream, options)
            .filter(Result::is_ok)
            .count() as u64;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        let mut group = c.benchmark_group(format!("decode/trace/{name}"));
        group.throughput(Throughput::Elements(messages));
        group.bench_function("messages", |b| {
            b.iter(|| decode_all(black_box(&stream), options))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_decode, bench_trace_files);
criterion_main!(benches);
