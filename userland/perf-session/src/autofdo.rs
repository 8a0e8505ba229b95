//! An AutoFDO profile of one binary from the branch stacks of a session (CTR through
//! rvperf_ctr, or any perf.data with PERF_SAMPLE_BRANCH_STACK).
//!
//! Branch stacks become fall-through ranges and branch counts (the LBR method) at the
//! binary's link-time addresses, found through the session's address spaces as of each
//! sample's time ([`count_branches`]); ranges become per-instruction counts over the
//! binary's instructions (RISC-V, or x86_64 for recordings with Intel's LBR), and those
//! are placed at their DWARF lines, discriminators and inline stacks
//! ([`build_profile`]): discriminators as the profile's compiler decodes them, and for
//! LLVM a 0 on every line of a sampled function that no sample reached, as
//! llvm-profgen writes. What could not be used is counted, for the caller to say.

use std::collections::BTreeSet;
use std::sync::Arc;

use code_image::{CodeImage, ImageError, InstructionSet, Machine};
use profiles::{
    build_sample_profile, Branch, BranchCountOptions, BranchCounts, Discriminators,
    PlacementOptions, PlacementStats, SampleProfile, SourceFrame,
};
use rustc_hash::FxHashMap;
use symbolize::{ObjectSymbolizer, SymbolizeError};

use crate::session::{Session, SessionError};

/// Why the binary cannot be profiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryError {
    #[error("cannot read {name}")]
    Object {
        name: String,
        #[source]
        source: SymbolizeError,
    },
    #[error("{name}: no DWARF debug info: AutoFDO places counts at source lines (build with -g or -gline-tables-only)")]
    NoDebugInfo { name: String },
    #[error("{name}: rvperf autofdo profiles riscv64 and x86_64 binaries (e_machine {machine})")]
    UnsupportedMachine { name: String, machine: u16 },
    #[error("cannot load the code of {name}")]
    Code {
        name: String,
        #[source]
        source: ImageError,
    },
}

/// The profiled binary: its debug info, and its code decoded by its ELF machine
/// (`code-image`'s instruction sets): all the profile needs of an instruction is its
/// length (to walk a fall-through range) and whether it is a call (whose return lands
/// after it).
#[derive(Debug)]
pub struct ProfiledBinary {
    /// The file name the recording's mappings are matched by.
    file_name: String,
    symbolizer: ObjectSymbolizer,
    image: CodeImage,
    machine: Machine,
}

impl ProfiledBinary {
    /// The binary `name` of `bytes`, which must have DWARF line info.
    pub fn load(name: &str, bytes: Arc<[u8]>) -> Result<Self, BinaryError> {
        let symbolizer =
            ObjectSymbolizer::new(name, bytes.clone()).map_err(|source| BinaryError::Object {
                name: name.to_owned(),
                source,
            })?;
        if !symbolizer.has_debug_info() {
            return Err(BinaryError::NoDebugInfo {
                name: name.to_owned(),
            });
        }
        let mut image = CodeImage::new();
        let machine = match code_image::load_any_elf(&mut image, name, &bytes, None) {
            Ok(elf) => elf.machine,
            Err(ImageError::UnsupportedMachine { machine, .. }) => {
                return Err(BinaryError::UnsupportedMachine {
                    name: name.to_owned(),
                    machine,
                })
            }
            Err(source) => {
                return Err(BinaryError::Code {
                    name: name.to_owned(),
                    source,
                })
            }
        };
        Ok(Self {
            file_name: file_name_of(name).to_owned(),
            symbolizer,
            image,
            machine,
        })
    }

    /// The file name mappings of the binary have in the recording.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// The name of its instruction set (`riscv64`, `x86_64`).
    pub fn machine_name(&self) -> &'static str {
        self.machine.name()
    }

    fn instruction_at(&self, address: u64) -> Option<code_image::Instruction> {
        self.machine.instruction_at(&self.image, address)
    }
}

fn file_name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Counts of what the profile could not use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    pub samples_without_branch_stack: u64,
    pub samples_outside_binary: u64,
    pub entries_outside_binary: u64,
}

/// Whether any process of the recording mapped the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryMapped {
    Mapped,
    NeverMapped,
}

