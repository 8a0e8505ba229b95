//! The other trace protocols through the real CLI: one run of a real program (interp,
//! under `qemu-riscv64`) traced as N-Trace, as the debug specification's trace module
//! (both reporting modes) and as a tandem-verification trace. `rvperf decode` must tell
//! the protocols apart by themselves and list exactly QEMU's pcs from each; the flame
//! graph and the AutoFDO profile of each must be the N-Trace ones, byte for byte, since
//! the same instructions ran. `rvperf tandem-compare` must find a flipped register bit
//! and a skipped instruction at exactly the step they were injected at, in both traces'
//! positions, and report none for identical runs. Bad input is a one-line error with the
//! byte offset.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{
    assert_same_pcs, for_each_cpu_state, load_file, program, rvperf_binary, scratch,
    write_profiling_trace,
};
use debug4_flow::{BranchReporting, Debug4Encoder, EncoderOptions, Retirement};
use tandem_flow::{StepDecoder, StepKind};
use tandem_message::{Parameters, Record, RecordDecoder};
use trace_gen::tandem::TandemFromQemu;

const ARGUMENT: &str = "1";

/// The traces of one run of `interp 1`, and its pcs.
struct Traces {
    program: PathBuf,
    pcs: Vec<u64>,
    ntrace: PathBuf,
    debug4_branches: PathBuf,
    debug4_pairs: PathBuf,
    tandem: PathBuf,
}

fn work() -> &'static Path {
    static WORK: OnceLock<PathBuf> = OnceLock::new();
    WORK.get_or_init(|| {
        let directory = scratch().join(format!("trace-formats-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        directory
    })
}

fn traces() -> &'static Traces {
    static TRACES: OnceLock<Traces> = OnceLock::new();
    TRACES.get_or_init(|| {
        let program = program("interp");
        let code = load_file(&program);
        let ntrace = work().join("interp.nt");
        let pcs = write_profiling_trace(&program, &[ARGUMENT], &ntrace);
        let debug4 = |reporting, name: &str| {
            let mut encoder = Debug4Encoder::new(
                &code.image,
                EncoderOptions::default().with_branch_reporting(reporting),
            )
            .expect("encoder options");
            for &pc in &pcs {
                encoder.retire(&Retirement::at(0, pc)).expect("encode");
            }
            let path = work().join(name);
            std::fs::write(&path, encoder.finish().expect("finish").bytes).unwrap();
            path
        };
        let debug4_branches = debug4(BranchReporting::TakenNotTaken, "interp.debug4");
        let debug4_pairs = debug4(BranchReporting::PcPairs, "interp-pairs.debug4");
        let mut tandem = TandemFromQemu::new(
            &code.image,
            Parameters::default(),
            tandem_flow::EncoderOptions::default(),
        );
        let mut bytes = Vec::new();
        for_each_cpu_state(&program, &[ARGUMENT], |state| {
            tandem.push(state).expect("encode tandem");
        });
        let (rest, instructions) = tandem.finish().expect("finish tandem");
        bytes.extend(rest);
        assert_eq!(instructions, pcs.len() as u64);
        let tandem = work().join("interp.tandem");
        std::fs::write(&tandem, bytes).unwrap();
        Traces {
            program,
            pcs,
            ntrace,
            debug4_branches,
            debug4_pairs,
            tandem,
        }
    })
}

fn rvperf(arguments: &[&str]) -> Output {
    Command::new(rvperf_binary())
        .args(arguments)
        .output()
        .expect("run rvperf")
}

