//! The interpreter of the trace tests (tests/programs/interp.c), profiled two ways and
//! built by clang 19 with each profile:
//!
//! * the exact AutoFDO profile of its N-Trace (`rvperf autofdo --trace`: the run under
//!   `qemu-riscv64`, every retired instruction encoded by rvperf's encoder model);
//! * the AutoFDO profile of a CTR recording made in the riscv64 guest
//!   (tests/fixtures/autofdo-interp/, or the directory named by
//!   RVPERF_INTERP_RECORDING, where tools/vm/test puts a fresh one).
//!
//! The build with the trace profile must retire no more instructions under QEMU (a
//! deterministic count) than the build with the CTR profile, and clearly fewer than a
//! build without a profile. The profiles are of the same binary, the one that ran in
//! the guest.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::consumers::{instructions_of_clang_build, run_tool};
use common::{repository, rvperf_binary, scratch, write_profiling_trace};

const INSTALL: &str =
    "run tools/install-deps.sh (clang-19, gcc-riscv64-linux-gnu, qemu-user) and build the guest recording with tools/vm/test";

/// The traced run's input (the CTR recording ran `interp 100`; the profile's shape does
/// not depend on the count, only its size).
const TRACED_ITERATIONS: &str = "20";
/// The input of the clang builds' measured runs.
const MEASURED_ITERATIONS: &str = "40";

fn recording() -> PathBuf {
    std::env::var_os("RVPERF_INTERP_RECORDING")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("tests/fixtures/autofdo-interp"))
}

fn work() -> &'static Path {
    static WORK: OnceLock<PathBuf> = OnceLock::new();
    WORK.get_or_init(|| {
        let directory = scratch().join(format!("autofdo-interp-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        directory
    })
}

/// `rvperf autofdo ARGS -o work/NAME --binary interp`: the profile's path.
fn profile(name: &str, input: &[&str]) -> PathBuf {
    let path = work().join(name);
    let binary = recording().join("interp");
    run_tool(
        Command::new(rvperf_binary())
            .arg("autofdo")
            .args(input)
            .arg("--binary")
            .arg(&binary)
            .arg("-o")
            .arg(&path),
        INSTALL,
    );
    path
}

#[test]
fn the_trace_profile_builds_an_interpreter_as_fast_as_the_ctr_profile() {
    let binary = recording().join("interp");
    let trace = work().join("interp.nt");
    let retired = write_profiling_trace(&binary, &[TRACED_ITERATIONS], &trace);
    assert!(retired.len() > 2_000_000, "{} instructions", retired.len());
    let trace_profile = profile(
        "trace-profile.llvm-text",
        &["--trace", trace.to_str().unwrap()],
    );
    let data = recording().join("perf.data");
    let ctr_profile = profile("ctr-profile.llvm-text", &["-i", data.to_str().unwrap()]);

    let source = repository().join("tests/programs/interp.c");
    let measure = |profile: Option<&Path>| {
        instructions_of_clang_build(&source, profile, &[MEASURED_ITERATIONS], work(), INSTALL)
    };
    let with_trace = measure(Some(&trace_profile));
    let with_ctr = measure(Some(&ctr_profile));
    let without = measure(None);
    eprintln!(
        "interp {MEASURED_ITERATIONS} retires {with_trace} instructions built with the trace profile, {with_ctr} with the CTR profile, {without} with none"
    );
    // The profile is used: a clear gain over no profile (measured: 0.53%).
    assert!(
        with_trace * 1000 < without * 998,
        "the trace profile's build retires {with_trace} instructions, one without a profile {without}"
    );
    assert!(
        with_trace <= with_ctr,
        "the trace profile's build retires {with_trace} instructions, the CTR profile's {with_ctr}"
    );
}