/// The binary's build id against the recording's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildIdCheck {
    /// Equal, or one of them unknown.
    NotRefuted,
    /// Not the binary that ran.
    Differs { recorded: Vec<u8>, actual: Vec<u8> },
}

/// The branch stacks of a session, at the binary's link-time addresses.
#[derive(Debug)]
pub struct BranchSamples {
    pub counts: BranchCounts,
    /// Samples read.
    pub samples: u64,
    pub skipped: Skipped,
    pub mapped: BinaryMapped,
    pub build_id: BuildIdCheck,
}

/// Reads the session to its end: each sample's branch stack becomes ranges and branch
/// counts of the binary; an entry leaving or entering the binary (a library call, a
/// trap) cuts the stack there.
pub fn count_branches(
    session: &mut Session<'_>,
    binary: &ProfiledBinary,
) -> Result<BranchSamples, SessionError> {
    let mut counts = BranchCounts::new(BranchCountOptions::default());
    let mut skipped = Skipped::default();
    let mut samples = 0u64;
    let mut stack: Vec<Branch> = Vec::new();
    // Per file of the session: whether it is the binary (by file name).
    let mut is_binary: Vec<Option<bool>> = Vec::new();
    while let Some(sampled) = session.next_sample()? {
        let sample = &sampled.sample;
        samples = samples.saturating_add(1);
        let Some(branch_stack) = &sample.branch_stack else {
            skipped.samples_without_branch_stack =
                skipped.samples_without_branch_stack.saturating_add(1);
            continue;
        };
        let pid = sample.pid.unwrap_or(u32::MAX);
        let processes = &*session.processes();
        let mut to_vaddr = |address: u64| {
            let file = processes.mapped_file(pid, address)?;
            if file.index >= is_binary.len() {
                is_binary.resize(file.index + 1, None);
            }
            let binary_file = *is_binary[file.index]
                .get_or_insert_with(|| file_name_of(file.recorded) == binary.file_name);
            if !binary_file {
                return None;
            }
            binary.symbolizer.vaddr_of_offset(file.file_offset)
        };
        if sample.ip.and_then(&mut to_vaddr).is_none() {
            skipped.samples_outside_binary = skipped.samples_outside_binary.saturating_add(1);
        }
        stack.clear();
        for entry in branch_stack.iter() {
            match (to_vaddr(entry.from), to_vaddr(entry.to)) {
                (Some(from), Some(to)) => stack.push(Branch { from, to }),
                _ => {
                    skipped.entries_outside_binary =
                        skipped.entries_outside_binary.saturating_add(1);
                    counts.add_stack(stack.drain(..));
                }
            }
        }
        counts.add_stack(stack.drain(..));
    }
    // The build id the recording gives the binary's file name: from its header
    // (HEADER_BUILD_ID), else from the last MMAP2 record that carried one.
    let mut recorded_build_id = session
        .reader()
        .info()
        .build_ids
        .iter()
        .find(|entry| file_name_of(&entry.filename) == binary.file_name)
        .map(|entry| entry.build_id.clone());
    let mut mapped = BinaryMapped::NeverMapped;
    for file in session.processes().recorded_files() {
        if file_name_of(file.recorded) != binary.file_name {
            continue;
        }
        mapped = BinaryMapped::Mapped;
        if let Some(build_id) = file.build_id {
            recorded_build_id = Some(build_id.to_vec());
        }
    }
    let build_id = match (recorded_build_id, binary.symbolizer.build_id()) {
        (Some(recorded), Some(actual)) if recorded.as_slice() != actual => BuildIdCheck::Differs {
            recorded,
            actual: actual.to_vec(),
        },
        _ => BuildIdCheck::NotRefuted,
    };
    Ok(BranchSamples {
        counts,
        samples,
        skipped,
        mapped,
        build_id,
    })
}

/// Whose reading of discriminators and unreached lines the profile follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    /// LLVM keys positions by its own reading of discriminators, and llvm-profgen
    /// writes a 0 for every position of a sampled function no sample reached, which
    /// clang reads as cold rather than unknown.
    Llvm,
    /// GCC reads GCC's discriminators and create_gcov writes executed positions only.
    Gcc,
}

