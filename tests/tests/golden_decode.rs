//! Golden tests of `rvperf decode` on the bundled fixtures in tests/fixtures/ntrace/.
//!
//! Each fixture directory holds `program` (the riscv64 ELF), `trace.nt`, `decode-flags`
//! (extra command-line flags), `expected-pcs.txt[.gz]` (the ground truth: QEMU's
//! retired-PC sequence, never blessed), `golden-outputs` (which `--output` modes have
//! an `expected-<mode>.txt`) and a README saying how it was made. `RVPERF_BLESS=1`
//! rewrites the expected-<mode>.txt files from the current decoder.

mod common;

use std::path::Path;
use std::process::Command;

fn run_decode(fixture: &Path, mode: &str) -> String {
    run_decode_with(fixture, mode, &[])
}

/// `rvperf decode --output mode` on `fixture` with `extra` flags, timing lines dropped.
fn run_decode_with(fixture: &Path, mode: &str, extra: &[&str]) -> String {
    let root = common::repository();
    let relative = fixture.strip_prefix(&root).unwrap_or(fixture);
    let flags = std::fs::read_to_string(fixture.join("decode-flags")).unwrap_or_default();
    let output = Command::new(common::rvperf_binary())
        .current_dir(&root)
        .arg("decode")
        .arg("--elf")
        .arg(relative.join("program"))
        .arg("--trace")
        .arg(relative.join("trace.nt"))
        .args(flags.split_whitespace())
        .args(["--output", mode])
        .args(extra)
        .output()
        .expect("run rvperf");
    assert!(
        output.status.success(),
        "{}: rvperf decode --output {mode} failed: {}",
        fixture.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("utf-8 output");
    // Timing varies from run to run; everything else is deterministic.
    text.lines()
        .filter(|line| !line.starts_with("decode time:"))
        .map(|line| format!("{line}\n"))
        .collect()
}

fn ground_truth(fixture: &Path) -> String {
    let plain = fixture.join("expected-pcs.txt");
    if plain.is_file() {
        return std::fs::read_to_string(plain).unwrap();
    }
    let compressed = fixture.join("expected-pcs.txt.gz");
    let output = Command::new("gzip")
        .arg("-dc")
        .arg(&compressed)
        .output()
        .expect("run gzip -dc");
    assert!(
        output.status.success(),
        "cannot read {}",
        compressed.display()
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn fixtures_decode_as_recorded() {
    let bless = std::env::var_os("RVPERF_BLESS").is_some_and(|value| value == "1");
    let directory = common::repository().join("tests/fixtures/ntrace");
    let mut fixtures: Vec<_> = std::fs::read_dir(&directory)
        .expect("tests/fixtures/ntrace")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("trace.nt").is_file())
        .collect();
    fixtures.sort();
    assert!(
        fixtures.len() >= 3,
        "fixtures missing in {}",
        directory.display()
    );
    let mut checked = 0;
    for fixture in &fixtures {
        assert!(
            fixture.join("README.md").is_file(),
            "{}: every fixture says how it was made",
            fixture.display()
        );
        // The decoded PCs are the program's real execution, exactly.
        let pcs = run_decode(fixture, "pcs");
        let truth = ground_truth(fixture);
        assert!(
            pcs == truth,
            "{}: decoded PCs differ from QEMU's ({} vs {} lines)",
            fixture.display(),
            pcs.lines().count(),
            truth.lines().count()
        );
        checked += 1;
        let modes = std::fs::read_to_string(fixture.join("golden-outputs")).unwrap_or_default();
        for mode in modes.split_whitespace() {
            let expected_path = fixture.join(format!("expected-{mode}.txt"));
            let actual = run_decode(fixture, mode);
            if bless {
                std::fs::write(&expected_path, &actual).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
                panic!(
                    "{} is missing: run with RVPERF_BLESS=1 to create it",
                    expected_path.display()
                )
            });
            if actual != expected {
                let line = expected
                    .lines()
                    .zip(actual.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                panic!(
                    "{}: output differs from {} at line {}:\n  expected: {}\n  actual:   {}\n(RVPERF_BLESS=1 re-blesses if the change is intended)",
                    fixture.display(),
                    expected_path.display(),
                    line + 1,
                    expected.lines().nth(line).unwrap_or("<end>"),
                    actual.lines().nth(line).unwrap_or("<end>")
                );
            }
            checked += 1;
        }
    }
    eprintln!("checked {checked} outputs of {} fixtures", fixtures.len());
}

#[test]
fn fixtures_decode_the_same_with_any_number_of_jobs() {
    let directory = common::repository().join("tests/fixtures/ntrace");
    let mut fixtures: Vec<_> = std::fs::read_dir(&directory)
        .expect("tests/fixtures/ntrace")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("trace.nt").is_file())
        .collect();
    fixtures.sort();
    for fixture in &fixtures {
        for mode in ["pcs", "blocks", "insns", "summary"] {
            let serial = run_decode_with(fixture, mode, &["--jobs", "1"]);
            // Tiny chunks put a seam at nearly every synchronisation message.
            for extra in [
                &["--jobs", "2"][..],
                &["--jobs", "2", "--chunk-bytes", "1"],
                &["--jobs", "2", "--chunk-bytes", "61"],
            ] {
                assert!(
                    run_decode_with(fixture, mode, extra) == serial,
                    "{}: --output {mode} {} differs from --jobs 1",
                    fixture.display(),
                    extra.join(" ")
                );
            }
        }
    }
}
