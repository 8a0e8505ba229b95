//! `rvperf record`, `script` and `report` on the host kernel, for real, and their
//! interoperability with Linux's own perf in both directions (Debian's linux-perf,
//! installed by tools/install-deps.sh; missing tools fail the tests).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use common::{repository, rvperf_binary, scratch};
use perf_data::{
    AuxtraceChunk, BranchEntry, BranchFlags, BranchStack, EventAttr, EventDesc, Metadata,
    PerfDataReader, PerfDataWriter, SampleData, ATTR_FLAG_SAMPLE_ID_ALL, PERF_SAMPLE_BRANCH_ANY,
    PERF_SAMPLE_BRANCH_STACK, PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME,
};

/// The host workload, built once per test process.
fn hot_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let out = scratch().join(format!("hot-{}", std::process::id()));
        let status = Command::new("cc")
            .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
            .arg(&out)
            .arg(repository().join("tests/programs/host/hot.c"))
            .status()
            .expect("run cc (install build-essential)");
        assert!(status.success(), "cc failed");
        out
    })
}

fn perf() -> Command {
    let mut command = Command::new("perf");
    command.env("PAGER", "cat");
    command
}

fn run(command: &mut Command) -> (String, String) {
    let output = command.output().unwrap_or_else(|error| {
        panic!("cannot run {command:?}: {error} ({})", common::INSTALL_HINT)
    });
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{command:?} failed: {stderr}");
    (stdout, stderr)
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// (tid, ip) of every sample line of `perf script -F tid,ip`-like output.
fn tid_ip_pairs(output: &str) -> Vec<(u64, u64)> {
    output
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let tid = words.next()?.parse().ok()?;
            let ip = u64::from_str_radix(words.next()?, 16).ok()?;
            Some((tid, ip))
        })
        .collect()
}

/// Runs `rvperf record OPTIONS -o <scratch>/<tag>-<pid>.data -- hot [ROUNDS]` and
/// returns the file and the recorder's stderr.
fn record_hot(tag: &str, options: &[&str], rounds: Option<&str>) -> (PathBuf, String) {
    let data = scratch().join(format!("rvperf-{tag}-{}.data", std::process::id()));
    let mut command = Command::new(rvperf_binary());
    command
        .arg("record")
        .args(options)
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(hot_program());
    command.args(rounds);
    let (_, stderr) = run(&mut command);
    (data, stderr)
}

#[test]
fn record_finds_the_hot_function_and_linux_perf_reads_the_file() {
    let started = Instant::now();
    let (data, stderr) = record_hot("record", &["-F", "999", "-g"], None);
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        stderr.contains("samples") && stderr.contains("lost") && stderr.contains("bytes"),
        "{stderr}"
    );

    let reader = PerfDataReader::open(&data).expect("rvperf's perf.data reads back");
    let (mut samples, mut mmap2, mut comm, mut cpu_nanoseconds) = (0u64, 0, 0, 0u64);
    let mut records = reader.records();
    while let Some(record) = records.next_record().unwrap() {
        match record.record_type {
            9 => {
                samples += 1;
                cpu_nanoseconds += reader.parse_sample(&record).unwrap().period.unwrap_or(0);
            }
            10 => mmap2 += 1,
            3 => comm += 1,
            _ => {}
        }
    }
    assert!(mmap2 > 0 && comm > 0, "MMAP2 {mmap2}, COMM {comm}");
    // cpu-clock counts the workload's CPU time (its periods are nanoseconds), which is
    // its duration when it has the CPU; wall time bounds it from above on a busy machine.
    let duration = cpu_nanoseconds as f64 / 1e9;
    let expected = duration * 999.0;
    assert!(
        (samples as f64) > expected * 0.8 && (samples as f64) < expected * 1.2,
        "{samples} samples for {duration:.3} s of CPU at 999 Hz (expected about {expected:.0})"
    );
    assert!(
        duration > 0.1 && duration <= elapsed * 1.05,
        "CPU {duration:.3} s, wall {elapsed:.3} s"
    );

    // rvperf's own report: the hot function has at least 90% of the samples.
    let (report, _) = run(Command::new(rvperf_binary()).args(["report", "-i", text(&data)]));
    let top = report
        .lines()
        .find(|line| line.contains('%'))
        .unwrap_or_default();
    let share: f64 = top
        .trim()
        .split('%')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(top.ends_with("hot_function") && share >= 90.0, "{report}");

    // Linux perf reads the same file: same sample count, same hot symbol.
    // tid,time: one line per sample (ip or sym would add the call chain's lines).
    let (script, _) = run(perf().args(["script", "-i", text(&data), "-F", "tid,time"]));
    assert_eq!(
        script
            .lines()
            .filter(|line| !line.trim().is_empty())
            .count() as u64,
        samples,
        "perf script sample count"
    );
    let (perf_report, _) =
        run(perf().args(["report", "-i", text(&data), "--stdio", "--no-children"]));
    assert!(
        perf_report.contains(&format!("# Samples: {samples}")),
        "{perf_report}"
    );
    let perf_top = perf_report
        .lines()
        .find(|line| line.contains('%') && !line.starts_with('#'))
        .unwrap_or_default();
    assert!(perf_top.ends_with("hot_function"), "{perf_report}");
}