/// A profile and what went into it.
#[derive(Debug)]
pub struct BuiltProfile {
    pub profile: SampleProfile,
    /// The execution count of every instruction (link-time addresses).
    pub instruction_counts: FxHashMap<u64, u64>,
    pub stats: PlacementStats,
    /// Ranges that ran into bytes that are not instructions of the binary.
    pub broken_ranges: u64,
    /// Addresses whose DWARF could not be read.
    pub frame_errors: u64,
}

/// The sample profile of `counts` over `binary`.
pub fn build_profile(
    binary: &ProfiledBinary,
    counts: &BranchCounts,
    compiler: Compiler,
) -> BuiltProfile {
    let profiles::InstructionCounts {
        counts: instruction_counts,
        broken_ranges,
    } = counts.instruction_counts(|address| {
        binary
            .instruction_at(address)
            .map(|instruction| u64::from(instruction.length))
    });
    let mut frame_errors = 0u64;
    let mut placement = PlacementOptions::default();
    if compiler == Compiler::Llvm {
        placement.discriminators = Discriminators::Llvm;
        let (instructions, errors) = instructions_of_sampled_functions(binary, counts);
        placement.unreached_instructions = instructions;
        frame_errors = frame_errors.saturating_add(errors);
    }
    let mut frame_cache: FxHashMap<u64, Vec<SourceFrame>> = FxHashMap::default();
    let mut frames = |address: u64| -> Vec<SourceFrame> {
        frame_cache
            .entry(address)
            .or_insert_with(|| match binary.symbolizer.frames(address) {
                Ok(frames) => source_frames(&frames),
                Err(_) => {
                    frame_errors = frame_errors.saturating_add(1);
                    Vec::new()
                }
            })
            .clone()
    };
    let (profile, stats) = build_sample_profile(
        &instruction_counts,
        &counts.branches,
        &mut frames,
        |address| {
            binary
                .instruction_at(address)
                .is_some_and(|instruction| instruction.flow.is_call())
        },
        &placement,
    );
    BuiltProfile {
        profile,
        instruction_counts,
        stats,
        broken_ranges,
        frame_errors,
    }
}

/// The DWARF function ranges of a longer extent are taken for broken debug info and
/// left out of the zero positions, rather than walked byte by byte.
const MAX_FUNCTION_RANGE_BYTES: u64 = 16 << 20;

/// Every instruction of every function a counted fall-through range starts in (its
/// DWARF address ranges, all parts of a split function): the instructions llvm-profgen
/// gives a 0 when no sample reached them. Also the number of DWARF errors met.
fn instructions_of_sampled_functions(
    binary: &ProfiledBinary,
    counts: &BranchCounts,
) -> (Vec<u64>, u64) {
    let mut starts: Vec<u64> = counts.ranges.keys().map(|range| range.first).collect();
    starts.sort_unstable();
    starts.dedup();
    let mut walked: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut instructions = Vec::new();
    let mut errors = 0u64;
    for start in starts {
        let ranges = match binary.symbolizer.function_ranges(start) {
            Ok(ranges) => ranges,
            Err(_) => {
                errors = errors.saturating_add(1);
                continue;
            }
        };
        for range in ranges {
            if range.end.saturating_sub(range.start) > MAX_FUNCTION_RANGE_BYTES
                || !walked.insert((range.start, range.end))
            {
                continue;
            }
            instructions.extend(binary.machine.instruction_addresses(&binary.image, range));
        }
    }
    (instructions, errors)
}

/// The profile's view of a symbolizer's inline stack: names as the compiler links
/// them, lines and discriminators; frames without a line cannot be placed.
fn source_frames(frames: &[symbolize::Frame]) -> Vec<SourceFrame> {
    let mut stack = Vec::with_capacity(frames.len());
    for frame in frames {
        let (Some(name), Some(line)) = (
            frame.linkage_name.as_ref().or(frame.function.as_ref()),
            frame.line,
        ) else {
            return Vec::new();
        };
        stack.push(SourceFrame {
            linkage_name: name.clone(),
            line,
            discriminator: frame.discriminator,
            function_start_line: frame.function_start_line.unwrap_or(line),
        });
    }
    stack
}
