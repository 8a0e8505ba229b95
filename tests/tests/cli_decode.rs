//! `rvperf decode` as a user runs it: every flag, every output, and bad input that must
//! give one clear line (with the byte offset for trace problems) and a non-zero exit.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{load, retired_pcs, rvperf_binary, scratch};
use ntrace_flow::{BranchMode, EncoderOptions, TraceEncoder};
use ntrace_message::MessageOptions;

fn rvperf(arguments: &[&str]) -> Output {
    Command::new(rvperf_binary())
        .args(arguments)
        .output()
        .expect("run rvperf")
}

fn write_trace(name: &str, tag: &str, options: EncoderOptions) -> PathBuf {
    let code = load(name);
    let mut encoder = TraceEncoder::new(&code.image, code.files.clone(), options).unwrap();
    for pc in retired_pcs(name) {
        encoder.retire(pc).unwrap();
    }
    let (bytes, _) = encoder.finish().unwrap();
    let path = scratch().join(format!("{name}-{tag}-{}.nt", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Asserts a failure reported as exactly one `rvperf: error:` line containing `needle`.
fn assert_one_line_error(output: &Output, needle: &str) -> String {
    assert!(!output.status.success(), "expected failure, got success");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {stderr}");
    assert!(lines[0].starts_with("rvperf: error: "), "{stderr}");
    assert!(
        lines[0].contains(needle),
        "expected {needle:?} in: {stderr}"
    );
    stderr
}

fn pcs_text(pcs: &[u64], prefix: &str) -> String {
    pcs.iter().map(|pc| format!("{prefix}{pc:#x}\n")).collect()
}

#[test]
fn pcs_output_is_the_real_execution_for_every_flag() {
    let program = common::program("longjmp");
    let pcs = retired_pcs("longjmp");
    let mut plain = EncoderOptions::default();
    plain.mode = BranchMode::Htm;
    let mut flagged = EncoderOptions::default();
    flagged.mode = BranchMode::Btm;
    flagged.return_stack_depth = 8;
    flagged.src = 9;
    flagged.message = MessageOptions::default()
        .with_src_bits(4)
        .with_timestamps(true)
        .with_address_msb_extension(true);
    let cases: [(EncoderOptions, &[&str], &str); 2] = [
        (plain, &[], ""),
        (
            flagged,
            &[
                "--src-bits",
                "4",
                "--timestamps",
                "--addr-ext",
                "--max-stack",
                "8",
            ],
            "9 ",
        ),
    ];
    for (index, (options, flags, prefix)) in cases.into_iter().enumerate() {
        let trace = write_trace("longjmp", &format!("flags{index}"), options);
        let mut arguments = vec![
            "decode",
            "--elf",
            text(&program),
            "--trace",
            text(&trace),
            "--output",
            "pcs",
        ];
        arguments.extend_from_slice(flags);
        let output = rvperf(&arguments);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            String::from_utf8_lossy(&output.stdout) == pcs_text(&pcs, prefix),
            "case {index}: PCs differ"
        );
    }
}

#[test]
fn every_output_mode_works() {
    let program = common::program("recursion");
    let pcs = retired_pcs("recursion");
    let trace = write_trace("recursion", "modes", EncoderOptions::default());
    let run = |mode: &str| {
        let output = rvperf(&[
            "decode",
            "--elf",
            text(&program),
            "--trace",
            text(&trace),
            "--output",
            mode,
        ]);
        assert!(
            output.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let summary = run("summary");
    assert!(
        summary.contains(&format!("instructions:        {}\n", pcs.len())),
        "{summary}"
    );
    assert!(summary.contains("M instructions/s"), "{summary}");
    assert!(summary.contains("hottest functions:"), "{summary}");
    let messages = run("messages");
    let message_count: usize = summary
        .lines()
        .find_map(|line| line.strip_prefix("messages:"))
        .map(|count| count.trim().parse().unwrap())
        .unwrap();
    assert_eq!(messages.lines().count(), message_count);
    assert!(
        messages.starts_with("0x00000000  ProgTraceSync"),
        "{}",
        &messages[..80]
    );
    let insns = run("insns");
    let instruction_lines = insns.lines().filter(|line| line.starts_with("0x")).count();
    assert_eq!(instruction_lines, pcs.len());
    assert!(
        insns.lines().nth(1).unwrap().contains("_start+0x0"),
        "{}",
        insns.lines().nth(1).unwrap()
    );
    assert!(
        insns.contains(" ret") || insns.contains("c.jr ra"),
        "no return disassembled"
    );
    let blocks = run("blocks");
    let counted: u64 = blocks
        .lines()
        .filter(|line| line.starts_with("0x"))
        .map(|line| {
            line.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(
        counted,
        pcs.len() as u64,
        "block instruction counts add up to the run"
    );
}

#[test]
fn a_wrapped_trace_starting_mid_message_decodes_a_suffix() {
    let program = common::program("switch");
    let pcs = retired_pcs("switch");
    let mut options = EncoderOptions::default();
    options.periodic_sync = 32;
    let trace = write_trace("switch", "wrapped", options);
    let bytes = std::fs::read(&trace).unwrap();
    let wrapped = scratch().join(format!("switch-wrapped-cut-{}.nt", std::process::id()));
    std::fs::write(&wrapped, &bytes[bytes.len() / 4 + 3..]).unwrap();
    let output = rvperf(&[
        "decode",
        "--elf",
        text(&program),
        "--trace",
        text(&wrapped),
        "--output",
        "pcs",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let decoded = String::from_utf8(output.stdout).unwrap();
    let expected = pcs_text(&pcs, "");
    assert!(decoded.lines().count() > pcs.len() / 2);
    assert!(
        expected.ends_with(&decoded),
        "decoded PCs are not a suffix of the run"
    );
}

#[test]
fn missing_files_and_non_elf_inputs_are_named() {
    let program = common::program("fnptr");
    let trace = write_trace("fnptr", "inputs", EncoderOptions::default());
    let missing = scratch().join("does-not-exist.nt");
    assert_one_line_error(
        &rvperf(&["decode", "--elf", text(&program), "--trace", text(&missing)]),
        "cannot open trace",
    );
    assert_one_line_error(
        &rvperf(&[
            "decode",
            "--elf",
            "/nonexistent/program",
            "--trace",
            text(&trace),
        ]),
        "cannot read ELF /nonexistent/program",
    );
    let readme = common::repository().join("tests/fixtures/ntrace/tiny-htm/tiny.c");
    assert_one_line_error(
        &rvperf(&["decode", "--elf", text(&readme), "--trace", text(&trace)]),
        "not an ELF file",
    );
    let host_binary = rvperf_binary();
    assert_one_line_error(
        &rvperf(&[
            "decode",
            "--elf",
            text(&host_binary),
            "--trace",
            text(&trace),
        ]),
        "not a RISC-V ELF",
    );
    let empty = scratch().join(format!("empty-{}.nt", std::process::id()));
    std::fs::write(&empty, b"").unwrap();
    assert_one_line_error(
        &rvperf(&["decode", "--elf", text(&program), "--trace", text(&empty)]),
        "is empty",
    );
    let bad_load = format!("{}@0xZZ", text(&program));
    assert_one_line_error(
        &rvperf(&["decode", "--elf", &bad_load, "--trace", text(&trace)]),
        "LOAD_ADDR",
    );
}

#[test]
fn truncated_and_corrupt_traces_fail_with_the_byte_offset() {
    let program = common::program("fnptr");
    let trace = write_trace("fnptr", "corrupt", EncoderOptions::default());
    let bytes = std::fs::read(&trace).unwrap();
    let elf = text(&program);

    let truncated = scratch().join(format!("truncated-{}.nt", std::process::id()));
    std::fs::write(&truncated, &bytes[..bytes.len() - 1]).unwrap();
    let stderr = assert_one_line_error(
        &rvperf(&["decode", "--elf", elf, "--trace", text(&truncated)]),
        "offset",
    );
    assert!(
        stderr.contains("truncated") || stderr.contains("ends"),
        "{stderr}"
    );

    // MSEO=10 is reserved: a byte that can never appear in a valid stream.
    let mut corrupt = bytes.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] = (corrupt[middle] & !3) | 0b10;
    let corrupt_path = scratch().join(format!("corrupt-{}.nt", std::process::id()));
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    let stderr = assert_one_line_error(
        &rvperf(&["decode", "--elf", elf, "--trace", text(&corrupt_path)]),
        "offset",
    );
    let offset_text = stderr
        .split("offset ")
        .nth(1)
        .unwrap()
        .split([':', ' '])
        .next()
        .unwrap();
    let offset = u64::from_str_radix(offset_text.trim_start_matches("0x"), 16).unwrap();
    assert!(
        offset <= middle as u64 && middle as u64 - offset < 64,
        "offset {offset:#x} is not near byte {middle:#x}"
    );

    // The program loaded somewhere else: the first address is outside every ELF.
    let moved = format!("{elf}@0x40000000");
    assert_one_line_error(
        &rvperf(&["decode", "--elf", &moved, "--trace", text(&trace)]),
        "outside every ELF",
    );

    // No synchronisation message at all: nothing to decode.
    let no_sync = scratch().join(format!("nosync-{}.nt", std::process::id()));
    std::fs::write(&no_sync, [0xff; 64]).unwrap();
    assert_one_line_error(
        &rvperf(&["decode", "--elf", elf, "--trace", text(&no_sync)]),
        "no synchronisation message",
    );
}

#[test]
fn usage_errors_exit_non_zero() {
    let output = rvperf(&["decode", "--trace", "x.nt", "--output", "nonsense"]);
    assert!(!output.status.success());
    let output = rvperf(&["decode", "--elf", "x", "--trace", "y", "--src-bits", "13"]);
    assert!(!output.status.success());
}
