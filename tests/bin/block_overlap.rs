//! `rvperf-block-overlap`: how well a profile matches the exact execution counts of the
//! same program and input, block by block.
//!
//!     rvperf-block-overlap --elf FILE --truth-counts FILE --profile-counts FILE [--min 0.90]
//!
//! Both counts files hold `0xADDRESS COUNT` lines (rvperf-ground-truth writes the truth).
//! Each is reduced to one count per static basic block of the ELF (the largest count of
//! the block's instructions), normalised to sum 1, and the overlap is the sum over
//! blocks of the smaller of the two shares. Prints the overlap, the number of blocks and
//! the ten blocks whose shares differ most; exits 1 when the overlap is below `--min`,
//! 2 on bad input.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rvperf_tests::block_overlap::{basic_blocks, block_counts, block_overlap, unattributed, Block};
use rvperf_tests::execution_counts::read_counts;
use symbolize::{FunctionTable, ObjectSymbolizer};

#[derive(Debug, Parser)]
#[command(
    name = "rvperf-block-overlap",
    about = "Block-count overlap of a profile with the exact execution counts"
)]
struct Options {
    /// The riscv64 ELF both counts are of.
    #[arg(long)]
    elf: PathBuf,
    /// The exact counts (rvperf-ground-truth).
    #[arg(long)]
    truth_counts: PathBuf,
    /// The profile's counts per instruction address.
    #[arg(long)]
    profile_counts: PathBuf,
    /// The smallest overlap that passes.
    #[arg(long, default_value_t = 0.90)]
    min: f64,
}

/// `function+0xoffset` of an address, or the bare address outside every function.
fn location(functions: &FunctionTable, address: u64) -> String {
    match functions.lookup(address) {
        Some((symbol, offset)) => format!("{}+{offset:#x}", symbol.name),
        None => format!("{address:#x}"),
    }
}

fn share(count: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        count as f64 / total as f64
    }
}

fn run(options: &Options) -> Result<bool, Box<dyn std::error::Error>> {
    let elf = std::fs::read(&options.elf)
        .map_err(|error| format!("{}: {error}", options.elf.display()))?;
    let blocks: Vec<Block> = basic_blocks(&elf)?;
    let functions =
        ObjectSymbolizer::new(&options.elf.display().to_string(), elf.clone())?.function_table();
    let truth = read_counts(&options.truth_counts)?;
    let profile = read_counts(&options.profile_counts)?;

    let truth_blocks = block_counts(&blocks, &truth);
    let profile_blocks = block_counts(&blocks, &profile);
    let overlap = block_overlap(&truth_blocks, &profile_blocks);
    let truth_total: u64 = truth_blocks.iter().sum();
    let profile_total: u64 = profile_blocks.iter().sum();

    println!(
        "overlap {overlap:.4} over {} blocks ({} executed in the truth, {} in the profile)",
        blocks.len(),
        truth_blocks.iter().filter(|&&count| count > 0).count(),
        profile_blocks.iter().filter(|&&count| count > 0).count(),
    );
    report_unattributed("truth", &blocks, &truth);
    report_unattributed("profile", &blocks, &profile);

    let mut differences: Vec<(f64, usize)> = truth_blocks
        .iter()
        .zip(&profile_blocks)
        .enumerate()
        .map(|(index, (&t, &p))| (share(p, profile_total) - share(t, truth_total), index))
        .filter(|&(difference, _)| difference != 0.0)
        .collect();
    differences.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
    if !differences.is_empty() {
        println!("largest differences (shares of all block counts, profile - truth):");
    }
    for &(difference, index) in differences.iter().take(10) {
        let (start, end) = blocks[index];
        println!(
            "  {:+.4}  truth {:.4} profile {:.4}  {start:#x}..{end:#x} {}",
            difference,
            share(truth_blocks[index], truth_total),
            share(profile_blocks[index], profile_total),
            location(&functions, start),
        );
    }
    let passed = overlap >= options.min;
    println!(
        "{} (minimum {})",
        if passed { "PASS" } else { "FAIL" },
        options.min
    );
    Ok(passed)
}

fn report_unattributed(name: &str, blocks: &[Block], counts: &HashMap<u64, u64>) {
    let outside = unattributed(blocks, counts);
    if outside > 0 {
        let total: u64 = counts.values().sum();
        println!(
            "{name}: {outside} of {total} counts at addresses outside the ELF's code, not compared"
        );
    }
}

fn main() -> ExitCode {
    let options = Options::parse();
    match run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("rvperf-block-overlap: {error}");
            ExitCode::from(2)
        }
    }
}
