use super::*;
use proptest::prelude::*;

/// Builds record bodies field by field in native order.
#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn u64(mut self, value: u64) -> Self {
        self.0.extend_from_slice(&value.to_ne_bytes());
        self
    }
    fn u32(mut self, value: u32) -> Self {
        self.0.extend_from_slice(&value.to_ne_bytes());
        self
    }
    fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    /// A NUL-terminated string padded to 8 bytes, as the kernel writes names.
    fn c_string(mut self, text: &str) -> Self {
        self.0.extend_from_slice(text.as_bytes());
        self.0.push(0);
        while self.0.len() % 8 != 0 {
            self.0.push(0);
        }
        self
    }
    /// The sample_id_all trailer for `TRAILER_FORMAT`.
    fn trailer(self) -> Self {
        self.u32(77).u32(78).u64(5_000).u64(9).u32(3).u32(0)
    }
}

const TRAILER_FORMAT: SampleFormat = SampleFormat {
    sample_type: (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_ID | b::PERF_SAMPLE_CPU)
        as u64,
    read_format: 0,
    branch_sample_type: 0,
    sample_id_all: true,
    sample_regs_user: 0,
    sample_regs_intr: 0,
};

const TRAILER: SampleId = SampleId {
    pid: Some(77),
    tid: Some(78),
    time: Some(5_000),
    id: Some(9),
    stream_id: None,
    cpu: Some(3),
};

/// Encodes the branch flags word per the uapi bitfield order (mispred:1,
/// predicted:1, in_tx:1, abort:1, cycles:16, type:4, spec:2, new_type:4,
/// priv:3), independently of the accessors the parser uses.
fn flags_word(f: &BranchFlags) -> u64 {
    u64::from(f.mispred)
        | u64::from(f.predicted) << 1
        | u64::from(f.in_tx) << 2
        | u64::from(f.abort) << 3
        | u64::from(f.cycles) << 4
        | u64::from(f.branch_type) << 20
        | u64::from(f.spec) << 24
        | u64::from(f.new_type) << 26
        | u64::from(f.privilege) << 30
}

#[test]
fn branch_flags_decode_every_field() {
    let flags = BranchFlags {
        mispred: true,
        predicted: false,
        in_tx: true,
        abort: true,
        cycles: 0xbeef,
        branch_type: 15,
        spec: 2,
        new_type: 5,
        privilege: 3,
    };
    assert_eq!(BranchFlags::from_word(flags_word(&flags)), flags);
    assert_eq!(BranchFlags::from_word(0), BranchFlags::default());
}

