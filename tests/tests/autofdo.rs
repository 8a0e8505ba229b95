//! `rvperf autofdo` on a real CTR recording of tests/programs/vm/autofdo.c made in the
//! riscv64 guest (tests/fixtures/autofdo/, or the directory named by
//! RVPERF_AUTOFDO_RECORDING, where tools/vm/test puts a fresh one), checked with the
//! consumers: llvm-profdata 19 reads the LLVM profiles, clang 19 and GCC 12 compile the
//! program with them and carry rvperf's counts, llvm-profgen 19 agrees line by line
//! (differences named), and the sampled profile matches the exact execution counts
//! from a full qemu-riscv64 run block by block (overlap >= 0.90).

mod common;
// The GCC 12 afdo-dump reader the profiles crate's consumer tests use too.
#[path = "../../userland/profiles/tests/common/gcc_dump.rs"]
mod gcc_dump;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::consumers::{function_entry_count, perf_script_branch_stacks, run_tool};
use common::{repository, rvperf_binary, scratch};
use gcc_dump::{gcc_block_counts, read_afdo_dump};

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

/// Top-level functions of an LLVM text profile: name -> (total, head, line -> count),
/// lines keyed by offset (discriminators folded by taking the largest count, which is
/// how llvm-profgen reads GCC's discriminators: not in LLVM's encoding, base 0).
type TextProfile = BTreeMap<String, (u64, u64, BTreeMap<u32, u64>)>;

fn parse_text(profile: &str) -> TextProfile {
    let mut functions = TextProfile::new();
    let mut current: Option<String> = None;
    for line in profile.lines() {
        if !line.starts_with(' ') {
            let mut fields = line.rsplitn(3, ':');
            let head = fields.next().unwrap().parse().unwrap();
            let total = fields.next().unwrap().parse().unwrap();
            let name = fields.next().unwrap().to_owned();
            functions.insert(name.clone(), (total, head, BTreeMap::new()));
            current = Some(name);
        } else if line.starts_with("  ") {
            // Inlined instances: compared through their functions' own copies only.
            continue;
        } else {
            let (location, rest) = line.trim_start().split_once(": ").unwrap();
            let Some(count) = rest.split(' ').next().and_then(|c| c.parse::<u64>().ok()) else {
                continue; // an inlined call site: ` offset: callee:total`
            };
            let offset: u32 = location.split('.').next().unwrap().parse().unwrap();
            let function = functions.get_mut(current.as_ref().unwrap()).unwrap();
            let entry = function.2.entry(offset).or_default();
            *entry = (*entry).max(count);
        }
    }
    functions
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
    let ours = parse_text(&std::fs::read_to_string(&text_profile).unwrap());
    for (name, (total, head, _)) in &ours {
        assert!(
            from_text.contains(&format!("Function: {name}: {total}, {head},")),
            "llvm-profdata does not show {name}: {total}, {head}"
        );
    }
}

/// The function entered most often per rvperf's profile, with its head count.
fn hottest_entered(profile: &TextProfile) -> (String, u64) {
    profile
        .iter()
        .filter(|(name, _)| name.as_str() != "main")
        .map(|(name, (_, head, _))| (name.clone(), *head))
        .max_by_key(|(name, head)| (*head, std::cmp::Reverse(name.clone())))
        .unwrap()
}

fn source() -> PathBuf {
    repository().join("tests/programs/vm/autofdo.c")
}

