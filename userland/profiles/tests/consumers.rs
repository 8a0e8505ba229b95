//! The compilers read the profiles: a hand-made profile of tests/data/hot.c, written in
//! all three formats, is shown by llvm-profdata 19, drives clang 19's `branch_weights`
//! and entry counts, and sets GCC 12's basic block counts.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::gcc_dump::{gcc_block_counts, read_afdo_dump};
use common::{require, run, stdout, CLANG, LLVM_PROFDATA, RISCV_GCC};
use profiles::{
    write_gcc_afdo, write_llvm_extbinary, write_llvm_text, LineLocation, SampleProfile,
};

const HOT_C: &str = include_str!("data/hot.c");

/// The 1-based line of hot.c holding `text`.
fn line_of(text: &str) -> u32 {
    let index = HOT_C
        .lines()
        .position(|line| line.contains(text))
        .unwrap_or_else(|| panic!("hot.c has no line with {text:?}"));
    index as u32 + 1
}

/// The position of the line marked `marker` in the function whose name (its
/// `DW_AT_decl_line`) is on the line holding `declaration`.
fn at(declaration: &str, marker: &str) -> LineLocation {
    LineLocation::new(line_of(marker) - line_of(declaration), 0)
}

const HOT: &str = "hot_loop(int limit)";
const SCALE: &str = "scale(int value)";
const COLD: &str = "cold_path(int value)";
const MAIN: &str = "main(int argc";

const HOT_HEAD: u64 = 1000;
const LOOP_COUNT: u64 = 100_000;
const COLD_CALLS: u64 = 100;
/// The inlined `scale`'s body count: a little under the 99,900 iterations that took it,
/// as sampling skid makes it. GCC's flow propagation alone would give its block 99,900,
/// so seeing this count proves GCC matched the inlined instance by its call site.
const SCALE_COUNT: u64 = LOOP_COUNT - COLD_CALLS - 123;

/// What a run of hot.c with `main` calling `hot_loop` 1000 times (100 iterations each,
/// scaled down from the source's numbers) would have sampled.
fn hot_profile() -> SampleProfile {
    let mut profile = SampleProfile::default();

    let hot = profile.function("hot_loop");
    hot.head_samples = HOT_HEAD;
    hot.add_body(at(HOT, "hot: init"), HOT_HEAD);
    hot.add_body(at(HOT, "hot: loop"), LOOP_COUNT);
    hot.add_body(at(HOT, "hot: test"), LOOP_COUNT);
    hot.add_body(at(HOT, "hot: cold call"), COLD_CALLS);
    hot.add_call(at(HOT, "hot: cold call"), "cold_path", COLD_CALLS);
    hot.add_body(at(HOT, "hot: return"), HOT_HEAD);
    let scale = hot.inlined(at(HOT, "hot: scale call"), "scale");
    scale.add_body(at(SCALE, "scale: multiply"), SCALE_COUNT);
    scale.add_body(at(SCALE, "scale: return"), SCALE_COUNT);
    hot.recompute_totals();

    let cold = profile.function("cold_path");
    cold.head_samples = COLD_CALLS;
    cold.add_body(at(COLD, "cold: print"), COLD_CALLS);
    cold.add_body(at(COLD, "cold: return"), COLD_CALLS);
    cold.recompute_totals();

    let main = profile.function("main");
    main.head_samples = 1;
    main.add_body(at(MAIN, "main: init"), 1);
    main.add_body(at(MAIN, "main: loop"), HOT_HEAD);
    main.add_body(at(MAIN, "main: call"), HOT_HEAD);
    main.add_call(at(MAIN, "main: call"), "hot_loop", HOT_HEAD);
    main.add_body(at(MAIN, "main: print"), 1);
    main.recompute_totals();
    profile
}

/// hot.c and the profile in every format, in a temporary directory.
struct Files {
    dir: tempfile::TempDir,
    source: PathBuf,
    text: PathBuf,
    extbinary: PathBuf,
    gcc: PathBuf,
}

fn write_files(profile: &SampleProfile) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("hot.c");
    std::fs::write(&source, HOT_C).unwrap();
    let text = dir.path().join("hot.prof.txt");
    let mut bytes = Vec::new();
    write_llvm_text(profile, &mut bytes).unwrap();
    std::fs::write(&text, &bytes).unwrap();
    let extbinary = dir.path().join("hot.prof.extbinary");
    bytes.clear();
    write_llvm_extbinary(profile, &mut bytes).unwrap();
    std::fs::write(&extbinary, &bytes).unwrap();
    let gcc = dir.path().join("hot.afdo");
    bytes.clear();
    write_gcc_afdo(profile, &mut bytes).unwrap();
    std::fs::write(&gcc, &bytes).unwrap();
    Files {
        dir,
        source,
        text,
        extbinary,
        gcc,
    }
}

