//! `rvperf inject --itrace`: an N-Trace becomes a perf.data of LBR-style branch-stack
//! samples that Linux perf and llvm-profgen read.
//!
//! The trace is real: `tests/programs/interp.c` (a bytecode interpreter, built with
//! `-g`) runs under `qemu-riscv64` one instruction per translation block, and its exact
//! retired-PC stream is encoded with rvperf's encoder model, as in ntrace_roundtrip.rs.
//! The expected samples come from the same trace decoded here and sampled by
//! `profiles::BranchSampler` with the instruction addresses the decoder gives: Linux
//! `perf script -F ip,brstack` of the injected file must print exactly those.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::consumers::run_tool;
use common::{decode_elements, load, program, retired_pcs, rvperf_binary, scratch};
use ntrace_flow::{DecoderOptions, EncoderOptions, TraceEncoder};
use profiles::{BranchSampler, SamplerOptions};

const INSTALL: &str = "run tools/install-deps.sh (as root) for Linux perf and llvm-profgen-19";

/// The sample period and stack depth the tests inject with: a prime period, so that
/// samples do not lock onto the interpreter's dispatch loop.
const PERIOD: u64 = 997;
const DEPTH: usize = 32;

/// A directory of this test's files, fresh per test.
fn work(test: &str) -> PathBuf {
    let directory = scratch().join(format!("inject-itrace-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The N-Trace of `interp`'s run (HTM, implicit returns, repeated history; a
/// synchronisation every 64 messages, so that decoding resumes soon after a corrupt
/// byte) and its retired instruction count.
fn interp_trace(directory: &Path) -> (PathBuf, u64) {
    let pcs = retired_pcs("interp");
    let code = load("interp");
    let mut options = EncoderOptions::default();
    options.periodic_sync = 64;
    let mut encoder = TraceEncoder::new(&code.image, code.files.clone(), options).unwrap();
    let mut bytes = Vec::new();
    for (index, &pc) in pcs.iter().enumerate() {
        encoder.retire(pc).unwrap();
        if index % 65536 == 0 {
            bytes.extend(encoder.take_output());
        }
    }
    let (rest, _) = encoder.finish().unwrap();
    bytes.extend(rest);
    let trace = directory.join("interp.nt");
    std::fs::write(&trace, bytes).unwrap();
    (trace, pcs.len() as u64)
}

/// One sample as perf script prints it: the sampled address and the (from, to) of
/// its branch stack, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ScriptSample {
    ip: u64,
    stack: Vec<(u64, u64)>,
}

/// The samples `BranchSampler` takes of `trace` (decoded here with `options`).
fn expected_samples(trace: &Path, options: DecoderOptions) -> Vec<ScriptSample> {
    let code = load("interp");
    let bytes = std::fs::read(trace).unwrap();
    let elements = decode_elements(&bytes, &code, options).unwrap();
    let mut sampler = BranchSampler::new(SamplerOptions::new(PERIOD, DEPTH)).unwrap();
    let mut samples = Vec::new();
    for (element, pcs) in &elements {
        sampler
            .add(
                element,
                |_, index| pcs.get(index as usize).copied(),
                |sample| {
                    samples.push(ScriptSample {
                        ip: sample.address,
                        stack: sample
                            .stack
                            .iter()
                            .map(|branch| (branch.from, branch.to))
                            .collect(),
                    });
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
    }
    assert_eq!(sampler.statistics().unplaced_samples, 0);
    samples
}

/// `perf script -F ip,brstack` output parsed: `   10e3a 0x2968e/0x10e34/-/-/-/0  ...`.
fn parse_brstack_script(script: &str) -> Vec<ScriptSample> {
    let hex = |text: &str| u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap();
    script
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.split_whitespace();
            let ip = hex(fields.next().unwrap());
            let stack = fields
                .map(|entry| {
                    let mut parts = entry.split('/');
                    (hex(parts.next().unwrap()), hex(parts.next().unwrap()))
                })
                .collect();
            ScriptSample { ip, stack }
        })
        .collect()
}

fn rvperf_inject(trace: &Path, output: &Path, extra: &[&str]) -> Output {
    let period = format!("--itrace={PERIOD}");
    let depth = DEPTH.to_string();
    Command::new(rvperf_binary())
        .args(["inject", &period, "--branches", &depth, "--trace"])
        .arg(trace)
        .arg("--elf")
        .arg(program("interp"))
        .args(extra)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap()
}

fn perf() -> Command {
    common::perf_for_recordings()
}

/// Runs `command`, which must succeed; its standard output.
fn run(command: &mut Command) -> String {
    String::from_utf8(run_tool(command, INSTALL).stdout).unwrap()
}

/// One body line of an LLVM text sample profile: a top-level function and the line
/// offset (from the function's first line) and discriminator of the line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProfileLine {
    pub function: String,
    pub line_offset: u32,
    pub discriminator: u32,
}

/// The body counts of the top-level functions of an LLVM text sample profile
/// (`llvm-profgen --format=text`): `function:total:head`, then ` offset[.disc]: count
/// [target:count ...]` lines. Inlined call sites (deeper indentation) are left out:
/// their lines belong to the inlinee.
pub fn parse_llvm_text_profile(profile: &str) -> BTreeMap<ProfileLine, u64> {
    let mut counts = BTreeMap::new();
    let mut function = None;
    for line in profile.lines() {
        if !line.starts_with(' ') {
            function = line.split(':').next().map(str::to_owned);
            continue;
        }
        let body = &line[1..];
        // Deeper lines are an inlined call site's body.
        if body.starts_with(' ') {
            continue;
        }
        let (Some(function), Some((location, rest))) = (&function, body.split_once(": ")) else {
            continue;
        };
        // `offset: inlinee:total` opens an inlined call site, not a body count.
        let Some(count) = rest
            .split_whitespace()
            .next()
            .and_then(|count| count.parse::<u64>().ok())
        else {
            continue;
        };
        let (offset, discriminator) = location.split_once('.').unwrap_or((location, "0"));
        let (Ok(line_offset), Ok(discriminator)) = (offset.parse(), discriminator.parse()) else {
            continue;
        };
        *counts
            .entry(ProfileLine {
                function: function.clone(),
                line_offset,
                discriminator,
            })
            .or_default() += count;
    }
    counts
}

#[test]
fn injected_trace_samples_are_read_by_perf_and_llvm_profgen() {
    let directory = work("real");
    let (trace, instructions) = interp_trace(&directory);
    let injected = directory.join("injected.data");
    let output = rvperf_inject(&trace, &injected, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let expected = expected_samples(&trace, DecoderOptions::default());
    assert_eq!(expected.len() as u64, instructions / PERIOD);
    assert!(
        stderr.contains(&format!("{} samples", expected.len())),
        "{stderr}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");

    // Linux perf reads every sample with the sampler's stack, entry by entry.
    let script = run(perf().args(["script", "-F", "ip,brstack", "-i", text(&injected)]));
    let samples = parse_brstack_script(&script);
    assert_eq!(samples.len(), expected.len());
    for (index, (theirs, ours)) in samples.iter().zip(&expected).enumerate() {
        assert_eq!(theirs, ours, "sample {index}");
    }
    // Most stacks are full: the program's start is the only place with fewer.
    let full = samples
        .iter()
        .filter(|sample| sample.stack.len() == DEPTH)
        .count();
    assert!(full + 2 >= samples.len(), "{full} of {}", samples.len());
    // The synthesized process (pid 1, named after the ELF) maps the ELF: perf names
    // every sample's function (perf 6.1 names some after RISC-V mapping symbols, `$x...`,
    // that start where their function does; see the README).
    let symbols = run(perf().args(["script", "-F", "comm,pid,ip,sym", "-i", text(&injected)]));
    assert_eq!(symbols.lines().count(), samples.len());
    for line in symbols.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[..2], ["interp", "1"], "{line}");
        assert!(fields.len() == 4 && fields[3] != "[unknown]", "{line}");
    }
    // Which functions a sample every 997 instructions falls in depends on the build
    // (the interpreter loop dominates); several distinct ones are always among them.
    let functions: std::collections::BTreeSet<&str> = symbols
        .lines()
        .filter_map(|line| line.split_whitespace().nth(3))
        .collect();
    assert!(functions.len() >= 5, "{functions:?}");

    // perf report --branch-history runs clean.
    let report = perf()
        .args([
            "report",
            "--branch-history",
            "--stdio",
            "-i",
            text(&injected),
        ])
        .output()
        .unwrap();
    let report_stderr = String::from_utf8_lossy(&report.stderr);
    assert!(report.status.success(), "{report_stderr}");
    assert!(report_stderr.trim().is_empty(), "{report_stderr}");
    assert!(String::from_utf8_lossy(&report.stdout).contains("Samples: "));

    // llvm-profgen reads the perf.data itself (through perf script) and profiles the
    // interpreter's loop.
    let profile = directory.join("injected.prof");
    let profgen = run_tool(
        Command::new("llvm-profgen-19").args([
            &format!("--binary={}", text(&program("interp"))),
            &format!("--perfdata={}", text(&injected)),
            "--format=text",
            &format!("--output={}", text(&profile)),
        ]),
        INSTALL,
    );
    let profgen_stderr = String::from_utf8_lossy(&profgen.stderr);
    assert!(!profgen_stderr.contains("error"), "{profgen_stderr}");
    let profile = std::fs::read_to_string(&profile).unwrap();
    let counts = parse_llvm_text_profile(&profile);
    let run_lines: u64 = counts
        .iter()
        .filter(|(line, _)| line.function == "run")
        .map(|(_, &count)| count)
        .sum();
    assert!(run_lines > 0, "{profile}");
    let _ = std::fs::remove_dir_all(directory);
}

