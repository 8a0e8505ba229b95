//! `rvperf-ground-truth`: the exact execution count of every instruction of a static
//! riscv64 program, from its full run under `qemu-riscv64` with one instruction per
//! translation block. The reference that `rvperf-block-overlap` measures sampled
//! profiles against.
//!
//!     rvperf-ground-truth --elf FILE -o COUNTS [-- ARGS...]
//!
//! Writes COUNTS as `0xADDRESS COUNT` lines sorted by address, copies the program's
//! standard output to standard output and prints a summary on standard error. The
//! program runs with an empty environment and standard output a pipe, as it does in
//! the tests. Exit status 1 when anything fails (QEMU missing, the program failing).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use rvperf_tests::execution_counts::{instruction_counts, write_counts};
use trace_gen::qemu::QemuUser;

#[derive(Debug, Parser)]
#[command(
    name = "rvperf-ground-truth",
    about = "Exact per-instruction execution counts of a riscv64 program under qemu-riscv64"
)]
struct Options {
    /// The static riscv64 program to run.
    #[arg(long)]
    elf: PathBuf,
    /// Where to write the counts (`0xADDRESS COUNT` per line).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// The program's arguments.
    #[arg(last = true)]
    args: Vec<String>,
}

fn run(options: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let qemu = QemuUser::detect()?;
    let args: Vec<&str> = options.args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let truth = instruction_counts(&qemu, &options.elf, &args)?;
    let seconds = started.elapsed().as_secs_f64();
    write_counts(&options.output, &truth.counts)?;
    use std::io::Write;
    std::io::stdout().write_all(&truth.output.stdout)?;
    eprintln!(
        "{}: {} instructions at {} addresses in {seconds:.1} s under {} {}; counts in {}",
        options.elf.display(),
        truth.instructions,
        truth.counts.len(),
        qemu.binary.display(),
        qemu.one_insn_flag(),
        options.output.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let options = Options::parse();
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rvperf-ground-truth: {error}");
            ExitCode::FAILURE
        }
    }
}
