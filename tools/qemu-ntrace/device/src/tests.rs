//! The block as the guest sees it: stores to the shared memory, a poll, loads. Expected
//! register values are written out as numbers from the specification's tables, not
//! computed with the code under test.

use ntrace_flow::BranchMode;
use ntrace_message::{MessageDecoder, MessageEncoder, MessageOptions};
use proptest::prelude::*;
use trace_control::DiscoveryTable;

use crate::{
    BlockConfig, DropReason, Emitted, EncoderConfig, LayoutError, PrivilegeFilter, PrivilegeSet,
    SharedMemory, SyncPeriod, TraceBlock,
};

const SIZE: usize = 0x1_0000;

// trTeControl: reset (Empty, InstMode 6, Format 1), and with trTeActive.
const ENCODER_CONTROL_RESET: u32 = 0x0100_0068;
const ENCODER_CONTROL_ACTIVE: u32 = 0x0100_0069;
// trTeImpl: version 1.0, type 1, N-Trace 1.0, return stack depth 32 (bits 30:24), the
// stand-in context register (bit 31).
const ENCODER_IMPLEMENTATION: u32 = 0xa001_0101;
// trTeInstFeatures: trTeInstImplicitReturnMode 3.
const FEATURES_RESET: u32 = 0xc0;
// trTsControl: trTsMode 2, trTsWidth 63; and with trTsActive.
const TIMESTAMP_CONTROL_RESET: u32 = 0x3f00_0020;
const TIMESTAMP_CONTROL_ACTIVE: u32 = 0x3f00_0021;
const FUNNEL_CONTROL_RESET: u32 = 0x8;
const FUNNEL_IMPLEMENTATION: u32 = 0x801;
// trRamControl: Empty, Mode 1 (SMEM).
const SINK_CONTROL_RESET: u32 = 0x18;
const SINK_CONTROL_ACTIVE: u32 = 0x19;
// trRamImpl: version 1.0, type 9, HasSMEM.
const SINK_IMPLEMENTATION: u32 = 0x0100_2901;
const WRAP_COUNT: usize = 0xe00;
// The encoder's stand-in context register.
const CONTEXT: usize = 0xe00;

// Encoder register offsets.
const CONTROL: usize = 0x000;
const IMPLEMENTATION: usize = 0x004;
const FEATURES: usize = 0x008;
const FILTERS: usize = 0x00c;
const TIMESTAMP_CONTROL: usize = 0x040;
const COUNTER_LOW: usize = 0x048;
const COUNTER_HIGH: usize = 0x04c;
const FILTER_CONTROL: [usize; 2] = [0x400, 0x420];
const FILTER_MATCH: [usize; 2] = [0x404, 0x424];
// Funnel.
const DISABLE_INPUT: usize = 0x008;
// Sink.
const START_LOW: usize = 0x010;
const START_HIGH: usize = 0x014;
const LIMIT_LOW: usize = 0x018;
const LIMIT_HIGH: usize = 0x01c;
const WP_LOW: usize = 0x020;
const WP_HIGH: usize = 0x024;
const RP_LOW: usize = 0x028;
const RP_HIGH: usize = 0x02c;
const DATA: usize = 0x040;

// Control bits.
const ACTIVE: u32 = 1 << 0;
const ENABLE: u32 = 1 << 1;
const TRACING: u32 = 1 << 2;
const EMPTY: u32 = 1 << 3;
const OVERFLOW: u32 = 1 << 12;
const STOP_ON_WRAP: u32 = 1 << 8;

fn block_with(harts: usize, return_stack_depth: u8) -> TraceBlock {
    let config = BlockConfig {
        harts,
        size: SIZE,
        return_stack_depth,
    };
    TraceBlock::new(SharedMemory::owned(SIZE), config).unwrap()
}

fn block(harts: usize) -> TraceBlock {
    block_with(harts, 32)
}

/// A guest store; takes effect at the next poll.
fn store(block: &TraceBlock, offset: usize, value: u32) {
    block.memory().store(offset, value);
}

fn load(block: &TraceBlock, offset: usize) -> u32 {
    block.memory().load(offset)
}

/// A guest store, then what the plugin does over the next millisecond: the polls of
/// the blocks that follow and a sweep (which applies stores to a component's other
/// registers while it is enabled: see [`a_store_while_enabled_waits_for_a_sweep`]).
fn write(block: &TraceBlock, offset: usize, value: u32) {
    store(block, offset, value);
    block.poll();
    block.sweep();
}

fn encoder(block: &TraceBlock, hart: usize) -> usize {
    block.layout().encoder(hart)
}

fn sink(block: &TraceBlock) -> usize {
    block.layout().ram_sink()
}

fn funnel(block: &TraceBlock) -> usize {
    block.layout().funnel().unwrap()
}

fn sink_start(block: &TraceBlock) -> u32 {
    block.layout().sink_memory().start as u32
}

fn activate_encoder(block: &TraceBlock, hart: usize) {
    write(block, encoder(block, hart) + CONTROL, ACTIVE);
    assert_eq!(
        load(block, encoder(block, hart) + CONTROL),
        ENCODER_CONTROL_ACTIVE
    );
}

/// Sink, funnel, encoders, in the specification's order; encoders in HTM, tracing.
fn start_trace(block: &TraceBlock, sink_control: u32) {
    write(block, sink(block) + CONTROL, ACTIVE);
    write(block, sink(block) + CONTROL, ACTIVE | ENABLE | sink_control);
    if block.layout().has_funnel() {
        write(block, funnel(block) + CONTROL, ACTIVE);
        write(block, funnel(block) + CONTROL, ACTIVE | ENABLE);
    }
    for hart in 0..block.layout().harts() {
        activate_encoder(block, hart);
        write(
            block,
            encoder(block, hart) + CONTROL,
            ACTIVE | ENABLE | TRACING | 6 << 4,
        );
    }
}

/// A RAM buffer of `words` words at the start of the sink memory.
fn set_buffer(block: &TraceBlock, words: u32) {
    let start = sink_start(block);
    write(block, sink(block) + START_LOW, start);
    write(block, sink(block) + LIMIT_LOW, start + 4 * (words - 1));
    write(block, sink(block) + WP_LOW, start);
}

fn sink_bytes(block: &TraceBlock, length: usize) -> Vec<u8> {
    let mut bytes = vec![0; length];
    block
        .memory()
        .read_bytes(block.layout().sink_memory().start, &mut bytes);
    bytes
}

fn config(block: &TraceBlock, hart: usize) -> EncoderConfig {
    block.encoder_config(hart)
}

/// The reset value of every register the block implements, in reset.
fn assert_all_in_reset(block: &TraceBlock) {
    for hart in 0..block.layout().harts() {
        let base = encoder(block, hart);
        assert_eq!(load(block, base + CONTROL), ENCODER_CONTROL_RESET);
        assert_eq!(load(block, base + IMPLEMENTATION), ENCODER_IMPLEMENTATION);
        assert_eq!(load(block, base + FEATURES), FEATURES_RESET);
        assert_eq!(load(block, base + FILTERS), 0);
        assert_eq!(
            load(block, base + TIMESTAMP_CONTROL),
            TIMESTAMP_CONTROL_RESET
        );
        assert_eq!(load(block, base + COUNTER_LOW), 0);
        assert_eq!(load(block, base + COUNTER_HIGH), 0);
        for filter in 0..2 {
            assert_eq!(load(block, base + FILTER_CONTROL[filter]), 0);
            assert_eq!(load(block, base + FILTER_MATCH[filter]), 0);
        }
    }
    if block.layout().has_funnel() {
        assert_eq!(load(block, funnel(block) + CONTROL), FUNNEL_CONTROL_RESET);
        assert_eq!(
            load(block, funnel(block) + IMPLEMENTATION),
            FUNNEL_IMPLEMENTATION
        );
        assert_eq!(load(block, funnel(block) + DISABLE_INPUT), 0);
    }
    let base = sink(block);
    assert_eq!(load(block, base + CONTROL), SINK_CONTROL_RESET);
    assert_eq!(load(block, base + IMPLEMENTATION), SINK_IMPLEMENTATION);
    assert_eq!(load(block, base + START_LOW), sink_start(block));
    assert_eq!(load(block, base + LIMIT_LOW), SIZE as u32 - 4);
    assert_eq!(load(block, base + WP_LOW), sink_start(block));
    for offset in [START_HIGH, LIMIT_HIGH, WP_HIGH, RP_LOW, RP_HIGH, DATA] {
        assert_eq!(load(block, base + offset), 0, "sink register {offset:#x}");
    }
}