#[test]
fn script_agrees_with_linux_perf_on_its_own_recording() {
    let program = hot_program();
    let data = scratch().join(format!("perf-record-{}.data", std::process::id()));
    run(perf().args([
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-F",
        "999",
        "-o",
        text(&data),
        "--",
        text(program),
        "5",
    ]));
    let (ours, _) =
        run(Command::new(rvperf_binary()).args(["script", "-i", text(&data), "-F", "tid,ip"]));
    let (theirs, _) = run(perf().args(["script", "-i", text(&data), "-F", "tid,ip"]));
    let ours = tid_ip_pairs(&ours);
    let theirs = tid_ip_pairs(&theirs);
    assert!(
        theirs.len() > 20,
        "perf recorded only {} samples",
        theirs.len()
    );
    assert_eq!(ours, theirs, "every sample's tid and ip, in order");
    assert_report_tops_with_hot_function(&data);
}

/// `perf record -o -` streams pipe-mode perf.data (metadata as HEADER_ATTR and
/// HEADER_FEATURE records in the stream): rvperf reads it from a file and from its
/// standard input, sample for sample as perf script does, with -g callchains.
#[test]
fn reads_linux_perf_pipe_mode_from_a_file_and_from_stdin() {
    let program = hot_program();
    let data = scratch().join(format!("perf-pipe-{}.data", std::process::id()));
    let file = std::fs::File::create(&data).unwrap();
    let status = perf()
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "-g",
            "-o",
            "-",
            "--",
        ])
        .arg(program)
        .arg("3")
        .stdout(file)
        .status()
        .expect("run perf record");
    assert!(status.success(), "perf record -o - failed");
    let head = std::fs::read(&data).unwrap();
    assert_eq!(
        u64::from_le_bytes(head[8..16].try_into().unwrap()),
        16,
        "perf wrote a file-mode header, not a pipe"
    );
    // -G: the callchains are compared below; here one line per sample.
    let (theirs, _) = run(perf().args(["script", "-G", "-i", text(&data), "-F", "tid,ip"]));
    let theirs = tid_ip_pairs(&theirs);
    assert!(
        theirs.len() > 20,
        "perf recorded only {} samples",
        theirs.len()
    );
    let (ours, _) =
        run(Command::new(rvperf_binary()).args(["script", "-i", text(&data), "-F", "tid,ip"]));
    assert_eq!(
        tid_ip_pairs(&ours),
        theirs,
        "every sample's tid and ip, in order"
    );

    let stdin = std::fs::File::open(&data).unwrap();
    let (from_stdin, _) = run(Command::new(rvperf_binary())
        .args(["script", "-i", "-", "-F", "tid,ip"])
        .stdin(stdin));
    assert_eq!(
        tid_ip_pairs(&from_stdin),
        theirs,
        "the same read from stdin"
    );

    let reader = PerfDataReader::open(&data).expect("pipe-mode file reads");
    assert_eq!(reader.event_names(), vec!["cpu-clock".to_string()]);
    assert!(
        reader.info().hostname.is_some(),
        "HEADER_FEATURE sections read"
    );
    let mut records = reader.records();
    let mut callchains = 0;
    while let Some(record) = records.next_record().unwrap() {
        if record.record_type == perf_data::PERF_RECORD_SAMPLE {
            callchains += usize::from(reader.parse_sample(&record).unwrap().callchain.len() > 1);
        }
    }
    assert!(callchains > 20, "only {callchains} samples with callchains");
    assert_report_tops_with_hot_function(&data);
    let _ = std::fs::remove_file(&data);
}

