//! `rvperf inject`: kept rvperf_ctr AUX data (`rvperf record --keep-aux`) becomes the
//! SAMPLE records the default recording writes, which Linux perf, `perf report
//! --branch-history` and llvm-profgen read.
//!
//! The recording is real: `tests/fixtures/autofdo/perf.data`, CTR branch stacks of
//! `autofdo 1500` recorded by rvperf in the riscv64 guest (850 samples of 32 entries),
//! converted to samples as recorded. [`keep_aux`] writes what `rvperf record
//! --keep-aux` writes for the same recording: its records, AUXTRACE_INFO, and each
//! drain's samples as the rvperf_ctr records the module wrote (one AUXTRACE chunk per
//! AUX area), with the HEADER_AUXTRACE index. Injecting that must give the recording
//! back. (The recorder itself keeps AUX data in the guest tier, tools/vm.)

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::consumers::run_tool;
use common::{repository, rvperf_binary, scratch};
use perf_abi::ctr::{encode_ctr_record, CtrBranch, CtrRecordHeader, RVPERF_AUXTRACE_CTR};
use perf_abi::sys::bindings::{
    PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_KERNEL, PERF_RECORD_SAMPLE,
};
use perf_data::{
    AuxtraceChunk, EventDesc, FeatureSection, PerfDataReader, PerfDataWriter, AUXTRACE_RECORD_SIZE,
    HEADER_AUXTRACE, HEADER_BRANCH_STACK, PERF_RECORD_AUXTRACE, PERF_RECORD_AUXTRACE_INFO,
};

const INSTALL: &str = "run tools/install-deps.sh (as root) for Linux perf and llvm-profgen-19";

fn fixture() -> PathBuf {
    repository().join("tests/fixtures/autofdo")
}

/// The converted recording, as `rvperf record -j any,u` wrote it in the guest.
fn recording() -> PathBuf {
    fixture().join("perf.data")
}