#[test]
fn reset_values_and_discovery_table_after_new() {
    for harts in [1, 2, 8] {
        let block = block(harts);
        assert_all_in_reset(&block);
        let mut page = vec![0u8; 0x1000];
        block.memory().read_bytes(0, &mut page);
        let table = DiscoveryTable::parse(&page).unwrap();
        assert_eq!(table, block.layout().discovery_table(32));
        assert_eq!(table.components().len(), harts + usize::from(harts > 1) + 1);
        assert_eq!(
            table.sink_offset as usize,
            block.layout().sink_memory().start
        );
        // Everything else of the register pages reads 0.
        for offset in (0x1000..block.layout().sink_memory().start).step_by(4) {
            let page_offset = offset % 0x1000;
            let register = [
                CONTROL,
                IMPLEMENTATION,
                FEATURES,
                TIMESTAMP_CONTROL,
                START_LOW,
                LIMIT_LOW,
                WP_LOW,
            ];
            if !register.contains(&page_offset) {
                assert_eq!(load(&block, offset), 0, "{offset:#x}");
            }
        }
        let config = config(&block, 0);
        assert!(!config.active && !config.enabled && config.mode == Some(BranchMode::Htm));
        assert_eq!(block.encoder_generation(0), 1);
    }
}

#[test]
fn memory_smaller_than_the_block_is_refused() {
    let config = BlockConfig {
        size: SIZE,
        ..BlockConfig::default()
    };
    let error = TraceBlock::new(SharedMemory::owned(SIZE / 2), config).unwrap_err();
    assert_eq!(
        error,
        LayoutError::MemoryTooSmall {
            size: SIZE,
            memory: SIZE / 2
        }
    );
}

/// Stores of every bit to every implemented register of every component, `control` to
/// the control registers (last).
fn store_everything(block: &TraceBlock, control: u32) {
    for hart in 0..block.layout().harts() {
        let base = encoder(block, hart);
        for offset in [
            FEATURES,
            FILTERS,
            TIMESTAMP_CONTROL,
            COUNTER_LOW,
            IMPLEMENTATION,
        ] {
            write(block, base + offset, u32::MAX);
        }
        for filter in 0..2 {
            write(block, base + FILTER_CONTROL[filter], u32::MAX);
            write(block, base + FILTER_MATCH[filter], u32::MAX);
        }
        write(block, base + CONTROL, control);
    }
    if block.layout().has_funnel() {
        write(block, funnel(block) + DISABLE_INPUT, u32::MAX);
        write(block, funnel(block) + CONTROL, control);
    }
    for offset in [START_LOW, LIMIT_LOW, WP_LOW, RP_LOW] {
        write(block, sink(block) + offset, 0x8000);
    }
    write(block, sink(block) + CONTROL, control);
}

#[test]
fn deactivation_resets_every_register_and_activation_brings_defaults() {
    let block = block(2);
    // While in reset, stores are ignored.
    store_everything(&block, !ACTIVE);
    block.sweep();
    assert_all_in_reset(&block);

    // Active, configured, then 1 -> 0 -> 1.
    start_trace(&block, 0);
    store_everything(&block, u32::MAX);
    store_everything(&block, u32::MAX);
    assert_ne!(load(&block, encoder(&block, 1) + FEATURES), FEATURES_RESET);
    for base in [
        encoder(&block, 0),
        encoder(&block, 1),
        funnel(&block),
        sink(&block),
    ] {
        write(&block, base + CONTROL, 0);
    }
    block.sweep();
    assert_all_in_reset(&block);
    // The store releasing from reset sets nothing else, even with every bit set.
    write(&block, encoder(&block, 1) + CONTROL, u32::MAX);
    assert_eq!(
        load(&block, encoder(&block, 1) + CONTROL),
        ENCODER_CONTROL_ACTIVE
    );
    assert_eq!(
        load(&block, encoder(&block, 1) + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_RESET
    );
    write(&block, encoder(&block, 1) + TIMESTAMP_CONTROL, u32::MAX);
    assert_eq!(
        load(&block, encoder(&block, 1) + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_ACTIVE
    );
    write(&block, funnel(&block) + CONTROL, u32::MAX);
    assert_eq!(
        load(&block, funnel(&block) + CONTROL),
        FUNNEL_CONTROL_RESET | ACTIVE
    );
    write(&block, sink(&block) + CONTROL, u32::MAX);
    assert_eq!(load(&block, sink(&block) + CONTROL), SINK_CONTROL_ACTIVE);
    assert_eq!(load(&block, sink(&block) + WP_LOW), sink_start(&block));
    let config = config(&block, 1);
    assert!(config.active && !config.enabled && !config.instruction_tracing);
}

/// While a component is enabled, the per-block poll watches only its control register
/// (it is configured before it is enabled; the specification leaves changes after that
/// undefined), so a store to another of its registers takes effect at the next sweep, or
/// at once with the next store to a control register; while it is not, at the next poll.
#[test]
fn a_store_while_enabled_waits_for_a_sweep() {
    let block = block(1);
    let base = encoder(&block, 0);
    write(&block, base + CONTROL, ACTIVE);
    store(&block, base + FEATURES, 0xffff_ffff);
    block.poll();
    let configured = load(&block, base + FEATURES);
    assert_ne!(
        configured, 0xffff_ffff,
        "not enabled: the poll legalises at once"
    );
    write(&block, base + CONTROL, ACTIVE | ENABLE | (6 << 4));
    store(&block, base + FEATURES, 0);
    block.poll();
    assert_eq!(
        load(&block, base + FEATURES),
        0,
        "enabled: still the guest's store"
    );
    assert_eq!(
        config(&block, 0).implicit_return,
        configured & (1 << 3) != 0
    );
    block.sweep();
    assert_eq!(
        load(&block, base + FEATURES),
        3 << 6,
        "the sweep applies it"
    );
    assert!(!config(&block, 0).implicit_return);
    store(&block, base + FEATURES, 1 << 3);
    store(&block, base + CONTROL, ACTIVE | ENABLE | (3 << 4));
    block.poll();
    assert!(
        config(&block, 0).implicit_return,
        "a control store applies the others with it"
    );
}

#[test]
fn read_only_fields_ignore_stores() {
    let block = block(2);
    start_trace(&block, 0);
    let base = encoder(&block, 0);
    // trTeImpl, trFunnelImpl, trRamImpl.
    for (offset, value) in [
        (base + IMPLEMENTATION, ENCODER_IMPLEMENTATION),
        (funnel(&block) + IMPLEMENTATION, FUNNEL_IMPLEMENTATION),
        (sink(&block) + IMPLEMENTATION, SINK_IMPLEMENTATION),
    ] {
        write(&block, offset, !value);
        assert_eq!(load(&block, offset), value);
        write(&block, offset, 0);
        assert_eq!(load(&block, offset), value);
    }
    // tr??Empty: the guest cannot clear it, and the encoder's follows the plugin.
    write(&block, base + CONTROL, ACTIVE | ENABLE);
    assert_eq!(load(&block, base + CONTROL) & EMPTY, EMPTY);
    block.set_encoder_empty(0, false);
    assert_eq!(load(&block, base + CONTROL) & EMPTY, 0);
    write(&block, base + CONTROL, ACTIVE | ENABLE | EMPTY);
    assert_eq!(load(&block, base + CONTROL) & EMPTY, 0);
    write(&block, funnel(&block) + CONTROL, ACTIVE | ENABLE);
    assert_eq!(
        load(&block, funnel(&block) + CONTROL),
        ACTIVE | ENABLE | EMPTY
    );
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    assert_eq!(
        load(&block, sink(&block) + CONTROL),
        SINK_CONTROL_ACTIVE | ENABLE
    );
    // trTeFormat (1), trTsWidth (63), trTsMode (2), trRamMode (1).
    write(&block, base + CONTROL, ACTIVE | 7 << 24);
    assert_eq!(load(&block, base + CONTROL) >> 24, 1);
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE);
    write(
        &block,
        base + TIMESTAMP_CONTROL,
        ACTIVE | 5 << 4 | 0x3f << 24,
    );
    assert_eq!(
        load(&block, base + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_ACTIVE
    );
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE);
    assert_eq!(
        load(&block, base + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_ACTIVE
    );
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    assert_eq!(load(&block, sink(&block) + CONTROL) & 0x10, 0x10);
    // trTsCounter: restored by the next change of the counter or by a sweep.
    store(&block, base + COUNTER_LOW, 0x1234);
    block.sweep();
    assert_eq!(load(&block, base + COUNTER_LOW), 0);
    // trTeInstImplicitReturnMode is 3.
    write(&block, base + FEATURES, 0);
    assert_eq!(load(&block, base + FEATURES), FEATURES_RESET);
}

#[test]
fn instruction_mode_is_warl() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    // Written mode -> read back: 0 stays 0, 3 is BTM, every other non-zero mode is 6.
    for (mode, legal) in [
        (1, 6),
        (0, 0),
        (2, 6),
        (3, 3),
        (4, 6),
        (5, 6),
        (6, 6),
        (7, 6),
        (0, 0),
    ] {
        write(&block, base + CONTROL, ACTIVE | mode << 4);
        assert_eq!(
            load(&block, base + CONTROL),
            0x0100_0009 | legal << 4,
            "mode {mode}"
        );
        let expected = match legal {
            3 => Some(BranchMode::Btm),
            6 => Some(BranchMode::Htm),
            _ => None,
        };
        assert_eq!(config(&block, 0).mode, expected);
    }
}

#[test]
fn sync_mode_and_max_are_warl() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    for (mode, legal) in [(1, 1), (2, 3), (3, 3), (0, 0)] {
        write(
            &block,
            base + CONTROL,
            ACTIVE | 6 << 4 | mode << 16 | 2 << 20,
        );
        assert_eq!(
            (load(&block, base + CONTROL) >> 16) & 3,
            legal,
            "mode {mode}"
        );
    }
    for max in 0..16 {
        write(
            &block,
            base + CONTROL,
            ACTIVE | 6 << 4 | 1 << 16 | max << 20,
        );
        assert_eq!((load(&block, base + CONTROL) >> 20) & 0xf, max);
        assert_eq!(config(&block, 0).sync, SyncPeriod::Messages(1 << (max + 4)));
    }
    write(&block, base + CONTROL, ACTIVE | 6 << 4 | 2 << 16 | 15 << 20);
    assert_eq!(config(&block, 0).sync, SyncPeriod::Halfwords(1 << 19));
    write(&block, base + CONTROL, ACTIVE | 6 << 4 | 15 << 20);
    assert_eq!(config(&block, 0).sync, SyncPeriod::Off);
}

