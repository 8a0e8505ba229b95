//! `rvperf flamegraph`: golden folded stacks and SVGs of recorded inputs
//! (tests/fixtures/flamegraph/*/, blessable with RVPERF_BLESS=1), every frame of a
//! known program a real function of it, and the differential mode.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;

use common::{repository, rvperf_binary, scratch};

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(repository().join("tests/fixtures/flamegraph"))
        .expect("tests/fixtures/flamegraph")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("args").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 3, "golden cases missing: {cases:?}");
    cases
}

fn flamegraph(directory: &Path, arguments: &[&str]) -> (Vec<u8>, String) {
    let output = Command::new(rvperf_binary())
        .arg("flamegraph")
        .args(arguments)
        .current_dir(directory)
        .output()
        .expect("run rvperf");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "rvperf flamegraph {arguments:?} failed: {stderr}"
    );
    (output.stdout, stderr)
}

/// The folded stacks of `input` (relative to the case directory `case`, whose `symfs`
/// holds the recorded files), with `extra` arguments.
fn folded_stacks(case: &Path, input: &str, extra: &[&str]) -> String {
    let mut arguments = vec!["-i", input, "--symfs", "symfs", "--folded", "-o", "-"];
    arguments.extend_from_slice(extra);
    String::from_utf8(flamegraph(case, &arguments).0).unwrap()
}

/// Compares `actual` with the file, or rewrites the file under RVPERF_BLESS=1 (only
/// `1`: a missing file is a failure otherwise).
fn golden(expected: &Path, actual: &[u8]) {
    if std::env::var_os("RVPERF_BLESS").is_some_and(|value| value == "1") {
        std::fs::write(expected, actual).unwrap();
        return;
    }
    let wanted = std::fs::read(expected).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with RVPERF_BLESS=1 to create it",
            expected.display()
        )
    });
    assert!(
        wanted == actual,
        "{} differs from rvperf's output (RVPERF_BLESS=1 to accept):\n{}",
        expected.display(),
        String::from_utf8_lossy(actual)
    );
}

#[test]
fn folded_stacks_and_svgs_match_the_golden_files() {
    for case in cases() {
        let arguments = std::fs::read_to_string(case.join("args")).unwrap();
        let arguments: Vec<&str> = arguments.split_whitespace().collect();
        let (folded, _) = flamegraph(&case, &arguments);
        assert!(!folded.is_empty(), "{}: no stacks", case.display());
        golden(&case.join("expected.folded"), &folded);
        let svg_arguments: Vec<&str> = arguments
            .iter()
            .copied()
            .filter(|&argument| argument != "--folded")
            .chain(["--title", "golden"])
            .collect();
        let (svg, _) = flamegraph(&case, &svg_arguments);
        assert!(svg.starts_with(b"<?xml"), "{}: not an SVG", case.display());
        golden(&case.join("expected.svg"), &svg);
    }
}

/// Every frame below the command of the CTR call-stack case is a function of `calls`,
/// and the known call chain main -> run_round -> op_mix -> helper_twice -> helper_leaf
/// is there.
#[test]
fn every_frame_of_a_known_program_is_one_of_its_functions() {
    let case = repository().join("tests/fixtures/flamegraph/riscv64-ctr-call-stack");
    let elf = std::fs::read(case.join("symfs/opt/rvperf/bin/calls")).unwrap();
    let symbols = symbolize::ObjectSymbolizer::new("calls", elf).unwrap();
    let functions: std::collections::HashSet<String> = symbols
        .function_table()
        .iter()
        .map(|function| function.name.clone())
        .collect();
    let folded = folded_stacks(&case, "perf.data", &[]);
    let mut stacks = 0;
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        assert!(count.parse::<u64>().unwrap() > 0);
        let mut frames = stack.split(';');
        assert_eq!(frames.next(), Some("calls"), "{line}");
        for frame in frames {
            assert!(
                functions.contains(frame),
                "{frame} is not a function of calls: {line}"
            );
        }
        stacks += 1;
    }
    assert!(stacks >= 5, "{folded}");
    assert!(
        folded.contains("calls;main;run_round;op_mix;helper_twice;helper_leaf "),
        "{folded}"
    );
}

