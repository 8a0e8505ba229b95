//! `rvperf record`, `script` and `report` on the host kernel, for real, and their
//! interoperability with Linux's own perf in both directions (Debian's linux-perf,
//! installed by tools/install-deps.sh; missing tools fail the tests).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::consumers::run_tool;
use common::{repository, rvperf_binary, scratch};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use perf_abi::sys::bindings::perf_event_attr;
use perf_abi::sys::bindings::{
    PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PERF_SAMPLE_BRANCH_ANY, PERF_SAMPLE_BRANCH_STACK,
    PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME,
};
use perf_abi::{BranchEntry, BranchFlags, BranchStack, Sample};
use perf_data::{AuxtraceChunk, EventDesc, Metadata, PerfDataReader, PerfDataWriter};

/// tests/programs/host/NAME.c, built once per test process.
fn host_program(name: &str) -> PathBuf {
    static PROGRAMS: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut programs = PROGRAMS.get_or_init(Default::default).lock().unwrap();
    programs
        .entry(name.to_owned())
        .or_insert_with(|| {
            let out = scratch().join(format!("{name}-{}", std::process::id()));
            let status = Command::new("cc")
                .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
                .arg(&out)
                .arg(repository().join(format!("tests/programs/host/{name}.c")))
                .status()
                .expect("run cc (install build-essential)");
            assert!(status.success(), "cc failed");
            out
        })
        .clone()
}

/// The hot workload (tests/programs/host/hot.c).
fn hot_program() -> PathBuf {
    host_program("hot")
}

fn perf() -> Command {
    let mut command = Command::new("perf");
    command.env("PAGER", "cat");
    command
}

/// Runs `command`, which must succeed; its standard output and error.
fn run(command: &mut Command) -> (String, String) {
    let output = run_tool(command, common::INSTALL_HINT);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
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

/// `<scratch>/rvperf-<tag>-<pid>.data`.
fn scratch_data(tag: &str) -> PathBuf {
    scratch().join(format!("rvperf-{tag}-{}.data", std::process::id()))
}

/// Runs `rvperf record OPTIONS -o <scratch>/rvperf-<tag>-<pid>.data -- hot [ROUNDS]` and
/// returns the file and the recorder's stderr.
fn record_hot(tag: &str, options: &[&str], rounds: Option<&str>) -> (PathBuf, String) {
    let data = scratch_data(tag);
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
    let (data, stderr) = record_hot("record", &["-F", "999", "-g"], None);
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
                let sample = reader.parse_sample(&record).unwrap();
                let attr = &reader.attrs()[record.attr_index.unwrap()].attr;
                cpu_nanoseconds += sample.period_or_attr(attr);
            }
            10 => mmap2 += 1,
            3 => comm += 1,
            _ => {}
        }
    }
    assert!(mmap2 > 0 && comm > 0, "MMAP2 {mmap2}, COMM {comm}");
    // cpu-clock's periods are nanoseconds of the workload's CPU time: in frequency mode
    // the samples and the CPU time they add up to agree with the asked 999 Hz (both
    // come from the recording; no clock of the test's is involved).
    let duration = cpu_nanoseconds as f64 / 1e9;
    let expected = duration * 999.0;
    assert!(
        samples > 20 && (samples as f64) > expected * 0.8 && (samples as f64) < expected * 1.2,
        "{samples} samples for {duration:.3} s of CPU at 999 Hz (expected about {expected:.0})"
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
        text(&program),
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
        .arg(&program)
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
        if record.record_type == PERF_RECORD_SAMPLE {
            let callchain = reader.parse_sample(&record).unwrap().callchain;
            callchains += usize::from(callchain.map_or(0, |callchain| callchain.len()) > 1);
        }
    }
    assert!(callchains > 20, "only {callchains} samples with callchains");
    assert_report_tops_with_hot_function(&data);
    let _ = std::fs::remove_file(&data);
}