#[test]
fn control_fields_not_implemented_and_reserved_bits_read_0() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    // trTeInstTrigEnable, trTeInstStallEna, reserved 8:7, 10, 14, 19:18, 31:27.
    write(
        &block,
        base + CONTROL,
        ACTIVE | 1 << 11 | 1 << 13 | 0xf80c_4580,
    );
    assert_eq!(
        load(&block, base + CONTROL),
        (ENCODER_CONTROL_RESET | ACTIVE) & !(6 << 4)
    );
    // trTeContext, trTeInhibitSrc are implemented.
    write(&block, base + CONTROL, ACTIVE | 6 << 4 | 1 << 9 | 1 << 15);
    assert_eq!(
        load(&block, base + CONTROL),
        ENCODER_CONTROL_ACTIVE | 1 << 9 | 1 << 15
    );
    let config = config(&block, 0);
    assert!(config.context && config.inhibit_source);
}

#[test]
fn features_are_warl() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0) + FEATURES;
    // NoAddrDiff, NoTrapAddr, BranchPrediction, JumpTargetCache and reserved 15:11 read 0;
    // the implicit-return mode is 3 whatever is stored.
    write(&block, base, 0x0000_ffff);
    assert_eq!(load(&block, base), 0x0000_07cc);
    for bits in 0..16 {
        write(&block, base, bits << 28 | 0xabc << 16);
        let legal_bits = bits.min(12);
        let legal_id = 0xabc & ((1 << legal_bits) - 1);
        assert_eq!(
            load(&block, base),
            legal_bits << 28 | legal_id << 16 | 0xc0,
            "{bits} source bits"
        );
        assert_eq!(
            (config(&block, 0).source_bits, config(&block, 0).source_id),
            (legal_bits as u8, legal_id as u16)
        );
    }
    // Without a return stack, implicit returns cannot be enabled and the mode is 0.
    let block = block_with(1, 0);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0) + FEATURES;
    write(&block, base, 0x0000_07ff);
    assert_eq!(load(&block, base), 0x0000_0704);
    assert_eq!(
        load(&block, encoder(&block, 0) + IMPLEMENTATION),
        0x8001_0101
    );
}

#[test]
fn filters_are_warl() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    write(&block, base + FILTERS, u32::MAX);
    assert_eq!(load(&block, base + FILTERS), 0b11);
    for filter in 0..2 {
        write(&block, base + FILTER_CONTROL[filter], u32::MAX);
        assert_eq!(load(&block, base + FILTER_CONTROL[filter]), 0b11);
        // Privilege choice: U (0), S (1), M (3); trTeFilterMatchValueInterrupt reads 0.
        write(&block, base + FILTER_MATCH[filter], u32::MAX);
        assert_eq!(load(&block, base + FILTER_MATCH[filter]), 0b1011);
    }
    // Filters 2 and up are not implemented: their registers are reserved words.
    store(&block, base + 0x440, u32::MAX);
    block.sweep();
    assert_eq!(load(&block, base + 0x440), 0);
}

#[test]
fn privilege_filters_select_levels() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    let privileges = |block: &TraceBlock| config(block, 0).privileges;
    assert_eq!(privileges(&block), PrivilegeFilter::Everything);
    // Filter 0: U and S. Enabled but not selected: everything.
    write(&block, base + FILTER_CONTROL[0], 0b11);
    write(&block, base + FILTER_MATCH[0], 0b11);
    assert_eq!(privileges(&block), PrivilegeFilter::Everything);
    write(&block, base + FILTERS, 0b01);
    let only = privileges(&block);
    assert_eq!(only, PrivilegeFilter::Only(PrivilegeSet::from_bits(0b11)));
    assert!(only.qualifies(0) && only.qualifies(1) && !only.qualifies(3));
    // Filter 1 selected but disabled: ignored. Enabled for M: the filters OR together.
    write(&block, base + FILTER_MATCH[1], 0b1000);
    write(&block, base + FILTERS, 0b11);
    assert_eq!(privileges(&block), only);
    write(&block, base + FILTER_CONTROL[1], 0b11);
    assert_eq!(
        privileges(&block),
        PrivilegeFilter::Only(PrivilegeSet::from_bits(0b1011))
    );
    // A filter that does not match privileges matches every instruction.
    write(&block, base + FILTER_CONTROL[1], 0b01);
    assert_eq!(privileges(&block), PrivilegeFilter::Everything);
    // A filter matching no privilege lets nothing through.
    write(&block, base + FILTERS, 0b01);
    write(&block, base + FILTER_MATCH[0], 0);
    let nothing = privileges(&block);
    assert!((0..8).all(|level| !nothing.qualifies(level)));
}