#[test]
fn branch_stacks_print_exactly_as_linux_perf_prints_them() {
    let data = scratch().join(format!("brstack-{}.data", std::process::id()));
    let attr = EventAttr {
        type_: 1,
        config: 0,
        sample_period_or_freq: 100_000,
        sample_type: PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_BRANCH_STACK,
        read_format: 0,
        flags: ATTR_FLAG_SAMPLE_ID_ALL,
        branch_sample_type: PERF_SAMPLE_BRANCH_ANY,
    };
    let file = std::fs::File::create(&data).unwrap();
    let events = vec![EventDesc {
        attr,
        name: "cpu-clock".to_owned(),
        ids: vec![],
    }];
    let mut writer = PerfDataWriter::new(std::io::BufWriter::new(file), events).unwrap();
    for sample in 0..5u64 {
        let entries = (0..4u64)
            .map(|entry| {
                let flags = BranchFlags {
                    mispred: entry % 2 == 1,
                    predicted: entry % 3 == 0,
                    in_tx: entry == 2,
                    abort: sample == 4 && entry == 3,
                    cycles: (sample * 7 + entry) as u16,
                    branch_type: [1u8, 4, 6, 0][entry as usize],
                    ..BranchFlags::default()
                };
                BranchEntry::new(
                    0x40_1000 + sample * 16 + entry,
                    0x40_2000 + entry * 8,
                    flags,
                )
            })
            .collect();
        let data = user_branch_sample(0x40_1000 + sample, 4242, 1_000_000 + sample * 1000, entries);
        writer.write_sample(0, &data).unwrap();
    }
    writer
        .finish(&Metadata::from_host("rvperf-test", vec![]))
        .unwrap();
    let (ours, _) =
        run(Command::new(rvperf_binary()).args(["script", "-i", text(&data), "-F", "ip,brstack"]));
    let (theirs, _) = run(perf().args(["script", "-i", text(&data), "-F", "ip,brstack"]));
    assert_eq!(ours.lines().count(), 5);
    assert_eq!(ours, theirs);
}