/// The top-level functions of `llvm-profdata show --sample`:
/// `Function: NAME: TOTAL, HEAD, N sampled lines`.
fn shown_functions(path: &Path) -> Vec<(String, u64, u64)> {
    let shown = stdout(&run(LLVM_PROFDATA, &[&"show", &"--sample", &path]));
    shown
        .lines()
        .filter_map(|line| line.strip_prefix("Function: "))
        .map(|rest| {
            let (name, numbers) = rest.rsplit_once(": ").unwrap();
            let mut numbers = numbers.split(", ");
            let total = numbers.next().unwrap().parse().unwrap();
            let head = numbers.next().unwrap().parse().unwrap();
            (name.to_owned(), total, head)
        })
        .collect()
}

#[test]
fn llvm_profdata_shows_the_hot_program_profile() {
    require(LLVM_PROFDATA, "llvm-19");
    let profile = hot_profile();
    let files = write_files(&profile);
    let expected: Vec<(String, u64, u64)> = profile
        .by_hotness()
        .iter()
        .map(|function| {
            (
                function.name.clone(),
                function.total_samples,
                function.head_samples,
            )
        })
        .collect();
    assert_eq!(expected[0].0, "hot_loop");
    assert_eq!(shown_functions(&files.text), expected);
    assert_eq!(shown_functions(&files.extbinary), expected);

    let text = std::fs::read_to_string(&files.text).unwrap();
    assert_eq!(common::llvm_reads_as_text(&files.extbinary), text);

    let summary = stdout(&run(
        LLVM_PROFDATA,
        &[
            &"show",
            &"--sample",
            &"--detailed-summary",
            &files.extbinary,
        ],
    ));
    let max_block = format!("Maximum block count: {LOOP_COUNT}");
    assert!(summary.contains(&max_block), "{summary}");
    assert!(summary.contains("Detailed summary:"), "{summary}");
}

/// Compiles hot.c to LLVM IR with `profile` (none when `None`); fails on any diagnostic.
fn clang_ir(files: &Files, profile: Option<&Path>) -> String {
    require(CLANG, "clang-19");
    let ir = files.dir.path().join("hot.ll");
    let mut command = Command::new(CLANG);
    command.args([
        "--target=riscv64-linux-gnu",
        "-O2",
        "-g",
        "-gline-tables-only",
        "-fdebug-info-for-profiling",
        "-Wall",
        "-S",
        "-emit-llvm",
    ]);
    if let Some(profile) = profile {
        command.arg(format!("-fprofile-sample-use={}", profile.display()));
    }
    let output = command
        .arg(&files.source)
        .arg("-o")
        .arg(&ir)
        .output()
        .expect("spawning clang-19");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "clang failed: {stderr}");
    // No "could not read profile", no mismatch or unprofiled-function warnings: nothing.
    assert!(
        stderr.trim().is_empty(),
        "clang printed diagnostics:\n{stderr}"
    );
    std::fs::read_to_string(ir).unwrap()
}

/// The lines of `function`'s definition in `ir`.
fn ir_function<'a>(ir: &'a str, function: &str) -> Vec<&'a str> {
    let signature = format!("@{function}(");
    ir.lines()
        .skip_while(|line| !(line.starts_with("define ") && line.contains(&signature)))
        .take_while(|line| *line != "}")
        .collect()
}

/// The metadata node `!name = ...` of `ir`.
fn ir_metadata<'a>(ir: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name} = ");
    ir.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no metadata {name}"))
}

/// The `!prof` attachments of a function's lines.
fn prof_references<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .filter_map(|line| {
            let (_, after) = line.split_once("!prof ")?;
            Some(after.split([',', ' ']).next().unwrap())
        })
        .collect()
}

/// Every profile annotation of the IR: function entry counts and branch weights.
fn profile_annotations(ir: &str) -> Vec<&str> {
    ir.lines()
        .filter(|line| line.contains("function_entry_count") || line.contains("branch_weights"))
        .collect()
}