/// A directory of this test's files, fresh per test.
fn work(test: &str) -> PathBuf {
    let directory = scratch().join(format!("inject-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// The recorded binary at its recorded path (/opt/rvperf/bin/autofdo) under a symfs.
fn symfs() -> PathBuf {
    let symfs = scratch().join(format!("inject-symfs-{}", std::process::id()));
    let binary = symfs.join("opt/rvperf/bin/autofdo");
    if !binary.is_file() {
        std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
        std::fs::copy(fixture().join("autofdo"), &binary).unwrap();
    }
    symfs
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `command`, which must succeed; its standard output.
fn run(command: &mut Command) -> String {
    String::from_utf8(run_tool(command, INSTALL).stdout).unwrap()
}

fn perf() -> Command {
    common::perf_for_recordings()
}

fn rvperf() -> Command {
    Command::new(rvperf_binary())
}

fn inject(input: &Path, output: &Path) -> Output {
    rvperf()
        .args(["inject", "-i", text(input), "-o", text(output)])
        .output()
        .unwrap()
}

/// `output` of a run that must have succeeded; its stderr.
fn succeeded(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// Runs `rvperf inject -i INPUT -o OUTPUT`, which must succeed; its stderr.
fn inject_ok(input: &Path, output: &Path) -> String {
    succeeded(&inject(input, output))
}

/// Runs `rvperf inject -i - -o OUTPUT` with `input` as its standard input, which must
/// succeed.
fn inject_from_stdin(input: &Path, output: &Path) {
    succeeded(
        &rvperf()
            .args(["inject", "-i", "-", "-o", text(output)])
            .stdin(std::fs::File::open(input).unwrap())
            .output()
            .unwrap(),
    );
}

/// `ours` and `theirs` have the same lines; else the first that differs, with its
/// number, and the line counts (the outputs are long).
#[track_caller]
fn assert_same_lines(ours: &str, theirs: &str) {
    if ours == theirs {
        return;
    }
    let (ours_lines, theirs_lines): (Vec<_>, Vec<_>) =
        (ours.lines().collect(), theirs.lines().collect());
    let first = (0..ours_lines.len().max(theirs_lines.len()))
        .find(|&n| ours_lines.get(n) != theirs_lines.get(n))
        .unwrap_or(0);
    panic!(
        "outputs differ ({} and {} lines); line {}:\n  {:?}\n  {:?}",
        ours_lines.len(),
        theirs_lines.len(),
        first + 1,
        ours_lines.get(first),
        theirs_lines.get(first)
    );
}

/// Every field `rvperf script` prints, symbols from the guest's binary.
const ALL_FIELDS: &str = "comm,pid,tid,cpu,time,period,event,ip,sym,dso,brstack";

fn rvperf_script(data: &Path, fields: &str) -> String {
    run(rvperf().args([
        "script",
        "-i",
        text(data),
        "-F",
        fields,
        "--symfs",
        text(&symfs()),
    ]))
}

fn perf_script(data: &Path) -> String {
    perf_script_fields(data, "ip,brstack")
}

fn perf_script_fields(data: &Path, fields: &str) -> String {
    run(perf().args(["script", "-F", fields, "-i", text(data)]))
}

/// How [`keep_aux`] lays out the AUX data.
struct Keep {
    /// The AUXTRACE_INFO type.
    auxtrace_type: u32,
    /// The AUX areas (CPU events) the samples came from.
    areas: Areas,
}

enum Areas {
    /// The recording's: the event of the sample's id.
    AsRecorded,
    /// One per id, the n-th sample from area n % ids.len().
    RoundRobin(Vec<u64>),
}

impl Keep {
    fn as_recorded() -> Self {
        Self {
            auxtrace_type: RVPERF_AUXTRACE_CTR,
            areas: Areas::AsRecorded,
        }
    }
}

/// Writes to `kept` what `rvperf record --keep-aux` writes for the recording
/// `converted` (perf-record's CTR source, `CtrSource::drain`): the same attrs and
/// feature sections, AUXTRACE_INFO first, every record but the samples as it is, and
/// each run of samples between two other records (one drain) as one AUXTRACE chunk per
/// AUX area in area order, holding the rvperf_ctr records the samples were converted from.
fn keep_aux(converted: &Path, kept: &Path, keep: &Keep) {
    let bytes = std::fs::read(converted).unwrap();
    let reader = PerfDataReader::from_bytes(&bytes, "recording").unwrap();
    let attr = &reader.attrs()[0];
    let ids = match &keep.areas {
        Areas::AsRecorded => attr.ids.clone(),
        Areas::RoundRobin(ids) => ids.clone(),
    };
    let events = vec![EventDesc {
        attr: perf_abi::attr_from_bytes(&attr.bytes).unwrap(),
        name: attr.name.clone().unwrap_or_default(),
        ids: ids.clone(),
    }];
    let trigger = events[0].attr;
    let file = std::io::BufWriter::new(std::fs::File::create(kept).unwrap());
    let mut writer = PerfDataWriter::new(file, events).unwrap();
    writer
        .write_auxtrace_info(
            keep.auxtrace_type,
            &[42, u64::from(trigger.type_), trigger.config],
        )
        .unwrap();
    // Per area: its CPU and the records of the current drain, and the offset of its
    // AUX data so far.
    let mut drain: BTreeMap<u32, (u32, Vec<u8>)> = BTreeMap::new();
    let mut offsets: BTreeMap<u32, u64> = BTreeMap::new();
    let mut workload = 0;
    let mut samples = 0;
    let mut flush =
        |writer: &mut PerfDataWriter<_>, drain: &mut BTreeMap<u32, (u32, Vec<u8>)>, tid| {
            for (idx, (cpu, data)) in std::mem::take(drain) {
                let offset = offsets.entry(idx).or_default();
                writer
                    .write_auxtrace(&AuxtraceChunk {
                        offset: *offset,
                        reference: 0,
                        idx,
                        tid,
                        cpu,
                        data: &data,
                    })
                    .unwrap();
                *offset += data.len() as u64;
            }
        };
    let mut records = reader.records();
    while let Some(record) = records.next_record().unwrap() {
        if record.record_type != PERF_RECORD_SAMPLE {
            flush(&mut writer, &mut drain, workload);
            let size = 8 + record.body.len() as u16;
            let mut raw = record.record_type.to_le_bytes().to_vec();
            raw.extend_from_slice(&record.misc.to_le_bytes());
            raw.extend_from_slice(&size.to_le_bytes());
            raw.extend_from_slice(record.body);
            writer.write_record(&raw).unwrap();
            continue;
        }
        let sample = reader.parse_sample(&record).unwrap();
        let pid = sample.pid.unwrap();
        workload = pid;
        let idx = match &keep.areas {
            Areas::AsRecorded => ids.iter().position(|&id| Some(id) == sample.id).unwrap(),
            Areas::RoundRobin(ids) => samples % ids.len(),
        } as u32;
        samples += 1;
        let kernel =
            u32::from(record.misc) & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_KERNEL;
        let branches: Vec<CtrBranch> = common::ctr_branches(&sample.branch_stack.unwrap());
        let header = CtrRecordHeader {
            flags: u8::from(kernel),
            cpu: sample.cpu.unwrap(),
            pid,
            tid: sample.tid.unwrap(),
            depth: 32,
            time: sample.time.unwrap(),
            ip: sample.ip.unwrap(),
            period: sample.period_or_attr(&reader.attrs()[record.attr_index.unwrap()].attr),
        };
        let (cpu, data) = drain.entry(idx).or_insert((header.cpu, Vec::new()));
        *cpu = header.cpu;
        data.extend(encode_ctr_record(&header, &branches));
    }
    flush(&mut writer, &mut drain, workload);
    let features = reader
        .info()
        .features
        .iter()
        .map(|&feature| FeatureSection {
            feature,
            bytes: reader.feature_section(feature).unwrap().to_vec(),
        })
        .collect();
    writer.finish_with_sections(features).unwrap();
}

/// The kept file of the real recording, checked to be one: AUX data and no samples.
fn kept_recording(directory: &Path) -> PathBuf {
    let kept = directory.join("kept.data");
    keep_aux(&recording(), &kept, &Keep::as_recorded());
    let bytes = std::fs::read(&kept).unwrap();
    let reader = PerfDataReader::from_bytes(&bytes, "kept").unwrap();
    assert!(reader.info().features.contains(&HEADER_AUXTRACE));
    let types: Vec<u32> = reader
        .records()
        .map(|record| record.unwrap().record_type)
        .collect();
    assert!(!types.contains(&PERF_RECORD_SAMPLE));
    assert_eq!(
        types.iter().filter(|&&t| t == PERF_RECORD_AUXTRACE).count(),
        2
    );
    kept
}

#[test]
fn kept_ctr_aux_data_injects_into_the_recording_perf_reads() {
    let directory = work("real");
    let kept = kept_recording(&directory);
    let injected = directory.join("injected.data");
    let stderr = inject_ok(&kept, &injected);
    assert!(
        stderr.contains("850 samples from 2 AUXTRACE chunks"),
        "{stderr}"
    );

    // rvperf reads the kept file and the injected one alike, every field.
    let from_kept = rvperf_script(&kept, ALL_FIELDS);
    assert_eq!(from_kept.lines().count(), 850);
    assert!(from_kept.contains(" process_value (autofdo) 0x"));
    assert_same_lines(&rvperf_script(&injected, ALL_FIELDS), &from_kept);

    // Linux perf reads the injected file as rvperf reads the kept one, and as it
    // reads the recording the kept file was made from.
    let theirs = perf_script(&injected);
    assert_eq!(theirs.lines().count(), 850);
    assert_same_lines(&theirs, &rvperf_script(&kept, "ip,brstack"));
    assert_same_lines(&theirs, &perf_script(&recording()));
    let fields = "comm,pid,tid,cpu,time,period,event,ip,brstack";
    assert_same_lines(
        &perf_script_fields(&injected, fields),
        &perf_script_fields(&recording(), fields),
    );
    // Without the random tip perf report ends with.
    let branch_history = |data: &Path| {
        let report = run(perf().args([
            "report",
            "--branch-history",
            "--stdio",
            "--symfs",
            text(&symfs()),
            "-i",
            text(data),
        ]));
        report
            .lines()
            .filter(|line| !line.starts_with("# (Tip:"))
            .map(|line| format!("{line}\n"))
            .collect::<String>()
    };
    let history = branch_history(&injected);
    assert!(history.contains("process_value"), "{history}");
    assert_same_lines(&history, &branch_history(&recording()));

    // llvm-profgen makes the recording's profile of it.
    let profile = |data: &Path, name: &str| {
        let script = directory.join(format!("{name}.script"));
        std::fs::write(&script, perf_script(data)).unwrap();
        let profile = directory.join(format!("{name}.prof"));
        run(Command::new("llvm-profgen-19").args([
            &format!("--binary={}", text(&fixture().join("autofdo"))),
            &format!("--perfscript={}", text(&script)),
            "--format=text",
            &format!("--output={}", text(&profile)),
        ]));
        std::fs::read_to_string(profile).unwrap()
    };
    let injected_profile = profile(&injected, "injected");
    assert!(
        injected_profile.contains("process_value:"),
        "{injected_profile}"
    );
    assert_same_lines(&injected_profile, &profile(&recording(), "recording"));

    // The recording's attrs, ids and header features; no AUX data left.
    let original = PerfDataReader::open(recording()).unwrap();
    let result = PerfDataReader::open(&injected).unwrap();
    assert_eq!(result.attrs().len(), 1);
    assert_eq!(result.attrs()[0].bytes, original.attrs()[0].bytes);
    assert_eq!(result.attrs()[0].ids, original.attrs()[0].ids);
    assert_eq!(result.event_names(), original.event_names());
    assert_eq!(result.info(), original.info());
    assert!(result.info().features.contains(&HEADER_BRANCH_STACK));
    assert!(!result.info().features.contains(&HEADER_AUXTRACE));
    let mut records = result.records();
    while let Some(record) = records.next_record().unwrap() {
        assert!(
            ![PERF_RECORD_AUXTRACE_INFO, PERF_RECORD_AUXTRACE].contains(&record.record_type),
            "AUX record left at {:#x}",
            record.offset
        );
    }
    let _ = std::fs::remove_dir_all(directory);
}

/// Samples of several AUX areas (CPU events) are written in time order among the
/// other records, each under its own event's sample id.
#[test]
fn samples_of_several_aux_areas_are_written_in_time_order_under_their_events() {
    let directory = work("areas");
    let kept = directory.join("kept.data");
    let ids = vec![141, 142, 143];
    keep_aux(
        &recording(),
        &kept,
        &Keep {
            auxtrace_type: RVPERF_AUXTRACE_CTR,
            areas: Areas::RoundRobin(ids.clone()),
        },
    );
    let injected = directory.join("injected.data");
    inject_ok(&kept, &injected);
    assert_same_lines(
        &rvperf_script(&injected, ALL_FIELDS),
        &rvperf_script(&kept, ALL_FIELDS),
    );
    assert_same_lines(&perf_script(&injected), &perf_script(&recording()));

    // In time order, and each sample under the id of its area: the n-th recorded
    // sample (by time: the recording's samples have distinct times) from area n % 3.
    let recorded_times: Vec<u64> = samples_of(&recording())
        .iter()
        .map(|(time, _)| *time)
        .collect();
    let injected_samples = samples_of(&injected);
    let times: Vec<u64> = injected_samples.iter().map(|(time, _)| *time).collect();
    assert_eq!(times, recorded_times);
    let expected_ids: Vec<u64> = (0..times.len()).map(|n| ids[n % 3]).collect();
    let injected_ids: Vec<u64> = injected_samples.iter().map(|(_, id)| *id).collect();
    assert_eq!(injected_ids, expected_ids);
    let record_times = times_of(&injected);
    assert!(
        record_times.windows(2).all(|pair| pair[0] <= pair[1]),
        "records not in time order"
    );
    let _ = std::fs::remove_dir_all(directory);
}

/// (time, sample id) of every SAMPLE of `data`, in file order.
fn samples_of(data: &Path) -> Vec<(u64, u64)> {
    let reader = PerfDataReader::open(data).unwrap();
    let mut samples = Vec::new();
    let mut records = reader.records();
    while let Some(record) = records.next_record().unwrap() {
        if record.record_type == PERF_RECORD_SAMPLE {
            let sample = reader.parse_sample(&record).unwrap();
            samples.push((sample.time.unwrap(), sample.id.unwrap()));
        }
    }
    samples
}

/// The time of every record of `data` that has one, in file order.
fn times_of(data: &Path) -> Vec<u64> {
    let reader = PerfDataReader::open(data).unwrap();
    let mut times = Vec::new();
    let mut records = reader.records();
    while let Some(record) = records.next_record().unwrap() {
        times.extend(reader.record_time(&record));
    }
    times
}

/// `-i -` reads standard input: the same output as from the file, and from a
/// pipe-mode stream of the kept recording too.
#[test]
fn standard_input_in_file_and_pipe_mode() {
    let directory = work("stdin");
    let kept = kept_recording(&directory);
    let from_file = directory.join("from-file.data");
    inject_ok(&kept, &from_file);
    let from_stdin = directory.join("from-stdin.data");
    inject_from_stdin(&kept, &from_stdin);
    assert_eq!(
        std::fs::read(&from_stdin).unwrap(),
        std::fs::read(&from_file).unwrap()
    );

    let stream = directory.join("kept.pipe");
    std::fs::write(&stream, pipe_mode(&kept)).unwrap();
    // rvperf reads the stream as the file.
    assert_same_lines(
        &rvperf_script(&stream, ALL_FIELDS),
        &rvperf_script(&kept, ALL_FIELDS),
    );
    let from_pipe = directory.join("from-pipe.data");
    inject_from_stdin(&stream, &from_pipe);
    assert_same_lines(&perf_script(&from_pipe), &perf_script(&from_file));
    assert_same_lines(
        &rvperf_script(&from_pipe, ALL_FIELDS),
        &rvperf_script(&from_file, ALL_FIELDS),
    );
    let _ = std::fs::remove_dir_all(directory);
}

/// The file-mode perf.data `path` as perf streams it in pipe mode (`perf record -o
/// -`): the 16-byte header, HEADER_ATTR with the ids, EVENT_UPDATE with the name,
/// HEADER_FEATURE per feature (not EVENT_DESC or HEADER_AUXTRACE, which pipe mode
/// does not have), then the records.
fn pipe_mode(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let reader = PerfDataReader::from_bytes(&bytes, "file").unwrap();
    let mut out = b"PERFILE2".to_vec();
    out.extend_from_slice(&16u64.to_le_bytes());
    // Feature records are as long as their sections, not padded (build ids are not
    // a multiple of 8 bytes long).
    let record = |out: &mut Vec<u8>, record_type: u32, body: &[u8]| {
        out.extend_from_slice(&record_type.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&(8 + body.len() as u16).to_le_bytes());
        out.extend_from_slice(body);
    };
    for attr in reader.attrs() {
        let mut body = attr.bytes.clone();
        for id in &attr.ids {
            body.extend_from_slice(&id.to_le_bytes());
        }
        record(&mut out, 64, &body);
        let mut update = 2u64.to_le_bytes().to_vec();
        update.extend_from_slice(&attr.ids[0].to_le_bytes());
        let mut name = attr.name.clone().unwrap().into_bytes();
        name.resize((name.len() + 1).div_ceil(8) * 8, 0);
        update.extend_from_slice(&name);
        record(&mut out, 78, &update);
    }
    for &feature in &reader.info().features {
        if feature == 12 || feature == HEADER_AUXTRACE {
            continue;
        }
        let mut body = u64::from(feature).to_le_bytes().to_vec();
        body.extend_from_slice(reader.feature_section(feature).unwrap());
        record(&mut out, 80, &body);
    }
    let mut records = reader.records();
    while let Some(raw) = records.next_record().unwrap() {
        out.extend_from_slice(&raw.record_type.to_le_bytes());
        out.extend_from_slice(&raw.misc.to_le_bytes());
        out.extend_from_slice(&(8 + raw.body.len() as u16).to_le_bytes());
        out.extend_from_slice(raw.body);
        out.extend_from_slice(raw.aux_data);
    }
    out
}

/// A file without kept AUX data is copied as it is, and says so.
#[test]
fn a_file_without_aux_data_is_copied() {
    let directory = work("copy");
    let copy = directory.join("copy.data");
    let stderr = inject_ok(&recording(), &copy);
    assert!(
        stderr.contains("no AUXTRACE data: nothing to inject"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(recording()).unwrap()
    );
    let _ = std::fs::remove_dir_all(directory);
}

/// `/dev/null` and a FIFO are written into, never replaced.
#[test]
fn output_into_dev_null_and_a_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let directory = work("special");
    let kept = kept_recording(&directory);
    let regular = directory.join("injected.data");
    inject_ok(&kept, &regular);
    inject_ok(&kept, Path::new("/dev/null"));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());

    let fifo = directory.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let reading = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    inject_ok(&kept, &fifo);
    assert_eq!(reading.join().unwrap(), std::fs::read(&regular).unwrap());
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let _ = std::fs::remove_dir_all(directory);
}

/// Runs `rvperf inject` on `bad`, which must fail with one line on stderr naming
/// `what` (with its offset) and leave nothing in the output's directory.
fn assert_refused(bad: &Path, what: &str) {
    let directory = bad.parent().unwrap().join("out");
    std::fs::create_dir_all(&directory).unwrap();
    let output = inject(bad, &directory.join("injected.data"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{}: {stderr}", bad.display());
    assert!(!output.status.success(), "accepted: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(what), "{what:?} not in {stderr}");
    let left: Vec<_> = std::fs::read_dir(&directory).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn corrupt_or_unknown_aux_data_is_refused_with_its_offset() {
    let directory = work("bad");
    let kept = kept_recording(&directory);
    let bytes = std::fs::read(&kept).unwrap();
    let reader = PerfDataReader::from_bytes(&bytes, "kept").unwrap();
    let records: Vec<_> = reader.records().map(Result::unwrap).collect();
    let info = records
        .iter()
        .find(|record| record.record_type == PERF_RECORD_AUXTRACE_INFO)
        .unwrap()
        .offset;
    let chunk = records
        .iter()
        .rfind(|record| record.record_type == PERF_RECORD_AUXTRACE)
        .unwrap();
    // The second rvperf_ctr record of the last chunk, whose magic is overwritten.
    let data_at = chunk.offset + AUXTRACE_RECORD_SIZE;
    let first_size = u16::from_le_bytes([chunk.aux_data[4], chunk.aux_data[5]]);
    let second = data_at + u64::from(first_size);
    let mut corrupt = bytes.clone();
    corrupt[second as usize..second as usize + 4].copy_from_slice(b"XXXX");
    let corrupt_path = directory.join("corrupt.data");
    std::fs::write(&corrupt_path, corrupt).unwrap();
    assert_refused(
        &corrupt_path,
        &format!("corrupt AUXTRACE data at offset {second:#x}"),
    );

    // A record that claims one entry more than the chunk holds.
    let mut records_at = Vec::new();
    let mut at = 0;
    while at < chunk.aux_data.len() {
        records_at.push(at);
        at += usize::from(u16::from_le_bytes([
            chunk.aux_data[at + 4],
            chunk.aux_data[at + 5],
        ]));
    }
    let last = *records_at.last().unwrap();
    let mut truncated = bytes.clone();
    let record = data_at as usize + last;
    let size = u16::from_le_bytes([truncated[record + 4], truncated[record + 5]]) + 24;
    truncated[record + 4..record + 6].copy_from_slice(&size.to_le_bytes());
    let entries = u16::from_le_bytes([truncated[record + 20], truncated[record + 21]]) + 1;
    truncated[record + 20..record + 22].copy_from_slice(&entries.to_le_bytes());
    let truncated_path = directory.join("truncated.data");
    std::fs::write(&truncated_path, truncated).unwrap();
    assert_refused(
        &truncated_path,
        &format!("corrupt AUXTRACE data at offset {record:#x}"),
    );

    // AUX data of a type rvperf has no decoder for.
    let unknown = directory.join("unknown.data");
    keep_aux(
        &recording(),
        &unknown,
        &Keep {
            auxtrace_type: 1,
            areas: Areas::AsRecorded,
        },
    );
    assert_refused(
        &unknown,
        &format!("no decoder for AUXTRACE type 1 at offset {info:#x}"),
    );
    let _ = std::fs::remove_dir_all(directory);
}
