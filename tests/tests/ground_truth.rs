//! The ground truth of the AutoFDO accuracy test: exact per-instruction execution
//! counts of `tests/programs/vm/autofdo.c` under qemu-riscv64, checked against what the
//! program's source fixes (how often each function is entered, loop trip counts), and
//! the block-count overlap measure on it. Also checks that the VM's test input stays
//! within the time budget of a full QEMU run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use code_image::{load_elf, CodeImage};
use riscv_insn::{decode, ControlFlow, DecodeOptions};
use rvperf_tests::block_overlap::{basic_blocks, block_counts, block_overlap, unattributed, Block};
use rvperf_tests::execution_counts::{
    instruction_counts, read_counts, write_counts, GroundTruth, InstructionCounts,
};
use symbolize::{FunctionTable, ObjectSymbolizer};
use trace_gen::qemu::QemuUser;

const INSTALL_HINT: &str =
    "run tools/install-deps.sh (as root) to install gcc-riscv64-linux-gnu and qemu-user";

/// How tools/vm/lib.sh builds tests/programs/vm/*.c for the guest; the binary analysed
/// here must be the one that runs there.
const VM_FLAGS: &str = "-O1 -g -static -fno-omit-frame-pointer -fno-inline";

/// A small input for the exact checks.
const TEST_ROUNDS: u64 = 20;

// Mirrors of autofdo.c's constants.
const VALUES: u64 = 64;
const SHORT_TRIP: u64 = 5;
const WINDOW_TRIP: u64 = 37;
const LONG_TRIP: u64 = 200;
const RECURSION_DEPTH: u64 = 10;
const RARE_PATH_TRIP: u64 = 24;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn autofdo() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm-programs");
        std::fs::create_dir_all(&directory).expect("create vm-programs directory");
        let binary = directory.join("autofdo");
        let status = Command::new("riscv64-linux-gnu-gcc")
            .args(VM_FLAGS.split(' '))
            .arg("-o")
            .arg(&binary)
            .arg(repository().join("tests/programs/vm/autofdo.c"))
            .stdin(Stdio::null())
            .status()
            .unwrap_or_else(|error| panic!("riscv64-linux-gnu-gcc: {error}: {INSTALL_HINT}"));
        assert!(status.success(), "building autofdo.c failed: {status}");
        binary
    })
}

fn qemu() -> QemuUser {
    QemuUser::detect().unwrap_or_else(|error| panic!("{error}: {INSTALL_HINT}"))
}

fn ground_truth(rounds: u64) -> GroundTruth {
    instruction_counts(&qemu(), autofdo(), &[&rounds.to_string()]).expect("ground truth")
}

fn small_truth() -> &'static GroundTruth {
    static TRUTH: OnceLock<GroundTruth> = OnceLock::new();
    TRUTH.get_or_init(|| ground_truth(TEST_ROUNDS))
}

struct Program {
    image: CodeImage,
    functions: FunctionTable,
    options: DecodeOptions,
    blocks: Vec<Block>,
}

impl Program {
    fn load() -> Program {
        let bytes = std::fs::read(autofdo()).expect("read autofdo");
        let mut image = CodeImage::new();
        let info = load_elf(&mut image, "autofdo", &bytes, None).expect("ELF");
        let functions = ObjectSymbolizer::new("autofdo", bytes.clone())
            .expect("symbols")
            .function_table();
        let blocks = basic_blocks(&bytes).expect("basic blocks");
        Program {
            image,
            functions,
            options: info.riscv().expect("RISC-V").options,
            blocks,
        }
    }

    fn function(&self, name: &str) -> (u64, u64) {
        self.functions
            .named(name)
            .map(|function| (function.address, function.address + function.size))
            .unwrap_or_else(|| panic!("no symbol {name}"))
    }

    /// Addresses and control flow of the instructions in `start..end`.
    fn instructions(&self, start: u64, end: u64) -> Vec<(u64, ControlFlow)> {
        let mut address = start;
        let mut instructions = Vec::new();
        while address < end {
            let raw = self
                .image
                .read_le::<4>(address)
                .or_else(|| self.image.read_le::<2>(address).map(|h| [h[0], h[1], 0, 0]))
                .expect("code is mapped");
            let instruction = decode(u32::from_le_bytes(raw), self.options).expect("decodes");
            instructions.push((address, instruction.control_flow));
            address += u64::from(instruction.length);
        }
        instructions
    }

