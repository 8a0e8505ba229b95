//! `rvperf autofdo` on a real CTR recording of tests/programs/vm/autofdo.c made in the
//! riscv64 guest (tests/fixtures/autofdo/, or the directory named by
//! RVPERF_AUTOFDO_RECORDING, where tools/vm/test puts a fresh one), checked with the
//! consumers: llvm-profdata 19 reads the LLVM profiles, clang 19 and GCC 12 compile the
//! program with them and carry rvperf's counts, llvm-profgen 19 agrees line by line
//! (differences named), and the sampled profile matches the exact execution counts
//! from a full qemu-riscv64 run block by block (overlap >= 0.90).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::consumers::{
    assert_entry_counts_are_head_counts, assert_gcc_takes_the_head_counts,
    assert_profgen_agrees_except_where_it_drops, clang_ir_with_profile, function_entry_count,
    hottest_entered, parse_text_profile, run_tool,
};
use common::{repository, rvperf_binary, scratch};

const INSTALL: &str =
    "run tools/install-deps.sh (clang-19, llvm-19, gcc-riscv64-linux-gnu, linux-perf, qemu-user)";

/// perf.data, the binary that ran and its arguments.
struct Recording {
    directory: PathBuf,
    data: PathBuf,
    binary: PathBuf,
    arguments: Vec<String>,
}

fn recording() -> &'static Recording {
    static RECORDING: OnceLock<Recording> = OnceLock::new();
    RECORDING.get_or_init(|| {
        let directory = std::env::var_os("RVPERF_AUTOFDO_RECORDING")
            .map(PathBuf::from)
            .unwrap_or_else(|| repository().join("tests/fixtures/autofdo"));
        let arguments = std::fs::read_to_string(directory.join("args"))
            .unwrap_or_else(|_| panic!("{}/args missing", directory.display()));
        Recording {
            data: directory.join("perf.data"),
            binary: directory.join("autofdo"),
            arguments: arguments.split_whitespace().map(str::to_owned).collect(),
            directory,
        }
    })
}

fn run(command: &mut Command) -> Output {
    run_tool(command, INSTALL)
}

