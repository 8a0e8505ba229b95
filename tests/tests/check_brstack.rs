//! `rvperf-check-brstack` (tests/bin/check_brstack.rs), the VM tier's checker of
//! `perf script -F comm,tid,ip,brstack` output, on small synthetic scripts against a
//! real riscv64 ELF: `calls` of the flame graph fixtures (tests/programs/vm/calls.c,
//! static). Each of the whole-sample options passes on a script that meets it and fails,
//! naming its figure, on one that does not.

mod common;

use std::path::PathBuf;
use std::process::Command;

use code_image::{load_elf, CodeImage};
use common::{repository, scratch};
use riscv_insn::{decode, DecodeOptions, Xlen};
use symbolize::{FunctionTable, ObjectSymbolizer};

fn elf() -> PathBuf {
    repository().join("tests/fixtures/flamegraph/riscv64-ctr-call-stack/symfs/opt/rvperf/bin/calls")
}

/// The ELF's functions and code, to find real call instructions in.
struct Program {
    image: CodeImage,
    functions: FunctionTable,
    options: DecodeOptions,
}

impl Program {
    fn load() -> Program {
        let path = elf();
        let bytes = std::fs::read(&path).unwrap();
        let mut image = CodeImage::new();
        let elf = load_elf(&mut image, "calls", &bytes, None).unwrap();
        let functions = ObjectSymbolizer::new("calls", bytes)
            .unwrap()
            .function_table();
        Program {
            image,
            functions,
            options: elf.riscv().expect("RISC-V").options,
        }
    }

    /// (start, end) of the function `name`.
    fn function(&self, name: &str) -> (u64, u64) {
        self.functions
            .named(name)
            .map(|function| (function.address, function.address + function.size))
            .unwrap_or_else(|| panic!("no function {name} in {}", elf().display()))
    }

    /// The entry `from/to` of the direct call from `caller` to `callee`.
    fn call(&self, caller: &str, callee: &str) -> (u64, u64) {
        let (start, end) = self.function(caller);
        let (target, _) = self.function(callee);
        let options = self.options;
        let mut pc = start;
        while pc < end {
            let raw = self
                .image
                .read_le::<4>(pc)
                .or_else(|| self.image.read_le::<2>(pc).map(|h| [h[0], h[1], 0, 0]))
                .unwrap();
            let instruction = decode(u32::from_le_bytes(raw), options).unwrap();
            if instruction.links() && instruction.direct_target(pc, Xlen::Rv64) == Some(target) {
                return (pc, target);
            }
            pc += u64::from(instruction.length);
        }
        panic!("no direct call from {caller} to {callee}");
    }
}

/// One `perf script -F comm,tid,ip,brstack` line of `calls`.
fn line(ip: u64, entries: &[(u64, u64)]) -> String {
    let mut text = format!("calls 100 {ip:x}");
    for (from, to) in entries {
        text.push_str(&format!(" {from:#x}/{to:#x}/-/-/-/0"));
    }
    text
}

/// Runs the checker on `lines` with `arguments`: whether it passed, and its output.
fn check(name: &str, lines: &[String], arguments: &[&str]) -> (bool, String) {
    let script = scratch().join(format!(
        "check-brstack-{name}-{}.script",
        std::process::id()
    ));
    std::fs::write(&script, lines.join("\n") + "\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rvperf-check-brstack"))
        .arg("--elf")
        .arg(elf())
        .arg("--script")
        .arg(&script)
        .args(["--comm", "calls"])
        .args(arguments)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    let _ = std::fs::remove_file(&script);
    match output.status.code() {
        Some(0) => (true, text),
        Some(1) => (false, text),
        other => panic!("rvperf-check-brstack {arguments:?} ended with {other:?}:\n{text}"),
    }
}

/// Runs the checker with `arguments` it must refuse (exit status 2); its message.
fn refused(arguments: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_rvperf-check-brstack"))
        .arg("--elf")
        .arg(elf())
        .args(["--script", "/nonexistent", "--comm", "calls"])
        .args(arguments)
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{arguments:?}: {message}");
    message
}

/// Whether the checker is to accept the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Passes,
    Fails,
}

/// Runs the checker on `lines` and asserts its verdict and that its output holds
/// `expected`.
fn expect(name: &str, lines: &[String], arguments: &[&str], verdict: Verdict, expected: &str) {
    let (passed, output) = check(name, lines, arguments);
    assert_eq!(passed, verdict == Verdict::Passes, "{output}");
    assert!(output.contains(expected), "{output}");
}