    /// The only backward conditional branch of `function`: its loop's latch.
    fn loop_branch(&self, function: &str) -> u64 {
        let (start, end) = self.function(function);
        let backward: Vec<u64> = self
            .instructions(start, end)
            .into_iter()
            .filter(|(_, flow)| matches!(flow, ControlFlow::Branch { offset } if *offset < 0))
            .map(|(address, _)| address)
            .collect();
        assert_eq!(
            backward.len(),
            1,
            "{function}: backward branches {backward:x?}"
        );
        backward[0]
    }
}

/// How often autofdo.c enters each of its functions for `rounds`, from the same
/// generator and decisions as the C code.
fn expected_entries(rounds: u64) -> HashMap<&'static str, u64> {
    const CASES: [&str; 8] = [
        "case_0", "case_1", "case_2", "case_3", "case_4", "case_5", "case_6", "case_7",
    ];
    const TRANSFORMS: [&str; 4] = [
        "transform_add",
        "transform_rotate",
        "transform_bytes",
        "transform_keep",
    ];
    // count_paths(n) calls itself for n - 1 and n - 2 when n >= 2.
    let mut recursion_calls = [1u64; RECURSION_DEPTH as usize + 1];
    for n in 2..recursion_calls.len() {
        recursion_calls[n] = 1 + recursion_calls[n - 1] + recursion_calls[n - 2];
    }
    let mut entries = HashMap::from([
        ("main", 1),
        ("run_round", rounds),
        ("process_value", rounds * VALUES),
        ("classify", rounds * VALUES),
        ("sum_window", rounds * 3),
        (
            "count_paths",
            rounds * recursion_calls[RECURSION_DEPTH as usize],
        ),
        ("rare_path", 0),
        ("common_path", 0),
    ]);
    for name in CASES.iter().chain(&TRANSFORMS) {
        entries.insert(name, 0);
    }
    for round in 0..rounds {
        let mut state = round.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
        for _ in 0..VALUES {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let value = state;
            let path = if value & 15 == 0 {
                "rare_path"
            } else {
                "common_path"
            };
            *entries.get_mut(path).unwrap() += 1;
            *entries.get_mut(CASES[(value >> 4) as usize & 7]).unwrap() += 1;
            *entries
                .get_mut(TRANSFORMS[(value >> 7) as usize & 3])
                .unwrap() += 1;
        }
    }
    entries
}

#[test]
fn vm_build_flags_are_those_of_tools_vm_lib_sh() {
    let script = std::fs::read_to_string(repository().join("tools/vm/lib.sh")).expect("lib.sh");
    let loop_start = script
        .find("tests/programs/vm/*.c")
        .expect("lib.sh builds tests/programs/vm/*.c");
    let compile = script[loop_start..]
        .lines()
        .find(|line| line.contains("riscv64-linux-gnu-gcc"))
        .expect("the compiler line of the vm programs");
    assert!(
        compile.contains(&format!("riscv64-linux-gnu-gcc {VM_FLAGS} ")),
        "tools/vm/lib.sh builds the vm programs with `{}`, this test with `{VM_FLAGS}`",
        compile.trim()
    );
}

#[test]
fn function_entries_and_loop_trips_match_the_source() {
    let truth = small_truth();
    let program = Program::load();
    let count = |address: u64| truth.counts.get(&address).copied().unwrap_or(0);
    let expected = expected_entries(TEST_ROUNDS);
    for (&name, &entries) in &expected {
        let (start, _) = program.function(name);
        assert_eq!(count(start), entries, "entries of {name}");
    }
    assert!(expected["rare_path"] > 0 && expected["rare_path"] * 8 < expected["common_path"]);
    assert_eq!(
        count(program.loop_branch("sum_window")),
        TEST_ROUNDS * (SHORT_TRIP + WINDOW_TRIP + LONG_TRIP),
        "sum_window's loop branch"
    );
    assert_eq!(
        count(program.loop_branch("rare_path")),
        expected["rare_path"] * RARE_PATH_TRIP,
        "rare_path's loop branch"
    );
    let (entry, _) = program.function("_start");
    assert_eq!(count(entry), 1, "_start");
}