#[test]
fn timestamp_control_is_warl_and_the_counter_follows_time() {
    let block = block(2);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    assert_eq!(block.set_timestamp(0, 1000), 0, "unit in reset");
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE);
    // Count, Enable, prescale 3; trTsRunInDebug, vendor bits 23:16 and reserved bits read 0.
    write(
        &block,
        base + TIMESTAMP_CONTROL,
        ACTIVE | 1 << 1 | 1 << 3 | 3 << 8 | 1 << 15 | 0xff << 16 | 0xc000_7c80,
    );
    assert_eq!(
        load(&block, base + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_ACTIVE | 1 << 1 | 3 << 8 | 1 << 15
    );
    let timestamps = config(&block, 0).timestamps;
    assert!(
        timestamps.active && timestamps.counting && timestamps.enabled && timestamps.prescale == 3
    );
    // Counting from reset: the counter is time (here / 64), related to Linux's clock.
    assert_eq!(block.set_timestamp(0, 64_000), 1000);
    assert_eq!(load(&block, base + COUNTER_LOW), 1000);
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE | 1 << 1 | 1 << 15);
    assert_eq!(block.set_timestamp(0, 1 << 36 | 5), 1 << 36 | 5);
    assert_eq!(
        (
            load(&block, base + COUNTER_LOW),
            load(&block, base + COUNTER_HIGH)
        ),
        (5, 16)
    );
    // trTsReset (reads 0) at "now", the latest time any hart reported.
    block.set_timestamp(1, (1 << 36) + 100);
    write(
        &block,
        base + TIMESTAMP_CONTROL,
        ACTIVE | 1 << 1 | 1 << 2 | 1 << 15,
    );
    assert_eq!(
        load(&block, base + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_ACTIVE | 1 << 1 | 1 << 15
    );
    assert_eq!(
        (
            load(&block, base + COUNTER_LOW),
            load(&block, base + COUNTER_HIGH)
        ),
        (0, 0)
    );
    assert_eq!(
        block.set_timestamp(0, (1 << 36) + 50),
        0,
        "hart 0's time lags hart 1's"
    );
    assert_eq!(block.set_timestamp(0, (1 << 36) + 130), 30);
    assert_eq!(block.timestamp(0), 30);
    // Stopped: frozen.
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE | 1 << 15);
    assert_eq!(block.set_timestamp(0, (1 << 36) + 1000), 30);
    // Generation: the counter's value is not configuration.
    let generation = block.encoder_generation(0);
    block.set_timestamp(0, 1 << 40);
    assert_eq!(block.encoder_generation(0), generation);
    // The encoder's reset resets its timestamp unit.
    write(&block, base + CONTROL, 0);
    assert_eq!(
        load(&block, base + TIMESTAMP_CONTROL),
        TIMESTAMP_CONTROL_RESET
    );
    assert_eq!(block.set_timestamp(0, 1 << 41), 0);
    assert_eq!(block.timestamp(1), 0, "hart 1's unit was never active");
}

#[test]
fn sink_addresses_are_clamped_into_the_sink_memory_and_aligned() {
    let block = block(1);
    write(&block, sink(&block) + CONTROL, ACTIVE);
    let start = sink_start(&block);
    let last = SIZE as u32 - 4;
    for (low, high) in [(START_LOW, START_HIGH), (LIMIT_LOW, LIMIT_HIGH)] {
        let low = sink(&block) + low;
        let high = sink(&block) + high;
        // The specification's probe: 0 gives the lowest value, all ones the highest.
        write(&block, low, 0);
        assert_eq!(load(&block, low), start);
        write(&block, low, u32::MAX);
        assert_eq!(load(&block, low), last);
        write(&block, low, start + 0x1003);
        assert_eq!(load(&block, low), start + 0x1000);
        // High: the block is below 4 GiB, so High reads 0 (and the address is clamped).
        write(&block, high, u32::MAX);
        assert_eq!((load(&block, low), load(&block, high)), (last, 0));
        write(&block, low, start + 0x100);
        write(&block, high, 1);
        assert_eq!((load(&block, low), load(&block, high)), (last, 0));
    }
    // WP: bit 0 is trRamWrap (WARL), bit 1 reads 0.
    let wp = sink(&block) + WP_LOW;
    write(&block, wp, start + 0x1003);
    assert_eq!(load(&block, wp), start + 0x1001);
    write(&block, wp, start + 0x1002);
    assert_eq!(load(&block, wp), start + 0x1000);
    write(&block, wp, 4);
    assert_eq!(load(&block, wp), start);
    write(&block, sink(&block) + WP_HIGH, 7);
    assert_eq!(
        (load(&block, wp), load(&block, sink(&block) + WP_HIGH)),
        (last, 0)
    );
    // RP is not implemented: the probe (RP = limit) reads back 0.
    write(&block, sink(&block) + RP_LOW, last);
    write(&block, sink(&block) + RP_HIGH, 1);
    assert_eq!(
        (
            load(&block, sink(&block) + RP_LOW),
            load(&block, sink(&block) + RP_HIGH)
        ),
        (0, 0)
    );
    // trRamMode is SMEM only; trRamMemFormat and trRamAsyncFreq read 0; StopOnWrap is RW.
    write(
        &block,
        sink(&block) + CONTROL,
        ACTIVE | 0x7600 | STOP_ON_WRAP | 0xffff_8084,
    );
    assert_eq!(
        load(&block, sink(&block) + CONTROL),
        SINK_CONTROL_ACTIVE | STOP_ON_WRAP
    );
    write(&block, sink(&block) + CONTROL, ACTIVE);
    assert_eq!(load(&block, sink(&block) + CONTROL), SINK_CONTROL_ACTIVE);
}

#[test]
fn funnel_disable_input_is_warl() {
    let block = block(2);
    write(&block, funnel(&block) + CONTROL, ACTIVE);
    write(&block, funnel(&block) + DISABLE_INPUT, 0xffff_ffff);
    assert_eq!(load(&block, funnel(&block) + DISABLE_INPUT), 0b11);
    write(&block, funnel(&block) + CONTROL, ACTIVE | ENABLE | 0xfff0);
    assert_eq!(
        load(&block, funnel(&block) + CONTROL),
        ACTIVE | ENABLE | EMPTY
    );
}

