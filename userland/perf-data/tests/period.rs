//! A sample's period is perf's `sample->period`: the PERIOD field when the event records
//! it, else the event's own sample_period (`perf record -c N` does not record PERIOD),
//! looked up per event through the sample's id.

use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::Sample;
use perf_data::*;

/// A cpu-clock attr sampling every `sample_period_or_freq` events, or with `freq` that
/// many times a second.
fn attr(sample_period_or_freq: u64, extra_sample_type: u64, freq: bool) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: abi::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: abi::PERF_COUNT_SW_CPU_CLOCK.into(),
        sample_type: u64::from(
            abi::PERF_SAMPLE_IDENTIFIER
                | abi::PERF_SAMPLE_IP
                | abi::PERF_SAMPLE_TID
                | abi::PERF_SAMPLE_TIME,
        ) | extra_sample_type,
        ..Default::default()
    };
    // One union: sample_freq when freq is set.
    attr.sample_period = sample_period_or_freq;
    attr.set_freq(freq.into());
    attr.set_sample_id_all(1);
    attr
}

/// The periods `parse_sample` gives the samples of a file with three events: a fixed
/// period of 100000 without PERIOD, frequency mode with PERIOD, and a fixed period of
/// 7 without PERIOD. Each event gets two samples, interleaved.
fn periods_of_three_events() -> Vec<(u64, u64)> {
    let events = vec![
        EventDesc {
            attr: attr(100_000, 0, false),
            name: "cycles".into(),
            ids: vec![11, 12],
        },
        EventDesc {
            attr: attr(4000, abi::PERF_SAMPLE_PERIOD.into(), true),
            name: "cpu-clock".into(),
            ids: vec![21],
        },
        EventDesc {
            attr: attr(7, 0, false),
            name: "instructions".into(),
            ids: vec![31],
        },
    ];
    let mut writer = PerfDataWriter::new(std::io::Cursor::new(Vec::new()), events).unwrap();
    for (round, recorded_period) in [(0u64, 250_001u64), (1, 249_999)] {
        for (attr_index, id) in [(0usize, 11 + round), (1, 21), (2, 31)] {
            writer
                .write_sample(
                    attr_index,
                    &Sample {
                        id: Some(id),
                        ip: Some(0x1000),
                        pid: Some(1),
                        tid: Some(1),
                        time: Some(1000 + round),
                        period: Some(recorded_period),
                        misc: abi::PERF_RECORD_MISC_USER as u16,
                        ..Default::default()
                    },
                )
                .unwrap();
        }
    }
    let bytes = writer
        .finish(&Metadata::from_host("6.12", vec!["perf".into()]))
        .unwrap()
        .into_inner();
    let reader = PerfDataReader::from_bytes(&bytes, "periods").unwrap();
    let mut periods = Vec::new();
    let mut records = reader.records();
    while let Some(record) = records.next_record().unwrap() {
        if record.record_type == abi::PERF_RECORD_SAMPLE {
            let sample = reader.parse_sample(&record).unwrap();
            let attr = &reader.attrs()[record.attr_index.unwrap()].attr;
            periods.push((sample.id.unwrap_or(0), sample.period_or_attr(attr)));
        }
    }
    periods
}

#[test]
fn a_sample_without_period_weighs_its_own_events_sample_period() {
    assert_eq!(
        periods_of_three_events(),
        [
            (11, 100_000),
            (21, 250_001),
            (31, 7),
            (12, 100_000),
            (21, 249_999),
            (31, 7),
        ]
    );
}
