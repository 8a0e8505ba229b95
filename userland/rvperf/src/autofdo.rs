//! `rvperf autofdo`: an AutoFDO profile of one binary from the branch stacks of a
//! recording (CTR through rvperf_ctr, or any perf.data with PERF_SAMPLE_BRANCH_STACK),
//! in LLVM's text or extensible binary format or the format GCC 12 reads. The profile
//! is `perf_session::autofdo`'s; this is its command line and its warnings. From an
//! N-Trace (`--trace`) the profile is exact: every range the program ran, every
//! branch and call it took.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use perf_session::autofdo::{
    build_profile, count_branches, BinaryMapped, BranchSamples, BuildIdCheck, BuiltProfile,
    Compiler, ProfiledBinary,
};
use perf_session::{PlacedElf, Processes, SampledTraceCounts, Session, SymbolOptions, TraceCode};
use profiles::{BranchCountOptions, BranchCounts, SamplerOptions};
use trace_elements::ElementSource;

use crate::output::write_atomically;
use crate::perf_file::{finish_reading, open, show_progress};
use crate::trace_file::TraceFile;
use crate::trace_input::{decode_trace, CodeCache, JobsArgs, TraceArgs, TraceInput};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// LLVM's text sample profile (`clang -fprofile-sample-use=FILE`).
    LlvmText,
    /// LLVM's extensible binary sample profile.
    LlvmExtbinary,
    /// GCC's gcov-based AutoFDO profile (`gcc -fauto-profile=FILE`), as GCC 12 reads it.
    Gcc,
}

#[derive(Debug, Args)]
pub struct AutofdoArgs {
    /// Input file (`-` for a pipe-mode stream on standard input).
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// The riscv64 or x86_64 binary to profile, with debug info (-g or
    /// -gline-tables-only), as it ran (matched to the recording by file name and build
    /// id).
    #[arg(long, value_name = "ELF")]
    binary: PathBuf,
    /// Output profile.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    #[arg(long, value_enum, default_value = "llvm-text")]
    format: Format,
    /// Also write the execution count of every instruction (`0xADDRESS COUNT` lines,
    /// link-time addresses, sorted) to FILE.
    #[arg(long, value_name = "FILE")]
    instruction_counts: Option<PathBuf>,
    /// With -i of an `rvperf trace record` perf.data: the directory the recorded file
    /// names are under (the traced machine's root).
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    #[command(flatten)]
    threads: crate::trace_recording::ThreadFilter,
    /// Use the binary even if its build id differs from the recording's.
    #[arg(long)]
    ignore_build_id: bool,
    /// With --trace FILE: an N-Trace of the binary to profile instead of a perf.data,
    /// and the counts are exact. The binary is traced at its link addresses unless
    /// --elf places it (and the other files the trace ran through).
    #[command(flatten)]
    trace_input: TraceArgs,
    /// Threads decoding a trace (default here: 1; --sample-period decodes on one).
    #[command(flatten)]
    jobs: JobsArgs,
    /// With --trace: the profile an LBR or CTR sampling every N retired instructions
    /// would have given (a branch stack of --branches entries each time), for
    /// comparison with a recording, instead of the exact one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    sample_period: Option<u64>,
    /// Entries of each sampled branch stack (with --sample-period).
    #[arg(long, value_name = "N", default_value_t = 32, requires = "sample_period",
          value_parser = clap::value_parser!(u16).range(16..=64))]
    branches: u16,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

