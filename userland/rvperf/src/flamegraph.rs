//! `rvperf flamegraph`: folded stacks and flame graph SVGs (drawn by inferno) from the
//! samples of a perf.data file: callchains (`-g`), or CTR call stacks
//! (`-j call_stack`) where callchains are missing, or the sampled function alone.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use perf_data::{PerfDataReader, Sample};
use profiles::flamegraph::{write_differential_flamegraph, write_flamegraph, FlameGraphOptions};
use profiles::FoldedStacks;

use crate::output::write_atomically;
use crate::perf_input::{file_size, for_each_sample, open, Processes, SymbolOptions};

/// What the root frame of each stack says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Split {
    /// The command name, one tower per command (inferno-collapse-perf's default).
    Command,
    /// `command-PID`: one tower per process.
    Process,
    /// `command-PID/TID`: one tower per thread.
    Thread,
    /// No root frame: all processes merged.
    None,
}

#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// Input file (`-` for a pipe-mode stream on standard input).
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// Output file: the SVG, or with --folded the folded stacks (`-` for standard output).
    #[arg(short = 'o', long = "output", default_value = "flamegraph.svg")]
    output: PathBuf,
    /// Write folded stacks (`frame;frame count` lines) instead of an SVG.
    #[arg(long)]
    folded: bool,
    /// Root frame per command, process or thread.
    #[arg(long, value_enum, default_value = "command")]
    split: Split,
    /// A differential flame graph: this earlier recording against -i (red: grew).
    #[arg(long, value_name = "BEFORE")]
    diff_from: Option<PathBuf>,
    /// Count each sample once instead of weighing it by its period (the default, as
    /// inferno-collapse-perf does: widths are then events, e.g. nanoseconds of
    /// cpu-clock).
    #[arg(long)]
    samples: bool,
    /// Look for the recorded programs' files under this directory (perf's `--symfs`).
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Kernel symbols for kernel addresses (a copy of the recording machine's
    /// /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
    /// Show inlined functions as frames of their own (from DWARF; slower).
    #[arg(long)]
    inline: bool,
    /// The SVG's title.
    #[arg(long, default_value = "Flame Graph")]
    title: String,
}

/// PERF_CONTEXT_* markers in callchains: at or above this value (-4095).
const PERF_CONTEXT_MAX: u64 = u64::MAX - 4094;

pub fn run(arguments: &FlamegraphArgs) -> Result<()> {
    let after = fold(&arguments.input, arguments)?;
    let before = match &arguments.diff_from {
        Some(path) => Some(fold(path, arguments)?),
        None => None,
    };
    let options = FlameGraphOptions {
        title: arguments.title.clone(),
        count_name: if !arguments.samples {
            "events"
        } else {
            "samples"
        }
        .to_owned(),
        ..FlameGraphOptions::default()
    };
    let render = |out: &mut dyn Write| -> Result<()> {
        let mut out = out;
        match (&before, arguments.folded) {
            (None, true) => out.write_all(after.to_text().as_bytes())?,
            (Some(before), true) => {
                out.write_all(FoldedStacks::differential_text(before, &after).as_bytes())?
            }
            (None, false) => write_flamegraph(&after, &options, &mut out)?,
            (Some(before), false) => {
                write_differential_flamegraph(before, &after, &options, &mut out)?
            }
        }
        Ok(())
    };
    if arguments.output == std::path::Path::new("-") {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        render(&mut out)?;
        out.flush()?;
        return Ok(());
    }
    write_atomically(&arguments.output, |out| render(out))
        .with_context(|| format!("cannot write {}", arguments.output.display()))
}

/// The folded stacks of one recording.
fn fold(input: &std::path::Path, arguments: &FlamegraphArgs) -> Result<FoldedStacks> {
    let reader = open(input)?;
    let call_stack_events = call_stack_events(&reader);
    let mut processes = Processes::for_recording(
        &reader,
        SymbolOptions {
            symfs: arguments.symfs.clone(),
            kallsyms: arguments.kallsyms.clone(),
            inlines: arguments.inline,
            ..SymbolOptions::default()
        },
    );
    let mut folded = FoldedStacks::new();
    let mut frames: Vec<String> = Vec::new();
    for_each_sample(
        &reader,
        file_size(input),
        &mut processes,
        |processes, attr, sample| {
            frames.clear();
            let pid = sample.pid.unwrap_or(-1) as u32;
            let tid = sample.tid.unwrap_or(-1) as u32;
            match arguments.split {
                Split::Command => frames.push(processes.comm(tid).to_owned()),
                Split::Process => frames.push(format!("{}-{pid}", processes.comm(tid))),
                Split::Thread => frames.push(format!("{}-{pid}/{tid}", processes.comm(tid))),
                Split::None => {}
            }
            let from_call_stack = attr.is_some_and(|index| call_stack_events[index]);
            let root = frames.len();
            for (address, leaf) in stack_addresses(sample, from_call_stack) {
                // A caller's address is a return address, just past its call: the call
                // itself is one byte earlier, which keeps it in the right function (and
                // line) when the call is the last instruction of a block or function.
                let lookup = if leaf {
                    address
                } else {
                    address.saturating_sub(1)
                };
                processes.push_frame_names(pid, lookup, &mut frames);
            }
            // Collected leaf first; folded stacks are root first.
            frames[root..].reverse();
            let weight = if !arguments.samples {
                sample.period.unwrap_or(1)
            } else {
                1
            };
            folded.add(frames.iter().map(String::as_str), weight);
            Ok(())
        },
    )?;
    processes.report_problems();
    // The caches die with the process: freeing them one by one costs a twentieth of
    // the run on a large recording.
    std::mem::forget(processes);
    Ok(folded)
}

/// The addresses of a sample's stack, leaf first, each with whether it is the leaf.
fn stack_addresses(sample: &Sample, from_call_stack: bool) -> Vec<(u64, bool)> {
    let mut addresses = Vec::new();
    let user_callchain: Vec<u64> = sample
        .callchain
        .iter()
        .copied()
        .filter(|&address| address < PERF_CONTEXT_MAX)
        .collect();
    if !user_callchain.is_empty() {
        // The kernel puts the sampled ip first in the callchain.
        for (index, address) in user_callchain.into_iter().enumerate() {
            addresses.push((address, index == 0));
        }
        return addresses;
    }
    if let Some(ip) = sample.ip {
        addresses.push((ip, true));
    }
    if from_call_stack {
        // CTR call-stack mode (RAS emulation): the entries are the calls still open,
        // innermost first; each call site is a frame of the caller. Its source is the
        // call instruction itself, not a return address, so no adjustment applies.
        if let Some(stack) = &sample.branch_stack {
            for entry in &stack.entries {
                addresses.push((entry.from, true));
            }
        }
    }
    addresses
}

/// For each event of the file, whether its branch stacks are call stacks
/// (PERF_SAMPLE_BRANCH_CALL_STACK).
fn call_stack_events(reader: &PerfDataReader<'_>) -> Vec<bool> {
    reader
        .attrs()
        .iter()
        .map(|attr| {
            attr.attr
                .branch_sample_format
                .contains(linux_perf_event_reader::BranchSampleFormat::CALL_STACK)
        })
        .collect()
}