#[test]
fn clang_annotates_hot_loop_from_both_llvm_profiles() {
    let profile = hot_profile();
    let files = write_files(&profile);
    let text_ir = clang_ir(&files, Some(&files.text));
    let binary_ir = clang_ir(&files, Some(&files.extbinary));

    let hot_loop = ir_function(&text_ir, "hot_loop");
    assert!(!hot_loop.is_empty(), "no hot_loop in the IR");
    let references = prof_references(&hot_loop);
    // The definition line carries the entry count: LLVM sets it to head samples + 1.
    let entry = ir_metadata(&text_ir, references[0]);
    assert_eq!(
        entry,
        format!("!{{!\"function_entry_count\", i64 {}}}", HOT_HEAD + 1)
    );
    let weights: Vec<&str> = references[1..]
        .iter()
        .map(|reference| ir_metadata(&text_ir, reference))
        .filter(|metadata| metadata.contains("\"branch_weights\""))
        .collect();
    // The `if` between cold_path and the inlined scale: block counts + 1, the second the
    // inlined instance's count (propagation alone would give 99,900 + 1).
    let branch = format!(
        "!{{!\"branch_weights\", i32 {}, i32 {}}}",
        COLD_CALLS + 1,
        SCALE_COUNT + 1
    );
    assert!(weights.contains(&branch.as_str()), "{weights:#?}");
    // The call to cold_path weighted by the call target count.
    let call = format!("!{{!\"branch_weights\", i32 {COLD_CALLS}}}");
    assert!(weights.contains(&call.as_str()), "{weights:#?}");

    // The same profile in the other format annotates the IR identically.
    assert_eq!(
        profile_annotations(&text_ir),
        profile_annotations(&binary_ir)
    );

    // And without a profile there is nothing: the counts came from the files.
    let plain_ir = clang_ir(&files, None);
    assert!(profile_annotations(&plain_ir).is_empty());
}

/// Runs GCC 12 on hot.c with `profile`, dumping the afdo pass into the temporary
/// directory. Returns the process output and the dump (empty when none was written).
fn gcc_with_profile(files: &Files, profile: &Path) -> (std::process::Output, String) {
    require(RISCV_GCC, "gcc-riscv64-linux-gnu");
    let version = stdout(&run(RISCV_GCC, &[&"-dumpversion"]));
    assert!(
        version.trim().starts_with("12"),
        "the GCC AutoFDO writer targets GCC 12; {RISCV_GCC} is {version}"
    );
    let dump_dir = files.dir.path().join("dump");
    std::fs::create_dir_all(&dump_dir).unwrap();
    let output = Command::new(RISCV_GCC)
        .args(["-O2", "-g", "-Wall"])
        .arg(format!("-fauto-profile={}", profile.display()))
        .arg("-fdump-ipa-afdo")
        .arg("-dumpdir")
        .arg(format!("{}/", dump_dir.display()))
        .arg("-c")
        .arg(&files.source)
        .arg("-o")
        .arg(files.dir.path().join("hot.o"))
        .output()
        .expect("spawning riscv64-linux-gnu-gcc");
    let dump = read_afdo_dump(&dump_dir).unwrap_or_default();
    (output, dump)
}

#[test]
fn gcc_12_sets_block_counts_from_the_afdo_profile() {
    let profile = hot_profile();
    let files = write_files(&profile);
    let (output, dump) = gcc_with_profile(&files, &files.gcc);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "GCC failed: {stderr}");
    assert!(
        stderr.trim().is_empty(),
        "GCC printed diagnostics:\n{stderr}"
    );

    let hot_loop = gcc_block_counts(&dump, "hot_loop");
    // The entry block has the head count, the loop blocks our counts, and the block of
    // the inlined scale() the count of the instance under hot_loop's call site.
    assert_eq!(hot_loop.first(), Some(&HOT_HEAD), "{dump}");
    assert!(hot_loop.contains(&LOOP_COUNT), "{hot_loop:?}");
    assert!(hot_loop.contains(&SCALE_COUNT), "{hot_loop:?}");
    assert!(hot_loop.contains(&COLD_CALLS), "{hot_loop:?}");
    assert_eq!(
        gcc_block_counts(&dump, "cold_path").first(),
        Some(&COLD_CALLS)
    );
    assert!(gcc_block_counts(&dump, "main").contains(&HOT_HEAD));
}

#[test]
fn gcc_12_refuses_a_profile_of_another_version() {
    let profile = hot_profile();
    let files = write_files(&profile);
    let mut bytes = std::fs::read(&files.gcc).unwrap();
    // The version word follows the magic: make it GCC 11's.
    assert_eq!(bytes[4..8], 2u32.to_le_bytes());
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    let corrupt = files.dir.path().join("version1.afdo");
    std::fs::write(&corrupt, bytes).unwrap();
    let (output, _) = gcc_with_profile(&files, &corrupt);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("AutoFDO profile version 1 does not match 2"),
        "{stderr}"
    );
}