pub fn run(arguments: &AutofdoArgs) -> Result<()> {
    let name = arguments.binary.display().to_string();
    let bytes: Arc<[u8]> = std::fs::read(&arguments.binary)
        .with_context(|| format!("cannot read {name}"))?
        .into();
    let binary = ProfiledBinary::load(&name, bytes)?;
    let binary_name = binary.file_name().to_owned();

    let counts = match &arguments.trace_input.trace {
        Some(path) => {
            let trace = TraceInput::Messages(TraceFile::open(path)?);
            counts_from_trace(
                arguments,
                &arguments.trace_input,
                &trace,
                path,
                &mut CodeCache::default(),
            )?
        }
        None if crate::trace_recording::is_recording(&arguments.input)? => {
            counts_from_recording_trace(arguments)?
        }
        None if arguments.sample_period.is_some() => {
            bail!("--sample-period is for traces (--trace, or -i of an rvperf trace record perf.data)")
        }
        None => counts_from_recording(arguments, &binary)?,
    };

    let compiler = match arguments.format {
        Format::Gcc => Compiler::Gcc,
        Format::LlvmText | Format::LlvmExtbinary => Compiler::Llvm,
    };
    let BuiltProfile {
        profile,
        instruction_counts,
        stats,
        broken_ranges,
        frame_errors,
    } = build_profile(&binary, &counts.counts, compiler);

    let mut bytes = Vec::new();
    match arguments.format {
        Format::LlvmText => profiles::write_llvm_text(&profile, &mut bytes)?,
        Format::LlvmExtbinary => profiles::write_llvm_extbinary(&profile, &mut bytes)?,
        Format::Gcc => profiles::write_gcc_afdo(&profile, &mut bytes)?,
    }
    write_atomically(&arguments.output, |out| Ok(out.write_all(&bytes)?))
        .with_context(|| format!("cannot write {}", arguments.output.display()))?;
    if let Some(path) = &arguments.instruction_counts {
        let mut sorted: Vec<_> = instruction_counts.iter().collect();
        sorted.sort_unstable();
        write_atomically(path, |out| {
            for (address, count) in sorted {
                writeln!(out, "{address:#x} {count}")?;
            }
            Ok(())
        })
        .with_context(|| format!("cannot write {}", path.display()))?;
    }

    // Everything left out, once each, with counts.
    let warn = |what: String| eprintln!("rvperf: warning: {what}");
    let refused = counts.counts.refused;
    if refused.backwards + refused.too_long > 0 {
        warn(format!(
            "{} fall-through ranges ran backwards and {} were longer than {} bytes (a missed branch): not counted",
            refused.backwards,
            refused.too_long,
            BranchCountOptions::default().max_range_bytes
        ));
    }
    if broken_ranges > 0 {
        warn(format!(
            "{broken_ranges} ranges run into bytes that are not {} instructions of {binary_name}: counted up to there",
            binary.machine_name()
        ));
    }
    if stats.unplaced_instructions > 0 || frame_errors > 0 {
        warn(format!(
            "{} executed instructions ({} executions) have no source line in the debug info ({frame_errors} DWARF errors)",
            stats.unplaced_instructions, stats.unplaced_count
        ));
    }
    eprintln!(
        "rvperf autofdo: {}{} ranges, {} instructions placed, {} functions -> {}",
        counts.source,
        counts.counts.ranges.len(),
        stats.placed_instructions,
        profile.by_hotness().len(),
        arguments.output.display()
    );
    Ok(())
}

/// The profile's counts and a word on where they came from.
struct ProfileCounts {
    counts: BranchCounts,
    /// `N samples, M branch stacks, ` or what the trace held.
    source: String,
}

/// Counts from the branch stacks of a recording.
fn counts_from_recording(
    arguments: &AutofdoArgs,
    binary: &ProfiledBinary,
) -> Result<ProfileCounts> {
    let name = arguments.binary.display().to_string();
    let binary_name = binary.file_name().to_owned();
    let reader = open(&arguments.input)?;
    // Address spaces only: the binary's own debug info names the addresses.
    let mut session = Session::with_processes(&reader, Processes::new(SymbolOptions::default()));
    show_progress(&mut session, &arguments.input);
    let BranchSamples {
        counts,
        samples,
        skipped,
        mapped,
        build_id,
    } = count_branches(&mut session, binary)?;
    finish_reading(&session, &arguments.input);

    if let BuildIdCheck::Differs { recorded, actual } = &build_id {
        let message = format!(
            "{name}: build id {} differs from the recording's {} for {binary_name} ({samples} samples): not the binary that ran",
            hex(actual),
            hex(recorded)
        );
        if !arguments.ignore_build_id {
            bail!("{message}; --ignore-build-id uses it anyway");
        }
        eprintln!("rvperf: warning: {message}");
    }
    if mapped == BinaryMapped::NeverMapped {
        bail!(
            "{}: no process of the recording mapped {binary_name}",
            arguments.input.display()
        );
    }

    let warn = |what: String| eprintln!("rvperf: warning: {what}");
    if skipped.samples_without_branch_stack > 0 {
        warn(format!(
            "{} samples have no branch stack (record with -b or -j any,u)",
            skipped.samples_without_branch_stack
        ));
    }
    if skipped.samples_outside_binary > 0 {
        warn(format!(
            "{} samples were taken outside {binary_name} (other files or the kernel)",
            skipped.samples_outside_binary
        ));
    }
    if skipped.entries_outside_binary > 0 {
        warn(format!(
            "{} branch entries leave or enter {binary_name}; the stacks were cut there",
            skipped.entries_outside_binary
        ));
    }
    Ok(ProfileCounts {
        source: format!("{samples} samples, {} branch stacks, ", counts.stacks),
        counts,
    })
}