#[test]
fn splits_by_process_and_thread_and_draws_differences() {
    let case = repository().join("tests/fixtures/flamegraph/riscv64-ctr-call-stack");
    let by_thread = folded_stacks(&case, "perf.data", &["--split", "thread"]);
    assert!(
        by_thread
            .lines()
            .all(|line| line.starts_with("calls-") && line.contains('/')),
        "{by_thread}"
    );
    let other = repository().join("tests/fixtures/flamegraph/riscv64-callchain/perf.data");
    let output = scratch().join(format!("differential-{}.svg", std::process::id()));
    let (_, _) = flamegraph(
        &case,
        &[
            "-i",
            "perf.data",
            "--symfs",
            "symfs",
            "--diff-from",
            other.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ],
    );
    let svg = std::fs::read_to_string(&output).unwrap();
    assert!(
        svg.contains("run_round"),
        "differential SVG lacks the new stacks"
    );
    std::fs::remove_file(&output).unwrap();
    let folded = folded_stacks(
        &case,
        "perf.data",
        &["--diff-from", other.to_str().unwrap()],
    );
    // Stacks only in the "before" recording have 0 after, and the reverse.
    assert!(
        folded
            .lines()
            .any(|line| line.starts_with("hot;") && line.ends_with(" 0")),
        "{folded}"
    );
    assert!(
        folded
            .lines()
            .any(|line| line.starts_with("calls;") && line.split(' ').nth(1) == Some("0")),
        "{folded}"
    );
}

#[test]
fn a_missing_or_corrupt_input_is_one_line_and_leaves_no_output() {
    let directory = scratch().join(format!("flamegraph-bad-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::write(
        directory.join("bad.data"),
        b"PERFILE2\x68\0\0\0\0\0\0\0garbage",
    )
    .unwrap();
    let output = Command::new(rvperf_binary())
        .args(["flamegraph", "-i", "bad.data", "-o", "out.svg"])
        .current_dir(&directory)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("offset"), "{stderr}");
    let leftovers: Vec<_> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("bad.data")]);
    std::fs::remove_dir_all(&directory).unwrap();
}

