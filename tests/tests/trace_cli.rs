//! `rvperf flamegraph --trace` and `rvperf autofdo --trace` on the bundled traces, and
//! on bad input: a corrupt byte in the middle of a trace is a gap (warned with its
//! offset) that the profile is made around; a trace that holds nothing decodable, a
//! `--binary` that is not among the traced files, `--weight time` without timestamps:
//! one line, a non-zero exit and no output file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{repository, rvperf_binary, scratch};

fn fixture() -> PathBuf {
    repository().join("tests/fixtures/autofdo")
}

fn work(name: &str) -> PathBuf {
    let directory = scratch().join(format!("trace-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn rvperf(arguments: &[&str]) -> Output {
    Command::new(rvperf_binary())
        .args(arguments)
        .output()
        .expect("run rvperf")
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The weight of every stack of a folded file.
fn total_weight(folded: &str) -> u64 {
    folded
        .lines()
        .map(|line| line.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn flame_graph_weights_are_the_traced_instructions_or_the_traced_time() {
    let directory = work("weights");
    let folded = directory.join("insns.folded");
    let trace = fixture().join("trace.nt");
    let binary = fixture().join("autofdo");
    let output = rvperf(&[
        "flamegraph",
        "--trace",
        text(&trace),
        "--elf",
        text(&binary),
        "--timestamps",
        "--folded",
        "-o",
        text(&folded),
    ]);
    assert!(output.status.success(), "{output:?}");
    let folded = std::fs::read_to_string(&folded).unwrap();
    // The fixture's README: `autofdo 100` retires 1,146,212 instructions.
    assert_eq!(total_weight(&folded), 1_146_212);
    assert!(
        folded.lines().all(|line| line.starts_with("_start")),
        "{folded}"
    );

    let timed = directory.join("time.folded");
    let output = rvperf(&[
        "flamegraph",
        "--trace",
        text(&trace),
        "--elf",
        text(&binary),
        "--timestamps",
        "--weight",
        "time",
        "--folded",
        "-o",
        text(&timed),
    ]);
    assert!(output.status.success(), "{output:?}");
    // The encoder's clock counts retired instructions: the time between the first and
    // the last timestamp is shared out whole, and it is the instructions between them.
    let stderr = String::from_utf8_lossy(&output.stderr);
    // "rvperf: warning: N of M instructions ran before a hart's first timestamp, ..."
    let without_time: u64 = stderr
        .lines()
        .find(|line| line.contains("first timestamp"))
        .and_then(|line| line.split_whitespace().nth(2))
        .and_then(|number| number.parse().ok())
        .unwrap_or(0);
    let time = total_weight(&std::fs::read_to_string(&timed).unwrap());
    assert_eq!(time + without_time, 1_146_212, "{stderr}");
    assert!(without_time < 1_000, "{stderr}");
}

#[test]
fn a_corrupt_byte_is_a_gap_the_profiles_are_made_around() {
    let directory = work("corrupt");
    let mut bytes = std::fs::read(fixture().join("trace.nt")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    let corrupt = directory.join("corrupt.nt");
    std::fs::write(&corrupt, &bytes).unwrap();
    let binary = fixture().join("autofdo");
    let folded = directory.join("corrupt.folded");
    let output = rvperf(&[
        "flamegraph",
        "--trace",
        text(&corrupt),
        "--elf",
        text(&binary),
        "--timestamps",
        "--folded",
        "-o",
        text(&folded),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("gap: at byte offset 0x"), "{stderr}");
    let weight = total_weight(&std::fs::read_to_string(&folded).unwrap());
    // Decoding resumed at the next synchronisation: most of the trace is there.
    assert!(weight > 1_000_000 && weight < 1_146_212, "{weight}");
    // The stack after the gap starts unknown.
    assert!(
        std::fs::read_to_string(&folded)
            .unwrap()
            .contains("[unknown caller]"),
        "{stderr}"
    );

    let profile = directory.join("corrupt.afdo");
    let output = rvperf(&[
        "autofdo",
        "--trace",
        text(&corrupt),
        "--timestamps",
        "--binary",
        text(&binary),
        "-o",
        text(&profile),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("gap: at byte offset 0x"), "{stderr}");
    assert!(profile.is_file());
}

#[test]
fn bad_inputs_are_refused_in_one_line_without_output() {
    let directory = work("refused");
    let garbage = directory.join("garbage.nt");
    std::fs::write(&garbage, [0x55u8; 4096]).unwrap();
    let binary = fixture().join("autofdo");
    let trace = fixture().join("trace.nt");
    let other = repository().join("tests/fixtures/ntrace/interp/program");
    let output_file = directory.join("out");
    let refuse = |arguments: &[&str], expected: &str| {
        let output = rvperf(arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{arguments:?} accepted: {stderr}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|line| line.contains("error"))
            .collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(expected), "{stderr}");
        assert!(!output_file.exists(), "{arguments:?} wrote output");
    };
    let out = text(&output_file);
    refuse(
        &[
            "flamegraph",
            "--trace",
            text(&garbage),
            "--elf",
            text(&binary),
            "-o",
            out,
        ],
        "no synchronisation message",
    );
    refuse(
        &[
            "autofdo",
            "--trace",
            text(&garbage),
            "--binary",
            text(&binary),
            "-o",
            out,
        ],
        "no synchronisation message",
    );
    refuse(
        &[
            "autofdo",
            "--trace",
            text(&trace),
            "--elf",
            text(&other),
            "--binary",
            text(&binary),
            "-o",
            out,
        ],
        "is not one of the --elf files",
    );
    refuse(
        &[
            "flamegraph",
            "--trace",
            text(&trace),
            "--elf",
            text(&binary),
            "--weight",
            "time",
            "-o",
            out,
        ],
        "--weight time needs a trace with timestamps",
    );
}

/// The profiles of a parallel decode (chunks of 4 KiB, most starting at seams between
/// the trace's synchronisation messages) are the serial decode's, byte for byte.
#[test]
fn profiles_decoded_on_several_threads_equal_the_serial_ones() {
    let directory = work("jobs");
    let trace = fixture().join("trace.nt");
    let binary = fixture().join("autofdo");
    // The bytes `command` (writing to -o OUTPUT) writes on one thread, and on two.
    let serial_and_parallel = |name: &str, command: &[&str]| -> [Vec<u8>; 2] {
        let jobs = [
            &["--jobs", "1"][..],
            &["--jobs", "2", "--chunk-bytes", "4096"][..],
        ];
        jobs.map(|jobs| {
            let output_path = directory.join(format!("{name}-{}", jobs[1]));
            let mut arguments = command.to_vec();
            arguments.extend_from_slice(&["--trace", text(&trace), "--elf", text(&binary)]);
            arguments.extend_from_slice(&["--timestamps", "-o", text(&output_path)]);
            arguments.extend_from_slice(jobs);
            let output = rvperf(&arguments);
            assert!(output.status.success(), "{output:?}");
            let written = std::fs::read(&output_path).unwrap();
            assert!(!written.is_empty(), "{name}");
            written
        })
    };
    for weight in ["insns", "time"] {
        let [serial, parallel] =
            serial_and_parallel(weight, &["flamegraph", "--weight", weight, "--folded"]);
        assert!(
            serial == parallel,
            "--weight {weight}: the parallel decode's stacks differ from the serial decode's"
        );
    }
    let [serial, parallel] =
        serial_and_parallel("autofdo", &["autofdo", "--binary", text(&binary)]);
    assert!(
        serial == parallel,
        "the parallel decode's profile differs from the serial decode's"
    );
}

/// A trace whose encoder reported every direct jump and call (trTeInstEnAllJumps),
/// decoded with `--all-jumps`, gives every profile command exactly the output of the
/// same run traced without it (HTM and BTM, serially and on two threads).
#[test]
fn all_jumps_traces_give_the_profiles_of_plain_ones() {
    use ntrace_flow::{BranchMode, EncoderOptions};
    let directory = work("all-jumps");
    let name = "fnptr";
    let binary = common::program(name);
    let pcs = common::retired_pcs(name);
    let code = common::load(name);
    let write = |tag: &str, options: EncoderOptions| {
        let (bytes, _) = common::encode(&code, &pcs, options);
        let path = directory.join(format!("{tag}.nt"));
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let plain = write("plain", EncoderOptions::default());
    let mut jumps = Vec::new();
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        let mut options = EncoderOptions::default();
        options.mode = mode;
        options.all_jumps = true;
        jumps.push(write(&format!("all-jumps-{mode:?}"), options));
    }
    let commands: [&[&str]; 3] = [
        &["flamegraph", "--folded"],
        &["autofdo", "--binary", text(&binary)],
        &["inject", "--itrace=5000", "--branches", "16"],
    ];
    for command in commands {
        let run = |trace: &Path, extra: &[&str], tag: &str| {
            let output_path = directory.join(format!("{}-{tag}", command[0]));
            let mut arguments = command.to_vec();
            arguments.extend_from_slice(&["--trace", text(trace), "--elf", text(&binary)]);
            arguments.extend_from_slice(extra);
            arguments.extend_from_slice(&["-o", text(&output_path)]);
            let output = rvperf(&arguments);
            assert!(output.status.success(), "{arguments:?}: {output:?}");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!stderr.contains("gap"), "{arguments:?}: {stderr}");
            if command[0] == "inject" {
                // The samples, without the file's header (which records the command line).
                let script = rvperf(&["script", "-i", text(&output_path)]);
                assert!(script.status.success(), "{script:?}");
                return script.stdout;
            }
            std::fs::read(&output_path).unwrap()
        };
        let expected = run(&plain, &[], "plain");
        assert!(!expected.is_empty());
        for (index, trace) in jumps.iter().enumerate() {
            let mut extras = vec![vec!["--all-jumps"]];
            if command[0] != "inject" {
                extras.push(vec!["--all-jumps", "--jobs", "2"]);
            }
            for extra in extras {
                let actual = run(trace, &extra, &format!("{index}"));
                assert!(
                    actual == expected,
                    "{} {extra:?}: the all-jumps trace {} gives another output",
                    command[0],
                    trace.display()
                );
            }
        }
    }
}

/// The options of N-Trace recordings (`-i` of `rvperf trace record`'s perf.data: their
/// decoding is checked on the guest tier's recordings in ntrace_guest.rs) are refused
/// on what is not one, in one line, with nothing written.
#[test]
fn recording_options_on_a_sampled_perf_data_are_refused() {
    let directory = work("recording-options");
    let sampled = fixture().join("perf.data");
    let binary = fixture().join("autofdo");
    let output = directory.join("out");
    let trace = fixture().join("trace.nt");
    let cases: [&[&str]; 5] = [
        &[
            "flamegraph",
            "-i",
            text(&sampled),
            "--weight",
            "time",
            "-o",
            text(&output),
        ],
        &[
            "autofdo",
            "-i",
            text(&sampled),
            "--binary",
            text(&binary),
            "--sample-period",
            "1000",
            "-o",
            text(&output),
        ],
        &["script", "-i", text(&sampled), "--itrace=1000"],
        &[
            "inject",
            "-i",
            text(&sampled),
            "--itrace=1000",
            "-o",
            text(&output),
        ],
        &[
            "decode",
            "--trace",
            text(&trace),
            "--elf",
            text(&binary),
            "--pid",
            "1",
        ],
    ];
    for arguments in cases {
        let result = rvperf(arguments);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(
            !result.status.success(),
            "{arguments:?} succeeded: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{arguments:?}: {stderr}");
        assert!(!output.exists(), "{arguments:?} left {}", output.display());
    }
}