/// The counts of every thread of an N-Trace recording that ran the binary, summed.
fn counts_from_recording_trace(arguments: &AutofdoArgs) -> Result<ProfileCounts> {
    let loaded = crate::trace_recording::load(
        &arguments.input,
        arguments.symfs.as_deref(),
        &arguments.trace_input,
        &arguments.threads,
    )?;
    let binary_path = std::fs::canonicalize(&arguments.binary)
        .with_context(|| format!("cannot find {}", arguments.binary.display()))?;
    let binary_build_id = build_id_of(&arguments.binary);
    let mut total: Option<ProfileCounts> = None;
    let mut threads = 0;
    let mut codes = loaded.codes;
    for loaded_trace in &loaded.traces {
        let runs_binary = loaded_trace
            .arguments
            .placed_elves()?
            .iter()
            .any(|elf| same_file(&elf.path, &binary_path, binary_build_id.as_deref()));
        if !runs_binary {
            continue;
        }
        threads += 1;
        let counts = counts_from_trace(
            arguments,
            &loaded_trace.arguments,
            &loaded_trace.trace,
            &arguments.input,
            &mut codes,
        )?;
        match &mut total {
            None => total = Some(counts),
            Some(total) => {
                total.counts.merge(&counts.counts);
                total.source = format!("{}{}", total.source, counts.source);
            }
        }
    }
    let Some(mut total) = total else {
        bail!(
            "{}: no traced thread ran {} (by path or build id)",
            arguments.input.display(),
            arguments.binary.display()
        );
    };
    if threads > 1 {
        total.source = format!("{threads} threads: {}", total.source);
    }
    Ok(total)
}

/// Whether `path` is the binary at `binary_path`, or a copy of it (its build id).
fn same_file(
    path: &std::path::Path,
    binary_path: &std::path::Path,
    build_id: Option<&[u8]>,
) -> bool {
    std::fs::canonicalize(path).is_ok_and(|path| path == binary_path)
        || build_id.is_some_and(|id| build_id_of(path).as_deref() == Some(id))
}

/// What a sampled profile of a trace was made of, for the command's report.
fn sampled_summary(instructions: u64, samples: u64, branches: u16, period: u64) -> String {
    format!(
        "{instructions} instructions traced, {samples} samples of {branches} branches every {period} instructions, "
    )
}

/// Exact (or, with `--sample-period`, sampled) counts from an N-Trace whose encoder
/// options and code `input` says.
fn counts_from_trace(
    arguments: &AutofdoArgs,
    input: &TraceArgs,
    trace: &TraceInput,
    path: &std::path::Path,
    codes: &mut CodeCache,
) -> Result<ProfileCounts> {
    let code = if input.elf.is_empty() {
        std::rc::Rc::new(TraceCode::load(&[PlacedElf {
            path: arguments.binary.clone(),
            load_address: None,
        }])?)
    } else {
        codes.code_for(input)?
    };
    let binary_path = std::fs::canonicalize(&arguments.binary)
        .with_context(|| format!("cannot find {}", arguments.binary.display()))?;
    let binary_build_id = build_id_of(&arguments.binary);
    // The binary is the traced file itself, or a copy of it (the same build id): a
    // recording names the files as the traced machine had them.
    let file = input
        .placed_elves()?
        .iter()
        .position(|elf| same_file(&elf.path, &binary_path, binary_build_id.as_deref()))
        .or(input.elf.is_empty().then_some(0));
    let Some(file) = file else {
        bail!(
            "--binary {} is not one of the --elf files the trace ran (by path or build id)",
            arguments.binary.display()
        );
    };
    // A sampled profile places samples on instructions, which only the serial decoder
    // lists.
    let parallel = match arguments.sample_period {
        None => arguments.jobs.for_profiles(),
        Some(_) => None,
    };
    let (counts, summary) =
        decode_trace(
            input,
            parallel,
            &code,
            trace,
            path,
            |source| match arguments.sample_period {
                None => {
                    let counted = perf_session::count_trace(source)?;
                    let statistics = counted.statistics;
                    let summary = format!(
                        "{} instructions traced, {} branches taken, ",
                        statistics.instructions, statistics.branches
                    );
                    Ok((counted.counts, summary))
                }
                Some(period) => {
                    let mut sampled = SampledTraceCounts::new(SamplerOptions::new(
                        period,
                        usize::from(arguments.branches),
                    ))?;
                    while let Some(element) = source.next_element()? {
                        sampled.add(&element, |start, index| {
                            source.source().instruction_address(start, index)
                        });
                    }
                    let statistics = sampled.statistics();
                    Ok((
                        sampled.counts,
                        sampled_summary(
                            statistics.instructions,
                            statistics.samples,
                            arguments.branches,
                            period,
                        ),
                    ))
                }
            },
        )?;
    Ok(ProfileCounts {
        counts: code.counts_of_file(&counts, file),
        source: summary,
    })
}

/// The GNU build id of an ELF file, if it has one (and can be read).
fn build_id_of(path: &std::path::Path) -> Option<Vec<u8>> {
    perf_session::elf_build_id(&std::fs::read(path).ok()?)
}
