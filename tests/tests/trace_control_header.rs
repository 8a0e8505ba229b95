//! `tools/qemu-ntrace/guest/trace_control.h`, the register map C programs in the guest
//! use, says what `userland/trace-control` says: every `#define` of the header is
//! evaluated here and compared with the crate's value, and a define this test does not
//! know fails it (so a new one cannot go unchecked).

use std::collections::HashMap;

use trace_control::component::{self, ComponentType};
use trace_control::{discovery, encoder, funnel, ram_sink, timestamp, COMPONENT_SIZE};

mod common;

/// The value of a define: a number (`12`, `0x40`, `3u`) or a shift (`(1u << 4)`,
/// `(0xfffu << 16)`); `None` for a function-like macro or a string.
fn evaluate(value: &str) -> Option<u64> {
    let value = value.trim();
    let number = |text: &str| {
        let text = text.trim().trim_end_matches('u');
        match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse().ok(),
        }
    };
    if let Some(inner) = value
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'))
    {
        let (left, right) = inner.split_once("<<")?;
        return Some(number(left)? << number(right)?);
    }
    number(value)
}

fn header_defines() -> HashMap<String, String> {
    let path = common::repository().join("tools/qemu-ntrace/guest/trace_control.h");
    let text = std::fs::read_to_string(&path).expect("read trace_control.h");
    text.lines()
        .filter_map(|line| line.strip_prefix("#define "))
        .filter_map(|rest| {
            let (name, value) = rest.split_once(' ')?;
            Some((name.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// What the crate says each define of the header is.
fn expected() -> HashMap<&'static str, u64> {
    use encoder::{control as te, filter_control, instruction_features as features};
    let shift = |field: trace_control::Field| u64::from(field.shift);
    let mask = |field: trace_control::Field| u64::from(field.mask());
    let [major, minor, kind] = [
        component::implementation::VERSION_MAJOR,
        component::implementation::VERSION_MINOR,
        component::implementation::COMPONENT_TYPE,
    ];
    assert_eq!((shift(major), shift(minor), shift(kind)), (0, 4, 8));
    HashMap::from([
        ("TC_TABLE_VERSION_OFFSET", discovery::offset::VERSION as u64),
        (
            "TC_TABLE_COMPONENTS_OFFSET",
            discovery::offset::COMPONENT_COUNT as u64,
        ),
        ("TC_TABLE_SIZE_OFFSET", discovery::offset::BLOCK_SIZE as u64),
        (
            "TC_TABLE_SINK_OFFSET_OFFSET",
            discovery::offset::SINK_OFFSET as u64,
        ),
        (
            "TC_TABLE_SINK_SIZE_OFFSET",
            discovery::offset::SINK_SIZE as u64,
        ),
        (
            "TC_TABLE_ENTRIES_OFFSET",
            discovery::offset::COMPONENTS as u64,
        ),
        ("TC_TABLE_ENTRY_SIZE", discovery::ENTRY_SIZE as u64),
        ("TC_COMPONENT_SIZE", COMPONENT_SIZE as u64),
        ("TC_TYPE_ENCODER", u64::from(ComponentType::Encoder.value())),
        ("TC_TYPE_FUNNEL", u64::from(ComponentType::Funnel.value())),
        (
            "TC_TYPE_RAM_SINK",
            u64::from(ComponentType::RamSink.value()),
        ),
        ("TC_CONTROL", component::CONTROL as u64),
        ("TC_IMPL", component::IMPLEMENTATION as u64),
        ("TC_ACTIVE", mask(component::control::ACTIVE)),
        ("TC_ENABLE", mask(component::control::ENABLE)),
        ("TC_EMPTY", mask(component::control::EMPTY)),
        ("TC_TE_INST_FEATURES", encoder::INSTRUCTION_FEATURES as u64),
        ("TC_TE_INST_FILTERS", encoder::INSTRUCTION_FILTERS as u64),
        ("TC_TE_TS_CONTROL", timestamp::CONTROL as u64),
        ("TC_TE_TS_COUNTER_LOW", timestamp::COUNTER_LOW as u64),
        ("TC_TE_TS_COUNTER_HIGH", timestamp::COUNTER_HIGH as u64),
        ("TC_TE_INST_TRACING", mask(te::INSTRUCTION_TRACING)),
        ("TC_TE_INST_MODE_SHIFT", shift(te::INSTRUCTION_MODE)),
        ("TC_TE_INST_MODE_MASK", mask(te::INSTRUCTION_MODE)),
        (
            "TC_TE_INST_MODE_BTM",
            u64::from(encoder::instruction_mode::BASELINE),
        ),
        (
            "TC_TE_INST_MODE_HTM",
            u64::from(encoder::instruction_mode::OPTIMIZED),
        ),
        ("TC_TE_CONTEXT", mask(te::CONTEXT)),
        (
            "TC_TE_INST_STALL_OR_OVERFLOW",
            mask(te::INSTRUCTION_STALL_OR_OVERFLOW),
        ),
        ("TC_TE_INHIBIT_SRC", mask(te::INHIBIT_SOURCE)),
        (
            "TC_TE_INST_SYNC_MODE_SHIFT",
            shift(te::INSTRUCTION_SYNC_MODE),
        ),
        ("TC_TE_INST_SYNC_MODE_MASK", mask(te::INSTRUCTION_SYNC_MODE)),
        ("TC_TE_INST_SYNC_MAX_SHIFT", shift(te::INSTRUCTION_SYNC_MAX)),
        ("TC_TE_INST_SYNC_MAX_MASK", mask(te::INSTRUCTION_SYNC_MAX)),
        ("TC_TE_FORMAT_SHIFT", shift(te::FORMAT)),
        ("TC_TE_FORMAT_MASK", mask(te::FORMAT)),
        ("TC_TE_FORMAT_NTRACE", u64::from(encoder::format::N_TRACE)),
        (
            "TC_TE_EN_SEQUENTIAL_JUMP",
            mask(features::ENABLE_SEQUENTIAL_JUMP),
        ),
        (
            "TC_TE_EN_IMPLICIT_RETURN",
            mask(features::ENABLE_IMPLICIT_RETURN),
        ),
        (
            "TC_TE_IMPLICIT_RETURN_MODE_SHIFT",
            shift(features::IMPLICIT_RETURN_MODE),
        ),
        (
            "TC_TE_EN_REPEATED_HISTORY",
            mask(features::ENABLE_REPEATED_HISTORY),
        ),
        ("TC_TE_EN_ALL_JUMPS", mask(features::ENABLE_ALL_JUMPS)),
        ("TC_TE_EXTEND_ADDR_MSB", mask(features::EXTEND_ADDRESS_MSB)),
        ("TC_TE_SRC_ID_SHIFT", shift(features::SOURCE_ID)),
        ("TC_TE_SRC_ID_MASK", mask(features::SOURCE_ID)),
        ("TC_TE_SRC_BITS_SHIFT", shift(features::SOURCE_BITS)),
        ("TC_TE_SRC_BITS_MASK", mask(features::SOURCE_BITS)),
        ("TC_TE_FILTER_ENABLE", mask(filter_control::ENABLE)),
        (
            "TC_TE_FILTER_MATCH_PRIVILEGE",
            mask(filter_control::MATCH_PRIVILEGE),
        ),
        ("TC_TS_ACTIVE", mask(timestamp::control::ACTIVE)),
        ("TC_TS_COUNT", mask(timestamp::control::COUNT)),
        ("TC_TS_RESET", mask(timestamp::control::RESET)),
        ("TC_TS_MODE_SHIFT", shift(timestamp::control::MODE)),
        (
            "TC_TS_MODE_INTERNAL_SYSTEM",
            u64::from(timestamp::mode::INTERNAL_SYSTEM),
        ),
        ("TC_TS_PRESCALE_SHIFT", shift(timestamp::control::PRESCALE)),
        ("TC_TS_ENABLE", mask(timestamp::control::ENABLE)),
        ("TC_TS_WIDTH_SHIFT", shift(timestamp::control::WIDTH)),
        ("TC_FUNNEL_DISABLE_INPUT", funnel::DISABLE_INPUT as u64),
        ("TC_RAM_START_LOW", ram_sink::START_LOW as u64),
        ("TC_RAM_START_HIGH", ram_sink::START_HIGH as u64),
        ("TC_RAM_LIMIT_LOW", ram_sink::LIMIT_LOW as u64),
        ("TC_RAM_LIMIT_HIGH", ram_sink::LIMIT_HIGH as u64),
        ("TC_RAM_WP_LOW", ram_sink::WRITE_POINTER_LOW as u64),
        ("TC_RAM_WP_HIGH", ram_sink::WRITE_POINTER_HIGH as u64),
        (
            "TC_RAM_MODE_SMEM",
            u64::from(ram_sink::control::MODE.value(ram_sink::mode::SMEM)),
        ),
        ("TC_RAM_STOP_ON_WRAP", mask(ram_sink::control::STOP_ON_WRAP)),
        ("TC_RAM_WRAP", mask(ram_sink::write_pointer_low::WRAP)),
        ("TC_RAM_HAS_SRAM", mask(ram_sink::implementation::HAS_SRAM)),
        ("TC_RAM_HAS_SMEM", mask(ram_sink::implementation::HAS_SMEM)),
    ])
}

#[test]
fn the_c_header_says_what_the_crate_says() {
    let defines = header_defines();
    let expected = expected();
    let mut checked = 0;
    for (name, value) in &defines {
        match name.as_str() {
            // The include guard, the magic string and the function-like macros.
            "RVPERF_TRACE_CONTROL_H" => continue,
            "TC_MAGIC" => {
                assert_eq!(
                    value.trim_matches('"').as_bytes(),
                    discovery::MAGIC.as_slice(),
                    "TC_MAGIC"
                );
                checked += 1;
                continue;
            }
            _ if name.contains('(') => continue,
            _ => {}
        }
        let Some(&want) = expected.get(name.as_str()) else {
            panic!("trace_control.h defines {name} = {value}, which this test does not check");
        };
        let got = evaluate(value).unwrap_or_else(|| panic!("{name}: cannot evaluate {value}"));
        assert_eq!(got, want, "{name} = {value}");
        checked += 1;
    }
    assert_eq!(
        checked,
        expected.len() + 1,
        "every checked define is in the header"
    );
}

#[test]
fn the_function_like_macros_compute_the_crates_offsets() {
    let defines = header_defines();
    let filter = defines
        .get("TC_TE_FILTER_CONTROL(i)")
        .expect("TC_TE_FILTER_CONTROL(i)");
    let match_instruction = defines
        .get("TC_TE_FILTER_MATCH_INST(i)")
        .expect("TC_TE_FILTER_MATCH_INST(i)");
    // (BASE + STRIDE * (i)).
    for (text, function) in [
        (filter, encoder::filter_control as fn(usize) -> usize),
        (match_instruction, encoder::filter_match_instruction),
    ] {
        let inner = text.trim().trim_start_matches('(').trim_end_matches(')');
        let (base, stride) = inner.split_once('+').expect("BASE + STRIDE * (i)");
        let (stride, _) = stride.split_once('*').expect("STRIDE * (i)");
        let (base, stride) = (
            evaluate(base).expect("base"),
            evaluate(stride).expect("stride"),
        );
        for i in 0..2 {
            assert_eq!(base + stride * i as u64, function(i) as u64, "{text}");
        }
    }
}
