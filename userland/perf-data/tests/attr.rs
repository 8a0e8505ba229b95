//! The attr section: the `perf_event_attr` an event was opened with is written as it
//! is, in its first PERF_ATTR_SIZE bytes, and Linux perf reads every field of it; an
//! attr that needs more bytes than that is refused, not cut.

mod common;

use std::io::Cursor;

use common::*;
use perf_abi::sys::bindings::perf_event_attr;
use perf_data::*;

/// cpu-clock with fields an attr built by hand used to lose: precise_ip, config1/2,
/// exclusions, watermark wake-ups, inherit, enable_on_exec, context_switch.
fn unusual_attr() -> perf_event_attr {
    let mut attr = cpu_clock_attr(abi::PERF_SAMPLE_ID.into(), 0);
    attr.config1 = 0x5;
    attr.config2 = 0x7;
    attr.read_format = 4; // PERF_FORMAT_ID
    attr.set_precise_ip(2);
    attr.set_exclude_kernel(1);
    attr.set_exclude_idle(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_context_switch(1);
    attr.set_comm_exec(0);
    attr.set_watermark(1);
    attr.wakeup_watermark = 16_384;
    attr.sample_max_stack = 64;
    attr
}

fn written(attr: perf_event_attr) -> Result<Vec<u8>, WriteError> {
    let mut writer = PerfDataWriter::new(
        Cursor::new(Vec::new()),
        vec![EventDesc {
            attr,
            name: "cpu-clock:upp".into(),
            ids: vec![7],
        }],
    )?;
    // perf warns of a file without data.
    writer.write_finished_round()?;
    Ok(writer
        .finish(&Metadata::from_host("test", Vec::new()))?
        .into_inner())
}

#[test]
fn the_attr_is_written_as_opened_in_128_bytes() {
    let attr = unusual_attr();
    let bytes = written(attr).unwrap();
    let reader = PerfDataReader::from_bytes(&bytes, "attr").unwrap();
    let [info] = reader.attrs() else {
        panic!("one attr expected, got {}", reader.attrs().len());
    };
    let mut expected = perf_abi::attr_bytes(&attr)[..PERF_ATTR_SIZE].to_vec();
    expected[4..8].copy_from_slice(&(PERF_ATTR_SIZE as u32).to_ne_bytes());
    assert_eq!(info.bytes, expected);
    let read = perf_abi::attr_from_bytes(&info.bytes).unwrap();
    assert_eq!(
        (read.precise_ip(), read.config1, read.config2),
        (2, 0x5, 0x7)
    );
}

/// `perf evlist -v` prints each non-zero field of the attr it read.
#[test]
fn linux_perf_reads_every_field_of_the_attr() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("perf.data");
    std::fs::write(&file, written(unusual_attr()).unwrap()).unwrap();
    let (out, err) = run_perf(&["evlist", "-v", "-i", file.to_str().unwrap()]);
    assert_eq!(file_warnings(&err), "", "perf evlist complained: {err}");
    for field in [
        "size: 128,",
        "{ sample_period, sample_freq }: 4000,",
        "sample_type: IP|TID|TIME|ID|CPU|PERIOD,",
        "read_format: ID,",
        "disabled: 1,",
        "inherit: 1,",
        "exclude_kernel: 1,",
        "exclude_idle: 1,",
        "freq: 1,",
        "enable_on_exec: 1,",
        "watermark: 1,",
        "precise_ip: 2,",
        "sample_id_all: 1,",
        "context_switch: 1,",
        "{ wakeup_events, wakeup_watermark }: 16384,",
        "{ bp_addr, config1 }: 0x5,",
        "{ bp_len, config2 }: 0x7,",
        "sample_max_stack: 64",
    ] {
        assert!(
            out.contains(field),
            "no {field:?} in perf evlist -v:\n{out}"
        );
    }
    for absent in ["exclude_user", "exclude_hv", "comm_exec"] {
        assert!(!out.contains(absent), "{absent} in perf evlist -v:\n{out}");
    }
}

#[test]
fn an_attr_past_128_bytes_is_refused_with_its_field() {
    for (field, offset) in [("config3", 128), ("config4", 136)] {
        let mut attr = unusual_attr();
        if field == "config3" {
            attr.config3 = 1 << 8;
        } else {
            attr.config4 = 1;
        }
        let error = written(attr).unwrap_err();
        let expected_offset = offset + usize::from(field == "config3");
        assert!(
            matches!(
                &error,
                WriteError::AttrTooNew { event, field: named, offset }
                    if event == "cpu-clock:upp" && *named == field && *offset == expected_offset
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains(field), "{error}");
    }
}
