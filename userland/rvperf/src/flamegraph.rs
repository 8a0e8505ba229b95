//! `rvperf flamegraph`: folded stacks and flame graph SVGs (drawn by inferno) from the
//! samples of a perf.data file: callchains (`-g`), or CTR call stacks
//! (`-j call_stack`) where callchains are missing, or the sampled function alone; or
//! from an N-Trace (`--trace`, or `-i` of an `rvperf trace record` perf.data): every
//! instruction, under the call stack it ran in.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use perf_session::{FoldOptions, InlineFrames, Session, SymbolOptions, TraceFoldOptions, Weight};
use profiles::flamegraph::{write_differential_flamegraph, write_flamegraph, FlameGraphOptions};
use profiles::{FoldedStacks, StackWeight, StopsKeepStacks};

use crate::output::write_atomically;
use crate::perf_file::{finish_reading, open, show_progress, warn_problems, SymbolArgs};
use crate::trace_file::TraceFile;
use crate::trace_input::{decode_trace, CodeCache, JobsArgs, TraceArgs, TraceInput};

/// What a stack's width counts in a flame graph of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceWeight {
    /// Instructions retired.
    Insns,
    /// Trace timestamp units (needs a trace with timestamps), shared among the stacks
    /// that ran between two timestamps by their instructions.
    Time,
}

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
    #[command(flatten)]
    symbols: SymbolArgs,
    #[command(flatten)]
    threads: crate::trace_recording::ThreadFilter,
    /// Show inlined functions as frames of their own (from DWARF; slower).
    #[arg(long)]
    inline: bool,
    /// The SVG's title.
    #[arg(long, default_value = "Flame Graph")]
    title: String,
    /// With --trace FILE (and --elf): an N-Trace drawn instead of a perf.data, every
    /// instruction it ran under the call stack it ran in, reconstructed from its
    /// calls, returns and traps; frames already on the stack when the trace began are
    /// under one `[unknown caller]` root.
    #[command(flatten)]
    trace_input: TraceArgs,
    /// What a stack's width counts in a flame graph of a trace.
    #[arg(long, value_enum, default_value = "insns")]
    weight: TraceWeight,
    /// Threads decoding a trace (default here: 1; see `trace_input::decode_trace`).
    #[command(flatten)]
    jobs: JobsArgs,
}