/// `--inline` shows inlined functions as frames of their own: autofdo.c's
/// always_inline `mix` appears under `process_value` only with it.
#[test]
fn inline_frames_appear_only_with_inline() {
    let fixture = repository().join("tests/fixtures/autofdo");
    let directory = scratch().join(format!("flamegraph-inline-{}", std::process::id()));
    let bin = directory.join("symfs/opt/rvperf/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(fixture.join("autofdo"), bin.join("autofdo")).unwrap();
    std::fs::copy(fixture.join("perf.data"), directory.join("perf.data")).unwrap();
    let folded = |extra: &[&str]| {
        let mut arguments = vec!["-i", "perf.data", "--symfs", "symfs", "--folded", "-o", "-"];
        arguments.extend_from_slice(extra);
        String::from_utf8(flamegraph(&directory, &arguments).0).unwrap()
    };
    let plain = folded(&[]);
    let inlined = folded(&["--inline"]);
    assert!(
        plain
            .lines()
            .any(|line| line.starts_with("autofdo;process_value ")),
        "{plain}"
    );
    assert!(!plain.contains(";mix"), "{plain}");
    assert!(
        inlined
            .lines()
            .any(|line| line.starts_with("autofdo;process_value;mix ")),
        "{inlined}"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// perf.data is not in time order: each CPU's buffer is written in turn, so a task's
/// COMM exec or FORK can come after its mmaps in the file. Side-band records apply in
/// time order with the samples: moving the exec record after the mmaps (same
/// timestamps, same round) changes nothing.
#[test]
fn side_band_records_apply_in_time_order_not_file_order() {
    use perf_abi::sys::bindings as abi;
    let case = repository().join("tests/fixtures/flamegraph/riscv64-callchain");
    let original = std::fs::read(case.join("perf.data")).unwrap();
    let reader = perf_data::PerfDataReader::from_bytes(&original, "perf.data").unwrap();
    let mut records = reader.records();
    let mut exec = None;
    let mut last_mmap_end = None;
    while let Some(record) = records.next_record().unwrap() {
        let start = record.offset as usize;
        let end = start + 8 + record.body.len() + record.aux_data.len();
        match record.record_type {
            perf_data::PERF_RECORD_FINISHED_ROUND => break,
            abi::PERF_RECORD_COMM
                if u32::from(record.misc) & abi::PERF_RECORD_MISC_COMM_EXEC != 0 =>
            {
                exec = Some(start..end)
            }
            abi::PERF_RECORD_MMAP2 if exec.is_some() => last_mmap_end = Some(end),
            _ => {}
        }
    }
    let exec = exec.expect("the fixture's COMM exec record");
    let last_mmap_end = last_mmap_end.expect("mmaps after the exec in the first round");
    let mut reordered = original[..exec.start].to_vec();
    reordered.extend_from_slice(&original[exec.end..last_mmap_end]);
    reordered.extend_from_slice(&original[exec.clone()]);
    reordered.extend_from_slice(&original[last_mmap_end..]);
    assert_eq!(reordered.len(), original.len());
    let path = scratch().join(format!("exec-after-mmaps-{}.data", std::process::id()));
    std::fs::write(&path, &reordered).unwrap();

    let folded = |input: &Path| folded_stacks(&case, input.to_str().unwrap(), &[]);
    let in_file_order = folded(&case.join("perf.data"));
    assert!(in_file_order.contains(";hot_function "), "{in_file_order}");
    assert_eq!(folded(&path), in_file_order);
    std::fs::remove_file(&path).unwrap();
}

/// Folded stacks as a map (a stack listed twice counts once, summed).
fn folded_map(folded: &str) -> BTreeMap<String, u64> {
    let mut stacks = BTreeMap::new();
    for line in folded.lines().filter(|line| !line.is_empty()) {
        let (stack, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        *stacks.entry(stack.to_owned()).or_default() += count.parse::<u64>().unwrap();
    }
    stacks
}

/// `perf script | inferno-collapse-perf` of a case's perf.data (with its symfs), through
/// inferno's library: what the inferno binary does with perf script's text. One
/// difference is normalised, on perf's side and only that: a kernel frame without a
/// symbol is `[kernel.kallsyms]` in rvperf's stacks, while perf, which has no map for
/// the kernel of rvperf's recordings (they hold no MMAP record of it), prints it as
/// `ADDRESS [unknown] ([unknown])` and inferno folds that to `[unknown]`. Such lines of
/// the kernel's half of the address space are given rvperf's name before folding.
fn perf_script_collapsed(case: &Path) -> (BTreeMap<String, u64>, bool) {
    let output = common::perf_for_recordings()
        .args(["script", "-i", "perf.data", "--symfs", "symfs"])
        .current_dir(case)
        .output()
        .expect("run perf script (tools/install-deps.sh installs linux-perf)");
    assert!(
        output.status.success(),
        "perf script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let script = String::from_utf8(output.stdout).unwrap();
    let mut callchains = false;
    let mut normalised = String::with_capacity(script.len());
    for line in script.lines() {
        let frame = line.trim_start();
        if line.starts_with('\t') {
            callchains = true;
        }
        let kernel_address = frame
            .split_once(' ')
            .and_then(|(address, _)| u64::from_str_radix(address, 16).ok())
            .is_some_and(|address| address >= 1 << 63);
        if line.starts_with('\t') && kernel_address && frame.ends_with(" [unknown] ([unknown])") {
            normalised.push_str(&line.replace(" [unknown] (", " [kernel.kallsyms] ("));
        } else {
            normalised.push_str(line);
        }
        normalised.push('\n');
    }
    let mut folded = Vec::new();
    Folder::from(Options::default())
        .collapse(normalised.as_bytes(), &mut folded)
        .expect("inferno collapses perf script's output");
    (folded_map(&String::from_utf8(folded).unwrap()), callchains)
}

/// Each case's folded stacks are what inferno-collapse-perf folds from Linux perf's
/// `perf script` of the same file, stack for stack and weight for weight (normalised
/// only as perf_script_collapsed says). A recording without callchains (the CTR case:
/// rvperf's stacks there are CTR call stacks, which perf script does not print) is
/// compared at its leaves: command and sampled function, weights summed.
#[test]
fn folded_stacks_are_what_inferno_folds_from_perf_script() {
    for case in cases() {
        let mut ours = folded_map(&std::fs::read_to_string(case.join("expected.folded")).unwrap());
        let (theirs, callchains) = perf_script_collapsed(&case);
        if !callchains {
            let mut leaves = BTreeMap::new();
            for (stack, count) in ours {
                let command = stack.split(';').next().unwrap();
                let leaf = stack.rsplit(';').next().unwrap();
                let key = if command == stack {
                    stack.clone()
                } else {
                    format!("{command};{leaf}")
                };
                *leaves.entry(key).or_default() += count;
            }
            ours = leaves;
        }
        let differing: Vec<_> = ours
            .keys()
            .chain(theirs.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter(|stack| ours.get(*stack) != theirs.get(*stack))
            .map(|stack| (stack, ours.get(stack), theirs.get(stack)))
            .collect();
        assert!(
            differing.is_empty(),
            "{}: stacks where rvperf (first) and perf script | inferno-collapse-perf \
             (second) differ: {differing:#?}",
            case.display()
        );
        assert!(!ours.is_empty(), "{}: no stacks", case.display());
    }
}
