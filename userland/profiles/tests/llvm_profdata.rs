//! llvm-profdata 19 reads what the LLVM writers produce, and writes the same extensible
//! binary profile byte for byte when it converts the text profile itself.

mod common;

use std::path::Path;

use common::{llvm_reads_as_text, require, run, stdout, LLVM_PROFDATA};
use profiles::{write_llvm_extbinary, write_llvm_text, ProfileSummary, SampleProfile};
use proptest::prelude::*;

fn write_both(profile: &SampleProfile, dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let text_path = dir.join("profile.txt");
    let binary_path = dir.join("profile.extbinary");
    let mut text = Vec::new();
    write_llvm_text(profile, &mut text).unwrap();
    std::fs::write(&text_path, text).unwrap();
    let mut binary = Vec::new();
    write_llvm_extbinary(profile, &mut binary).unwrap();
    std::fs::write(&binary_path, binary).unwrap();
    (text_path, binary_path)
}

/// What llvm-profdata writes for our text profile, next to our extensible binary one.
fn reference_extbinary(text_path: &Path, dir: &Path) -> Vec<u8> {
    let reference = dir.join("reference.extbinary");
    run(
        LLVM_PROFDATA,
        &[
            &"merge",
            &"--sample",
            &"--extbinary",
            &text_path,
            &"-o",
            &reference,
        ],
    );
    std::fs::read(reference).unwrap()
}

proptest! {
    // Each case runs llvm-profdata three times; a few dozen random profiles cover the
    // orderings (ties, several callees at one call site, discriminators).
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn extbinary_is_what_llvm_profdata_writes(profile in common::sample_profile()) {
        require(LLVM_PROFDATA, "llvm-19");
        // llvm-profdata cannot tell the format of an empty text file.
        prop_assume!(!profile.by_hotness().is_empty());
        let dir = tempfile::tempdir().unwrap();
        let (text_path, binary_path) = write_both(&profile, dir.path());
        let ours = std::fs::read(&binary_path).unwrap();
        prop_assert!(ours == reference_extbinary(&text_path, dir.path()));
        // And LLVM reads both files as the profile we wrote.
        let text = std::fs::read_to_string(&text_path).unwrap();
        prop_assert_eq!(&llvm_reads_as_text(&text_path), &text);
        prop_assert_eq!(&llvm_reads_as_text(&binary_path), &text);
    }
}

#[test]
fn section_table_and_summary_match_llvm_profdata() {
    require(LLVM_PROFDATA, "llvm-19");
    let mut profile = SampleProfile::default();
    for (index, name) in ["hot", "warm", "cold", "tie_a", "tie_b"].iter().enumerate() {
        let function = profile.function(name);
        function.head_samples = 10 * index as u64;
        for line in 0..8u32 {
            function.add_body(
                profiles::LineLocation::new(line, line % 3),
                1000 / (index as u64 + 1) * u64::from(line + 1),
            );
        }
        function.add_call(profiles::LineLocation::new(2, 2), "cold", 3);
    }
    // Equal totals: the tie is broken by name in both writers.
    let tie = profile.functions["tie_a"].clone();
    profile.functions.insert(
        "tie_b".into(),
        profiles::FunctionProfile {
            name: "tie_b".into(),
            ..tie
        },
    );

    let dir = tempfile::tempdir().unwrap();
    let (text_path, binary_path) = write_both(&profile, dir.path());
    let reference = dir.path().join("reference.extbinary");
    std::fs::write(&reference, reference_extbinary(&text_path, dir.path())).unwrap();

    let sections = |path: &Path| {
        stdout(&run(
            LLVM_PROFDATA,
            &[&"show", &"--sample", &"--show-sec-info-only", &path],
        ))
    };
    let ours = sections(&binary_path);
    assert!(ours.contains("LBRProfileSection"), "{ours}");
    assert_eq!(ours, sections(&reference));

    let summary_text = stdout(&run(
        LLVM_PROFDATA,
        &[&"show", &"--sample", &"--detailed-summary", &binary_path],
    ));
    let summary = ProfileSummary::of(&profile).unwrap();
    let value = |label: &str| -> u64 {
        let line = summary_text
            .lines()
            .find(|line| line.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} in\n{summary_text}"));
        line[label.len()..].trim().parse().unwrap()
    };
    assert_eq!(value("Total functions:"), summary.num_functions);
    assert_eq!(value("Maximum function count:"), summary.max_function_count);
    assert_eq!(value("Maximum block count:"), summary.max_count);
    assert_eq!(value("Total number of blocks:"), summary.num_counts);
    assert_eq!(value("Total count:"), summary.total_count);
    // "N blocks with count >= M account for P percentage of the total counts."
    let detailed: Vec<(u64, u64)> = summary_text
        .lines()
        .filter(|line| line.contains(" blocks with count >= "))
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            (words[0].parse().unwrap(), words[5].parse().unwrap())
        })
        .collect();
    let expected: Vec<(u64, u64)> = summary
        .detailed
        .iter()
        .map(|entry| (entry.num_counts, entry.min_count))
        .collect();
    assert_eq!(detailed, expected);
}