#[test]
fn branch_stacks_print_exactly_as_linux_perf_prints_them() {
    let data = scratch().join(format!("brstack-{}.data", std::process::id()));
    let attr = branch_stack_attr(1, 100_000);
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
                BranchEntry {
                    from: 0x40_1000 + sample * 16 + entry,
                    to: 0x40_2000 + entry * 8,
                    flags,
                }
                .to_bytes()
            })
            .collect::<Vec<_>>()
            .concat();
        let data = user_branch_sample(
            0x40_1000 + sample,
            4242,
            1_000_000 + sample * 1000,
            &entries,
        );
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
    let attr = branch_stack_attr(0, 20_000);
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
            let entries = common::branch_entries(&branches);
            let data = Sample {
                pid: Some(header.pid),
                ..user_branch_sample(header.ip, header.tid, header.time, &entries)
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

/// What a perf.data file holds, read with rvperf's reader: SAMPLE records, the pid of
/// the first sample, and the records the kernel could not write (the sum of the
/// PERF_RECORD_LOST and PERF_RECORD_LOST_SAMPLES counts, and the number of LOST
/// records).
#[derive(Debug, Default)]
struct FileCounts {
    samples: u64,
    first_pid: Option<i32>,
    pids: std::collections::BTreeSet<i32>,
    lost: u64,
    lost_records: u64,
}

fn file_counts(data: &Path) -> FileCounts {
    let reader = PerfDataReader::open(data).expect("perf.data reads back");
    let mut records = reader.records();
    let mut counts = FileCounts::default();
    let word = |body: &[u8], at: usize| u64::from_le_bytes(body[at..at + 8].try_into().unwrap());
    while let Some(record) = records.next_record().unwrap() {
        match record.record_type {
            PERF_RECORD_SAMPLE => {
                counts.samples += 1;
                let pid = reader
                    .parse_sample(&record)
                    .unwrap()
                    .pid
                    .map(|pid| pid as i32);
                counts.first_pid = counts.first_pid.or(pid);
                counts.pids.extend(pid);
            }
            // struct { u64 id; u64 lost; sample_id }
            PERF_RECORD_LOST => {
                counts.lost += word(record.body, 8);
                counts.lost_records += 1;
            }
            // struct { u64 lost; sample_id }
            LOST_SAMPLES => counts.lost += word(record.body, 0),
            _ => {}
        }
    }
    counts
}

const LOST_SAMPLES: u32 = perf_abi::sys::bindings::PERF_RECORD_LOST_SAMPLES;

/// The samples and lost records `rvperf record`'s summary line gives.
fn summary_counts(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|line| line.starts_with("[ rvperf record: "))
        .unwrap_or_else(|| panic!("no summary line: {stderr}"));
    let number = |unit: &str| -> u64 {
        let before = line.split(unit).next().unwrap();
        before
            .rsplit([' ', ','])
            .find(|word| !word.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    (number(" samples"), number(" lost"))
}

/// Long enough that only a hang reaches it, never a slow or loaded machine.
const HANG_BOUND: Duration = Duration::from_secs(300);

/// Polls `condition` until it holds; panics (a hang) after HANG_BOUND.
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_BOUND;
    while !condition() {
        assert!(Instant::now() < deadline, "hung: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `child` to exit and collects its output; kills it and panics (a hang)
/// after HANG_BOUND.
fn wait_bounded(child: Child, what: &str) -> Output {
    let pid = Pid::from_raw(child.id() as i32);
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(HANG_BOUND) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = kill(pid, Signal::SIGKILL);
            panic!("hung: {what}");
        }
    }
}

/// The state letter of /proc/PID/stat (R, S, T, Z...), None once the process is gone.
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The lines `tests/programs/host/ticker` prints, one per fixed amount of CPU work done.
struct Ticks(mpsc::Receiver<String>);

impl Ticks {
    fn new(stdout: ChildStdout) -> Ticks {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ticks(receiver)
    }

    /// Waits for `count` more ticks (a panic if the ticker ends or hangs).
    fn wait(&self, count: usize) {
        for _ in 0..count {
            let line = self
                .0
                .recv_timeout(HANG_BOUND)
                .expect("the ticker ended or hung");
            assert!(line.starts_with("tick "), "{line}");
        }
    }
}

/// The size of the recording's temporary file, which grows as the recorder drains.
fn recorded_bytes(data: &Path) -> u64 {
    std::fs::metadata(data.with_extension("tmp")).map_or(0, |meta| meta.len())
}

/// Waits until the recorder writing `data` has written `bytes` of records, beyond the
/// header and attrs it writes first.
fn wait_for_recorded_bytes(data: &Path, bytes: u64) {
    wait_until("the recording never grew", || {
        recorded_bytes(data) >= 1024 + bytes
    });
}

/// Sends `signal` to `child`.
fn signal_child(child: &Child, signal: Signal) {
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
}

/// The recorded event of the signal tests: cpu-clock every 1 ms.
const CLOCK_EVERY_MS: &[&str] = &["-e", "cpu-clock", "-c", "1000000"];

/// Starts `tests/programs/host/ticker`, its ticks read as it prints them.
fn start_ticker() -> (Child, Ticks) {
    let mut ticker = Command::new(host_program("ticker"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ticks = Ticks::new(ticker.stdout.take().unwrap());
    (ticker, ticks)
}

/// `rvperf record OPTIONS -o DATA`, its stderr piped (for the summary).
fn recorder(options: &[&str], data: &Path) -> Command {
    let mut command = Command::new(rvperf_binary());
    command
        .arg("record")
        .args(options)
        .args(["-o", text(data)])
        .stderr(Stdio::piped());
    command
}

/// Starts `rvperf record OPTIONS -p PID -o DATA`, its stderr piped.
fn start_pid_recording(options: &[&str], pid: u32, data: &Path) -> Child {
    let pid = pid.to_string();
    recorder(&[options, &["-p", &pid]].concat(), data)
        .spawn()
        .unwrap()
}

/// Waits for the recorder to end (`what` names a hang); its exit status and stderr.
fn recorder_end(recorder: Child, what: &str) -> (ExitStatus, String) {
    let output = wait_bounded(recorder, what);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status, stderr)
}

/// Waits for the recorder to end, which must be a success; its stderr.
fn recorder_success(recorder: Child, what: &str) -> String {
    let (status, stderr) = recorder_end(recorder, what);
    assert!(status.success(), "{stderr}");
    stderr
}

/// Sends SIGINT to the recorder, which must then end by SIGINT, as perf does; its
/// stderr.
fn interrupt_recorder(recorder: Child, what: &str) -> String {
    signal_child(&recorder, Signal::SIGINT);
    let (status, stderr) = recorder_end(recorder, what);
    assert_eq!(
        status.signal(),
        Some(Signal::SIGINT as i32),
        "{status:?}: {stderr}"
    );
    stderr
}

/// Checks a recording that `rvperf record` ended with `stderr`: its summary counts
/// what the file holds, which Linux perf reads sample for sample.
fn assert_summary_matches_the_file(data: &Path, stderr: &str) -> FileCounts {
    let (samples, lost) = summary_counts(stderr);
    let counts = file_counts(data);
    assert_eq!(
        counts.samples, samples,
        "samples: summary vs file: {stderr}"
    );
    assert_eq!(counts.lost, lost, "lost records: summary vs file: {stderr}");
    assert!(samples > 0, "nothing recorded: {stderr}");
    let (script, _) = run(perf().args(["script", "-i", text(data), "-F", "tid,time"]));
    assert_eq!(
        script.lines().count() as u64,
        samples,
        "perf script's samples"
    );
    assert!(!data.with_extension("tmp").exists(), "temporary file left");
    counts
}

#[test]
fn record_attaches_to_a_running_process_and_stops_when_it_exits() {
    let (mut ticker, ticks) = start_ticker();
    let data = scratch_data("pid");
    let recorder = start_pid_recording(CLOCK_EVERY_MS, ticker.id(), &data);
    wait_for_recorded_bytes(&data, 2048);
    ticks.wait(1);
    // The recorder returns by itself once the process has gone (the test reaps it).
    ticker.kill().unwrap();
    let stderr = recorder_success(recorder, "rvperf record -p after the process exited");
    ticker.wait().unwrap();
    let counts = assert_summary_matches_the_file(&data, &stderr);
    assert_eq!(
        counts.pids,
        [ticker.id() as i32].into(),
        "samples of other processes"
    );
}

#[test]
fn record_system_wide_sees_the_workload() {
    let (data, _) = record_hot("all", &["-a", "-F", "499"], Some("20"));
    let (report, _) = run(Command::new(rvperf_binary()).args(["report", "-i", text(&data)]));
    assert!(report.contains("hot_function"), "{report}");
}

/// `-a -- COMMAND` records the whole system while the command runs, as perf does: a
/// busy process that is not the command's is in the recording (rvperf once opened the
/// command's own events instead).
#[test]
fn record_system_wide_with_a_command_records_other_processes() {
    let (mut ticker, ticks) = start_ticker();
    ticks.wait(1);
    let data = scratch_data("all-command");
    // The command says when it runs (the events are open by then) and ends when its
    // input does: the recording lasts exactly while the ticker does 3 ticks of work,
    // however fast the machine is.
    let mut recorder = recorder(&[CLOCK_EVERY_MS, &["-a"]].concat(), &data)
        .args(["--", "sh", "-c", "echo recording; read line; exit 0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut started = String::new();
    BufReader::new(recorder.stdout.take().unwrap())
        .read_line(&mut started)
        .unwrap();
    assert_eq!(started, "recording\n", "the command did not start");
    ticks.wait(3);
    drop(recorder.stdin.take());
    let stderr = recorder_success(recorder, "rvperf record -a -- sh -c 'read line'");
    ticker.kill().unwrap();
    ticker.wait().unwrap();
    let counts = assert_summary_matches_the_file(&data, &stderr);
    assert!(
        counts.pids.contains(&(ticker.id() as i32)),
        "no sample of the busy process {} in {:?}",
        ticker.id(),
        counts.pids
    );
}

/// SIGINT or SIGTERM stops the recording of a command at once: the command, which
/// would tick forever, is sent SIGTERM and reaped, what the rings held is written, and
/// rvperf ends by the signal that ended the command, as perf does (perf record --
/// sleep 100, then SIGINT to perf: perf is killed by SIGTERM).
fn stop_a_command_recording(stop: Signal) {
    let data = scratch_data(stop.as_str());
    let mut recorder = recorder(CLOCK_EVERY_MS, &data)
        .arg("--")
        .arg(host_program("ticker"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The command execs only once its events are open: its ticks are recorded work.
    let ticks = Ticks::new(recorder.stdout.take().unwrap());
    ticks.wait(4);
    signal_child(&recorder, stop);
    let (status, stderr) =
        recorder_end(recorder, &format!("rvperf record after {}", stop.as_str()));
    assert_eq!(
        status.signal(),
        Some(Signal::SIGTERM as i32),
        "{}: rvperf should end by the command's SIGTERM ({status:?}): {stderr}",
        stop.as_str(),
    );
    assert!(
        stderr.contains("the command was killed by SIGTERM"),
        "{stderr}"
    );
    let counts = assert_summary_matches_the_file(&data, &stderr);
    let workload = counts.first_pid.unwrap();
    assert_eq!(
        process_state(workload),
        None,
        "the command {workload} still runs after rvperf ended"
    );
}

#[test]
fn sigint_stops_a_command_recording_and_the_command() {
    stop_a_command_recording(Signal::SIGINT);
}

#[test]
fn sigterm_stops_a_command_recording_and_the_command() {
    stop_a_command_recording(Signal::SIGTERM);
}

/// SIGINT stops a `-p` recording, not the process (it ticks on after), and rvperf ends
/// by SIGINT after writing the file, as perf does.
#[test]
fn sigint_stops_a_pid_recording_and_leaves_the_process_running() {
    let (mut ticker, ticks) = start_ticker();
    let data = scratch_data("pid-sigint");
    let recorder = start_pid_recording(CLOCK_EVERY_MS, ticker.id(), &data);
    wait_for_recorded_bytes(&data, 2048);
    let stderr = interrupt_recorder(recorder, "rvperf record -p after SIGINT");
    ticks.wait(2);
    assert_eq!(ticker.try_wait().unwrap(), None, "the process was stopped");
    ticker.kill().unwrap();
    ticker.wait().unwrap();
    let counts = assert_summary_matches_the_file(&data, &stderr);
    assert_eq!(counts.pids, [ticker.id() as i32].into());
}

/// SIGINT stops a system-wide recording (which nothing else stops); rvperf ends by
/// SIGINT after writing the file, as perf does.
#[test]
fn sigint_stops_a_system_wide_recording() {
    let data = scratch_data("all-sigint");
    let recorder = recorder(&[&["-a"], CLOCK_EVERY_MS].concat(), &data)
        .spawn()
        .unwrap();
    wait_for_recorded_bytes(&data, 4096);
    let stderr = interrupt_recorder(recorder, "rvperf record -a after SIGINT");
    assert_summary_matches_the_file(&data, &stderr);
}

/// `rvperf record` ends as `perf record` does when the command fails: with its exit
/// status, or by the signal that killed it; the recording is written either way.
#[test]
fn record_exits_with_the_status_of_the_command_as_perf_does() {
    for (script, code, signal) in [
        ("exit 3", Some(3), None),
        ("kill -SEGV $$", None, Some(Signal::SIGSEGV as i32)),
    ] {
        let perf_data = scratch().join(format!("perf-status-{}.data", std::process::id()));
        let perf_status = perf()
            .args(["record", "-q", "-e", "cpu-clock", "-o", text(&perf_data)])
            .args(["--", "sh", "-c", script])
            .stderr(Stdio::null())
            .status()
            .expect("run perf record");
        let data = scratch_data("status");
        let output = Command::new(rvperf_binary())
            .args(["record", "-e", "cpu-clock", "-o", text(&data)])
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let status = |status: ExitStatus| (status.code(), status.signal());
        assert_eq!(status(output.status), (code, signal), "{script}: {stderr}");
        assert_eq!(
            status(output.status),
            status(perf_status),
            "{script}: rvperf and perf end alike"
        );
        assert!(stderr.contains("rvperf record: the command "), "{stderr}");
        // Written all the same; Linux perf reads it.
        let counts = file_counts(&data);
        let (script_output, _) = run(perf().args(["script", "-i", text(&data), "-F", "tid"]));
        assert_eq!(script_output.lines().count() as u64, counts.samples);
    }
}

/// A command that cannot be run: one line naming it and the reason, a non-zero exit,
/// and no file.
#[test]
fn a_command_that_cannot_run_is_one_line_and_leaves_no_file() {
    let data = scratch_data("noexec");
    let stderr = rvperf_failure(&[
        "record",
        "-o",
        text(&data),
        "--",
        "/nonexistent/rvperf-test-command",
        "arg",
    ]);
    assert_eq!(
        stderr,
        "rvperf: error: cannot run '/nonexistent/rvperf-test-command': No such file or \
         directory\n"
    );
    assert!(!data.exists() && !data.with_extension("tmp").exists());
}

/// A one-page ring (-m 1) at a 10 us period, while the recorder is stopped and the
/// process runs: the kernel loses records. The summary gives exactly the lost count
/// the file's LOST records hold, and rvperf report shows it as perf report does.
#[test]
fn lost_records_are_counted_exactly_and_reported() {
    let (mut ticker, ticks) = start_ticker();
    let data = scratch_data("lost");
    let recorder = start_pid_recording(
        &["-m", "1", "-e", "cpu-clock", "-c", "10000"],
        ticker.id(),
        &data,
    );
    let recorder_pid = recorder.id() as i32;
    wait_for_recorded_bytes(&data, 2048);
    signal_child(&recorder, Signal::SIGSTOP);
    wait_until("the recorder never stopped", || {
        process_state(recorder_pid) == Some('T')
    });
    // Ten ticks are 100 M loop iterations (0.2 s of CPU here): thousands of 10 us
    // samples even if the kernel throttles them, where the ring holds about 70.
    ticks.wait(10);
    let stopped_at = recorded_bytes(&data);
    signal_child(&recorder, Signal::SIGCONT);
    // More than a ring's worth written since: records were written after the ring had
    // room again, and the first of them carried the PERF_RECORD_LOST.
    let page = 4096;
    wait_until("the recorder did not resume", || {
        recorded_bytes(&data) > stopped_at + 3 * page
    });
    ticker.kill().unwrap();
    ticker.wait().unwrap();
    let stderr = recorder_success(recorder, "rvperf record -p after the process exited");
    let counts = assert_summary_matches_the_file(&data, &stderr);
    assert!(
        counts.lost > 0 && counts.lost_records > 0,
        "nothing lost: {counts:?}"
    );

    // perf report's header line and its warning, from rvperf report.
    let (report, report_stderr) =
        run(Command::new(rvperf_binary()).args(["report", "-i", text(&data)]));
    assert!(
        report
            .lines()
            .any(|line| line == format!("# Total Lost Samples: {}", counts.lost)),
        "{report}"
    );
    let chunks = format!("lost {} chunks!", counts.lost_records);
    assert!(report_stderr.contains(&chunks), "{report_stderr}");
    let (_, perf_stderr) = run(perf().args(["report", "-i", text(&data), "--stdio"]));
    assert!(perf_stderr.contains(&chunks), "{perf_stderr}");
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

/// `perf evlist -v` of an rvperf recording shows exactly the attrs rvperf opened: every
/// field of each event's perf_event_open(2) call, as strace decodes it, is the field
/// perf prints from the file (a field one of them leaves out is zero). Only `size`
/// differs, by design: 144 bytes opened, the first 128 written (perf 6.1's struct).
/// The options set fields a hand-built attr lost or invented: precise_ip (`p`),
/// exclude_kernel/exclude_user (`u`/`k`) without exclude_hv, config1/config2, the
/// watermark wake-up (-m), a group member's flags.
#[test]
fn perf_evlist_shows_the_attrs_rvperf_opened() {
    let cases = [
        AttrCase {
            tag: "attr-group",
            options: &[
                "-e",
                "{cpu-clock,task-clock}:upp",
                "-c",
                "250000",
                "-g",
                "-m",
                "16",
            ],
            names: &["cpu-clock:upp", "task-clock:upp"],
            opened_with: &[
                ("precise_ip", "2"),
                ("exclude_kernel", "1"),
                ("sample_period_or_freq", "250000"),
                ("wakeup", "16384"),
            ],
        },
        AttrCase {
            tag: "attr-terms",
            options: &[
                "-e",
                "software/config=1,config1=0x5,config2=0x7/",
                "-e",
                "cpu-clock:k",
                "-F",
                "499",
            ],
            names: &["software/config=1,config1=0x5,config2=0x7/", "cpu-clock:k"],
            opened_with: &[("config1", "5"), ("config2", "7"), ("freq", "1")],
        },
    ];
    for AttrCase {
        tag,
        options,
        names,
        opened_with,
    } in cases
    {
        let data = scratch_data(tag);
        let trace = data.with_extension("strace");
        run_tool(
            Command::new("strace")
                .args(["-f", "-X", "verbose", "-v", "-s", "4096"])
                .args(["-e", "trace=perf_event_open", "-o"])
                .arg(&trace)
                .arg(rvperf_binary())
                .arg("record")
                .args(options)
                .arg("-o")
                .arg(&data)
                .arg("--")
                .arg(hot_program())
                .arg("1"),
            "install strace (apt-get install strace)",
        );
        let calls = strace_attrs(&std::fs::read_to_string(&trace).unwrap());
        let (evlist, _) = run(perf().args(["evlist", "-v", "-i", text(&data)]));
        let lines: Vec<&str> = evlist.lines().filter(|line| !line.is_empty()).collect();
        assert_eq!(lines.len(), names.len(), "{evlist}");
        // Each event is opened once per CPU, the events one after another.
        assert!(
            !calls.is_empty() && calls.len() % names.len() == 0,
            "{} perf_event_open calls for {} events",
            calls.len(),
            names.len()
        );
        let per_event = calls.len() / names.len();
        for (index, (name, line)) in names.iter().zip(&lines).enumerate() {
            let opened = &calls[index * per_event];
            for (cpu, call) in calls[index * per_event..(index + 1) * per_event]
                .iter()
                .enumerate()
            {
                assert_eq!(call, opened, "{name}: CPU slot {cpu} opened another attr");
            }
            for field in DECODED_FIELDS {
                assert!(opened.contains_key(field), "strace did not show {field}");
            }
            let fields = line
                .strip_prefix(&format!("{name}: "))
                .unwrap_or_else(|| panic!("not event {name}: {line}"));
            let written = attr_fields(fields, ": ");
            assert_eq!(
                written.get("size").map(String::as_str),
                Some("128"),
                "{line}"
            );
            let mismatches: Vec<String> = opened
                .keys()
                .chain(written.keys())
                .filter(|field| *field != "size")
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter_map(|field| {
                    let zero = zero_value(field);
                    let opened_value = opened.get(field).map_or(zero, String::as_str);
                    let written_value = written.get(field).map_or(zero, String::as_str);
                    (opened_value != written_value).then(|| {
                        format!("{field}: opened {opened_value:?}, perf.data {written_value:?}")
                    })
                })
                .collect();
            assert!(
                mismatches.is_empty(),
                "{tag}, {name}: perf evlist -v differs from the attr opened:\n{}\n\
                 perf evlist -v: {line}",
                mismatches.join("\n")
            );
        }
        for (field, value) in opened_with {
            assert!(
                calls
                    .iter()
                    .any(|call| call.get(*field).map(String::as_str) == Some(value)),
                "{tag}: no event opened with {field} = {value}"
            );
        }
        let _ = std::fs::remove_file(&trace);
        let _ = std::fs::remove_file(&data);
    }
}

/// One recording of [`perf_evlist_shows_the_attrs_rvperf_opened`].
struct AttrCase {
    tag: &'static str,
    /// rvperf record's options.
    options: &'static [&'static str],
    /// The events' names, as perf evlist prints them.
    names: &'static [&'static str],
    /// Fields one of the events must have been opened with: the options reach them.
    opened_with: &'static [(&'static str, &'static str)],
}

/// Fields strace prints for every perf_event_open attr (branch_sample_type only with
/// PERF_SAMPLE_BRANCH_STACK), in [`attr_fields`]'s names: the comparison covers them.
const DECODED_FIELDS: [&str; 25] = [
    "type",
    "config",
    "sample_period_or_freq",
    "sample_type",
    "read_format",
    "disabled",
    "inherit",
    "exclude_user",
    "exclude_kernel",
    "exclude_hv",
    "exclude_idle",
    "mmap",
    "comm",
    "freq",
    "enable_on_exec",
    "task",
    "sample_id_all",
    "mmap2",
    "comm_exec",
    "context_switch",
    "precise_ip",
    "config1",
    "config2",
    "watermark",
    "wakeup",
];

/// The attr fields that are sets of flags: strace prints `0x1c7 /* PERF_SAMPLE_IP|... */`,
/// perf `IP|TID|...`.
const FLAG_FIELDS: [&str; 3] = ["sample_type", "read_format", "branch_sample_type"];

/// A field's value when it is not printed: perf prints only fields that are not zero.
fn zero_value(field: &str) -> &'static str {
    if FLAG_FIELDS.contains(&field) {
        ""
    } else {
        "0"
    }
}

/// The attr of every successful perf_event_open(2) in strace's output (`-X verbose -v`),
/// in call order, by [`attr_fields`].
fn strace_attrs(trace: &str) -> Vec<BTreeMap<String, String>> {
    trace
        .lines()
        .filter_map(|line| {
            let (_, call) = line.split_once("perf_event_open({")?;
            let (_, result) = call.rsplit_once(") = ")?;
            assert!(
                result.trim().parse::<i32>().is_ok_and(|fd| fd >= 0),
                "a perf_event_open failed: {line}"
            );
            Some(attr_fields(call, "="))
        })
        .collect()
}

/// The fields of one attr as strace (`name=value`, `separator` "=") or perf evlist -v
/// (`name: value`, ": ") prints them, separated by ", " (not inside braces or
/// comments), up to an unmatched `}`, in one form: the field names of perf's unions
/// (`{ sample_period, sample_freq }`, strace's `sample_freq`, ...) as one name, numbers
/// in decimal, flag sets as their names without the `PERF_*_` prefix, sorted. strace's
/// `...` (fields past those it knows) is left out.
fn attr_fields(text: &str, separator: &str) -> BTreeMap<String, String> {
    let mut items = Vec::new();
    let (mut depth, mut in_comment, mut start, mut end) = (0, false, 0, text.len());
    for (at, character) in text.char_indices() {
        let rest = &text[at..];
        if in_comment {
            in_comment = !rest.starts_with("*/");
            continue;
        }
        if rest.starts_with("/*") {
            in_comment = true;
            continue;
        }
        match character {
            '{' => depth += 1,
            '}' if depth == 0 => {
                end = at;
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..end]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|item| !item.is_empty() && *item != "...")
        .map(|item| {
            let (name, value) = item
                .split_once(separator)
                .unwrap_or_else(|| panic!("not a field: {item:?} in {text}"));
            let name = match name.trim() {
                "sample_period" | "sample_freq" | "{ sample_period, sample_freq }" => {
                    "sample_period_or_freq"
                }
                "wakeup_events" | "wakeup_watermark" | "{ wakeup_events, wakeup_watermark }" => {
                    "wakeup"
                }
                "bp_addr" | "{ bp_addr, config1 }" => "config1",
                "bp_len" | "{ bp_len, config2 }" => "config2",
                other => other,
            };
            (name.to_owned(), field_value(name, value.trim()))
        })
        .collect()
}

/// A field's value in [`attr_fields`]'s form.
fn field_value(name: &str, value: &str) -> String {
    if FLAG_FIELDS.contains(&name) {
        let names = match value.split_once("/*") {
            Some((_, comment)) => comment.trim_end().trim_end_matches("*/").trim(),
            None if value == "0" => "",
            None => value,
        };
        let mut names: Vec<&str> = names
            .split('|')
            .map(str::trim)
            .filter(|flag| !flag.is_empty())
            .map(|flag| {
                ["PERF_SAMPLE_BRANCH_", "PERF_SAMPLE_", "PERF_FORMAT_"]
                    .iter()
                    .find_map(|prefix| flag.strip_prefix(prefix))
                    .unwrap_or(flag)
            })
            .collect();
        names.sort_unstable();
        return names.join("|");
    }
    // A number, then maybe strace's or perf's comment on it (`0x1 /* PERF_TYPE_... */`).
    let number = value.split_whitespace().next().unwrap_or_default();
    let parsed = match number.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => number.parse::<u64>().ok(),
    };
    parsed.map_or_else(|| number.to_owned(), |number| number.to_string())
}

/// An attr of PMU type `type_` (config 0) sampling every `period` events with
/// IP|TID|TIME and a branch stack of any branch.
fn branch_stack_attr(type_: u32, period: u64) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        sample_type: u64::from(
            PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_BRANCH_STACK,
        ),
        branch_sample_type: PERF_SAMPLE_BRANCH_ANY.into(),
        ..Default::default()
    };
    attr.sample_period = period;
    attr.set_sample_id_all(1);
    attr
}

/// A user-mode (PERF_RECORD_MISC_USER) SAMPLE of thread `tid` (its own process) with a
/// branch stack of `entries` (`struct perf_branch_entry` after another).
fn user_branch_sample(ip: u64, tid: u32, time: u64, entries: &[u8]) -> Sample<'_> {
    Sample {
        ip: Some(ip),
        pid: Some(tid),
        tid: Some(tid),
        time: Some(time),
        branch_stack: Some(BranchStack::from_bytes(None, entries).unwrap()),
        misc: 2,
        ..Sample::default()
    }
}

/// `rvperf report` of `data` (a recording of the hot program) puts hot_function first.
fn assert_report_tops_with_hot_function(data: &Path) {
    let (report, _) = run(Command::new(rvperf_binary()).args(["report", "-i", text(data)]));
    assert!(
        report
            .lines()
            .find(|line| !line.starts_with('#'))
            .unwrap_or_default()
            .ends_with("hot_function"),
        "{report}"
    );
}