#[test]
fn overflow_is_write_1_to_clear() {
    let block = block(1);
    start_trace(&block, 0);
    let base = encoder(&block, 0);
    let running = ACTIVE | ENABLE | TRACING | 6 << 4;
    block.report_encoder_overflow(0);
    assert_eq!(
        load(&block, base + CONTROL),
        running | EMPTY | OVERFLOW | 1 << 24
    );
    // A store of 0 leaves it (the word changes: tracing off).
    write(&block, base + CONTROL, running & !TRACING);
    assert_eq!(load(&block, base + CONTROL) & OVERFLOW, OVERFLOW);
    // A store of 1 clears it.
    write(&block, base + CONTROL, running | OVERFLOW);
    assert_eq!(load(&block, base + CONTROL), running | EMPTY | 1 << 24);
    // Set again by a dropped message, cleared by the store that enables the encoder.
    write(&block, sink(&block) + CONTROL, ACTIVE);
    assert_eq!(
        block.emit(0, &[0xff]),
        Emitted::Dropped(DropReason::SinkDisabled)
    );
    assert_eq!(load(&block, base + CONTROL) & OVERFLOW, OVERFLOW);
    write(&block, base + CONTROL, (running & !ENABLE) | OVERFLOW);
    assert_eq!(load(&block, base + CONTROL) & OVERFLOW, 0);
    block.report_encoder_overflow(0);
    assert_eq!(load(&block, base + CONTROL) & OVERFLOW, OVERFLOW);
    write(&block, base + CONTROL, running);
    assert_eq!(
        load(&block, base + CONTROL) & OVERFLOW,
        0,
        "trTeEnable 0 -> 1 clears it"
    );
    // An encoder in reset reports nothing.
    write(&block, base + CONTROL, 0);
    block.report_encoder_overflow(0);
    assert_eq!(load(&block, base + CONTROL), ENCODER_CONTROL_RESET);
}

#[test]
fn generation_changes_exactly_when_the_configuration_does() {
    let block = block(2);
    let base = encoder(&block, 0);
    let mut generation = block.encoder_generation(0);
    let mut expect = |block: &TraceBlock, changed: bool, what: &str| {
        let now = block.encoder_generation(0);
        assert_eq!(now != generation, changed, "{what}");
        generation = now;
    };
    block.poll();
    expect(&block, false, "a poll without stores");
    write(&block, base + FEATURES, 0x700);
    expect(&block, false, "a store in reset");
    write(&block, base + CONTROL, ACTIVE);
    expect(&block, true, "activation");
    write(&block, base + IMPLEMENTATION, 0);
    expect(&block, false, "a store to trTeImpl");
    write(&block, base + CONTROL, ACTIVE | 6 << 4 | 1 << 7);
    expect(&block, false, "a reserved bit");
    write(&block, base + CONTROL, ACTIVE | 3 << 4);
    expect(&block, true, "BTM");
    write(&block, base + CONTROL, ACTIVE | 4 << 4);
    expect(&block, true, "4 reads back 6");
    write(&block, base + CONTROL, ACTIVE | 5 << 4);
    expect(&block, false, "5 reads back 6 too");
    block.set_encoder_empty(0, false);
    block.report_encoder_overflow(0);
    expect(&block, false, "status bits");
    write(&block, base + FEATURES, 4 << 28 | 0x13 << 16);
    expect(&block, true, "source bits");
    write(&block, base + FEATURES, 4 << 28 | 0x23 << 16);
    expect(&block, false, "source ID bits above trTeSrcBits");
    write(&block, base + FILTER_MATCH[0], 0b1);
    expect(&block, false, "a filter that is not selected");
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE);
    expect(&block, true, "timestamp unit");
    block.set_timestamp(0, 12345);
    expect(&block, false, "timestamp value");
    write(&block, encoder(&block, 1) + CONTROL, ACTIVE);
    expect(&block, false, "another hart's encoder");
    write(&block, base + CONTROL, 0);
    expect(&block, true, "reset");
}

#[test]
fn a_guest_store_racing_the_write_back_is_kept() {
    let block = block(1);
    activate_encoder(&block, 0);
    let control = encoder(&block, 0) + CONTROL;
    // The guest stores an illegal mode; before the poll writes back its legal value, the
    // guest stores again: that second store must survive and be applied next.
    store(&block, control, ACTIVE | 5 << 4);
    let mut raced = false;
    assert!(block.poll_racing(|memory| {
        memory.store(control, ACTIVE | ENABLE | 3 << 4);
        raced = true;
    }));
    assert!(raced);
    assert_eq!(
        load(&block, control),
        ACTIVE | ENABLE | 3 << 4,
        "the later store was overwritten"
    );
    assert_eq!(
        config(&block, 0).mode,
        Some(BranchMode::Htm),
        "the first store took effect"
    );
    block.poll();
    assert_eq!(
        load(&block, control),
        0x0100_0008 | ACTIVE | ENABLE | 3 << 4
    );
    let config = config(&block, 0);
    assert!(config.enabled && config.mode == Some(BranchMode::Btm));
    // Without a race the legal value is written back.
    store(&block, control, ACTIVE | 5 << 4);
    assert!(block.poll_racing(|_| {}));
    assert_eq!(load(&block, control), ENCODER_CONTROL_ACTIVE);
}

#[test]
fn the_sink_wraps_at_the_limit() {
    let block = block(1);
    start_trace(&block, 0);
    set_buffer(&block, 4);
    let start = sink_start(&block);
    let wp = sink(&block) + WP_LOW;
    assert_eq!(
        block.emit(0, &[1, 2, 3, 4, 5, 6]),
        Emitted::Stored { wrapped: false }
    );
    assert_eq!(load(&block, wp), start + 4);
    assert_eq!(
        load(&block, sink(&block) + CONTROL) & EMPTY,
        0,
        "two bytes buffered"
    );
    assert_eq!(
        block.emit(0, &[7, 8, 9, 10, 11, 12, 13, 14]),
        Emitted::Stored { wrapped: false }
    );
    assert_eq!(load(&block, wp), start + 12);
    assert_eq!(
        block.emit(0, &[15, 16, 17, 18, 19, 20]),
        Emitted::Stored { wrapped: true }
    );
    // The word at the limit went to start + 12, then the write pointer went back to start.
    assert_eq!(load(&block, wp), (start + 4) | 1, "trRamWrap");
    assert_eq!(load(&block, sink(&block) + CONTROL) & EMPTY, EMPTY);
    assert_eq!(
        sink_bytes(&block, 20),
        [17, 18, 19, 20, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0]
    );
    // The wrap bit stays until trRamWPLow is written.
    assert_eq!(
        block.emit(0, &[21, 22, 23, 24]),
        Emitted::Stored { wrapped: false }
    );
    assert_eq!(load(&block, wp), (start + 8) | 1);
    assert_eq!(load(&block, encoder(&block, 0) + CONTROL) & OVERFLOW, 0);
}

#[test]
fn the_wrap_count_counts_every_lap_and_ignores_stores() {
    let block = block(1);
    start_trace(&block, 0);
    set_buffer(&block, 4);
    let count = sink(&block) + WRAP_COUNT;
    assert_eq!(load(&block, count), 0);
    // A 16-byte buffer: 100 bytes are six laps and 4 bytes.
    let data: Vec<u8> = (0..100).collect();
    assert_eq!(block.emit(0, &data), Emitted::Stored { wrapped: true });
    assert_eq!(load(&block, count), 6);
    // Read-only: a store is undone; a new trRamWP does not change it.
    write(&block, count, 77);
    write(&block, sink(&block) + WP_LOW, sink_start(&block));
    assert_eq!(load(&block, count), 6);
    // Reset clears it.
    write(&block, sink(&block) + CONTROL, 0);
    assert_eq!(load(&block, count), 0);
}

#[test]
fn the_sink_wraps_at_the_end_of_its_memory() {
    let block = block(1);
    start_trace(&block, 0);
    let last = SIZE as u32 - 4;
    // A limit below the write pointer: the pointer runs to the end of the memory.
    write(&block, sink(&block) + LIMIT_LOW, sink_start(&block) + 0x100);
    write(&block, sink(&block) + WP_LOW, last);
    assert_eq!(
        block.emit(0, &[1, 2, 3, 4]),
        Emitted::Stored { wrapped: true }
    );
    assert_eq!(load(&block, sink(&block) + WP_LOW), sink_start(&block) | 1);
    assert_eq!(load(&block, last as usize), 0x0403_0201);
}

