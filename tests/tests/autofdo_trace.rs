//! `rvperf autofdo --trace`: the exact AutoFDO profile of an N-Trace, through the same
//! consumers as the CTR profile of tests/tests/autofdo.rs. The program is the AutoFDO
//! fixture's binary (tests/programs/vm/autofdo.c, the one the bundled CTR recording of
//! tests/fixtures/autofdo was made of), run under `qemu-riscv64` with a shorter input
//! and its exact retired-PC stream encoded by rvperf's encoder model (HTM, implicit
//! returns, repeated history):
//!
//! * the profile's per-instruction counts equal the ground truth exactly;
//! * llvm-profdata 19 reads it; clang 19 gives every profiled function it defines
//!   `function_entry_count` = head count + 1; GCC 12 reads it silently and its entry
//!   block count agrees;
//! * `rvperf inject --itrace=PERIOD` of the trace, read by Linux perf and turned into a
//!   profile by llvm-profgen 19, agrees line by line with `rvperf autofdo --trace
//!   --sample-period PERIOD` except where llvm-profgen drops ranges (by its own
//!   account);
//! * clang 19 builds of autofdo.c with the trace profile and with the CTR-sampled
//!   profile: the trace's build retires clearly fewer instructions under QEMU (a
//!   deterministic count) than one without a profile, and as few as the CTR's (up to
//!   the layout noise of a switch whose cases are equally likely). The same comparison
//!   on the trace tests' interpreter, whose profile has no such tie, allows no noise
//!   (tests/tests/autofdo_interp.rs).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use common::consumers::{
    assert_entry_counts_are_head_counts, assert_gcc_takes_the_head_counts,
    assert_profgen_agrees_except_where_it_drops, clang_ir_with_profile,
    instructions_of_clang_build, parse_text_profile, run_tool,
};
use common::{repository, rvperf_binary, scratch, write_profiling_trace};

const INSTALL: &str =
    "run tools/install-deps.sh (clang-19, llvm-19, gcc-riscv64-linux-gnu, qemu-user)";

/// The traced run's input: `autofdo ROUNDS` (the CTR recording ran 1500).
const ROUNDS: &str = "60";

fn fixture() -> PathBuf {
    repository().join("tests/fixtures/autofdo")
}

fn binary() -> PathBuf {
    fixture().join("autofdo")
}

fn work() -> &'static Path {
    static WORK: OnceLock<PathBuf> = OnceLock::new();
    WORK.get_or_init(|| {
        let directory = scratch().join(format!("autofdo-trace-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        directory
    })
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn run(command: &mut Command) -> Output {
    run_tool(command, INSTALL)
}

/// The traced run: its trace file and its exact per-instruction counts.
struct TracedRun {
    trace: PathBuf,
    counts: HashMap<u64, u64>,
}

fn traced_run() -> &'static TracedRun {
    static RUN: OnceLock<TracedRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let trace = work().join("autofdo.nt");
        let pcs = write_profiling_trace(&binary(), &[ROUNDS], &trace);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for pc in pcs {
            *counts.entry(pc).or_default() += 1;
        }
        TracedRun { trace, counts }
    })
}

/// rvperf's profile of the trace in `format`.
fn trace_profile(format: &str) -> PathBuf {
    static DONE: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap();
    if let Some((_, path)) = done.iter().find(|(made, _)| made == format) {
        return path.clone();
    }
    let path = work().join(format!("trace-profile.{format}"));
    let output = run(Command::new(rvperf_binary()).args([
        "autofdo",
        "--trace",
        text(&traced_run().trace),
        "--binary",
        text(&binary()),
        "--format",
        format,
        "-o",
        text(&path),
        "--instruction-counts",
        text(&work().join(format!("trace-{format}.counts"))),
    ]));
    // The C library of the static binary has no debug info: its instructions are
    // counted but have no source line. Nothing else may be left out.
    let stderr = String::from_utf8_lossy(&output.stderr);
    for line in stderr.lines().filter(|line| line.contains("warning")) {
        assert!(
            line.contains("have no source line in the debug info (0 DWARF errors)"),
            "autofdo --trace warned: {line}"
        );
    }
    done.push((format.to_owned(), path.clone()));
    path
}

#[test]
fn the_profile_counts_every_instruction_exactly() {
    let _ = trace_profile("llvm-text");
    let written = std::fs::read_to_string(work().join("trace-llvm-text.counts")).unwrap();
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for line in written.lines() {
        let (address, count) = line.split_once(' ').unwrap();
        let address = u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap();
        counts.insert(address, count.parse().unwrap());
    }
    let truth = &traced_run().counts;
    let differing = truth
        .iter()
        .filter(|&(address, count)| counts.get(address) != Some(count))
        .count();
    assert_eq!(
        differing,
        0,
        "{differing} of {} instructions differ",
        truth.len()
    );
    assert_eq!(counts.len(), truth.len());
}

