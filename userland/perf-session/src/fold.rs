//! The collapse stage of a flame graph over a session: each sample's stack (its
//! callchain, else its CTR call stack with `-j call_stack`, else its sampled
//! function) named by the symbolizer and summed into [`FoldedStacks`], through
//! `profiles`'s [`StackCollapser`].

use std::borrow::Cow;
use std::fmt::Write as _;

use perf_abi::sys::bindings as abi;
use perf_abi::Sample;
use perf_data::PerfDataReader;
use profiles::{FoldedStacks, StackCollapser, StackSymbols};
use symbolize::{FileLocation, Symbolized, Symbolizer};

use crate::processes::thread_id;
use crate::session::{Session, SessionError};

/// What the root frame of each stack says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Split {
    /// The command name, one tower per command (inferno-collapse-perf's default).
    #[default]
    Command,
    /// `command-PID`: one tower per process.
    Process,
    /// `command-PID/TID`: one tower per thread.
    Thread,
    /// No root frame: all processes merged.
    None,
}

/// What a sample weighs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Weight {
    /// Its period, as inferno-collapse-perf weighs it: widths are then events, e.g.
    /// nanoseconds of cpu-clock.
    #[default]
    Period,
    /// One: widths are samples.
    Samples,
}

/// How [`fold`] folds. (Inlined frames are the session's symbol option.)
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct FoldOptions {
    pub split: Split,
    pub weight: Weight,
}

impl FoldOptions {
    pub fn new(split: Split, weight: Weight) -> Self {
        Self { split, weight }
    }
}

/// PERF_CONTEXT_* markers in callchains: at or above this value (-4095).
const PERF_CONTEXT_MAX: u64 = u64::MAX - 4094;

/// Reads the session to its end and folds its samples' stacks.
///
/// Kernel addresses (and any in no mapping) are named last, so that the kernel's
/// symbols are read on another thread while the samples are walked.
pub fn fold(session: &mut Session<'_>, options: FoldOptions) -> Result<FoldedStacks, SessionError> {
    let branch_stacks = branch_stack_kinds(session.reader());
    let mut collapser = StackCollapser::new();
    let mut addresses: Vec<StackAddress> = Vec::new();
    let mut root_name = String::new();
    while let Some(sampled) = session.next_sample()? {
        let sample = &sampled.sample;
        let pid = sample.pid.unwrap_or(u32::MAX);
        let tid = sample.tid.unwrap_or(u32::MAX);
        let kind = sampled
            .attr_index
            .and_then(|index| branch_stacks.get(index).copied())
            .unwrap_or(BranchStackKind::Branches);
        stack_addresses(sample, kind, &mut addresses);
        let processes = session.processes();
        let mut symbols = SymbolizerStacks {
            symbolizer: processes.symbolizer(),
        };
        for address in &addresses {
            collapser.push_address(&mut symbols, pid, address.lookup());
        }
        if options.split != Split::None {
            root_name.clear();
            let comm = processes.comm(thread_id(sample.pid), thread_id(sample.tid));
            // Writing to a String cannot fail.
            let _ = match options.split {
                Split::Command | Split::None => root_name.write_str(comm),
                Split::Process => write!(root_name, "{comm}-{pid}"),
                Split::Thread => write!(root_name, "{comm}-{pid}/{tid}"),
            };
            collapser.push_name(&root_name);
        }
        collapser.end_stack(match options.weight {
            Weight::Period => sampled.period,
            Weight::Samples => 1,
        });
    }
    let mut symbols = SymbolizerStacks {
        symbolizer: session.processes().symbolizer(),
    };
    Ok(collapser.finish(&mut symbols))
}

/// The symbolizer as the collapse stage asks it: file locations named once each.
pub(crate) struct SymbolizerStacks<'a> {
    pub(crate) symbolizer: &'a mut Symbolizer,
}

impl StackSymbols for SymbolizerStacks<'_> {
    type Location = FileLocation;

    fn locate(&mut self, pid: u32, address: u64) -> Option<FileLocation> {
        self.symbolizer.locate(pid, address)
    }

    fn located_frames(&mut self, location: &FileLocation, frame: &mut dyn FnMut(&str)) {
        let symbolized = self.symbolizer.symbolize_location(*location);
        for name in frame_names(&symbolized) {
            frame(&name);
        }
    }

    fn unlocated_frames(&mut self, address: u64, occurrences: u64, frame: &mut dyn FnMut(&str)) {
        let symbolized = self.symbolizer.symbolize_unmapped(address, occurrences);
        for name in frame_names(&symbolized) {
            frame(&name);
        }
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

/// What an event's branch stacks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BranchStackKind {
    /// Branches taken (or none recorded): not a stack.
    Branches,
    /// PERF_SAMPLE_BRANCH_CALL_STACK: the calls still open, innermost first.
    CallStack,
}

/// Each event's [`BranchStackKind`], by attr index.
pub(crate) fn branch_stack_kinds(reader: &PerfDataReader<'_>) -> Vec<BranchStackKind> {
    reader
        .attrs()
        .iter()
        .map(|attr| {
            if attr.attr.branch_sample_type & u64::from(abi::PERF_SAMPLE_BRANCH_CALL_STACK) != 0 {
                BranchStackKind::CallStack
            } else {
                BranchStackKind::Branches
            }
        })
        .collect()
}

/// An address of a sample's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StackAddress {
    pub(crate) address: u64,
    pub(crate) kind: AddressKind,
}

/// How a stack address is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressKind {
    /// The instruction itself: the sampled ip, or a call site of a CTR call stack.
    Instruction,
    /// A caller's return address, just past its call.
    ReturnAddress,
}

impl StackAddress {
    /// The address whose names the frame takes. A return address's call is one byte
    /// earlier, which keeps it in the right function (and line) when the call is the
    /// last instruction of a block or function.
    pub(crate) fn lookup(&self) -> u64 {
        match self.kind {
            AddressKind::Instruction => self.address,
            AddressKind::ReturnAddress => self.address.saturating_sub(1),
        }
    }
}

/// The addresses of a sample's stack, leaf first.
pub(crate) fn stack_addresses(
    sample: &Sample<'_>,
    kind: BranchStackKind,
    addresses: &mut Vec<StackAddress>,
) {
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
            .map(|(index, address)| StackAddress {
                address,
                kind: if index == 0 {
                    AddressKind::Instruction
                } else {
                    AddressKind::ReturnAddress
                },
            }),
    );
    if !addresses.is_empty() {
        return;
    }
    if let Some(ip) = sample.ip {
        addresses.push(StackAddress {
            address: ip,
            kind: AddressKind::Instruction,
        });
    }
    if kind == BranchStackKind::CallStack {
        // CTR call-stack mode (RAS emulation): the entries are the calls still open,
        // innermost first; each call site is a frame of the caller. Its source is the
        // call instruction itself, not a return address, so no adjustment applies.
        if let Some(stack) = &sample.branch_stack {
            addresses.extend(stack.iter().map(|entry| StackAddress {
                address: entry.from,
                kind: AddressKind::Instruction,
            }));
        }
    }
}