#[test]
fn min_entries_asks_a_share_of_samples_with_enough_entries() {
    let program = Program::load();
    let leaf = program.call("helper_twice", "helper_leaf");
    let twice = program.call("op_mix", "helper_twice");
    let round = program.call("main", "run_round");
    let (leaf_start, _) = program.function("helper_leaf");
    let deep = line(leaf_start + 4, &[leaf, twice, round]);
    let shallow = line(leaf_start + 4, &[leaf]);
    let lines = [deep.clone(), deep.clone(), deep, shallow];

    expect(
        "entries-pass",
        &lines,
        &["--min-entries", "3", "--min-share", "0.7"],
        Verdict::Passes,
        "samples with 3 or more entries: 3 of 4 (share 0.750, at least 0.7 asked)",
    );

    expect(
        "entries-fail",
        &lines,
        &["--min-entries", "3", "--min-share", "0.8"],
        Verdict::Fails,
        "VIOLATION only a share of 0.750 of the samples of calls hold 3 or more",
    );

    assert!(refused(&["--min-entries", "3"]).contains("go together"));

    // Only the samples whose ip is in the functions named count: a shallow sample
    // elsewhere (start-up, exit) does not.
    let (main_start, _) = program.function("main");
    let mut with_elsewhere = lines.to_vec();
    with_elsewhere[3] = line(main_start + 4, &[round]);
    expect(
        "entries-ip-in-pass",
        &with_elsewhere,
        &[
            "--min-entries",
            "3",
            "--min-share",
            "1",
            "--ip-in",
            "helper_leaf",
        ],
        Verdict::Passes,
        "samples with the ip in helper_leaf with 3 or more entries: 3 of 3",
    );
    expect(
        "entries-ip-in-fail",
        &lines,
        &[
            "--min-entries",
            "3",
            "--min-share",
            "1",
            "--ip-in",
            "helper_leaf",
        ],
        Verdict::Fails,
        "(3 of 4)",
    );
}

#[test]
fn fresh_newest_tells_fresh_samples_from_stale_ones() {
    let program = Program::load();
    let leaf = program.call("helper_twice", "helper_leaf");
    let (leaf_start, _) = program.function("helper_leaf");
    // Far from everything the entry could lead to.
    let (atoi_start, _) = program.function("atoi");
    let lines = [
        // The newest entry called the function the ip is in.
        line(leaf_start + 4, &[leaf]),
        // A trap taken at the call instruction itself: recorded from the ip.
        line(leaf.0, &[leaf]),
        // The history stopped at helper_twice's call; the ip is in atoi since.
        line(atoi_start + 8, &[leaf]),
        // Kernel ips are not judged.
        line(0xffff_ffff_8000_1000, &[leaf]),
    ];

    expect("fresh-pass", &lines, &["--fresh-newest", "0.6"], Verdict::Passes, "samples whose newest entry leads to their ip: 2 of 3 with a user ip in the ELF and an entry (share 0.667, at least 0.6 asked)");

    let (passed, output) = check("fresh-fail", &lines, &["--fresh-newest", "0.9"]);
    assert!(!passed, "{output}");
    assert!(
        output.contains(
            "VIOLATION only a share of 0.667 of the samples have a fresh newest entry (2 of 3)"
        ),
        "{output}"
    );
    // The stale sample is named: line 3, its ip and its newest entry.
    let stale = format!("line 3: ip {:#x} (", atoi_start + 8);
    let newest = format!("newest entry {:#x} (helper_twice) -> ", leaf.0);
    assert!(
        output.contains(&stale) && output.contains(&newest),
        "{output}"
    );

    assert!(refused(&["--fresh-newest", "1.5"]).contains("from 0 to 1"));
}

#[test]
fn apart_min_asks_samples_on_both_sides() {
    let program = Program::load();
    let leaf = program.call("helper_twice", "helper_leaf");
    let round = program.call("main", "run_round");
    let (leaf_start, _) = program.function("helper_leaf");
    let (add_start, _) = program.function("op_add");
    let lines = [
        // op_add, main and run_round.
        line(add_start + 2, &[round]),
        line(add_start + 2, &[round]),
        // helper_twice and helper_leaf.
        line(leaf_start + 4, &[leaf]),
    ];

    expect(
        "apart-pass",
        &lines,
        &["--apart", "op_:helper_", "--apart-min", "1"],
        Verdict::Passes,
        "samples touching op_*: 2, touching helper_*: 1",
    );

    expect(
        "apart-fail",
        &lines,
        &["--apart", "op_:helper_", "--apart-min", "2"],
        Verdict::Fails,
        "VIOLATION only 1 samples touch helper_* functions, at least 2 asked",
    );
    // Without --apart-min, one side may be missing altogether.
    expect(
        "apart-none",
        &lines[..2],
        &["--apart", "op_:helper_"],
        Verdict::Passes,
        "samples touching op_*: 2, touching helper_*: 0",
    );

    assert!(refused(&["--apart-min", "1"]).contains("needs --apart"));
}