#[test]
fn clang_compiles_the_program_with_the_profile_and_carries_its_counts() {
    for format in ["llvm-text", "llvm-extbinary"] {
        let path = profile(format);
        let ours = parse_text(&std::fs::read_to_string(profile("llvm-text")).unwrap());
        let ir = work().join(format!("autofdo.{format}.ll"));
        let output = run(Command::new("clang-19").args([
            "--target=riscv64-linux-gnu",
            "-O2",
            "-g",
            "-fno-inline",
            "-S",
            "-emit-llvm",
            &format!("-fprofile-sample-use={}", text(&path)),
            text(&source()),
            "-o",
            text(&ir),
        ]));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.trim().is_empty(), "clang warned: {stderr}");
        let ir = std::fs::read_to_string(&ir).unwrap();
        // Every function defined in the IR that rvperf profiled carries its entry count
        // (LLVM adds 1 to the head count, so that a profiled function is never 0).
        let mut checked = 0;
        for (name, (_, head, _)) in &ours {
            let Some(count) = function_entry_count(&ir, name) else {
                continue;
            };
            assert_eq!(count, head + 1, "{format}: function_entry_count of {name}");
            checked += 1;
        }
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
    let path = profile("gcc");
    let ours = parse_text(&std::fs::read_to_string(profile("llvm-text")).unwrap());
    let dump_directory = work().join("gcc-dump");
    std::fs::create_dir_all(&dump_directory).unwrap();
    let output = run(Command::new("riscv64-linux-gnu-gcc").args([
        "-O2",
        "-g",
        "-fno-inline",
        "-Wall",
        &format!("-fauto-profile={}", text(&path)),
        "-fdump-ipa-afdo",
        "-dumpdir",
        &format!("{}/", text(&dump_directory)),
        "-c",
        text(&source()),
        "-o",
        text(&work().join("autofdo.o")),
    ]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.trim().is_empty(), "gcc warned: {stderr}");
    let dump = read_afdo_dump(&dump_directory).expect("GCC wrote no afdo dump");
    // GCC sets the entry block's count of each profiled function from its head count.
    let (hottest, head) = hottest_entered(&ours);
    let counts = gcc_block_counts(&dump, &hottest);
    assert_eq!(
        counts.first(),
        Some(&head),
        "{hottest}'s entry block in GCC's dump"
    );
}

#[test]
fn llvm_profgen_agrees_line_by_line_except_where_it_drops_ranges() {
    let recording = recording();
    let ours = parse_text(&std::fs::read_to_string(profile("llvm-text")).unwrap());
    // llvm-profgen reads perf script's text of the same recording (Linux perf reads
    // rvperf's perf.data).
    let script_path = work().join("perf-script.txt");
    std::fs::write(
        &script_path,
        perf_script_branch_stacks(&recording.data, INSTALL),
    )
    .unwrap();
    let theirs_path = work().join("llvm-profgen.txt");
    let profgen = run(Command::new("llvm-profgen-19").args([
        &format!("--binary={}", text(&recording.binary)),
        &format!("--perfscript={}", text(&script_path)),
        "--format=text",
        "--show-detailed-warning",
        &format!("--output={}", text(&theirs_path)),
    ]));
    // The ranges llvm-profgen drops, by its own account: "[ start, end]: Range ...".
    let warnings = String::from_utf8_lossy(&profgen.stderr);
    let mut dropped: Vec<(u64, u64, String)> = Vec::new();
    for line in warnings.lines() {
        let Some((range, reason)) = line
            .strip_prefix("warning: [")
            .and_then(|rest| rest.split_once("]: "))
        else {
            continue;
        };
        let mut ends = range
            .split(',')
            .map(|end| u64::from_str_radix(end.trim(), 16));
        if let (Some(Ok(start)), Some(Ok(end))) = (ends.next(), ends.next()) {
            dropped.push((start, end, reason.to_owned()));
        }
    }
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, _, reason) in &dropped {
        *reasons.entry(reason.as_str()).or_default() += 1;
    }
    eprintln!("llvm-profgen dropped ranges: {reasons:#?}");
    let elf = std::fs::read(&recording.binary).unwrap();
    let symbols = code_image::load_symbols("autofdo", &elf).unwrap();
    let function_of = |address: u64| {
        symbols
            .symbols
            .lookup(address)
            .map(|(symbol, _)| symbol.name.clone())
    };
    let theirs = parse_text(&std::fs::read_to_string(&theirs_path).unwrap());
    let sampled = |profile: &TextProfile| -> Vec<String> {
        profile
            .iter()
            .filter(|(_, (_, _, lines))| lines.values().any(|&count| count > 0))
            .map(|(name, _)| name.clone())
            .collect()
    };
    assert_eq!(
        sampled(&ours),
        sampled(&theirs),
        "the same functions have samples"
    );
    let mut equal = 0;
    // (function, line offset, rvperf's count, llvm-profgen's count when it has the line)
    let mut differing: Vec<(&str, u32, u64, Option<u64>)> = Vec::new();
    for (name, (_, _, lines)) in &ours {
        let their_lines = &theirs[name].2;
        for (&offset, &count) in lines {
            match their_lines.get(&offset) {
                Some(&their_count) if their_count == count => equal += 1,
                other => differing.push((name, offset, count, other.copied())),
            }
        }
    }
    eprintln!("{equal} lines equal; differing: {differing:#?}");
    // Where they differ, llvm-profgen dropped ranges of that function (named in its
    // warnings) and rvperf's count is the larger.
    for &(function, offset, count, their_count) in &differing {
        assert!(
            dropped.iter().any(
                |(start, end, _)| function_of(*start).as_deref() == Some(function)
                    || function_of(*end).as_deref() == Some(function)
            ),
            "{function}:{offset}: llvm-profgen dropped no range of {function}"
        );
        assert!(
            count >= their_count.unwrap_or(0),
            "llvm-profgen counts more than rvperf at {function}:{offset}: {their_count:?} > {count}"
        );
    }
    assert!(
        equal >= 4 * differing.len(),
        "{equal} lines equal, {} differ: {differing:#?}",
        differing.len()
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
