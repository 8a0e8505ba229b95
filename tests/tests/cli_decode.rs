//! `rvperf decode` as a user runs it: every flag, every output, with any number of jobs;
//! damaged traces decoded around (a gap at the byte offset, a warning, the rest
//! decoded); inputs with nothing to decode giving one clear line and a non-zero exit.

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

/// The offsets of the `# H gap ... @0xOFFSET` lines of blocks or insns output.
fn gap_offsets(output: &str) -> Vec<u64> {
    output
        .lines()
        .filter(|line| line.starts_with('#') && line.contains(" gap "))
        .map(|line| {
            let offset = line.rsplit_once(" @0x").unwrap().1;
            u64::from_str_radix(offset, 16).unwrap()
        })
        .collect()
}

/// The lines after the first `trace-on` line at or after byte `offset`.
fn after_resync(output: &str, offset: u64) -> String {
    let mut lines = output.lines().skip_while(|line| {
        !(line.contains(" trace-on ")
            && line
                .rsplit_once(" @0x")
                .is_some_and(|(_, at)| u64::from_str_radix(at, 16).unwrap() >= offset))
    });
    lines.next();
    lines.map(|line| format!("{line}\n")).collect()
}

fn success_text(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn a_flipped_byte_becomes_a_gap_and_decoding_resumes_at_the_next_sync() {
    let program = common::program("interp");
    let elf = text(&program);
    let mut options = EncoderOptions::default();
    options.periodic_sync = 64;
    let trace = write_trace("interp", "flipped", options);
    let bytes = std::fs::read(&trace).unwrap();
    // MSEO=10 is reserved: a byte that can never appear in a valid stream.
    let middle = bytes.len() / 2;
    let mut corrupt = bytes.clone();
    corrupt[middle] = (corrupt[middle] & !3) | 0b10;
    let corrupt_path = scratch().join(format!("interp-flipped-{}.nt", std::process::id()));
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    for jobs in ["1", "2"] {
        let run = |trace: &Path, mode: &str| {
            rvperf(&[
                "decode",
                "--elf",
                elf,
                "--trace",
                text(trace),
                "--output",
                mode,
                "--jobs",
                jobs,
                "--chunk-bytes",
                "4096",
            ])
        };
        let clean = success_text(&run(&trace, "blocks"));
        let output = run(&corrupt_path, "blocks");
        let decoded = success_text(&output);
        let gaps = gap_offsets(&decoded);
        assert_eq!(gaps.len(), 1, "jobs {jobs}: {gaps:x?}");
        let gap = gaps[0];
        assert!(
            gap <= middle as u64 && middle as u64 - gap < 64,
            "jobs {jobs}: gap at {gap:#x}, the flipped byte is at {middle:#x}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "jobs {jobs}: {stderr}");
        assert!(
            stderr.starts_with("rvperf: warning: ")
                && stderr.contains(&format!("gap at byte offset {gap:#x}"))
                && stderr.matches("byte offset").count() == 1
                && stderr.contains("reserved MSEO"),
            "jobs {jobs}: {stderr}"
        );
        // Everything before the gap and after the next synchronisation is the clean
        // decode's.
        let before: String = decoded
            .lines()
            .take_while(|line| !line.contains(" gap "))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(
            clean.starts_with(&before),
            "jobs {jobs}: the part before the gap differs"
        );
        let resumed = after_resync(&decoded, gap);
        assert!(
            resumed.lines().count() > 100,
            "jobs {jobs}: too little after the gap"
        );
        assert!(
            clean.ends_with(&resumed),
            "jobs {jobs}: the decode after the next sync differs from the clean one"
        );
        let summary = success_text(&run(&corrupt_path, "summary"));
        assert!(summary.contains("decode errors:       1 "), "{summary}");
        let lost = summary
            .lines()
            .find(|line| line.starts_with("lost to errors:"))
            .unwrap_or_else(|| panic!("{summary}"));
        assert!(lost.contains(" I-CNT units "), "{lost}");
    }
}

#[test]
fn a_truncated_trace_prints_everything_up_to_the_cut() {
    let program = common::program("fnptr");
    let pcs = retired_pcs("fnptr");
    let trace = write_trace("fnptr", "truncated", EncoderOptions::default());
    let bytes = std::fs::read(&trace).unwrap();
    let truncated = scratch().join(format!("truncated-{}.nt", std::process::id()));
    std::fs::write(&truncated, &bytes[..bytes.len() - 1]).unwrap();
    for jobs in ["1", "2"] {
        let output = rvperf(&[
            "decode",
            "--elf",
            text(&program),
            "--trace",
            text(&truncated),
            "--output",
            "pcs",
            "--jobs",
            jobs,
        ]);
        let decoded = success_text(&output);
        // The last message (a correlation closing the trace) is cut: every instruction
        // before it is there.
        assert!(decoded.lines().count() > pcs.len() / 2, "jobs {jobs}");
        assert!(
            pcs_text(&pcs, "").starts_with(&decoded),
            "jobs {jobs}: not a prefix of the run"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("rvperf: warning: ")
                && stderr.contains("gap at byte offset")
                && stderr.contains("ended inside a message"),
            "jobs {jobs}: {stderr}"
        );
    }
}

#[test]
fn traces_with_nothing_decodable_fail_with_one_line() {
    let program = common::program("fnptr");
    let trace = write_trace("fnptr", "corrupt", EncoderOptions::default());
    let elf = text(&program);

    // The program loaded somewhere else: the first address is outside every ELF.
    let moved = format!("{elf}@0x40000000");
    for jobs in ["1", "2"] {
        assert_one_line_error(
            &rvperf(&[
                "decode",
                "--elf",
                &moved,
                "--trace",
                text(&trace),
                "--jobs",
                jobs,
            ]),
            "outside every ELF",
        );

        // No synchronisation message at all: nothing to decode.
        let no_sync = scratch().join(format!("nosync-{}.nt", std::process::id()));
        std::fs::write(&no_sync, [0xff; 64]).unwrap();
        assert_one_line_error(
            &rvperf(&[
                "decode",
                "--elf",
                elf,
                "--trace",
                text(&no_sync),
                "--jobs",
                jobs,
            ]),
            "no synchronisation message",
        );
    }
}

#[test]
fn every_output_is_the_same_with_any_number_of_jobs() {
    let program = common::program("longjmp");
    let mut options = EncoderOptions::default();
    options.periodic_sync = 8;
    options.icnt_bits = 9;
    let trace = write_trace("longjmp", "jobs", options);
    for mode in ["pcs", "blocks", "insns", "summary"] {
        let run = |jobs: &str, chunk: &str| {
            let text = success_text(&rvperf(&[
                "decode",
                "--elf",
                text(&program),
                "--trace",
                text(&trace),
                "--output",
                mode,
                "--jobs",
                jobs,
                "--chunk-bytes",
                chunk,
            ]));
            text.lines()
                .filter(|line| !line.starts_with("decode time:"))
                .map(|line| format!("{line}\n"))
                .collect::<String>()
        };
        let serial = run("1", "1000000");
        for (jobs, chunk) in [("2", "1"), ("2", "97"), ("3", "1000")] {
            assert!(
                run(jobs, chunk) == serial,
                "--output {mode} --jobs {jobs} --chunk-bytes {chunk} differs from --jobs 1"
            );
        }
    }
}

/// `--all-jumps` (trTeInstEnAllJumps): the exact PCs with any number of jobs; the same
/// trace decoded without it is decode errors (warned, counted), never a clean decode.
#[test]
fn all_jumps_traces_decode_with_the_flag_and_fail_without_it() {
    let program = common::program("longjmp");
    let pcs = retired_pcs("longjmp");
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        let mut options = EncoderOptions::default();
        options.mode = mode;
        options.all_jumps = true;
        options.periodic_sync = 32;
        let trace = write_trace("longjmp", &format!("all-jumps-{mode:?}"), options);
        let decode = |extra: &[&str]| {
            let mut arguments = vec!["decode", "--elf", text(&program), "--trace", text(&trace)];
            arguments.extend_from_slice(extra);
            rvperf(&arguments)
        };
        for jobs in ["1", "2"] {
            let output = decode(&[
                "--all-jumps",
                "--output",
                "pcs",
                "--jobs",
                jobs,
                "--chunk-bytes",
                "512",
            ]);
            assert!(
                success_text(&output) == pcs_text(&pcs, ""),
                "{mode:?} --jobs {jobs}: PCs differ"
            );
        }
        let without = decode(&["--output", "summary", "--jobs", "1"]);
        let summary = String::from_utf8_lossy(&without.stdout);
        let stderr = String::from_utf8_lossy(&without.stderr);
        assert!(summary.contains("decode errors:"), "{mode:?}: {summary}");
        assert!(stderr.contains("gap at byte offset"), "{mode:?}: {stderr}");
        if mode == BranchMode::Btm {
            // A DirectBranch message ends at a jump: the warning names the setting.
            assert!(stderr.contains("trTeInstEnAllJumps"), "{stderr}");
        }
    }
}

/// Trace disabled and enabled again, then messages lost to an overrun (an Error and a
/// SYNC=7): every output the same with any number of jobs, the loss warned about, the
/// summary counting the stops, restarts and the gap.
#[test]
fn trace_stops_restarts_and_losses_are_counted() {
    let program = common::program("fnptr");
    let code = load("fnptr");
    let pcs = retired_pcs("fnptr");
    let (bytes, _, _) = common::stop_start_and_overrun_trace(&code, &pcs, 500);
    let trace = scratch().join(format!("fnptr-stop-start-{}.nt", std::process::id()));
    std::fs::write(&trace, bytes).unwrap();
    let decode = |mode: &str, jobs: &str| {
        rvperf(&[
            "decode",
            "--elf",
            text(&program),
            "--trace",
            text(&trace),
            "--output",
            mode,
            "--jobs",
            jobs,
            "--chunk-bytes",
            "300",
        ])
    };
    let summary = success_text(&decode("summary", "1"));
    for line in [
        "gaps (lost trace):   1\n",
        "trace stops/starts:  2 stopped, 2 restarted\n",
    ] {
        assert!(summary.contains(line), "{line:?} not in {summary}");
    }
    for mode in ["pcs", "blocks"] {
        let serial = decode(mode, "1");
        let stderr = String::from_utf8_lossy(&serial.stderr);
        assert!(
            stderr.contains("the encoder reported 1 losses of trace"),
            "{stderr}"
        );
        let serial = success_text(&serial);
        assert!(
            success_text(&decode(mode, "2")) == serial,
            "--output {mode} --jobs 2 differs from --jobs 1"
        );
        if mode == "blocks" {
            for event in [
                "trace-off after",
                "(Disabled)",
                "gap EncoderOverflow",
                "(Restart)",
            ] {
                assert!(serial.contains(event), "{event} not in the blocks output");
            }
        }
    }
}

#[test]
fn usage_errors_exit_non_zero() {
    let output = rvperf(&["decode", "--trace", "x.nt", "--output", "nonsense"]);
    assert!(!output.status.success());
    let output = rvperf(&["decode", "--elf", "x", "--trace", "y", "--src-bits", "13"]);
    assert!(!output.status.success());
}