#[test]
fn full_sample_round_trip() {
    let format = SampleFormat {
        sample_type: u64::from(
            b::PERF_SAMPLE_IDENTIFIER
                | b::PERF_SAMPLE_IP
                | b::PERF_SAMPLE_TID
                | b::PERF_SAMPLE_TIME
                | b::PERF_SAMPLE_ADDR
                | b::PERF_SAMPLE_ID
                | b::PERF_SAMPLE_STREAM_ID
                | b::PERF_SAMPLE_CPU
                | b::PERF_SAMPLE_PERIOD
                | b::PERF_SAMPLE_READ
                | b::PERF_SAMPLE_CALLCHAIN
                | b::PERF_SAMPLE_RAW
                | b::PERF_SAMPLE_BRANCH_STACK
                | b::PERF_SAMPLE_REGS_USER
                | b::PERF_SAMPLE_STACK_USER
                | b::PERF_SAMPLE_WEIGHT
                | b::PERF_SAMPLE_DATA_SRC
                | b::PERF_SAMPLE_TRANSACTION
                | b::PERF_SAMPLE_REGS_INTR
                | b::PERF_SAMPLE_PHYS_ADDR
                | b::PERF_SAMPLE_CGROUP
                | b::PERF_SAMPLE_DATA_PAGE_SIZE
                | b::PERF_SAMPLE_CODE_PAGE_SIZE
                | b::PERF_SAMPLE_AUX,
        ),
        read_format: u64::from(
            b::PERF_FORMAT_GROUP
                | b::PERF_FORMAT_TOTAL_TIME_ENABLED
                | b::PERF_FORMAT_TOTAL_TIME_RUNNING
                | b::PERF_FORMAT_ID
                | b::PERF_FORMAT_LOST,
        ),
        branch_sample_type: u64::from(b::PERF_SAMPLE_BRANCH_ANY | b::PERF_SAMPLE_BRANCH_HW_INDEX),
        sample_id_all: true,
        sample_regs_user: 0b1011,
        sample_regs_intr: 0b1,
    };
    let flags = BranchFlags {
        predicted: true,
        cycles: 12,
        branch_type: b::PERF_BR_COND as u8,
        ..BranchFlags::default()
    };
    let body = Body::default()
        .u64(99) // identifier
        .u64(0x40_1000) // ip
        .u32(10)
        .u32(11)
        .u64(123_456) // time
        .u64(0xdead) // addr
        .u64(99) // id
        .u64(100) // stream_id
        .u32(2)
        .u32(0) // cpu
        .u64(250_000) // period
        .u64(2) // read.nr
        .u64(1_000) // time_enabled
        .u64(900) // time_running
        .u64(5)
        .u64(99)
        .u64(0)
        .u64(6)
        .u64(100)
        .u64(1)
        .u64(3) // callchain nr
        .u64(0xffff_ffff_8000_0000)
        .u64(0x40_1000)
        .u64(0x40_2000)
        .u32(4)
        .bytes(&[1, 2, 3, 4]) // raw
        .u64(1) // branch nr
        .u64(7) // hw_idx
        .u64(0x40_1000)
        .u64(0x40_1020)
        .u64(flags_word(&flags))
        .u64(2) // regs_user abi
        .u64(1)
        .u64(2)
        .u64(3)
        .u64(8) // stack_user size
        .bytes(&[9; 8])
        .u64(4) // dyn_size
        .u64(33) // weight
        .u64(44) // data_src
        .u64(55) // transaction
        .u64(0) // regs_intr abi 0: no values follow
        .u64(0x1000) // phys_addr
        .u64(66) // cgroup
        .u64(4096) // data page size
        .u64(4096) // code page size
        .u64(3)
        .bytes(&[7, 7, 7]); // aux
    let Record::Sample(sample) = parse_record(b::PERF_RECORD_SAMPLE, 0, &body.0, &format).unwrap()
    else {
        panic!("not a sample");
    };
    assert_eq!(sample.identifier, Some(99));
    assert_eq!(sample.ip, Some(0x40_1000));
    assert_eq!((sample.pid, sample.tid), (Some(10), Some(11)));
    assert_eq!(
        (sample.time, sample.addr, sample.id),
        (Some(123_456), Some(0xdead), Some(99))
    );
    assert_eq!(
        (sample.stream_id, sample.cpu, sample.period),
        (Some(100), Some(2), Some(250_000))
    );
    let read = sample.read.unwrap();
    assert_eq!(
        (read.time_enabled, read.time_running),
        (Some(1_000), Some(900))
    );
    assert_eq!(
        read.values,
        vec![
            ReadGroupEntry {
                value: 5,
                id: Some(99),
                lost: Some(0)
            },
            ReadGroupEntry {
                value: 6,
                id: Some(100),
                lost: Some(1)
            },
        ]
    );
    assert_eq!(
        sample.callchain.unwrap().to_vec(),
        vec![0xffff_ffff_8000_0000, 0x40_1000, 0x40_2000]
    );
    assert_eq!(sample.raw, Some(&[1u8, 2, 3, 4][..]));
    let branches = sample.branch_stack.unwrap();
    assert_eq!(branches.hw_idx, Some(7));
    let entries: Vec<_> = branches.iter().collect();
    assert_eq!(
        entries,
        vec![BranchEntry {
            from: 0x40_1000,
            to: 0x40_1020,
            flags
        }]
    );
    assert_eq!(
        format_brstack_entry(&entries[0]),
        "0x401000/0x401020/P/-/-/12/COND"
    );
    let regs = sample.regs_user.unwrap();
    assert_eq!((regs.abi, regs.values.to_vec()), (2, vec![1, 2, 3]));
    assert_eq!(sample.stack_user, Some(&[9u8; 4][..]));
    assert_eq!(
        (sample.weight, sample.data_src, sample.transaction),
        (Some(33), Some(44), Some(55))
    );
    assert_eq!(sample.regs_intr.unwrap().values.len(), 0);
    assert_eq!((sample.phys_addr, sample.cgroup), (Some(0x1000), Some(66)));
    assert_eq!(
        (sample.data_page_size, sample.code_page_size),
        (Some(4096), Some(4096))
    );
    assert_eq!(sample.aux, Some(&[7u8, 7, 7][..]));
}