/// `rvperf record --keep-aux` stores rvperf_ctr's AUX data as PERF_RECORD_AUXTRACE;
/// rvperf script decodes it into the samples the default recording would have written,
/// which Linux perf prints identically. (The real recorder is checked in the riscv64
/// guest, tools/vm; here the same records are written both ways.)
#[test]
fn kept_ctr_aux_data_prints_as_its_converted_samples_do() {
    use perf_abi::ctr::{encode_ctr_record, CtrBranch, CtrRecordHeader, RVPERF_AUXTRACE_CTR};
    let attr = EventAttr {
        type_: 0,
        config: 0,
        sample_period_or_freq: 20_000,
        sample_type: PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_BRANCH_STACK,
        read_format: 0,
        flags: ATTR_FLAG_SAMPLE_ID_ALL,
        branch_sample_type: PERF_SAMPLE_BRANCH_ANY,
    };
    let events = || {
        vec![EventDesc {
            attr,
            name: "cycles".to_owned(),
            ids: vec![],
        }]
    };
    let record = |sample: u64| {
        let header = CtrRecordHeader {
            flags: 0,
            cpu: 0,
            pid: 4242,
            tid: 4243,
            depth: 16,
            time: 1_000_000 + sample * 1000,
            ip: 0x1_0000 + sample * 4,
            period: 20_000,
        };
        let branches: Vec<CtrBranch> = (0..3 + sample)
            .map(|entry| CtrBranch {
                from: 0x1_0100 + sample * 32 + entry * 4,
                to: 0x1_0200 + entry * 8,
                flags_word: BranchFlags {
                    mispred: entry == 1,
                    predicted: entry != 1,
                    cycles: (entry * 3) as u16,
                    branch_type: [1u8, 4, 6][entry as usize % 3],
                    ..BranchFlags::default()
                }
                .to_word(),
            })
            .collect();
        (header, branches)
    };
    let converted = scratch().join(format!("ctr-converted-{}.data", std::process::id()));
    let kept = scratch().join(format!("ctr-kept-{}.data", std::process::id()));
    let foreign = scratch().join(format!("aux-foreign-{}.data", std::process::id()));
    let create = |path: &Path| {
        PerfDataWriter::new(
            std::io::BufWriter::new(std::fs::File::create(path).unwrap()),
            events(),
        )
        .unwrap()
    };
    let mut samples_writer = create(&converted);
    let mut aux_writer = create(&kept);
    aux_writer
        .write_auxtrace_info(RVPERF_AUXTRACE_CTR, &[42, 0, 0])
        .unwrap();
    let mut offset = 0;
    for chunk in 0..3u64 {
        let mut bytes = Vec::new();
        for sample in chunk * 2..chunk * 2 + 2 {
            let (header, branches) = record(sample);
            bytes.extend(encode_ctr_record(&header, &branches));
            let entries = branches
                .iter()
                .map(|b| BranchEntry {
                    from: b.from,
                    to: b.to,
                    flags: b.flags_word,
                })
                .collect();
            let data = SampleData {
                pid: header.pid,
                ..user_branch_sample(header.ip, header.tid, header.time, entries)
            };
            samples_writer.write_sample(0, &data).unwrap();
        }
        aux_writer
            .write_auxtrace(&AuxtraceChunk {
                offset,
                reference: 0,
                idx: 0,
                tid: 4242,
                cpu: 0,
                data: &bytes,
            })
            .unwrap();
        offset += bytes.len() as u64;
    }
    for writer in [samples_writer, aux_writer] {
        writer
            .finish(&Metadata::from_host("rvperf-test", vec![]))
            .unwrap();
    }
    let script = |path: &Path, fields: &str| {
        run(Command::new(rvperf_binary()).args(["script", "-i", text(path), "-F", fields])).0
    };
    let from_aux = script(&kept, "tid,ip,brstack");
    assert_eq!(from_aux.lines().count(), 6, "{from_aux}");
    assert_eq!(from_aux, script(&converted, "tid,ip,brstack"));
    let (theirs, _) = run(perf().args(["script", "-i", text(&converted), "-F", "ip,brstack"]));
    assert_eq!(script(&kept, "ip,brstack"), theirs);

    // AUX data of a type rvperf cannot decode is reported, with its size, not skipped.
    let mut writer = create(&foreign);
    writer.write_auxtrace_info(1, &[]).unwrap();
    writer
        .write_auxtrace(&AuxtraceChunk {
            offset: 0,
            reference: 0,
            idx: 0,
            tid: 1,
            cpu: 0,
            data: &[0u8; 64],
        })
        .unwrap();
    writer
        .finish(&Metadata::from_host("rvperf-test", vec![]))
        .unwrap();
    let (_, stderr) = run(Command::new(rvperf_binary()).args(["script", "-i", text(&foreign)]));
    assert!(
        stderr.contains("1 AUXTRACE chunks (64 bytes) of type 1 not decoded"),
        "{stderr}"
    );
    for path in [converted, kept, foreign] {
        let _ = std::fs::remove_file(path);
    }
}

/// Counts the SAMPLE records of a perf.data file with rvperf's reader.
fn sample_count(data: &Path) -> u64 {
    let reader = PerfDataReader::open(data).expect("perf.data reads back");
    let mut records = reader.records();
    let mut samples = 0;
    while let Some(record) = records.next_record().unwrap() {
        samples += u64::from(record.record_type == 9);
    }
    samples
}

#[test]
fn record_attaches_to_a_running_process_and_stops_when_it_exits() {
    let mut workload = Command::new(hot_program())
        .arg("40")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let data = scratch().join(format!("rvperf-pid-{}.data", std::process::id()));
    let pid = workload.id().to_string();
    let recorder = Command::new(rvperf_binary())
        .args(["record", "-F", "499", "-p", &pid, "-o", text(&data)])
        .output()
        .unwrap();
    // The recorder returns by itself once the process has exited (the test reaps it after).
    assert!(
        recorder.status.success(),
        "{}",
        String::from_utf8_lossy(&recorder.stderr)
    );
    workload.wait().unwrap();
    assert!(sample_count(&data) > 20);
}