#[test]
fn stop_on_wrap_stops_exactly_when_the_buffer_is_full() {
    let block = block(1);
    start_trace(&block, STOP_ON_WRAP);
    set_buffer(&block, 4);
    let start = sink_start(&block);
    let data: Vec<u8> = (1..=30).collect();
    assert_eq!(
        block.emit(0, &data[..10]),
        Emitted::Stored { wrapped: false }
    );
    assert_eq!(block.emit(0, &data[10..20]), Emitted::Stopped { stored: 6 });
    assert_eq!(
        sink_bytes(&block, 20),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0]
    );
    // trRamEnable went to 0; the write pointer wrapped to the start; nothing is buffered.
    assert_eq!(
        load(&block, sink(&block) + CONTROL),
        SINK_CONTROL_ACTIVE | STOP_ON_WRAP
    );
    assert_eq!(load(&block, sink(&block) + WP_LOW), start | 1);
    assert_eq!(
        load(&block, encoder(&block, 0) + CONTROL) & OVERFLOW,
        OVERFLOW
    );
    assert_eq!(
        block.emit(0, &data[20..]),
        Emitted::Dropped(DropReason::SinkDisabled)
    );
    assert_eq!(sink_bytes(&block, 20)[..4], [1, 2, 3, 4]);
    // A stop on the very first word boundary of a message stores none of it past the
    // boundary.
    write(&block, sink(&block) + WP_LOW, start + 12);
    write(
        &block,
        sink(&block) + CONTROL,
        ACTIVE | ENABLE | STOP_ON_WRAP,
    );
    assert_eq!(
        block.emit(0, &[0xa1, 0xa2, 0xa3, 0xa4, 0xa5]),
        Emitted::Stopped { stored: 4 }
    );
    assert_eq!(load(&block, (start + 12) as usize), 0xa4a3_a2a1);
    assert_eq!(load(&block, start as usize), 0x0403_0201);
}

#[test]
fn disabling_the_sink_flushes_the_last_word_with_idle_bytes() {
    let block = block(1);
    start_trace(&block, 0);
    let start = sink_start(&block);
    // The N-Trace specification's Table 6 message (IndirectBranchHist), 6 bytes.
    let message = [0x70, 0xd0, 0x1d, 0x1d, 0xf8, 0xff];
    assert_eq!(block.emit(0, &message), Emitted::Stored { wrapped: false });
    assert_eq!(load(&block, sink(&block) + WP_LOW), start + 4);
    assert_eq!(
        load(&block, sink(&block) + CONTROL),
        SINK_CONTROL_ACTIVE & !EMPTY | ENABLE
    );
    assert_eq!(sink_bytes(&block, 8), [0x70, 0xd0, 0x1d, 0x1d, 0, 0, 0, 0]);
    write(&block, sink(&block) + CONTROL, ACTIVE);
    assert_eq!(load(&block, sink(&block) + CONTROL), SINK_CONTROL_ACTIVE);
    assert_eq!(load(&block, sink(&block) + WP_LOW), start + 8);
    let mut idle = Vec::new();
    MessageEncoder::new(MessageOptions::default()).encode_idle(2, &mut idle);
    let bytes = sink_bytes(&block, 8);
    assert_eq!(bytes[..6], message);
    assert_eq!(bytes[6..], idle[..]);
    // The decoder reads one message and two idle bytes.
    let mut decoder = MessageDecoder::new(&bytes, MessageOptions::default());
    assert!(decoder.next_message().unwrap().is_some());
    assert_eq!(decoder.next_message(), Ok(None));
    assert_eq!(decoder.idle_bytes(), 2);
    // Nothing buffered: a second disable writes nothing.
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    write(&block, sink(&block) + CONTROL, ACTIVE);
    assert_eq!(load(&block, sink(&block) + WP_LOW), start + 8);
    // A reset drops what is buffered.
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    block.emit(0, &[1, 2]);
    write(&block, sink(&block) + CONTROL, 0);
    assert_eq!(load(&block, sink(&block) + CONTROL), SINK_CONTROL_RESET);
    assert_eq!(sink_bytes(&block, 12)[8..], [0, 0, 0, 0]);
    // Released and enabled again, the sink starts from an empty word at trRamStart.
    write(&block, sink(&block) + CONTROL, ACTIVE);
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    assert_eq!(
        block.emit(0, &[3, 4, 5, 6]),
        Emitted::Stored { wrapped: false }
    );
    assert_eq!(sink_bytes(&block, 4), [3, 4, 5, 6]);
    assert_eq!(load(&block, sink(&block) + CONTROL) & EMPTY, EMPTY);
}

#[test]
fn a_write_pointer_stored_by_the_guest_is_where_trace_goes() {
    let block = block(1);
    start_trace(&block, 0);
    let start = sink_start(&block);
    block.emit(0, &[1, 2, 3, 4, 5, 6]);
    write(&block, sink(&block) + WP_LOW, start + 0x40);
    block.emit(0, &[7, 8]);
    assert_eq!(
        load(&block, (start + 0x40) as usize),
        0x0807_0605,
        "the buffered bytes go to the new pointer"
    );
    assert_eq!(load(&block, sink(&block) + WP_LOW), start + 0x44);
    // Enabling changes none of Start, Limit, WP (the specification's rule).
    write(&block, sink(&block) + CONTROL, ACTIVE);
    write(&block, sink(&block) + START_LOW, start + 0x100);
    write(&block, sink(&block) + LIMIT_LOW, start + 0x1fc);
    write(&block, sink(&block) + WP_LOW, start + 0x180);
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    let addresses =
        [START_LOW, LIMIT_LOW, WP_LOW].map(|offset| load(&block, sink(&block) + offset));
    assert_eq!(addresses, [start + 0x100, start + 0x1fc, start + 0x180]);
}

#[test]
fn the_funnel_drops_disabled_inputs_and_everything_when_disabled() {
    let block = block(2);
    start_trace(&block, 0);
    assert_eq!(
        block.emit(1, &[1, 2, 3, 4]),
        Emitted::Stored { wrapped: false }
    );
    write(&block, funnel(&block) + DISABLE_INPUT, 0b10);
    assert_eq!(
        block.emit(1, &[5, 6, 7, 8]),
        Emitted::Dropped(DropReason::FunnelInputDisabled)
    );
    assert_eq!(
        load(&block, encoder(&block, 1) + CONTROL) & OVERFLOW,
        0,
        "discarded on purpose"
    );
    assert_eq!(
        block.emit(0, &[9, 10, 11, 12]),
        Emitted::Stored { wrapped: false }
    );
    assert_eq!(sink_bytes(&block, 8), [1, 2, 3, 4, 9, 10, 11, 12]);
    write(&block, funnel(&block) + CONTROL, ACTIVE);
    assert_eq!(
        block.emit(0, &[13]),
        Emitted::Dropped(DropReason::FunnelDisabled)
    );
    assert_eq!(
        load(&block, encoder(&block, 0) + CONTROL) & OVERFLOW,
        OVERFLOW
    );
    write(&block, funnel(&block) + CONTROL, 0);
    assert_eq!(
        block.emit(0, &[13]),
        Emitted::Dropped(DropReason::FunnelDisabled)
    );
    assert_eq!(load(&block, sink(&block) + WP_LOW), sink_start(&block) + 8);
}

#[test]
fn a_single_hart_has_no_funnel() {
    let block = block(1);
    assert!(block.layout().funnel().is_none());
    write(&block, sink(&block) + CONTROL, ACTIVE);
    write(&block, sink(&block) + CONTROL, ACTIVE | ENABLE);
    assert_eq!(
        block.emit(0, &[1, 2, 3, 4]),
        Emitted::Stored { wrapped: false }
    );
}