#[test]
fn every_executed_address_is_an_instruction_of_a_block() {
    let truth = small_truth();
    let program = Program::load();
    assert_eq!(unattributed(&program.blocks, &truth.counts), 0);
    let mut starts = std::collections::HashSet::new();
    let mut uneven = Vec::new();
    for &(start, end) in &program.blocks {
        let instructions = program.instructions(start, end);
        let counts: Vec<u64> = instructions
            .iter()
            .map(|(address, _)| truth.counts.get(address).copied().unwrap_or(0))
            .collect();
        if counts.iter().any(|&count| count != counts[0]) {
            uneven.push(start);
        }
        starts.extend(instructions.into_iter().map(|(address, _)| address));
    }
    let strays: Vec<u64> = truth
        .counts
        .keys()
        .copied()
        .filter(|address| !starts.contains(address))
        .collect();
    assert!(strays.is_empty(), "executed mid-instruction: {strays:x?}");
    // Control enters a block in its middle only through an indirect jump to an address
    // that is no leader. autofdo.c's own blocks must execute as a whole (its switch's
    // cases all follow a jump or a return); the C library gets a little slack.
    let own: Vec<u64> = uneven
        .iter()
        .copied()
        .filter(|&start| {
            expected_entries(1).keys().any(|name| {
                let (first, end) = program.function(name);
                (first..end).contains(&start)
            })
        })
        .collect();
    assert!(
        own.is_empty(),
        "blocks of autofdo.c entered mid-way: {own:x?}"
    );
    eprintln!(
        "{} blocks, {} of them entered mid-way",
        program.blocks.len(),
        uneven.len()
    );
    assert!(uneven.len() < 20, "blocks entered mid-way: {uneven:x?}");
}

#[test]
fn overlap_of_the_truth_with_itself_and_distorted_copies() {
    let truth = small_truth();
    let program = Program::load();
    let blocks = &program.blocks;
    let exact = block_counts(blocks, &truth.counts);
    assert!((block_overlap(&exact, &exact) - 1.0).abs() < 1e-12);
    let scaled: InstructionCounts = truth
        .counts
        .iter()
        .map(|(&address, &count)| (address, count * 997))
        .collect();
    let scaled = block_counts(blocks, &scaled);
    assert!((block_overlap(&exact, &scaled) - 1.0).abs() < 1e-12);

    // Without classify's counts the overlap loses exactly classify's share: every other
    // block's share grows, so it keeps its whole truth share.
    let (start, end) = program.function("classify");
    let distorted: InstructionCounts = truth
        .counts
        .iter()
        .map(|(&address, &count)| {
            let inside = (start..end).contains(&address);
            (address, if inside { 0 } else { count })
        })
        .collect();
    let distorted = block_counts(blocks, &distorted);
    let total: u64 = exact.iter().sum();
    let classify_share = blocks
        .iter()
        .zip(&exact)
        .filter(|((block_start, _), _)| (start..end).contains(block_start))
        .map(|(_, &count)| count as f64 / total as f64)
        .sum::<f64>();
    assert!(classify_share > 0.02, "classify's share {classify_share}");
    let overlap = block_overlap(&exact, &distorted);
    assert!(
        (overlap - (1.0 - classify_share)).abs() < 1e-9,
        "overlap {overlap}, classify's share {classify_share}"
    );
}

#[test]
fn bins_write_and_compare_counts_files() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let truth_path = directory.path().join("truth.counts");
    let output = Command::new(env!("CARGO_BIN_EXE_rvperf-ground-truth"))
        .arg("--elf")
        .arg(autofdo())
        .arg("-o")
        .arg(&truth_path)
        .arg("--")
        .arg(TEST_ROUNDS.to_string())
        .output()
        .expect("run rvperf-ground-truth");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.stdout, small_truth().output.stdout, "program output");
    let written = read_counts(&truth_path).expect("read truth");
    assert_eq!(written, small_truth().counts);

    // A profile that lost run_round's blocks entirely.
    let program = Program::load();
    let (start, end) = program.function("run_round");
    let profile: InstructionCounts = written
        .iter()
        .filter(|(address, _)| !(start..end).contains(*address))
        .map(|(&address, &count)| (address, count))
        .collect();
    let profile_path = directory.path().join("profile.counts");
    write_counts(&profile_path, &profile).expect("write profile");

    let overlap = |profile: &Path, minimum: &str| {
        Command::new(env!("CARGO_BIN_EXE_rvperf-block-overlap"))
            .arg("--elf")
            .arg(autofdo())
            .arg("--truth-counts")
            .arg(&truth_path)
            .arg("--profile-counts")
            .arg(profile)
            .args(["--min", minimum])
            .output()
            .expect("run rvperf-block-overlap")
    };
    let same = overlap(&truth_path, "0.999");
    let report = String::from_utf8_lossy(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{report}");
    assert!(report.starts_with("overlap 1.0000 over "), "{report}");

    let worse = overlap(&profile_path, "0.999");
    let report = String::from_utf8_lossy(&worse.stdout);
    assert_eq!(worse.status.code(), Some(1), "{report}");
    let differences: Vec<&str> = report
        .lines()
        .skip_while(|line| !line.starts_with("largest differences"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .collect();
    assert_eq!(differences.len(), 10, "{report}");
    assert!(differences[0].contains(" run_round+"), "{report}");
    assert!(report.contains("FAIL (minimum 0.999)"), "{report}");
}