#[test]
fn record_system_wide_sees_the_workload() {
    let (data, _) = record_hot("all", &["-a", "-F", "499"], Some("20"));
    let (report, _) = run(Command::new(rvperf_binary()).args(["report", "-i", text(&data)]));
    assert!(report.contains("hot_function"), "{report}");
}

#[test]
fn sigint_stops_recording_cleanly_with_everything_read_so_far() {
    let data = scratch().join(format!("rvperf-sigint-{}.data", std::process::id()));
    let recorder = Command::new(rvperf_binary())
        .args([
            "record",
            "-F",
            "499",
            "-o",
            text(&data),
            "--",
            text(hot_program()),
            "1000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // SAFETY: plain kill(2) on the recorder's pid, which this test spawned and has not reaped.
    let sent = unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    assert_eq!(sent, 0);
    let output = recorder.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("samples"),
        "no summary after SIGINT: {stderr}"
    );
    assert!(
        sample_count(&data) > 50,
        "samples recorded before SIGINT were lost"
    );
    let (script, _) = run(perf().args(["script", "-i", text(&data), "-F", "tid,time"]));
    assert_eq!(script.lines().count() as u64, sample_count(&data));
}

/// Runs rvperf with `args`, which must fail; returns what it printed on stderr.
fn rvperf_failure(args: &[&str]) -> String {
    let output = Command::new(rvperf_binary()).args(args).output().unwrap();
    assert!(!output.status.success(), "rvperf {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_events_and_bad_files_are_reported_in_one_line() {
    let record = |event| ["record", "-e", event, "-o", "/dev/null", "--", "true"];
    let stderr = rvperf_failure(&record("no-such-event"));
    assert!(
        stderr.contains("no-such-event") && stderr.lines().count() == 1,
        "{stderr}"
    );
    let stderr = rvperf_failure(&record("nopmu/config=1/"));
    assert!(stderr.contains("nopmu"), "PMU not named: {stderr}");

    // A perf.data cut short: an error with the offset, not a panic.
    let (data, _) = record_hot("cut", &["-F", "499"], Some("3"));
    let bytes = std::fs::read(&data).unwrap();
    let cut = scratch().join(format!("rvperf-cut-{}-short.data", std::process::id()));
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let stderr = rvperf_failure(&["report", "-i", text(&cut)]);
    assert!(
        stderr.starts_with("rvperf: error:")
            && stderr.contains("offset")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn event_groups_record_every_member_and_perf_names_them() {
    let (data, _) = record_hot(
        "group",
        &["-e", "{cpu-clock,task-clock}:u", "-F", "499"],
        Some("10"),
    );
    let (events, _) = run(perf().args(["script", "-i", text(&data), "-F", "event"]));
    let cpu_clock = events
        .lines()
        .filter(|line| line.trim() == "cpu-clock:u:")
        .count();
    let task_clock = events
        .lines()
        .filter(|line| line.trim() == "task-clock:u:")
        .count();
    assert!(
        cpu_clock > 10 && task_clock > 10,
        "cpu-clock {cpu_clock}, task-clock {task_clock}:\n{events}"
    );
    // :u excludes the kernel: no sample in kernel addresses.
    let (ips, _) = run(perf().args(["script", "-i", text(&data), "-F", "ip"]));
    assert!(
        ips.lines().all(|line| !line.trim().starts_with("ffff")),
        "kernel samples with :u"
    );
}

/// A user-mode (PERF_RECORD_MISC_USER) SAMPLE of thread `tid` (its own process) with a
/// branch stack.
fn user_branch_sample(ip: u64, tid: u32, time: u64, entries: Vec<BranchEntry>) -> SampleData {
    SampleData {
        ip,
        pid: tid,
        tid,
        time,
        branch_stack: Some(BranchStack {
            hw_idx: None,
            entries,
        }),
        misc: 2,
        ..SampleData::default()
    }
}

/// `rvperf report` of `data` (a recording of the hot program) puts hot_function first.
fn assert_report_tops_with_hot_function(data: &Path) {
    let (report, _) = run(Command::new(rvperf_binary()).args(["report", "-i", text(data)]));
    assert!(
        report
            .lines()
            .nth(2)
            .unwrap_or_default()
            .ends_with("hot_function"),
        "{report}"
    );
}