#[test]
fn reserved_words_and_the_table_are_restored() {
    let block = block(2);
    let words = [
        0x10,
        0x1000 + 0x010,
        0x1000 + 0x800,
        0x2000 + COUNTER_HIGH,
        0x3000 + 0x040,
        0x4000 + DATA,
        0x4000 + 0xffc,
    ];
    for &offset in &words {
        store(&block, offset, 0xdead_beef);
    }
    block.poll();
    // Unwatched: still there until a sweep...
    assert_eq!(load(&block, 0x4000 + DATA), 0xdead_beef);
    block.sweep();
    let mut page = vec![0u8; 0x1000];
    block.memory().read_bytes(0, &mut page);
    assert!(DiscoveryTable::parse(&page).is_ok());
    for &offset in &words[1..] {
        assert_eq!(load(&block, offset), 0, "{offset:#x}");
    }
    // ... or a store to a watched register.
    for &offset in &words {
        store(&block, offset, 0xdead_beef);
    }
    write(&block, encoder(&block, 1) + CONTROL, ACTIVE);
    for &offset in &words[1..] {
        assert_eq!(load(&block, offset), 0, "{offset:#x}");
    }
}

#[test]
fn the_context_register_holds_the_guests_value_while_the_encoder_is_active() {
    let block = block(2);
    let context = encoder(&block, 1) + CONTEXT;
    // In reset it reads 0, whatever the guest stores.
    write(&block, context, 0x1234);
    assert_eq!(load(&block, context), 0);
    assert_eq!(block.encoder_context(1), 0);
    activate_encoder(&block, 1);
    write(&block, context, 0x0040_0007);
    assert_eq!(load(&block, context), 0x0040_0007);
    assert_eq!(block.encoder_context(1), 0x0040_0007);
    assert_eq!(block.encoder_context(0), 0, "the other hart's is its own");
    // Stores to watched registers and sweeps leave it.
    write(
        &block,
        encoder(&block, 1) + CONTROL,
        ACTIVE | ENABLE | TRACING,
    );
    block.sweep();
    assert_eq!(block.encoder_context(1), 0x0040_0007);
    write(&block, context, u32::MAX);
    assert_eq!(block.encoder_context(1), u32::MAX);
    // Back into reset: 0 again.
    write(&block, encoder(&block, 1) + CONTROL, 0);
    assert_eq!(load(&block, context), 0);
    assert_eq!(block.encoder_context(1), 0);
}

#[test]
fn a_return_stack_deeper_than_trteimpl_holds_is_refused() {
    let config = BlockConfig {
        harts: 1,
        size: SIZE,
        return_stack_depth: 128,
    };
    assert_eq!(
        TraceBlock::new(SharedMemory::owned(SIZE), config).unwrap_err(),
        LayoutError::ReturnStackDepth { depth: 128 }
    );
    let deepest = block_with(1, 127);
    assert_eq!(
        load(&deepest, encoder(&deepest, 0) + IMPLEMENTATION),
        0xff01_0101
    );
}

#[test]
fn encoder_options_follow_the_configuration() {
    let block = block(1);
    activate_encoder(&block, 0);
    let base = encoder(&block, 0);
    // SrcBits 3, SrcID 5, ExtendAddrMSB, AllJumps, RepeatedHistory, ImplicitReturn, SequentialJump.
    write(
        &block,
        base + FEATURES,
        3 << 28 | 5 << 16 | 1 << 10 | 1 << 9 | 1 << 8 | 1 << 3 | 1 << 2,
    );
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE);
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE | 1 << 15);
    write(
        &block,
        base + CONTROL,
        ACTIVE | ENABLE | TRACING | 3 << 4 | 1 << 9 | 1 << 16 | 2 << 20,
    );
    let config = config(&block, 0);
    assert!(config.traces_instructions());
    let options = config.encoder_options();
    assert_eq!(options.mode, BranchMode::Btm);
    assert_eq!(options.message.src_bits, 3);
    assert_eq!(options.src, 5);
    assert!(options.message.timestamps && options.message.address_msb_extension);
    assert_eq!(options.return_stack_depth, 32);
    assert!(options.repeated_history && options.sequential_jumps && options.all_jumps);
    assert_eq!(options.periodic_sync, 64);
    assert_eq!(options.context, Some(0));
    // trTeInhibitSrc, no implicit returns, HTM, half-word sync, no timestamps.
    write(&block, base + FEATURES, 3 << 28 | 5 << 16);
    write(&block, base + TIMESTAMP_CONTROL, ACTIVE);
    write(
        &block,
        base + CONTROL,
        ACTIVE | ENABLE | TRACING | 6 << 4 | 1 << 15 | 3 << 16,
    );
    let options = crate::tests::config(&block, 0).encoder_options();
    assert_eq!(options.mode, BranchMode::Htm);
    assert_eq!((options.message.src_bits, options.src), (0, 0));
    assert_eq!(options.return_stack_depth, 0);
    assert!(!options.message.timestamps && !options.repeated_history && !options.all_jumps);
    assert_eq!(options.periodic_sync, 0);
    assert_eq!(options.context, None);
}

#[test]
fn concurrent_harts_keep_each_message_whole() {
    const MESSAGES: u32 = 2000;
    let block = block(2);
    start_trace(&block, 0);
    std::thread::scope(|scope| {
        for hart in 0..2u8 {
            let block = &block;
            scope.spawn(move || {
                for sequence in 0..MESSAGES {
                    block.poll();
                    let s = sequence.to_le_bytes();
                    let message = [hart, s[0], s[1], s[0], s[1], hart, 0xee];
                    assert_eq!(
                        block.emit(usize::from(hart), &message),
                        Emitted::Stored { wrapped: false }
                    );
                    block.set_encoder_empty(usize::from(hart), sequence % 2 == 0);
                }
            });
        }
        // The guest, meanwhile, rewrites a watched register the poll must keep legal.
        for _ in 0..MESSAGES {
            store(&block, encoder(&block, 0) + FILTERS, 0xff);
        }
    });
    write(&block, sink(&block) + CONTROL, ACTIVE);
    let length = 2 * MESSAGES as usize * 7;
    let end = load(&block, sink(&block) + WP_LOW) as usize - block.layout().sink_memory().start;
    assert_eq!(end, length.next_multiple_of(4));
    let bytes = sink_bytes(&block, length);
    let mut next = [0u32; 2];
    for message in bytes.chunks_exact(7) {
        let hart = message[0];
        let sequence = u16::from_le_bytes([message[1], message[2]]) as u32;
        assert_eq!(
            message,
            [hart, message[1], message[2], message[1], message[2], hart, 0xee]
        );
        assert_eq!(sequence, next[usize::from(hart)]);
        next[usize::from(hart)] += 1;
    }
    assert_eq!(next, [MESSAGES, MESSAGES]);
    assert_eq!(load(&block, encoder(&block, 0) + FILTERS), 0b11);
}

/// A register of interest (watched or not) or any word of a register page.
fn guest_offset(harts: usize) -> impl Strategy<Value = usize> {
    let components = harts + usize::from(harts > 1) + 1;
    let registers = [
        CONTROL,
        IMPLEMENTATION,
        FEATURES,
        FILTERS,
        TIMESTAMP_CONTROL,
        COUNTER_LOW,
        START_HIGH,
        LIMIT_LOW,
        LIMIT_HIGH,
        WP_LOW,
        WP_HIGH,
        RP_LOW,
        FILTER_CONTROL[0],
        FILTER_MATCH[0],
        FILTER_CONTROL[1],
        FILTER_MATCH[1],
        CONTEXT,
    ];
    prop_oneof![
        4 => (1..=components, proptest::sample::select(registers.to_vec())).prop_map(|(page, offset)| page * 0x1000 + offset),
        1 => (0..=components, 0usize..1024).prop_map(|(page, word)| page * 0x1000 + word * 4),
    ]
}