fn succeeded(arguments: &[&str]) -> String {
    let output = rvperf(arguments);
    assert!(
        output.status.success(),
        "rvperf {arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Each trace with the options its protocol needs beyond auto-detection.
fn each_trace(traces: &Traces) -> Vec<(&'static str, &Path, Vec<&'static str>)> {
    vec![
        ("N-Trace", &traces.ntrace, vec![]),
        ("debug4 taken/not taken", &traces.debug4_branches, vec![]),
        (
            "debug4 pc pairs",
            &traces.debug4_pairs,
            vec!["--branch-reporting", "pc-pairs"],
        ),
        ("tandem", &traces.tandem, vec![]),
    ]
}

#[test]
fn every_protocol_decodes_to_qemus_pcs_told_apart_by_itself() {
    let traces = traces();
    for (name, trace, options) in each_trace(traces) {
        let mut arguments = vec![
            "decode",
            "--elf",
            path(&traces.program),
            "--trace",
            path(trace),
            "--output",
            "pcs",
        ];
        arguments.extend(&options);
        let listed: Vec<u64> = succeeded(&arguments)
            .lines()
            .map(|line| u64::from_str_radix(line.trim_start_matches("0x"), 16).unwrap())
            .collect();
        assert_same_pcs(name, &traces.pcs, &listed);
        let summary = succeeded(
            &[
                "decode",
                "--elf",
                path(&traces.program),
                "--trace",
                path(trace),
            ]
            .into_iter()
            .chain(options.iter().copied())
            .collect::<Vec<_>>(),
        );
        assert!(
            summary.contains(&format!("instructions:        {}", traces.pcs.len())),
            "{name}: {summary}"
        );
        assert!(
            summary.contains("run"),
            "{name}: the interpreter's loop: {summary}"
        );
    }
    // Forced to the wrong protocol, a trace is refused or decodes to nothing, never to
    // other pcs.
    let forced = rvperf(&[
        "decode",
        "--format",
        "tandem",
        "--elf",
        path(&traces.program),
        "--trace",
        path(&traces.debug4_branches),
        "--output",
        "pcs",
    ]);
    assert!(!forced.status.success());
    let error = String::from_utf8_lossy(&forced.stderr);
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.contains("offset"), "{error}");
}

#[test]
fn flame_graphs_and_autofdo_profiles_are_the_same_from_every_protocol() {
    let traces = traces();
    let mut folded = Vec::new();
    let mut profiles = Vec::new();
    for (name, trace, options) in each_trace(traces) {
        let output = work().join(format!("{}.folded", name.replace([' ', '/'], "-")));
        let mut arguments = vec![
            "flamegraph",
            "--trace",
            path(trace),
            "--elf",
            path(&traces.program),
            "--folded",
            "-o",
            path(&output),
        ];
        arguments.extend(&options);
        succeeded(&arguments);
        folded.push((name, std::fs::read_to_string(&output).unwrap()));
        let profile = work().join(format!("{}.afdo", name.replace([' ', '/'], "-")));
        let mut arguments = vec![
            "autofdo",
            "--trace",
            path(trace),
            "--binary",
            path(&traces.program),
            "-o",
            path(&profile),
        ];
        arguments.extend(&options);
        succeeded(&arguments);
        profiles.push((name, std::fs::read_to_string(&profile).unwrap()));
    }
    let (reference, stacks) = &folded[0];
    assert!(stacks.lines().count() > 20, "{stacks}");
    for (name, other) in &folded[1..] {
        assert!(
            other == stacks,
            "{name}'s folded stacks differ from {reference}'s"
        );
    }
    let (reference, profile) = &profiles[0];
    assert!(profile.contains("run:"), "{profile}");
    for (name, other) in &profiles[1..] {
        assert!(
            other == profile,
            "{name}'s AutoFDO profile differs from {reference}'s"
        );
    }
}

/// The first instruction step at or after `index` (0-based) that writes a register:
/// its index, byte range and the offset of its first full-register record.
fn register_step(trace: &[u8], index: u64) -> (u64, std::ops::Range<usize>, usize) {
    let mut steps = StepDecoder::new(trace, Parameters::default());
    loop {
        let step = steps.next_step().unwrap().expect("the trace has the step");
        if step.index < index || !matches!(step.kind, StepKind::Instruction { .. }) {
            continue;
        }
        let mut records = RecordDecoder::new(trace, Parameters::default());
        while let Some(located) = records.next_record().unwrap() {
            if located.offset >= step.end_offset {
                break;
            }
            if located.offset >= step.offset {
                if let Record::FullRegister { .. } = located.record {
                    let range = step.offset as usize..step.end_offset as usize;
                    return (step.index, range, located.offset as usize);
                }
            }
        }
    }
}

#[test]
fn tandem_compare_finds_injected_divergences_where_they_were_injected() {
    let traces = traces();
    let original = std::fs::read(&traces.tandem).unwrap();
    let same = work().join("same.tandem");
    std::fs::write(&same, &original).unwrap();
    let agree = rvperf(&["tandem-compare", path(&traces.tandem), path(&same)]);
    assert_eq!(agree.status.code(), Some(0));
    let text = String::from_utf8_lossy(&agree.stdout);
    // The first step initialises the state; one step per instruction after it.
    assert!(
        text.contains(&format!("agree: {} steps", traces.pcs.len() + 1)),
        "{text}"
    );

    // A flipped bit in the value a register receives at step K.
    let (flipped_step, range, register) = register_step(&original, 51_234);
    let mut flipped = original.clone();
    // Opcode, two register-number bytes, then the value: its bit 9.
    flipped[register + 3 + 1] ^= 0x02;
    let flipped_path = work().join("flipped.tandem");
    std::fs::write(&flipped_path, &flipped).unwrap();
    let diverge = rvperf(&["tandem-compare", path(&traces.tandem), path(&flipped_path)]);
    assert_eq!(diverge.status.code(), Some(1));
    let text = String::from_utf8_lossy(&diverge.stdout);
    assert!(
        text.contains(&format!("diverge at step {flipped_step} ")),
        "{text}"
    );
    let offset = format!("byte offset {:#x}", range.start);
    assert_eq!(
        text.matches(&offset).count(),
        2,
        "both traces' positions: {text}"
    );
    assert!(text.contains("register "), "{text}");

    // Step K left out of the second trace: the instruction never retired there.
    let (skipped_step, range, _) = register_step(&original, 70_001);
    let mut skipped = original.clone();
    skipped.drain(range.clone());
    let skipped_path = work().join("skipped.tandem");
    std::fs::write(&skipped_path, &skipped).unwrap();
    let diverge = rvperf(&["tandem-compare", path(&traces.tandem), path(&skipped_path)]);
    assert_eq!(diverge.status.code(), Some(1));
    let text = String::from_utf8_lossy(&diverge.stdout);
    assert!(
        text.contains(&format!("diverge at step {skipped_step} ")),
        "{text}"
    );

    // Trouble is exit status 2, one line naming the byte offset.
    let cut = work().join("cut.tandem");
    std::fs::write(&cut, &original[..original.len() / 2]).unwrap();
    let trouble = rvperf(&["tandem-compare", path(&traces.tandem), path(&cut)]);
    assert_eq!(trouble.status.code(), Some(2));
    let error = String::from_utf8_lossy(&trouble.stderr);
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(
        error.contains("cut.tandem") && error.contains("offset"),
        "{error}"
    );
}

#[test]
fn a_cut_tandem_trace_is_one_line_with_the_offset_and_a_wrong_option_is_refused() {
    let traces = traces();
    let original = std::fs::read(&traces.tandem).unwrap();
    let cut = work().join("cut-decode.tandem");
    let length = original.len() / 3;
    std::fs::write(&cut, &original[..length]).unwrap();
    // Decoded up to the cut: the instructions before it are listed, the cut is warned
    // about at its offset.
    let output = rvperf(&[
        "decode",
        "--elf",
        path(&traces.program),
        "--trace",
        path(&cut),
        "--output",
        "pcs",
    ]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("offset"), "{error}");
    let listed = String::from_utf8_lossy(&output.stdout).lines().count();
    assert!(listed > 1000 && listed < traces.pcs.len(), "{listed} pcs");

    let refused = rvperf(&[
        "decode",
        "--elf",
        path(&traces.program),
        "--trace",
        path(&traces.tandem),
        "--src-bits",
        "3",
    ]);
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.contains("options of N-Trace"), "{error}");
}

