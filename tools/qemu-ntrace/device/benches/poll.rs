//! `TraceBlock::poll` when no register changed: what the plugin pays at the start of
//! every executed translation block. Blocks of 1, 2 and 8 harts, configured as for a
//! recording (sink, funnel, encoders active and enabled: every register is watched) and
//! as they start (every component in reset: only control registers are).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ntrace_device::{BlockConfig, SharedMemory, TraceBlock};

fn block_in_reset(harts: usize) -> TraceBlock {
    let mut config = BlockConfig::default();
    config.harts = harts;
    config.size = 1 << 20;
    TraceBlock::new(SharedMemory::owned(config.size), config).unwrap()
}

fn tracing_block(harts: usize) -> TraceBlock {
    let block = block_in_reset(harts);
    let layout = *block.layout();
    let guest_store = |offset: usize, value: u32| {
        block.memory().store(offset, value);
        block.poll();
    };
    let mut components = vec![layout.ram_sink()];
    components.extend(layout.funnel());
    components.extend((0..harts).map(|hart| layout.encoder(hart)));
    for base in components {
        // trActive, then trEnable (and for encoders trTeInstTracing, HTM).
        guest_store(base, 1);
        guest_store(base, 0b111 | 6 << 4);
    }
    assert!(block.encoder_config(harts - 1).traces_instructions());
    block
}

fn poll(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("poll_unchanged");
    for harts in [1, 2, 8] {
        let block = tracing_block(harts);
        group.bench_function(format!("{harts}_harts_tracing"), |bencher| {
            bencher.iter(|| black_box(&block).poll())
        });
        let block = block_in_reset(harts);
        group.bench_function(format!("{harts}_harts_in_reset"), |bencher| {
            bencher.iter(|| black_box(&block).poll())
        });
    }
    group.finish();
}

criterion_group!(benches, poll);
criterion_main!(benches);
