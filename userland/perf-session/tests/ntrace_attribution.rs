//! `NtraceRecording::attribute` over perf.data files written as `rvperf trace record`
//! writes them: N-Trace messages of two harts with timestamps, and the side-band of two
//! processes taking turns on one CPU (PERF_RECORD_SWITCH_CPU_WIDE, COMM with exec, FORK
//! and MMAP2). Each synchronisation's stretch goes to the process that ran on its hart's
//! CPU at its time; the pieces of the split are the messages, byte for byte; a gap, an
//! unreadable message or a time before a CPU's first switch are accounted for; and each
//! process's files are its own (a fork's are its parent's until it execs).

mod common;

use std::io::Cursor;

use common::side_band::{
    recording_writer, sample_id, switch_record, ten_megahertz, thread_switch_record, write_comm,
    write_mmap, Segment,
};
use ntrace_message::{
    AddressWidth, Body, BranchType, CorrelationEvent, MessageEncoder, MessageOptions, SyncReason,
};
use perf_abi::ntrace::{feature, NtraceInfo, RVPERF_AUXTRACE_NTRACE};
use perf_abi::TaskRecord;
use perf_data::{AuxtraceChunk, Metadata, PerfDataReader, PerfDataWriter, TaskEvent};
use perf_session::{read_ntrace_recording, AttributionError, ProgramRun};

/// 10 MHz: a tick is 100 ns (mult / 2^shift = 100), perf time 0 at tick 0.
fn info(hart_cpus: Vec<Option<u32>>, features: u64) -> NtraceInfo {
    NtraceInfo {
        mode: 3,
        features,
        privileges: 1,
        sync_max: None,
        src_bits: 1,
        return_stack_depth: 0,
        harts: 0b11,
        buffer_bytes: 1 << 16,
        time: Some(ten_megahertz()),
        timestamp_prescale: 0,
        hart_cpus,
    }
}

fn options() -> MessageOptions {
    MessageOptions::default()
        .with_src_bits(1)
        .with_timestamps(true)
        .with_address_width(AddressWidth::Bits64)
}

/// A stretch of a hart: a synchronisation at `tick`, a branch, and the trace stopping
/// (the hart entered the kernel). Its bytes.
fn stretch(hart: u16, tick: u64, address: u64) -> Vec<u8> {
    let encoder = MessageEncoder::new(options());
    let mut bytes = Vec::new();
    let messages = [
        (
            Body::ProgTraceSync {
                sync: SyncReason(5),
                icnt: 0,
                faddr: address,
            },
            Some(tick),
        ),
        (
            Body::IndirectBranch {
                btype: BranchType::Indirect,
                icnt: 4,
                uaddr: 0x40,
            },
            Some(3),
        ),
        (
            Body::ProgTraceCorrelation {
                evcode: CorrelationEvent(4),
                cdf: 0,
                icnt: 2,
                hist: None,
            },
            Some(2),
        ),
    ];
    for (body, timestamp) in messages {
        encoder
            .encode(hart, &body, timestamp, &mut bytes)
            .expect("a valid message");
    }
    bytes
}

/// The side-band: pid 10 (`shell`, /bin/shell) forks pid 20 at 1,000 ns, which execs
/// /bin/program at 2,000 ns; pid 30 (`other`) runs on CPU 1, its thread 31 from 32,000
/// ns. CPU 0 runs 10, then 20 from 15,000 ns, then 10 from 40,000 ns. `pieces` are AUXTRACE chunks (offset, bytes).
fn recording(info: &NtraceInfo, pieces: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut writer = recording_writer();
    let segment = Segment {
        address: 0x10000,
        length: 0x1000,
        offset: 0,
    };
    let mmap = |writer: &mut PerfDataWriter<Cursor<Vec<u8>>>, pid: u32, time: u64, file: &str| {
        write_mmap(writer, pid, time, segment, file);
    };
    let comm = write_comm;
    comm(&mut writer, 10, 0, "shell", false);
    mmap(&mut writer, 10, 0, "/bin/shell");
    comm(&mut writer, 30, 0, "other", false);
    mmap(&mut writer, 30, 0, "/bin/other");
    writer
        .write_auxtrace_info(RVPERF_AUXTRACE_NTRACE, &info.to_words())
        .unwrap();
    writer
        .write_task(
            0,
            TaskEvent::Fork,
            &TaskRecord {
                pid: 20,
                ppid: 10,
                tid: 20,
                ptid: 10,
                time: 1_000,
                sample_id: sample_id(20, 1_000, 0),
            },
        )
        .unwrap();
    comm(&mut writer, 20, 2_000, "program", true);
    mmap(&mut writer, 20, 2_500, "/bin/program");
    for (time, cpu, previous, next) in [
        (500, 0, 0, 10),
        (500, 1, 0, 30),
        (15_000, 0, 10, 20),
        (40_000, 0, 20, 10),
    ] {
        writer
            .write_record(&switch_record(time, cpu, previous, next))
            .unwrap();
    }
    // A second thread of pid 30 takes CPU 1 at 32,000 ns.
    writer
        .write_record(&thread_switch_record(32_000, 1, (30, 30), (30, 31)))
        .unwrap();
    for (offset, bytes) in pieces {
        let mut data = bytes.clone();
        data.resize(bytes.len().next_multiple_of(8), 0xff);
        writer
            .write_auxtrace(&AuxtraceChunk {
                offset: *offset,
                reference: bytes.len() as u64,
                idx: 0,
                tid: u32::MAX,
                cpu: u32::MAX,
                data: &data,
            })
            .unwrap();
    }
    writer.finish(&Metadata::default()).unwrap().into_inner()
}