fn work() -> &'static Path {
    static WORK: OnceLock<PathBuf> = OnceLock::new();
    WORK.get_or_init(|| {
        let directory = scratch().join(format!("autofdo-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        directory
    })
}

/// rvperf's profile in `format` (and, for llvm-text, the per-instruction counts).
fn profile(format: &str) -> PathBuf {
    static DONE: OnceLock<std::sync::Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    let mut done = done.lock().unwrap();
    if let Some(path) = done.get(format) {
        return path.clone();
    }
    let recording = recording();
    let path = work().join(format!("profile.{format}"));
    let output = run(Command::new(rvperf_binary()).args([
        "autofdo",
        "-i",
        text(&recording.data),
        "--binary",
        text(&recording.binary),
        "--format",
        format,
        "-o",
        text(&path),
        "--instruction-counts",
        text(&work().join("instruction.counts")),
    ]));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    done.insert(format.to_owned(), path.clone());
    path
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn llvm_profdata_reads_both_llvm_profiles_alike() {
    let text_profile = profile("llvm-text");
    let binary_profile = profile("llvm-extbinary");
    let show = |path: &Path| {
        String::from_utf8(
            run(Command::new("llvm-profdata-19").args(["show", "--sample", text(path)])).stdout,
        )
        .unwrap()
    };
    let from_text = show(&text_profile);
    assert!(from_text.contains("Function: "), "{from_text}");
    assert_eq!(from_text, show(&binary_profile));
    let ours = parse_text_profile(&std::fs::read_to_string(&text_profile).unwrap());
    for (name, (total, head, _)) in &ours {
        assert!(
            from_text.contains(&format!("Function: {name}: {total}, {head},")),
            "llvm-profdata does not show {name}: {total}, {head}"
        );
    }
}

fn source() -> PathBuf {
    repository().join("tests/programs/vm/autofdo.c")
}

#[test]
fn clang_compiles_the_program_with_the_profile_and_carries_its_counts() {
    for format in ["llvm-text", "llvm-extbinary"] {
        let path = profile(format);
        let ours = parse_text_profile(&std::fs::read_to_string(profile("llvm-text")).unwrap());
        let ir = clang_ir_with_profile(
            "riscv64-linux-gnu",
            &source(),
            &path,
            &work().join(format!("autofdo.{format}.ll")),
            INSTALL,
        );
        let checked = assert_entry_counts_are_head_counts(&ir, &ours, format);
        let (hottest, _) = hottest_entered(&ours);
        assert!(
            function_entry_count(&ir, &hottest).is_some(),
            "{hottest} has no entry count in the IR"
        );
        assert!(
            checked >= 5,
            "only {checked} profiled functions found in the IR"
        );
        assert!(
            ir.contains("!\"branch_weights\""),
            "no branch weights in the IR"
        );
    }
}

#[test]
fn gcc_12_compiles_the_program_with_the_profile_and_carries_its_counts() {
    let ours = parse_text_profile(&std::fs::read_to_string(profile("llvm-text")).unwrap());
    assert_gcc_takes_the_head_counts(&source(), &profile("gcc"), &ours, work(), INSTALL);
}

#[test]
fn llvm_profgen_agrees_line_by_line_except_where_it_drops_ranges() {
    let recording = recording();
    let ours = parse_text_profile(&std::fs::read_to_string(profile("llvm-text")).unwrap());
    // llvm-profgen reads perf script's text of the same recording (Linux perf reads
    // rvperf's perf.data) and agrees line by line but where it drops code.
    assert_profgen_agrees_except_where_it_drops(
        &recording.binary,
        &recording.data,
        work(),
        &ours,
        2,
        INSTALL,
    );
}

#[test]
fn sampled_counts_overlap_the_exact_counts_by_at_least_0_90() {
    let recording = recording();
    let _ = profile("llvm-text");
    let truth = work().join("truth.counts");
    let mut ground_truth = Command::new(env!("CARGO_BIN_EXE_rvperf-ground-truth"));
    ground_truth
        .args(["--elf", text(&recording.binary), "-o", text(&truth), "--"])
        .args(&recording.arguments);
    run(&mut ground_truth);
    let output = Command::new(env!("CARGO_BIN_EXE_rvperf-block-overlap"))
        .args([
            "--elf",
            text(&recording.binary),
            "--truth-counts",
            text(&truth),
            "--profile-counts",
            text(&work().join("instruction.counts")),
            "--min",
            "0.90",
        ])
        .output()
        .expect("run rvperf-block-overlap");
    let report = String::from_utf8_lossy(&output.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "block overlap below 0.90 for {}:\n{report}",
        recording.directory.display()
    );
}

/// A binary that is not the one recorded, one without debug info, and a recording
/// without branch stacks: one clear line each, a non-zero exit, no output file.
#[test]
fn wrong_binaries_and_inputs_are_refused_in_one_line() {
    let recording = recording();
    let directory = work().join("bad-inputs");
    std::fs::create_dir_all(&directory).unwrap();
    let refuse = |data: &Path, binary: &Path, expected: &str| {
        let output_file = directory.join("profile.txt");
        let output = Command::new(rvperf_binary())
            .args(["autofdo", "-i", text(data), "--binary", text(binary), "-o"])
            .arg(&output_file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "accepted {}: {stderr}",
            binary.display()
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!output_file.exists(), "a profile was written");
    };
    // Another program under the recorded name: its build id is not the recording's.
    let impostor = directory.join("autofdo");
    let status = Command::new("riscv64-linux-gnu-gcc")
        .args(["-O1", "-g", "-static", "-o"])
        .arg(&impostor)
        .arg(repository().join("tests/programs/vm/calls.c"))
        .status()
        .expect("riscv64-linux-gnu-gcc");
    assert!(status.success());
    refuse(&recording.data, &impostor, "build id");
    // The right binary without DWARF.
    let stripped = directory.join("stripped").join("autofdo");
    std::fs::create_dir_all(stripped.parent().unwrap()).unwrap();
    let status = Command::new("riscv64-linux-gnu-strip")
        .args(["-g", "-o"])
        .arg(&stripped)
        .arg(&recording.binary)
        .status()
        .expect("riscv64-linux-gnu-strip");
    assert!(status.success());
    refuse(&recording.data, &stripped, "no DWARF");
    // A recording of another program: the binary is mapped nowhere in it.
    let other = repository().join("tests/fixtures/flamegraph/riscv64-callchain/perf.data");
    refuse(&other, &recording.binary, "mapped autofdo");
}
