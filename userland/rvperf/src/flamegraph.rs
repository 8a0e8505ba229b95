//! `rvperf flamegraph`: folded stacks and flame graph SVGs (drawn by inferno) from the
//! samples of a perf.data file: callchains (`-g`), or CTR call stacks
//! (`-j call_stack`) where callchains are missing, or the sampled function alone.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use perf_abi::sys::bindings as abi;
use perf_abi::Sample;
use perf_data::PerfDataReader;
use profiles::flamegraph::{write_differential_flamegraph, write_flamegraph, FlameGraphOptions};
use profiles::FoldedStacks;
use rustc_hash::FxHashMap;
use symbolize::{FileLocation, Symbolized};

use crate::output::write_atomically;
use crate::perf_input::{file_size, for_each_sample, open, thread_id, Processes, SymbolOptions};

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
///
/// Stacks are gathered as frame numbers and named once at the end: a recording has
/// hundreds of thousands of frames but a few thousand distinct stacks. Kernel
/// addresses (and any in no mapping) are named last too, so that the kernel's symbols
/// are read on another thread while the samples are walked.
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
    let mut folder = StackFolder::default();
    let mut stack: Vec<u32> = Vec::new();
    let mut addresses: Vec<(u64, bool)> = Vec::new();
    let mut root_name = String::new();
    for_each_sample(
        &reader,
        file_size(input),
        &mut processes,
        |processes, sampled| {
            let sample = &sampled.sample;
            stack.clear();
            let pid = sample.pid.unwrap_or(u32::MAX);
            let tid = sample.tid.unwrap_or(u32::MAX);
            let from_call_stack = sampled
                .attr_index
                .is_some_and(|index| call_stack_events[index]);
            stack_addresses(sample, from_call_stack, &mut addresses);
            for &(address, leaf) in &addresses {
                // A caller's address is a return address, just past its call: the call
                // itself is one byte earlier, which keeps it in the right function (and
                // line) when the call is the last instruction of a block or function.
                let lookup = if leaf {
                    address
                } else {
                    address.saturating_sub(1)
                };
                folder.push_frames(processes, pid, lookup, &mut stack);
            }
            root_name.clear();
            let comm = processes.comm(thread_id(sample.pid), thread_id(sample.tid));
            match arguments.split {
                Split::Command => root_name.push_str(comm),
                Split::Process => {
                    let _ = write!(root_name, "{comm}-{pid}");
                }
                Split::Thread => {
                    let _ = write!(root_name, "{comm}-{pid}/{tid}");
                }
                Split::None => {}
            }
            if arguments.split != Split::None {
                stack.push(folder.names.intern(&root_name));
            }
            // Collected leaf first; folded stacks are root first.
            stack.reverse();
            let weight = if !arguments.samples {
                sampled.period
            } else {
                1
            };
            folder.add(&stack, weight);
            Ok(())
        },
    )?;
    let folded = folder.finish(&mut processes);
    processes.report_problems();
    // The caches die with the process: freeing them one by one costs a twentieth of
    // the run on a large recording.
    std::mem::forget(processes);
    Ok(folded)
}

/// Frame names by number.
#[derive(Default)]
struct FrameNames {
    names: Vec<Rc<str>>,
    numbers: FxHashMap<Rc<str>, u32>,
}

impl FrameNames {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&number) = self.numbers.get(name) {
            return number;
        }
        let number = self.names.len() as u32;
        let name: Rc<str> = Rc::from(name);
        self.names.push(Rc::clone(&name));
        self.numbers.insert(name, number);
        number
    }
}

/// Frame numbers at or above this one stand for an address named at the end
/// ([`StackFolder::deferred`]).
const DEFERRED: u32 = 1 << 31;

/// Samples' stacks as frame numbers, summed per distinct stack.
#[derive(Default)]
struct StackFolder {
    names: FrameNames,
    /// The frame numbers at each file location, innermost first: a range of
    /// `located_frames`.
    located: FxHashMap<FileLocation, std::ops::Range<usize>>,
    located_frames: Vec<u32>,
    /// Kernel addresses and addresses in no mapping, with how often they were seen:
    /// their names do not depend on the process or the time.
    deferred: Vec<(u64, u64)>,
    deferred_numbers: FxHashMap<u64, u32>,
    stacks: FxHashMap<Box<[u32]>, u64>,
}