#[test]
fn each_stretch_goes_to_the_process_that_ran_on_its_harts_cpu() {
    // Hart 1 is CPU 0 and hart 0 CPU 1 (the boot hart is CPU 0).
    let info = info(vec![Some(1), Some(0)], feature::TIMESTAMPS);
    let shell = stretch(1, 100, 0x1000); // 10,000 ns on CPU 0: shell
    let program = stretch(1, 300, 0x1000); // 30,000 ns on CPU 0: program
    let other = stretch(0, 310, 0x2000); // 31,000 ns on CPU 1: other
    let program_again = stretch(1, 350, 0x1100); // 35,000 ns: program
    let shell_again = stretch(1, 450, 0x1000); // 45,000 ns: shell
    let other_thread = stretch(0, 330, 0x2100); // 33,000 ns on CPU 1: other's thread 31
    let trace: Vec<u8> = [
        &shell,
        &program,
        &other,
        &other_thread,
        &program_again,
        &shell_again,
    ]
    .into_iter()
    .flatten()
    .copied()
    .collect();
    let bytes = recording(&info, &[(0, trace)]);
    let reader = PerfDataReader::from_bytes(&bytes, "attribution.data").unwrap();
    let recording = read_ntrace_recording(&reader).unwrap();
    assert_eq!(recording.switches.len(), 5);
    let attribution = recording.attribute(options()).unwrap();
    let summary: Vec<(ProgramRun, u32, &str, u64)> = attribution
        .threads
        .iter()
        .map(|thread| {
            (
                thread.run,
                thread.tid,
                thread.comm.as_str(),
                thread.stretches,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (ProgramRun { pid: 10, execs: 0 }, 10, "shell", 2),
            (ProgramRun { pid: 20, execs: 1 }, 20, "program", 2),
            (ProgramRun { pid: 30, execs: 0 }, 30, "other", 1),
            (ProgramRun { pid: 30, execs: 0 }, 31, "other", 1),
        ]
    );
    let traces: Vec<&[u8]> = attribution
        .threads
        .iter()
        .map(|process| process.trace.as_slice())
        .collect();
    assert_eq!(traces[0], [shell.as_slice(), &shell_again].concat());
    assert_eq!(traces[1], [program.as_slice(), &program_again].concat());
    assert_eq!(traces[2], other.as_slice());
    assert_eq!(traces[3], other_thread.as_slice());
    assert_eq!(attribution.unattributed, Default::default());

    // Each process's files: the program's own after its exec, the shell's its own.
    let files = |run| -> Vec<String> {
        recording
            .mappings_of(run)
            .iter()
            .map(|mapping| mapping.filename.clone())
            .collect()
    };
    assert_eq!(files(ProgramRun { pid: 20, execs: 1 }), ["/bin/program"]);
    assert_eq!(files(ProgramRun { pid: 10, execs: 0 }), ["/bin/shell"]);
    // Between its fork and its exec, pid 20 ran the shell's program.
    assert_eq!(files(ProgramRun { pid: 20, execs: 0 }), ["/bin/shell"]);
    assert_eq!(recording.comm_of(ProgramRun { pid: 20, execs: 0 }), "shell");
}

#[test]
fn what_cannot_be_attributed_is_counted_and_a_gap_waits_for_the_next_sync() {
    // No hart-to-CPU words: hart i is CPU i. Hart 1 (CPU 1) runs "other".
    let info = info(Vec::new(), feature::TIMESTAMPS);
    let encoder = MessageEncoder::new(options());
    let branch = |hart: u16| {
        let mut bytes = Vec::new();
        encoder
            .encode(
                hart,
                &Body::IndirectBranch {
                    btype: BranchType::Indirect,
                    icnt: 4,
                    uaddr: 0x40,
                },
                Some(1),
                &mut bytes,
            )
            .unwrap();
        bytes
    };
    // A stretch before CPU 0's first switch runs in what that switch took off it: the
    // idle task, no process.
    let early = stretch(0, 1, 0x1000);
    let shell = stretch(0, 100, 0x1000); // CPU 0 at 10,000 ns: shell
    let first = [early.as_slice(), &shell].concat();
    // Bytes lost after the first piece: the second begins with a branch of hart 0,
    // unsynchronised, then hart 1's stretch (CPU 1: other).
    let hart1 = stretch(1, 310, 0x2000);
    let second = [branch(0).as_slice(), &hart1].concat();
    // An unreadable message (reserved MSEO) costs every hart its synchronisation: hart
    // 1's branch after it waits for a sync; hart 0's next stretch is the program's.
    let mut hart1_sync = Vec::new();
    encoder
        .encode(
            1,
            &Body::ProgTraceSync {
                sync: SyncReason(5),
                icnt: 0,
                faddr: 0x2000,
            },
            Some(330),
            &mut hart1_sync,
        )
        .unwrap();
    let after_corrupt = stretch(0, 350, 0x1100);
    let third = [
        hart1_sync.as_slice(),
        &[0b0000_0110, 0b0000_0010, 0xff],
        &branch(1),
        &after_corrupt,
    ]
    .concat();
    let bytes = recording(
        &info,
        &[
            (0, first.clone()),
            (first.len() as u64 + 10, second.clone()),
            (first.len() as u64 + 10 + second.len() as u64 + 1000, third),
        ],
    );
    let reader = PerfDataReader::from_bytes(&bytes, "gaps.data").unwrap();
    let recording = read_ntrace_recording(&reader).unwrap();
    let attribution = recording.attribute(options()).unwrap();
    let by_tid = |tid: u32| {
        attribution
            .threads
            .iter()
            .find(|thread| thread.tid == tid)
            .unwrap_or_else(|| panic!("tid {tid}"))
    };
    assert_eq!(by_tid(10).trace, shell);
    assert_eq!(by_tid(30).trace, hart1);
    // At 33,000 ns, CPU 1 runs pid 30's second thread.
    assert_eq!(by_tid(31).trace, hart1_sync);
    assert_eq!(by_tid(20).trace, after_corrupt);
    let unattributed = attribution.unattributed;
    assert_eq!(unattributed.no_task_messages, 3, "{unattributed:?}");
    assert_eq!(unattributed.unsynchronised_messages, 2, "{unattributed:?}");
    assert_eq!(unattributed.unreadable_messages, 1, "{unattributed:?}");

    // Without timestamps or a time conversion, there is nothing to split by.
    let untimed = super_info_without(feature::TIMESTAMPS);
    let bytes = recording_of(&untimed);
    let reader = PerfDataReader::from_bytes(&bytes, "untimed.data").unwrap();
    assert_eq!(
        read_ntrace_recording(&reader).unwrap().attribute(options()),
        Err(AttributionError::NoTimestamps)
    );
    let mut unconverted = info.clone();
    unconverted.time = None;
    let bytes = recording_of(&unconverted);
    let reader = PerfDataReader::from_bytes(&bytes, "unconverted.data").unwrap();
    assert_eq!(
        read_ntrace_recording(&reader).unwrap().attribute(options()),
        Err(AttributionError::NoTimeConversion)
    );
}

/// The idle task runs kernel code: in a trace that follows the kernel it is a thread
/// (perf's `swapper`), whose code is the kernel's; in a user-mode trace, nobody's.
#[test]
fn the_idle_task_is_a_thread_only_of_a_trace_of_the_kernel() {
    let early = stretch(0, 1, 0x1000); // before CPU 0's first switch: the idle task
    let shell = stretch(0, 100, 0x1000);
    let trace = [early.as_slice(), &shell].concat();
    for (privileges, idle_thread) in [(0, true), (2, true), (1, false)] {
        let mut info = info(Vec::new(), feature::TIMESTAMPS);
        info.privileges = privileges;
        let bytes = recording(&info, &[(0, trace.clone())]);
        let reader = PerfDataReader::from_bytes(&bytes, "idle.data").unwrap();
        let attribution = read_ntrace_recording(&reader)
            .unwrap()
            .attribute(options())
            .unwrap();
        let idle = attribution
            .threads
            .iter()
            .find(|thread| thread.run.pid == 0);
        if idle_thread {
            let idle = idle.unwrap_or_else(|| panic!("privileges {privileges}: no idle thread"));
            assert_eq!(idle.comm, "swapper");
            assert_eq!(idle.trace, early);
            assert_eq!(attribution.unattributed.no_task_messages, 0);
        } else {
            assert!(idle.is_none(), "a user-mode trace has no idle thread");
            assert_eq!(attribution.unattributed.no_task_messages, 3);
        }
    }
}

fn super_info_without(removed: u64) -> NtraceInfo {
    info(Vec::new(), feature::TIMESTAMPS & !removed)
}

fn recording_of(info: &NtraceInfo) -> Vec<u8> {
    recording(info, &[(0, stretch(0, 100, 0x1000))])
}