#[test]
fn llvm_profdata_reads_both_llvm_profiles_alike() {
    let show = |path: &Path| {
        String::from_utf8(
            run(Command::new("llvm-profdata-19").args(["show", "--sample", text(path)])).stdout,
        )
        .unwrap()
    };
    let from_text = show(&trace_profile("llvm-text"));
    assert_eq!(from_text, show(&trace_profile("llvm-extbinary")));
    let ours = parse_text_profile(&std::fs::read_to_string(trace_profile("llvm-text")).unwrap());
    assert!(ours.len() >= 10, "{} functions", ours.len());
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
fn clang_gives_every_profiled_function_its_head_count_plus_one() {
    let path = trace_profile("llvm-text");
    let ours = parse_text_profile(&std::fs::read_to_string(&path).unwrap());
    let ir = clang_ir_with_profile(
        "riscv64-linux-gnu",
        &source(),
        &path,
        &work().join("autofdo.trace.ll"),
        INSTALL,
    );
    let checked = assert_entry_counts_are_head_counts(&ir, &ours, "trace profile");
    assert!(checked >= 5, "only {checked} profiled functions in the IR");
}

#[test]
fn gcc_12_reads_the_profile_silently_and_agrees_on_entry_counts() {
    let ours = parse_text_profile(&std::fs::read_to_string(trace_profile("llvm-text")).unwrap());
    assert_gcc_takes_the_head_counts(&source(), &trace_profile("gcc"), &ours, work(), INSTALL);
}

/// The profiled build may retire this many more instructions per million than the
/// CTR profile's build: autofdo.c's eight switch cases are equally likely by design, so
/// which case's block clang lays out as the fall-through (the only code the two builds
/// differ in, measured: 97 instructions of 1.68 M) depends on sampling luck, not on
/// how exact the profile is.
const LAYOUT_NOISE_PER_MILLION: u64 = 100;

#[test]
fn clang_builds_with_the_trace_profile_run_as_fast_as_with_the_ctr_profile() {
    let ctr_profile = work().join("ctr-profile.llvm-text");
    run(Command::new(rvperf_binary()).args([
        "autofdo",
        "-i",
        text(&fixture().join("perf.data")),
        "--binary",
        text(&binary()),
        "-o",
        text(&ctr_profile),
    ]));
    let measure = |profile: Option<&Path>| {
        instructions_of_clang_build(&source(), profile, &["200"], work(), INSTALL)
    };
    let with_trace = measure(Some(&trace_profile("llvm-text")));
    let with_ctr = measure(Some(&ctr_profile));
    let without = measure(None);
    eprintln!(
        "autofdo 200 retires {with_trace} instructions built with the trace profile, {with_ctr} with the CTR profile, {without} with none"
    );
    // The profile is used: a clear gain over no profile (measured: 1.3%).
    assert!(
        with_trace * 1000 < without * 995,
        "the trace profile's build retires {with_trace} instructions, one without a profile {without}"
    );
    assert!(
        with_trace <= with_ctr + with_ctr * LAYOUT_NOISE_PER_MILLION / 1_000_000,
        "the trace profile's build retires {with_trace} instructions, the CTR profile's {with_ctr}"
    );
}

#[test]
fn llvm_profgen_of_the_injected_trace_agrees_with_the_sampled_trace_profile() {
    let period = "1009";
    let ours_path = work().join("sampled-trace-profile.txt");
    run(Command::new(rvperf_binary()).args([
        "autofdo",
        "--trace",
        text(&traced_run().trace),
        "--binary",
        text(&binary()),
        "--sample-period",
        period,
        "--branches",
        "32",
        "-o",
        text(&ours_path),
    ]));
    let injected = work().join("injected.data");
    run(Command::new(rvperf_binary()).args([
        "inject",
        &format!("--itrace={period}"),
        "--branches",
        "32",
        "--trace",
        text(&traced_run().trace),
        "--elf",
        text(&binary()),
        "-o",
        text(&injected),
    ]));
    let ours = parse_text_profile(&std::fs::read_to_string(&ours_path).unwrap());
    assert!(ours.len() >= 10, "{} functions", ours.len());
    let directory = work().join("profgen");
    std::fs::create_dir_all(&directory).unwrap();
    assert_profgen_agrees_except_where_it_drops(
        &binary(),
        &injected,
        &directory,
        &ours,
        2,
        INSTALL,
    );
}