impl StackFolder {
    /// Appends the frame numbers at `address` of `pid` to `stack`, innermost first.
    fn push_frames(
        &mut self,
        processes: &mut Processes,
        pid: u32,
        address: u64,
        stack: &mut Vec<u32>,
    ) {
        let Some(location) = processes.symbolizer().locate(pid, address) else {
            let next = DEFERRED + self.deferred.len() as u32;
            let number = *self.deferred_numbers.entry(address).or_insert(next);
            if number == next {
                self.deferred.push((address, 0));
            }
            self.deferred[(number - DEFERRED) as usize].1 += 1;
            stack.push(number);
            return;
        };
        if let Some(range) = self.located.get(&location) {
            stack.extend_from_slice(&self.located_frames[range.clone()]);
            return;
        }
        let symbolized = processes.symbolizer().symbolize_location(location);
        let start = self.located_frames.len();
        for name in frame_names(&symbolized) {
            let number = self.names.intern(&name);
            self.located_frames.push(number);
        }
        let range = start..self.located_frames.len();
        stack.extend_from_slice(&self.located_frames[range.clone()]);
        self.located.insert(location, range);
    }

    fn add(&mut self, stack: &[u32], weight: u64) {
        match self.stacks.get_mut(stack) {
            Some(total) => *total = total.saturating_add(weight),
            None => {
                self.stacks.insert(stack.into(), weight);
            }
        }
    }

    /// Names the deferred addresses and spells out every stack.
    fn finish(mut self, processes: &mut Processes) -> FoldedStacks {
        // Root first, as the stacks are: each address's frames outermost first.
        let deferred: Vec<Vec<u32>> = std::mem::take(&mut self.deferred)
            .into_iter()
            .map(|(address, occurrences)| {
                let symbolized = processes
                    .symbolizer()
                    .symbolize_unmapped(address, occurrences);
                let mut numbers: Vec<u32> = frame_names(&symbolized)
                    .map(|name| self.names.intern(&name))
                    .collect();
                numbers.reverse();
                numbers
            })
            .collect();
        let mut folded = FoldedStacks::new();
        let mut frames: Vec<&str> = Vec::new();
        for (stack, weight) in &self.stacks {
            frames.clear();
            for &number in stack.iter() {
                if number >= DEFERRED {
                    let numbers = &deferred[(number - DEFERRED) as usize];
                    frames.extend(numbers.iter().map(|&n| &*self.names.names[n as usize]));
                } else {
                    frames.push(&self.names.names[number as usize]);
                }
            }
            folded.add(frames.iter().copied(), *weight);
        }
        folded
    }
}

/// The names of a symbolizer answer's frames, innermost inline frame first; `[dso]`
/// or `[unknown]` when no function is known.
fn frame_names(symbolized: &Symbolized) -> impl Iterator<Item = Cow<'_, str>> {
    let placeholder = symbolized.frames.is_empty().then(|| {
        if symbolized.dso.as_ref() == "[unknown]" {
            Cow::Borrowed("[unknown]")
        } else {
            Cow::Owned(format!(
                "[{}]",
                symbolized.dso.trim_start_matches('[').trim_end_matches(']')
            ))
        }
    });
    let functions = symbolized.frames.iter().map(|frame| {
        frame
            .function
            .as_deref()
            .map_or(Cow::Borrowed("[unknown]"), Cow::Borrowed)
    });
    placeholder.into_iter().chain(functions)
}

/// The addresses of a sample's stack, leaf first, each with whether it is the leaf.
fn stack_addresses(sample: &Sample<'_>, from_call_stack: bool, addresses: &mut Vec<(u64, bool)>) {
    addresses.clear();
    let user_callchain = sample
        .callchain
        .iter()
        .flat_map(|callchain| callchain.iter())
        .filter(|&address| address < PERF_CONTEXT_MAX);
    // The kernel puts the sampled ip first in the callchain.
    addresses.extend(
        user_callchain
            .enumerate()
            .map(|(index, address)| (address, index == 0)),
    );
    if !addresses.is_empty() {
        return;
    }
    if let Some(ip) = sample.ip {
        addresses.push((ip, true));
    }
    if from_call_stack {
        // CTR call-stack mode (RAS emulation): the entries are the calls still open,
        // innermost first; each call site is a frame of the caller. Its source is the
        // call instruction itself, not a return address, so no adjustment applies.
        if let Some(stack) = &sample.branch_stack {
            addresses.extend(stack.iter().map(|entry| (entry.from, true)));
        }
    }
}

/// For each event of the file, whether its branch stacks are call stacks
/// (PERF_SAMPLE_BRANCH_CALL_STACK).
fn call_stack_events(reader: &PerfDataReader<'_>) -> Vec<bool> {
    reader
        .attrs()
        .iter()
        .map(|attr| {
            attr.attr.branch_sample_type & u64::from(abi::PERF_SAMPLE_BRANCH_CALL_STACK) != 0
        })
        .collect()
}