#[test]
fn non_group_read_and_no_hw_idx() {
    let format = SampleFormat {
        sample_type: u64::from(b::PERF_SAMPLE_READ | b::PERF_SAMPLE_BRANCH_STACK),
        read_format: u64::from(b::PERF_FORMAT_ID),
        ..SampleFormat::default()
    };
    let body = Body::default().u64(42).u64(7).u64(0);
    let Record::Sample(sample) = parse_record(b::PERF_RECORD_SAMPLE, 0, &body.0, &format).unwrap()
    else {
        panic!("not a sample");
    };
    let read = sample.read.unwrap();
    assert_eq!(
        read.values,
        vec![ReadGroupEntry {
            value: 42,
            id: Some(7),
            lost: None
        }]
    );
    let branches = sample.branch_stack.unwrap();
    assert_eq!((branches.hw_idx, branches.len()), (None, 0));
}

#[test]
fn read_values_of_an_event_fd() {
    let read_format = u64::from(
        b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING | b::PERF_FORMAT_ID,
    );
    let body = Body::default().u64(5).u64(1000).u64(600).u64(9);
    let read = parse_read_values(&body.0, read_format).unwrap();
    assert_eq!(
        (read.time_enabled, read.time_running),
        (Some(1000), Some(600))
    );
    assert_eq!(
        read.values,
        vec![ReadGroupEntry {
            value: 5,
            id: Some(9),
            lost: None
        }]
    );
    // A read(2) shorter than the format: the missing field is named.
    let error = parse_read_values(&body.0[..16], read_format).unwrap_err();
    assert!(
        matches!(
            error,
            RecordError::Truncated {
                record_type: b::PERF_RECORD_READ,
                offset: 16,
                field: "read.time_running",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn mmap_and_mmap2_forms() {
    let body = Body::default()
        .u32(1)
        .u32(2)
        .u64(0x40_0000)
        .u64(0x1000)
        .u64(0)
        .c_string("/bin/true")
        .trailer();
    assert_eq!(
        parse_record(b::PERF_RECORD_MMAP, 0, &body.0, &TRAILER_FORMAT).unwrap(),
        Record::Mmap(MmapRecord {
            pid: 1,
            tid: 2,
            addr: 0x40_0000,
            len: 0x1000,
            pgoff: 0,
            filename: b"/bin/true",
            sample_id: TRAILER,
        })
    );
    let head = Body::default()
        .u32(1)
        .u32(2)
        .u64(0x40_0000)
        .u64(0x1000)
        .u64(0x10);
    let inode = Body(head.0.clone())
        .u32(8)
        .u32(1)
        .u64(1234)
        .u64(5)
        .u32(5)
        .u32(2)
        .c_string("/lib/libc.so.6")
        .trailer();
    let Record::Mmap2(mmap2) =
        parse_record(b::PERF_RECORD_MMAP2, 0, &inode.0, &TRAILER_FORMAT).unwrap()
    else {
        panic!("not mmap2");
    };
    assert_eq!(
        mmap2.file_id,
        Mmap2FileId::Inode {
            maj: 8,
            min: 1,
            ino: 1234,
            ino_generation: 5
        }
    );
    assert_eq!((mmap2.prot, mmap2.flags, mmap2.pgoff), (5, 2, 0x10));
    assert_eq!(
        (mmap2.filename, mmap2.sample_id),
        (&b"/lib/libc.so.6"[..], TRAILER)
    );
    let build_id: Vec<u8> = (1..=20).collect();
    let with_build_id = Body(head.0)
        .bytes(&[20, 0, 0, 0])
        .bytes(&build_id)
        .u32(5)
        .u32(2)
        .c_string("/lib/libc.so.6")
        .trailer();
    let misc = b::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;
    let Record::Mmap2(mmap2) = parse_record(
        b::PERF_RECORD_MMAP2,
        misc,
        &with_build_id.0,
        &TRAILER_FORMAT,
    )
    .unwrap() else {
        panic!("not mmap2");
    };
    assert_eq!(mmap2.file_id, Mmap2FileId::BuildId(&build_id));
    assert_eq!(mmap2.filename, b"/lib/libc.so.6");
}

#[test]
fn side_band_records_with_trailers() {
    let f = &TRAILER_FORMAT;
    let comm = Body::default().u32(5).u32(6).c_string("worker").trailer();
    assert_eq!(
        parse_record(
            b::PERF_RECORD_COMM,
            b::PERF_RECORD_MISC_COMM_EXEC as u16,
            &comm.0,
            f
        )
        .unwrap(),
        Record::Comm(CommRecord {
            pid: 5,
            tid: 6,
            comm: b"worker",
            exec: true,
            sample_id: TRAILER
        })
    );
    let task_body = Body::default()
        .u32(5)
        .u32(1)
        .u32(6)
        .u32(1)
        .u64(777)
        .trailer();
    let task = TaskRecord {
        pid: 5,
        ppid: 1,
        tid: 6,
        ptid: 1,
        time: 777,
        sample_id: TRAILER,
    };
    assert_eq!(
        parse_record(b::PERF_RECORD_FORK, 0, &task_body.0, f).unwrap(),
        Record::Fork(task)
    );
    assert_eq!(
        parse_record(b::PERF_RECORD_EXIT, 0, &task_body.0, f).unwrap(),
        Record::Exit(task)
    );
    let lost = Body::default().u64(9).u64(12).trailer();
    assert_eq!(
        parse_record(b::PERF_RECORD_LOST, 0, &lost.0, f).unwrap(),
        Record::Lost(LostRecord {
            id: 9,
            lost: 12,
            sample_id: TRAILER
        })
    );
    let lost_samples = Body::default().u64(3).trailer();
    assert_eq!(
        parse_record(b::PERF_RECORD_LOST_SAMPLES, 0, &lost_samples.0, f).unwrap(),
        Record::LostSamples {
            lost: 3,
            sample_id: TRAILER
        }
    );
    let throttle_body = Body::default().u64(1_000).u64(9).u64(10).trailer();
    let throttle = ThrottleRecord {
        time: 1_000,
        id: 9,
        stream_id: 10,
        sample_id: TRAILER,
    };
    assert_eq!(
        parse_record(b::PERF_RECORD_THROTTLE, 0, &throttle_body.0, f).unwrap(),
        Record::Throttle(throttle)
    );
    assert_eq!(
        parse_record(b::PERF_RECORD_UNTHROTTLE, 0, &throttle_body.0, f).unwrap(),
        Record::Unthrottle(throttle)
    );
    let out_preempt =
        (b::PERF_RECORD_MISC_SWITCH_OUT | b::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) as u16;
    assert_eq!(
        parse_record(
            b::PERF_RECORD_SWITCH,
            out_preempt,
            &Body::default().trailer().0,
            f
        )
        .unwrap(),
        Record::Switch(SwitchRecord {
            out: true,
            preempt: true,
            next_prev_pid: None,
            next_prev_tid: None,
            sample_id: TRAILER
        })
    );
    let wide = Body::default().u32(40).u32(41).trailer();
    assert_eq!(
        parse_record(b::PERF_RECORD_SWITCH_CPU_WIDE, 0, &wide.0, f).unwrap(),
        Record::SwitchCpuWide(SwitchRecord {
            out: false,
            preempt: false,
            next_prev_pid: Some(40),
            next_prev_tid: Some(41),
            sample_id: TRAILER
        })
    );
    let aux_flags = u64::from(b::PERF_AUX_FLAG_TRUNCATED | b::PERF_AUX_FLAG_PARTIAL);
    let aux = Body::default().u64(4096).u64(512).u64(aux_flags).trailer();
    let Record::Aux(aux) = parse_record(b::PERF_RECORD_AUX, 0, &aux.0, f).unwrap() else {
        panic!("not aux");
    };
    assert_eq!(
        (aux.aux_offset, aux.aux_size, aux.sample_id),
        (4096, 512, TRAILER)
    );
    assert!(aux.truncated() && aux.partial() && !aux.overwrite() && !aux.collision());
    let itrace = Body::default().u32(5).u32(6).trailer();
    assert_eq!(
        parse_record(b::PERF_RECORD_ITRACE_START, 0, &itrace.0, f).unwrap(),
        Record::ItraceStart {
            pid: 5,
            tid: 6,
            sample_id: TRAILER
        }
    );
}

#[test]
fn identifier_fills_id_in_trailer_and_no_trailer_without_sample_id_all() {
    let format = SampleFormat {
        sample_type: u64::from(b::PERF_SAMPLE_IDENTIFIER),
        sample_id_all: true,
        ..SampleFormat::default()
    };
    let body = Body::default().u64(1).u64(2).u64(55);
    let Record::Lost(lost) = parse_record(b::PERF_RECORD_LOST, 0, &body.0, &format).unwrap() else {
        panic!("not lost");
    };
    assert_eq!((lost.lost, lost.sample_id.id), (2, Some(55)));
    let plain = SampleFormat {
        sample_id_all: false,
        ..TRAILER_FORMAT
    };
    let Record::Lost(lost) = parse_record(b::PERF_RECORD_LOST, 0, &body.0, &plain).unwrap() else {
        panic!("not lost");
    };
    assert_eq!(lost.sample_id, SampleId::default());
}

#[test]
fn unknown_types_are_kept_whole() {
    let body = [1u8, 2, 3];
    assert_eq!(
        parse_record(b::PERF_RECORD_MAX + 7, 3, &body, &TRAILER_FORMAT).unwrap(),
        Record::Other {
            record_type: b::PERF_RECORD_MAX + 7,
            misc: 3,
            body: &body
        }
    );
    assert!(matches!(
        parse_record(b::PERF_RECORD_READ, 0, &body, &TRAILER_FORMAT).unwrap(),
        Record::Other { .. }
    ));
}

#[test]
fn truncation_reports_the_offset() {
    let format = SampleFormat {
        sample_type: u64::from(b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME),
        ..SampleFormat::default()
    };
    let body = Body::default().u64(1).u32(2).u32(3).u32(4);
    assert_eq!(
        parse_record(b::PERF_RECORD_SAMPLE, 0, &body.0, &format),
        Err(RecordError::Truncated {
            record_type: b::PERF_RECORD_SAMPLE,
            offset: 16,
            field: "time",
            needed: 8,
            available: 4
        })
    );
    let callchain = SampleFormat {
        sample_type: u64::from(b::PERF_SAMPLE_CALLCHAIN),
        ..SampleFormat::default()
    };
    let huge = Body::default().u64(u64::MAX / 2);
    assert!(matches!(
        parse_record(b::PERF_RECORD_SAMPLE, 0, &huge.0, &callchain),
        Err(RecordError::BadCount {
            offset: 8,
            field: "callchain.ips",
            ..
        })
    ));
    let short = Body::default().u32(1);
    assert!(matches!(
        parse_record(b::PERF_RECORD_LOST, 0, &short.0, &TRAILER_FORMAT),
        Err(RecordError::Truncated {
            field: "sample_id trailer",
            ..
        })
    ));
}

#[test]
fn brstack_formatting_matches_perf_6_1() {
    let entry = |flags| BranchEntry {
        from: 0xffff_ffff_8100_0000,
        to: 0x7f00_0000_1234,
        flags,
    };
    assert_eq!(
        format_brstack_entry(&entry(BranchFlags::default())),
        "0xffffffff81000000/0x7f0000001234/-/-/-/0/"
    );
    let mispredicted = BranchFlags {
        mispred: true,
        in_tx: true,
        abort: true,
        cycles: 65535,
        branch_type: b::PERF_BR_IND_CALL as u8,
        ..BranchFlags::default()
    };
    assert_eq!(
        format_brstack_entry(&entry(mispredicted)),
        "0xffffffff81000000/0x7f0000001234/M/X/A/65535/IND_CALL"
    );
    // predicted wins over mispred, as in perf's mispred_str().
    let both = BranchFlags {
        mispred: true,
        predicted: true,
        ..BranchFlags::default()
    };
    assert!(format_brstack_entry(&entry(both)).contains("/P/"));
    let extended = BranchFlags {
        branch_type: b::PERF_BR_EXTEND_ABI as u8,
        new_type: b::PERF_BR_NEW_FAULT_DATA as u8,
        ..BranchFlags::default()
    };
    assert!(format_brstack_entry(&entry(extended)).ends_with("/0/FAULT_DATA"));
    let ret = BranchFlags {
        branch_type: b::PERF_BR_RET as u8,
        ..BranchFlags::default()
    };
    assert!(format_brstack_entry(&entry(ret)).ends_with("/-/-/-/0/RET"));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        record_type in 0u32..20,
        misc in any::<u16>(),
        sample_type in any::<u64>(),
        read_format in 0u64..32,
        branch_sample_type in any::<u64>(),
        sample_id_all in any::<bool>(),
        regs in any::<u64>(),
        body in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let format = SampleFormat {
            sample_type,
            read_format,
            branch_sample_type,
            sample_id_all,
            sample_regs_user: regs,
            sample_regs_intr: regs.rotate_left(17),
        };
        if let Ok(Record::Sample(sample)) = parse_record(record_type, misc, &body, &format) {
            // Touch the lazily decoded views too.
            if let Some(branches) = sample.branch_stack {
                for entry in branches.iter() {
                    let _ = format_brstack_entry(&entry);
                }
            }
            if let Some(chain) = sample.callchain {
                let _ = chain.to_vec();
            }
        }
    }
}

#[test]
fn branch_flags_pack_and_unpack_through_the_kernel_layout() {
    let flags = BranchFlags {
        mispred: true,
        predicted: false,
        in_tx: true,
        abort: false,
        cycles: 0xbeef,
        branch_type: 15,
        spec: 2,
        new_type: 5,
        privilege: 1,
    };
    assert_eq!(BranchFlags::from_word(flags.to_word()), flags);
    // mispred is bit 0 and cycles bits 4..20 (include/uapi/linux/perf_event.h).
    assert_eq!(flags.to_word() & 1, 1);
    assert_eq!((flags.to_word() >> 4) & 0xffff, 0xbeef);
}
