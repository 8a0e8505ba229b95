//! The side-band of an N-Trace recording as the kernel writes it, for tests that build
//! recordings: the dummy event's attributes and its records. Shared with the
//! workspace's end-to-end tests (`tests/tests/common`, by path).

use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::SampleId;

/// The system-wide dummy event `rvperf trace record` opens for the side-band.
pub fn attr() -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: abi::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: abi::PERF_COUNT_SW_DUMMY.into(),
        sample_type: u64::from(abi::PERF_SAMPLE_TID | abi::PERF_SAMPLE_TIME | abi::PERF_SAMPLE_CPU),
        ..Default::default()
    };
    attr.set_sample_id_all(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_task(1);
    attr.set_context_switch(1);
    attr
}

/// The sample id of a record of task `pid` (pid = tid) at `time` on `cpu`.
pub fn sample_id(pid: u32, time: u64, cpu: u32) -> SampleId {
    SampleId {
        pid: Some(pid),
        tid: Some(pid),
        time: Some(time),
        cpu: Some(cpu),
        ..SampleId::default()
    }
}

/// A PERF_RECORD_SWITCH_CPU_WIDE as the kernel writes it (switch-in: `next` is the
/// record's task, `previous` its next_prev fields), between tasks with pid = tid.
pub fn switch_record(time: u64, cpu: u32, previous: u32, next: u32) -> Vec<u8> {
    thread_switch_record(time, cpu, (previous, previous), (next, next))
}

/// The same between threads: (pid, tid) each.
pub fn thread_switch_record(
    time: u64,
    cpu: u32,
    previous: (u32, u32),
    next: (u32, u32),
) -> Vec<u8> {
    let mut body = Vec::new();
    for word in [previous.0, previous.1, next.0, next.1] {
        body.extend_from_slice(&word.to_le_bytes());
    }
    body.extend_from_slice(&time.to_le_bytes());
    body.extend_from_slice(&cpu.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    let mut record = Vec::new();
    record.extend_from_slice(&abi::PERF_RECORD_SWITCH_CPU_WIDE.to_le_bytes());
    record.extend_from_slice(&0u16.to_le_bytes());
    record.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
    record.extend_from_slice(&body);
    record
}

/// A perf.data writer with the side-band's dummy event, into memory.
pub fn recording_writer() -> perf_data::PerfDataWriter<std::io::Cursor<Vec<u8>>> {
    perf_data::PerfDataWriter::new(
        std::io::Cursor::new(Vec::new()),
        vec![perf_data::EventDesc {
            attr: attr(),
            name: "dummy:u".into(),
            ids: vec![1],
        }],
    )
    .unwrap()
}

/// Where a file's executable segment was mapped: its address, length and file offset.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub address: u64,
    pub length: u64,
    pub offset: u64,
}

/// PERF_RECORD_MMAP2 of `filename`'s executable `segment` by `pid` at `time`.
pub fn write_mmap(
    writer: &mut perf_data::PerfDataWriter<std::io::Cursor<Vec<u8>>>,
    pid: u32,
    time: u64,
    segment: Segment,
    filename: &str,
) {
    writer
        .write_mmap2(
            0,
            2,
            &perf_abi::Mmap2Record {
                pid,
                tid: pid,
                addr: segment.address,
                len: segment.length,
                pgoff: segment.offset,
                file_id: perf_abi::Mmap2FileId::Inode {
                    maj: 0,
                    min: 0,
                    ino: 0,
                    ino_generation: 0,
                },
                prot: 5,
                flags: 2,
                filename: filename.as_bytes(),
                sample_id: sample_id(pid, time, 0),
            },
        )
        .unwrap();
}

/// PERF_RECORD_COMM of `pid` at `time` (`exec`: by an exec).
pub fn write_comm(
    writer: &mut perf_data::PerfDataWriter<std::io::Cursor<Vec<u8>>>,
    pid: u32,
    time: u64,
    name: &str,
    exec: bool,
) {
    writer
        .write_comm(
            0,
            &perf_abi::CommRecord {
                pid,
                tid: pid,
                comm: name.as_bytes(),
                exec,
                sample_id: sample_id(pid, time, 0),
            },
        )
        .unwrap();
}

/// The kernel's conversion of a 10 MHz `time` to perf time: a tick is 100 ns
/// (mult / 2^shift = 100), perf time 0 at tick 0.
pub fn ten_megahertz() -> perf_abi::TimeConversion {
    perf_abi::TimeConversion {
        shift: 21,
        mult: 209_715_200,
        zero: 0,
        cycles: 0,
        mask: u64::MAX,
    }
}