pub fn run(arguments: &FlamegraphArgs) -> Result<()> {
    let recording = arguments.trace_input.trace.is_none()
        && crate::trace_recording::is_recording(&arguments.input)?;
    let traced = arguments.trace_input.trace.is_some() || recording;
    if traced && (arguments.diff_from.is_some() || arguments.samples) {
        bail!("a trace is drawn whole: --diff-from and --samples are for sampled perf.data");
    }
    if !traced && arguments.weight != TraceWeight::Insns {
        bail!("--weight is for traces (--trace, or -i of an rvperf trace record perf.data)");
    }
    let after = match &arguments.trace_input.trace {
        Some(path) => {
            let trace = TraceInput::Messages(TraceFile::open(path)?);
            fold_trace(
                &arguments.trace_input,
                &trace,
                path,
                arguments,
                StopsKeepStacks::No,
                &mut CodeCache::default(),
            )?
        }
        None if recording => fold_recording(arguments)?,
        None => fold(&arguments.input, arguments)?,
    };
    let before = match &arguments.diff_from {
        Some(path) => Some(fold(path, arguments)?),
        None => None,
    };
    let options = FlameGraphOptions {
        title: arguments.title.clone(),
        count_name: match (traced, arguments.weight, arguments.samples) {
            (true, TraceWeight::Insns, _) => "instructions",
            (true, TraceWeight::Time, _) => "time units",
            (false, _, false) => "events",
            (false, _, true) => "samples",
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

fn symbol_options(arguments: &FlamegraphArgs) -> SymbolOptions {
    SymbolOptions {
        inlines: if arguments.inline {
            InlineFrames::Shown
        } else {
            InlineFrames::Outermost
        },
        ..arguments.symbols.options()
    }
}

/// The folded call stacks of an N-Trace (`input` says its encoder options and code).
fn fold_trace(
    input: &TraceArgs,
    trace: &TraceInput,
    path: &std::path::Path,
    arguments: &FlamegraphArgs,
    stops: StopsKeepStacks,
    codes: &mut CodeCache,
) -> Result<FoldedStacks> {
    let weight = match arguments.weight {
        TraceWeight::Insns => StackWeight::Instructions,
        TraceWeight::Time if !input.timestamps => {
            bail!("--weight time needs a trace with timestamps (--timestamps)")
        }
        TraceWeight::Time => StackWeight::Time,
    };
    let code = codes.code_for(input)?;
    let fold = decode_trace(
        input,
        arguments.jobs.for_profiles(),
        &code,
        trace,
        path,
        |source| {
            Ok(perf_session::fold_trace(
                source,
                &code,
                // The code's files are found already (a recording's under --symfs).
                SymbolOptions {
                    symfs: None,
                    ..symbol_options(arguments)
                },
                TraceFoldOptions::new(weight).with_stops(stops),
            )?)
        },
    )?;
    warn_problems(&fold.processes);
    let statistics = fold.statistics;
    if statistics.instructions_without_time > 0 && weight == StackWeight::Time {
        eprintln!(
            "rvperf: warning: {} of {} instructions ran before a hart's first timestamp, after its last or before a gap: they have no time and are not shown",
            statistics.instructions_without_time, statistics.instructions
        );
    }
    if statistics.unmatched_returns > 0 {
        eprintln!(
            "rvperf: note: {} returns matched no open call (longjmp or a rewritten return address); their stacks were cut to the function they returned into",
            statistics.unmatched_returns
        );
    }
    Ok(fold.folded)
}

/// The folded stacks of an N-Trace recording: each process's under a root frame as
/// --split says (none when the trace could not be split by process).
fn fold_recording(arguments: &FlamegraphArgs) -> Result<FoldedStacks> {
    let loaded = crate::trace_recording::load(
        &arguments.input,
        arguments.symbols.symfs.as_deref(),
        &arguments.trace_input,
        &arguments.threads,
    )?;
    let mut merged = FoldedStacks::new();
    let mut codes = loaded.codes;
    for loaded_trace in &loaded.traces {
        let folded = fold_trace(
            &loaded_trace.arguments,
            &loaded_trace.trace,
            &arguments.input,
            arguments,
            loaded_trace.stops,
            &mut codes,
        )?;
        let root = match (arguments.split, &loaded_trace.thread) {
            (Split::None, _) | (_, None) => None,
            (Split::Command, Some(thread)) => Some(thread.comm.clone()),
            (Split::Process, Some(thread)) => Some(format!("{}-{}", thread.comm, thread.run.pid)),
            (Split::Thread, Some(thread)) => {
                Some(format!("{}-{}/{}", thread.comm, thread.run.pid, thread.tid))
            }
        };
        for (stack, weight) in folded.sorted() {
            merged.add(root.as_deref().into_iter().chain(stack.split(';')), weight);
        }
    }
    Ok(merged)
}

/// The folded stacks of one recording.
fn fold(input: &std::path::Path, arguments: &FlamegraphArgs) -> Result<FoldedStacks> {
    let reader = open(input)?;
    let mut session = Session::new(&reader, symbol_options(arguments));
    show_progress(&mut session, input);
    let split = match arguments.split {
        Split::Command => perf_session::Split::Command,
        Split::Process => perf_session::Split::Process,
        Split::Thread => perf_session::Split::Thread,
        Split::None => perf_session::Split::None,
    };
    let weight = if arguments.samples {
        Weight::Samples
    } else {
        Weight::Period
    };
    let folded = perf_session::fold(&mut session, FoldOptions::new(split, weight))?;
    finish_reading(&session, input);
    let processes = session.into_processes();
    warn_problems(&processes);
    // The caches die with the process: freeing them one by one costs a twentieth of
    // the run on a large recording.
    std::mem::forget(processes);
    Ok(folded)
}

/// The call stacks of an N-Trace (`--trace FILE`, or `input`, an `rvperf trace record`
/// perf.data) as `rvperf flamegraph --folded --split command` folds them, instructions
/// as weights: for `rvperf export`, which has no addresses of a trace's frames.
pub(crate) fn trace_stacks(
    input: &std::path::Path,
    trace_input: &TraceArgs,
    symbols: &SymbolArgs,
    threads: &crate::trace_recording::ThreadFilter,
    jobs: &JobsArgs,
    inline: bool,
) -> Result<FoldedStacks> {
    let arguments = FlamegraphArgs {
        input: input.to_owned(),
        output: PathBuf::from("-"),
        folded: true,
        split: Split::Command,
        diff_from: None,
        samples: false,
        symbols: symbols.clone(),
        threads: threads.clone(),
        inline,
        title: String::new(),
        trace_input: trace_input.clone(),
        weight: TraceWeight::Insns,
        jobs: jobs.clone(),
    };
    match &trace_input.trace {
        Some(path) => {
            let trace = TraceInput::Messages(TraceFile::open(path)?);
            fold_trace(
                trace_input,
                &trace,
                path,
                &arguments,
                StopsKeepStacks::No,
                &mut CodeCache::default(),
            )
        }
        None => fold_recording(&arguments),
    }
}