/// A value that often has the bits software uses: Active, Enable, small fields.
fn guest_value() -> impl Strategy<Value = u32> {
    prop_oneof![
        2 => any::<u32>(),
        2 => (any::<u32>(), 0u32..4).prop_map(|(value, low)| (value & 0x00ff_fff0) | low | 1),
        1 => Just(1u32),
        1 => Just(3u32),
    ]
}

#[derive(Clone, Debug)]
enum Action {
    Store(usize, u32),
    Poll,
    Emit(usize, Vec<u8>),
    Timestamp(usize, u64),
    Empty(usize, bool),
    Overflow(usize),
    Sweep,
}

fn action(harts: usize) -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => (guest_offset(harts), guest_value()).prop_map(|(offset, value)| Action::Store(offset, value)),
        4 => Just(Action::Poll),
        2 => (0..harts, proptest::collection::vec(any::<u8>(), 0..12)).prop_map(|(hart, bytes)| Action::Emit(hart, bytes)),
        1 => (0..harts, any::<u64>()).prop_map(|(hart, time)| Action::Timestamp(hart, time)),
        1 => (0..harts, any::<bool>()).prop_map(|(hart, empty)| Action::Empty(hart, empty)),
        1 => (0..harts).prop_map(Action::Overflow),
        1 => Just(Action::Sweep),
    ]
}

/// Every implemented field of every component holds a legal value (after a poll). Only
/// after a sweep (`swept`) must components in reset have undone stores to registers
/// other than control.
fn assert_legal(block: &TraceBlock, swept: bool) {
    let harts = block.layout().harts();
    let sink_memory = block.layout().sink_memory();
    for hart in 0..harts {
        let base = encoder(block, hart);
        let control = load(block, base + CONTROL);
        let features = load(block, base + FEATURES);
        let timestamp = load(block, base + TIMESTAMP_CONTROL);
        if control & ACTIVE == 0 {
            assert_eq!(control, ENCODER_CONTROL_RESET);
            assert!(!config(block, hart).active);
            if !swept {
                continue;
            }
            assert_eq!(features, FEATURES_RESET);
            assert_eq!(load(block, base + FILTERS), 0);
            assert_eq!(timestamp, TIMESTAMP_CONTROL_RESET);
            assert_eq!(load(block, base + CONTEXT), 0);
        }
        if control & ENABLE != 0 && !swept {
            // Stores to an enabled encoder's other registers wait for a sweep.
            let config = config(block, hart);
            assert!(config.active && config.enabled);
            continue;
        }
        assert_eq!(load(block, base + IMPLEMENTATION), ENCODER_IMPLEMENTATION);
        assert_eq!(
            control & 0xf80c_4580,
            0,
            "reserved control bits {control:#x}"
        );
        assert!([0, 3, 6].contains(&((control >> 4) & 7)), "{control:#x}");
        assert_ne!((control >> 16) & 3, 2, "{control:#x}");
        assert_eq!(control & (1 << 11 | 1 << 13), 0, "{control:#x}");
        assert_eq!(control >> 24, 1, "{control:#x}");
        assert_eq!(features & 0xf833, 0, "{features:#x}");
        assert_eq!((features >> 6) & 3, 3, "{features:#x}");
        let source_bits = features >> 28;
        assert!(
            source_bits <= 12 && (features >> 16) & 0xfff < 1 << source_bits,
            "{features:#x}"
        );
        assert_eq!(load(block, base + FILTERS) & !0b11, 0);
        for filter in 0..2 {
            assert_eq!(load(block, base + FILTER_CONTROL[filter]) & !0b11, 0);
            assert_eq!(load(block, base + FILTER_MATCH[filter]) & !0b1011, 0);
        }
        if timestamp & ACTIVE == 0 {
            assert_eq!(timestamp, TIMESTAMP_CONTROL_RESET);
        }
        assert_eq!(
            timestamp & !(1 << 15 | 3 << 8 | 1 << 1 | 1),
            TIMESTAMP_CONTROL_RESET,
            "{timestamp:#x}"
        );
        let config = config(block, hart);
        assert_eq!(config.active, control & ACTIVE != 0);
        assert_eq!(config.enabled, control & ENABLE != 0);
        assert_eq!(u32::from(config.source_bits), source_bits);
    }
    let funnel_control = if block.layout().has_funnel() {
        load(block, funnel(block) + CONTROL)
    } else {
        0
    };
    let funnel_active = funnel_control & ACTIVE != 0;
    let funnel_settled = swept || funnel_control & ENABLE == 0;
    if block.layout().has_funnel() && (swept || funnel_active) && funnel_settled {
        let control = load(block, funnel(block) + CONTROL);
        assert!([
            FUNNEL_CONTROL_RESET,
            FUNNEL_CONTROL_RESET | ACTIVE,
            FUNNEL_CONTROL_RESET | ACTIVE | ENABLE
        ]
        .contains(&control));
        assert_eq!(
            load(block, funnel(block) + IMPLEMENTATION),
            FUNNEL_IMPLEMENTATION
        );
        let disabled = load(block, funnel(block) + DISABLE_INPUT);
        assert!(disabled < 1 << harts && (control & ACTIVE != 0 || disabled == 0));
    }
    let base = sink(block);
    let control = load(block, base + CONTROL);
    assert_eq!(
        control & !(ACTIVE | ENABLE | EMPTY | STOP_ON_WRAP),
        0x10,
        "{control:#x}"
    );
    if control & ACTIVE == 0 {
        assert_eq!(control, SINK_CONTROL_RESET);
        if !swept {
            return;
        }
    }
    if control & ENABLE != 0 && !swept {
        // Stores to an enabled sink's other registers wait for a sweep.
        return;
    }
    assert_eq!(load(block, base + IMPLEMENTATION), SINK_IMPLEMENTATION);
    for low in [START_LOW, LIMIT_LOW, WP_LOW] {
        assert_eq!(load(block, base + low + 4), 0);
        let address = load(block, base + low) as usize & !1;
        assert!(
            address % 4 == 0 && sink_memory.contains(&address),
            "{low:#x}: {address:#x}"
        );
    }
    assert_eq!(
        (load(block, base + RP_LOW), load(block, base + RP_HIGH)),
        (0, 0)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_guest_stores_and_polls_leave_every_field_legal(
        (harts, actions) in (1usize..=3).prop_flat_map(|harts| (Just(harts), proptest::collection::vec(action(harts), 0..120)))
    ) {
        let block = block(harts);
        let mut generations = vec![0u64; harts];
        for action in actions {
            match action {
                Action::Store(offset, value) => store(&block, offset, value),
                Action::Poll => {
                    block.poll();
                    assert_legal(&block, false);
                }
                Action::Emit(hart, bytes) => {
                    block.emit(hart, &bytes);
                    assert_legal(&block, false);
                }
                Action::Timestamp(hart, time) => {
                    let value = block.set_timestamp(hart, time);
                    prop_assert!(value < 1 << 63);
                    if !config(&block, hart).timestamps.active {
                        prop_assert_eq!(value, 0);
                    }
                }
                Action::Empty(hart, empty) => block.set_encoder_empty(hart, empty),
                Action::Overflow(hart) => block.report_encoder_overflow(hart),
                Action::Sweep => {
                    block.sweep();
                    assert_legal(&block, true);
                }
            }
            for (hart, generation) in generations.iter_mut().enumerate() {
                let now = block.encoder_generation(hart);
                prop_assert!(now >= *generation);
                *generation = now;
            }
        }
        block.poll();
        block.sweep();
        assert_legal(&block, true);
        let mut page = vec![0u8; 0x1000];
        block.memory().read_bytes(0, &mut page);
        prop_assert_eq!(DiscoveryTable::parse(&page), Ok(block.layout().discovery_table(32)));
    }
}