#[test]
fn a_corrupt_trace_is_injected_around_its_gap_and_garbage_is_refused() {
    let directory = work("bad");
    let (trace, instructions) = interp_trace(&directory);
    let mut bytes = std::fs::read(&trace).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let corrupt = directory.join("corrupt.nt");
    std::fs::write(&corrupt, &bytes).unwrap();
    let injected = directory.join("corrupt.data");
    let output = rvperf_inject(&corrupt, &injected, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("warning"), "{stderr}");
    assert!(stderr.contains("gap"), "{stderr}");
    let script = run(perf().args(["script", "-F", "ip,brstack", "-i", text(&injected)]));
    let samples = parse_brstack_script(&script).len() as u64;
    // Decoding resumed at the next synchronisation: little is lost.
    assert!(
        samples > instructions / PERIOD * 9 / 10 && samples <= instructions / PERIOD,
        "{samples} samples of {instructions} instructions"
    );

    // Bytes with no synchronisation message: one line, and nothing written.
    let garbage = directory.join("garbage.nt");
    std::fs::write(&garbage, [0x55, 0xaa, 0x13, 0x37].repeat(256)).unwrap();
    let out = directory.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let output = rvperf_inject(&garbage, &out.join("garbage.data"), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("nothing can be decoded"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(directory);
}

#[test]
fn the_llvm_text_profile_parser_reads_bodies_and_skips_inlinees() {
    let profile = "\
main:1200:3
 1: 3
 2.1: 40 callee:40
 3: inlined:500
  1: 500
run:10:0
 0: 10
 0: 5
";
    let counts = parse_llvm_text_profile(profile);
    let line = |function: &str, line_offset, discriminator| ProfileLine {
        function: function.to_owned(),
        line_offset,
        discriminator,
    };
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        [
            (line("main", 1, 0), 3),
            (line("main", 2, 1), 40),
            (line("run", 0, 0), 15),
        ]
    );
}
