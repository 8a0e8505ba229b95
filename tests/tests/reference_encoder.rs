//! Conformance with an independent encoder: the N-Trace reference encoder (NexRv, the C
//! reference code of the RISC-V N-Trace task group, built from source with gcc) encodes
//! the exact retired-PC stream of real test programs (from `qemu-riscv64`, as in
//! ntrace_roundtrip.rs) under each of its options, and rvperf's `FlowDecoder` must give
//! back the identical PC sequence.
//!
//! The options (`NexRv -enco`): HTM (the default, level 2.1) or BTM (`-nobhm`), HTM
//! without RepeatBranch (`-norbm`), repeat detection (`-rpt 1` RepeatBranch, `-rpt 2`
//! repeated history) and the implicit-return stack (`-cs N`). Its stack
//! needs [`ReturnStackModel::ReferenceCode`] (see docs/ntrace-errata.md); `-cs 8` is
//! included although the reference decoder itself, fixed at 32 entries, cannot decode it.
//! `-rpt 3` (both kinds of repeat) is left out: the reference encoder then writes wrong
//! traces (its own decoder goes astray on recursion and qsort at the same instruction as
//! rvperf's). A negative `-cs` (a counter without addresses, returns never compared) is left out:
//! no decoder can follow a return that went elsewhere than the call.
//!
//! gcc missing is a failure, not a skip.

mod common;

use common::nexrv::PcSequence;
use common::{assert_same_pcs, decode_pcs, load, retired_pcs};
use ntrace_flow::{DecoderOptions, ReturnStackModel};
use ntrace_message::{Body, MessageDecoder, MessageOptions, ResourceFull};

/// A reference encoder configuration: its command-line options and its return stack.
struct Configuration {
    options: &'static [&'static str],
    return_stack: usize,
}

const CONFIGURATIONS: &[Configuration] = &[
    Configuration {
        options: &[],
        return_stack: 0,
    },
    Configuration {
        options: &["-nobhm"],
        return_stack: 0,
    },
    Configuration {
        options: &["-norbm", "-cs", "32"],
        return_stack: 32,
    },
    Configuration {
        options: &["-nobhm", "-cs", "32"],
        return_stack: 32,
    },
    Configuration {
        options: &["-cs", "8"],
        return_stack: 8,
    },
    Configuration {
        options: &["-rpt", "1"],
        return_stack: 0,
    },
    Configuration {
        options: &["-rpt", "2"],
        return_stack: 0,
    },
    Configuration {
        options: &["-rpt", "2", "-cs", "32"],
        return_stack: 32,
    },
];

/// What the matrix produced, to check that it exercised what it claims to.
#[derive(Debug, Default)]
struct Seen {
    repeat_branches: u64,
    repeated_histories: u64,
    direct_branches: u64,
    history_messages: u64,
}

fn count_messages(trace: &[u8], seen: &mut Seen) {
    let mut decoder = MessageDecoder::new(trace, MessageOptions::default());
    while let Some(message) = decoder.next_message().expect("reference trace message") {
        match message.body {
            Body::RepeatBranch { .. } => seen.repeat_branches += 1,
            Body::ResourceFull(ResourceFull::RepeatedHist { .. }) => seen.repeated_histories += 1,
            Body::DirectBranch { .. } => seen.direct_branches += 1,
            Body::IndirectBranchHist { .. } => seen.history_messages += 1,
            _ => {}
        }
    }
}

fn conforms(name: &str) {
    let pcs = retired_pcs(name);
    let code = load(name);
    let sequence = PcSequence::new(name, &pcs);
    let mut seen = Seen::default();
    let mut sizes = Vec::new();
    for configuration in CONFIGURATIONS {
        let trace = sequence.encode(configuration.options);
        count_messages(&trace, &mut seen);
        sizes.push(trace.len());
        let (depth, model) = match configuration.return_stack {
            0 => (0, ReturnStackModel::DropOldest),
            depth => (depth, ReturnStackModel::ReferenceCode),
        };
        let options = DecoderOptions::default()
            .with_return_stack_depth(depth)
            .with_return_stack_model(model);
        let context = format!("{name}, NexRv -enco {:?}", configuration.options);
        let decoded =
            decode_pcs(&trace, &code, options).unwrap_or_else(|error| panic!("{context}: {error}"));
        assert_same_pcs(&context, &pcs, &decoded);
    }
    eprintln!(
        "{name}: {} instructions, trace bytes per configuration {sizes:?}, {seen:?}",
        pcs.len()
    );
    assert!(seen.direct_branches > 0, "{name}: no BTM DirectBranch");
    assert!(seen.history_messages > 0, "{name}: no HTM history");
    // The return stack must have made returns implicit: HTM with a stack of 32 is
    // smaller than HTM without one.
    assert!(
        sizes[2] < sizes[0],
        "{name}: -cs 32 saved nothing: {sizes:?}"
    );
    seen.repeat_branches
        .checked_add(seen.repeated_histories)
        .filter(|&repeats| repeats > 0)
        .unwrap_or_else(|| panic!("{name}: -rpt produced no repeat messages: {seen:?}"));
}

#[test]
fn function_pointers() {
    conforms("fnptr");
}

#[test]
fn deep_recursion_overflowing_the_return_stack() {
    conforms("recursion");
}

#[test]
fn switch_jump_table() {
    conforms("switch");
}

#[test]
fn setjmp_longjmp() {
    conforms("longjmp");
}

#[test]
fn tight_loops() {
    conforms("loops");
}

#[test]
fn system_calls() {
    conforms("syscalls");
}

#[test]
fn bytecode_interpreter() {
    conforms("interp");
}

#[test]
fn library_qsort() {
    conforms("qsort");
}

#[test]
fn calls_as_auipc_jalr_pairs() {
    conforms("farcalls");
}

/// The command line decodes a reference-encoder trace whose return stack wrapped
/// (`-cs 8` on qsort), with `--stack-model reference-code`, serial or parallel alike.
#[test]
fn rvperf_decode_follows_the_reference_codes_stack() {
    let name = "qsort";
    let pcs = retired_pcs(name);
    let trace = PcSequence::new(name, &pcs).encode(&["-cs", "8"]);
    let path = common::scratch().join(format!("qsort-cs8-{}.nt", std::process::id()));
    std::fs::write(&path, &trace).unwrap();
    let expected: String = pcs.iter().map(|pc| format!("{pc:#x}\n")).collect();
    for jobs in ["1", "2"] {
        let output = std::process::Command::new(common::rvperf_binary())
            .args(["decode", "--elf"])
            .arg(common::program(name))
            .arg("--trace")
            .arg(&path)
            .args(["--output", "pcs", "--max-stack", "8", "--jobs", jobs])
            .args(["--stack-model", "reference-code"])
            .output()
            .expect("run rvperf decode");
        assert!(
            output.status.success() && output.stderr.is_empty(),
            "--jobs {jobs}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.stdout == expected.as_bytes(),
            "--jobs {jobs}: the decoded PCs differ from QEMU's"
        );
    }
    // The default model cannot follow it once the stack wrapped.
    let output = std::process::Command::new(common::rvperf_binary())
        .args(["decode", "--elf"])
        .arg(common::program(name))
        .arg("--trace")
        .arg(&path)
        .args(["--output", "summary", "--max-stack", "8"])
        .output()
        .expect("run rvperf decode");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("gap"),
        "the drop-oldest model decoded a wrapped reference stack"
    );
    let _ = std::fs::remove_file(&path);
}
