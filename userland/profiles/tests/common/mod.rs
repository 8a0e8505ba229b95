//! Shared by the writer tests: the real consumers (found or the test fails, naming the
//! Debian package), and random sample profiles.
#![allow(dead_code, reason = "each test binary uses a different part")]

pub mod gcc_dump;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use profiles::{BodySample, FunctionProfile, LineLocation, SampleProfile};
use proptest::prelude::*;

pub const LLVM_PROFDATA: &str = "llvm-profdata-19";
pub const CLANG: &str = "clang-19";
pub const RISCV_GCC: &str = "riscv64-linux-gnu-gcc";

/// Panics (never skips) when `program` is missing: these tests exist to prove that the
/// compilers read what the writers produce.
pub fn require(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found,
        "`{program}` is required by the profile writer tests but was not found; \
         install it with `apt-get install {package}`"
    );
}

/// Runs `program` with `args`, panicking with its stderr when it fails.
pub fn run(program: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("spawning {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {:?} failed: {}\n{}",
        args.iter().map(|arg| arg.as_ref()).collect::<Vec<_>>(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("tool output is UTF-8")
}

/// `llvm-profdata-19 merge --sample --text FILE -o -`: how LLVM reads a profile file.
pub fn llvm_reads_as_text(path: &Path) -> String {
    require(LLVM_PROFDATA, "llvm-19");
    stdout(&run(
        LLVM_PROFDATA,
        &[&"merge", &"--sample", &"--text", &path, &"-o", &"-"],
    ))
}

/// The profile as the writers put it in a file: only functions with samples.
pub fn written_functions(profile: &SampleProfile) -> SampleProfile {
    SampleProfile {
        functions: profile
            .by_hotness()
            .into_iter()
            .map(|function| (function.name.clone(), function.clone()))
            .collect(),
    }
}

fn name() -> impl Strategy<Value = String> {
    // Few names, so that call targets, inlined callees and functions share them.
    prop::sample::select(vec![
        "main",
        "hot_loop",
        "f",
        "g",
        "_Z3fooi",
        "_ZN4core3fmt5write17h01",
        "a.b",
        "x_y",
    ])
    .prop_map(str::to_owned)
}

fn location() -> impl Strategy<Value = LineLocation> {
    (0u32..40, prop_oneof![3 => Just(0u32), 1 => 1u32..5])
        .prop_map(|(line_offset, discriminator)| LineLocation::new(line_offset, discriminator))
}

fn body() -> impl Strategy<Value = BTreeMap<LineLocation, BodySample>> {
    let count = prop_oneof![0u64..100, 0u64..1_000_000];
    let sample = (
        count,
        prop::collection::btree_map(name(), 0u64..5_000, 0..3),
    )
        .prop_map(|(count, call_targets)| BodySample {
            count,
            call_targets,
        });
    prop::collection::btree_map(location(), sample, 0..6)
}

/// A function profile with inlined callees `depth` levels deep; inlined instances have
/// no head count (neither format stores one), top-level ones get theirs from the caller.
fn function(depth: u32) -> BoxedStrategy<FunctionProfile> {
    let callsites = if depth == 0 {
        Just(BTreeMap::new()).boxed()
    } else {
        prop::collection::btree_map(
            location(),
            prop::collection::vec(function(depth - 1), 1..3).prop_map(|callees| {
                callees
                    .into_iter()
                    .map(|callee| (callee.name.clone(), callee))
                    .collect::<BTreeMap<_, _>>()
            }),
            0..3,
        )
        .boxed()
    };
    (name(), body(), callsites)
        .prop_map(|(name, body, callsites)| {
            let mut function = FunctionProfile {
                name,
                total_samples: 0,
                head_samples: 0,
                body,
                callsites,
            };
            function.recompute_totals();
            function
        })
        .boxed()
}

/// Small random whole-program profiles, totals consistent with the bodies.
pub fn sample_profile() -> impl Strategy<Value = SampleProfile> {
    prop::collection::vec((function(2), 0u64..10_000), 0..6).prop_map(|functions| {
        let mut profile = SampleProfile::default();
        for (mut function, head_samples) in functions {
            function.head_samples = head_samples;
            profile.functions.insert(function.name.clone(), function);
        }
        profile
    })
}