#[test]
fn a_wrapped_debug_trace_buffer_decodes_to_the_end_of_the_run_given_its_write_pointer() {
    let traces = traces();
    let code = load_file(&traces.program);
    let size = 4 * 1024u64;
    let mut encoder = Debug4Encoder::new(
        &code.image,
        EncoderOptions::default().with_buffer(debug4_flow::BufferMode::Ring { bytes: size }),
    )
    .expect("encoder options");
    for &pc in &traces.pcs {
        encoder.retire(&Retirement::at(0, pc)).expect("encode");
    }
    let encoded = encoder.finish().expect("finish");
    let wrap = encoded
        .wrap_offset
        .expect("the run fills the ring several times");
    let ring = work().join("ring.debug4");
    std::fs::write(&ring, &encoded.bytes).unwrap();
    let size_text = size.to_string();
    let wrap_text = wrap.to_string();
    let listed: Vec<u64> = succeeded(&[
        "decode",
        "--elf",
        path(&traces.program),
        "--trace",
        path(&ring),
        "--buffer-size",
        &size_text,
        "--wrap-offset",
        &wrap_text,
        "--output",
        "pcs",
    ])
    .lines()
    .map(|line| u64::from_str_radix(line.trim_start_matches("0x"), 16).unwrap())
    .collect();
    assert!(listed.len() > 2_000, "{} pcs", listed.len());
    let tail = &traces.pcs[traces.pcs.len() - listed.len()..];
    assert_same_pcs("the ring's pcs: the run's last", tail, &listed);
}
